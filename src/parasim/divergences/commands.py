"""`parasim make-divergences` (rule ``make_divergences``): the divergences stage as a command.

The site's dataset card is the stage's `.done` extra ``card``
(:func:`~parasim.divergences.stage.write_site_card`, written by ``parasim summarize``).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.divergences")


def cmd_divergences(args: argparse.Namespace) -> None:
    """Perturb one positives shard into one divergences shard (eflomal aligns it at once).

    Its stats: rows in, the positives; out, the divergence rows (a ranking group of several
    rows per seed kept); dropped, the positives that gave no group, by reason.
    """
    from parasim.divergences import DivergencesSettings, make_divergences
    from parasim.io import read_table, write_table
    from parasim.stagecli import UsageError, need, section_from_args, write_stats
    from parasim.stats import Recorder

    settings = DivergencesSettings.from_config(section_from_args(args, "divergences"))
    positives = read_table(need(args.input, "positives shard"))
    rec = Recorder("divergences")
    try:
        table = make_divergences(positives, rec, settings, log=log)
    except ValueError as exc:  # missing columns or a bad config: name the file
        raise UsageError(f"{args.input}: {exc}") from None
    write_table(table, args.output)
    write_stats(args.stats, rec.stats(rounding=3))


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
