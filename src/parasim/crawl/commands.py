"""`parasim crawl-site` (rule ``crawl_site``): the crawl stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from parasim.stats import Stats

log = logging.getLogger("parasim.crawl")


def cmd_crawl(args: argparse.Namespace) -> None:
    """Crawl one site into a pages dataset."""
    from parasim.crawl.stage import CrawlSettings, crawl_site
    from parasim.stagecli import section_from_args, site_from_args, write_stats

    site = site_from_args(args)
    settings = CrawlSettings.from_config(section_from_args(args, "crawl"))
    stats = crawl_site(site, settings, Path(args.out), Path(args.state), log=log)
    write_stats(args.stats, crawl_stats(stats, site.name))


def crawl_stats(raw: Mapping[str, Any], site: str) -> Stats:
    """:func:`~parasim.crawl.crawl_site`'s counts as the stage's stats.

    Rows in: every URL the crawl met; out: the pages fetched; dropped: the URLs skipped (failed,
    or not requested), by reason.
    """
    c = dict(raw)
    ok, skipped = c.pop("pages_ok"), c.pop("pages_skipped_by_reason")
    return Stats(
        "crawl",
        site=site,
        rows_in=ok + sum(skipped.values()),
        rows_out=ok,
        dropped=skipped,
        seconds={"crawl": c.pop("crawl_s"), "total": c.pop("elapsed_s")},
        figures={k: c.pop(k) for k in ("depth_reached", "pages_per_s", "peak_rss_mb")},
        counts=c,  # rows (the pages dataset's, failed URLs too), requests, fetched_pages, ...
    )


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("crawl-site", cmd_crawl, "Crawl one site into a pages dataset (Parquet parts).")
    site_opts(sp)
    sp.add_argument("--out", required=True, help="output folder of Parquet parts")
    sp.add_argument("--state", required=True, help="crawl state folder (kept for resuming)")
