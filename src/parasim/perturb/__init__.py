"""Synthetic divergences of varying granularity, with token tags and ranking groups.

Seed 000 §3.2–3.4 (Divergent mBERT): each equivalent seed pair (a row of the positives) is
perturbed three ways, from the finest edit to the coarsest,

1. lexical substitution: one English word becomes a WordNet hypernym or hyponym (picked by an LM);
2. phrase replacement: a short span becomes a span with the same tags from another sentence;
3. subtree deletion: a dependency subtree (< half the sentence) is deleted, on the English side or,
   through the word alignment, on the other side;

and every token gets an EQ/DIV tag (seed §3.4): the inserted tokens are DIV, and so are the words
aligned (eflomal, intersection of both directions, seed 003 §3.2) to the removed or replaced
tokens on the other side. A seed and its variants form a ranking group, ordered
equivalent (rank 0) > lexical substitution (1) > phrase replacement (2) > subtree deletion (3),
from which :func:`contrastive_pairs` forms the (x > y) training pairs of the seed's §6 settings.

Stage function: :func:`make_divergences` (positives table in, divergences table + stats out);
:func:`write_card` writes the dataset card.
"""

from __future__ import annotations

import copy
import itertools
import logging
import random
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from ..io import SCHEMA_VERSION, rows_to_table, stable_id
from .checks import check_pos, check_row, summarize
from .lexical import TYPE as LEXICAL
from .phrase import TYPE as PHRASE
from .phrase import PhraseIndex, phrase_replacements
from .subtree import TYPE as SUBTREE
from .subtree import subtree_deletions
from .tags import (
    DEFAULT_SPACY,
    EQ,
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

_SPAN = pa.struct([pa.field("start", pa.int32()), pa.field("end", pa.int32())])
_LINK = pa.struct([pa.field("en", pa.int32()), pa.field("other", pa.int32())])

DIVERGENCES_SCHEMA = pa.schema(
    [
        pa.field("id", pa.string(), nullable=False),  # stable_id(seed_id, type, side, variant)
        pa.field("group_id", pa.string(), nullable=False),  # one ranking group per seed pair
        pa.field("seed_id", pa.string(), nullable=False),  # positives.id
        pa.field("pair_id", pa.string()),
        pa.field("site", pa.string()),
        pa.field("lang_pair", pa.string()),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),  # one of TYPES
        pa.field("rank", pa.int8(), nullable=False),  # 0 equivalent ... 3 subtree deletion
        pa.field("side", pa.string(), nullable=False),  # edited side: "en", "other", "none"
        pa.field("variant", pa.int32(), nullable=False),  # index among the group's rows of type
        pa.field("en_text", pa.string(), nullable=False),
        pa.field("other_text", pa.string(), nullable=False),
        pa.field("en_tokens", pa.list_(pa.string()), nullable=False),
        pa.field("other_tokens", pa.list_(pa.string()), nullable=False),
        pa.field("en_tags", pa.list_(pa.string()), nullable=False),  # "EQ"/"DIV" per token
        pa.field("other_tags", pa.list_(pa.string()), nullable=False),
        # Edited side: seed-token spans removed/replaced, variant-token spans inserted.
        pa.field("src_spans", pa.list_(_SPAN), nullable=False),
        pa.field("new_spans", pa.list_(_SPAN), nullable=False),
        pa.field("orig_word", pa.string()),  # lexical substitution: the replaced word
        pa.field("new_word", pa.string()),  # ... the substitute (inflected)
        pa.field("wn_relation", pa.string()),  # "hypernym" (generalization) / "hyponym"
        pa.field("wn_synset", pa.string()),  # synset the substitute was taken from
        pa.field("lm_score", pa.float32()),  # LM score of the chosen substitute
        pa.field("source_id", pa.string()),  # phrase replacement: seed id the phrase came from
        pa.field("alignment", pa.list_(_LINK)),  # seed links (equivalent rows only)
        pa.field("checks_failed", pa.list_(pa.string()), nullable=False),  # empty: valid
    ],
    metadata={"parasim.schema": "divergences", "parasim.schema_version": SCHEMA_VERSION},
)

