"""`parasim train-s3bert`: S3BERT's rule as a command (seed 002)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.train")


def cmd_train_s3bert(args: argparse.Namespace) -> None:
    """Train S3BERT (seed 002) on the scores stage's English sentence pairs and their aspects."""
    from parasim.stagecli import UsageError, need, section_from_args

    from .data import rows_from_scores
    from .training import train_s3bert

    section = section_from_args(args, "train")
    shards = [need(p, "scores shard") for p in args.scores]
    try:
        metrics = train_s3bert(rows_from_scores(shards), args.out, section, sts_dir=args.sts)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if metrics:
        log.info("mean Spearman: %s", json.dumps(metrics["mean_spearman"]))


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add S3BERT's command to the `parasim` parser."""
    sp = add(
        "train-s3bert",
        cmd_train_s3bert,
        "Train S3BERT (seed 002): AMR-aspect sub-embeddings from the scores stage's pairs.",
    )
    sp.add_argument("--scores", nargs="+", required=True, help="score shards (results/scores)")
    sp.add_argument("--sts", help="STSb-multi-mt folder for the forgetting check (optional)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/s3bert")
