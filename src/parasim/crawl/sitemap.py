"""Sitemaps as a source of URLs: robots.txt ``Sitemap:`` lines, else ``/sitemap.xml``, per host.

A site with ``sitemaps: true`` starts its crawl from its start URLs and every page URL its hosts'
sitemaps list (sitemap indexes are followed, gzipped sitemaps read). The list is fetched once,
before the crawl, and kept in the crawl state, so a resumed crawl starts from the same URLs.
A sitemap's ``<xhtml:link rel="alternate" hreflang="fr" href="...">`` entries name each listed
page's translations, as hreflang links in the page's head do: the crawl keeps them beside its
pages (:data:`ALTERNATES_FILE`), the pair stage's ``sitemap`` evidence.
"""

from __future__ import annotations

import gzip
import logging
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from lxml import etree

from parasim.crawl.content import canonical, looks_like_page

#: Most sitemap files read per site (an index may name many).
MAX_SITEMAPS = 50
_NS = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
_XHTML = "{http://www.w3.org/1999/xhtml}"
#: The sitemaps' alternates, beside the crawl's pages: ``[[page URL, hreflang, URL], ...]``.
ALTERNATES_FILE = "sitemap_alternates.json"
_XML = etree.XMLParser(resolve_entities=False, no_network=True)


@dataclass
class SitemapResult:
    """The page URLs the sitemaps list, in order, and what was read."""

    urls: list[str] = field(default_factory=list)
    #: (listed page URL, hreflang as written, alternate URL), canonical, in the order listed
    alternates: list[tuple[str, str, str]] = field(default_factory=list)
    sitemaps_read: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _root(body: bytes):
    if body[:2] == b"\x1f\x8b":
        body = gzip.decompress(body)
    try:
        return etree.fromstring(body, parser=_XML)
    except etree.XMLSyntaxError as exc:
        raise ValueError(f"not XML ({exc})") from None


def parse_sitemap(body: bytes) -> tuple[list[str], list[str]]:
    """The ``<loc>`` values of a sitemap: (page URLs of a ``<urlset>``, sitemap URLs of a
    ``<sitemapindex>``); both empty when the body is not a sitemap.

    Raises:
        ValueError: the body is not XML.
    """
    return _locs(_root(body))


def parse_alternates(body: bytes) -> list[tuple[str, str, str]]:
    """The alternates of a ``<urlset>``: (the ``<url>``'s ``<loc>``, ``hreflang``, ``href``) of
    every ``<xhtml:link rel="alternate">`` with both, in order (the page itself included, as
    sitemaps list it); none for another body.

    Raises:
        ValueError: the body is not XML.
    """
    return _alternates(_root(body))


def _alternates(root) -> list[tuple[str, str, str]]:
    if etree.QName(root).localname != "urlset":
        return []
    out = []
    for url in root.iter(f"{_NS}url", "url"):
        loc = next((el.text or "" for el in url.iter(f"{_NS}loc", "loc")), "").strip()
        if not loc:
            continue
        for link in url.iter(f"{_XHTML}link"):
            rel = (link.get("rel") or "").lower().split()
            lang, href = (link.get("hreflang") or "").strip(), (link.get("href") or "").strip()
            if "alternate" in rel and lang and href:
                out.append((loc, lang, href))
    return out


def _locs(root) -> tuple[list[str], list[str]]:
    tag = etree.QName(root).localname
    locs = [
        (el.text or "").strip() for el in root.iter(f"{_NS}loc", "loc") if (el.text or "").strip()
    ]
    if tag == "urlset":
        return locs, []
    if tag == "sitemapindex":
        return [], locs
    return [], []


def robots_sitemaps(text: str) -> list[str]:
    """The ``Sitemap:`` URLs of a robots.txt."""
    out = []
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip().lower() == "sitemap" and value.strip():
            out.append(value.strip())
    return out


def _fetch(url: str, user_agent: str, timeout_s: float, max_bytes: int) -> bytes | None:
    req = urllib.request.Request(url, headers={"User-Agent": user_agent})
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as resp:  # noqa: S310 - http(s) only
            if resp.status != 200:
                return None
            return resp.read(max_bytes + 1)[:max_bytes]
    except (urllib.error.URLError, OSError, ValueError):
        return None


def sitemap_urls(
    origins: Iterable[str],
    *,
    to_local: Callable[[str], str],
    to_canonical: Callable[[str], str],
    normalize: Callable[[str], str],
    allowed: Callable[[str], bool],
    user_agent: str,
    timeout_s: float = 30.0,
    max_bytes: int = 50_000_000,
    log: logging.Logger | None = None,
) -> SitemapResult:
    """Read the sitemaps of each origin: those its robots.txt names, else ``/sitemap.xml``.

    Args:
        origins: the site's origins (``https://host``), in order.
        to_local: canonical URL -> the URL to request (a local server standing for the host).
        to_canonical: a requested URL -> its canonical form (for messages).
        normalize: a listed URL -> the form the crawl uses (aliases, the canonical origin).
        allowed: whether a listed URL's host belongs to the site.
        user_agent: the crawl's user agent.
        timeout_s: per request.
        max_bytes: most bytes read of one file.
        log: where problems are logged (default: ``parasim.crawl``).

    Returns:
        The page URLs, canonical and de-duplicated, in the order listed; the sitemaps read; one
        line per sitemap that could not be read.
    """
    log = log or logging.getLogger("parasim.crawl")
    out = SitemapResult()
    seen_urls: set[str] = set()
    queue: list[str] = []
    for origin in origins:
        robots = _fetch(to_local(origin + "/robots.txt"), user_agent, timeout_s, max_bytes)
        named = robots_sitemaps(robots.decode("utf-8", "replace")) if robots else []
        queue += [normalize(canonical(u) or u) for u in named] or [origin + "/sitemap.xml"]
    done: set[str] = set()
    while queue and len(done) < MAX_SITEMAPS:
        sm = queue.pop(0)
        if sm in done:
            continue
        done.add(sm)
        body = _fetch(to_local(sm), user_agent, timeout_s, max_bytes)
        if body is None:
            if not sm.endswith("/sitemap.xml"):  # a missing default sitemap is no problem
                out.problems.append(f"{sm}: not fetched")
            continue
        try:
            root = _root(body)
            pages, nested = _locs(root)
            alternates = _alternates(root) if pages else []
        except (ValueError, OSError, EOFError) as exc:
            out.problems.append(f"{sm}: {exc}")
            continue
        out.sitemaps_read.append(sm)
        queue += [normalize(canonical(u) or u) for u in nested]
        for u in pages:
            c = canonical(u)
            if c is None or not looks_like_page(c):
                continue
            c = normalize(c)
            if allowed(c) and c not in seen_urls:
                seen_urls.add(c)
                out.urls.append(c)
        for loc, lang, href in alternates:
            a, b = canonical(loc), canonical(href)
            if a and b and allowed(normalize(a)) and allowed(normalize(b)):
                out.alternates.append((normalize(a), lang, normalize(b)))
    for line in out.problems:
        log.warning("crawl: sitemap %s", to_canonical(line))
    return out
