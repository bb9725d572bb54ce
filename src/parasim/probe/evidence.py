"""Pairing evidence in a probe's sample: URL rewrites, what each kind yields, where kinds disagree.

Steps 2-4 of the probe (:mod:`parasim.probe.stage`): :func:`infer_rewrites` (URL patterns behind
the pairs the language links or the URL naming give), :func:`evidence_counts` (per kind, the
pages that carry it and the pairs :func:`parasim.pair.pair_pages` makes of it; the English pages
where two kinds name different counterparts) and :func:`choose_evidence`.
"""

from __future__ import annotations

import logging
import re
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import pyarrow as pa

from parasim.config import Rewrite, SiteConfig
from parasim.crawl.content import canonical
from parasim.pair import LINK_KINDS, extract_links, pair_pages
from parasim.pair.stage import OTHER_SIDE, index_dir
from parasim.probe.structure import Page
from parasim.stats import Recorder

#: Order of preference among evidence kinds when they disagree: the toggle is the link a reader
#: follows, hreflang the one a search engine reads, the URL pattern a guess.
PREFERENCE = ("toggle", "hreflang", "rewrite")


def diff_rewrite(en_url: str, other_url: str) -> tuple[str, str] | None:
    """The substitution that turns ``en_url`` into ``other_url``, cut at delimiters.

    The differing part is widened to whole words, then by the delimiter on each side; a ``.``
    on the right takes the file extension with it. ``.../about-en.html`` and
    ``.../about-fr.html`` give ``("-en.html", "-fr.html")``; ``.../en/a.html`` and
    ``.../es/a.html`` give ``("/en/", "/es/")``.

    Returns:
        (English substring, other substring), or None when the URLs are equal or the
        substitution (the last occurrence of the English substring) does not give ``other_url``.
    """
    if en_url == other_url:
        return None
    n = min(len(en_url), len(other_url))
    p = 0
    while p < n and en_url[p] == other_url[p]:
        p += 1
    s = 0
    while s < n - p and en_url[-1 - s] == other_url[-1 - s]:
        s += 1
    while p > 0 and en_url[p - 1].isalnum():
        p -= 1
    while s > 0 and en_url[len(en_url) - s].isalnum():
        s -= 1
    if p > 0:
        p -= 1  # the delimiter on the left
    if s > 0:
        delim = en_url[len(en_url) - s]
        rest = en_url[len(en_url) - s + 1 :]
        s = 0 if delim == "." and not re.search(r"[/?#]", rest) else s - 1
    en_sub, other_sub = en_url[p : len(en_url) - s], other_url[p : len(other_url) - s]
    if not en_sub or not other_sub:
        return None
    head, _, tail = en_url.rpartition(en_sub)
    return (en_sub, other_sub) if head + other_sub + tail == other_url else None


_EN_TOKEN_RE = re.compile(r"(?<![A-Za-z0-9])en(?![A-Za-z0-9])")


def named_pairs(
    pages: list[Page], langs: tuple[str, ...], skip: set[tuple[str, str]]
) -> list[tuple[str, str, str]]:
    """Page pairs by URL naming alone: an English page's URL with a word ``en`` in its path
    replaced by another language's code is a fetched page in that language.

    Args:
        pages: the sample.
        langs: the site's languages.
        skip: (English URL, language) keys already paired by links.

    Returns:
        (English URL, other URL, language) triples.
    """
    lang_of = {p.url: p.lang for p in pages}
    out = []
    for p in pages:
        if p.lang != "en":
            continue
        cut = len(urlsplit(p.url).scheme) + 3 + len(urlsplit(p.url).netloc)
        for m in _EN_TOKEN_RE.finditer(p.url, cut):
            for lang in langs[1:]:
                other = p.url[: m.start()] + lang + p.url[m.end() :]
                if (p.url, lang) not in skip and lang_of.get(other) == lang:
                    out.append((p.url, other, lang))
    return sorted(set(out))


def infer_rewrites(pairs: list[tuple[str, str, str]]) -> list[tuple[Rewrite, int]]:
    """Step 2: URL rewrites from page pairs, with how many pairs each explains.

    Args:
        pairs: (English URL, other URL, other language) triples.

    Returns:
        One :class:`Rewrite` per English substring (its other languages merged), most pairs first;
        a language whose substitution varies takes the most common one.
    """
    support: dict[str, Counter] = defaultdict(Counter)
    for en_url, other_url, lang in pairs:
        found = diff_rewrite(en_url, other_url)
        if found:
            support[found[0]][(lang, found[1])] += 1
    out = []
    for en_sub, subs in support.items():
        by_lang: dict[str, str] = {}
        for (lang, sub), _ in sorted(subs.items(), key=lambda x: (-x[1], x[0])):
            by_lang.setdefault(lang, sub)
        n = sum(c for (lang, sub), c in subs.items() if by_lang[lang] == sub)
        out.append((Rewrite({"en": en_sub, **dict(sorted(by_lang.items()))}), n))
    out.sort(key=lambda x: (-x[1], x[0].by_lang["en"]))
    return out


