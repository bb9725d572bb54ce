"""A training partition's corpus rows: which corpus partitions it is made of, and their splits."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.data import Split

from .settings import SimilarityConfig, combined_name

COLUMNS = ("sentence1", "sentence2", "label", "lang_pair", "partition", "fold")


def read_split(corpus_dir: str | os.PathLike, partition: str, split: str) -> Split:
    """One partition's ``train`` or ``test`` split through `datasets` (empty when absent): its
    equivalent and unrelated rows, seed 001's binary protocol (the divergent grade is left out)."""
    from parasim.train.core.data import load_parquet

    files = sorted((Path(corpus_dir) / "data" / partition).glob(f"{split}-*.parquet"))
    if not files:
        return Split([], [], [], [], [])
    import pyarrow.parquet as pq

    # seed 001's binary protocol: the equivalent and unrelated rows, not the divergent grade
    graded = "grade" in pq.read_schema(files[0]).names
    ds = load_parquet(files, [*COLUMNS, "grade"] if graded else COLUMNS, streaming=False)
    if graded:
        ds = ds.filter(lambda g: g != "divergent", input_columns="grade")
    if len(ds) == 0:
        return Split([], [], [], [], [])
    cols = ds.to_dict()
    return Split(
        cols["sentence1"], cols["sentence2"], [int(x) for x in cols["label"]],
        [None if f is None else int(f) for f in cols["fold"]], cols["lang_pair"],
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
