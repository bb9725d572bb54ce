"""Pair pages: find each English page's counterpart in every other language of its site.

Evidence kinds (a site's ``pairing.evidence`` selects which count):

- ``hreflang``: ``<link rel="alternate" hreflang="fr" href=...>`` in the page head;
- ``toggle``: language-toggle links, ``<a hreflang=..>`` or ``<a lang=..>`` in the body. When a page
  has such links inside a language switcher (an ancestor whose id/class/aria-label names a language
  menu, e.g. WET's ``#wb-lng``), only those count for that language: a body link such as
  "French version of the report" elsewhere on the page is not the page's toggle. A site's
  ``pairing.language_attributes`` adds the links held in those attributes of any element
  (``<x-header lang-href="/fr/a-propos/">``: web components have no ``<a>``);
- ``rewrite``: the site's URL rewrites (``{"en": "-en.html", "fr": "-fr.html"}``: the last
  occurrence of the English substring in the English URL is replaced by the other language's);
- ``content``: what the pages say (:mod:`parasim.pair.content`): the pages that the link kinds
  leave unpaired are paired by mutual best match of their content, with a margin; the link pairs
  are checked against it (``content`` among the kinds of a pair it confirms, ``content_disagrees:
  <URL>`` in the evidence of a pair it contradicts, naming the page it prefers; with the site's
  ``pairing.content_disagrees: drop`` such a pair is left out instead unless its pages link each
  other, its English page counted unpaired for a conflict and the pair in ``content_dropped``).

Evidence is read from both sides: the English page pointing at its counterpart (forward) and the
counterpart pointing back at the English page with ``hreflang="en"`` (back). Links are resolved
against the page's final URL (or its ``<base href>``), fragments dropped, and matched against the
fetched pages by ``url`` or ``final_url`` (redirects).

A candidate pair is kept only when both pages were fetched (``html`` not null), the English page is
declared English and the counterpart is declared in the expected language (a page with no declared
language falls back to the language the evidence names). Each page takes part in at most one pair
per language: candidates are taken greedily, best first (more evidence kinds, then reciprocal
evidence, then evidence from the English page itself, then more evidence links, then URL order), and
the candidates that lose are counted as conflicts.

A page is named by the URL it was served from, after redirects (``final_url``); a URL linked that
redirected to it is an alias, written into the pair's evidence as ``en_alias:<URL>`` or
``other_alias:<URL>``. Several URLs of one page are one document: byte-identical pages (same
``content_hash``: query variants, one file at two paths) and a directory URL with its index file
(``X/`` and ``X/index.html`` or ``index.htm``, whatever their bytes). The pair names the page by one
canonical URL, chosen the same way whatever the crawl met first: no query, then the shortest, where
the index file wins over its directory URL (``X/index.html``: the name a gold list written from the
site's files uses). The pair's ``evidence`` then says so: ``en_alias:<X/>`` or ``other_alias:<X/>``
names the directory URL folded into the side's index file.

On a site with two or more other languages whose English pages carry language lists (some name
two or more translations), an English page whose own hreflang or toggle links name its
translations in some of them says it has none in the rest: a candidate in another
language that rests only on a URL pattern or on a link from the other page is left out (counted
as a conflict, and in ``language_list_conflicts``).

A configured rewrite also names languages: a page without a declared language whose URL has the
English pattern counts as English, and the page the rewrite leads to as the rewrite's language.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urldefrag, urljoin

import lxml.etree
import lxml.html
import pyarrow as pa

from parasim import explain
from parasim.config import Settings, SiteConfig
from parasim.crawl.content import canonical, without_params
from parasim.io import PAGES_SCHEMA, PAIRS_SCHEMA, rows_to_table, shard_of, stable_id
from parasim.spec import Stage
from parasim.stats import Recorder

from .content import ContentPairingSettings

log = logging.getLogger(__name__)

#: The kinds read from a page's links and URL; the probe measures these.
LINK_KINDS = ("hreflang", "toggle", "rewrite")
#: ``sitemap``: the sitemaps' hreflang alternates (the crawl's, ``sitemaps: true``), read as the
#: listed page's own hreflang links.
EVIDENCE_KINDS = (*LINK_KINDS, "sitemap", "content")
#: The kinds that are links between the two pages themselves (content_disagrees: drop keeps a
#: pair whose pages name each other so).
_MUTUAL_KINDS = ("hreflang", "toggle", "sitemap")

#: Reasons an English page ends up without a counterpart in a language, most informative first.
UNPAIRED_REASONS = (
    "untranslated",
    "conflict",
    "target_wrong_language",
    "target_failed",
    "target_not_fetched",
    "no_evidence",
)


@dataclass(frozen=True)
class UntranslatedPagesSettings(Settings, section="clean.untranslated_pages"):
    """The ``clean.untranslated_pages`` config section: the pair stage measures the language of
    each page's main text and writes it into the pairs; with ``mode: drop_page`` it leaves out
    the page pairs that are not translated, with ``mode: per_line`` (the default) it keeps them
    and the clean stage drops their untranslated lines one by one."""

    enabled: bool
    min_share: float
    mode: str


#: ``clean.untranslated_pages.mode`` values.
DROP_PAGE, PER_LINE = "drop_page", "per_line"


_SWITCHER_RE = re.compile(r"lang|lng|locale|i18n|language", re.IGNORECASE)
_SWITCHER_MAX_DEPTH = 8
_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


def norm_lang(value: str | None) -> str | None:
    """Primary language subtag, lower case (``"fr-CA"`` → ``"fr"``); None for empty/x-default."""
    if not value:
        return None
    primary = re.split(r"[-_]", value.strip().lower(), maxsplit=1)[0]
    if not primary or primary in ("x", "und", "zxx", "mul") or not primary.isalpha():
        return None
    return primary


def clean_url(url: str | None) -> str | None:
    """The URL without its fragment (None stays None)."""
    if not url:
        return None
    return urldefrag(url.strip())[0] or None


@dataclass
class PageLinks:
    """Language links found in one page: (kind, language, absolute URL) triples."""

    links: list[tuple[str, str, str]] = field(default_factory=list)
    parse_error: str | None = None


def _in_switcher(el: lxml.html.HtmlElement) -> bool:
    """Whether ``el`` (an ``<a>``) or a near ancestor looks like a language menu."""
    node = el
    for _ in range(_SWITCHER_MAX_DEPTH):
        if node is None or not isinstance(node.tag, str) or node.tag in ("body", "html"):
            return False
        for attr in ("id", "class", "aria-label"):
            val = node.get(attr)
            if val and _SWITCHER_RE.search(val):
                return True
        node = node.getparent()
    return False


#: The language of a ``language_attributes`` link whose element names none: the page's other
#: language (the site's one other language for an English page, English for the others).
OTHER_SIDE = "?"


def extract_links(
    html: str | None, base_url: str, language_attributes: tuple[str, ...] = ()
) -> PageLinks:
    """Language links of one page, resolved to absolute URLs without fragments.

    Args:
        html: the decoded page (None or empty: no links).
        base_url: the URL the page was served from (its ``final_url``).
        language_attributes: attributes of any element (custom elements included) whose value
            is the page's counterpart: toggle links, in the language of the element's
            ``hreflang`` or ``lang``, else :data:`OTHER_SIDE`.

    Returns:
        The page's hreflang and toggle links; ``parse_error`` is set when lxml gave up.
    """
    out = PageLinks()
    if not html or not html.strip():
        return out
    try:
        root = lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=_PARSER)
    except (lxml.etree.ParserError, ValueError) as exc:
        out.parse_error = f"{type(exc).__name__}: {exc}"
        return out
    base = base_url
    for b in root.iterfind(".//base[@href]"):
        base = urljoin(base_url, b.get("href", "").strip())
        break

    def resolve(href: str | None) -> str | None:
        if href is None or not href.strip() or href.strip().startswith(("javascript:", "mailto:")):
            return None
        try:
            return clean_url(urljoin(base, href.strip()))
        except ValueError:  # malformed URL (e.g. bad IPv6 literal)
            return None

    for link in root.iterfind(".//link[@hreflang]"):
        rel = (link.get("rel") or "").lower().split()
        lang = norm_lang(link.get("hreflang"))
        url = resolve(link.get("href"))
        if "alternate" in rel and lang and url:
            out.links.append(("hreflang", lang, url))

    strong: dict[str, list[str]] = defaultdict(list)
    loose: dict[str, list[str]] = defaultdict(list)
    for a in root.iter("a"):
        raw_lang = a.get("hreflang") or a.get("lang")
        if raw_lang is None:
            continue
        lang = norm_lang(raw_lang)
        url = resolve(a.get("href"))
        if not lang or not url:
            continue
        (strong if _in_switcher(a) else loose)[lang].append(url)
    for lang in sorted(set(strong) | set(loose)):
        for url in strong.get(lang) or loose[lang]:
            out.links.append(("toggle", lang, url))
    for attr in language_attributes:
        for el in root.iterfind(f".//*[@{attr}]"):
            url = resolve(el.get(attr))
            if url:
                lang = norm_lang(el.get("hreflang") or el.get("lang")) or OTHER_SIDE
                out.links.append(("toggle", lang, url))
    return out


def rewrite_targets(url: str, site: SiteConfig) -> list[tuple[str, str]]:
    """(language, URL) candidates from the site's URL rewrites applied to an English URL."""
    out = []
    for rw in site.rewrites:
        en = rw.by_lang.get("en")
        if not en or en not in url:
            continue
        head, _, tail = url.rpartition(en)
        for lang, sub in sorted(rw.by_lang.items()):
            if lang != "en":
                out.append((lang, head + sub + tail))
    return out


