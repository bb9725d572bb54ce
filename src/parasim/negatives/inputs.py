"""What the commands over the positives of every site read (topics, negatives and corpus).

`parasim fit-topics`, `parasim select-negatives` (:mod:`parasim.negatives.commands`) and
`parasim build-corpus` (:mod:`parasim.corpus.commands`) share their options: the positives
shards of all sites, the ``negatives`` and ``corpus`` config sections as JSON (Snakemake passes
them; an absent section takes the schema's defaults) and the stats file.
"""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from parasim.io import POSITIVES_SCHEMA
from parasim.negatives import NegativesSettings
from parasim.partition import CorpusConfig
from parasim.stagecli import UsageError, read_input

log = logging.getLogger("parasim.negatives")


def config_sections(
    negatives_json: str | None, corpus_json: str | None
) -> tuple[NegativesSettings, CorpusConfig]:
    """The ``negatives`` and ``corpus`` settings (the schema's defaults where not given).

    Args:
        negatives_json: the ``negatives`` section as JSON (``--negatives-json``), or None.
        corpus_json: the ``corpus`` section as JSON (``--corpus-json``), or None.
    """
    neg = NegativesSettings.from_config(json.loads(negatives_json or "{}"))
    corpus = CorpusConfig.from_config(json.loads(corpus_json or "{}"))
    return neg, corpus


def read_positives(paths: Sequence[str], with_shards: bool = False) -> Any:
    """All positives shards as one table, sorted by ``id`` (independent of the file order).

    Args:
        paths: the positives shard files.
        with_shards: also return, per row, the index in ``paths`` of the file it came from.

    Returns:
        the table, or ``(table, shard index per row)`` with ``with_shards``.

    Raises:
        UsageError: naming the first file missing, unreadable or without a column of
            :data:`~parasim.io.POSITIVES_SCHEMA`.
    """
    if not paths:
        raise UsageError("--positives: no files given")
    tables = []
    for p in paths:
        t = read_input(p, "positives shard", schema=POSITIVES_SCHEMA)
        tables.append(t.select(POSITIVES_SCHEMA.names).cast(POSITIVES_SCHEMA))
    table = pa.concat_tables(tables)
    order = pc.sort_indices(table, sort_keys=[("id", "ascending")])
    table = table.take(order)
    log.info("positives: %d rows from %d file(s)", table.num_rows, len(paths))
    if table.num_rows == 0:
        log.warning("positives: all %d file(s) are empty", len(paths))
    if with_shards:
        shard = np.repeat(np.arange(len(tables)), [t.num_rows for t in tables])
        return table, shard[order.to_numpy()]
    return table


def common_options(sp: argparse.ArgumentParser, positives_required: bool = True) -> None:
    """The options of every command over the positives of all sites (topics, negatives and
    build-corpus)."""
    sp.add_argument(
        "--positives", nargs="+", required=positives_required, help="positives shards (all sites)"
    )
    sp.add_argument("--negatives-json", help="the `negatives` config section as JSON")
    sp.add_argument("--corpus-json", help="the `corpus` config section as JSON")
    sp.add_argument("--stats", help="write counts as JSON here")