def probe_site_config(
    langs: tuple[str, ...],
    evidence: tuple[str, ...],
    rewrites=(),
    main_selector=None,
    language_attributes: tuple[str, ...] = (),
) -> SiteConfig:
    """A site for :func:`parasim.pair.pair_pages` on the sample: these languages and evidence."""
    return SiteConfig(
        name="probe",
        domain="probe",
        languages=langs,
        start_urls=("http://probe.invalid/",),
        allowed_domains=("probe.invalid",),
        main_selector=main_selector,
        evidence=evidence,
        rewrites=tuple(rewrites),
        language_attributes=tuple(language_attributes),
    )


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Raise logger ``name`` to WARNING inside the block (the probe pairs its sample many times)."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def pair_map(
    table: pa.Table, langs, evidence, rewrites=(), language_attributes: tuple[str, ...] = ()
) -> dict[tuple[str, str], str]:
    """(English URL, language) -> other URL, by :func:`parasim.pair.pair_pages`, many-to-one."""
    with _quiet("parasim.pair"):
        site = probe_site_config(langs, evidence, rewrites, None, language_attributes)
        pairs = pair_pages(table, site, 1, rec=Recorder("pair", site=site.name), one_to_one=False)
    cols = [pairs.column(c).to_pylist() for c in ("en_url", "other_lang", "other_url")]
    return {(en, lang): other for en, lang, other in zip(*cols, strict=True)}


def untranslated_pairs(table: pa.Table, site: SiteConfig) -> list[dict]:
    """The pairs the pair stage measures as untranslated with the default
    ``clean.untranslated_pages`` settings (each with the measured languages of its pages; with
    ``mode: per_line`` they stay and the clean stage drops their English lines)."""
    from parasim.pair.stage import UntranslatedPagesSettings

    settings = UntranslatedPagesSettings.from_config({})
    with _quiet("parasim.pair"):
        rec = Recorder("pair", site=site.name)
        pair_pages(table, site, 1, rec=rec, one_to_one=False, untranslated=settings)
    return rec.stats().figures["untranslated"]


def _predictions(
    pages: list[Page], langs, rewrites, language_attributes: tuple[str, ...] = ()
) -> dict[tuple[str, str], dict[str, set]]:
    """(English page, language) -> kind -> the URLs that kind names as its counterpart (a fetched
    URL that redirected stands for where it landed)."""
    others = set(langs) - {"en"}
    landed = {p.url: p.base for p in pages}
    out: dict[tuple[str, str], dict[str, set]] = defaultdict(lambda: defaultdict(set))

    def name(url: str) -> str:
        # One page under its URLs: canonical, where it landed, X/ for X/index.html and X.
        url = canonical(url) or url
        return _page_name(landed.get(url, url))

    other_lang = next(iter(others)) if len(others) == 1 else None
    for p in pages:
        if p.lang != "en":
            continue
        for kind, lang, url in extract_links(p.html, p.base, language_attributes).links:
            lang = other_lang if lang == OTHER_SIDE else lang
            if lang in others:
                out[(p.url, lang)][kind].add(name(url))
        for rw in rewrites:
            en = rw.by_lang["en"]
            if en in p.url:
                head, _, tail = p.url.rpartition(en)
                for lang, sub in rw.by_lang.items():
                    if lang in others:
                        out[(p.url, lang)]["rewrite"].add(name(head + sub + tail))
    return out


def _page_name(url: str) -> str:
    """One name for ``X``, ``X/`` and ``X/index.html`` (``X/``); other URLs as they are."""
    if "?" in url:
        return url
    if index_dir(url):
        return index_dir(url)
    last = url.rsplit("/", 1)[1]
    return url if not last or "." in last else url + "/"


