"""What a site's pages look like: the element holding the text, links scripts follow, aliases.

Steps of the probe (:mod:`parasim.probe.stage`) that read page structure, not language: a
``main_selector`` candidate, ``data-*`` attributes whose values are page URLs, and URL prefixes on
other hosts under which the site links its own pages.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from lxml import etree

from parasim.crawl.content import canonical, looks_like_page

#: Elements whose text nobody reads.
_INVISIBLE = ("script", "style", "noscript", "template", "svg")
_IDENT_RE = re.compile(r"^-?[A-Za-z_][A-Za-z0-9_-]*$")
_URLISH_RE = re.compile(r"^[^\s{}\[\]()<>\"'`,;]+$")
#: What a link attribute's value looks like: a path with a folder, or a page file name.
_PAGE_PATH_RE = re.compile(r"(^https?://|/|\.(html?|xhtml|shtml|php|aspx?|jsp)([?#]|$))", re.I)
#: A main-content candidate must hold at least this share of a page's words ...
MAIN_MIN_SHARE = 0.5
#: ... and, unless it is ``main`` or ``[role=main]``, less than this share on the median page (a
#: wrapper of the whole page sheds nothing).
MAIN_MAX_SHARE = 0.99
_SEMANTIC = ("main", "[role=main]")


@dataclass
class Page:
    """One fetched page of the sample."""

    url: str
    base: str  # the final URL: links resolve against it
    declared: str | None
    measured: str | None
    html: str
    root: etree._Element | None

    @property
    def lang(self) -> str | None:
        """The declared language, else the measured one."""
        return self.declared or self.measured


_HIDDEN = frozenset(_INVISIBLE) | {"head", "title"}


def word_counts(root: etree._Element) -> dict[etree._Element, int]:
    """Visible words inside each element of a page: text of the head, scripts, styles and
    templates left out; the text after a comment counts."""
    counts: dict[etree._Element, int] = {}
    for el in reversed(list(root.iter())):  # descendants before their ancestors
        if not isinstance(el.tag, str) or el.tag in _HIDDEN:
            counts[el] = 0
            continue
        n = len(el.text.split()) if el.text else 0
        for child in el:
            n += counts[child] + (len(child.tail.split()) if child.tail else 0)
        counts[el] = n
    return counts


def _describe(el: etree._Element) -> str | None:
    """A CSS selector naming ``el`` the way a person would write it, or None for body/html."""
    if el.tag in ("body", "html") or not isinstance(el.tag, str):
        return None
    if el.tag == "main":
        return "main"
    if (el.get("role") or "").strip().lower() == "main":
        return "[role=main]"
    ident = (el.get("id") or "").strip()
    if ident and _IDENT_RE.match(ident):
        return f"#{ident}"
    classes = [c for c in (el.get("class") or "").split() if _IDENT_RE.match(c)]
    return f"{el.tag}.{classes[0]}" if classes else el.tag


def main_candidates(root: etree._Element | None, words: dict[etree._Element, int]) -> list[str]:
    """Selectors of the elements on the way from ``<body>`` down to where the text spreads out:
    at each step the child holding most of the words, while it holds at least
    :data:`MAIN_MIN_SHARE` of its parent's.

    Args:
        root: the parsed page.
        words: its :func:`word_counts`.
    """
    body = root.find(".//body") if root is not None else None
    if body is None:
        return []
    out, node = [], body
    while words[node]:
        kids = [k for k in node if isinstance(k.tag, str) and k.tag not in _HIDDEN]
        if not kids:
            break
        best = max(kids, key=lambda k: words[k])
        if words[best] < MAIN_MIN_SHARE * words[node]:
            break
        name = _describe(best)
        if name and name not in out:
            out.append(name)
        node = best
    return out


def main_selector_counts(pages: list[Page]) -> dict[str, dict]:
    """Step 5: for each candidate selector, the pages where it holds most of the words, and the
    median share it holds there."""
    from lxml.cssselect import CSSSelector

    pairs = [(p, word_counts(p.root) if p.root is not None else {}) for p in pages]
    names = sorted({c for p, w in pairs for c in main_candidates(p.root, w)})
    out = {}
    for name in names:
        sel = CSSSelector(name)
        shares = []
        for p, w in pairs:
            total = w.get(p.root, 0)
            found = set(sel(p.root)) if total else set()
            outer = [e for e in found if not any(a in found for a in e.iterancestors())]
            shares.append(sum(w[e] for e in outer) / total if total else 0.0)
        held = [s for s in shares if s >= MAIN_MIN_SHARE]
        out[name] = {
            "pages_holding_most": len(held),
            "pages": len(pages),
            "median_share": round(statistics.median(held), 3) if held else 0.0,
        }
    return out


def choose_main_selector(counts: dict[str, dict]) -> tuple[str | None, str]:
    """The selector holding most of the words on the most pages (at least half of them), ties to
    ``main``, ``[role=main]``, then the smaller share; None (the whole page) when none does."""
    fits = {
        k: v
        for k, v in counts.items()
        if (k in _SEMANTIC or v["median_share"] < MAIN_MAX_SHARE)
        and v["pages_holding_most"] * 2 >= v["pages"] > 0
    }
    if not fits:
        return None, "no element holds most of the words on at least half of the pages"
    best = min(
        fits,
        key=lambda k: (
            -fits[k]["pages_holding_most"],
            _SEMANTIC.index(k) if k in _SEMANTIC else len(_SEMANTIC),
            fits[k]["median_share"],
            k,
        ),
    )
    v = fits[best]
    return best, (
        f"{best}: holds most of the words on {v['pages_holding_most']}/{v['pages']} pages "
        f"(median {v['median_share']:.0%})"
    )


def _href_links(p: Page) -> set[str]:
    if p.root is None:
        return set()
    out = set()
    for href in p.root.xpath("//a/@href | //area/@href | //link/@href"):
        url = _resolve(p.base, href)
        if url:
            out.add(url)
    return out


def _resolve(base: str, value: str) -> str | None:
    value = value.strip()
    if not value or value.startswith(("#", "javascript:", "mailto:", "data:", "tel:")):
        return None
    if not _URLISH_RE.match(value):
        return None
    try:
        url = canonical(urljoin(base, value))
    except ValueError:
        return None
    return url.split("#")[0] if url and looks_like_page(url) else None


#: Elements whose ``href`` the crawl reads anyway.
_HREF_ELEMENTS = frozenset({"a", "area", "link", "base"})


def is_link_attribute(tag: str, name: str) -> bool:
    """Whether an attribute may hold a link the crawl does not read by default: a ``data-*``
    attribute (menus loaded by script), ``href`` on any other element than ``<a>``, ``<area>``,
    ``<link>`` (custom elements: ``<x-nav-link href>``), or a name with ``href`` in it
    (``lang-href``)."""
    if name.startswith("data-"):
        return True
    if name == "href":
        return tag not in _HREF_ELEMENTS
    return "href" in name


def is_language_attribute(name: str) -> bool:
    """Whether a link attribute's name says it leads to the page in another language."""
    return "lang" in name and name not in ("lang", "hreflang", "xml:lang")


