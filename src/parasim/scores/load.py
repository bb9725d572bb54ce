"""One call to load the corpus or the divergences with their score columns (no join to write).

    import parasim.scores
    ds = parasim.scores.load("results/corpus", split="train")            # datasets.Dataset
    div = parasim.scores.load("results/divergences/wet-boew")

Each row of the corpus (a positive or a hard negative) or of the divergences gets the score row
of the same ``id`` and source (``results/scores/<site>/<shard>.parquet``): ``skip_reason``, both
graphs and every score column; a row the scores stage has not seen gets nulls. Row order is the
order of the files read.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

#: Corpus ``source`` values -> the scores' ``source``.
#: (a synthetic divergent row is a divergences-stage row, scored when `scores.inputs` has them;
#: a mined one has no score row)
_CORPUS_SOURCE = {
    "aligned": "positive",
    "lda-negative": "negative",
    "synthetic-divergence": "divergence",
}
#: Score-table columns that the corpus / divergences already have, left out of the join.
_KEY_COLUMNS = ("id", "source", "site", "pair_id", "label", "type", "en_text", "other_text")


def _parquet_files(paths: Sequence[str | os.PathLike]) -> list[Path]:
    out: list[Path] = []
    for p in map(Path, paths):
        if p.is_dir():
            out += sorted(f for f in p.rglob("*.parquet") if not f.name.startswith("."))
        elif p.exists():
            out.append(p)
        else:
            raise FileNotFoundError(f"not found: {p}")
    if not out:
        raise FileNotFoundError(f"no Parquet files in {', '.join(map(str, paths))}")
    return out


def read_scores(scores: str | os.PathLike | Sequence[str | os.PathLike]) -> pa.Table:
    """Every score shard under ``scores`` (a folder, a file or a list of them), concatenated."""
    paths = [scores] if isinstance(scores, (str, os.PathLike)) else list(scores)
    tables = [pq.read_table(f) for f in _parquet_files(paths)]
    return pa.concat_tables(tables, promote_options="default")


def join_scores(table: pa.Table, scores: pa.Table) -> pa.Table:
    """``table`` (corpus or divergences rows) with the score columns of its rows appended.

    Rows are matched on (``source``, ``id``); the order of ``table`` is kept.
    """
    kind = (table.schema.metadata or {}).get(b"parasim.schema", b"").decode()
    ids = table.column("id").to_pylist()
    if kind == "divergences" or "group_id" in table.column_names:
        sources = ["divergence"] * len(ids)
    else:
        sources = [_CORPUS_SOURCE.get(s, s) for s in table.column("source").to_pylist()]
    key_src, key_id = scores.column("source").to_pylist(), scores.column("id").to_pylist()
    where = {(s, i): k for k, (s, i) in enumerate(zip(key_src, key_id, strict=True))}
    take = pa.array([where.get(k) for k in zip(sources, ids, strict=True)], type=pa.int64())
    extra = scores.drop_columns([c for c in _KEY_COLUMNS if c in scores.column_names])
    extra = extra.take(take)
    out = table
    for name in extra.column_names:
        if name in out.column_names:  # e.g. the corpus' own columns keep their names
            continue
        out = out.append_column(extra.schema.field(name), extra.column(name))
    return out


def load(
    data: str | os.PathLike | Sequence[str | os.PathLike],
    scores: str | os.PathLike | Sequence[str | os.PathLike] = "results/scores",
    split: str | None = None,
):
    """The corpus or divergences shards as a ``datasets.Dataset`` with the score columns.

    Args:
        data: ``results/corpus`` (or its ``data/`` folder or shard files),
            ``results/divergences/<site>`` or divergences shards; a list mixes them.
        scores: The score shards (default ``results/scores``: every site).
        split: Corpus only: keep the rows of this split (``train`` / ``test``).

    Returns:
        A ``datasets.Dataset``.
    """
    import datasets

    paths = [data] if isinstance(data, (str, os.PathLike)) else list(data)
    tables = [pq.read_table(f) for f in _parquet_files(paths)]
    meta = tables[0].schema.metadata
    table = pa.concat_tables(tables, promote_options="default").replace_schema_metadata(meta)
    if split is not None:
        if "split" not in table.column_names:
            raise ValueError("split= is for the corpus; these rows have no split column")
        table = table.filter(pc.equal(table.column("split"), split))
    return datasets.Dataset(join_scores(table, read_scores(scores)))