#: The ``divergences:`` config section, with its defaults.
DEFAULT_CONFIG: dict = {
    "seed": 13,
    "types": [LEXICAL, PHRASE, SUBTREE],
    "per_type": 1,  # variants per type (lexical: per WordNet relation) and seed
    "sides": ["en", "other"],  # phrase replacement / subtree deletion edit either side
    "lexical_relations": ["hypernym", "hyponym"],  # generalization and particularization
    "min_tokens": 5,  # shortest English seed, in tokens
    "min_other_tokens": 3,
    "max_tokens": 80,
    "phrase_min_len": 2,
    "phrase_max_len": 4,
    # Spare phrase replacements kept per seed: a variant whose re-tagging breaks the POS sequence
    # (check pos_match / retokenized) is swapped for the next spare that passes.
    "phrase_spares": 3,
    "lm": "smollm2",  # "smollm2" | "none" | HF name/path, optionally "causal:"/"masked:" prefix
    "lm_max_candidates": 5,  # most frequent WordNet candidates the LM compares
    "lm_window": None,  # causal LM: None scores the whole sentence; n: n tokens after the word
    "lm_threads": None,
    "lm_device": "auto",  # "auto" (CUDA when present) | "cpu" | "cuda"
    "lm_dtype": "auto",  # "auto": bfloat16 where the hardware has it natively, else float32
    # Causal LMs: rank every candidate list of the shard ahead in padded batches of this many
    # tokens; 0: one word's candidates at a time (shared-prefix cache). "auto": 32768 on CUDA
    # (60-100x faster there), 0 on the CPU (where both run at the same speed).
    "lm_batch_tokens": "auto",
    "wordnet_max_senses": 2,
    "spacy": DEFAULT_SPACY,  # per language: spaCy package names, first loadable wins
    "align_extra": {},  # per language: [[en_path, other_path], ...] plain-text parallel corpora
    "align_extra_max": 20000,  # sentence pairs read from align_extra, per language
    "eflomal_samplers": 3,
    # "eflomal" (best links; run seeded with `seed`, see wordalign.py) or "fastalign" (IBM 1 +
    # diagonal prior by EM in Python: weaker links, deterministic without a C compiler).
    "word_aligner": "eflomal",
}

Aligner = Callable[..., list]
#: Checks a spare phrase replacement can fix (the re-tagged variant breaks the POS sequence).
POS_CHECKS = {"pos_match", "retokenized"}


def merged_config(cfg: dict | None) -> dict:
    """``DEFAULT_CONFIG`` updated with ``cfg`` (unknown keys raise ``ValueError``)."""
    out = copy.deepcopy(DEFAULT_CONFIG)
    unknown = set(cfg or {}) - set(out)
    if unknown:
        raise ValueError(f"divergences config: unknown keys {sorted(unknown)}")
    out.update(copy.deepcopy(cfg or {}))
    if out["word_aligner"] not in ("eflomal", "fastalign"):
        raise ValueError(
            f"divergences config: word_aligner {out['word_aligner']!r} is not eflomal or fastalign"
        )
    bt = out["lm_batch_tokens"]
    if bt != "auto" and (isinstance(bt, bool) or not isinstance(bt, int) or bt < 0):
        raise ValueError(f"divergences.lm_batch_tokens: 'auto' or an integer >= 0, not {bt!r}")
    bad = set(out["types"]) - {LEXICAL, PHRASE, SUBTREE}
    if bad:
        raise ValueError(f"divergences config: unknown types {sorted(bad)}")
    return out


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


def _extra_corpus(cfg: dict, lang: str, nlp_en, nlp_other) -> tuple[list, list]:
    src: list[list[str]] = []
    trg: list[list[str]] = []
    limit = int(cfg["align_extra_max"])
    for en_path, other_path in cfg["align_extra"].get(lang, []):
        if len(src) >= limit:
            break
        en, other = read_parallel(en_path, other_path, limit=limit - len(src))
        src += tokens_only(nlp_en, [normalize_space(t) for t in en])
        trg += tokens_only(nlp_other, [normalize_space(t) for t in other])
    return src, trg