def offsite_language_hosts(
    pages: list[Page], langs: tuple[str, ...], host: str, language_attributes: tuple[str, ...] = ()
) -> Counter:
    """Hosts other than ``host`` that the pages' hreflang and toggle links lead to, by pages."""
    out: Counter = Counter()
    for p in pages:
        hosts = {
            urlsplit(url).hostname
            for _, lang, url in extract_links(p.html, p.base, language_attributes).links
            if (lang in langs or lang == OTHER_SIDE) and urlsplit(url).hostname not in (host, None)
        }
        out.update(hosts)
    return out


def evidence_counts(
    pages: list[Page],
    table: pa.Table,
    langs: tuple[str, ...],
    rewrites: list[Rewrite],
    language_attributes: tuple[str, ...] = (),
) -> dict:
    """Step 3: per evidence kind, the pages that carry it and the pairs it yields; and the English
    pages where two kinds name different counterparts. Links in ``language_attributes`` count
    as toggles."""
    carried: Counter = Counter()
    for p in pages:
        found = extract_links(p.html, p.base, language_attributes).links
        carried.update({kind for kind, lang, _ in found if lang in langs or lang == OTHER_SIDE})
    pairs = {
        k: pair_map(table, langs, (k,), rewrites if k == "rewrite" else (), language_attributes)
        for k in LINK_KINDS
    }
    carried["rewrite"] = sum(
        1 for p in pages for rw in rewrites if p.lang == "en" and rw.by_lang["en"] in p.url
    )
    disagree: dict[tuple[str, str], list[str]] = defaultdict(list)
    predictions = _predictions(pages, langs, rewrites, language_attributes)
    for (en_url, _lang), by_kind in sorted(predictions.items()):
        kinds = sorted(by_kind)
        for i, a in enumerate(kinds):
            for b in kinds[i + 1 :]:
                if not by_kind[a] & by_kind[b]:
                    pair_name = tuple(sorted((a, b), key=PREFERENCE.index))
                    disagree[pair_name].append(
                        f"{en_url}: {a} -> {sorted(by_kind[a])[0]}, {b} -> {sorted(by_kind[b])[0]}"
                    )
    return {
        "pages_carrying": {k: carried.get(k, 0) for k in LINK_KINDS},
        "pairs": {k: len(pairs[k]) for k in LINK_KINDS},
        "pair_sets": pairs,
        "disagreements": {f"{a}/{b}": v for (a, b), v in sorted(disagree.items())},
    }


def choose_evidence(counts: dict) -> tuple[tuple[str, ...], list[str]]:
    """Step 4: the evidence kinds to use, and why.

    Kinds that never name different counterparts for one page are all kept (those that yield
    pairs). Where two kinds disagree on some page, the site's signals cannot all be trusted: one
    kind leads, and another is added only if it pairs pages the kept ones leave unpaired and never
    disagrees with them. A link the site wrote (toggle, hreflang) leads before a URL pattern,
    which is a guess; of the two links, the one naming the most different counterparts (a toggle
    that always leads to the home page names one), ties to :data:`PREFERENCE`.
    """
    pairs = counts["pair_sets"]
    useful = [k for k in PREFERENCE if pairs[k]]
    if not useful:
        return (), ["no kind of evidence pairs any two fetched pages"]
    clash = {tuple(name.split("/")) for name, v in counts["disagreements"].items() if v}
    if not clash:
        chosen = tuple(k for k in LINK_KINDS if k in useful)
        return chosen, [f"{', '.join(chosen)}: no page where two kinds name different pages"]

    def rank(k: str) -> tuple[bool, int, int]:
        return (k == "rewrite", -len(set(pairs[k].values())), PREFERENCE.index(k))

    ranked = sorted(useful, key=rank)
    kept = [ranked[0]]
    n_lead = len(set(pairs[ranked[0]].values()))
    why = [f"{ranked[0]} leads: {len(pairs[ranked[0]])} pair(s), {n_lead} different counterpart(s)"]
    for k in ranked[1:]:
        against = [c for c in kept if (c, k) in clash or (k, c) in clash]
        covered = {key for c in kept for key in pairs[c]}
        extra = set(pairs[k]) - covered
        if against:
            n = sum(
                len(counts["disagreements"]["/".join(sorted((c, k), key=PREFERENCE.index))])
                for c in against
            )
            why.append(f"{k} left out: names other pages than {', '.join(against)} on {n} page(s)")
        elif not extra:
            why.append(f"{k} left out: pairs no page that {', '.join(kept)} leaves unpaired")
        else:
            kept.append(k)
            why.append(f"{k}: pairs {len(extra)} page(s) the others leave unpaired")
    return tuple(k for k in LINK_KINDS if k in kept), why
