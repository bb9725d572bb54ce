"""The divergences stage: one positives table in, its ranking groups of divergences out.

:func:`make_divergences` runs these named steps, in order:

1. :func:`clean_seeds`: normalize and de-duplicate the positives (the seeds);
2. :func:`parse_seeds`: tokenize, tag and parse both sides with spaCy; drop seeds too short or
   too long to perturb;
3. :func:`word_align`: word-align each language's seeds at once (eflomal or fastalign);
4. :func:`load_resources`: phrase indexes per language, WordNet and the LM;
5. :func:`generate`: per seed, the equivalent row and the variants of each type (lexical
   substitution, phrase replacement, subtree deletion); every variant carries its EQ/DIV token
   tags (:func:`~parasim.divergences.tags.make_tags`) and becomes a row of
   :data:`DIVERGENCES_SCHEMA`;
6. :func:`check_rows`: the validity checks; a phrase replacement that fails only the POS
   re-check takes its seed's next spare;
7. :func:`assemble`: the table; the stage's counts go to its :class:`~parasim.stats.Recorder`.

:func:`write_site_card` writes a site's dataset card from its shards' stats (the divergences'
`.done` target: ``parasim summarize --extra card=PATH``).

See :mod:`parasim.divergences` for what the divergences are.
"""

from __future__ import annotations

import itertools
import logging
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from .. import explain
from ..config import Settings
from ..io import DIVERGENCES_SCHEMA, POSITIVES_SCHEMA, rows_to_table, stable_id
from ..spec import Stage
from ..stats import Recorder, Stats
from .checks import check_pos, check_row, summarize
from .lexical import TYPE as LEXICAL
from .phrase import TYPE as PHRASE
from .phrase import PhraseIndex, phrase_replacements
from .subtree import TYPE as SUBTREE
from .subtree import subtree_deletions
from .tags import (
    Parsed,
    Variant,
    detokenize,
    load_spacy,
    make_tags,
    normalize_space,
    parse_texts,
    tokens_only,
)
from .wordalign import align_fastalign_intersection, align_intersection, read_parallel

EQUIVALENT = "equivalent"
#: Ranking order of seed 000 §3.2: finer edits rank higher (0 is the best, the seed itself).
TYPES = (EQUIVALENT, LEXICAL, PHRASE, SUBTREE)
RANK = {t: i for i, t in enumerate(TYPES)}


@dataclass(frozen=True)
class DivergencesSettings(Settings, section="divergences"):
    """The ``divergences`` config section (what each key means: the schema)."""

    seed: int
    types: tuple[str, ...]
    per_type: int  # variants per type (lexical: per WordNet relation) and seed
    sides: tuple[str, ...]  # phrase replacement / subtree deletion edit either side
    lexical_relations: tuple[str, ...]  # generalization and particularization
    min_tokens: int  # shortest English seed, in tokens
    min_other_tokens: int
    max_tokens: int
    phrase_min_len: int
    phrase_max_len: int
    # Spare phrase replacements kept per seed: a variant whose re-tagging breaks the POS sequence
    # (check pos_match / retokenized) is swapped for the next spare that passes.
    phrase_spares: int
    lm: str  # "smollm2" | "none" | HF name/path, optionally "causal:"/"masked:" prefix
    lm_max_candidates: int  # most frequent WordNet candidates the LM compares
    lm_window: int | None  # causal LM: None scores the whole sentence; n: n tokens after the word
    lm_threads: int | None
    lm_device: str  # "auto" (CUDA when present) | "cpu" | "cuda"
    lm_dtype: str  # "auto": bfloat16 where the hardware has it natively, else float32
    # Causal LMs: rank every candidate list of the shard ahead in padded batches of this many
    # tokens; 0: one word's candidates at a time (shared-prefix cache). "auto": 32768 on CUDA
    # (60-100x faster there), 0 on the CPU (where both run at the same speed).
    lm_batch_tokens: int | str
    wordnet_max_senses: int
    spacy: Mapping[str, Sequence[str]]  # per language: spaCy packages, first loadable wins
    align_extra: Mapping[str, Sequence[Sequence[str]]]  # per language: [[en, other], ...] files
    align_extra_max: int  # sentence pairs read from align_extra, per language
    eflomal_samplers: int
    # "eflomal" (best links; run seeded with `seed`, see wordalign.py) or "fastalign" (IBM 1 +
    # diagonal prior by EM in Python: weaker links, deterministic without a C compiler).
    word_aligner: str


