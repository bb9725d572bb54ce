"""`parasim align`: the align stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger("parasim.align")


def cmd_align(args: argparse.Namespace) -> None:
    """Align one translated shard into positive sentence pairs."""
    from parasim.align import AlignSettings, align_pairs
    from parasim.io import read_table, write_table
    from parasim.stagecli import need, section_from_args, write_stats

    settings = AlignSettings.from_config(section_from_args(args, "align"))
    review_dir = Path(args.review_dir or settings.review_dir)
    translated = read_table(need(args.input, "translated shard"))
    positives, stats = align_pairs(translated, settings, review_dir, log=log)
    write_table(positives, args.output)
    write_stats(args.stats, {"stage": "positives", **stats})


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("align", cmd_align, "Align one translated shard into positive pairs.")
    site_opts(sp)
    sp.add_argument("--input", required=True, help="translated shard")
    sp.add_argument("--output", required=True, help="positives shard to write")
    sp.add_argument("--review-dir", help="review queue root (default: align.review_dir)")