@dataclass
class _Edge:
    kinds: set[str] = field(default_factory=set)
    dirs: set[str] = field(default_factory=set)
    records: set[tuple[str, str]] = field(default_factory=set)  # (kind, direction)
    langs: set[str] = field(default_factory=set)  # languages the evidence names for the target


def _score(edge: _Edge) -> tuple[int, int, int, int]:
    """Higher is better: evidence kinds, reciprocity, the English page's own word, links."""
    return (len(edge.kinds), int(len(edge.dirs) == 2), int("fwd" in edge.dirs), len(edge.records))


#: File names a web server serves for a directory URL (``X/`` is ``X/index.html``): the default
#: of a site's ``index_files`` (``default.aspx``, ``index.php`` ... on other servers).
INDEX_FILES = SiteConfig.index_files


@dataclass
class _Pages:
    """The pages table, indexed: URL lookup and the documents (one fetched page per final URL)."""

    urls: list[str]
    declared: list[str | None]  # normalized declared language
    htmls: list[str | None]
    ok: list[bool]  # fetched (html not null)
    cu: list[str | None]  # clean url
    cf: list[str | None]  # clean final url (the url when none)
    lookup: dict[str, int]  # URL -> page index (the representative of its content)
    docs: list[int]  # one page per document, by url
    same_content: int  # fetched pages whose content another page represents
    #: document -> its directory URL (``X/``) when the document is the index file ``X/index.html``
    #: and both were fetched: one page, written into the pairs' evidence as ``en_alias:X/`` ...
    dir_alias: dict[int, str] = field(default_factory=dict)
    #: document -> its main-text lines, once read (content evidence, the untranslated check)
    main_lines: dict[int, list[str]] = field(default_factory=dict)
    #: document -> the URLs linked that redirected to it (``en_alias:`` ... in the pairs)
    redirect_alias: dict[int, list[str]] = field(default_factory=dict)
    #: the file names a directory URL serves (the site's ``index_files``)
    index_files: tuple[str, ...] = INDEX_FILES

    def target(self, url: str) -> tuple[int | None, str | None]:
        """The document ``url`` leads to, or None and why not.

        A URL the crawl did not store as such is tried in its other forms: canonical (as the
        crawl stores URLs: ``https://h`` is ``https://h/``, query parameters sorted), and ``X``,
        ``X/`` and ``X/index.html`` (the site's ``index_files``) as one page.
        """
        j = self.lookup.get(url)
        if j is None:
            forms = _url_forms(url, self.index_files)
            j = next((self.lookup[u] for u in forms if u in self.lookup), None)
        if j is None:
            return None, "target_not_fetched"
        if not self.ok[j]:
            return None, "target_failed"
        return self.lookup[self.cf[j]], None