Aligner = Callable[..., list]
#: Checks a spare phrase replacement can fix (the re-tagged variant breaks the POS sequence).
POS_CHECKS = {"pos_match", "retokenized"}


def _spans(spans) -> list[dict]:
    return [{"start": s, "end": e} for s, e in spans]


def _row(seed: dict, v: Variant, variant: int, links=None) -> dict:
    return {
        "id": stable_id(seed["id"], v.type, v.side, str(variant)),
        "group_id": stable_id("divergences", seed["id"]),
        "seed_id": seed["id"],
        "pair_id": seed.get("pair_id"),
        "site": seed.get("site"),
        "lang_pair": seed.get("lang_pair"),
        "other_lang": seed["other_lang"],
        "type": v.type,
        "rank": RANK[v.type],
        "side": v.side,
        "variant": variant,
        "en_text": detokenize(v.en_tokens, v.en_ws),
        "other_text": detokenize(v.other_tokens, v.other_ws),
        "en_tokens": v.en_tokens,
        "other_tokens": v.other_tokens,
        "en_tags": v.en_tags,
        "other_tags": v.other_tags,
        "src_spans": _spans(v.src_spans),
        "new_spans": _spans(v.new_spans),
        "orig_word": v.orig_word,
        "new_word": v.new_word,
        "wn_relation": v.wn_relation,
        "wn_synset": v.wn_synset,
        "lm_score": v.lm_score,
        "source_id": v.source_id,
        "alignment": (None if links is None else [{"en": i, "other": j} for i, j in sorted(links)]),
        "checks_failed": [],
    }


def _equivalent(en: Parsed, other: Parsed) -> Variant:
    return Variant(
        type=EQUIVALENT,
        side="none",
        en_tokens=list(en.tokens),
        en_ws=list(en.ws),
        other_tokens=list(other.tokens),
        other_ws=list(other.ws),
        en_tags=make_tags(len(en), ()),
        other_tags=make_tags(len(other), ()),
        src_spans=[],
        new_spans=[],
    )


def _extra_corpus(cfg: DivergencesSettings, lang: str, nlp_en, nlp_other) -> tuple[list, list]:
    src: list[list[str]] = []
    trg: list[list[str]] = []
    limit = int(cfg.align_extra_max)
    for en_path, other_path in cfg.align_extra.get(lang, []):
        if len(src) >= limit:
            break
        en, other = read_parallel(en_path, other_path, limit=limit - len(src))
        src += tokens_only(nlp_en, [normalize_space(t) for t in en])
        trg += tokens_only(nlp_other, [normalize_space(t) for t in other])
    return src, trg


@dataclass
class Shard:
    """One shard on its way through the steps: its seeds, their parses and links, the timings."""

    cfg: DivergencesSettings
    log: logging.Logger
    nlp: dict  # spaCy pipelines by language (loaded on first use)
    rec: Recorder  # the stage's counts: rows in (positives) and out, seeds dropped by reason
    seeds: list[dict] = field(default_factory=list)  # cleaned, de-duplicated positives
    en: list[Parsed] = field(default_factory=list)  # per seed
    other: list[Parsed | None] = field(default_factory=list)  # per seed
    kept: list[int] = field(default_factory=list)  # seeds long enough to perturb
    kept_by_lang: dict[str, list[int]] = field(default_factory=dict)
    links: dict[int, frozenset] = field(default_factory=dict)  # seed -> word-alignment links
    n_extra: dict[str, int] = field(default_factory=dict)  # extra parallel pairs per language
    reproducible: bool | None = None  # whether the links come out the same on every run
    # the steps' timings (the rates of the variants are of them); recorded by :func:`assemble`
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))

    @property
    def types(self) -> list[str]:
        return [t for t in (LEXICAL, PHRASE, SUBTREE) if t in self.cfg.types]

    def get_nlp(self, lang: str):
        if lang not in self.nlp:
            self.nlp[lang] = load_spacy(lang, self.cfg.spacy.get(lang))
        return self.nlp[lang]

    def type_rng(self, k: int, typ: str) -> random.Random:
        """The seeded generator of seed ``k``'s variants of type ``typ``."""
        return random.Random(f"{self.cfg.seed}:{self.seeds[k]['id']}:{typ}")