def make_divergences(
    positives: pa.Table,
    cfg: dict | None = None,
    log: logging.Logger | None = None,
    *,
    nlp: dict | None = None,
    lexicon=None,
    scorer=None,
    aligner: Aligner | None = None,
) -> tuple[pa.Table, dict]:
    """Perturb every positive pair into a ranking group of synthetic divergences.

    Args:
        positives: a table with the columns of ``POSITIVES_SCHEMA`` (at least ``id``,
            ``en_text``, ``other_text``, ``other_lang``); the whole table is word-aligned at once.
        cfg: the ``divergences:`` config section (see :data:`DEFAULT_CONFIG`).
        log: logger for progress and counts.
        nlp: spaCy pipelines by language, to reuse loaded models (missing ones are loaded).
        lexicon: a ``WordNetLexicon`` to reuse (loaded when lexical substitution is asked for).
        scorer: an LM scorer to reuse (default: ``load_scorer(cfg["lm"])``).
        aligner: ``f(src_tokens, trg_tokens, extra_src, extra_trg) -> links per pair``
            (default: eflomal, intersection of both directions).

    Returns:
        ``(table, stats)``: rows of :data:`DIVERGENCES_SCHEMA`, ordered by seed (input order),
        rank, side and variant; ``stats`` counts rows per type, seeds and variants skipped by
        reason, validity checks and timings (JSON-serialisable).

    Raises:
        ValueError: when required columns are missing or the config is invalid.
    """
    cfg = merged_config(cfg)
    log = log or logging.getLogger(__name__)
    need = {"id", "en_text", "other_text", "other_lang"}
    missing = need - set(positives.column_names)
    if missing:
        raise ValueError(f"make_divergences: positives lack columns {sorted(missing)}")
    keep_cols = ["id", "pair_id", "site", "lang_pair", "other_lang", "en_text", "other_text"]
    rows = positives.select([c for c in keep_cols if c in positives.column_names]).to_pylist()
    types = [t for t in (LEXICAL, PHRASE, SUBTREE) if t in cfg["types"]]
    seed_skipped: Counter = Counter()
    skipped: dict[str, Counter] = {t: Counter() for t in types}
    seconds: dict[str, float] = defaultdict(float)
    nlp = dict(nlp or {})

    def get_nlp(lang: str):
        if lang not in nlp:
            nlp[lang] = load_spacy(lang, cfg["spacy"].get(lang))
        return nlp[lang]

    # 1. Clean and de-duplicate seeds.
    seeds: list[dict] = []
    seen: set[str] = set()
    for r in rows:
        if r["id"] in seen:
            seed_skipped["duplicate_id"] += 1
            continue
        seen.add(r["id"])
        r["en_text"] = normalize_space(r.get("en_text") or "")
        r["other_text"] = normalize_space(r.get("other_text") or "")
        r["other_lang"] = (r.get("other_lang") or "").lower()
        if not r["en_text"] or not r["other_text"]:
            seed_skipped["empty_text"] += 1
            continue
        if not r["other_lang"]:
            seed_skipped["no_other_lang"] += 1
            continue
        seeds.append(r)

    # 2. Tokenize, tag and parse both sides; drop seeds too short or too long to perturb.
    t0 = time.perf_counter()
    en_parses = parse_texts(get_nlp("en"), [s["en_text"] for s in seeds]) if seeds else []
    other_parses: list[Parsed | None] = [None] * len(seeds)
    by_lang: dict[str, list[int]] = defaultdict(list)
    for k, s in enumerate(seeds):
        by_lang[s["other_lang"]].append(k)
    for lang, ks in sorted(by_lang.items()):
        parsed = parse_texts(get_nlp(lang), [seeds[k]["other_text"] for k in ks])
        for k, p in zip(ks, parsed, strict=True):
            other_parses[k] = p
    kept = []
    for k in range(len(seeds)):
        n_en, n_other = len(en_parses[k]), len(other_parses[k])
        if n_en < cfg["min_tokens"] or n_other < cfg["min_other_tokens"]:
            seed_skipped["too_short"] += 1
        elif max(n_en, n_other) > cfg["max_tokens"]:
            seed_skipped["too_long"] += 1
        else:
            kept.append(k)
    seconds["parse"] = time.perf_counter() - t0
    log.info("divergences: %d positives, %d seeds kept", len(rows), len(kept))

    # 3. Word-align each language's seeds at once (plus any extra parallel text).
    t0 = time.perf_counter()
    links: dict[int, frozenset] = {}
    kept_by_lang: dict[str, list[int]] = defaultdict(list)
    for k in kept:
        kept_by_lang[seeds[k]["other_lang"]].append(k)
    # Whether the links come out the same on every run: fastalign always; eflomal when its seed
    # library could be built; unknown (None) for an aligner the caller passed in.
    reproducible = None
    if aligner is None and cfg["word_aligner"] == "fastalign":
        aligner, reproducible = align_fastalign_intersection, True
    elif aligner is None:
        from .wordalign import urandom_shim

        reproducible = urandom_shim() is not None

        def aligner(src, trg, extra_src, extra_trg):
            return align_intersection(
                src,
                trg,
                extra_src,
                extra_trg,
                n_samplers=cfg["eflomal_samplers"],
                seed=cfg["seed"],
            )

    n_extra = {}
    for lang, ks in sorted(kept_by_lang.items()):
        extra_src, extra_trg = _extra_corpus(cfg, lang, get_nlp("en"), get_nlp(lang))
        n_extra[lang] = len(extra_src)
        got = aligner(
            [list(en_parses[k].tokens) for k in ks],
            [list(other_parses[k].tokens) for k in ks],
            extra_src,
            extra_trg,
        )
        links.update(zip(ks, got, strict=True))
    seconds["align"] = time.perf_counter() - t0

    # 4. Phrase indexes per language, WordNet and the LM.
    en_index = other_index = None
    if PHRASE in types:
        lo, hi = cfg["phrase_min_len"], cfg["phrase_max_len"]
        en_index = PhraseIndex([en_parses[k] for k in kept], [seeds[k]["id"] for k in kept], lo, hi)
        other_index = {
            lang: PhraseIndex([other_parses[k] for k in ks], [seeds[k]["id"] for k in ks], lo, hi)
            for lang, ks in kept_by_lang.items()
        }
    lm_name = None
    if LEXICAL in types and kept:
        t0 = time.perf_counter()
        if lexicon is None:
            from .lexical import WordNetLexicon

            lexicon = WordNetLexicon(max_senses=cfg["wordnet_max_senses"])
        if scorer is None:
            from .lexical import load_scorer

            scorer = load_scorer(
                cfg["lm"],
                threads=cfg["lm_threads"],
                window=cfg["lm_window"],
                device=cfg["lm_device"],
                dtype=cfg["lm_dtype"],
            )
        lm_name = scorer.name
        seconds["load_lexical"] = time.perf_counter() - t0

    # 5. Perturb.
    from .lexical import RecordingScorer, lexical_substitutions, prescore

    out_rows: list[dict] = []
    sides = tuple(cfg["sides"])
    per_type = int(cfg["per_type"])

    lexical_want = per_type * len(cfg["lexical_relations"])

    def type_rng(k: int, typ: str) -> random.Random:
        return random.Random(f"{cfg['seed']}:{seeds[k]['id']}:{typ}")

    def lexical_gen(k: int, scorer, reasons: dict):
        return lexical_substitutions(
            en_parses[k], other_parses[k], links[k], type_rng(k, LEXICAL), lexicon, scorer,
            relations=cfg["lexical_relations"], per_relation=per_type,
            max_candidates=cfg["lm_max_candidates"], reasons=reasons,
        )  # fmt: skip

    lm_prescored = None
    batch_tokens = cfg["lm_batch_tokens"]
    if batch_tokens == "auto":
        on_cuda = str(getattr(scorer, "device", "cpu")).startswith("cuda")
        batch_tokens = 32768 if on_cuda else 0
    if LEXICAL in types and kept and batch_tokens and hasattr(scorer, "score_many"):
        # All candidate lists of the shard are ranked in a few large batches before the loop
        # (one forward pass per word is latency-bound on a GPU: 13 against 780-1,240 variants/s
        # on an H100, BENCHMARKS.md); the loop then reads the scores.
        t0 = time.perf_counter()
        rec = RecordingScorer()
        for k in kept:
            for _ in itertools.islice(lexical_gen(k, rec, {}), lexical_want):
                pass
        scorer = lm_prescored = prescore(scorer, rec.calls, batch_tokens)
        ranked = time.perf_counter() - t0
        seconds[LEXICAL] += ranked  # part of making the lexical variants (variants/s)
        log.info("divergences: %d candidate lists ranked in %.1fs", len(rec.calls), ranked)
    n_variants: Counter = Counter()
    row_seed: list[int] = []
    spares: dict[str, list[Variant]] = {}  # seed id -> spare phrase replacements, in seeded order
    for done, k in enumerate(kept):
        seed, en, other, lk = seeds[k], en_parses[k], other_parses[k], links[k]
        group = [_row(seed, _equivalent(en, other), 0, links=lk)]
        for typ in types:
            reasons: dict[str, int] = {}
            if typ == LEXICAL:
                want = lexical_want
                gen = lexical_gen(k, scorer, reasons)
            elif typ == PHRASE:
                want = per_type + int(cfg["phrase_spares"])
                gen = phrase_replacements(
                    seed["id"], en, other, lk, type_rng(k, typ), en_index,
                    other_index.get(seed["other_lang"]), sides=sides, reasons=reasons,
                )  # fmt: skip
            else:
                want = per_type
                gen = subtree_deletions(
                    en, other, lk, type_rng(k, typ), sides=sides, reasons=reasons
                )
            t0 = time.perf_counter()
            got, keys = [], set()
            for v in gen:
                if v.key not in keys:
                    keys.add(v.key)
                    got.append(v)
                if len(got) >= want:
                    break
            seconds[typ] += time.perf_counter() - t0
            if typ == PHRASE:  # the first per_type are used, the rest are spares
                got, spares[seed["id"]] = got[:per_type], got[per_type:]
                want = per_type
            if len(got) < want:
                for reason in reasons or {"no_more_distinct_variants": 1}:
                    skipped[typ][reason] += 1
            got.sort(key=lambda v: (v.side, v.wn_relation or ""))
            for i, v in enumerate(got):
                group.append(_row(seed, v, i))
            n_variants[typ] += len(got)
        if len(group) == 1:
            seed_skipped["no_variant"] += 1
            continue
        out_rows += group
        row_seed += [k] * len(group)
        if (done + 1) % 500 == 0:
            log.info("divergences: %d/%d seeds perturbed", done + 1, len(kept))

    # 6. Validity checks.
    def check_phrase_pos(indices: list[int]) -> None:
        """Re-tag phrase replacements that passed the other checks (pos_match / retokenized)."""
        rows_ok = [(i, out_rows[i]) for i in indices if not out_rows[i]["checks_failed"]]
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
                seed_p = [
                    en_parses[row_seed[i]] if side == "en" else other_parses[row_seed[i]]
                    for i, _ in sel
                ]
                reparsed = parse_texts(get_nlp(lang), [r[f"{side}_text"] for _, r in sel])
                for (_, r), bad in zip(
                    sel, check_pos([r for _, r in sel], seed_p, reparsed), strict=True
                ):
                    r["checks_failed"] = bad

    def next_spare(r: dict) -> Variant | None:
        pool = spares.get(r["seed_id"]) or []
        for j, v in enumerate(pool):  # same side keeps the row id unique within its group
            if v.side == r["side"] or per_type == 1:
                return pool.pop(j)
        return None

    t0 = time.perf_counter()
    for row, k in zip(out_rows, row_seed, strict=True):
        row["checks_failed"] = check_row(
            row, en_parses[k].tokens, other_parses[k].tokens, links[k], lexicon=lexicon
        )
    todo = [i for i, r in enumerate(out_rows) if r["type"] == PHRASE]
    swapped = 0
    while todo:
        check_phrase_pos(todo)
        # A row that failed only the POS re-check takes its seed's next spare, checked in turn.
        todo = []
        for i in [i for i in range(len(out_rows)) if out_rows[i]["type"] == PHRASE]:
            r, k = out_rows[i], row_seed[i]
            if not r["checks_failed"] or not set(r["checks_failed"]) <= POS_CHECKS:
                continue
            spare = next_spare(r)
            if spare is None:
                continue
            new = _row(seeds[k], spare, r["variant"])
            new["checks_failed"] = check_row(
                new, en_parses[k].tokens, other_parses[k].tokens, links[k], lexicon=lexicon
            )
            out_rows[i] = new
            swapped += 1
            if not new["checks_failed"]:
                todo.append(i)
    failures = [(r["type"], r["checks_failed"]) for r in out_rows]
    seconds["checks"] = time.perf_counter() - t0

    table = rows_to_table(out_rows, DIVERGENCES_SCHEMA)
    by_type = Counter(r["type"] for r in out_rows)
    stats = {
        "n_positives": len(rows),
        "n_seeds": len(kept),
        "n_groups": by_type[EQUIVALENT],
        "n_rows": len(out_rows),
        "rows_by_type": {t: by_type[t] for t in TYPES},
        "rows_by_side": dict(sorted(Counter(f"{r['type']}:{r['side']}" for r in out_rows).items())),
        "seed_skipped": dict(sorted(seed_skipped.items())),
        "variant_missing": {t: dict(sorted(c.items())) for t, c in skipped.items()},
        "alignment": {
            # links and en_tokens are additive over shards; the ratio is recomputed from them.
            "links": sum(len(links[k]) for k in kept),
            "en_tokens": sum(len(en_parses[k]) for k in kept),
            "links_per_en_token": round(
                sum(len(links[k]) for k in kept) / max(1, sum(len(en_parses[k]) for k in kept)), 4
            ),
            "pairs_without_links": sum(1 for k in kept if not links[k]),
            "extra_pairs": n_extra,
            "aligner": cfg["word_aligner"],
            "reproducible": reproducible,
        },
        "checks": summarize(failures),
        "phrase_spares_used": swapped,  # phrase replacements swapped after failing the POS re-check
        "spacy": {lang: p.meta.get("parasim_model") for lang, p in sorted(nlp.items())},
        "lm": lm_name,
        # batched ranking: lists the loop asked for that were not ranked ahead (None: not batched)
        "lm_prescore_misses": getattr(lm_prescored, "misses", None),
        "seconds": {k: round(v, 3) for k, v in seconds.items()},
        "variants_per_second": {
            t: round(n_variants[t] / seconds[t], 2) if seconds[t] > 0 else None for t in types
        },
        "config": {k: v for k, v in cfg.items() if k != "spacy"},
    }
    log.info("divergences: rows by type %s", stats["rows_by_type"])
    log.info("divergences: seeds skipped %s", stats["seed_skipped"])
    log.info("divergences: variants missing %s", stats["variant_missing"])
    return table, stats


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


