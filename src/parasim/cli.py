"""`parasim <stage> ...`: every workflow stage as a command, with or without Snakemake.

Each stage command reads its inputs, calls one function in the stage's module, writes its output
atomically and a JSON file of counts (``--stats``), and logs progress to stderr. Errors a user can
fix (bad config, missing input) end with one line naming the culprit and exit status 2.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from parasim.config import ConfigError, load_config
from parasim.stagecli import (
    UsageError,
    need,
    section_from_args,
    site_from_args,
    write_stats,
)

log = logging.getLogger("parasim")

#: Modules whose ``register(add, site_opts)`` adds a stage's commands to the parser.
STAGE_COMMANDS = [
    "parasim.translate.commands",
    "parasim.align.commands",
    "parasim.negatives.commands",
    "parasim.perturb.commands",
]


# ---------------------------------------------------------------- helpers


def _setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


# ---------------------------------------------------------------- stages


def cmd_crawl(args: argparse.Namespace) -> None:
    from parasim.crawl import crawl_site

    site = site_from_args(args)
    settings = section_from_args(args, "crawl")
    stats = crawl_site(site, settings, Path(args.out), Path(args.state), log=log)
    write_stats(args.stats, {"site": site.name, "stage": "crawl", **stats})


def cmd_pair(args: argparse.Namespace) -> None:
    from parasim.io import read_table, write_table
    from parasim.pair import pair_pages

    site = site_from_args(args)
    if len(args.out) != args.shards:
        raise UsageError(f"--out names {len(args.out)} files but --shards is {args.shards}")
    pages = read_table(need(args.pages, "pages dataset"))
    t0 = time.perf_counter()
    pairs, stats = pair_pages(pages, site, args.shards, one_to_one=site.one_to_one)
    for i, out in enumerate(args.out):
        mask = [s == i for s in pairs.column("shard").to_pylist()]
        write_table(pairs.filter(mask), out)
    stats["elapsed_s"] = round(time.perf_counter() - t0, 3)
    write_stats(args.stats, {"site": site.name, "stage": "pairs", **stats})


def cmd_parse(args: argparse.Namespace) -> None:
    from parasim.io import read_table, write_table
    from parasim.parse import parse_pairs

    site = site_from_args(args)
    settings = section_from_args(args, "parse")
    pairs = read_table(need(args.pairs, "pairs shard"))
    pages = read_table(need(args.pages, "pages dataset"))
    lines, stats = parse_pairs(
        pairs, pages, site, strict=settings["strict"], min_words=settings["min_words"]
    )
    write_table(lines, args.out)
    write_stats(args.stats, {"site": site.name, "stage": "lines", **stats})


def cmd_summarize(args: argparse.Namespace) -> None:
    import pyarrow.parquet as pq

    from parasim.report import sum_counts

    rows = sum(pq.ParquetFile(need(p, "shard")).metadata.num_rows for p in args.shards)
    stats = [json.loads(need(p, "stats file").read_text()) for p in args.stats]
    summary = {
        "stage": args.stage,
        "site": args.site,
        "shards": len(args.shards),
        "rows": rows,
        "counts": sum_counts(stats),
    }
    if rows == 0 and not args.allow_empty:
        raise UsageError(
            f"site {args.site!r}: stage {args.stage!r} produced 0 rows "
            f"(counts: {json.dumps(summary['counts'], sort_keys=True)}); see its logs, or set "
            "allow_empty: true in the config if this is wanted"
        )
    write_stats(args.out, summary)


def cmd_yield_report(args: argparse.Namespace) -> None:
    from parasim.report import write_report

    rows = write_report(args.stats_root, args.sites, args.tsv, args.json, args.png)
    log.info("yield report: %d rows for %d site(s)", len(rows), len(args.sites))


def cmd_bench(args: argparse.Namespace) -> None:
    from parasim.bench import main as bench_main

    bench_main(args.rest)


def cmd_validate(args: argparse.Namespace) -> None:
    cfg = load_config(args.config)
    print(
        f"{args.config}: valid ({len(cfg['sites'])} site(s): "
        f"{', '.join(s['name'] for s in cfg['sites'])})"
    )


# ---------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The `parasim` argument parser."""
    p = argparse.ArgumentParser(prog="parasim", description=__doc__.splitlines()[0])
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = p.add_subparsers(dest="command", required=True)

    def add(name: str, fn: Callable, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(func=fn)
        return sp

    def site_opts(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("--site-json", help="the site's config entry as JSON (Snakemake passes it)")
        sp.add_argument("--config", help="a config.yaml (with --site)")
        sp.add_argument("--site", help="site name in --config")
        sp.add_argument("--settings-json", help="the stage's config section as JSON")
        sp.add_argument("--stats", help="write counts as JSON here")

    sp = add("crawl", cmd_crawl, "Crawl one site into a pages dataset (Parquet parts).")
    site_opts(sp)
    sp.add_argument("--out", required=True, help="output folder of Parquet parts")
    sp.add_argument("--state", required=True, help="crawl state folder (kept for resuming)")

    sp = add("pair", cmd_pair, "Pair parallel pages of one site; write N shards.")
    site_opts(sp)
    sp.add_argument("--pages", required=True, help="pages dataset (folder or file)")
    sp.add_argument("--shards", type=int, required=True, help="number of shards")
    sp.add_argument("--out", nargs="+", required=True, help="one output file per shard, in order")

    sp = add("parse", cmd_parse, "HTML of paired pages to lines (one shard).")
    site_opts(sp)
    sp.add_argument("--pairs", required=True, help="pairs shard")
    sp.add_argument("--pages", required=True, help="pages dataset")
    sp.add_argument("--out", required=True, help="lines shard to write")

    sp = add("summarize", cmd_summarize, "Count a stage's rows and stats for one site (.done).")
    sp.add_argument("--stage", required=True)
    sp.add_argument("--site", required=True)
    sp.add_argument("--shards", nargs="+", required=True)
    sp.add_argument("--stats", nargs="+", required=True)
    sp.add_argument("--out", required=True)
    sp.add_argument("--allow-empty", action="store_true", help="zero rows is not an error")

    sp = add("yield-report", cmd_yield_report, "Yield per site and stage: TSV, JSON, funnel plot.")
    sp.add_argument("--stats-root", default="results/stats")
    sp.add_argument("--sites", nargs="+", required=True)
    sp.add_argument("--tsv", required=True)
    sp.add_argument("--json", required=True)
    sp.add_argument("--png", required=True)

    sp = add("bench", cmd_bench, "Benchmarks: `parasim bench site --help`.")
    sp.add_argument("what", choices=["site"])
    sp.add_argument("rest", nargs=argparse.REMAINDER)

    sp = add("validate-config", cmd_validate, "Validate a config file against the schema.")
    sp.add_argument("config")

    # Later stages register their own commands: parasim/<stage>/commands.py, register().
    for module in STAGE_COMMANDS:
        importlib.import_module(module).register(add, site_opts)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the `parasim` console script."""
    # Idle OpenMP threads (torch) sleep instead of spinning: when several model jobs share fewer
    # cores than Snakemake was told (`--cores 8` on a 2-core machine), spinning threads starve the
    # others (4 divergence jobs on 2 cores: > 420 s spinning, 198 s passive). Set before torch
    # loads; a value in the environment wins.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = build_parser().parse_args(argv)
    _setup_logging(args.verbose)
    try:
        args.func(args)
    except (ConfigError, UsageError, FileNotFoundError) as exc:
        print(f"parasim {args.command}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
