"""The scrapy side of the crawl: one spider driven by a :class:`CrawlJob` (frontier + state writer).

Every URL the frontier hands out is requested exactly once (scrapy's duplicate filter is off; the
frontier de-duplicates) and ends as exactly one row: the callback writes fetched pages, the errback
failed ones, and a request that vanished without either is written as ``no_response`` when the level
ends.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy import signals
from scrapy.exceptions import DontCloseSpider, IgnoreRequest, StopDownload

from parasim.crawl.content import (
    HTML_TYPES,
    declared_lang,
    decode_html,
    media_type,
    parse_html,
)
from parasim.crawl.frontier import Frontier, OriginMap, followed_links, host_allowed
from parasim.crawl.state import StateWriter


def _now() -> datetime:
    return datetime.now(UTC)


def _header(headers: Any, name: bytes) -> str | None:
    value = headers.get(name) if headers is not None else None
    return value.decode("latin-1") if value else None


def _sniff_html(body: bytes) -> bool:
    head = body[:1024].lstrip().lower()
    return head.startswith((b"<!doctype html", b"<html")) or b"<html" in head


def page_row(
    *,
    url: str,
    final_url: str,
    status: int,
    content_type: str | None,
    content_language: str | None,
    body: bytes,
    depth: int,
    referer: str | None,
    origins: OriginMap | None = None,
    stopped: bool = False,
) -> tuple[dict, list[str], int]:
    """One pages-table row for an HTTP response, and the links to follow from it.

    Args:
        url: the canonical URL requested.
        final_url: the canonical URL after redirects.
        status: HTTP status.
        content_type: the Content-Type header.
        content_language: the Content-Language header.
        body: the raw body.
        depth: link hops from a start URL.
        referer: the canonical URL of the page that linked here first.
        origins: how the site's links are read (:func:`link_options`).
        stopped: the download was stopped early (a non-HTML content type).

    Returns:
        The row (``skip_reason`` null for a usable page), the page's links (none when skipped)
        and how many of them are its language links put first (``pairs_first``).
    """
    row: dict = {
        "url": url,
        "final_url": final_url,
        "status": status,
        "content_type": content_type,
        "fetched_at": _now(),
        "depth": depth,
        "referer": referer,
    }
    mt = media_type(content_type)
    if not 200 <= status < 300:
        row["skip_reason"] = f"http_{status}"
        return row, [], 0
    if (
        stopped
        or (mt is not None and mt not in HTML_TYPES)
        or (mt is None and not _sniff_html(body))
    ):
        row["skip_reason"] = "non_html"
        return row, [], 0
    if not body.strip():
        row["skip_reason"] = "empty"
        return row, [], 0
    decoded = decode_html(body, content_type)
    root = parse_html(decoded.text)
    row.update(
        html=decoded.text,
        encoding=decoded.encoding,
        content_hash=hashlib.sha256(body).hexdigest(),
        declared_lang=declared_lang(root, content_language),
        error=decoded.note,
    )
    return (row, *followed_links(root, final_url, origins or OriginMap()))


def classify_failure(exc: BaseException) -> str:
    """A skip reason for a failed request (time-out, connection, robots.txt, ...)."""
    from scrapy.exceptions import (
        CannotResolveHostError,
        DownloadCancelledError,
        DownloadConnectionRefusedError,
        DownloadFailedError,
        DownloadTimeoutError,
        IgnoreRequest,
        ResponseDataLossError,
    )
    from twisted.internet import error as terr
    from twisted.web._newclient import ResponseNeverReceived

    if isinstance(exc, IgnoreRequest):
        msg = str(exc).lower()
        if "robots" in msg:
            return "robots"
        if "redirection" in msg:
            return "redirect_loop"
        if "offsite" in msg:
            return "offsite_redirect"
        return "ignored"
    if isinstance(exc, (DownloadTimeoutError, terr.TimeoutError)):
        return "timeout"
    if isinstance(exc, DownloadCancelledError):
        return "too_large"  # scrapy cancels a download only when it exceeds DOWNLOAD_MAXSIZE
    if isinstance(exc, (CannotResolveHostError, terr.DNSLookupError)):
        return "dns"
    if isinstance(
        exc,
        (
            DownloadConnectionRefusedError,
            DownloadFailedError,
            ResponseDataLossError,
            ResponseNeverReceived,
            terr.ConnectError,
            terr.ConnectionLost,
            terr.ConnectionDone,
        ),
    ):
        return "connection"
    return "error"


@dataclass
class CrawlJob:
    """What the spider needs: the frontier, the state writer and the origin mapping."""

    frontier: Frontier
    writer: StateWriter
    origins: OriginMap
    log: logging.Logger
    log_interval_s: float = 10.0
    fetched: int = 0
    ok: int = 0
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    fatal: str | None = None
    close_reason: str | None = None

    def finish(self, url: str, row: dict, links: list[str], first: int = 0) -> None:
        """Store one row and hand the page's links to the frontier."""
        if url in self.frontier.results:  # a second answer for one request: keep the first
            return
        self.writer.add(row)
        self.frontier.record(url, row.get("final_url"), links, first)
        self.fetched += 1
        self.ok += row.get("skip_reason") is None

    def failed_row(self, url: str, reason: str, error: str | None, final_url: str | None) -> dict:
        """A row for a URL that gave no usable response."""
        return {
            "url": url,
            "final_url": final_url,
            "status": None,
            "fetched_at": _now(),
            "depth": self.frontier.level,
            "referer": self.frontier.referer.get(url),
            "skip_reason": reason,
            "error": self.origins.scrub(error),
        }

    def next_level(self) -> list[str]:
        """Close the finished level and return the URLs of the next one (none: done)."""
        for url in self.frontier.pending():  # nothing is in flight when the spider is idle
            self.finish(url, self.failed_row(url, "no_response", "no response or error", None), [])
        self.writer.flush()
        if not self.frontier.advance():
            return []
        self.log.info(
            "crawl: level %d, %d URL(s) to fetch (%d requested in all)",
            self.frontier.level,
            len(self.frontier.current),
            self.frontier.requested,
        )
        return list(self.frontier.current)

    def progress(self) -> None:
        """One progress line for the log."""
        elapsed = max(time.monotonic() - self.started, 1e-9)
        self.log.info(
            "crawl: %d page(s) fetched (%d ok) in %.0f s, %.1f pages/s; level %d, %d pending",
            self.fetched,
            self.ok,
            elapsed,
            self.fetched / elapsed,
            self.frontier.level,
            len(self.frontier.pending()),
        )


