"""`parasim pair-pages` (rule ``pair_pages``): the pair stage as a command."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from parasim.stats import Stats


def cmd_pair(args: argparse.Namespace) -> None:
    """Pair the pages of one site; write one file per shard."""
    import pyarrow.compute as pc

    from parasim.io import read_table, write_table
    from parasim.pair.stage import UntranslatedPagesSettings, pair_pages
    from parasim.stagecli import UsageError, need, site_from_args, write_stats

    site = site_from_args(args)
    if len(args.out) != args.shards:
        raise UsageError(f"--out names {len(args.out)} files but --shards is {args.shards}")
    pages = read_table(need(args.pages, "pages dataset"))
    t0 = time.perf_counter()
    untranslated = (
        UntranslatedPagesSettings.from_config(json.loads(args.untranslated_json))
        if args.untranslated_json
        else None
    )
    pairs, stats = pair_pages(
        pages, site, args.shards, one_to_one=site.one_to_one, untranslated=untranslated
    )
    for i, out in enumerate(args.out):  # no pair at all: every shard is a valid empty table
        write_table(pairs.filter(pc.equal(pairs.column("shard"), i)), out)
    write_stats(args.stats, pair_stats(stats, site.name, time.perf_counter() - t0))


def pair_stats(raw: Mapping[str, Any], site: str, seconds: float) -> Stats:
    """:func:`~parasim.pair.stage.pair_pages`'s counts as the stage's stats.

    Rows in: each English page once per other language; out: the page pairs; dropped: the
    English pages left without a counterpart in a language, by reason (``unpaired_en``).
    """
    c = dict(raw)
    c.pop("site")
    pairs = c["pairs"]  # per language: stays in the counts (diagnose names the languages)
    return Stats(
        "pair",
        site=site,
        rows_in=c["english_pages"] * len(pairs),
        rows_out=sum(pairs.values()),
        dropped=c.pop("unpaired_en"),
        seconds={"parse": c.pop("parse_seconds"), "total": round(seconds, 3)},
        figures={"untranslated": c.pop("untranslated"), "pages_per_s": c.pop("pages_per_s")},
        counts=c,
    )


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
