"""`parasim models-table`: the table of every trained model (rule models_table)."""

from __future__ import annotations

import argparse


def cmd_models_table(args: argparse.Namespace) -> None:
    """Write the models table and print it."""
    from pathlib import Path

    from .table import models_table

    models_table(args.metrics, args.out, args.json, args.models_dir)
    print(Path(args.out).read_text(encoding="utf-8"))


def register(add, site_opts) -> None:
    """Add the command to the CLI."""
    sp = add(
        "models-table",
        cmd_models_table,
        "One table of every trained model: figure, untrained baseline, bootstrap CI, verdict.",
    )
    sp.add_argument("--metrics", nargs="+", required=True, help="the models' metrics.json files")
    sp.add_argument("--out", required=True, help="the table (Markdown), results/models/README.md")
    sp.add_argument("--json", required=True, help="the same rows as JSON")
    sp.add_argument("--models-dir", help="results/models: prune its weight store, report its size")
