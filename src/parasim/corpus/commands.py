"""`parasim build-corpus`: the corpus stage as a command.

Reads the positives of every site (as `parasim select-negatives` does), the negatives file and
the topics folder; writes the corpus shards and the dataset card (with the encoder and band the
negatives file carries, and the LDA topic count, coherence and passes of every partition).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable, Sequence
from pathlib import Path

import pyarrow as pa

from parasim.corpus.graded import MINED_COLUMNS, SYNTHETIC_COLUMNS
from parasim.corpus.stage import build_corpus, corpus_meta
from parasim.io import DIVERGENCES_SCHEMA, MINED_SCHEMA, NEGATIVES_SCHEMA, sub_schema
from parasim.negatives.inputs import common_options, config_sections, read_positives
from parasim.negatives.stage import SELECTION_KEY
from parasim.negatives.topics import load_topics
from parasim.stagecli import UsageError, need, read_input, read_stats, stage_job

log = logging.getLogger("parasim.corpus")


def cmd_build_corpus(args: argparse.Namespace) -> None:
    """Label, split, balance; Parquet shards and the dataset card."""
    neg, corpus = config_sections(args.negatives_json, args.corpus_json)
    # The tables go into the call without a name here, so that build_corpus can let each one
    # go once its rows are read (its memory back before the hardness encoder loads).
    inputs = {"positives": read_positives(args.positives)}
    negatives = read_input(args.negatives, "negatives file", schema=NEGATIVES_SCHEMA)
    raw = (negatives.schema.metadata or {}).get(SELECTION_KEY)
    selection = json.loads(raw) if raw else {}
    if not selection:
        log.warning("%s carries no selection summary: encoder/band from the config", args.negatives)
    inputs["negatives"] = negatives.select(NEGATIVES_SCHEMA.names)
    del negatives
    topics_dir = need(args.topics, "topics folder")
    need(str(topics_dir / "topics.json"), "topics summary")
    topics = load_topics(topics_dir)
    cleaning = zip(args.clean_stats, read_stats(args.clean_stats), strict=True)
    meta = corpus_meta(selection, topics, neg, {Path(p).stem: s for p, s in cleaning})
    inputs["divergences"] = _tables(
        args.divergences, "divergences shard", DIVERGENCES_SCHEMA, SYNTHETIC_COLUMNS
    )
    inputs["mined"] = _tables(args.mined, "mined divergences file", MINED_SCHEMA, MINED_COLUMNS)
    n_positives, n_negatives = inputs["positives"].num_rows, inputs["negatives"].num_rows
    with stage_job("corpus", args.stats, rounding=3) as rec, rec.time("total"):
        build_corpus(
            inputs.pop("positives"),
            inputs.pop("negatives"),
            corpus,
            args.out,
            rec,
            meta,
            divergences=inputs.pop("divergences"),
            mined=inputs.pop("mined"),
        )
    if rec.rows_out == 0 and not args.allow_empty:  # its stats written: they say which is empty
        empty = rec.stats().figures["empty_partitions"]
        raise UsageError(corpus_empty_reason(n_positives, n_negatives, empty))


def _tables(
    paths: list[str] | None, what: str, schema: pa.Schema, columns: Sequence[str]
) -> pa.Table | None:
    """The ``columns`` of the files at ``paths``, typed as ``schema`` has them, as one table
    (None when no file is given); a file without one of them is named."""
    if not paths:
        return None
    typed = sub_schema(schema, columns)
    tables = [read_input(p, what, columns=columns, schema=schema) for p in paths]
    return pa.concat_tables([t.select(list(columns)).cast(typed) for t in tables])


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
        "--divergences",
        nargs="*",
        default=[],
        help="the divergences stage's shards (all sites): the divergent grade's synthetic rows",
    )
    sp.add_argument(
        "--mined",
        nargs="*",
        default=[],
        help="the mine stage's files (all sites): the divergent grade's mined rows",
    )
    sp.add_argument(
        "--clean-stats",
        nargs="*",
        default=[],
        help="the clean stage's stats per site, for the card",
    )