@dataclass
class Resources:
    """What the generators share across seeds (step 4)."""

    en_index: PhraseIndex | None = None
    other_index: dict[str, PhraseIndex] | None = None
    lexicon: Any = None
    scorer: Any = None
    lm_name: str | None = None


@dataclass
class Generated:
    """The rows of step 5, before the checks."""

    rows: list[dict] = field(default_factory=list)
    row_seed: list[int] = field(default_factory=list)  # the seed of each row
    spares: dict[str, list[Variant]] = field(default_factory=dict)  # seed id -> spare phrases
    n_variants: Counter = field(default_factory=Counter)
    skipped: dict[str, Counter] = field(default_factory=dict)  # type -> reason -> seeds
    lm_prescored: Any = None


def clean_seeds(sh: Shard, rows: list[dict]) -> None:
    """Step 1: normalize whitespace and language codes; drop duplicate ids and empty seeds."""
    seen: set[str] = set()
    for r in rows:
        if r["id"] in seen:
            sh.rec.drop("duplicate_id")
            continue
        seen.add(r["id"])
        r["en_text"] = normalize_space(r.get("en_text") or "")
        r["other_text"] = normalize_space(r.get("other_text") or "")
        r["other_lang"] = (r.get("other_lang") or "").lower()
        if not r["en_text"] or not r["other_text"]:
            sh.rec.drop("empty_text")
            continue
        if not r["other_lang"]:
            sh.rec.drop("no_other_lang")
            continue
        sh.seeds.append(r)


def parse_seeds(sh: Shard) -> None:
    """Step 2: tokenize, tag and parse both sides; drop seeds too short or too long to perturb."""
    cfg, seeds = sh.cfg, sh.seeds
    t0 = time.perf_counter()
    sh.en = parse_texts(sh.get_nlp("en"), [s["en_text"] for s in seeds]) if seeds else []
    sh.other = [None] * len(seeds)
    by_lang: dict[str, list[int]] = defaultdict(list)
    for k, s in enumerate(seeds):
        by_lang[s["other_lang"]].append(k)
    for lang, ks in sorted(by_lang.items()):
        parsed = parse_texts(sh.get_nlp(lang), [seeds[k]["other_text"] for k in ks])
        for k, p in zip(ks, parsed, strict=True):
            sh.other[k] = p
    for k in range(len(seeds)):
        n_en, n_other = len(sh.en[k]), len(sh.other[k])
        if n_en < cfg.min_tokens or n_other < cfg.min_other_tokens:
            sh.rec.drop("too_short")
        elif max(n_en, n_other) > cfg.max_tokens:
            sh.rec.drop("too_long")
        else:
            sh.kept.append(k)
    sh.seconds["parse"] = time.perf_counter() - t0
    sh.log.info("divergences: %d positives, %d seeds kept", sh.rec.rows_in, len(sh.kept))


def word_align(sh: Shard, aligner: Aligner | None) -> None:
    """Step 3: word-align each language's seeds at once (plus any extra parallel text)."""
    cfg = sh.cfg
    t0 = time.perf_counter()
    kept_by_lang: dict[str, list[int]] = defaultdict(list)
    for k in sh.kept:
        kept_by_lang[sh.seeds[k]["other_lang"]].append(k)
    sh.kept_by_lang = kept_by_lang
    # Whether the links come out the same on every run: fastalign always; eflomal when its seed
    # library could be built; unknown (None) for an aligner the caller passed in.
    if aligner is None and cfg.word_aligner == "fastalign":
        aligner, sh.reproducible = align_fastalign_intersection, True
    elif aligner is None:
        from .wordalign import urandom_shim

        sh.reproducible = urandom_shim() is not None

        def aligner(src, trg, extra_src, extra_trg):
            return align_intersection(
                src,
                trg,
                extra_src,
                extra_trg,
                n_samplers=cfg.eflomal_samplers,
                seed=cfg.seed,
            )

    for lang, ks in sorted(kept_by_lang.items()):
        extra_src, extra_trg = _extra_corpus(cfg, lang, sh.get_nlp("en"), sh.get_nlp(lang))
        sh.n_extra[lang] = len(extra_src)
        got = aligner(
            [list(sh.en[k].tokens) for k in ks],
            [list(sh.other[k].tokens) for k in ks],
            extra_src,
            extra_trg,
        )
        sh.links.update(zip(ks, got, strict=True))
    sh.seconds["align"] = time.perf_counter() - t0


