"""`parasim crawl-site` (rule ``crawl_site``): the crawl stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

from parasim.stagecli import section_from_args, site_from_args, stage_job

log = logging.getLogger("parasim.crawl")


def cmd_crawl(args: argparse.Namespace) -> None:
    """Crawl one site into a pages dataset.

    Rows in: every URL the crawl met; out: the pages fetched; dropped: the URLs skipped (failed,
    or not requested), by reason.
    """
    from parasim.crawl.stage import CrawlSettings, crawl_site

    site = site_from_args(args)
    settings = CrawlSettings.from_config(section_from_args(args, "crawl"))
    with stage_job("crawl", args.stats, site=site.name) as rec:
        crawl_site(site, settings, Path(args.out), Path(args.state), log=log, rec=rec)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("crawl-site", cmd_crawl, "Crawl one site into a pages dataset (Parquet parts).")
    site_opts(sp)
    sp.add_argument("--out", required=True, help="output folder of Parquet parts")
    sp.add_argument("--state", required=True, help="crawl state folder (kept for resuming)")