def contrastive_pairs(
    table: pa.Table, mode: str = "ranking", seed: int = 13, valid_only: bool = True
) -> list[tuple[str, str]]:
    """Contrastive training pairs ``(x_id, y_id)`` with x ranked above y (seed 000 §6.1).

    Args:
        table: a divergences table.
        mode: ``"single:<type>"`` (equivalent vs each variant of one type), ``"balanced"``
            (equivalent vs one random variant), ``"concatenation"`` (equivalent vs every variant)
            or ``"ranking"`` (every row vs every row of the next rank present in its group).
        seed: for ``"balanced"``.
        valid_only: leave out rows that failed a validity check.

    Raises:
        ValueError: for an unknown mode.
    """
    cols = table.select(["id", "group_id", "type", "rank", "checks_failed"]).to_pylist()
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in cols:
        if not valid_only or not r["checks_failed"]:
            groups[r["group_id"]].append(r)
    rng = random.Random(seed)
    out: list[tuple[str, str]] = []
    for gid in sorted(groups):
        g = groups[gid]
        eq = [r for r in g if r["rank"] == 0]
        div = [r for r in g if r["rank"] > 0]
        if mode.startswith("single:"):
            typ = mode.split(":", 1)[1]
            if typ not in TYPES[1:]:
                raise ValueError(f"contrastive_pairs: unknown type {typ!r}")
            out += [(x["id"], y["id"]) for x in eq for y in div if y["type"] == typ]
        elif mode == "balanced":
            if eq and div:
                out.append((eq[0]["id"], rng.choice(div)["id"]))
        elif mode == "concatenation":
            out += [(x["id"], y["id"]) for x in eq for y in div]
        elif mode == "ranking":
            levels = sorted({r["rank"] for r in g})
            for a, b in zip(levels, levels[1:], strict=False):
                out += [
                    (x["id"], y["id"]) for x in g if x["rank"] == a for y in g if y["rank"] == b
                ]
        else:
            raise ValueError(f"contrastive_pairs: unknown mode {mode!r}")
    return out


__all__ = [
    "DEFAULT_CONFIG",
    "DIVERGENCES_SCHEMA",
    "EQ",
    "RANK",
    "TYPES",
    "contrastive_pairs",
    "make_divergences",
    "merged_config",
    "write_card",
]
