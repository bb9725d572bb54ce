"""A persistent translation cache shared by every translate job: one SQLite file in WAL mode.

Keyed by (backend, model, source language, source text), so an identical line on another page, in
another shard or in a rerun is translated once. Several processes (parallel Snakemake jobs) may
read and write the same file at once: WAL lets readers run beside a writer, writes wait up to
``busy_timeout_s`` for the lock, and ``INSERT OR IGNORE`` makes two jobs that translated the same
line agree on the first answer. Only successful translations are stored: a line that failed is
tried again on the next run. SQLite's locking needs a local file system (not NFS).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

_SCHEMA = """
CREATE TABLE IF NOT EXISTS translations (
    backend  TEXT NOT NULL,
    model    TEXT NOT NULL,
    src_lang TEXT NOT NULL,
    src      TEXT NOT NULL,
    tgt      TEXT NOT NULL,
    created  REAL NOT NULL,
    PRIMARY KEY (backend, model, src_lang, src)
) WITHOUT ROWID
"""

#: SQLite's default limit on bound parameters is 999 in old builds; stay well below it.
_CHUNK = 400


class TranslationCache:
    """Translations of single lines, persisted in SQLite (or in memory when ``path`` is None).

    Args:
        path: The SQLite file (created with its folder when missing), or None for a throw-away
            in-memory cache.
        busy_timeout_s: How long a write waits for another process's lock before failing.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, path: str | os.PathLike | None, busy_timeout_s: float = 120.0) -> None:
        self.path = Path(path) if path is not None else None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        target = str(self.path) if self.path is not None else ":memory:"
        # isolation_level=None: we open transactions ourselves, one per put_many().
        self._db = sqlite3.connect(target, timeout=busy_timeout_s, isolation_level=None)
        self._db.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        if self.path is not None:
            self._retry_locked(lambda: self._db.execute("PRAGMA journal_mode = WAL"))
            self._db.execute("PRAGMA synchronous = NORMAL")
        self._retry_locked(lambda: self._db.execute(_SCHEMA))
        self.hits = 0
        self.misses = 0

    @staticmethod
    def _retry_locked(fn, attempts: int = 20):
        # Switching to WAL and creating the table need an exclusive lock that busy_timeout does
        # not always wait for when several processes open a new file at the same moment.
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))
        return None

    def get_many(
        self, backend: str, model: str, src_lang: str, texts: Iterable[str]
    ) -> dict[str, str]:
        """Cached translations of ``texts`` (only those found), as {source: translation}."""
        wanted = list(dict.fromkeys(texts))
        found: dict[str, str] = {}
        for i in range(0, len(wanted), _CHUNK):
            chunk = wanted[i : i + _CHUNK]
            marks = ",".join("?" * len(chunk))
            rows = self._db.execute(
                "SELECT src, tgt FROM translations WHERE backend = ? AND model = ? "
                f"AND src_lang = ? AND src IN ({marks})",
                [backend, model, src_lang, *chunk],
            ).fetchall()
            found.update(rows)
        self.hits += len(found)
        self.misses += len(wanted) - len(found)
        return found

    def get(self, backend: str, model: str, src_lang: str, text: str) -> str | None:
        """The cached translation of one line, or None."""
        return self.get_many(backend, model, src_lang, [text]).get(text)

    def put_many(
        self, backend: str, model: str, src_lang: str, pairs: Mapping[str, str] | Sequence
    ) -> int:
        """Store {source: translation} and commit at once (one transaction). Returns rows added."""
        items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
        if not items:
            return 0
        now = time.time()
        rows = [(backend, model, src_lang, s, t, now) for s, t in items]

        def write() -> int:
            cur = self._db.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE")
                before = self._db.total_changes
                cur.executemany(
                    "INSERT OR IGNORE INTO translations "
                    "(backend, model, src_lang, src, tgt, created) VALUES (?, ?, ?, ?, ?, ?)",
                    rows,
                )
                added = self._db.total_changes - before
                cur.execute("COMMIT")
                return added
            except BaseException:
                if self._db.in_transaction:
                    cur.execute("ROLLBACK")
                raise

        return self._retry_locked(write)

    def __len__(self) -> int:
        return self._db.execute("SELECT COUNT(*) FROM translations").fetchone()[0]

    def close(self) -> None:
        """Close the connection (everything is already committed)."""
        self._db.close()

    def __enter__(self) -> TranslationCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
