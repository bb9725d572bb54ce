"""`parasim score-pairs` (rule ``score_pairs``): the scores stage as a command.

The site's score-distribution plot is the stage's `.done` extra ``png``
(:func:`~parasim.scores.plot.plot_site`, drawn by ``parasim summarize``).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable

log = logging.getLogger("parasim.scores")


def cmd_score_pairs(args: argparse.Namespace) -> None:
    """Score one shard's positives, their hard negatives and the shard's divergences.

    Its stats: rows in and out, the shard's rows (none is dropped: a row left unscored keeps
    its row with its ``skip_reason``, counted in ``skipped_by_reason``).
    """
    import json

    import pyarrow.compute as pc

    from parasim.amr import ParseCache
    from parasim.io import TableWriter, column_names, read_table
    from parasim.scores import SCORES_SCHEMA, ScoresSettings, score_shard
    from parasim.stagecli import UsageError, need, section_from_args, write_stats
    from parasim.stats import Recorder
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
    rec = Recorder("scores")
    try:
        # each block of scores.block_rows rows is written as it is scored; the file appears
        # when the last one is
        with TableWriter(args.output, SCORES_SCHEMA) as out:
            score_shard(
                positives,
                negatives,
                divergences,
                settings,
                out.write,
                rec,
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
        rec.rows_out,
        json.dumps(rec.counted("rows_by_source"), sort_keys=True),
        rec.counted("pairs_scored"),
        json.dumps(rec.counted("skipped_by_reason"), sort_keys=True),
    )
    write_stats(args.stats, rec.stats(rounding=3))


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