@dataclass
class _Evidence:
    """What the pages say about each other (step 2)."""

    edges: dict[tuple[int, int], _Edge] = field(default_factory=lambda: defaultdict(_Edge))
    hints: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))  # page -> langs
    diag: dict[tuple[int, str], set[str]] = field(default_factory=lambda: defaultdict(set))
    #: English page -> declared languages of the pages its evidence names that are not the
    #: expected ones (a site whose `languages` do not match the pages: "fr, not de").
    wrong_lang: dict[int, set[str]] = field(default_factory=lambda: defaultdict(set))
    parse_errors: int = 0
    parse_s: float = 0.0

    def lang_of(self, pages: _Pages, i: int) -> str | None:
        """Page ``i``'s language: declared, else the one language the evidence names for it."""
        if pages.declared[i]:
            return pages.declared[i]
        h = self.hints.get(i, set())
        return next(iter(h)) if len(h) == 1 else None


@dataclass
class _Resolution:
    """The candidates kept after conflict resolution (step 4)."""

    chosen: list[tuple[int, int, str, _Edge]] = field(default_factory=list)
    taken_en: set[tuple[int, str]] = field(default_factory=set)
    taken_other: set[int] = field(default_factory=set)
    lost: set[tuple[int, str]] = field(default_factory=set)  # (en page, lang) that lost a conflict
    untranslated: set[tuple[int, str]] = field(default_factory=set)  # (en page, lang) untranslated
    conflicts: int = 0
    #: (en page, other page) -> measured (language, share) of the English and the other page
    measured: dict[tuple[int, int], tuple[tuple[str, float], tuple[str, float]]] = field(
        default_factory=dict
    )
    #: (en page, other page) -> extra evidence entries (``content_disagrees:<URL>``)
    flags: dict[tuple[int, int], list[str]] = field(default_factory=lambda: defaultdict(list))


def _check_input(pages: pa.Table, site: SiteConfig, n_shards: int) -> None:
    if n_shards < 1:
        raise ValueError(f"pair_pages: n_shards must be >= 1 (got {n_shards})")
    missing = {"url", "final_url", "declared_lang", "html"} - set(pages.column_names)
    if missing:
        raise ValueError(f"pair_pages: pages table lacks column(s) {sorted(missing)}")
    unknown = set(site.evidence) - set(EVIDENCE_KINDS)
    if unknown:
        raise ValueError(
            f"pair_pages: site {site.name!r}: unknown evidence kind(s) {sorted(unknown)}"
        )


def index_pages(pages: pa.Table, index_files: Sequence[str] = INDEX_FILES) -> _Pages:
    """Step 1: clean URLs, a URL -> page lookup, one representative per content, the documents.

    ``index_files``: the file names a directory URL ``X/`` serves (the site's default
    documents)."""
    index_files = tuple(index_files)
    urls = pages.column("url").to_pylist()
    finals = pages.column("final_url").to_pylist()
    declared = [norm_lang(v) for v in pages.column("declared_lang").to_pylist()]
    htmls = pages.column("html").to_pylist()
    n = len(urls)
    ok = [h is not None for h in htmls]
    cu = [clean_url(u) for u in urls]
    cf = [clean_url(f) or cu[i] for i, f in enumerate(finals)]

    # URL -> page index. Fetched pages first; a page's own url beats another page's final_url, and
    # among equals the smallest url wins, so the lookup is independent of row order.
    lookup: dict[str, int] = {}
    order = sorted(range(n), key=lambda i: (not ok[i], cu[i] or "", i))
    for want_ok in (True, False):
        for i in order:
            if ok[i] == want_ok and cu[i] and cu[i] not in lookup:
                lookup[cu[i]] = i
        for i in order:
            if ok[i] == want_ok and cf[i] and cf[i] not in lookup:
                lookup[cf[i]] = i

    # Byte-identical pages are one document (query-string variants such as ?lang=x&page=1, or
    # the same file at two paths), and so are a directory URL and its index file (X/ and
    # X/index.html, whatever their bytes): every URL of such a page leads to one representative
    # (:func:`_canonical_order`: the index file before its directory URL).
    hashes = (
        pages.column("content_hash").to_pylist() if "content_hash" in pages.column_names else []
    )
    # A page is named by the URL it was served from (after redirects): cf.
    rep = _same_page_representatives(cf, ok, hashes, index_files)
    same_content = sum(1 for i, r in rep.items() if r != i)
    lookup = {u: rep.get(j, j) for u, j in lookup.items()}
    dir_alias = {
        r: cf[i]
        for i, r in sorted(rep.items())
        if r != i and cf[i] and cf[r] and index_dir(cf[r], index_files) == cf[i]
    }

    # Documents: one fetched page per final URL (two URLs redirecting to one page are one document).
    docs = sorted({lookup[cf[i]] for i in range(n) if ok[i] and cf[i]}, key=lambda i: cf[i] or "")
    # The URLs linked that redirected to a document: its aliases.
    redirected: dict[int, set[str]] = defaultdict(set)
    for i in range(n):
        if ok[i] and cu[i] and cf[i] and cu[i] != cf[i]:
            redirected[lookup[cf[i]]].add(cu[i])
    pages = _Pages(urls, declared, htmls, ok, cu, cf, lookup, docs, same_content, dir_alias)
    pages.redirect_alias = {j: sorted(v) for j, v in redirected.items()}
    pages.index_files = index_files
    return pages


