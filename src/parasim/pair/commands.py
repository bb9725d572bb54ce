"""`parasim pair-pages` (rule ``pair_pages``): the pair stage as a command."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable

from parasim.stagecli import UsageError, read_input, site_from_args, stage_job


def cmd_pair(args: argparse.Namespace) -> None:
    """Pair the pages of one site; write one file per shard.

    Rows in: each English page once per other language; out: the page pairs; dropped: the
    English pages left without a counterpart in a language, by reason. Seconds ``total``: the
    pairing and the writing of the shards.
    """
    import pyarrow.compute as pc

    from parasim.io import write_table
    from parasim.pair.stage import UntranslatedPagesSettings, pair_pages

    site = site_from_args(args)
    if len(args.out) != args.shards:
        raise UsageError(f"--out names {len(args.out)} files but --shards is {args.shards}")
    pages = read_input(args.pages, "pages dataset")
    t0 = time.perf_counter()
    untranslated = (
        UntranslatedPagesSettings.from_config(json.loads(args.untranslated_json))
        if args.untranslated_json
        else None
    )
    content = json.loads(args.content_json) if args.content_json else None
    alternates = _sitemap_alternates(args.pages) if "sitemap" in site.evidence else []
    static = (json.loads(args.align_json) or {}).get("static") if args.align_json else None
    with stage_job("pair", args.stats, site=site.name) as rec:
        pairs = pair_pages(
            pages,
            site,
            args.shards,
            rec=rec,
            one_to_one=site.one_to_one,
            untranslated=untranslated,
            content=content,
            static=static,
            alternates=alternates,
        )
        for i, out in enumerate(args.out):  # no pair at all: every shard is a valid empty table
            write_table(pairs.filter(pc.equal(pairs.column("shard"), i)), out)
        rec.seconds("total", round(time.perf_counter() - t0, 3))


def _sitemap_alternates(pages: str) -> list[list[str]]:
    """The crawl's sitemap alternates beside its pages (``sitemap`` evidence).

    Raises:
        UsageError: the file is missing (a crawl without ``sitemaps: true``) or unreadable.
    """
    from pathlib import Path

    from parasim.crawl.sitemap import ALTERNATES_FILE

    path = Path(pages) / ALTERNATES_FILE
    try:
        rows = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path}: not found: the site's pairing.evidence holds sitemap, and the crawl "
            "writes the sitemaps' alternates only with sitemaps: true (crawl it again)"
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: not the sitemaps' alternates ({exc})") from None
    if not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 3 for r in rows):
        raise UsageError(f"{path}: not the sitemaps' alternates (a list of [page, hreflang, URL])")
    return rows


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("pair-pages", cmd_pair, "Pair parallel pages of one site; write N shards.")
    site_opts(sp)
    sp.add_argument("--pages", required=True, help="pages dataset (folder or file)")
    sp.add_argument("--shards", type=int, required=True, help="number of shards")
    sp.add_argument("--out", nargs="+", required=True, help="one output file per shard, in order")
    sp.add_argument(
        "--untranslated-json",
        help="clean.untranslated_pages settings as JSON: measure page languages and leave out "
        "untranslated page pairs (default: not measured)",
    )
    sp.add_argument(
        "--content-json",
        help="content_pairing settings as JSON, for a site whose evidence holds content "
        "(default: the schema's)",
    )
    sp.add_argument(
        "--align-json", help="align settings as JSON: align.static, for the e5-static encoder"
    )
