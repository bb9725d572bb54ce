"""The labelled corpus: partitions, grouped splits and folds, Parquet shards and a dataset card.

One schema (:data:`CORPUS_SCHEMA`) for every row, positive or negative. Splits are grouped by
page pair (``pair_id``): a page's sentences are all in the test split or all in train, and a
negative whose two pages fall on different sides of the test/train line is dropped (counted).
Inside train, each page pair belongs to one of ``folds`` validation folds (the paper: 10-fold).
Classes are balanced inside every (partition, split, fold) cell by seeded down-sampling.

Layout written by :func:`build_corpus`::

    out_dir/
      README.md                      # dataset card: counts, encoder, band, LDA topics, coherence
      corpus_stats.json              # the same figures, machine-readable
      data/<partition>/train-00000-of-00001.parquet
      data/<partition>/test-00000-of-00001.parquet

Every shard loads as is with ``pandas.read_parquet`` and
``datasets.load_dataset("parquet", data_files=...)``.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import logging
import math
import os
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parasim.corpus.graded import (
    DIVERGENT,
    EQUIVALENT,
    UNRELATED,
    divergent_rows,
    hardness_groups,
    hardness_of,
    hardness_sample,
)
from parasim.io import (
    CORPUS_SCHEMA,
    CORPUS_SCHEMA_VERSION,
    DIVERGENCES_SCHEMA,
    MINED_SCHEMA,
    NEGATIVES_SCHEMA,
    POSITIVES_SCHEMA,
    write_table,
)
from parasim.negatives import NegativesSettings, TopicsResult
from parasim.negatives.stage import encoder_label
from parasim.partition import CorpusConfig, assign_splits, partition_column, seeded_key
from parasim.spec import Stage
from parasim.stats import Recorder, Stats

log = logging.getLogger(__name__)


def _positive_rows(positives: pa.Table, parts: list[str], dropped: Counter) -> list[dict]:
    """Corpus rows of the positives; a pair another site already gave (the clean stage keeps a
    pair once per site) is dropped as ``duplicate_across_sites``, so no pair is in two splits."""
    from parasim.clean.rules import normalize

    d = positives.to_pydict()
    rows = []
    seen: set[tuple[str, str]] = set()
    for i in range(positives.num_rows):
        key = (normalize(d["en_text"][i]), normalize(d["other_text"][i]))
        if key in seen:
            dropped["duplicate_across_sites"] += 1
            continue
        seen.add(key)
        rows.append(
            {
                "id": d["id"][i],
                "sentence1": d["en_text"][i],
                "sentence2": d["other_text"][i],
                "label": 1,
                "lang_pair": d["lang_pair"][i],
                "partition": parts[i],
                "domain": d["domain"][i],
                "site": d["site"][i],
                "source": "aligned",
                "grade": EQUIVALENT,
                "align_score": d["score"][i],
                "cosine": None,
                "topic": None,
                "pair_id": d["pair_id"][i],
                "pair_id2": d["pair_id"][i],
                "url1": d["en_url"][i],
                "url2": d["other_url"][i],
                "idx1": d["en_idx"][i],
                "idx2": d["other_idx"][i],
            }
        )
    return rows


def _negative_rows(negatives: pa.Table) -> list[dict]:
    d = negatives.to_pydict()
    rows = []
    for i in range(negatives.num_rows):
        rows.append(
            {
                "id": d["id"][i],
                "sentence1": d["en_text"][i],
                "sentence2": d["other_text"][i],
                "label": 0,
                "lang_pair": d["lang_pair"][i],
                "partition": d["partition"][i],
                "domain": d["domain"][i],
                "site": d["site"][i],
                "source": "lda-negative",
                "grade": UNRELATED,
                "negative_kind": "lda",
                "align_score": None,
                "cosine": d["cosine"][i],
                "topic": d["topic"][i],
                "pair_id": d["pair_id"][i],
                "pair_id2": d["cand_pair_id"][i],
                "url1": d["en_url"][i],
                "url2": d["other_url"][i],
                "idx1": d["en_idx"][i],
                "idx2": d["other_idx"][i],
            }
        )
    return rows


def _split(
    rows: list[dict], splits: Mapping[str, tuple[str, int | None]], dropped: Counter
) -> tuple[list[dict], int]:
    """The rows with their split and fold (their page pair's), and the negatives whose two
    pages are in different train folds; a row without a split, or a negative across the
    test/train line, is dropped by reason."""
    kept = []
    cross_fold = 0
    for r in rows:
        s1 = splits.get(r["pair_id"])
        s2 = splits.get(r["pair_id2"])
        if s1 is None:
            dropped["page_pair_without_positives"] += 1
            continue
        if s2 is not None and s2[0] != s1[0]:
            dropped["negative_across_test_train"] += 1
            continue
        if s2 is not None and s2 != s1:
            cross_fold += 1
        r["split"], r["fold"] = s1
        kept.append(r)
    return kept, cross_fold


def _balance(kept: list[dict], cfg: CorpusConfig, dropped: Counter) -> tuple[list[dict], list[str]]:
    """Classes balanced inside every (partition, split, fold) cell by seeded down-sampling (with
    ``balance: downsample``): the rows kept, and the cells of one class only (emptied)."""
    cells: dict[tuple, list[dict]] = defaultdict(list)
    for r in kept:
        cells[(r["partition"], r["split"], r["fold"])].append(r)
    final: list[dict] = []
    unbalanced: list[str] = []
    for cell in sorted(cells, key=lambda c: (c[0], c[1], -1 if c[2] is None else c[2])):
        cell_rows = cells[cell]
        pos = [r for r in cell_rows if r["label"] == 1]
        neg = [r for r in cell_rows if r["label"] == 0]
        if cfg.balance == "downsample" and len(pos) != len(neg):
            n = min(len(pos), len(neg))
            if n == 0:
                unbalanced.append(f"{cell[0]}/{cell[1]}/fold={cell[2]}: {len(pos)}+ {len(neg)}-")
            pos = sorted(pos, key=lambda r: seeded_key(cfg.seed, "bal", r["id"]))
            neg = sorted(neg, key=lambda r: seeded_key(cfg.seed, "bal", r["id"]))
            dropped["balance_positive"] += len(pos) - n
            dropped["balance_negative"] += len(neg) - n
            pos, neg = pos[:n], neg[:n]
        final.extend(sorted(pos + neg, key=lambda r: r["id"]))
    if unbalanced:
        log.warning(
            "%d cell(s) have one class only and are emptied by balancing: %s",
            len(unbalanced),
            "; ".join(unbalanced[:10]),
        )
    return final, unbalanced


def _write_shards(
    final: list[dict], out_dir: Path, cfg: CorpusConfig
) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """``data/<partition>/<split>-NNNNN-of-NNNNN.parquet`` (stale shards removed): the shards
    written (relative to ``out_dir``) and the rows per partition, split and label (and per
    train fold)."""
    data_dir = out_dir / "data"
    by_file: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in final:
        by_file[(r["partition"], r["split"])].append(r)
    for stale in sorted(data_dir.glob("*/*.parquet")) if data_dir.exists() else []:
        stale.unlink()
    shards = []
    counts: dict[str, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    if not by_file:  # nothing to write: an empty train shard per partition keeps the schema
        by_file.update({(part, "train"): [] for part in cfg.partitions})
    for part, split in sorted(by_file):
        frows = by_file[(part, split)]
        n_shards = max(1, math.ceil(len(frows) / cfg.max_rows_per_shard))
        for k in range(n_shards):
            chunk = frows[k * cfg.max_rows_per_shard : (k + 1) * cfg.max_rows_per_shard]
            table = pa.Table.from_pylist(chunk, schema=CORPUS_SCHEMA)
            path = data_dir / part / f"{split}-{k:05d}-of-{n_shards:05d}.parquet"
            write_table(table, path, row_group_size=cfg.row_group_size)
            shards.append(str(path.relative_to(out_dir)))
        if not frows:
            continue
        grades = Counter(r["grade"] for r in frows)
        counts[part][split] = {
            "positive": grades[EQUIVALENT],
            "negative": grades[UNRELATED],
            "divergent": grades[DIVERGENT],
        }
        if split == "train":
            folds = Counter(r["fold"] for r in frows)
            counts[part]["train_folds"] = {str(f): folds[f] for f in sorted(folds)}
    return shards, {p: dict(v) for p, v in counts.items()}


def _empty_partitions(
    parts: list[str], neg_parts: list[str], counts: Mapping[str, Any]
) -> list[str]:
    """The partitions of the positives without a corpus row, each logged with its inputs
    (``parts``: the positives' partitions, ``neg_parts``: the negatives')."""
    empty = sorted(p for p in set(parts) if not counts.get(p))
    for p in empty:
        log.warning(
            "partition %s: nothing to build (%d positives, %d negatives; a class missing in "
            "every split/fold cell is emptied by balancing)",
            p,
            parts.count(p),
            neg_parts.count(p),
        )
    return empty


def _cell_key(r: Mapping[str, Any]) -> tuple:
    return (r["partition"], r["split"], -1 if r["fold"] is None else r["fold"])


def _merge_cells(final: list[dict], divergent: list[dict]) -> list[dict]:
    """The divergent rows put in their parent's (partition, split, fold) cell; each cell's rows
    by id, so the positives and negatives keep the order they had without them."""
    if not divergent:
        return final
    rows = sorted([*final, *divergent], key=lambda r: (_cell_key(r), r["id"]))
    return rows


def _hardness_samples(final: list[dict], cfg: CorpusConfig) -> dict[str, Any]:
    """The rows the hardness is measured on (:func:`parasim.corpus.graded.hardness_sample`):
    ``all`` (tier -> rows) and, with several partitions, ``partitions`` (each one's; ``all``
    then drawn from their union), so that the corpus's rows can go before the encoder loads."""
    by_part: dict[str, list[dict]] = defaultdict(list)
    for r in final:
        by_part[r["partition"]].append(r)
    n, seed = cfg.hardness.sample, cfg.seed
    if len(by_part) == 1:
        return {"all": hardness_sample(final, n, seed)}
    picked: list[dict] = []  # the partitions' samples hold the whole corpus's
    parts = {p: hardness_sample(rs, n, seed, picked) for p, rs in sorted(by_part.items())}
    return {"partitions": parts, "all": hardness_sample(picked, n, seed)}


def _hardness(
    samples: Mapping[str, Any] | None,
    cfg: CorpusConfig,
    encoder: Callable[[list[str]], Any] | None,
) -> dict[str, Any]:
    """Each tier's hardness for the untrained encoder (:func:`parasim.corpus.graded.hardness`)
    overall and per partition, on :func:`_hardness_samples`' rows; empty when
    ``corpus.hardness.encoder`` is null (and no encoder is given) or ``samples`` is None."""
    if samples is None:
        return {}
    if encoder is None:
        from parasim.align.scoring import cached_encoder

        encoder = cached_encoder(cfg.hardness.encoder)
    out: dict[str, Any] = {
        "encoder": getattr(encoder, "name", cfg.hardness.encoder),
        "sample": cfg.hardness.sample,
    }
    if "partitions" in samples:
        out["partitions"] = {p: hardness_of(s, encoder) for p, s in samples["partitions"].items()}
    out["all"] = hardness_of(samples["all"], encoder)
    return out


def _release_memory() -> None:
    """Hand freed memory back to the system: Arrow's buffers (its allocator keeps them a
    while) and, with glibc, the C heap's free pages (``malloc_trim``), so that what comes
    next (the hardness encoder) does not add to what was let go."""
    pa.default_memory_pool().release_unused()
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def build_corpus(
    positives: pa.Table,
    negatives: pa.Table,
    cfg: CorpusConfig | Mapping[str, Any] | None,
    out_dir: str | os.PathLike,
    rec: Recorder,
    meta: Mapping[str, Any] | None = None,
    divergences: pa.Table | None = None,
    mined: pa.Table | None = None,
    encoder: Callable[[list[str]], Any] | None = None,
) -> list[Path]:
    """Label, grade, split, balance and write the corpus shards with their dataset card.

    Records rows in (positives and hard negatives), rows out (corpus rows), drops by reason (a
    pair a second site repeats, a negative across the test/train split, a class balanced
    away, ...), the counts ``positives_in``, ``negatives_in``, ``rows_by_partition``
    (partition -> split -> label, and train folds) and ``negatives_across_folds``, and as
    figures the schema version, the single-class cells, the shards, the config and the
    partitions of the positives left empty (``empty_partitions``).

    Args:
        positives: rows of ``POSITIVES_SCHEMA``.
        negatives: rows of :data:`parasim.negatives.select.NEGATIVES_SCHEMA`.
        cfg: the ``corpus:`` section.
        out_dir: folder for ``data/<partition>/<split>-*.parquet``, ``README.md`` and
            ``corpus_stats.json`` (existing shards of this corpus are replaced).
        rec: the stage's recorder.
        meta: figures for the card: ``encoder``, ``band`` (per partition or one), ``topics``
            (partition -> {"num_topics", "coherence", "measure"}), ``selection`` stats.
        divergences: the divergences stage's rows (:data:`~parasim.io.DIVERGENCES_SCHEMA`, all
            sites): the synthetic part of the divergent grade (``corpus.divergent.synthetic``).
        mined: the mine stage's rows (:data:`~parasim.io.MINED_SCHEMA`, all sites): its mined
            part (``corpus.divergent.mined``).
        encoder: the untrained encoder of ``corpus.hardness`` (texts -> vectors); None: the one
            ``corpus.hardness.encoder`` names (not measured when that is null).

    Returns:
        The shards written.
    """
    cfg = CorpusConfig.from_config(cfg)
    out_dir = Path(out_dir)
    splits = assign_splits(positives, cfg)
    parts = partition_column(positives, cfg.partitions)
    n_positives, n_negatives = positives.num_rows, negatives.num_rows
    neg_parts = negatives.column("partition").to_pylist()
    dropped: Counter = Counter()
    rows = _positive_rows(positives, parts, dropped) + _negative_rows(negatives)
    # Each input table is let go once its rows are read (with a caller that keeps no name
    # for it, its memory goes back before the hardness encoder loads: issue 51's 4 GB).
    del positives, negatives
    kept, cross_fold = _split(rows, splits, dropped)
    del rows
    final, unbalanced = _balance(kept, cfg, dropped)
    del kept
    # the divergent grade beside the balanced positives and negatives (not balanced against)
    divergent, n_divergent_in = divergent_rows(
        final, divergences, mined, splits, cfg.divergent, dropped
    )
    del divergences, mined
    final = _merge_cells(final, divergent)
    shards, counts = _write_shards(final, out_dir, cfg)
    n_rows = len(final)
    by_grade = dict(Counter(r["grade"] for r in final))
    by_kind = dict(Counter(r["negative_kind"] for r in divergent))
    measured = final and (encoder is not None or cfg.hardness.encoder)
    samples = _hardness_samples(final, cfg) if measured else None
    del final, divergent  # the rows are written: only the hardness samples stay
    _release_memory()
    hard = _hardness(samples, cfg, encoder)
    stats: dict[str, Any] = {
        "schema_version": CORPUS_SCHEMA_VERSION,
        "rows": n_rows,
        "positives_in": n_positives,
        "negatives_in": n_negatives,
        "divergent_in": n_divergent_in,
        "counts": counts,
        "hardness": hard,
        "dropped": dict(dropped),
        "negatives_across_folds": cross_fold,
        "single_class_cells": unbalanced,
        "shards": shards,
        "config": {
            "test_fraction": cfg.test_fraction,
            "folds": cfg.folds,
            "seed": cfg.seed,
            "balance": cfg.balance,
            "partitions": {k: dict(v) for k, v in cfg.partitions.items()},
        },
        "meta": dict(meta or {}),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    tmp = out_dir / ".corpus_stats.json.tmp"
    tmp.write_text(json.dumps(stats, indent=2, sort_keys=True, default=str), encoding="utf-8")
    os.replace(tmp, out_dir / "corpus_stats.json")
    write_card(out_dir, stats)
    log.info("corpus: %d rows in %d shard(s); dropped %s", n_rows, len(shards), dict(dropped))
    rec.rows_in += n_positives + n_negatives + n_divergent_in
    rec.rows_out += n_rows
    for reason, n in dropped.items():
        rec.drop(reason, n)
    rec.count("positives_in", n_positives)
    rec.count("negatives_in", n_negatives)
    rec.count("divergent_in", n_divergent_in)
    rec.count("rows_by_partition", counts)
    rec.count("rows_by_grade", by_grade)
    rec.count("divergent_by_kind", by_kind)
    rec.count("negatives_across_folds", cross_fold)
    for k in ("schema_version", "single_class_cells", "shards", "config", "hardness"):
        rec.figure(k, stats[k])
    rec.figure("empty_partitions", _empty_partitions(parts, neg_parts, counts))
    return [out_dir / s for s in shards]


def corpus_meta(
    selection: Mapping[str, Any],
    topics: TopicsResult,
    neg: NegativesSettings,
    cleaning: Mapping[str, Stats] | None = None,
) -> dict[str, Any]:
    """The figures of the dataset card (:func:`build_corpus`' ``meta``).

    Args:
        selection: the negatives file's selection summary (its encoder and bands; empty: those
            of the config).
        topics: the topics (each partition's topic count, coherence, measure, passes, reason).
        neg: the ``negatives`` section.
        cleaning: the clean stage's stats per site, when given.
    """
    meta = {
        "encoder": selection.get("encoder") or encoder_label(neg.encoder),
        "band": selection.get("band") or neg.select.band,
        "band_method": selection.get("band_method", {}),
        "topics": {
            p: {k: v.get(k) for k in ("num_topics", "coherence", "measure", "passes", "reason")}
            for p, v in topics.partitions.items()
        },
    }
    if cleaning:
        meta["cleaning"] = {site: s.to_dict() for site, s in cleaning.items()}
    return meta


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4f}"
    if isinstance(x, Sequence) and not isinstance(x, str):
        return "[" + ", ".join(_fmt(v) for v in x) + "]"
    return str(x)


def write_card(out_dir: str | os.PathLike, stats: Mapping[str, Any]) -> Path:
    """Write the dataset card ``README.md`` (Hugging Face YAML header, tables) beside the shards."""
    out_dir = Path(out_dir)
    meta = stats.get("meta", {})
    parts = sorted(stats["counts"])
    header = ["---", "configs:"]
    for p in parts:
        header += [f"- config_name: {p}", "  data_files:"]
        for split in ("train", "test"):
            if split in stats["counts"][p]:
                header += [f"  - split: {split}", f"    path: data/{p}/{split}-*.parquet"]
    header += ["---", ""]
    lines = [
        "# parasim sentence-similarity corpus",
        "",
        "English sentence (`sentence1`) paired with a sentence in another language (`sentence2`),",
        "in three grades (`grade`, REFreSD's no / some meaning difference / unrelated):",
        "",
        "- `equivalent` (label 1): an aligned translation from a bilingual website (source",
        "  `aligned`);",
        "- `divergent` (label 0): a near-translation that changes something, with its parent",
        "  positive (`parent_id`), what differs (`diff_side`, `diff_spans`, `diff_kind`: date,",
        "  version, number, name, other) and where it comes from (`negative_kind`): `synthetic`",
        "  (seed 000's divergences: `divergence_type` lexical substitution, phrase replacement or",
        "  subtree deletion; source `synthetic-divergence`) or `mined` (another line of the site",
        "  close to the English side but not its translation, `mined_similarity`; source",
        "  `mined-divergence`);",
        "- `unrelated` (label 0): a hard negative from the same LDA topic within a cosine band of",
        "  the English sides (source `lda-negative`, `negative_kind` `lda`, Algorithm 1 of seed",
        "  001).",
        "",
        "Seed 001's binary protocol reads the `equivalent` and `unrelated` rows: `grade !=",
        "'divergent'`. Splits are grouped by page pair (a divergent row takes its parent's; a",
        "mined line's page pair is in the same split); train carries a `fold` column for k-fold",
        "validation; positives and unrelated negatives are balanced per partition, split and",
        "fold, and the divergent rows come on top.",
        "",
        f"Schema version {stats['schema_version']}: "
        + ", ".join(f"`{f.name}` ({f.type})" for f in CORPUS_SCHEMA)
        + ".",
        "",
        "## Counts",
        "",
        "| partition | split | equivalent | divergent | unrelated | total |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for p in parts:
        for split in ("train", "test"):
            c = stats["counts"][p].get(split)
            if c:
                div = c.get("divergent", 0)
                tot = c["positive"] + c["negative"] + div
                lines.append(
                    f"| {p} | {split} | {c['positive']} | {div} | {c['negative']} | {tot} |"
                )
    lines += ["", "Rows per train fold:", ""]
    for p in parts:
        folds = stats["counts"][p].get("train_folds", {})
        lines.append(f"- {p}: " + ", ".join(f"fold {k}: {v}" for k, v in folds.items()))
    lines += hardness_lines(stats.get("hardness") or {})
    first = parts[0] if parts else "PARTITION"
    lines += ["", "## How it was built", ""]
    if meta.get("encoder"):
        lines.append(f"- Sentence encoder: {_fmt(meta['encoder'])}")
    band = meta.get("band")
    methods = meta.get("band_method") or {}
    if isinstance(band, Mapping):
        for p, b in sorted(band.items()):
            how = f" ({methods[p]})" if p in methods else ""
            lines.append(f"- Cosine band ({p}): {_fmt(b)}{how}")
    elif band is not None:
        lines.append(f"- Cosine band: {_fmt(band)}")
    for p, t in sorted((meta.get("topics") or {}).items()):
        why = f" ({t['reason']})" if t.get("reason") else ""
        lines.append(
            f"- LDA ({p}): {t.get('num_topics')} topics, coherence "
            f"{t.get('measure', 'c_v')} = {_fmt(t.get('coherence'))}, passes {t.get('passes')}"
            f"{why}"
        )
    for site, c in sorted((meta.get("cleaning") or {}).items()):  # the clean stage's Stats
        drops = dict(sorted(c.get("dropped", {}).items()))
        kept, furniture = c.get("rows_out", 0), c.get("counts", {}).get("furniture_pairs", 0)
        lines.append(
            f"- Cleaning ({site}): {c.get('rows_in', 0)} aligned pairs, {kept} kept "
            f"as positives, dropped by reason {drops}; {furniture} kept pairs "
            "flagged as page furniture."
        )
    if meta.get("cleaning"):
        lines.append(
            "- Cleaning rules (parasim.clean): identical and near-identical sides, no letters, "
            "URLs/e-mails, code and markup, placeholder text, length ratio, repeated words, "
            "mojibake (after bicleaner-hardrules); each side in its declared language (heliport, "
            "short lines judged with their neighbours); repeated pairs kept once (`n_seen`, "
            "`n_pages` in the positives); untranslated page pairs left out by the pair stage. "
            "Dropped pairs: `results/dropped/<site>/`."
        )
    cfg = stats.get("config", {})
    lines += [
        f"- Test fraction {cfg.get('test_fraction')}, {cfg.get('folds')} folds, "
        f"seed {cfg.get('seed')}, balance {cfg.get('balance')}.",
        f"- Dropped rows by reason: {dict(stats.get('dropped', {}))}.",
        f"- Negatives whose two pages are in different train folds: "
        f"{stats.get('negatives_across_folds', 0)}.",
        "",
        "## Loading",
        "",
        "```python",
        "import datasets, pandas",
        f'ds = datasets.load_dataset("parquet", data_files={{"train": "data/{first}'
        '/train-*.parquet"})',
        f'df = pandas.read_parquet("data/{first}")',
        "```",
        "",
    ]
    path = out_dir / "README.md"
    tmp = out_dir / ".README.md.tmp"
    tmp.write_text("\n".join(header + lines), encoding="utf-8")
    os.replace(tmp, path)
    return path


def hardness_lines(hard: Mapping[str, Any]) -> list[str]:
    """The card's table of each tier's hardness for the untrained encoder."""
    groups = hardness_groups(hard)
    if not groups:
        return []
    lines = [
        "",
        "## Hardness",
        "",
        f"How well the untrained encoder ({hard.get('encoder')}) tells the positives from each "
        "tier by the cosine of the two sentences, on a seeded sample of up to "
        f"{hard.get('sample')} rows of the tier and as many positives: ROC AUC and the accuracy "
        "of the best threshold (0.5: it cannot tell them apart; 1.0: the tier teaches it "
        "nothing).",
        "",
        "| partition | tier | pairs | ROC AUC | best accuracy | mean cosine, positives / tier |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for part, tiers in groups:
        for tier, h in tiers.items():
            lines.append(
                f"| {part} | {tier} | {h['pairs']} | {h['roc_auc']:.4f} | "
                f"{h['best_accuracy']:.4f} | {h['mean_cosine_positive']:.3f} / "
                f"{h['mean_cosine_tier']:.3f} |"
            )
    return lines


def label_counts(table: pa.Table) -> dict[str, int]:
    """Rows per label of a corpus table (for quick checks)."""
    vc = pc.value_counts(table.column("label")).to_pylist()
    return {str(v["values"]): v["counts"] for v in vc}


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "corpus",
    rules=("build_corpus",),
    results=("corpus",),
    upstream="negatives",
    per="global",
    one_to_one=True,
    settings=CorpusConfig,
    inputs={
        "positives": POSITIVES_SCHEMA,
        "negatives": NEGATIVES_SCHEMA,
        "topics": None,
        "divergences": DIVERGENCES_SCHEMA,
        "mined": MINED_SCHEMA,
    },
    outputs={"out": CORPUS_SCHEMA},
    run=build_corpus,
)