def index_dir(url: str, index_files: Sequence[str] = INDEX_FILES) -> str | None:
    """``X/`` for an index file URL ``X/index.html`` (no query; a name of ``index_files``),
    else None."""
    if "?" in url:
        return None
    head, sep, name = url.rpartition("/")
    return head + "/" if sep and name in index_files else None


def _url_forms(url: str, index_files: Sequence[str] = INDEX_FILES) -> list[str]:
    """The other URLs of the page at ``url``: canonical, and ``X`` / ``X/`` / ``X/index.html``
    (each name of ``index_files``)."""
    out = []
    for u in (canonical(url) or url, url):
        head = u.split("?", 1)[0]
        d = index_dir(u, index_files)
        if "?" in u or head.endswith((".html", ".htm")) and not d:
            out.append(u)
            continue
        if d:
            out += [u, d, d.rstrip("/")]
        elif u.endswith("/"):
            out += [u, *(u + name for name in index_files), u.rstrip("/")]
        else:
            out += [u, u + "/", *(u + "/" + name for name in index_files)]
    return [u for u in dict.fromkeys(out) if u and u != url]


def _canonical_order(url: str, index_files: Sequence[str] = INDEX_FILES) -> tuple:
    """Sort key of the URLs of one page; the first is its canonical URL.

    Without a query first, then the shortest and smallest, where an index file counts as its
    directory URL and wins over it (``X/index.html`` before ``X/``: the name a gold list written
    from the site's files uses, and the same choice whichever URL the crawl met first).
    """
    base = index_dir(url, index_files)
    return ("?" in url, len(base or url), base or url, base is None, url)


def _same_page_representatives(
    cu: list[str | None],
    ok: list[bool],
    hashes: list[str | None],
    index_files: Sequence[str] = INDEX_FILES,
) -> dict[int, int]:
    """Fetched page -> the page that represents it (same content hash, or X/ and X/index.html)."""
    parent = {i: i for i in range(len(cu)) if ok[i] and cu[i]}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_of: dict[str, int] = {}
    for i in parent:
        keys = [f"hash:{hashes[i]}"] if i < len(hashes) and hashes[i] else []
        keys.append(f"dir:{index_dir(cu[i], index_files) or cu[i]}")  # X/, X/index.html: one
        for key in keys:
            j = first_of.setdefault(key, i)
            parent[find(i)] = find(j)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in parent:
        groups[find(i)].append(i)
    rep: dict[int, int] = {}
    for members in groups.values():
        best = min(members, key=lambda i: _canonical_order(cu[i], index_files))
        rep.update({i: best for i in members})
    return rep


def collect_evidence(
    pg: _Pages, site: SiteConfig, alternates: Sequence[Sequence[str]] = ()
) -> _Evidence:
    """Step 2: every document's links (hreflang, toggle), sitemap alternates (``alternates``:
    ``(page URL, hreflang, URL)``, read as the listed page's links of kind ``sitemap``) and URL
    rewrites, as candidate edges.

    An edge (English page, other page) records the evidence kinds and directions: forward (the
    English page names its counterpart) and back (the counterpart names the English page). A
    link that leads nowhere usable is noted per (page, language) for the unpaired counts.
    """
    evidence, others = set(site.evidence), set(site.other_languages)
    ev = _Evidence()
    read_html = bool(evidence & {"hreflang", "toggle"})
    t0 = time.perf_counter()
    listed = _sitemap_links(pg, alternates) if "sitemap" in evidence else {}
    for i in pg.docs:
        found = (
            extract_links(pg.htmls[i], pg.cf[i] or "", site.language_attributes)
            if read_html
            else PageLinks()
        )
        if found.parse_error:
            ev.parse_errors += 1
            log.warning("pair: %s: cannot parse HTML (%s)", pg.urls[i], found.parse_error)
        links = [
            (k, _other_side(pg, i, site) if lang == OTHER_SIDE else lang, u)
            for k, lang, u in found.links
            if k in evidence
        ]
        links = [link for link in links if link[1] is not None]
        links += listed.get(i, [])
        if site.drop_query_params:
            links = [(k, lg, without_params(u, site.drop_query_params)) for k, lg, u in links]
        if "rewrite" in evidence:
            seen = set()
            for base in (pg.cu[i], pg.cf[i]):
                if base and base not in seen:
                    seen.add(base)
                    found_rw = rewrite_targets(base, site)
                    links.extend(("rewrite", lang, u) for lang, u in found_rw)
                    if found_rw:
                        ev.hints[i].add("en")  # the URL has the English pattern
        for kind, lang, url in links:
            j, problem = pg.target(url)
            if j == i:
                ev.hints[i].add(lang)  # a self-reference names the page's own language
                continue
            if lang == "en":
                if j is not None:  # back evidence: page i (other language) names j as English
                    e = ev.edges[(j, i)]
                    e.kinds.add(kind)
                    e.dirs.add("back")
                    e.records.add((kind, "back"))
                    ev.hints[j].add("en")
            elif lang in others:
                if j is None:
                    ev.diag[(i, lang)].add(problem)
                    continue
                e = ev.edges[(i, j)]
                e.kinds.add(kind)
                e.dirs.add("fwd")
                e.records.add((kind, "fwd"))
                e.langs.add(lang)
                ev.hints[j].add(lang)
    ev.parse_s = time.perf_counter() - t0
    return ev


