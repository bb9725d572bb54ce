"""`parasim score-pairs` (rule ``score_pairs``) and `parasim scores-summary`: the scores stage as
commands."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Mapping
from typing import Any

from parasim.stats import Stats

log = logging.getLogger("parasim.scores")


def cmd_score_pairs(args: argparse.Namespace) -> None:
    """Score one shard's positives, their hard negatives and the shard's divergences."""
    import json

    import pyarrow.compute as pc

    from parasim.amr import ParseCache
    from parasim.io import TableWriter, column_names, read_table
    from parasim.scores import SCORES_SCHEMA, ScoresSettings, score_shard
    from parasim.stagecli import UsageError, need, section_from_args, write_stats
    from parasim.translate import TranslateSettings

    settings = ScoresSettings.from_config(section_from_args(args, "scores"))
    translate = (
        TranslateSettings.from_config(json.loads(args.translate_json))
        if args.translate_json
        else None
    )
    for name, cols in [
        ("positives", ("id", "pair_id", "site", "en_text", "other_text", "other_en")),
        ("negatives", ("id", "source_id", "en_text", "other_text", "other_en")),
        ("divergences", ("id", "seed_id", "side", "type", "en_text", "other_text")),
    ]:
        path = getattr(args, name)
        if path is None:
            continue
        have = column_names(need(path, f"{name} shard" if name != "negatives" else name))
        missing = [c for c in cols if c not in have]
        if missing:
            raise UsageError(f"{path}: not a {name} table (no column {', '.join(missing)})")
    positives = read_table(args.positives)
    # the negatives of every site: only those of this shard's positives are read into memory
    mine = pc.field("source_id").isin(positives["id"].combine_chunks())
    negatives = read_table(args.negatives, filters=mine) if args.negatives else None
    divergences = read_table(args.divergences) if args.divergences else None
    cache = ParseCache(args.parse_cache) if args.parse_cache else None
    try:
        # each block of scores.block_rows rows is written as it is scored; the file appears
        # when the last one is
        with TableWriter(args.output, SCORES_SCHEMA) as out:
            stats = score_shard(
                positives,
                negatives,
                divergences,
                settings,
                out.write,
                parse_cache=cache,
                vector_cache=args.vector_cache,
                sentence_cache=args.sentence_cache,
                workers=args.threads,
                translate=translate,
            )
    finally:
        if cache is not None:
            cache.close()
    log.info(
        "%d rows (%s), %d scored, skipped %s",
        stats["n_rows"],
        json.dumps(stats["rows_by_source"], sort_keys=True),
        stats["pairs_scored"],
        json.dumps(stats["skipped_by_reason"], sort_keys=True),
    )
    write_stats(args.stats, scores_stats(stats))


def scores_stats(raw: Mapping[str, Any]) -> Stats:
    """:func:`~parasim.scores.score_pairs`' counts as the stage's stats.

    Rows in and out: the rows of the shard (positives, negatives, divergences); none is dropped:
    a row left unscored keeps its row with its ``skip_reason`` (counted in ``skipped_by_reason``).
    """
    c = dict(raw)
    return Stats(
        "scores",
        rows_in=c.pop("rows_in"),
        rows_out=c.pop("n_rows"),
        seconds={**c.pop("seconds"), "cpu": c.pop("cpu_seconds")},
        figures={
            k: c.pop(k) for k in ("parse_errors", "embedding_in_background", "config") if k in c
        },
        counts=c,  # pairs scored, skipped by reason, rows by source, parse and cache counts
    )


def cmd_scores_summary(args: argparse.Namespace) -> None:
    """Add up a site's score stats, plot the distributions; write the ``.done`` summary.

    With ``--done``, zero rows (without ``--allow-empty``) is an error of one sentence that
    names the earliest empty stage of the site (:mod:`parasim.diagnose`).
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parasim.diagnose import require_rows
    from parasim.scores import PLOT_COLUMNS, SCORES_SCHEMA, plot_distributions
    from parasim.stagecli import UsageError, need, read_stats, write_stats
    from parasim.stats import done_summary

    if len(args.shards) != len(args.stats):
        raise UsageError(
            f"--shards names {len(args.shards)} files but --stats names {len(args.stats)}"
        )
    per_shard, tables = read_stats(args.stats), []
    for shard, path, s in zip(args.shards, args.stats, per_shard, strict=True):
        t = pq.read_table(
            need(shard, "scores shard"), columns=["source", "label", "type", *PLOT_COLUMNS]
        )
        if s.rows_out != t.num_rows:
            raise UsageError(
                f"{path}: says {s.rows_out} rows but {shard} has {t.num_rows} (stale stats?)"
            )
        tables.append(t)
    rows = sum(t.num_rows for t in tables)
    if args.png:
        table = (
            pa.concat_tables(tables)
            if tables
            else SCORES_SCHEMA.empty_table().select(["source", "label", "type", *PLOT_COLUMNS])
        )
        shown = plot_distributions(table, args.png, f"{args.site or ''}: score distributions")
        log.info("plot: %s (%s)", args.png, ", ".join(shown))
    if args.done:
        upstream = read_stats(args.upstream)
        require_rows(args.site or "?", "scores", rows, per_shard, upstream, args.allow_empty)
        write_stats(args.done, done_summary("scores", args.site, len(args.shards), rows, per_shard))


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add(
        "score-pairs",
        cmd_score_pairs,
        "AMR graphs, aspect, entity and surface scores of one shard's positives, negatives "
        "and divergences.",
    )
    site_opts(sp)
    sp.add_argument("--positives", required=True, help="positives shard")
    sp.add_argument("--negatives", help="hard negatives (results/negatives/negatives.parquet)")
    sp.add_argument("--divergences", help="divergences shard")
    sp.add_argument("--output", required=True, help="scores shard to write")
    sp.add_argument("--parse-cache", help="SQLite parse cache (graphs and entities by sentence)")
    sp.add_argument("--vector-cache", help="SQLite cache of concept-label vectors")
    sp.add_argument("--sentence-cache", help="SQLite cache of sentence vectors")
    sp.add_argument("--threads", type=int, default=1, help="processes for the AMR aspects")
    sp.add_argument(
        "--translate-json",
        help="the translate config section as JSON: translate the divergences' edited other "
        "sides with it (without: they are skipped as untranslated)",
    )

    sp = add(
        "scores-summary",
        cmd_scores_summary,
        "Summary (.done) and score-distribution plot of a site's score shards.",
    )
    sp.add_argument("--shards", nargs="+", required=True, help="scores shards")
    sp.add_argument("--stats", nargs="+", required=True, help="their stats files, in order")
    sp.add_argument("--site", help="site name")
    sp.add_argument("--png", help="score-distribution plot to write")
    sp.add_argument("--done", help="write the stage summary (.done) here")
    sp.add_argument(
        "--upstream",
        nargs="*",
        default=[],
        help="stats files of the site's earlier stages: they explain a stage with 0 rows",
    )
    sp.add_argument(
        "--allow-empty", action="store_true", help="with --done: zero rows is not an error"
    )
