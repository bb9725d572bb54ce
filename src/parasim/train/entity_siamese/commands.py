"""`parasim train-entity-siamese`: the entity-enriched Siamese model of seed 004."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.train")


def cmd_train_entity_siamese(args: argparse.Namespace) -> None:
    """Train and evaluate the entity-enriched Siamese model (a skipped model is not an error)."""
    from parasim.config import ConfigError
    from parasim.stagecli import UsageError, need, section_from_args

    from .training import train_entity_siamese

    section = section_from_args(args, "train")
    try:
        metrics = train_entity_siamese(
            need(args.corpus, "corpus folder"), args.scores or [], args.out, args.eval_out,
            section, args.sts,
        )  # fmt: skip
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if "skipped" not in metrics:
        log.info("test %s", json.dumps(metrics["test"], sort_keys=True))


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add `train-entity-siamese` to the `parasim` parser."""
    sp = add(
        "train-entity-siamese",
        cmd_train_entity_siamese,
        "Train the entity-enriched Siamese model (seed 004): encoder cosine + entity cosines "
        "-> MLP; corpus test and STSb cross-lingual evaluation.",
    )
    sp.add_argument("--corpus", required=True, help="the corpus folder (results/corpus)")
    sp.add_argument(
        "--scores", nargs="*", help="score shards (results/scores/<site>/<shard>.parquet)"
    )
    sp.add_argument("--sts", help="STSb-multi-mt folder (stsb-{en,fr,es}-dev.csv; optional)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/entity-siamese")
    sp.add_argument("--eval-out", required=True, help="eval folder, results/eval/entity-siamese")