def _sitemap_links(
    pg: _Pages, alternates: Sequence[Sequence[str]]
) -> dict[int, list[tuple[str, str, str]]]:
    """Document -> its ``("sitemap", language, URL)`` links: the alternates listed for any URL
    of it (a URL listed that was not fetched names no document and is passed over)."""
    out: dict[int, list[tuple[str, str, str]]] = defaultdict(list)
    for url, hreflang, href in alternates:
        lang = norm_lang(hreflang)
        i, _ = pg.target(clean_url(url) or url)
        if lang is not None and i is not None:
            out[i].append(("sitemap", lang, clean_url(href) or href))
    return out


def _other_side(pg: _Pages, i: int, site: SiteConfig) -> str | None:
    """The language a ``language_attributes`` link of page ``i`` leads to when its element names
    none: the site's one other language from an English page, English from a page declared in
    another language; None when that is not clear (undeclared page, several other languages)."""
    own = pg.declared[i]
    if own == "en":
        others = site.other_languages
        return others[0] if len(others) == 1 else None
    return "en" if own in site.other_languages else None


def score_candidates(
    pg: _Pages, ev: _Evidence, others: set[str]
) -> list[tuple[int, int, str, _Edge]]:
    """Step 3: the valid candidates, with their language, best first.

    A valid candidate joins two documents, an English page and a page of a definite other
    language (declared, or the one the evidence names). Order: :func:`_score`, then language,
    then URLs.
    """
    doc_set = set(pg.docs)
    valid: list[tuple[int, int, str, _Edge]] = []
    for (en, other), e in ev.edges.items():
        if en not in doc_set or other not in doc_set or en == other:
            continue
        if ev.lang_of(pg, en) != "en":
            continue  # evidence from a page that is not (declared or named) English
        if pg.declared[other] is not None:
            lang = pg.declared[other]
            expected = e.langs
            if lang not in others or (expected and lang not in expected):
                for want in expected or others:
                    ev.diag[(en, want)].add("target_wrong_language")
                ev.wrong_lang[en].add(lang)
                continue
        else:
            cands = (e.langs or ev.hints.get(other, set())) & others
            if len(cands) != 1:
                for want in e.langs & others:
                    ev.diag[(en, want)].add("target_wrong_language")
                continue
            lang = next(iter(cands))
        valid.append((en, other, lang, e))
    valid.sort(key=lambda t: (tuple(-x for x in _score(t[3])), t[2], pg.cf[t[0]], pg.cf[t[1]]))
    return valid


def heed_language_lists(
    valid: list[tuple[int, int, str, _Edge]],
) -> tuple[list[tuple[int, int, str, _Edge]], Counter]:
    """Step 3a (sites with two or more other languages whose English pages carry language
    lists: some name their translations in two or more languages): an English page whose own
    hreflang or toggle links name its translations in some languages says it has none in the
    others. A candidate in another language that rests only on weaker evidence (a URL pattern,
    a link from the other page) is then left out; those are counted as conflicts. On a site
    where no English page names two languages (a single toggle) nothing is left out.

    Returns:
        The candidates kept, and the (English page, language) keys left out with how many
        candidates each lost.
    """
    listed: dict[int, set[str]] = defaultdict(set)
    for en, _other, lang, e in valid:
        if _linked_forward(e):
            listed[en].add(lang)
    kept, out = [], Counter()
    if not any(len(langs) > 1 for langs in listed.values()):
        return valid, out
    for cand in valid:
        en, _other, lang, _e = cand
        if listed.get(en) and lang not in listed[en]:
            out[(en, lang)] += 1
        else:
            kept.append(cand)
    return kept, out


def resolve_conflicts(valid: list[tuple[int, int, str, _Edge]], one_to_one: bool) -> _Resolution:
    """Step 4: greedily, best first: one counterpart per English page and language, and (with
    ``one_to_one``) one English page per counterpart; the candidates that lose are conflicts."""
    res = _Resolution()
    for en, other, lang, e in valid:
        if (en, lang) in res.taken_en or (one_to_one and other in res.taken_other):
            res.conflicts += 1
            res.lost.add((en, lang))
            continue
        res.taken_en.add((en, lang))
        res.taken_other.add(other)
        res.chosen.append((en, other, lang, e))
    return res


