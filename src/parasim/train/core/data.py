"""Parquet shards in through `datasets` (in memory when they fit, streamed when they do not), and
the corpus's labelled sentence pairs."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def available_memory() -> int:
    """Bytes of memory available to this process (``MemAvailable``; 4 GiB when unknown)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def use_streaming(files: Sequence[str | os.PathLike], streaming: bool | str = "auto") -> bool:
    """Whether to stream ``files``: ``"auto"`` streams when they exceed a quarter of free memory.

    Parquet is compressed (a divergences shard expands about 5x in Arrow), hence the quarter.
    """
    if streaming != "auto":
        return bool(streaming)
    size = sum(Path(f).stat().st_size for f in files)
    return size * 4 > available_memory()


def load_parquet(
    files: Sequence[str | os.PathLike],
    columns: Sequence[str] | None = None,
    streaming: bool | str = "auto",
):
    """The rows of Parquet ``files`` as a `datasets` Dataset (or IterableDataset when streaming).

    Args:
        files: Parquet shards, read in the order given (rows keep their order).
        columns: the columns to read (all when None).
        streaming: True, False, or "auto" (:func:`use_streaming`).
    """
    import datasets

    datasets.disable_progress_bars()
    stream = use_streaming(files, streaming)
    kw: dict[str, Any] = {"data_files": [str(f) for f in files], "split": "train"}
    if columns is not None:
        kw["columns"] = list(columns)
    if stream:
        return datasets.load_dataset("parquet", streaming=True, **kw)
    return datasets.load_dataset("parquet", keep_in_memory=True, **kw)


def consecutive_groups(rows: Iterable[dict], key: str) -> Iterator[list[dict]]:
    """Runs of consecutive rows with the same ``key`` (how a divergences shard stores a group).

    Streaming-friendly: holds one group at a time.
    """
    group: list[dict] = []
    for row in rows:
        if group and row[key] != group[0][key]:
            yield group
            group = []
        group.append(row)
    if group:
        yield group


@dataclasses.dataclass
class Split:
    """Sentence pairs of one corpus split (one partition, or several together)."""

    s1: list[str]
    s2: list[str]
    label: list[int]
    fold: list[int | None]
    lang_pair: list[str]
    #: Each row's grade (equivalent, divergent, unrelated; None: a corpus without grades).
    grade: list[str | None] = dataclasses.field(default_factory=list)

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx: Sequence[int]) -> Split:
        return Split(*([getattr(self, f.name)[i] for i in idx] for f in dataclasses.fields(self)))

    def __post_init__(self) -> None:
        if not self.grade:
            self.grade = [None] * len(self.label)

    @staticmethod
    def concat(parts: Sequence[Split]) -> Split:
        out = Split([], [], [], [], [])
        for p in parts:
            for f in dataclasses.fields(Split):
                getattr(out, f.name).extend(getattr(p, f.name))
        return out


def corpus_partitions(corpus_dir: str | os.PathLike) -> list[str]:
    """Partition folders of a corpus (``<corpus>/data/<partition>/``), sorted."""
    d = Path(corpus_dir) / "data"
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def with_divergent(
    cols: dict[str, list],
    per_positive: int,
    seed: int,
    tag: str,
    eligible: Callable[[int], bool] | None = None,
) -> tuple[list[int], Counter]:
    """The rows a graded split keeps (columns ``grade``, ``id``, ``parent_id`` of corpus rows):
    every equivalent and unrelated row, and per positive its first ``per_positive`` divergent
    rows in a seeded order (``tag`` names the model that draws them), in row order.

    Returns:
        The kept row indices, and the divergent rows counted: ``divergent`` (kept),
        ``divergent_ineligible`` (``eligible`` said no), ``divergent_parent_not_in_split`` and
        ``divergent_spare_left_out`` (past ``per_positive``).
    """
    from parasim.partition import seeded_key

    counts: Counter = Counter()
    ids = {cols["id"][i] for i, g in enumerate(cols["grade"]) if g == "equivalent"}
    by_parent: dict[str, list[int]] = {}
    for i, (g, parent) in enumerate(zip(cols["grade"], cols["parent_id"], strict=True)):
        if g != "divergent":
            continue
        if eligible is not None and not eligible(i):
            counts["divergent_ineligible"] += 1
        elif parent not in ids:
            counts["divergent_parent_not_in_split"] += 1
        else:
            by_parent.setdefault(parent, []).append(i)
    chosen: set[int] = set()
    for parent, rows in by_parent.items():
        rows.sort(key=lambda i: seeded_key(seed, tag, parent, cols["id"][i]))
        chosen.update(rows[:per_positive])
        counts["divergent_spare_left_out"] += max(0, len(rows) - per_positive)
    counts["divergent"] = len(chosen)
    keep = [i for i, g in enumerate(cols["grade"]) if g != "divergent" or i in chosen]
    return keep, counts
