"""Pair pages: find each English page's counterpart in every other language of its site.

Evidence kinds (a site's ``pairing.evidence`` selects which count):

- ``hreflang``: ``<link rel="alternate" hreflang="fr" href=...>`` in the page head;
- ``toggle``: language-toggle links, ``<a hreflang=..>`` or ``<a lang=..>`` in the body. When a page
  has such links inside a language switcher (an ancestor whose id/class/aria-label names a language
  menu, e.g. WET's ``#wb-lng``), only those count for that language: a body link such as
  "French version of the report" elsewhere on the page is not the page's toggle;
- ``rewrite``: the site's URL rewrites (``{"en": "-en.html", "fr": "-fr.html"}``: the last
  occurrence of the English substring in the English URL is replaced by the other language's).

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

A configured rewrite also names languages: a page without a declared language whose URL has the
English pattern counts as English, and the page the rewrite leads to as the rewrite's language.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from urllib.parse import urldefrag, urljoin

import lxml.etree
import lxml.html
import pyarrow as pa

from parasim.config import SiteConfig
from parasim.io import PAIRS_SCHEMA, rows_to_table, shard_of, stable_id

log = logging.getLogger(__name__)

EVIDENCE_KINDS = ("hreflang", "toggle", "rewrite")

#: Reasons an English page ends up without a counterpart in a language, most informative first.
UNPAIRED_REASONS = (
    "conflict",
    "target_wrong_language",
    "target_failed",
    "target_not_fetched",
    "no_evidence",
)

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


def extract_links(html: str | None, base_url: str) -> PageLinks:
    """Language links of one page, resolved to absolute URLs without fragments.

    Args:
        html: the decoded page (None or empty: no links).
        base_url: the URL the page was served from (its ``final_url``).

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


