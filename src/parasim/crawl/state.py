"""Crawl state on disk: small Parquet parts written atomically as pages arrive, so a killed crawl
resumes without fetching finished pages again.

Layout of ``state_dir``: ``fingerprint.json`` (what the crawl was started with) and
``part-000001.parquet``, ``part-000002.parquet``, ... (rows of :data:`parasim.io.PAGES_SCHEMA`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from parasim.io import PAGES_SCHEMA, rows_to_table, write_table

#: Bump when the crawl's behaviour changes so that old state must not be resumed.
STATE_VERSION = "1"
PART_GLOB = "part-*.parquet"


def fingerprint(settings: dict) -> str:
    """A hash of everything that decides which pages a crawl requests."""
    text = json.dumps({"state_version": STATE_VERSION, **settings}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _parts(folder: Path) -> list[Path]:
    return sorted(folder.glob(PART_GLOB))


def open_state(
    state_dir: Path, fp: str, fp_info: dict, log: logging.Logger
) -> tuple[pa.Table, int]:
    """Load the stored pages of an unfinished crawl with the same fingerprint.

    A missing or different fingerprint starts afresh (old parts are removed, and it is logged).
    An unreadable part is moved aside (``.bad``) and its pages are fetched again.

    Returns:
        The stored rows (possibly empty) and the next part number.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    for tmp in state_dir.glob(".*.tmp-*"):  # left by a killed write; never a finished part
        tmp.unlink(missing_ok=True)
    fp_file = state_dir / "fingerprint.json"
    old = None
    if fp_file.exists():
        try:
            old = json.loads(fp_file.read_text(encoding="utf-8")).get("fingerprint")
        except (OSError, ValueError):
            old = None
    parts = _parts(state_dir)
    if old != fp:
        if parts:
            log.info(
                "crawl state in %s was made with other settings (fingerprint %s, now %s): "
                "starting afresh, removing %d part(s)",
                state_dir,
                (old or "none")[:12],
                fp[:12],
                len(parts),
            )
        for p in parts:
            p.unlink()
        tmp = fp_file.with_name(f".{fp_file.name}.tmp")
        tmp.write_text(json.dumps({"fingerprint": fp, **fp_info}, indent=2, sort_keys=True))
        tmp.replace(fp_file)
        return PAGES_SCHEMA.empty_table(), 1
    tables = []
    last = 0
    for p in parts:
        with contextlib.suppress(IndexError, ValueError):
            last = max(last, int(p.stem.split("-")[1]))
        try:
            tables.append(pq.read_table(p, schema=PAGES_SCHEMA))
        except Exception as exc:  # noqa: BLE001 - any unreadable part is set aside, not fatal
            log.warning("unreadable crawl state part %s (%s): moved aside, refetching", p, exc)
            p.rename(p.with_name(p.name + ".bad"))
    table = pa.concat_tables(tables) if tables else PAGES_SCHEMA.empty_table()
    return table, last + 1


class StateWriter:
    """Buffers page rows and writes them as a new part every ``flush_pages`` rows or
    ``flush_s`` seconds (whichever first), atomically."""

    def __init__(self, state_dir: Path, next_part: int, flush_pages: int, flush_s: float):
        self.state_dir = state_dir
        self.next_part = next_part
        self.flush_pages = max(1, flush_pages)
        self.flush_s = flush_s
        self.rows: list[dict] = []
        self.written = 0
        self._last = time.monotonic()

    def add(self, row: dict) -> None:
        """Queue one row; flushes when the buffer is full or old enough."""
        self.rows.append(row)
        self.maybe_flush()

    def maybe_flush(self) -> None:
        """Flush when the buffer is full or older than ``flush_s``."""
        if len(self.rows) >= self.flush_pages or (
            self.rows and time.monotonic() - self._last >= self.flush_s
        ):
            self.flush()

    def flush(self) -> None:
        """Write buffered rows as one part (no-op when empty)."""
        self._last = time.monotonic()
        if not self.rows:
            return
        table = rows_to_table(self.rows, PAGES_SCHEMA)
        write_table(table, self.state_dir / f"part-{self.next_part:06d}.parquet")
        self.next_part += 1
        self.written += len(self.rows)
        self.rows = []


def publish(state_dir: Path, out_dir: Path) -> int:
    """Make ``out_dir`` hold exactly the state's parts: hard links (a copy across file systems).

    Returns:
        The number of parts published.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob(PART_GLOB):
        old.unlink()
    parts = _parts(state_dir)
    for p in parts:
        dest = out_dir / p.name
        try:
            os.link(p, dest)
        except OSError:
            tmp = dest.with_name(f".{dest.name}.tmp")
            shutil.copyfile(p, tmp)
            tmp.replace(dest)
    return len(parts)