def script_links(pages: list[Page], hosts: tuple[str, ...]) -> dict[str, dict[str, set]]:
    """Attributes that hold page URLs on the site but that the crawl does not read by default
    (:func:`is_link_attribute`): per attribute, the pages that use it and the URLs it names."""
    out: dict[str, dict[str, set]] = defaultdict(lambda: {"pages": set(), "urls": set()})
    for p in pages:
        if p.root is None:
            continue
        for el in p.root.iter():
            if not isinstance(el.tag, str):
                continue
            for name, value in el.attrib.items():
                if not is_link_attribute(el.tag, name) or not _PAGE_PATH_RE.search(value):
                    continue
                url = _resolve(p.base, value)
                if url and (urlsplit(url).hostname or "") in hosts:
                    out[name]["pages"].add(p.url)
                    out[name]["urls"].add(url)
    return dict(sorted(out.items()))


def link_attribute_counts(pages: list[Page], hosts: tuple[str, ...]) -> dict[str, dict]:
    """Step 6: per attribute naming page URLs on the site that the crawl does not read by default
    (:func:`script_links`): on how many pages, how many URLs, and how many of those no ``<a>``,
    ``<area>`` or ``<link>`` of the sample links to."""
    hrefs = set().union(*(_href_links(p) for p in pages)) if pages else set()
    return {
        name: {
            "pages": len(v["pages"]),
            "urls": len(v["urls"]),
            "urls_no_href_reaches": len(v["urls"] - hrefs),
        }
        for name, v in script_links(pages, hosts).items()
    }


