"""`parasim align-lines` (rule ``align_lines``): the align stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from parasim.stats import Stats

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
    write_stats(args.stats, align_stats(stats))


#: Outcomes of a page pair that pass its sentence pairs on (``files_<outcome>`` in the counts).
KEPT_OUTCOMES = ("aligned", "reviewed", "realigned")


def align_stats(raw: Mapping[str, Any]) -> Stats:
    """:func:`~parasim.align.align_pairs`' counts as the stage's stats.

    Rows in: page pairs; out: aligned sentence pairs; dropped: the page pairs that gave none by
    their outcome (``queued_only``, ``discarded_<why>``, ``error``). ``files_queued`` counts the
    page pairs queued for review, realigned ones too: a count, not an outcome.
    """
    c = dict(raw)
    outcomes = [k for k in c if k.startswith("files_") and k not in ("files_in", "files_queued")]
    dropped = {k[6:]: c.pop(k) for k in outcomes if k[6:] not in KEPT_OUTCOMES}
    return Stats(
        "align",
        rows_in=c.pop("files_in", 0),
        rows_out=c.pop("positives", 0),
        dropped=dropped,
        seconds={"total": c.pop("seconds")},
        counts=c,  # files_<kept outcome>, positives_<method>, review_*, dp_*, center_*, ...
    )


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("align-lines", cmd_align, "Align one translated shard into positive pairs.")
    site_opts(sp)
    sp.add_argument("--input", required=True, help="translated shard")
    sp.add_argument("--output", required=True, help="positives shard to write")
    sp.add_argument("--review-dir", help="review queue root (default: align.review_dir)")
