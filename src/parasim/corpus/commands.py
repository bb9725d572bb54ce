"""`parasim build-corpus`: the corpus stage as a command.

Reads the positives of every site (as `parasim select-negatives` does), the negatives file and
the topics folder; writes the corpus shards and the dataset card (with the encoder and band the
negatives file carries, and the LDA topic count, coherence and passes of every partition).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from parasim.stats import Stats

log = logging.getLogger("parasim.corpus")


def cmd_build_corpus(args: argparse.Namespace) -> None:
    """Label, split, balance; Parquet shards and the dataset card."""
    from parasim.corpus.stage import build_corpus
    from parasim.io import NEGATIVES_SCHEMA, read_table
    from parasim.negatives import load_topics
    from parasim.negatives.commands import (
        SELECTION_KEY,
        config_sections,
        encoder_label,
        read_positives,
    )
    from parasim.partition import partition_column
    from parasim.stagecli import UsageError, need, read_stats, write_stats

    neg, corpus = config_sections(args)
    positives = read_positives(args.positives)
    negatives = read_table(need(args.negatives, "negatives file"))
    missing = sorted(set(NEGATIVES_SCHEMA.names) - set(negatives.column_names))
    if missing:
        raise UsageError(f"negatives file {args.negatives}: missing column(s) {missing}")
    raw = (negatives.schema.metadata or {}).get(SELECTION_KEY)
    selection = json.loads(raw) if raw else {}
    if not selection:
        log.warning("%s carries no selection summary: encoder/band from the config", args.negatives)
    topics_dir = need(args.topics, "topics folder")
    need(str(topics_dir / "topics.json"), "topics summary")
    topics = load_topics(topics_dir)
    meta = {
        "encoder": selection.get("encoder") or encoder_label(neg.encoder),
        "band": selection.get("band") or neg.select.band,
        "band_method": selection.get("band_method", {}),
        "topics": {
            p: {k: v.get(k) for k in ("num_topics", "coherence", "measure", "passes", "reason")}
            for p, v in topics.partitions.items()
        },
    }
    if args.clean_stats:
        cleaning = zip(args.clean_stats, read_stats(args.clean_stats), strict=True)
        meta["cleaning"] = {Path(path).stem: s.to_dict() for path, s in cleaning}
    t0 = time.perf_counter()
    stats = build_corpus(
        positives, negatives.select(NEGATIVES_SCHEMA.names), corpus, args.out, meta
    )
    pos_parts = set(partition_column(positives, corpus.partitions))
    empty = sorted(p for p in pos_parts if not stats["counts"].get(p))
    for p in empty:
        n_pos = sum(1 for q in partition_column(positives, corpus.partitions) if q == p)
        n_neg = sum(1 for q in negatives.column("partition").to_pylist() if q == p)
        log.warning(
            "partition %s: nothing to build (%d positives, %d negatives; a class missing in "
            "every split/fold cell is emptied by balancing)",
            p,
            n_pos,
            n_neg,
        )
    write_stats(args.stats, corpus_stats(stats, empty, time.perf_counter() - t0))
    if stats["rows"] == 0 and not args.allow_empty:
        raise UsageError(corpus_empty_reason(positives.num_rows, negatives.num_rows, empty))


def corpus_stats(raw: dict[str, Any], empty: list[str], seconds: float) -> Stats:
    """:func:`~parasim.corpus.stage.build_corpus`' counts as the stage's stats.

    Rows in: positives and hard negatives; out: corpus rows; dropped: by reason (a negative
    across the test/train split, a class balanced away, ...).
    """
    c = {k: v for k, v in raw.items() if k != "meta"}
    return Stats(
        "corpus",
        rows_in=c.pop("positives_in") + c.pop("negatives_in"),
        rows_out=c.pop("rows"),
        dropped=c.pop("dropped"),
        seconds={"total": round(seconds, 3)},
        counts={
            "positives_in": raw["positives_in"],
            "negatives_in": raw["negatives_in"],
            "rows_by_partition": c.pop("counts"),  # partition -> split -> label, train folds
            "negatives_across_folds": c.pop("negatives_across_folds"),
        },
        figures={**c, "empty_partitions": empty},  # schema version, shards, config, ...
    )


def corpus_empty_reason(n_positives: int, n_negatives: int, empty: list[str]) -> str:
    """One sentence on why the corpus has no rows, and where to look."""
    hint = " (or set `allow_empty: true` if an empty result is wanted)"
    if n_positives == 0:
        return (
            "0 corpus rows: the positives of every site are empty; the sites' `.done` targets "
            f"(results/positives/<site>.done) say why{hint}"
        )
    return (
        f"0 corpus rows from {n_positives} positives and {n_negatives} negatives: balancing "
        f"emptied every partition ({', '.join(empty) or 'none'}: a class is missing); see the "
        f"select-negatives stats{hint}"
    )


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    from parasim.negatives.commands import common_options

    sp = add("build-corpus", cmd_build_corpus, "Labelled corpus shards and dataset card.")
    common_options(sp)
    sp.add_argument("--negatives", required=True, help="negatives file (from select-negatives)")
    sp.add_argument("--topics", required=True, help="topics folder (from fit-topics)")
    sp.add_argument("--out", required=True, help="corpus folder to write")
    sp.add_argument(
        "--allow-empty",
        action="store_true",
        help="an empty corpus (empty shards, schema intact) is not an error",
    )
    sp.add_argument(
        "--clean-stats",
        nargs="*",
        default=[],
        help="the clean stage's stats per site, for the card",
    )
