"""`parasim clean-positives` (rule ``clean_positives``): the clean stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.clean")


def cmd_clean(args: argparse.Namespace) -> None:
    """Clean the aligned shards of one site into positives and dropped pairs."""
    from parasim.clean import CleanSettings, clean_positives
    from parasim.io import read_table, write_table
    from parasim.stagecli import UsageError, need, section_from_args, write_stats
    from parasim.stats import Recorder

    n = len(args.aligned)
    for flag in ("translated", "out", "dropped"):
        if len(getattr(args, flag)) != n:
            raise UsageError(
                f"--{flag} names {len(getattr(args, flag))} files but --aligned names {n}"
            )
    settings = CleanSettings.from_config(section_from_args(args, "clean"))
    aligned = [read_table(need(p, "aligned shard")) for p in args.aligned]
    translated = [
        read_table(need(p, "translated shard"), columns=["pair_id", "en_lines", "other_lines"])
        for p in args.translated
    ]
    pairs = [read_table(need(p, "pairs shard")) for p in args.pairs or ()]
    rec = Recorder("clean")
    kept, dropped = clean_positives(aligned, translated, settings, rec, log=log, pairs=pairs)
    for table, path in zip(kept, args.out, strict=True):
        write_table(table, path)
    for table, path in zip(dropped, args.dropped, strict=True):
        write_table(table, path)
    write_stats(args.stats, rec.stats())


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
