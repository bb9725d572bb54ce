"""The parse cache: one SQLite file (WAL) of sentence -> Penman graph, shared by every job.

It is the translation cache (:class:`parasim.translate.cache.TranslationCache`, same locking and
write rules, same table layout) keyed by (``"amr"``, parser identity, ``"en"``, sentence). The
parser identity (:func:`parasim.amr.parse.parser_id`) names the parser, its version and its
model, so a new rules version or another amrlib model never reads old graphs. Only successful
parses are stored: a sentence that failed is parsed again on the next run.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from parasim.translate.cache import TranslationCache

_BACKEND = "amr"
_LANG = "en"


class ParseCache:
    """Penman graphs of sentences, persisted in SQLite (in memory when ``path`` is None).

    Args:
        path: The SQLite file (created with its folder when missing), or None.
        busy_timeout_s: How long a write waits for another process's lock.
    """

    def __init__(self, path: str | os.PathLike | None, busy_timeout_s: float = 120.0) -> None:
        self._store = TranslationCache(path, busy_timeout_s)
        self.path = self._store.path

    @property
    def hits(self) -> int:
        """Sentences found so far."""
        return self._store.hits

    @property
    def misses(self) -> int:
        """Sentences looked up and not found so far."""
        return self._store.misses

    def get_many(self, parser: str, texts: Iterable[str]) -> dict[str, str]:
        """Cached graphs of ``texts`` by parser identity (only those found): {sentence: graph}."""
        return self._store.get_many(_BACKEND, parser, _LANG, texts)

    def put_many(self, parser: str, graphs: Mapping[str, str]) -> int:
        """Store {sentence: graph} in one transaction; returns the rows added."""
        return self._store.put_many(_BACKEND, parser, _LANG, graphs)

    def __len__(self) -> int:
        return len(self._store)

    def close(self) -> None:
        """Close the connection (everything is already committed)."""
        self._store.close()

    def __enter__(self) -> ParseCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
