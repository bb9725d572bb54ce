"""A training partition's corpus rows: which corpus partitions it is made of, and their splits."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.data import Split, with_divergent

from .settings import SimilarityConfig, combined_name

COLUMNS = ("sentence1", "sentence2", "label", "lang_pair", "partition", "fold")


def read_split(
    corpus_dir: str | os.PathLike,
    partition: str,
    split: str,
    grades: str = "binary",
    divergent_per_positive: int = 1,
    seed: int = 0,
    counts: Counter | None = None,
) -> Split:
    """One partition's ``train`` or ``test`` split through `datasets` (empty when absent).

    ``binary`` (seed 001's protocol): its equivalent and unrelated rows, the divergent grade left
    out. ``graded``: also, per positive, ``divergent_per_positive`` of its divergent rows (those
    whose ``parent_id`` is its id, a seeded choice), label 0 and grade ``divergent``, in the
    corpus's row order (a divergent row has its parent's split and fold). ``counts``, when
    given, is added the divergent rows counted by
    :func:`~parasim.train.core.data.with_divergent` (kept, parent not in the split, spare ones
    past ``divergent_per_positive``), so that none is left out unsaid.
    """
    from parasim.train.core.data import load_parquet

    files = sorted((Path(corpus_dir) / "data" / partition).glob(f"{split}-*.parquet"))
    if not files:
        return Split([], [], [], [], [])
    import pyarrow.parquet as pq

    graded = "grade" in pq.read_schema(files[0]).names
    extra = ["grade", "id", "parent_id"] if graded and grades == "graded" else ["grade"]
    ds = load_parquet(files, [*COLUMNS, *extra] if graded else COLUMNS, streaming=False)
    if graded and grades != "graded":
        ds = ds.filter(lambda g: g != "divergent", input_columns="grade")
    if len(ds) == 0:
        return Split([], [], [], [], [])
    cols = ds.to_dict()
    keep = range(len(cols["label"]))
    if graded and grades == "graded":
        keep, drawn = with_divergent(cols, divergent_per_positive, seed, "similarity")
        if counts is not None:
            counts.update(drawn)
    return Split(
        [cols["sentence1"][i] for i in keep], [cols["sentence2"][i] for i in keep],
        [int(cols["label"][i]) for i in keep],
        [None if cols["fold"][i] is None else int(cols["fold"][i]) for i in keep],
        [cols["lang_pair"][i] for i in keep],
        [cols["grade"][i] for i in keep] if graded else [None] * len(keep),
    )  # fmt: skip


def _partition_members(
    partition: str,
    corpus_section: Mapping[str, Any],
    sim: SimilarityConfig,
    found: Sequence[str],
) -> list[str]:
    """The corpus partitions a training partition is made of: itself, or, for the combined
    partition (:func:`combined_name`), every listed partition the corpus has rows for."""
    parts = dict(corpus_section.get("partitions") or {})
    names = list(sim.partitions or parts or found)
    if partition not in names and partition == combined_name({n: parts.get(n, {}) for n in names}):
        return [n for n in names if n in found]
    return [partition]
