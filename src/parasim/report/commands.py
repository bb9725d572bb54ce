"""`parasim summarize` and `parasim yield-report`: counting what every stage kept."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.report")


def cmd_summarize(args: argparse.Namespace) -> None:
    """Count one stage's rows and add up its stats for one site (the stage's ``.done`` file).

    Zero rows (without ``--allow-empty``) is an error of one sentence that names the earliest
    empty stage of the site, its counts by reason and the likely fix (:mod:`parasim.diagnose`).
    """
    import pyarrow.parquet as pq

    from parasim import stages
    from parasim.diagnose import require_rows
    from parasim.stagecli import UsageError, need, read_stats, write_stats
    from parasim.stats import done_summary

    try:
        stages.get(args.stage)
    except KeyError as exc:
        raise UsageError(f"--stage: {exc.args[0]}") from None
    rows = sum(pq.ParquetFile(need(p, "shard")).metadata.num_rows for p in args.shards)
    own, upstream = read_stats(args.stats), read_stats(args.upstream)
    require_rows(args.site, args.stage, rows, own, upstream, args.allow_empty)
    write_stats(args.out, done_summary(args.stage, args.site, len(args.shards), rows, own))


def cmd_yield_report(args: argparse.Namespace) -> None:
    """Write the yield table (TSV, JSON) and funnel plot of the given sites."""
    from parasim.report.stage import write_report

    rows = write_report(args.stats_root, args.sites, args.tsv, args.json, args.png)
    log.info("yield report: %d rows for %d site(s)", len(rows), len(args.sites))


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the report's commands to the `parasim` parser."""
    sp = add("summarize", cmd_summarize, "Count a stage's rows and stats for one site (.done).")
    sp.add_argument("--stage", required=True, help="the stage's name (parasim.stages)")
    sp.add_argument("--site", required=True)
    sp.add_argument("--shards", nargs="+", required=True)
    sp.add_argument(
        "--stats",
        nargs="+",
        required=True,
        help="its stats files (and those of the stages its .done covers)",
    )
    sp.add_argument(
        "--upstream",
        nargs="*",
        default=[],
        help="stats files of the site's earlier stages: they explain a stage with 0 rows",
    )
    sp.add_argument("--out", required=True)
    sp.add_argument("--allow-empty", action="store_true", help="zero rows is not an error")

    sp = add("yield-report", cmd_yield_report, "Yield per site and stage: TSV, JSON, funnel plot.")
    sp.add_argument("--stats-root", default="results/stats")
    sp.add_argument("--sites", nargs="+", required=True)
    sp.add_argument("--tsv", required=True)
    sp.add_argument("--json", required=True)
    sp.add_argument("--png", required=True)
