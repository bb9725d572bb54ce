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

from parasim.crawl.content import canonical, page_links, without_params

#: Skip reasons of links that are never requested (so they have no row in the pages table).
NOT_REQUESTED = ("offsite", "depth_limit", "page_limit")


def host_allowed(url: str, allowed_domains: Sequence[str]) -> bool:
    """True when the URL's host is one of ``allowed_domains`` or a subdomain of one (scrapy's
    rule)."""
    host = (urlsplit(url).hostname or "").lower()
    return any(host == d or host.endswith("." + d) for d in allowed_domains)


@dataclass(frozen=True)
class OriginMap:
    """Maps a site's canonical origins to the local servers that stand for them (``serve_dir``,
    ``serve``), and holds what the crawl reads as links.

    Without a local server every method is the identity, so the same code serves real sites.
    """

    canonical_origin: str | None = None  # e.g. "https://gov.demo.parasim.example"
    local_origin: str | None = None  # e.g. "http://127.0.0.1:40123"
    #: (alias prefix, site prefix): other URL prefixes the site's pages link itself by (e.g. its
    #: production host), rewritten to the site's own prefix before anything else.
    aliases: tuple[tuple[str, str], ...] = ()
    #: element attributes besides href whose values are followed (e.g. "data-ajax-replace").
    link_attrs: tuple[str, ...] = ()
    #: (canonical origin, local origin) of the site's other hosts (``serve: {host: folder}``).
    more_origins: tuple[tuple[str, str | None], ...] = ()
    #: the crawl requests each page's language links before its other links
    #: (``crawl_order: pairs_first``) ...
    pairs_first: bool = False
    #: ... those of these attributes of any element too (``pairing.language_attributes``).
    language_attrs: tuple[str, ...] = ()
    #: query parameters left out of every URL (``drop_query_params``: ``utm_*``, ...).
    drop_params: tuple[str, ...] = ()

    @property
    def pairs(self) -> tuple[tuple[str, str | None], ...]:
        """(canonical origin, local origin) of every served host."""
        first = ((self.canonical_origin, self.local_origin),) if self.canonical_origin else ()
        return first + self.more_origins

    @property
    def active(self) -> bool:
        return any(c and loc for c, loc in self.pairs)

    def normalize(self, url: str) -> str:
        """Aliases, the query parameters to drop, and any scheme/port on a canonical host -> its
        canonical origin."""
        for alias, target in self.aliases:
            if url.startswith(alias):
                url = target + url[len(alias) :]
                break
        url = without_params(url, self.drop_params)
        if not self.canonical_origin:
            return url
        parts = urlsplit(url)
        if not parts.hostname:
            return url
        for origin, _ in self.pairs:
            if parts.hostname == urlsplit(origin).hostname:
                rest = url[len(parts.scheme) + 3 + len(parts.netloc) :]
                return origin + (rest or "/")
        return url

    def to_local(self, url: str) -> str:
        """The URL to request."""
        for origin, local in self.pairs:
            if local and _has_origin(url, origin):
                return local + url[len(origin) :]
        return url

    def to_canonical(self, url: str) -> str:
        """The URL to store."""
        for origin, local in self.pairs:
            if local and _has_origin(url, local):
                return origin + url[len(local) :]
        return url

    def scrub(self, text: str | None) -> str | None:
        """Replace the local origins in free text (error messages) by the canonical ones."""
        if text:
            for origin, local in self.pairs:
                if local:
                    text = text.replace(local, origin)
        return text


def followed_links(root, base_url: str, origins: OriginMap) -> tuple[list[str], int]:
    """The links the crawl follows from a parsed page (the live crawl and a replay alike), and
    how many come first as language links."""
    return page_links(
        root,
        base_url,
        origins.normalize,
        origins.link_attrs,
        origins.pairs_first,
        origins.language_attrs,
    )


def _has_origin(url: str, origin: str | None) -> bool:
    return bool(origin) and (url == origin or url.startswith(origin + "/"))