def alias_counts(pages: list[Page], origin: str, hosts: tuple[str, ...] = ()) -> dict[str, dict]:
    """Step 6: URL prefixes on other hosts under which the sample links this site's own paths
    (e.g. its production address): per prefix, the linked paths and how many are known here.

    Args:
        pages: the sample.
        origin: the site's origin (its paths are the ones known here).
        hosts: the hosts the crawl may visit (the origin's host is always one).
    """
    hosts = {urlsplit(origin).hostname, *hosts}
    known: set[str] = set()
    offsite: set[str] = set()
    for p in pages:
        for url in _href_links(p) | {p.url}:
            parts = urlsplit(url)
            if parts.hostname in hosts:
                known.add(parts.path.lstrip("/"))
            elif parts.scheme in ("http", "https"):
                offsite.add(f"{parts.scheme}://{parts.netloc}{parts.path}")
    linked: dict[str, set] = defaultdict(set)
    for url in offsite:
        parts = urlsplit(url)
        segments = parts.path.lstrip("/").split("/")
        for k in range(len(segments)):
            prefix = f"{parts.scheme}://{parts.netloc}/" + "".join(s + "/" for s in segments[:k])
            rest = "/".join(segments[k:])
            if rest:
                linked[prefix].add(rest)
    out = {}
    for prefix, rests in sorted(linked.items()):
        hits = rests & known
        if hits:
            out[prefix] = {"paths": len(rests), "known": len(hits)}
    return out


#: An alias needs this many of its linked paths known on the site ...
ALIAS_MIN_KNOWN = 3
#: ... making up at least this share of them.
ALIAS_MIN_SHARE = 0.5


def choose_aliases(counts: dict[str, dict]) -> list[str]:
    """Prefixes with at least :data:`ALIAS_MIN_KNOWN` known paths making up at least
    :data:`ALIAS_MIN_SHARE` of what is linked under them; of nested ones, the shortest."""
    ok = [
        p
        for p, v in counts.items()
        if v["known"] >= ALIAS_MIN_KNOWN and v["known"] >= ALIAS_MIN_SHARE * v["paths"]
    ]
    return sorted(p for p in ok if not any(q != p and p.startswith(q) for q in ok))


def tracking_param_counts(pages: list[Page]) -> dict[str, int]:
    """Per tracking-parameter pattern (:data:`parasim.crawl.content.TRACKING_PARAMS`), the links
    of the sample whose query carries it."""
    import fnmatch

    from parasim.crawl.content import TRACKING_PARAMS

    out: dict[str, int] = {}
    for p in pages:
        if p.root is None:
            continue
        for href in p.root.xpath("//a/@href | //area/@href"):
            query = urlsplit(href.strip()).query if "?" in href else ""
            names = {kv.split("=", 1)[0] for kv in query.split("&") if kv}
            for pattern in TRACKING_PARAMS:
                if any(fnmatch.fnmatchcase(n, pattern) for n in names):
                    out[pattern] = out.get(pattern, 0) + 1
    return dict(sorted(out.items()))


def index_file_counts(pages: list[Page], known: tuple[str, ...]) -> dict[str, int]:
    """Default documents the sample shows besides ``known`` (``index.html``, ...): per file
    name, the directory URLs ``X/`` whose page is the page at ``X/<name>`` (redirected there,
    or the same bytes fetched under both URLs)."""
    by_html: dict[str, set[str]] = {}
    pairs: set[tuple[str, str]] = set()
    for p in pages:
        urls = {p.url.split("#", 1)[0], p.base.split("#", 1)[0]}
        by_html.setdefault(p.html, set()).update(urls)
    for urls in by_html.values():
        for u in urls:
            head, sep, name = u.rpartition("/")
            if sep and "?" not in u and "." in name and name not in known and head + "/" in urls:
                pairs.add((head + "/", name))
    out: dict[str, int] = {}
    for _, name in sorted(pairs):
        out[name] = out.get(name, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))
