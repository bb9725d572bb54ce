"""S3BERT's data: the scores stage's English sentence pairs with their aspect scores, split by
page pair into train, dev and test; the optional min-max scaling of the targets."""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from .settings import S3bertConfig, aspect_names


class Pair(NamedTuple):
    """One scored English sentence pair: texts, page pair, and the aspect scores (NaN: none)."""

    a: str
    b: str
    group: str
    scores: tuple[float, ...]


@dataclasses.dataclass
class S3bertData:
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    counts: Counter


def _slice_of(group: str, seed: int, dev: float, test: float) -> str:
    h = hashlib.sha1(f"{seed}:{group}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    return "test" if u < test else "dev" if u < test + dev else "train"


def rows_from_scores(files: Sequence[str | os.PathLike]) -> dict[str, list]:
    """The scored rows of score shards as :func:`s3bert_data` columns: ``text_a`` the English
    side, ``text_b`` the English translation of the other side, ``group`` the page pair.

    Rows the scores stage skipped (``skip_reason`` set) stay out, counted by
    :func:`s3bert_data` as having no scores.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = aspect_names()
    cols = ["en_text", "other_en", "pair_id", "source", *(f"amr_{k}" for k in names)]
    tables = [pq.read_table(f) for f in files]
    if not tables:
        return {"text_a": [], "text_b": [], "group": [], "source": []} | {
            f"amr_{k}": [] for k in names
        }
    t = pa.concat_tables(tables, promote_options="default")
    missing = [c for c in cols if c not in t.column_names]
    if missing:
        raise ValueError(
            f"{files[0]}: not a score shard with AMR aspects (no {', '.join(missing[:3])})"
        )
    d = t.select(cols).to_pydict()
    return {
        "text_a": d.pop("en_text"),
        "text_b": d.pop("other_en"),
        "group": d.pop("pair_id"),
        "source": d.pop("source"),
        **d,
    }


def s3bert_data(rows: Mapping[str, Sequence], cfg: S3bertConfig, seed: int) -> S3bertData:
    """Train / dev / test pairs from scored rows (columns ``text_a``, ``text_b``, ``group``,
    ``source`` and ``amr_<aspect>`` for every aspect).

    Skips, counted: rows of a source not in ``cfg.sources``, an empty side, no aspect score at
    all (both graphs failed).
    """
    names = aspect_names()
    missing = [f"amr_{k}" for k in names if f"amr_{k}" not in rows]
    if missing:
        raise ValueError(
            f"the scored rows have no {missing[0]} column (and {len(missing) - 1} more): "
            "the scores stage must run with AMR aspects on (scores.amr)"
        )
    counts: Counter = Counter()
    out: dict[str, list[Pair]] = {"train": [], "dev": [], "test": []}
    cols = [rows[f"amr_{k}"] for k in names]
    for i, (a, b, g, src) in enumerate(
        zip(rows["text_a"], rows["text_b"], rows["group"], rows["source"], strict=True)
    ):
        counts["rows"] += 1
        if src not in cfg.sources:
            counts[f"skipped_source_{src}"] += 1
            continue
        if not (a or "").strip() or not (b or "").strip():
            counts["skipped_empty_side"] += 1
            continue
        scores = tuple(math.nan if c[i] is None else float(c[i]) for c in cols)
        if all(math.isnan(x) for x in scores):
            counts["skipped_no_scores"] += 1
            continue
        part = _slice_of(str(g), seed, cfg.dev_fraction, cfg.test_fraction)
        out[part].append(Pair(a, b, str(g), scores))
        counts[f"{part}_{src}"] += 1
    if cfg.max_pairs is not None and len(out["train"]) > cfg.max_pairs:
        counts["train_capped"] = len(out["train"]) - cfg.max_pairs
        out["train"] = out["train"][: cfg.max_pairs]
    counts.update({f"{k}_pairs": len(v) for k, v in out.items()})
    return S3bertData(out["train"], out["dev"], out["test"], counts)


def target_scaling(pairs: Sequence[Pair], kind: str) -> dict[str, list[float]] | None:
    """Per-aspect ``min`` and ``max`` of the training targets for ``minmax`` (None: ``none``).

    NaN (an aspect the scores stage could not compute) is ignored; an aspect with no score or a
    single value keeps its scores (min 0, max 1).
    """
    if kind == "none":
        return None
    k = len(pairs[0].scores) if pairs else len(aspect_names())
    lo, hi = [0.0] * k, [1.0] * k
    for j in range(k):
        vals = [p.scores[j] for p in pairs if not math.isnan(p.scores[j])]
        if vals and max(vals) > min(vals):
            lo[j], hi[j] = min(vals), max(vals)
    return {"min": lo, "max": hi}


def scale_targets(pairs: Sequence[Pair], scaling: Mapping[str, list[float]] | None) -> list[Pair]:
    """``pairs`` with every aspect score mapped by ``(x - min) / (max - min)`` (NaN stays)."""
    if scaling is None:
        return list(pairs)
    lo, hi = scaling["min"], scaling["max"]

    def scaled(scores: tuple[float, ...]) -> tuple[float, ...]:
        return tuple((x - a) / (b - a) for x, a, b in zip(scores, lo, hi, strict=True))

    return [p._replace(scores=scaled(p.scores)) for p in pairs]
