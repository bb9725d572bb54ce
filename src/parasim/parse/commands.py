"""`parasim parse-pages` (rule ``parse_pages``): the parse stage as a command."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from parasim.stagecli import read_input, section_from_args, site_from_args, stage_job


def cmd_parse(args: argparse.Namespace) -> None:
    """Parse the page pairs of one shard into lines.

    Rows in and out: page pairs; dropped: pairs skipped (page missing, HTML not parsed) or left
    out by ``parse.strict`` (unequal line counts, a side without text).
    """
    from parasim.io import write_table
    from parasim.parse.stage import ParsePagesSettings, parse_pairs

    site = site_from_args(args)
    settings = ParsePagesSettings.from_config(section_from_args(args, "parse"))
    pairs = read_input(args.pairs, "pairs shard")
    pages = read_input(args.pages, "pages dataset")
    with stage_job("parse", args.stats, site=site.name) as rec:
        write_table(parse_pairs(pairs, pages, site, settings, rec=rec), args.out)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("parse-pages", cmd_parse, "HTML of paired pages to lines (one shard).")
    site_opts(sp)
    sp.add_argument("--pairs", required=True, help="pairs shard")
    sp.add_argument("--pages", required=True, help="pages dataset")
    sp.add_argument("--out", required=True, help="lines shard to write")
