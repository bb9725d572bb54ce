"""Partitions and grouped splits of the positives: what the negatives and the corpus share.

A partition is a language pair and a group of domains (the paper's EN-FR-G, EN-FR-IB, EN-ES-IB).
Page pairs are split, per partition, into test and train and into validation folds over train,
grouped by page pair (:func:`assign_splits`). The hard negatives are drawn within a split
(:func:`split_groups`), and the corpus writes the same splits, so both read them from here, with
the ``corpus:`` config section (:class:`CorpusConfig`) that sets them.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from parasim.config import Settings

log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class DivergentSettings(Settings, section="corpus.divergent"):
    """The ``corpus.divergent`` config section (what each key means: the schema)."""

    synthetic: bool
    mined: bool
    mined_per_positive: int


@dataclasses.dataclass(frozen=True)
class HardnessSettings(Settings, section="corpus.hardness"):
    """The ``corpus.hardness`` config section (what each key means: the schema)."""

    encoder: str | None
    sample: int


@dataclasses.dataclass(frozen=True)
class CorpusConfig(Settings, section="corpus"):
    """The ``corpus:`` config section.

    Attributes:
        partitions: partition name -> {"lang_pair": "en-fr", "domains": [...]} (the schema's
            default: the paper's EN-FR-G, EN-FR-IB, EN-ES-IB). Rows matching no entry form a
            partition named ``EN-FR-<domain>`` of their own.
        test_fraction: share of a partition's rows (whole page pairs) held out as test.
        min_test_pairs: page pairs the test split holds at least (when ``test_fraction`` > 0 and
            the partition has a page pair more than that for train). Hard negatives are drawn
            within a split (``negatives.select.within``), from *other* page pairs: a test split
            of one page pair gets none, and balancing then empties it.
        folds: validation folds over train, grouped by page pair (paper: 10).
        seed: seed of the split and of class balancing.
        balance: "downsample" (majority class down-sampled per partition/split/fold) or "none".
        row_group_size: rows per Parquet row group (small enough to stream).
        max_rows_per_shard: rows per file before a split is cut into several shards.
        divergent: the divergent grade's sources (:class:`DivergentSettings`).
        hardness: the untrained encoder that measures each grade (:class:`HardnessSettings`).
    """

    partitions: Mapping[str, Mapping[str, Any]]
    test_fraction: float
    min_test_pairs: int
    folds: int
    seed: int
    balance: str
    row_group_size: int
    max_rows_per_shard: int
    divergent: DivergentSettings
    hardness: HardnessSettings

    def __post_init__(self) -> None:
        if not 0 <= self.test_fraction < 1:
            raise ValueError(f"corpus.test_fraction: must be in [0, 1), got {self.test_fraction}")
        if self.min_test_pairs < 1:
            raise ValueError(f"corpus.min_test_pairs: must be >= 1, got {self.min_test_pairs}")
        if self.folds < 1:
            raise ValueError(f"corpus.folds: must be >= 1, got {self.folds}")
        if self.balance not in ("downsample", "none"):
            raise ValueError(f"corpus.balance: 'downsample' or 'none', got {self.balance!r}")


def partition_of(lang_pair: str, domain: str, partitions: Mapping[str, Mapping[str, Any]]) -> str:
    """The partition name of a (language pair, domain); unmatched pairs get ``EN-FR-<domain>``."""
    for name, spec in partitions.items():
        if spec.get("lang_pair") == lang_pair and domain in spec.get("domains", ()):
            return name
    return f"{lang_pair.upper()}-{domain}"


def site_partitions(
    sites: Sequence[Mapping[str, Any]], partitions: Mapping[str, Mapping[str, Any]]
) -> dict[str, list[str]]:
    """Partition -> the sites whose positives fall in it, from the config alone.

    A site's positives have ``lang_pair`` ``en-<lang>`` for each of its languages other than
    English, and its ``domain``: the partitions are known before any positive exists (the
    workflow builds its per-partition jobs from this). Sorted by partition name.

    Args:
        sites: the config's ``sites`` (``name``, ``languages``, ``domain``).
        partitions: the ``corpus.partitions`` mapping.
    """
    out: dict[str, list[str]] = defaultdict(list)
    for site in sites:
        for lang in site["languages"]:
            if lang != "en":
                part = partition_of(f"en-{lang}", site["domain"], partitions)
                if site["name"] not in out[part]:
                    out[part].append(site["name"])
    return dict(sorted(out.items()))


def partition_column(table: pa.Table, partitions: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The partition name of every row of a table with ``lang_pair`` and ``domain`` columns."""
    lp = table.column("lang_pair").to_pylist()
    dom = table.column("domain").to_pylist()
    cache: dict[tuple[str, str], str] = {}
    out = []
    for key in zip(lp, dom, strict=True):
        if key not in cache:
            cache[key] = partition_of(key[0], key[1], partitions)
        out.append(cache[key])
    return out


def seeded_key(seed: int, *parts: str) -> str:
    """A stable hash of ``parts`` under ``seed``: the seeded order of splits and balancing."""
    return hashlib.sha1("\x1f".join((str(seed), *parts)).encode("utf-8")).hexdigest()


def assign_splits(
    positives: pa.Table, cfg: CorpusConfig | Mapping[str, Any] | None = None
) -> dict[str, tuple[str, int | None]]:
    """Split and fold of every page pair, grouped, per partition.

    Page pairs are ordered by a seeded hash; test takes pairs in that order until it holds
    ``test_fraction`` of the partition's rows and at least ``min_test_pairs`` pairs (never the
    partition's last pair); the rest go to the fold with the fewest rows so far (ties: lowest
    fold), like scikit-learn's GroupKFold.

    Returns:
        pair_id -> ("test", None) or ("train", fold).
    """
    cfg = CorpusConfig.from_config(cfg)
    parts = partition_column(positives, cfg.partitions)
    sizes: dict[str, Counter] = defaultdict(Counter)
    for part, pid in zip(parts, positives.column("pair_id").to_pylist(), strict=True):
        sizes[part][pid] += 1
    out: dict[str, tuple[str, int | None]] = {}
    for part in sorted(sizes):
        pairs = sorted(sizes[part], key=lambda p: seeded_key(cfg.seed, "split", p))
        total = sum(sizes[part].values())
        n_test_rows = n_test_pairs = 0
        rest = []
        for i, pid in enumerate(pairs):
            last = i == len(pairs) - 1
            wants_test = cfg.test_fraction > 0 and (
                n_test_rows < cfg.test_fraction * total or n_test_pairs < cfg.min_test_pairs
            )
            if wants_test and not (last and not rest):
                out[pid] = ("test", None)
                n_test_rows += sizes[part][pid]
                n_test_pairs += 1
                continue
            rest.append(pid)
        fold_rows = [0] * cfg.folds
        for pid in rest:
            f = min(range(cfg.folds), key=lambda k: (fold_rows[k], k))
            out[pid] = ("train", f)
            fold_rows[f] += sizes[part][pid]
        if len(rest) < cfg.folds:
            log.warning(
                "partition %s: %d train page pairs for %d folds; %d fold(s) stay empty",
                part,
                len(rest),
                cfg.folds,
                cfg.folds - len(rest),
            )
    return out


def split_groups(
    positives: pa.Table, cfg: CorpusConfig | Mapping[str, Any] | None = None, by: str = "split"
) -> dict[str, str]:
    """Group label per page pair for :func:`select_negatives`' ``within`` restriction.

    Args:
        by: "split" (test / train) or "fold" (test / train-0 / train-1 ...).
    """
    splits = assign_splits(positives, cfg)
    if by == "split":
        return {p: s for p, (s, _) in splits.items()}
    if by == "fold":
        return {p: s if f is None else f"{s}-{f}" for p, (s, f) in splits.items()}
    raise ValueError(f"by: 'split' or 'fold', got {by!r}")
