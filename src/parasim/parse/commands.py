"""`parasim parse-pages` (rule ``parse_pages``): the parse stage as a command."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from typing import Any

from parasim.stats import Stats


def cmd_parse(args: argparse.Namespace) -> None:
    """Parse the page pairs of one shard into lines."""
    from parasim.io import read_table, write_table
    from parasim.parse.stage import ParsePagesSettings, parse_pairs
    from parasim.stagecli import need, section_from_args, site_from_args, write_stats

    site = site_from_args(args)
    settings = ParsePagesSettings.from_config(section_from_args(args, "parse"))
    pairs = read_table(need(args.pairs, "pairs shard"))
    pages = read_table(need(args.pages, "pages dataset"))
    lines, stats = parse_pairs(pairs, pages, site, settings)
    write_table(lines, args.out)
    write_stats(args.stats, parse_stats(stats, site.name))


def parse_stats(raw: Mapping[str, Any], site: str) -> Stats:
    """:func:`~parasim.parse.stage.parse_pairs`'s counts as the stage's stats.

    Rows in and out: page pairs; dropped: pairs skipped (page missing, HTML not parsed) or left
    out by ``parse.strict`` (unequal line counts, a side without text).
    """
    c = dict(raw)
    c.pop("site")
    dropped = dict(c.pop("skipped"))
    dropped["unequal_line_counts"] = c.pop("dropped_unequal")
    dropped["empty_side"] = c.pop("dropped_empty")
    return Stats(
        "parse",
        site=site,
        rows_in=c.pop("pairs_in"),
        rows_out=c.pop("pairs_out"),
        dropped=dropped,
        seconds={"total": c.pop("seconds")},
        figures={"pairs_per_s": c.pop("pairs_per_s")},
        counts=c,  # equal, unequal, empty_pairs, selector_*, lines per side and verdict
    )


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("parse-pages", cmd_parse, "HTML of paired pages to lines (one shard).")
    site_opts(sp)
    sp.add_argument("--pairs", required=True, help="pairs shard")
    sp.add_argument("--pages", required=True, help="pages dataset")
    sp.add_argument("--out", required=True, help="lines shard to write")