def load_resources(sh: Shard, lexicon=None, scorer=None) -> Resources:
    """Step 4: phrase indexes per language, WordNet and the LM (only for the types asked for)."""
    cfg, seeds, kept = sh.cfg, sh.seeds, sh.kept
    res = Resources(lexicon=lexicon, scorer=scorer)
    if PHRASE in sh.types:
        lo, hi = cfg.phrase_min_len, cfg.phrase_max_len
        res.en_index = PhraseIndex([sh.en[k] for k in kept], [seeds[k]["id"] for k in kept], lo, hi)
        res.other_index = {
            lang: PhraseIndex([sh.other[k] for k in ks], [seeds[k]["id"] for k in ks], lo, hi)
            for lang, ks in sh.kept_by_lang.items()
        }
    if LEXICAL in sh.types and kept:
        t0 = time.perf_counter()
        if res.lexicon is None:
            from .lexical import WordNetLexicon

            res.lexicon = WordNetLexicon(max_senses=cfg.wordnet_max_senses)
        if res.scorer is None:
            from .lexical import load_scorer

            res.scorer = load_scorer(
                cfg.lm,
                threads=cfg.lm_threads,
                window=cfg.lm_window,
                device=cfg.lm_device,
                dtype=cfg.lm_dtype,
            )
        res.lm_name = res.scorer.name
        sh.seconds["load_lexical"] = time.perf_counter() - t0
    return res


def _lexical_gen(sh: Shard, res: Resources, k: int, scorer, reasons: dict) -> Iterator[Variant]:
    from .lexical import lexical_substitutions

    cfg = sh.cfg
    return lexical_substitutions(
        sh.en[k], sh.other[k], sh.links[k], sh.type_rng(k, LEXICAL), res.lexicon, scorer,
        relations=cfg.lexical_relations, per_relation=int(cfg.per_type),
        max_candidates=cfg.lm_max_candidates, reasons=reasons,
    )  # fmt: skip


def _prescore(sh: Shard, res: Resources) -> Any:
    """Rank every candidate list of the shard ahead in large batches, when the scorer can.

    One forward pass per word is latency-bound on a GPU (13 against 780-1,240 variants/s on an
    H100, BENCHMARKS.md); the generation loop then reads the scores. Returns the prescored scorer
    (None when not batched).
    """
    from .lexical import RecordingScorer, prescore

    batch_tokens = sh.cfg.lm_batch_tokens
    if batch_tokens == "auto":
        on_cuda = str(getattr(res.scorer, "device", "cpu")).startswith("cuda")
        batch_tokens = 32768 if on_cuda else 0
    if not (LEXICAL in sh.types and sh.kept and batch_tokens and hasattr(res.scorer, "score_many")):
        return None
    t0 = time.perf_counter()
    rec = RecordingScorer()
    want = int(sh.cfg.per_type) * len(sh.cfg.lexical_relations)
    for k in sh.kept:
        for _ in itertools.islice(_lexical_gen(sh, res, k, rec, {}), want):
            pass
    res.scorer = prescored = prescore(res.scorer, rec.calls, batch_tokens)
    ranked = time.perf_counter() - t0
    sh.seconds[LEXICAL] += ranked  # part of making the lexical variants (variants/s)
    sh.log.info("divergences: %d candidate lists ranked in %.1fs", len(rec.calls), ranked)
    return prescored


