"""`parasim clean-positives` (rule ``clean_positives``): the clean stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from typing import Any

from parasim.stats import Stats

log = logging.getLogger("parasim.clean")


def cmd_clean(args: argparse.Namespace) -> None:
    """Clean the aligned shards of one site into positives and dropped pairs."""
    from parasim.clean import CleanSettings, clean_positives
    from parasim.io import read_table, write_table
    from parasim.stagecli import UsageError, need, section_from_args, write_stats

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
    kept, dropped, stats = clean_positives(aligned, translated, settings, log=log, pairs=pairs)
    for table, path in zip(kept, args.out, strict=True):
        write_table(table, path)
    for table, path in zip(dropped, args.dropped, strict=True):
        write_table(table, path)
    write_stats(args.stats, clean_stats(stats))


def clean_stats(raw: Mapping[str, Any]) -> Stats:
    """:func:`~parasim.clean.clean_positives`' counts as the stage's stats.

    Rows in: aligned pairs; out: positives; dropped: by reason (a rule, ``wrong_language_<side>``,
    ``untranslated``, ``duplicate``, ``furniture``), every reason the stage counts as
    ``dropped_<reason>``. The counts hold ``overruled_<reason>`` (kept by the decision over that
    flag) and ``page_pairs_untranslated``.

    Raises:
        ValueError: the reasons do not add up to the stage's own total of drops.
    """
    c = dict(raw)
    dropped = {k[len("dropped_") :]: c.pop(k) for k in list(c) if k.startswith("dropped_")}
    total = c.pop("dropped")
    if total != sum(dropped.values()):
        raise ValueError(f"clean: {total} pairs dropped but the reasons add up to {dropped}")
    return Stats(
        "clean",
        rows_in=c.pop("aligned_in"),
        rows_out=c.pop("kept"),
        dropped=dropped,
        seconds={"total": c.pop("seconds")},
        figures={"pairs_per_s": c.pop("pairs_per_s")},
        counts=c,  # page_pairs, langid_<side>_<verdict>, furniture_pairs, overruled_<reason>,
        # vouched_by_template, vouched_by_markup
    )


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