def pair_by_content(
    pg: _Pages,
    ev: _Evidence,
    res: _Resolution,
    site: SiteConfig,
    settings: Any,
    encoder: Any,
    rec: Recorder,
) -> None:
    """Step 4a (``content`` evidence): pair the pages the links left unpaired by their content,
    and check the link pairs against it (:mod:`parasim.pair.content`). New pairs join
    ``res.chosen`` with the evidence kind ``content``."""
    from .content import match_language, page_content, page_vectors, record_content

    others = sorted(site.other_languages)
    sel = site.main_text_selector()
    by_lang: dict[str, list[int]] = defaultdict(list)
    no_language = 0
    for i in pg.docs:
        lang = ev.lang_of(pg, i)
        if lang == "en" or lang in others:
            by_lang[lang].append(i)
        elif lang is None:
            no_language += 1
    pages = [i for lang in ["en", *others] for i in by_lang.get(lang, [])]
    with rec.time("content_read"):
        url = settings.url_tokens
        contents = {i: page_content(pg.htmls[i], sel, pg.cf[i] if url else None) for i in pages}
        pg.main_lines.update((i, c.lines) for i, c in contents.items())
    with rec.time("content_embed"):
        vecs = page_vectors([contents[i] for i in pages], encoder) if pages else []
        vectors = {i: vecs[k] for k, i in enumerate(pages)}
    results = {}
    dropped = {lang: 0 for lang in others}
    with rec.time("content_match"):
        for lang in others:
            links = [(en, o) for en, o, lg, _ in res.chosen if lg == lang]
            r = match_language(by_lang["en"], by_lang[lang], contents, vectors, links, settings)
            results[lang] = r
            for en, o, lg, edge in res.chosen:
                if lg == lang and (en, o) in r.confirmed:
                    edge.kinds.add("content")
            for (en, o), alt in sorted(r.disagree.items()):
                res.flags[(en, o)].append(f"content_disagrees:{pg.cf[alt]}")
            if site.content_disagrees == "drop":
                dropped[lang] = _drop_contradicted(res, lang, r)
            for en, o, _score in r.pairs:
                res.chosen.append((en, o, lang, _Edge(kinds={"content"}, langs={lang})))
                res.taken_en.add((en, lang))
                res.taken_other.add(o)
                res.lost.discard((en, lang))
    record_content(rec, results, no_language)
    if site.content_disagrees == "drop":
        rec.count("content_dropped", dropped)


def _drop_contradicted(res: _Resolution, lang: str, r: Any) -> int:
    """``content_disagrees: drop``: leave out the link pairs of ``lang`` that rest on weaker
    evidence than the pages' content: those content contradicts, and those that share their
    counterpart with a pair whose pages link each other and that content does not confirm,
    unless their own pages link each other. Returns how many were left out."""
    mine = [(en, o, e) for en, o, lg, e in res.chosen if lg == lang]
    mutual = {o for _en, o, e in mine if _linked_both_ways(e)}
    drop = {
        (en, o)
        for en, o, e in mine
        if not _linked_both_ways(e)
        and ((en, o) in r.disagree or (o in mutual and (en, o) not in r.confirmed))
    }
    if not drop:
        return 0
    res.chosen = [c for c in res.chosen if not (c[2] == lang and (c[0], c[1]) in drop)]
    still = {o for _en, o, lg, _e in res.chosen if lg == lang}
    for en, o in drop:
        res.taken_en.discard((en, lang))
        if o not in still:
            res.taken_other.discard(o)
        res.lost.add((en, lang))
    return len(drop)


def _linked_forward(edge: _Edge) -> bool:
    """Whether the English page itself names the pair's other page (hreflang, toggle or its
    sitemap alternates)."""
    return any(d == "fwd" and k in _MUTUAL_KINDS for k, d in edge.records)


def _linked_both_ways(edge: _Edge) -> bool:
    """Whether the two pages name each other (hreflang, toggle or sitemap, each way)."""
    links = {d for k, d in edge.records if k in _MUTUAL_KINDS}
    return links == {"fwd", "back"}


def find_untranslated(
    pg: _Pages, res: _Resolution, site: SiteConfig, min_share: float, drop: bool = True
) -> list[dict]:
    """Step 4b: measure the main-text language of both pages of every chosen pair (kept in
    ``res.measured``, written into the pairs by :func:`pair_table`) and return the pairs whose
    other page is mostly English, or whose English page is mostly in the other language, as
    records (URLs, measured language and share of each side, ``left_out``). With ``drop`` they
    are removed from ``res.chosen`` (``mode: drop_page``); without, they stay and the clean
    stage judges their lines one by one (``mode: per_line``).

    Args:
        min_share: share of a page's identified letters that must be in the wrong language.
        drop: leave the untranslated pairs out.
    """
    from parasim.clean.langid import LanguageId

    from .language import main_text_lines

    lid = LanguageId()
    sel = site.main_text_selector()
    measured: dict[int, tuple[str, float]] = {}

    def lang(i: int) -> tuple[str, float]:
        if i not in measured:
            if i not in pg.main_lines:
                pg.main_lines[i] = main_text_lines(pg.htmls[i], sel)
            measured[i] = lid.page_language(pg.main_lines[i])
        return measured[i]

    kept, out = [], []
    for en, other, lg, e in res.chosen:
        (en_l, en_s), (ot_l, ot_s) = lang(en), lang(other)
        res.measured[(en, other)] = ((en_l, en_s), (ot_l, ot_s))
        wrong_other = is_untranslated(ot_l, ot_s, "en", min_share)
        wrong_en = is_untranslated(en_l, en_s, lg, min_share)
        if wrong_other or wrong_en:
            out.append(
                {
                    "en_url": pg.cf[en],
                    "other_url": pg.cf[other],
                    "other_lang": lg,
                    "side": "other" if wrong_other else "en",
                    "measured": {"en": [en_l, round(en_s, 3)], "other": [ot_l, round(ot_s, 3)]},
                    "left_out": drop,
                }
            )
            if drop:
                res.taken_en.discard((en, lg))
                res.untranslated.add((en, lg))
                continue
        kept.append((en, other, lg, e))
    res.chosen = kept
    return out