def _variants(sh: Shard, res: Resources, k: int, typ: str, out: Generated) -> list[Variant]:
    """Seed ``k``'s distinct variants of type ``typ`` (phrase replacement: spares set aside)."""
    cfg, seed = sh.cfg, sh.seeds[k]
    per_type = int(cfg.per_type)
    reasons: dict[str, int] = {}
    if typ == LEXICAL:
        want = per_type * len(cfg.lexical_relations)
        gen = _lexical_gen(sh, res, k, res.scorer, reasons)
    elif typ == PHRASE:
        want = per_type + int(cfg.phrase_spares)
        gen = phrase_replacements(
            seed["id"], sh.en[k], sh.other[k], sh.links[k], sh.type_rng(k, typ), res.en_index,
            res.other_index.get(seed["other_lang"]), sides=tuple(cfg.sides), reasons=reasons,
        )  # fmt: skip
    else:
        want = per_type
        gen = subtree_deletions(
            sh.en[k], sh.other[k], sh.links[k], sh.type_rng(k, typ), sides=tuple(cfg.sides),
            reasons=reasons,
        )  # fmt: skip
    t0 = time.perf_counter()
    got, keys = [], set()
    for v in gen:
        if v.key not in keys:
            keys.add(v.key)
            got.append(v)
        if len(got) >= want:
            break
    sh.seconds[typ] += time.perf_counter() - t0
    if typ == PHRASE:  # the first per_type are used, the rest are spares
        got, out.spares[seed["id"]] = got[:per_type], got[per_type:]
        want = per_type
    if len(got) < want:
        for reason in reasons or {"no_more_distinct_variants": 1}:
            out.skipped[typ][reason] += 1
    got.sort(key=lambda v: (v.side, v.wn_relation or ""))
    return got


def generate(sh: Shard, res: Resources) -> Generated:
    """Step 5: per seed, its ranking group: the equivalent row, then each type's variants."""
    out = Generated(skipped={t: Counter() for t in sh.types})
    out.lm_prescored = _prescore(sh, res)
    for done, k in enumerate(sh.kept):
        seed = sh.seeds[k]
        group = [_row(seed, _equivalent(sh.en[k], sh.other[k]), 0, links=sh.links[k])]
        for typ in sh.types:
            got = _variants(sh, res, k, typ, out)
            group += [_row(seed, v, i) for i, v in enumerate(got)]
            out.n_variants[typ] += len(got)
        if len(group) == 1:
            sh.rec.drop("no_variant")
            continue
        out.rows += group
        out.row_seed += [k] * len(group)
        if (done + 1) % 500 == 0:
            sh.log.info("divergences: %d/%d seeds perturbed", done + 1, len(sh.kept))
    return out


def _check_phrase_pos(sh: Shard, gen: Generated, indices: list[int]) -> None:
    """Re-tag phrase replacements that passed the other checks (pos_match / retokenized)."""
    rows_ok = [(i, gen.rows[i]) for i in indices if not gen.rows[i]["checks_failed"]]
    for side in ("en", "other"):
        langs = sorted({r["other_lang"] for _, r in rows_ok}) if side == "other" else ["en"]
        for lang in langs:
            sel = [
                (i, r)
                for i, r in rows_ok
                if r["side"] == side and (side == "en" or r["other_lang"] == lang)
            ]
            if not sel:
                continue
            parses = sh.en if side == "en" else sh.other
            seed_p = [parses[gen.row_seed[i]] for i, _ in sel]
            reparsed = parse_texts(sh.get_nlp(lang), [r[f"{side}_text"] for _, r in sel])
            for (_, r), bad in zip(
                sel, check_pos([r for _, r in sel], seed_p, reparsed), strict=True
            ):
                r["checks_failed"] = bad


def _next_spare(gen: Generated, r: dict, per_type: int) -> Variant | None:
    pool = gen.spares.get(r["seed_id"]) or []
    for j, v in enumerate(pool):  # same side keeps the row id unique within its group
        if v.side == r["side"] or per_type == 1:
            return pool.pop(j)
    return None


