"""The crawl frontier: a level-by-level breadth-first search that does not depend on timing.

Pages of one depth are fetched concurrently; the next level is built only when the whole level is
done, from its pages in level order and their links in document order. So which URLs are requested,
at which depth, from which referer, and which ones the page limit cuts, are the same on every run,
and a resumed crawl can replay finished levels from stored pages without fetching anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from parasim.crawl.content import canonical

#: Skip reasons of links that are never requested (so they have no row in the pages table).
NOT_REQUESTED = ("offsite", "depth_limit", "page_limit")


def host_allowed(url: str, allowed_domains: Sequence[str]) -> bool:
    """True when the URL's host is one of ``allowed_domains`` or a subdomain of one (scrapy's
    rule)."""
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in allowed_domains)


@dataclass(frozen=True)
class OriginMap:
    """Maps a site's canonical origin to the local server that stands for it (``serve_dir``).

    Without a local server every method is the identity, so the same code serves real sites.
    """

    canonical_origin: str | None = None  # e.g. "https://gov.demo.parasim.example"
    local_origin: str | None = None  # e.g. "http://127.0.0.1:40123"
    #: (alias prefix, site prefix): other URL prefixes the site's pages link itself by (e.g. its
    #: production host), rewritten to the site's own prefix before anything else.
    aliases: tuple[tuple[str, str], ...] = ()
    #: element attributes besides href whose values are followed (e.g. "data-ajax-replace").
    link_attrs: tuple[str, ...] = ()

    @property
    def active(self) -> bool:
        return bool(self.canonical_origin and self.local_origin)

    def normalize(self, url: str) -> str:
        """Aliases and any scheme/port on the canonical host -> the canonical origin."""
        for alias, target in self.aliases:
            if url.startswith(alias):
                url = target + url[len(alias) :]
                break
        if not self.canonical_origin:
            return url
        parts = urlsplit(url)
        if parts.hostname and parts.hostname == urlsplit(self.canonical_origin).hostname:
            rest = url[len(parts.scheme) + 3 + len(parts.netloc) :]
            return self.canonical_origin + (rest or "/")
        return url

    def to_local(self, url: str) -> str:
        """The URL to request."""
        if self.active and _has_origin(url, self.canonical_origin):
            return self.local_origin + url[len(self.canonical_origin) :]
        return url

    def to_canonical(self, url: str) -> str:
        """The URL to store."""
        if self.active and _has_origin(url, self.local_origin):
            return self.canonical_origin + url[len(self.local_origin) :]
        return url

    def scrub(self, text: str | None) -> str | None:
        """Replace the local origin in free text (error messages) by the canonical one."""
        if text and self.active:
            return text.replace(self.local_origin, self.canonical_origin)
        return text


def _has_origin(url: str, origin: str | None) -> bool:
    return bool(origin) and (url == origin or url.startswith(origin + "/"))


@dataclass
class Frontier:
    """Level-synchronous BFS state.

    Use: ``current`` holds the URLs of the level being crawled; call :meth:`record` once per URL
    with the links found there; when :meth:`pending` is empty, :meth:`advance` builds the next
    level. Links that are not followed are counted once per URL in ``not_requested``.
    """

    start_urls: Sequence[str]
    allowed_domains: Sequence[str]
    max_pages: int
    max_depth: int
    level: int = 0
    current: list[str] = field(default_factory=list)
    referer: dict[str, str | None] = field(default_factory=dict)
    results: dict[str, tuple[str | None, list[str]]] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    requested: int = 0
    not_requested: Counter = field(default_factory=Counter)
    _counted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.allowed_domains = [d.lower() for d in self.allowed_domains]
        starts: list[tuple[str, str | None]] = []
        for u in self.start_urls:
            c = canonical(u)
            if c is None:
                raise ValueError(f"start URL {u!r} is not an absolute http(s) URL")
            starts.append((c, None))
        self._take(starts)

    def _take(self, candidates: Iterable[tuple[str, str | None]]) -> None:
        """Make ``candidates`` (ordered, unseen) the current level, within the page limit."""
        self.current, self.referer, self.results = [], {}, {}
        for url, ref in candidates:
            if url in self.seen:
                continue
            if not host_allowed(url, self.allowed_domains):
                self._count(url, "offsite")
            elif self.requested >= self.max_pages:
                self._count(url, "page_limit")
            else:
                self.seen.add(url)
                self.current.append(url)
                self.referer[url] = ref
                self.requested += 1

    def _count(self, url: str, reason: str) -> None:
        if url not in self._counted:
            self._counted.add(url)
            self.not_requested[reason] += 1

    def record(self, url: str, final_url: str | None, links: list[str]) -> None:
        """The result of one URL of the current level: where it ended up, and its links."""
        self.results[url] = (final_url, links)

    def pending(self) -> list[str]:
        """URLs of the current level without a result yet, in level order."""
        return [u for u in self.current if u not in self.results]

    def advance(self) -> bool:
        """Build the next level from the finished current one; False when the crawl is over."""
        if self.pending():
            raise RuntimeError("advance() before the level is finished")
        for url in self.current:
            final = self.results[url][0]
            if final:
                self.seen.add(final)
        candidates: list[tuple[str, str | None]] = []
        fresh: set[str] = set()
        for url in self.current:
            for link in self.results[url][1]:
                if link not in self.seen and link not in fresh:
                    fresh.add(link)
                    candidates.append((link, url))
        if not candidates:
            self.current, self.referer, self.results = [], {}, {}
            return False
        if self.level + 1 > self.max_depth:
            for link, _ in candidates:
                allowed = host_allowed(link, self.allowed_domains)
                self._count(link, "depth_limit" if allowed else "offsite")
            self.current, self.referer, self.results = [], {}, {}
            return False
        self.level += 1
        self._take(candidates)
        if not self.current:  # every candidate was offsite or over the page limit
            self.level -= 1
            return False
        return True

    @property
    def done(self) -> bool:
        """No level left to crawl."""
        return not self.current