def pair_pages(
    pages: pa.Table, site: SiteConfig, n_shards: int, *, one_to_one: bool = True
) -> tuple[pa.Table, dict]:
    """Pair each English page of ``site`` with its counterpart in each other language.

    Args:
        pages: the crawl's pages (:data:`parasim.io.PAGES_SCHEMA`; extra columns are ignored).
        site: the site's configuration (languages, evidence kinds, rewrites).
        n_shards: number of shards to spread the pairs over.
        one_to_one: each other-language page pairs with at most one English page (default). False
            lets several English pages share one counterpart (e.g. two English demo pages whose
            toggles both lead to one French page); each English page still gets at most one
            counterpart per language.

    Returns:
        The pairs (:data:`parasim.io.PAIRS_SCHEMA`, sorted by ``(other_lang, en_url)``) and a stats
        dict: pages, pages_ok, duplicate_pages, parse_errors, english_pages, pairs (per language),
        unpaired_en (by reason, summed over languages), unpaired_en_by_lang, unpaired_other (per
        language), conflicts, candidates, parse_seconds, pages_per_s.

    Raises:
        ValueError: ``n_shards`` < 1, a required column is missing, or an evidence kind is unknown.
    """
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
    evidence = set(site.evidence)
    others = set(site.other_languages)

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
    # the same file at two paths): every URL of such a page leads to one representative, the
    # URL without a query, then the shortest, then the smallest.
    hashes = (
        pages.column("content_hash").to_pylist() if "content_hash" in pages.column_names else []
    )
    rep_of_hash: dict[str, int] = {}
    for i in sorted(
        range(len(hashes)), key=lambda i: ("?" in (cu[i] or ""), len(cu[i] or ""), cu[i] or "")
    ):
        if ok[i] and hashes[i]:
            rep_of_hash.setdefault(hashes[i], i)
    same_content = sum(1 for i, h in enumerate(hashes) if ok[i] and h and rep_of_hash[h] != i)
    if rep_of_hash:
        lookup = {
            u: (rep_of_hash.get(hashes[j], j) if ok[j] and hashes[j] else j)
            for u, j in lookup.items()
        }

    # Documents: one fetched page per final URL (two URLs redirecting to one page are one document).
    docs = sorted({lookup[cf[i]] for i in range(n) if ok[i] and cf[i]}, key=lambda i: cu[i] or "")
    doc_set = set(docs)
    stats: dict = {
        "site": site.name,
        "pages": n,
        "pages_ok": sum(ok),
        "duplicate_pages": sum(ok) - len(docs),
        "duplicate_content_urls": same_content,
        "parse_errors": 0,
    }

    edges: dict[tuple[int, int], _Edge] = defaultdict(_Edge)
    hints: dict[int, set[str]] = defaultdict(set)  # languages evidence names for a page
    diag: dict[tuple[int, str], set[str]] = defaultdict(set)  # (en page, lang) -> failure reasons

    def target_state(url: str) -> tuple[int | None, str | None]:
        j = lookup.get(url)
        if j is None:
            return None, "target_not_fetched"
        if not ok[j]:
            return None, "target_failed"
        return lookup[cf[j]], None  # the document the URL leads to

    read_html = bool(evidence & {"hreflang", "toggle"})
    t0 = time.perf_counter()
    for i in docs:
        found = extract_links(htmls[i], cf[i] or "") if read_html else PageLinks()
        if found.parse_error:
            stats["parse_errors"] += 1
            log.warning("pair: %s: cannot parse HTML (%s)", urls[i], found.parse_error)
        links = [(k, lang, u) for k, lang, u in found.links if k in evidence]
        if "rewrite" in evidence:
            seen = set()
            for base in (cu[i], cf[i]):
                if base and base not in seen:
                    seen.add(base)
                    found_rw = rewrite_targets(base, site)
                    links.extend(("rewrite", lang, u) for lang, u in found_rw)
                    if found_rw:
                        hints[i].add("en")  # the URL has the English pattern
        for kind, lang, url in links:
            j, problem = target_state(url)
            if j == i:
                hints[i].add(lang)  # a self-reference names the page's own language
                continue
            if lang == "en":
                if j is not None:  # back evidence: page i (other language) names j as English
                    e = edges[(j, i)]
                    e.kinds.add(kind)
                    e.dirs.add("back")
                    e.records.add((kind, "back"))
                    hints[j].add("en")
            elif lang in others:
                if j is None:
                    diag[(i, lang)].add(problem)
                    continue
                e = edges[(i, j)]
                e.kinds.add(kind)
                e.dirs.add("fwd")
                e.records.add((kind, "fwd"))
                e.langs.add(lang)
                hints[j].add(lang)
    parse_s = time.perf_counter() - t0

    def lang_of(i: int) -> str | None:
        if declared[i]:
            return declared[i]
        h = hints.get(i, set())
        return next(iter(h)) if len(h) == 1 else None

    # Validate candidates; a valid one has a definite other language.
    valid: list[tuple[int, int, str, _Edge]] = []
    for (en, other), e in edges.items():
        if en not in doc_set or other not in doc_set or en == other:
            continue
        if lang_of(en) != "en":
            continue  # evidence from a page that is not (declared or named) English
        if declared[other] is not None:
            lang = declared[other]
            expected = e.langs
            if lang not in others or (expected and lang not in expected):
                for want in expected or others:
                    diag[(en, want)].add("target_wrong_language")
                continue
        else:
            cands = (e.langs or hints.get(other, set())) & others
            if len(cands) != 1:
                for want in e.langs & others:
                    diag[(en, want)].add("target_wrong_language")
                continue
            lang = next(iter(cands))
        valid.append((en, other, lang, e))

    # One-to-one per language, greedily, best candidate first.
    valid.sort(key=lambda t: (tuple(-x for x in _score(t[3])), t[2], cu[t[0]], cu[t[1]]))
    taken_en: set[tuple[int, str]] = set()
    taken_other: set[int] = set()
    chosen: list[tuple[int, int, str, _Edge]] = []
    lost: set[tuple[int, str]] = set()
    conflicts = 0
    for en, other, lang, e in valid:
        if (en, lang) in taken_en or (one_to_one and other in taken_other):
            conflicts += 1
            lost.add((en, lang))
            continue
        taken_en.add((en, lang))
        taken_other.add(other)
        chosen.append((en, other, lang, e))

    rows = []
    for en, other, lang, e in chosen:
        pid = stable_id(site.name, urls[en], urls[other])
        rows.append(
            {
                "pair_id": pid,
                "site": site.name,
                "domain": site.domain,
                "lang_pair": f"en-{lang}",
                "en_url": urls[en],
                "other_url": urls[other],
                "other_lang": lang,
                "evidence": sorted(e.kinds),
                "shard": shard_of(pid, n_shards),
            }
        )
    rows.sort(key=lambda r: (r["other_lang"], r["en_url"], r["other_url"]))
    table = rows_to_table(rows, PAIRS_SCHEMA)

    english = [i for i in docs if lang_of(i) == "en"]
    n_pairs = Counter(r["other_lang"] for r in rows)
    by_lang: dict[str, Counter] = {lang: Counter() for lang in sorted(others)}
    for i in english:
        for lang in sorted(others):
            if (i, lang) in taken_en:
                continue
            if (i, lang) in lost:
                reason = "conflict"
            else:
                reasons = diag.get((i, lang), set())
                reason = next((r for r in UNPAIRED_REASONS if r in reasons), "no_evidence")
            by_lang[lang][reason] += 1
    total = Counter()
    for c in by_lang.values():
        total.update(c)
    stats.update(
        {
            "english_pages": len(english),
            "pairs": {lang: n_pairs.get(lang, 0) for lang in sorted(others)},
            "unpaired_en": {r: total.get(r, 0) for r in UNPAIRED_REASONS},
            "unpaired_en_by_lang": {
                lang: {r: c.get(r, 0) for r in UNPAIRED_REASONS} for lang, c in by_lang.items()
            },
            "unpaired_other": {
                lang: sum(1 for i in docs if lang_of(i) == lang and i not in taken_other)
                for lang in sorted(others)
            },
            "candidates": len(valid),
            "conflicts": conflicts,
            "parse_seconds": round(parse_s, 3),
            "pages_per_s": round(len(docs) / parse_s, 1) if parse_s > 0 else None,
        }
    )
    log.info(
        "pair %s: %d pages (%d fetched), %d English, pairs %s, unpaired English %s, conflicts %d",
        site.name,
        n,
        stats["pages_ok"],
        len(english),
        stats["pairs"],
        stats["unpaired_en"],
        conflicts,
    )
    return table, stats
