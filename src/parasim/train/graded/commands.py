"""`parasim train-graded-encoder`: the graded encoder's rule (``train_graded_encoder``) as a
command."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.train")


def cmd_train_graded_encoder(args: argparse.Namespace) -> None:
    """Fine-tune the encoder on the corpus's graded triples and measure it beside its untrained
    start (a skipped model is not an error)."""
    from parasim.config import ConfigError
    from parasim.stagecli import UsageError, need, section_from_args

    from .training import train_graded_encoder

    section = section_from_args(args, "train")
    try:
        metrics = train_graded_encoder(
            need(args.corpus, "corpus folder"), args.out, section, args.refresd, args.sts
        )
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if "skipped" not in metrics:
        log.info("verdict: %s", json.dumps(metrics["verdict"], sort_keys=True))


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add `train-graded-encoder` to the `parasim` parser."""
    sp = add(
        "train-graded-encoder",
        cmd_train_graded_encoder,
        "Fine-tune a sentence encoder on the corpus's graded triples (a ranking loss over "
        "the grades, train.graded.loss); REFreSD dev and STSb cross-lingual beside its "
        "untrained start.",
    )
    sp.add_argument("--corpus", required=True, help="the corpus folder (results/corpus)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/graded-encoder")
    sp.add_argument(
        "--refresd",
        help="REFreSD folder (sentence_labels.dev.tsv): the verdict's set; absent, the verdict "
        "says it was not measured",
    )
    sp.add_argument("--sts", help="STSb-multi-mt folder (stsb-{en,fr,es}-dev.csv; optional)")
