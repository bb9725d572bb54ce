"""`parasim summarize` and `parasim yield-report`: counting what every stage kept."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence

log = logging.getLogger("parasim.report")


def _extras(stage, given: Sequence[str]) -> list[tuple[Callable, str]]:
    """The stage's `.done` extras asked for (``NAME=PATH``): ``(function, PATH)`` each.

    Raises:
        UsageError: not ``NAME=PATH``, or a name the stage has no extra of (one line naming
            those it has).
    """
    import importlib

    from parasim.stagecli import UsageError

    out = []
    for item in given:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise UsageError(f"--extra: NAME=PATH, not {item!r}")
        if name not in stage.done_extras:
            known = ", ".join(sorted(stage.done_extras)) or "none"
            raise UsageError(f"--extra {name}: stage {stage.name} has no such extra ({known})")
        module, _, function = stage.done_extras[name].partition(":")
        out.append((getattr(importlib.import_module(module), function), path))
    return out


def _check_fresh(stage, shards: Sequence[str], rows: Sequence[int], own: Sequence) -> None:
    """A per-shard stage's stats, one per shard: each says its shard's rows (else they are
    stale, written for an earlier shard)."""
    from parasim.stagecli import UsageError

    mine = [(path, s) for path, s in own if s.stage == stage.name]
    if stage.per != "shard" or len(mine) != len(shards):
        return
    for shard, n, (path, s) in zip(shards, rows, mine, strict=True):
        if s.rows_out != n:
            raise UsageError(f"{path}: says {s.rows_out} rows but {shard} has {n} (stale stats?)")


def cmd_summarize(args: argparse.Namespace) -> None:
    """Count one stage's rows and add up its stats for one site (the stage's ``.done`` file).

    A per-shard stage's stats, one per shard, must each say their shard's rows. Zero rows
    (without ``--allow-empty``) is an error of one sentence that names the earliest empty stage
    of the site, its counts by reason and the likely fix (:mod:`parasim.diagnose`). Each
    ``--extra NAME=PATH`` writes PATH with the function the stage's ``done_extras[NAME]``
    names, as ``function(PATH, shards, stats, site)`` (stats: the stage's own, one per job).
    """
    import pyarrow.parquet as pq

    from parasim import stages
    from parasim.diagnose import require_rows
    from parasim.stagecli import UsageError, need, read_stats, write_stats
    from parasim.stats import done_summary

    try:
        stage = stages.get(args.stage)
    except KeyError as exc:
        raise UsageError(f"--stage: {exc.args[0]}") from None
    extras = _extras(stage, args.extra)
    per_shard = [pq.ParquetFile(need(p, "shard")).metadata.num_rows for p in args.shards]
    rows = sum(per_shard)
    own, upstream = read_stats(args.stats), read_stats(args.upstream)
    _check_fresh(stage, args.shards, per_shard, list(zip(args.stats, own, strict=True)))
    require_rows(args.site, args.stage, rows, own, upstream, args.allow_empty)
    mine = [s for s in own if s.stage == stage.name]
    for function, path in extras:
        function(path, list(args.shards), mine, args.site)
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
    sp.add_argument(
        "--extra",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=PATH",
        help="also write the stage's .done extra NAME (its done_extras: the divergences' card, "
        "the scores' png) to PATH",
    )

    sp = add("yield-report", cmd_yield_report, "Yield per site and stage: TSV, JSON, funnel plot.")
    sp.add_argument("--stats-root", default="results/stats")
    sp.add_argument("--sites", nargs="+", required=True)
    sp.add_argument("--tsv", required=True)
    sp.add_argument("--json", required=True)
    sp.add_argument("--png", required=True)
