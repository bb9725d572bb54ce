"""Crawl stage: one site to a pages dataset (Parquet parts of ``parasim.io.PAGES_SCHEMA``).

Breadth-first, level by level (so the pages requested do not depend on timing), confined to the
site's allowed domains, obeying robots.txt, resumable after a kill. See :func:`crawl_site`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from parasim.crawl.stage import crawl_site

__all__ = ["crawl_site"]


def __getattr__(name: str) -> Any:
    # Lazy, so that the local file server (parasim.crawl.serve, a child process) starts fast.
    if name == "crawl_site":
        from parasim.crawl.stage import crawl_site

        return crawl_site
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