def is_untranslated(
    measured: str | None, share: float | None, wrong: str, min_share: float
) -> bool:
    """Whether a page measured in heliport's language ``measured`` with ``share`` of its
    identified letters is in the ``wrong`` language (ISO 639-1: ``en`` for the other page, the
    other language for the English page) by at least ``min_share``."""
    from parasim.clean.langid import iso3

    return measured == iso3(wrong) and share is not None and share >= min_share


def pair_table(pg: _Pages, res: _Resolution, site: SiteConfig, n_shards: int) -> pa.Table:
    """Step 5: the pairs as rows of ``PAIRS_SCHEMA``, sorted by (language, English URL)."""
    rows = []
    for en, other, lang, e in res.chosen:
        pid = stable_id(site.name, pg.cf[en], pg.cf[other])
        rows.append(
            {
                "pair_id": pid,
                "site": site.name,
                "domain": site.domain,
                "lang_pair": f"en-{lang}",
                "en_url": pg.cf[en],
                "other_url": pg.cf[other],
                "other_lang": lang,
                "evidence": sorted(e.kinds)
                + _aliases(pg, en, other)
                + res.flags.get((en, other), []),
                "shard": shard_of(pid, n_shards),
                **_measured(res, en, other),
            }
        )
    rows.sort(key=lambda r: (r["other_lang"], r["en_url"], r["other_url"]))
    return rows_to_table(rows, PAIRS_SCHEMA)


def _measured(res: _Resolution, en: int, other: int) -> dict:
    """The pair's measured page languages as columns (none when the pages were not measured)."""
    m = res.measured.get((en, other))
    if m is None:
        return {}
    (en_l, en_s), (ot_l, ot_s) = m
    return {
        "en_page_lang": en_l,
        "en_page_share": round(en_s, 4),
        "other_page_lang": ot_l,
        "other_page_share": round(ot_s, 4),
    }


def _aliases(pg: _Pages, en: int, other: int) -> list[str]:
    """Evidence entries naming the other URLs of each side: the directory URL its index file
    also answers at, and the URLs linked that redirected to it."""
    out = []
    for side, i in (("en", en), ("other", other)):
        if i in pg.dir_alias:
            out.append(f"{side}_alias:{pg.dir_alias[i]}")
        out.extend(f"{side}_alias:{u}" for u in pg.redirect_alias.get(i, ()))
    return out


def count_unpaired(
    pg: _Pages, ev: _Evidence, res: _Resolution, others: set[str]
) -> tuple[list[int], dict[str, Counter]]:
    """Step 6: the English documents, and per language why each unpaired one stayed unpaired."""
    english = [i for i in pg.docs if ev.lang_of(pg, i) == "en"]
    by_lang: dict[str, Counter] = {lang: Counter() for lang in sorted(others)}
    for i in english:
        for lang in sorted(others):
            if (i, lang) in res.taken_en:
                continue
            if (i, lang) in res.untranslated:
                reason = "untranslated"
            elif (i, lang) in res.lost:
                reason = "conflict"
            else:
                reasons = ev.diag.get((i, lang), set())
                reason = next((r for r in UNPAIRED_REASONS if r in reasons), "no_evidence")
            by_lang[lang][reason] += 1
    return english, by_lang


def pair_pages(
    pages: pa.Table,
    site: SiteConfig,
    n_shards: int,
    *,
    rec: Recorder,
    one_to_one: bool = True,
    untranslated: UntranslatedPagesSettings | Mapping[str, Any] | None = None,
    content: Mapping[str, Any] | Any | None = None,
    encoder: Any = None,
    static: Mapping[str, Any] | None = None,
    alternates: Sequence[Sequence[str]] = (),
) -> pa.Table:
    """Pair each English page of ``site`` with its counterpart in each other language.

    Steps: :func:`index_pages`, :func:`collect_evidence`, :func:`score_candidates`,
    :func:`resolve_conflicts`, :func:`pair_by_content` (``content`` evidence),
    :func:`find_untranslated`, :func:`pair_table`, :func:`count_unpaired`.

    Args:
        pages: the crawl's pages (:data:`parasim.io.PAGES_SCHEMA`; extra columns are ignored).
        site: the site's configuration (languages, evidence kinds, rewrites).
        n_shards: number of shards to spread the pairs over.
        rec: records the counts (:func:`record_pairing`).
        one_to_one: each other-language page pairs with at most one English page (default). False
            lets several English pages share one counterpart (e.g. two English demo pages whose
            toggles both lead to one French page); each English page still gets at most one
            counterpart per language.
        untranslated: the ``clean.untranslated_pages`` settings (or that section as in the
            config): measure the main-text language of both pages of each pair (the pairs'
            ``*_page_lang`` / ``*_page_share`` columns) and, with ``mode: drop_page``, leave out
            the pairs whose pages are not translated (:func:`find_untranslated`); with
            ``mode: per_line`` they stay and are counted. None: not measured.
        content: the ``content_pairing`` section, for a site whose evidence holds ``content``
            (:func:`pair_by_content`; None: the schema's defaults).
        encoder: texts -> vectors for content pairing; None: the one ``content.encoder`` names.
        static: the ``align.static`` section, for the ``e5-static`` encoder.
        alternates: the sitemaps' hreflang alternates, ``(page URL, hreflang, URL)`` (the
            crawl's :data:`parasim.crawl.sitemap.ALTERNATES_FILE`), for ``sitemap`` evidence.

    Returns:
        The pairs (:data:`parasim.io.PAIRS_SCHEMA`, sorted by ``(other_lang, en_url)``).

    Raises:
        ValueError: ``n_shards`` < 1, a required column is missing, or an evidence kind is unknown.
    """
    _check_input(pages, site, n_shards)
    others = set(site.other_languages)
    pg = index_pages(pages, site.index_files)
    ev = collect_evidence(pg, site, alternates)
    valid = score_candidates(pg, ev, others)
    if len(others) > 1:  # a list that names some languages and not another needs two others
        valid, listed_out = heed_language_lists(valid)
    res = resolve_conflicts(valid, one_to_one)
    if len(others) > 1:
        res.conflicts += sum(listed_out.values())
        res.lost.update(key for key in listed_out if key not in res.taken_en)
        rec.count("language_list_conflicts", len(listed_out))
    if "content" in site.evidence:
        from .content import load_content_encoder

        cs = ContentPairingSettings.from_config(content)
        if encoder is None:
            with rec.time("content_load"):
                encoder = load_content_encoder(cs, static)
        pair_by_content(pg, ev, res, site, cs, encoder, rec)
    untr: list[dict] = []
    if untranslated is not None:
        untranslated = UntranslatedPagesSettings.from_config(untranslated)
    if untranslated is not None and untranslated.enabled:
        untr = find_untranslated(
            pg, res, site, float(untranslated.min_share), drop=untranslated.mode == DROP_PAGE
        )
    table = pair_table(pg, res, site, n_shards)
    english, by_lang = count_unpaired(pg, ev, res, others)
    record_pairing(rec, pg, ev, res, table, english, by_lang, others, n_candidates=len(valid))
    rec.figure("untranslated", untr)
    rec.count("untranslated_pairs", sum(r["left_out"] for r in untr))
    rec.count("untranslated_kept", sum(not r["left_out"] for r in untr))
    log.info(
        "pair %s: %d pages (%d fetched), %d English, pairs %s, unpaired English %s, conflicts %d",
        site.name,
        len(pg.urls),
        sum(pg.ok),
        len(english),
        rec.counted("pairs"),
        {r: rec.dropped(r) for r in UNPAIRED_REASONS},
        res.conflicts,
    )
    return table


