"""`parasim fit-topics`, `parasim select-negatives`: the topics and negatives stages as commands.

Both (and `parasim build-corpus`, :mod:`parasim.corpus.commands`) read the positives of every
site (several shard files), concatenated and sorted by ``id`` so that the result does not depend
on the order the files are given in (:mod:`parasim.negatives.inputs`). Settings come from the
``negatives`` and ``corpus`` config sections as JSON (Snakemake passes them); absent sections
take the schema's defaults.

The workflow runs them a partition at a time: `parasim fit-topics-partition` and
`parasim select-negatives-partition` (one job per partition, reading the positives of its sites),
then `fit-topics --from-partitions` and `select-negatives --from-partitions` gather the parts.
Given ``--positives``, `fit-topics` and `select-negatives` do every partition in one job, through
the same per-partition functions and the same gather (:mod:`parasim.negatives.stage`): the same
files. The commands parse their arguments, read and write the files, and call the stage.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from parasim.io import write_table
from parasim.negatives.inputs import common_options, config_sections, read_positives
from parasim.negatives.stage import (
    NegativesJob,
    NegativesPart,
    encoder_info,
    negatives_gather,
    negatives_partitions,
    topics_gather,
    topics_partitions,
)
from parasim.negatives.topics import TopicsResult, load_partition_topics, load_topics
from parasim.stagecli import UsageError, need, read_input, stage_job


def _job(args: argparse.Namespace) -> NegativesJob:
    """The settings of the command: the config sections, ``--threads``, ``--cache-dir``."""
    neg, corpus = config_sections(args.negatives_json, args.corpus_json)
    cache = getattr(args, "cache_dir", None)
    return NegativesJob(neg, corpus, args.threads, Path(cache) if cache else None)


def cmd_fit_topics(args: argparse.Namespace) -> None:
    """LDA per partition over the topic counts; the most coherent model kept.

    With ``--positives``: every partition in this one job. With ``--from-partitions``: only the
    gather, from the folders ``fit-topics-partition`` wrote (the same files as one job).
    """
    job = _job(args)
    if bool(args.positives) == bool(args.from_partitions):
        raise UsageError("fit-topics: give --positives (one job) or --from-partitions (gather)")
    with stage_job("topics", args.stats, rounding=3) as rec, rec.time("total"):
        if args.positives:
            parts = topics_partitions(read_positives(args.positives), job, args.out)
        else:
            parts = args.from_partitions
        topics_gather(args.out, parts, job, rec)


def cmd_fit_topics_partition(args: argparse.Namespace) -> None:
    """LDA of one partition (a job of its own; ``fit-topics --from-partitions`` gathers)."""
    job = _job(args)
    topics_partitions(read_positives(args.positives), job, args.out, only=args.partition)


def _read_topics(path: str, only: str | None) -> TopicsResult:
    """The topics folder's topics (``topics.json``), or those of partition ``only``."""
    topics_dir = need(path, "topics folder")
    if only:
        need(str(topics_dir / only / "partition.json"), "topics")
        return load_partition_topics(topics_dir, only)
    need(str(topics_dir / "topics.json"), "topics summary")
    return load_topics(topics_dir)


def _select(args: argparse.Namespace, only: str | None) -> tuple[list[NegativesPart], dict]:
    """The partitions' negatives of the positives given (all, or ``only``), and the encoder's
    :func:`~parasim.negatives.stage.encoder_info`."""
    job = _job(args)
    positives, shard = read_positives(args.positives, with_shards=True)
    topics = _read_topics(args.topics, only)
    return negatives_partitions(positives, shard, topics, job, only), encoder_info(job.encoder)


def cmd_select_negatives(args: argparse.Namespace) -> None:
    """Sentence vectors, the cosine band per partition, and Algorithm 1.

    With ``--positives``: every partition in this one job. With ``--from-partitions``: only the
    gather of the parts ``select-negatives-partition`` wrote (the same file as one job).
    """
    if bool(args.positives) == bool(args.from_partitions):
        raise UsageError(
            "select-negatives: give --positives (one job) or --from-partitions (gather)"
        )
    if args.positives:
        if not args.topics:
            raise UsageError("select-negatives: --topics is needed with --positives")
        parts, encoder = _select(args, None)
    else:
        parts = []
        for name in args.from_partitions:
            t = read_input(Path(args.parts) / f"{name}.parquet", "negatives part")
            parts.append(NegativesPart.from_table(name, t))
        encoder = parts[0].record["encoder"]
        parts.sort(key=lambda p: p.name)
    with stage_job("negatives", args.stats, rounding=4) as rec:
        write_table(negatives_gather(parts, encoder, rec), args.out)


def cmd_select_negatives_partition(args: argparse.Namespace) -> None:
    """One partition's negatives (a job of its own; ``select-negatives --from-partitions``
    gathers)."""
    [part], encoder = _select(args, args.partition)
    write_table(part.to_table(encoder), args.out)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""

    sp = add("fit-topics", cmd_fit_topics, "LDA topics per partition (most coherent model kept).")
    common_options(sp, positives_required=False)
    sp.add_argument("--out", required=True, help="topics folder to write")
    sp.add_argument(
        "--from-partitions",
        nargs="+",
        help="gather these partitions' folders under --out (from fit-topics-partition) "
        "instead of fitting",
    )
    sp.add_argument(
        "--threads", type=int, help="processes across topic counts (overrides topics.workers)"
    )

    sp = add("fit-topics-partition", cmd_fit_topics_partition, "LDA topics of one partition.")
    common_options(sp)
    sp.add_argument("--partition", required=True, help="the partition to fit")
    sp.add_argument("--out", required=True, help="topics folder (gets <partition>/)")
    sp.add_argument(
        "--threads", type=int, help="processes across topic counts (overrides topics.workers)"
    )

    sp = add("select-negatives", cmd_select_negatives, "Hard negatives (Algorithm 1).")
    common_options(sp, positives_required=False)
    sp.add_argument("--topics", help="topics folder (from fit-topics), with --positives")
    sp.add_argument("--out", required=True, help="negatives file to write (.parquet)")
    sp.add_argument("--cache-dir", help="sentence-vector cache folder")
    sp.add_argument(
        "--from-partitions",
        nargs="+",
        help="gather these partitions' parts (from select-negatives-partition) from --parts "
        "instead of selecting",
    )
    sp.add_argument("--parts", help="folder of the partitions' parts (<partition>.parquet)")
    sp.add_argument(
        "--threads",
        type=int,
        help="torch threads and topic blocks at once (overrides encoder.threads, select.threads)",
    )

    sp = add(
        "select-negatives-partition",
        cmd_select_negatives_partition,
        "Hard negatives (Algorithm 1) of one partition.",
    )
    common_options(sp)
    sp.add_argument("--partition", required=True, help="the partition to select in")
    sp.add_argument("--topics", required=True, help="topics folder (gets <partition>/)")
    sp.add_argument("--out", required=True, help="the partition's part to write (.parquet)")
    sp.add_argument("--cache-dir", help="sentence-vector cache folder")
    sp.add_argument(
        "--threads",
        type=int,
        help="torch threads and topic blocks at once (overrides encoder.threads, select.threads)",
    )