def check_rows(sh: Shard, res: Resources, gen: Generated) -> int:
    """Step 6: validity checks of every row; returns how many phrase spares were swapped in.

    A phrase replacement that failed only the POS re-check takes its seed's next spare, checked
    in turn.
    """
    t0 = time.perf_counter()
    for row, k in zip(gen.rows, gen.row_seed, strict=True):
        row["checks_failed"] = check_row(
            row, sh.en[k].tokens, sh.other[k].tokens, sh.links[k], lexicon=res.lexicon
        )
    phrase_rows = [i for i, r in enumerate(gen.rows) if r["type"] == PHRASE]
    todo = phrase_rows
    swapped = 0
    while todo:
        _check_phrase_pos(sh, gen, todo)
        todo = []
        for i in phrase_rows:
            r, k = gen.rows[i], gen.row_seed[i]
            if not r["checks_failed"] or not set(r["checks_failed"]) <= POS_CHECKS:
                continue
            spare = _next_spare(gen, r, int(sh.cfg.per_type))
            if spare is None:
                continue
            new = _row(sh.seeds[k], spare, r["variant"])
            new["checks_failed"] = check_row(
                new, sh.en[k].tokens, sh.other[k].tokens, sh.links[k], lexicon=res.lexicon
            )
            gen.rows[i] = new
            swapped += 1
            if not new["checks_failed"]:
                todo.append(i)
    sh.seconds["checks"] = time.perf_counter() - t0
    return swapped


def assemble(sh: Shard, res: Resources, gen: Generated, swapped: int) -> pa.Table:
    """Step 7: the divergences table; the stage's counts, figures and timings go to ``sh.rec``.

    Rows out: the divergence rows (a ranking group of several rows per seed kept); the counts
    add up over shards (``alignment``'s links and English tokens too: the card recomputes their
    ratio, and each type's valid share, from the sums).
    """
    cfg, kept, links, out_rows, rec = sh.cfg, sh.kept, sh.links, gen.rows, sh.rec
    table = rows_to_table(out_rows, DIVERGENCES_SCHEMA)
    by_type = Counter(r["type"] for r in out_rows)
    checks = summarize([(r["type"], r["checks_failed"]) for r in out_rows])
    n_links = sum(len(links[k]) for k in kept)
    n_en_tokens = sum(len(sh.en[k]) for k in kept)
    by_side = Counter(f"{r['type']}:{r['side']}" for r in out_rows)
    rec.rows_out += len(out_rows)
    rec.count("n_seeds", len(kept))
    rec.count("n_groups", by_type[EQUIVALENT])
    rec.count("rows_by_type", {t: by_type[t] for t in TYPES})
    rec.count("rows_by_side", dict(sorted(by_side.items())))
    rec.count("variant_missing", {t: dict(sorted(c.items())) for t, c in gen.skipped.items()})
    rec.count("phrase_spares_used", swapped)  # phrase replacements swapped after failing POS
    rec.count(
        "alignment",
        {
            "links": n_links,
            "en_tokens": n_en_tokens,
            "pairs_without_links": sum(1 for k in kept if not links[k]),
        },
    )
    rec.count(
        "checks", {t: {k: v for k, v in d.items() if k != "valid_share"} for t, d in checks.items()}
    )
    seconds = sh.seconds
    rec.figure("spacy", {lang: p.meta.get("parasim_model") for lang, p in sorted(sh.nlp.items())})
    rec.figure("lm", res.lm_name)
    # batched ranking: lists the loop asked for that were not ranked ahead (None: not batched)
    rec.figure("lm_prescore_misses", getattr(gen.lm_prescored, "misses", None))
    rec.figure(
        "variants_per_second",
        {
            t: round(gen.n_variants[t] / seconds[t], 2) if seconds.get(t, 0) > 0 else None
            for t in sh.types
        },
    )
    rec.figure("config", {k: v for k, v in asdict(cfg).items() if k != "spacy"})
    rec.figure(
        "alignment",
        {
            "links_per_en_token": round(n_links / max(1, n_en_tokens), 4),
            "extra_pairs": sh.n_extra,
            "aligner": cfg.word_aligner,
            "reproducible": sh.reproducible,
        },
    )
    rec.figure("checks", {t: {"valid_share": d["valid_share"]} for t, d in checks.items()})
    for step, value in seconds.items():
        rec.seconds(step, value)
    sh.log.info("divergences: rows by type %s", rec.counted("rows_by_type"))
    sh.log.info("divergences: seeds skipped %s", dict(sorted(rec.stats().dropped.items())))
    sh.log.info("divergences: variants missing %s", rec.counted("variant_missing"))
    return table


