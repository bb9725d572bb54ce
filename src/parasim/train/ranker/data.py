"""The ranker's data: ranking groups of the divergences shards, the synthetic dev split, and the
corpus test split's page pairs (left out).

Groups whose page pair is in the corpus test split (:func:`parasim.partition.assign_splits`) are
left out, and a seeded ``dev_fraction`` of the other groups is the synthetic dev split for early
stopping and for the decision threshold.
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

from .settings import RankerConfig

log = logging.getLogger("parasim.train")

#: Columns of a divergences shard the ranker reads.
COLUMNS = (
    "group_id", "pair_id", "type", "rank", "en_tokens", "other_tokens", "en_tags",
    "other_tags", "checks_failed",
)  # fmt: skip


class Item(NamedTuple):
    """One sentence pair with its word tags (True: DIV)."""

    en: tuple[str, ...]
    other: tuple[str, ...]
    en_div: tuple[bool, ...]
    other_div: tuple[bool, ...]
    rank: int


@dataclasses.dataclass
class RankerData:
    """Training pairs and the synthetic dev split.

    Attributes:
        items: every kept row, as :class:`Item`.
        train: contrastive pairs ``(x, y)`` as indices into ``items`` (x ranked above y).
        dev_groups: item indices of each dev ranking group.
        counts: rows, groups, pairs and every skip by reason.
    """

    items: list[Item]
    train: list[tuple[int, int]]
    dev_groups: list[list[int]]
    counts: Counter


def _tags_ok(tokens: Sequence[str], tags: Sequence[str] | None) -> bool:
    return bool(tokens) and tags is not None and len(tags) == len(tokens)


def _is_dev(group_id: str, seed: int, fraction: float) -> bool:
    from parasim.partition import seeded_key

    return int(seeded_key(seed, "dev", group_id)[:8], 16) / 0xFFFFFFFF < fraction


def usable_shards(files: Sequence[str | os.PathLike], counts: Counter) -> list[str]:
    """The shards that hold divergence rows; the others are a counted, logged skip."""
    import pyarrow.parquet as pq

    out = []
    for f in files:
        meta = pq.ParquetFile(f)
        missing = [c for c in COLUMNS if c not in meta.schema_arrow.names]
        if missing:
            counts["shards_without_groups"] += 1
            log.warning("skipped %s: no divergence groups (missing columns %s)", f, missing)
        elif meta.metadata.num_rows == 0:
            counts["shards_empty"] += 1
            log.info("skipped %s: no rows", f)
        else:
            out.append(str(f))
    return out


def ranker_data(
    files: Sequence[str | os.PathLike],
    test_pairs: Iterable[str] = (),
    cfg: RankerConfig | None = None,
    seed: int = 13,
) -> RankerData:
    """Read the divergences shards into training pairs and dev groups.

    Skips (counted in ``counts``, never raised): shards without divergence columns or rows, rows
    that failed a validity check, rows whose token tags are empty or do not match their tokens,
    groups of the corpus test split (``test_pairs``: page-pair ids), and groups left with no
    contrast (an equivalent row alone, or no equivalent row).
    """
    from pyarrow import Table

    from parasim.divergences import contrastive_pairs
    from parasim.train.core.data import consecutive_groups, load_parquet

    cfg = RankerConfig.from_config(cfg)
    test = set(test_pairs)
    counts: Counter = Counter()
    data = RankerData([], [], [], counts)
    files = usable_shards(files, counts)
    if not files:
        return data
    rows = load_parquet(files, COLUMNS, cfg.streaming)
    n_train_groups = 0
    for group in consecutive_groups(iter(rows), "group_id"):
        counts["rows"] += len(group)
        counts["groups"] += 1
        if group[0]["pair_id"] in test:
            counts["groups_test_split"] += 1
            continue
        kept = []
        for r in group:
            if r["checks_failed"]:
                counts["rows_failed_checks"] += 1
            elif not (
                _tags_ok(r["en_tokens"], r["en_tags"])
                and _tags_ok(r["other_tokens"], r["other_tags"])
            ):
                counts["rows_bad_tags"] += 1
            else:
                kept.append(r)
        ranks = {r["rank"] for r in kept}
        if 0 not in ranks or len(ranks) < 2:
            counts["groups_without_contrast"] += 1
            continue
        if cfg.max_groups is not None and n_train_groups >= cfg.max_groups:
            counts["groups_over_max_groups"] += 1
            continue
        base = len(data.items)
        index = {}
        for i, r in enumerate(kept):
            data.items.append(
                Item(
                    tuple(r["en_tokens"]),
                    tuple(r["other_tokens"]),
                    tuple(t == "DIV" for t in r["en_tags"]),
                    tuple(t == "DIV" for t in r["other_tags"]),
                    int(r["rank"]),
                )
            )
            index[f"{i}"] = base + i
        if _is_dev(group[0]["group_id"], seed, cfg.dev_fraction):
            data.dev_groups.append(list(range(base, base + len(kept))))
            counts["dev_groups"] += 1
            continue
        n_train_groups += 1
        counts["train_groups"] += 1
        table = Table.from_pylist(
            [
                {"id": str(i), "group_id": r["group_id"], "type": r["type"], "rank": r["rank"],
                 "checks_failed": []}
                for i, r in enumerate(kept)
            ]
        )  # fmt: skip
        for x, y in contrastive_pairs(table, mode="ranking"):
            data.train.append((index[x], index[y]))
    counts["train_pairs"] = len(data.train)
    counts["dev_rows"] = sum(len(g) for g in data.dev_groups)
    return data


def test_split_pairs(
    positives: Sequence[str | os.PathLike], corpus_cfg: Mapping | None
) -> set[str]:
    """Page-pair ids of the corpus test split (the same split the corpus stage writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parasim.partition import assign_splits

    tables = [pq.read_table(p, columns=["pair_id", "lang_pair", "domain"]) for p in positives]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return set()
    splits = assign_splits(pa.concat_tables(tables), corpus_cfg)
    return {pid for pid, (split, _) in splits.items() if split == "test"}
