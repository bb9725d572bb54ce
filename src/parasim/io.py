"""Parquet schemas and shard read/write, in one place.

Every stage writes through :func:`write_table`, which writes to a temporary file and renames it,
so a killed job never leaves a half-written shard that looks finished.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

#: Bump when a stage's output schema changes incompatibly.
SCHEMA_VERSION = "1"

PAGES_SCHEMA = pa.schema(
    [
        pa.field(
            "url", pa.string(), nullable=False
        ),  # as requested (canonical origin, no fragment)
        pa.field("final_url", pa.string()),  # after redirects
        pa.field("status", pa.int32()),  # HTTP status; null when no response
        pa.field("content_type", pa.string()),
        pa.field("declared_lang", pa.string()),  # <html lang> / Content-Language, primary subtag
        pa.field("fetched_at", pa.timestamp("ms", tz="UTC")),
        pa.field("content_hash", pa.string()),  # sha256 of the raw body
        pa.field("encoding", pa.string()),  # encoding used to decode html
        pa.field("html", pa.large_string()),  # decoded HTML; null for skipped pages
        pa.field("depth", pa.int32()),
        pa.field("referer", pa.string()),
        pa.field("skip_reason", pa.string()),  # null: a usable HTML page
        pa.field("error", pa.string()),
    ],
    metadata={"parasim.schema": "pages", "parasim.schema_version": SCHEMA_VERSION},
)

PAIRS_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),  # "en-fr"
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        # e.g. ["hreflang", "toggle"], plus "en_alias:<X/>" / "other_alias:<X/>" where a side's
        # canonical URL X/index.html also answered as its directory URL X/ (parasim.pair)
        pa.field("evidence", pa.list_(pa.string()), nullable=False),
        pa.field("shard", pa.int32(), nullable=False),
    ],
    metadata={"parasim.schema": "pairs", "parasim.schema_version": SCHEMA_VERSION},
)

LINES_SCHEMA = pa.schema(
    [
        pa.field("pair_id", pa.string(), nullable=False),
        pa.field("site", pa.string(), nullable=False),
        pa.field("domain", pa.string(), nullable=False),
        pa.field("lang_pair", pa.string(), nullable=False),
        pa.field("en_url", pa.string(), nullable=False),
        pa.field("other_url", pa.string(), nullable=False),
        pa.field("other_lang", pa.string(), nullable=False),
        pa.field("en_lines", pa.list_(pa.string()), nullable=False),
        pa.field("other_lines", pa.list_(pa.string()), nullable=False),
        pa.field("n_en", pa.int32(), nullable=False),
        pa.field("n_other", pa.int32(), nullable=False),
        pa.field("equal_lines", pa.bool_(), nullable=False),
        pa.field("selector_used", pa.bool_(), nullable=False),  # main_selector matched both sides
    ],
    metadata={"parasim.schema": "lines", "parasim.schema_version": SCHEMA_VERSION},
)


TRANSLATED_SCHEMA = pa.schema(
    list(LINES_SCHEMA)
    + [
        # English translation of each other-language line; null where translation failed.
        pa.field("other_en_lines", pa.list_(pa.string()), nullable=False),
        pa.field("n_untranslated", pa.int32(), nullable=False),
        pa.field("mt_backend", pa.string(), nullable=False),  # "apertium", "marian:<model>", ...
    ],
    metadata={"parasim.schema": "translated", "parasim.schema_version": SCHEMA_VERSION},
)

_ALIGNED_FIELDS = [
    pa.field("id", pa.string(), nullable=False),  # stable_id(pair_id, en_idx, other_idx)
    pa.field("pair_id", pa.string(), nullable=False),
    pa.field("site", pa.string(), nullable=False),
    pa.field("domain", pa.string(), nullable=False),
    pa.field("lang_pair", pa.string(), nullable=False),
    pa.field("other_lang", pa.string(), nullable=False),
    pa.field("en_text", pa.string(), nullable=False),
    pa.field("other_text", pa.string(), nullable=False),
    pa.field("other_en", pa.string()),  # English translation of other_text
    pa.field("method", pa.string(), nullable=False),  # "paper", "dp", "review"
    pa.field("en_idx", pa.list_(pa.int32()), nullable=False),  # line indices (n:m links)
    pa.field("other_idx", pa.list_(pa.int32()), nullable=False),
    pa.field("score", pa.float32()),  # word-frequency cosine similarity
    pa.field("score_emb", pa.float32()),  # sentence-vector cosine, when computed
    pa.field("en_url", pa.string(), nullable=False),
    pa.field("other_url", pa.string(), nullable=False),
]

#: The align stage's sentence pairs, before cleaning (``results/aligned/``).
ALIGNED_SCHEMA = pa.schema(
    _ALIGNED_FIELDS,
    metadata={"parasim.schema": "aligned", "parasim.schema_version": SCHEMA_VERSION},
)

#: The positives: the aligned pairs the clean stage kept (``results/positives/``).
POSITIVES_SCHEMA = pa.schema(
    [
        *_ALIGNED_FIELDS,
        pa.field("n_seen", pa.int32()),  # times the pair was seen on the site (after cleaning)
        pa.field("n_pages", pa.int32()),  # page pairs it was seen on
        pa.field("furniture", pa.bool_()),  # seen on >= clean.furniture_share of the page pairs
    ],
    metadata={"parasim.schema": "positives", "parasim.schema_version": SCHEMA_VERSION},
)

#: The aligned pairs the clean stage dropped, with the reason (``results/dropped/``).
DROPPED_SCHEMA = pa.schema(
    [
        *_ALIGNED_FIELDS,
        pa.field("reason", pa.string(), nullable=False),  # a rule, wrong_language_*, duplicate
        pa.field("duplicate_of", pa.string()),  # for duplicates: the id of the kept row
    ],
    metadata={"parasim.schema": "dropped", "parasim.schema_version": SCHEMA_VERSION},
)


def stable_id(*parts: str, n: int = 16) -> str:
    """A short, stable hex id from text parts (same input, same id, on every machine)."""
    h = hashlib.sha1("\x1f".join(parts).encode("utf-8"))
    return h.hexdigest()[:n]


def shard_of(key: str, n_shards: int) -> int:
    """Deterministic shard index of a key."""
    return int(hashlib.sha1(key.encode("utf-8")).hexdigest()[:8], 16) % n_shards


def write_table(table: pa.Table, path: str | os.PathLike, row_group_size: int = 10_000) -> None:
    """Write ``table`` as zstd Parquet, atomically (temp file + rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    pq.write_table(table, tmp, compression="zstd", row_group_size=row_group_size)
    os.replace(tmp, path)


def rows_to_table(rows: Iterable[dict], schema: pa.Schema) -> pa.Table:
    """Build a table of ``schema`` from dict rows (missing keys become null)."""
    rows = list(rows)
    cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.table(cols, schema=schema)


def read_table(path: str | os.PathLike, columns: list[str] | None = None) -> pa.Table:
    """Read a Parquet file or a folder of Parquet parts (sorted, so the order is stable)."""
    path = Path(path)
    if path.is_dir():
        parts = sorted(p for p in path.glob("*.parquet") if not p.name.startswith("."))
        if not parts:
            raise FileNotFoundError(f"no Parquet parts in {path}")
        tables = [pq.read_table(p, columns=columns) for p in parts]
        return pa.concat_tables(tables, promote_options="default")
    return pq.read_table(path, columns=columns)