def make_divergences(
    positives: pa.Table,
    rec: Recorder,
    settings: DivergencesSettings | Mapping[str, Any] | None = None,
    log: logging.Logger | None = None,
    *,
    nlp: dict | None = None,
    lexicon=None,
    scorer=None,
    aligner: Aligner | None = None,
) -> pa.Table:
    """Perturb every positive pair into a ranking group of synthetic divergences.

    Args:
        positives: a table with the columns of ``POSITIVES_SCHEMA`` (at least ``id``,
            ``en_text``, ``other_text``, ``other_lang``); the whole table is word-aligned at once.
        rec: takes the stage's counts: rows in (the positives) and out (the divergence rows),
            the positives that gave no ranking group by reason (dropped: ``duplicate_id``,
            ``empty_text``, ``no_other_lang``, ``too_short``, ``too_long``, ``no_variant``),
            rows per type and side, variants missing by reason, the alignment's links and the
            validity checks (counts); the models, rates, shares and settings (figures); each
            step's seconds.
        settings: the ``divergences`` settings (a mapping: the section as in the config, keys
            left out take the schema's defaults).
        log: logger for progress and counts.
        nlp: spaCy pipelines by language, to reuse loaded models (missing ones are loaded).
        lexicon: a ``WordNetLexicon`` to reuse (loaded when lexical substitution is asked for).
        scorer: an LM scorer to reuse (default: ``load_scorer(settings.lm)``).
        aligner: ``f(src_tokens, trg_tokens, extra_src, extra_trg) -> links per pair``
            (default: eflomal, intersection of both directions).

    Returns:
        The rows of :data:`DIVERGENCES_SCHEMA`, ordered by seed (input order), rank, side and
        variant.

    Raises:
        ValueError: when required columns are missing or the settings are invalid.
    """
    cfg = DivergencesSettings.from_config(settings)
    need = {"id", "en_text", "other_text", "other_lang"}
    missing = need - set(positives.column_names)
    if missing:
        raise ValueError(f"make_divergences: positives lack columns {sorted(missing)}")
    keep_cols = ["id", "pair_id", "site", "lang_pair", "other_lang", "en_text", "other_text"]
    rows = positives.select([c for c in keep_cols if c in positives.column_names]).to_pylist()
    sh = Shard(cfg=cfg, log=log or logging.getLogger(__name__), nlp=dict(nlp or {}), rec=rec)
    rec.rows_in += len(rows)
    clean_seeds(sh, rows)
    parse_seeds(sh)
    word_align(sh, aligner)
    res = load_resources(sh, lexicon, scorer)
    gen = generate(sh, res)
    swapped = check_rows(sh, res, gen)
    return assemble(sh, res, gen, swapped)


def write_card(stats: dict, path: str | Path) -> None:
    """Write a Markdown dataset card (counts per type, skips, checks, config) to ``path``."""
    import json

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "# Synthetic divergences",
        "",
        "Seed equivalent pairs perturbed by lexical substitution (WordNet hypernym/hyponym, "
        "LM-ranked), phrase replacement (same tag sequence) and subtree deletion; EQ/DIV token "
        "tags from eflomal intersection alignments (seed 000 §3.2–3.4, seed 003 §3.2).",
        "",
        f"- positives read: {stats['n_positives']}; seeds perturbed: {stats['n_seeds']}; "
        f"ranking groups: {stats['n_groups']}; rows: {stats['n_rows']}",
        f"- language model: {stats['lm']}; spaCy: {stats['spacy']}",
        "",
        "| type | rank | rows | valid share |",
        "|---|---|---|---|",
    ]
    for t in TYPES:
        chk = stats["checks"].get(t, {})
        lines.append(
            f"| {t} | {RANK[t]} | {stats['rows_by_type'].get(t, 0)} | "
            f"{chk.get('valid_share', '')} |"
        )
    lines += ["", "## Counts", "", "```json", json.dumps(stats, indent=2, sort_keys=True), "```"]
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


def _first(stats: Sequence[Stats], key: str) -> Any:
    """The figure ``key`` of the first shard that has a (non-empty) one: a setting or a model
    (an empty shard loads none), else None."""
    return next((s.figures[key] for s in stats if s.figures.get(key)), None)


