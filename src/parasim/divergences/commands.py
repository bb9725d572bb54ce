"""`parasim make-divergences` (rule ``make_divergences``): the divergences stage as a command.

The site's dataset card is the stage's `.done` extra ``card``
(:func:`~parasim.divergences.stage.write_site_card`, written by ``parasim summarize``).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from parasim.stagecli import read_input, section_from_args, stage_job

log = logging.getLogger("parasim.divergences")


def cmd_divergences(args: argparse.Namespace) -> None:
    """Perturb one positives shard into one divergences shard (eflomal aligns it at once).

    Its stats: rows in, the positives; out, the divergence rows (a ranking group of several
    rows per seed kept); dropped, the positives that gave no group, by reason.
    """
    from parasim.divergences import DivergencesSettings, make_divergences
    from parasim.io import write_table

    settings = DivergencesSettings.from_config(section_from_args(args, "divergences"))
    positives = read_input(args.input, "positives shard")
    # missing columns or a bad config (a ValueError of the stage): one sentence naming the file
    with stage_job("divergences", args.stats, culprit=args.input, rounding=3) as rec:
        write_table(make_divergences(positives, rec, settings, log=log), args.output)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add(
        "make-divergences",
        cmd_divergences,
        "Synthetic divergences (ranking groups, EQ/DIV tags) of one positives shard.",
    )
    site_opts(sp)
    sp.add_argument("--input", required=True, help="positives shard")
    sp.add_argument("--output", required=True, help="divergences shard to write")
