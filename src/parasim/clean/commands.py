"""`parasim clean-positives` (rule ``clean_positives``): the clean stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

from parasim.stagecli import UsageError, read_input, section_from_args, stage_job

log = logging.getLogger("parasim.clean")


def cmd_clean(args: argparse.Namespace) -> None:
    """Clean the aligned shards of one site into positives and dropped pairs."""
    from parasim.clean import CleanSettings, clean_positives
    from parasim.io import write_table

    n = len(args.aligned)
    for flag in ("translated", "out", "dropped"):
        if len(getattr(args, flag)) != n:
            raise UsageError(
                f"--{flag} names {len(getattr(args, flag))} files but --aligned names {n}"
            )
    settings = CleanSettings.from_config(section_from_args(args, "clean"))
    aligned = [read_input(p, "aligned shard") for p in args.aligned]
    translated = [
        read_input(p, "translated shard", columns=["pair_id", "en_lines", "other_lines"])
        for p in args.translated
    ]
    pairs = [read_input(p, "pairs shard") for p in args.pairs or ()]
    with stage_job("clean", args.stats) as rec:
        kept, dropped = clean_positives(aligned, translated, settings, rec, log=log, pairs=pairs)
        for table, path in zip([*kept, *dropped], [*args.out, *args.dropped], strict=True):
            write_table(table, path)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add(
        "clean-positives", cmd_clean, "Clean a site's aligned pairs: rules, language, duplicates."
    )
    site_opts(sp)
    sp.add_argument("--aligned", nargs="+", required=True, help="the site's aligned shards")
    sp.add_argument("--translated", nargs="+", required=True, help="its translated shards")
    sp.add_argument(
        "--pairs",
        nargs="+",
        help="its page pairs (the page languages the pair stage measured: untranslated pages)",
    )
    sp.add_argument("--out", nargs="+", required=True, help="positives shards to write")
    sp.add_argument("--dropped", nargs="+", required=True, help="dropped-pair shards to write")