@dataclass
class Frontier:
    """Level-synchronous BFS state.

    Use: ``current`` holds the URLs of the level being crawled; call :meth:`record` once per URL
    with the links found there; when :meth:`pending` is empty, :meth:`advance` builds the next
    level. Links that are not followed are counted once per URL in ``not_requested``.

    With ``pairs_first`` (a sample of page pairs, e.g. for the probe) each level takes the
    language links of the level before (the first ``first`` links :meth:`record` was given per
    page) ahead of the other links, and takes only as many other links as leave room within
    ``max_pages`` for their own language links on the next level; the other links it leaves wait
    for a later level, in order.
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
    pairs_first: bool = False
    _counted: set[str] = field(default_factory=set)
    _deferred: list[tuple[str, str | None]] = field(default_factory=list)
    _most_language_links: int = 0

    def __post_init__(self) -> None:
        self.allowed_domains = [d.lower() for d in self.allowed_domains]
        starts: list[tuple[str, str | None]] = []
        for u in self.start_urls:
            c = canonical(u)
            if c is None:
                raise ValueError(f"start URL {u!r} is not an absolute http(s) URL")
            starts.append((c, None))
        self._take(starts)

    def _take(self, candidates: Iterable[tuple[str, str | None]], keep: bool = False) -> None:
        """Make ``candidates`` (ordered, unseen) the current level, within the page limit
        (``keep``: add them to it)."""
        if not keep:
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

    def record(self, url: str, final_url: str | None, links: list[str], first: int = 0) -> None:
        """The result of one URL of the current level: where it ended up, and its links (the
        first ``first`` of them its language links, for ``pairs_first``)."""
        self.results[url] = (final_url, links, first)
        self._most_language_links = max(self._most_language_links, first)

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
        if self.pairs_first:
            return self._advance_pairs_first()
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
            return self._stop_at_depth(candidates)
        self.level += 1
        self._take(candidates)
        if not self.current:  # every candidate was offsite or over the page limit
            self.level -= 1
            return False
        return True

    def _stop_at_depth(self, candidates: list[tuple[str, str | None]]) -> bool:
        """The crawl ends at ``max_depth``: count the links left, end the level; False."""
        for link, _ in candidates:
            allowed = host_allowed(link, self.allowed_domains)
            self._count(link, "depth_limit" if allowed else "offsite")
        self.current, self.referer, self.results = [], {}, {}
        return False

    def _advance_pairs_first(self) -> bool:
        """:meth:`advance` with ``pairs_first``: language links, then what room is left for."""
        first: list[tuple[str, str | None]] = []
        rest: list[tuple[str, str | None]] = []
        fresh: set[str] = set()
        for url in self.current:
            _, links, n = self.results[url]
            for k, link in enumerate(links):
                if link not in self.seen and link not in fresh:
                    fresh.add(link)
                    (first if k < n else rest).append((link, url))
        rest = [c for c in self._deferred if c[0] not in self.seen and c[0] not in fresh] + rest
        self._deferred = []
        if not first and not rest:
            self.current, self.referer, self.results = [], {}, {}
            return False
        if self.level + 1 > self.max_depth:
            return self._stop_at_depth(first + rest)
        self.level += 1
        self._take(first)
        # Each page taken now may name this many counterparts, fetched on the next level.
        room = max(0, self.max_pages - self.requested) // (1 + max(1, self._most_language_links))
        onsite = [c for c in rest if host_allowed(c[0], self.allowed_domains)]
        self._take([c for c in rest if not host_allowed(c[0], self.allowed_domains)], keep=True)
        self._take(onsite[:room], keep=True)
        self._deferred = onsite[room:]
        if self.requested >= self.max_pages:  # nothing deferred will ever be requested
            for link, _ in self._deferred:
                self._count(link, "page_limit")
            self._deferred = []
        if not self.current:
            self.level -= 1
            if self._deferred:  # only links waiting for room, and room for one: take it
                self.level += 1
                self._take(self._deferred[:1], keep=True)
                self._deferred = self._deferred[1:]
            return bool(self.current)
        return True

    @property
    def done(self) -> bool:
        """No level left to crawl."""
        return not self.current
