"""`parasim score-pairs` (rule ``score_pairs``): the scores stage as a command.

The site's score-distribution plot is the stage's `.done` extra ``png``
(:func:`~parasim.scores.plot.plot_site`, drawn by ``parasim summarize``).
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from parasim.stagecli import read_input, section_from_args, stage_job

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("parasim.scores")


#: What the stage needs of each input: its name in messages, and the columns it must have
#: (checked before it is read; every column is read).
_NEEDS = {
    "positives": (
        "positives shard",
        ("id", "pair_id", "site", "en_text", "other_text", "other_en"),
    ),
    "negatives": ("negatives file", ("id", "source_id", "en_text", "other_text", "other_en")),
    "divergences": (
        "divergences shard",
        ("id", "seed_id", "side", "type", "en_text", "other_text"),
    ),
}


def _read(path: str | None, name: str, **kwargs: Any) -> pa.Table | None:
    """The input ``name`` of :data:`_NEEDS` at ``path`` (None: not given), checked, whole."""
    if path is None:
        return None
    what, columns = _NEEDS[name]
    return read_input(path, what, require=columns, **kwargs)


def cmd_score_pairs(args: argparse.Namespace) -> None:
    """Score one shard's positives, their hard negatives and the shard's divergences.

    Its stats: rows in and out, the shard's rows (none is dropped: a row left unscored keeps
    its row with its ``skip_reason``, counted in ``skipped_by_reason``).
    """
    import pyarrow.compute as pc

    from parasim.amr import ParseCache
    from parasim.io import TableWriter
    from parasim.scores import SCORES_SCHEMA, ScoresSettings, score_shard
    from parasim.translate import TranslateSettings

    settings = ScoresSettings.from_config(section_from_args(args, "scores"))
    translate = (
        TranslateSettings.from_config(json.loads(args.translate_json))
        if args.translate_json
        else None
    )
    positives = _read(args.positives, "positives")
    # the negatives of every site: only those of this shard's positives are read into memory
    mine = pc.field("source_id").isin(positives["id"].combine_chunks())
    negatives = _read(args.negatives, "negatives", filters=mine)
    divergences = _read(args.divergences, "divergences")
    cache = ParseCache(args.parse_cache) if args.parse_cache else None
    with stage_job("scores", args.stats, rounding=3) as rec:
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
