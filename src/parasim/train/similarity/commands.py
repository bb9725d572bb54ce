"""`parasim train-similarity`, `parasim eval-similarity-msrp`, `parasim similarity-report`: the
similarity models' rules as commands (``similarity-table``: the report's former name, an alias)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.train")


def cmd_train_similarity(args: argparse.Namespace) -> None:
    """Seed 001's protocol for one encoder and training partition."""
    from parasim.config import ConfigError, validate_section
    from parasim.stagecli import UsageError, need, section_from_args

    from .training import train_similarity

    section = section_from_args(args, "train")
    corpus = validate_section("corpus", json.loads(args.corpus_json or "{}"))
    try:
        metrics = train_similarity(
            need(args.corpus, "corpus folder"), args.out, args.eval_out, args.encoder,
            args.partition, section, corpus,
        )  # fmt: skip
    except (ConfigError, ValueError) as exc:
        raise UsageError(str(exc)) from None
    if "skipped" not in metrics:
        log.info("cv %s", json.dumps(metrics["cv"]["mean"]))


def cmd_eval_similarity_msrp(args: argparse.Namespace) -> None:
    """MSRP zero-shot, transfer and from-scratch accuracies of a similarity model."""
    from parasim.config import ConfigError
    from parasim.stagecli import UsageError, need, section_from_args, write_stats

    from .msrp import evaluate_msrp

    section = section_from_args(args, "train")
    metrics_file = need(args.model, "similarity model folder").parent / "metrics.json"
    if metrics_file.exists():
        skipped = json.loads(metrics_file.read_text("utf-8")).get("skipped")
        if skipped:
            write_stats(args.out, {"model": str(args.model), "skipped": skipped})
            return
    try:
        res = evaluate_msrp(args.model, need(args.msrp, "MSRP folder (eval.msrp_dir)"), section)
    except (ConfigError, ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from None
    write_stats(args.out, res)


def cmd_similarity_report(args: argparse.Namespace) -> None:
    """The seed-001 results tables (Tables 4-6 layout) from the models' eval JSONs."""
    from parasim.stagecli import write_stats

    from .report import similarity_tables

    html, summary = similarity_tables(args.eval_dirs)
    from pathlib import Path

    out = Path(args.html)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(out)
    write_stats(args.json, summary)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the similarity-model commands to the `parasim` parser."""
    sp = add(
        "train-similarity",
        cmd_train_similarity,
        "Train a seed-001 similarity model on one corpus partition: k-fold CV, voting, tests.",
    )
    sp.add_argument("--corpus", required=True, help="the corpus folder (results/corpus)")
    sp.add_argument("--encoder", required=True, choices=["bilstm", "biencoder"])
    sp.add_argument("--partition", required=True, help="training partition, e.g. EN-FR-G")
    sp.add_argument("--corpus-json", help="the corpus: config section as JSON (partitions)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/similarity-...")
    sp.add_argument("--eval-out", required=True, help="eval folder, results/eval/similarity-...")

    sp = add(
        "eval-similarity-msrp",
        cmd_eval_similarity_msrp,
        "MSRP transfer of a similarity model (seed 001 Tables 5-6).",
    )
    sp.add_argument("--model", required=True, help="the model's model/ folder")
    sp.add_argument("--msrp", required=True, help="folder with msr_paraphrase_{train,test}.txt")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="results JSON to write")

    sp = add(
        "similarity-report",
        cmd_similarity_report,
        "Seed 001's results tables (CV, voting, cross-corpus, MSRP) from eval folders.",
    )
    sp.add_argument("--eval-dirs", nargs="+", required=True, help="results/eval/similarity-*")
    sp.add_argument("--html", required=True, help="the report table (HTML)")
    sp.add_argument("--json", required=True, help="the same figures as JSON")