class ConfineMiddleware:
    """Downloader middleware: no request leaves the allowed domains, redirects included.

    The frontier only hands out allowed URLs, but a redirect can point anywhere. It runs before
    robots.txt handling, so not even robots.txt is fetched from another host, and the failure
    reaches the request's errback (scrapy's own offsite filter drops such requests silently).
    """

    def __init__(self, crawler) -> None:
        self.crawler = crawler

    @classmethod
    def from_crawler(cls, crawler) -> ConfineMiddleware:
        return cls(crawler)

    def process_request(self, request: scrapy.Request) -> scrapy.Request | None:
        spider = self.crawler.spider
        origins: OriginMap | None = getattr(getattr(spider, "job", None), "origins", None)
        if origins is not None and origins.active:
            # A redirect (or meta refresh) to the canonical origin goes to the local server.
            local = origins.to_local(origins.normalize(request.url))
            if local != request.url:
                return request.replace(url=local)
        domains = getattr(spider, "allowed_domains", None)
        if domains and not host_allowed(request.url, domains):
            host = urlsplit(request.url).hostname
            raise IgnoreRequest(f"Filtered offsite redirect to {host!r}")


class PageSpider(scrapy.Spider):
    """Fetches the URLs a :class:`CrawlJob`'s frontier hands out, level by level."""

    name = "parasim"

    def __init__(self, job: CrawlJob, request_domains: list[str] | None = None, **kwargs: Any):
        super().__init__(**kwargs)
        self.job = job
        # Hosts requests may go to (ConfineMiddleware); links are filtered by the frontier.
        self.allowed_domains = [d.lower() for d in request_domains or []]
        self._loops: list = []

    @classmethod
    def from_crawler(cls, crawler, *args: Any, **kwargs: Any) -> PageSpider:
        spider = super().from_crawler(crawler, *args, **kwargs)
        crawler.signals.connect(spider._on_opened, signal=signals.spider_opened)
        crawler.signals.connect(spider._on_idle, signal=signals.spider_idle)
        crawler.signals.connect(spider._on_closed, signal=signals.spider_closed)
        crawler.signals.connect(spider._on_headers, signal=signals.headers_received)
        return spider

    def _request(self, url: str) -> scrapy.Request:
        """The request for a canonical URL of the current level."""
        return scrapy.Request(
            self.job.origins.to_local(url),
            callback=self.parse,
            errback=self.errback,
            dont_filter=True,
            meta={"pz_url": url},
        )

    async def start(self):
        for url in self.job.frontier.pending():
            yield self._request(url)

    def _on_opened(self, spider: scrapy.Spider) -> None:
        from twisted.internet import task

        self.job.started = time.monotonic()
        flush = task.LoopingCall(self.job.writer.maybe_flush)
        flush.start(min(1.0, self.job.writer.flush_s), now=False)
        progress = task.LoopingCall(self.job.progress)
        progress.start(self.job.log_interval_s, now=False)
        self._loops = [flush, progress]

    def _on_closed(self, spider: scrapy.Spider, reason: str) -> None:
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self.job.close_reason = reason
        self.job.finished = time.monotonic()
        self.job.writer.flush()

    def _on_idle(self, spider: scrapy.Spider) -> None:
        try:
            urls = self.job.next_level()
        except Exception as exc:  # e.g. the disk is full: stop, keep what is stored
            self.job.fatal = f"{type(exc).__name__}: {exc}"
            self.job.log.exception("crawl: cannot go on")
            return
        if urls:
            for url in urls:
                self.crawler.engine.crawl(self._request(url))
            raise DontCloseSpider

    def _on_headers(self, headers, body_length, request, spider) -> None:
        # Do not download bodies we will not store (PDFs, images, ...); robots.txt is not ours.
        if "pz_url" not in request.meta:
            return
        mt = media_type(_header(headers, b"Content-Type"))
        if mt is not None and mt not in HTML_TYPES:
            raise StopDownload(fail=False)

    def parse(self, response: scrapy.http.Response, **kwargs: Any) -> None:
        job = self.job
        url = response.meta["pz_url"]
        try:
            row, links, first = page_row(
                url=url,
                final_url=job.origins.to_canonical(response.url),
                status=response.status,
                content_type=_header(response.headers, b"Content-Type"),
                content_language=_header(response.headers, b"Content-Language"),
                body=response.body,
                depth=job.frontier.level,
                referer=job.frontier.referer.get(url),
                origins=job.origins,
                stopped="download_stopped" in response.flags,
            )
        except Exception as exc:  # a bug must cost one page, not the crawl
            job.log.exception("crawl: cannot process %s", url)
            row = job.failed_row(url, "internal_error", repr(exc), None)
            links, first = [], 0
        job.finish(url, row, links, first)

    def errback(self, failure) -> None:
        request = getattr(failure, "request", None)
        meta = request.meta if request is not None else {}
        url = meta.get("pz_url")
        if url is None:
            self.job.log.warning("crawl: failure without a request: %s", failure.value)
            return
        final = self.job.origins.to_canonical(request.url) if request.url else None
        reason = classify_failure(failure.value)
        msg = f"{type(failure.value).__name__}: {failure.value}".strip()
        self.job.finish(url, self.job.failed_row(url, reason, msg, final), [])
