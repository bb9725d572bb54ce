"""`parasim train-divergence-ranker` and `parasim eval-divergence-ranker`: the ranker's rules
(``train_divergence_ranker``, ``eval_divergence_ranker``) as commands; ``train-ranker`` and
``eval-ranker`` are their former names, kept as aliases.

``train-divergence-ranker`` runs under a distributed launcher unchanged: ``accelerate launch
--multi_gpu --num_processes 4 -m parasim.cli train-divergence-ranker ...`` on GPUs, ``torchrun
--nproc_per_node 2 -m parasim.cli train-divergence-ranker ...`` on CPUs (gloo); the processes
train one model together and the main one writes the outputs.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("parasim.train")


def cmd_train_divergence_ranker(args: argparse.Namespace) -> None:
    """Train the divergence ranker on divergences shards; corpus test page pairs left out."""
    from parasim.config import validate_section
    from parasim.stagecli import UsageError, need, section_from_args

    from .data import test_split_pairs
    from .training import train_divergence_ranker

    section = section_from_args(args, "train")
    shards = [str(need(p, "divergences shard")) for p in args.divergences]
    test: set[str] = set()
    if args.positives:
        corpus = validate_section("corpus", json.loads(args.corpus_json or "{}"))
        test = test_split_pairs([need(p, "positives shard") for p in args.positives], corpus)
        log.info("corpus test split: %d page pairs left out of training", len(test))
    try:
        refresd = args.refresd if args.refresd and Path(args.refresd).is_dir() else None
        if args.refresd and refresd is None:
            log.info(
                "REFreSD not found at %s: the verdict is the synthetic dev split's", args.refresd
            )
        metrics = train_divergence_ranker(shards, args.out, section, test, refresd=refresd)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if metrics and "dev" in metrics:
        log.info("dev: %s", json.dumps(metrics["dev"]))


def cmd_eval_divergence_ranker(args: argparse.Namespace) -> None:
    """Evaluate a trained ranker on REFreSD dev; write the results JSON."""
    from parasim.stagecli import need, write_stats

    from .evaluate import evaluate_refresd

    res = evaluate_refresd(need(args.model, "ranker model folder"), need(args.refresd, "REFreSD"))
    write_stats(args.out, res)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the divergence ranker's commands to the `parasim` parser."""
    sp = add(
        "train-divergence-ranker",
        cmd_train_divergence_ranker,
        "Train the divergence ranker (seed 000 §3.3-3.4) on synthetic divergences.",
    )
    sp.add_argument("--divergences", nargs="+", required=True, help="divergences shards")
    sp.add_argument(
        "--positives", nargs="*", default=[], help="positives shards (for the corpus test split)"
    )
    sp.add_argument("--corpus-json", help="the corpus: config section as JSON (test split)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/<model>")
    sp.add_argument(
        "--refresd",
        help="REFreSD folder: the verdict is taken there when it exists (else the synthetic dev's)",
    )

    sp = add(
        "eval-divergence-ranker",
        cmd_eval_divergence_ranker,
        "Evaluate a divergence ranker on REFreSD dev.",
    )
    sp.add_argument("--model", required=True, help="the ranker's model/ folder")
    sp.add_argument("--refresd", required=True, help="REFreSD folder (sentence_labels.dev.tsv ...)")
    sp.add_argument("--out", required=True, help="results JSON to write")