def site_counts(stats: Sequence[Stats], site: str | None = None) -> dict[str, Any]:
    """A site's divergences as its dataset card shows them: its shards' stats added up.

    The counts are summed (:meth:`Stats.total`); the ratios are recomputed from the sums: each
    type's ``checks.<type>.valid_share``, ``alignment.links_per_en_token`` and
    ``variants_per_second`` (rows per type over its seconds). The settings (``lm``, ``spacy``,
    ``config``) come from the first shard that has them; ``alignment.extra_pairs`` (the same
    extra corpus for every shard) is the largest per language, ``aligner`` the first shard's,
    ``reproducible`` whether every shard's links are; ``lm_prescore_misses`` is the first
    shard's, plus the other shards' when it is a number.

    Args:
        stats: the stats of the site's shards (stage ``divergences``), in shard order.
        site: the site's name.
    """
    total = Stats.total(stats)
    counts = total.counts
    out: dict[str, Any] = {
        "site": site,
        "shards": len(stats),
        "n_positives": total.rows_in,
        "n_rows": total.rows_out,
        "seed_skipped": dict(total.dropped),
        **{k: v for k, v in counts.items() if k not in ("alignment", "checks")},
        "lm": _first(stats, "lm"),
        "spacy": _first(stats, "spacy"),
        "config": _first(stats, "config"),
    }
    misses = [s.figures.get("lm_prescore_misses") for s in stats]
    if misses[0] is not None:
        misses[0] += sum(m for m in misses[1:] if m is not None)
    out["lm_prescore_misses"] = misses[0]
    out["checks"] = {
        t: {**d, "valid_share": round(d["valid"] / d["rows"], 4) if d.get("rows") else None}
        for t, d in counts.get("checks", {}).items()
    }
    al = dict(counts.get("alignment", {}))
    al.setdefault("links", 0)
    al.setdefault("en_tokens", 0)
    al.setdefault("pairs_without_links", 0)
    al["extra_pairs"] = {}
    for s in stats:
        fig = s.figures.get("alignment", {})
        for lang, n in fig.get("extra_pairs", {}).items():
            al["extra_pairs"][lang] = max(n, al["extra_pairs"].get(lang, 0))
        if "aligner" in fig:
            al.setdefault("aligner", fig["aligner"])
        if "reproducible" in fig:  # reproducible only when every shard is
            al["reproducible"] = al.get("reproducible", True) and fig["reproducible"]
    al["links_per_en_token"] = round(al["links"] / max(1, al["en_tokens"]), 4)
    out["alignment"] = al
    seconds = total.seconds
    out["variants_per_second"] = {
        t: round(counts.get("rows_by_type", {}).get(t, 0) / seconds[t], 2)
        if seconds.get(t)
        else None
        for t in (out["config"] or {}).get("types", [])
    }
    out["seconds"] = {k: round(v, 3) for k, v in seconds.items()}
    return out


def write_site_card(
    path: str | Path, shards: Sequence[str], stats: Sequence[Stats], site: str | None
) -> None:
    """The divergences' `.done` extra ``card`` (``parasim summarize --extra card=PATH``): the
    site's dataset card (:func:`write_card` of :func:`site_counts`).

    Args:
        path: the README.md to write.
        shards: the site's divergences shards.
        stats: their stats, one per shard.
        site: the site's name.
    """
    counts = {**site_counts(stats, site), "shards": len(shards)}
    write_card(counts, path)
    logging.getLogger("parasim.divergences").info(
        "card: %s (%d rows by type %s)", path, counts["n_rows"], counts.get("rows_by_type")
    )


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "divergences",
    rules=("make_divergences",),
    results=("divergences",),
    upstream="clean",
    per="shard",
    done="divergences",
    metric="rows_out",
    label="divergence rows",
    explain=explain.divergences,
    aliases={"make-divergences": ("divergences",)},
    done_extras={"card": "parasim.divergences.stage:write_site_card"},
    settings=DivergencesSettings,
    inputs={"input": POSITIVES_SCHEMA},
    outputs={"output": DIVERGENCES_SCHEMA},
    run=make_divergences,
)