def record_pairing(
    rec: Recorder,
    pg: _Pages,
    ev: _Evidence,
    res: _Resolution,
    table: pa.Table,
    english: list[int],
    by_lang: dict[str, Counter],
    others: set[str],
    n_candidates: int,
) -> None:
    """Record what :func:`pair_pages` found.

    Rows in: each English page once per other language; out: the page pairs; dropped: the
    English pages left without a counterpart in a language, by reason (:data:`UNPAIRED_REASONS`,
    summed over languages). Counts: pages, pages_ok, duplicate_pages, duplicate_content_urls,
    parse_errors, english_pages, documents_by_lang (declared or evidence-named language of each
    document, "unknown" when neither), unexpected_target_langs (English pages whose evidence
    leads to a page declared in a language that is not the expected one, per that language),
    pairs (per language), unpaired_en_by_lang, unpaired_other (per language), candidates,
    conflicts. Seconds ``parse`` (reading the links); figure ``pages_per_s`` (documents per
    second of it).
    """
    langs = sorted(others)
    n_pairs = Counter(table.column("other_lang").to_pylist())
    rec.rows_in += len(english) * len(langs)
    rec.rows_out += table.num_rows
    for r in UNPAIRED_REASONS:  # every reason named, 0 or not
        rec.drop(r, 0)
    for c in by_lang.values():
        for r in UNPAIRED_REASONS:
            rec.drop(r, c.get(r, 0))
    n_ok = sum(pg.ok)
    doc_langs = Counter(ev.lang_of(pg, i) or "unknown" for i in pg.docs)
    unexpected = Counter(lang for i in english for lang in ev.wrong_lang.get(i, ()))
    rec.count("pages", len(pg.urls))
    rec.count("pages_ok", n_ok)
    rec.count("duplicate_pages", n_ok - len(pg.docs))
    rec.count("duplicate_content_urls", pg.same_content)
    rec.count("parse_errors", ev.parse_errors)
    rec.count("english_pages", len(english))
    rec.count("documents_by_lang", dict(sorted(doc_langs.items())))
    rec.count("unexpected_target_langs", dict(sorted(unexpected.items())))
    rec.count("pairs", {lang: n_pairs.get(lang, 0) for lang in langs})
    rec.count(
        "unpaired_en_by_lang",
        {lang: {r: c.get(r, 0) for r in UNPAIRED_REASONS} for lang, c in by_lang.items()},
    )
    rec.count(
        "unpaired_other",
        {
            lang: sum(1 for i in pg.docs if ev.lang_of(pg, i) == lang and i not in res.taken_other)
            for lang in langs
        },
    )
    rec.count("candidates", n_candidates)
    rec.count("conflicts", res.conflicts)
    rec.seconds("parse", round(ev.parse_s, 3))
    rec.figure("pages_per_s", round(len(pg.docs) / ev.parse_s, 1) if ev.parse_s > 0 else None)


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "pair",
    rules=("pair_pages",),
    results=("pairs",),
    upstream="crawl",
    per="site",
    done="pairs",
    metric="rows_out",
    label="page pairs",
    explain=explain.pair,
    # rows in: English pages x other languages; none when the crawl found no English page
    input_from_upstream=False,
    one_to_one=True,
    settings=ContentPairingSettings,  # content evidence's; the links' live in sites[].pairing
    aliases={"pair-pages": ("pair",)},
    inputs={"pages": PAGES_SCHEMA},
    outputs={"out": PAIRS_SCHEMA},
    run=pair_pages,
)
