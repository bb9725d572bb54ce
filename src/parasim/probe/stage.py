"""``probe_site``: crawl a small sample of a site and suggest its ``sites:`` entry, with counts.

Steps, each a function below: :func:`crawl_sample` (the crawl stage, in a child process),
:func:`read_pages` (parse the fetched pages, measure their language), :func:`choose_languages`,
the page structure (:mod:`parasim.probe.structure`: ``main_selector``, ``link_attributes``,
``aliases``), :func:`infer_rewrites` (URL patterns behind the pairs the language links or the URL
naming give), :func:`evidence_counts` and :func:`choose_evidence` (which pairing evidence the
pages carry, what each kind yields through :func:`parasim.pair.pair_pages`, where kinds disagree,
what the pair stage would leave out as untranslated); :func:`suggest_site` puts the entry
together and :func:`render_yaml` writes it with its counts.
"""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from parasim.clean.langid import LanguageId
from parasim.config import Rewrite, SiteConfig
from parasim.crawl.content import canonical, parse_html
from parasim.pair import EVIDENCE_KINDS, extract_links, norm_lang, pair_pages
from parasim.probe.languages import is_config_code, measure_language
from parasim.probe.structure import (
    Page,
    alias_counts,
    choose_aliases,
    choose_main_selector,
    link_attribute_counts,
    main_selector_counts,
    script_links,
)

#: Log lines of the crawl stage itself (``parasim.cli``'s format).
_CRAWL_LOG_RE = re.compile(r"^\S+ \S+ (INFO|WARNING|ERROR) parasim\.crawl: ")

#: Order of preference among evidence kinds when they disagree: the toggle is the link a reader
#: follows, hreflang the one a search engine reads, the URL pattern a guess.
PREFERENCE = ("toggle", "hreflang", "rewrite")


class ProbeError(ValueError):
    """The probed pages cannot support a suggestion; the message says why and what to try."""


@dataclass
class Suggestion:
    """A suggested ``sites:`` entry, the counts behind it, and one note per decision."""

    entry: dict
    counts: dict
    notes: dict[str, list[str]] = field(default_factory=dict)


# ---------------------------------------------------------------- step 1: pages and languages


def read_pages(pages: pa.Table) -> list[Page]:
    """Step 1: the fetched pages (``html`` not null), parsed, declared and measured language."""
    lid = LanguageId()
    out = []
    for row in pages.select(["url", "final_url", "declared_lang", "html"]).to_pylist():
        if row["html"] is None:
            continue
        measured, _ = measure_language(row["html"], lid)
        out.append(
            Page(
                url=row["url"],
                base=row["final_url"] or row["url"],
                declared=norm_lang(row["declared_lang"]),
                measured=measured,
                html=row["html"],
                root=parse_html(row["html"]),
            )
        )
    out.sort(key=lambda p: p.url)
    return out


def language_counts(pages: list[Page]) -> dict:
    """Pages per declared and per measured language, and the pages where the two differ."""
    declared = Counter(p.declared or "none" for p in pages)
    measured = Counter(p.measured or "unknown" for p in pages)
    differ = [p for p in pages if p.declared and p.measured and p.declared != p.measured]
    return {
        "declared": dict(sorted(declared.items())),
        "measured": dict(sorted(measured.items())),
        "declared_differs_from_measured": len(differ),
        "differ_examples": [
            f"{p.url} (declared {p.declared}, reads as {p.measured})" for p in differ[:5]
        ],
    }


def choose_languages(pages: list[Page], requested: tuple[str, ...] | None) -> tuple[str, ...]:
    """The site's languages: ``requested`` when given, else every language of at least two pages
    (one when the sample has fewer than ten), English first, then by page count. A page's
    language is the one it declares, else the one measured.

    Raises:
        ProbeError: no English page, or no page in another language.
    """
    lc = language_counts(pages)
    seen = f"declared {_fmt(lc['declared'])}; measured {_fmt(lc['measured'])}"
    if requested:
        found = {p.declared for p in pages} | {p.measured for p in pages}
        missing = sorted(set(requested) - found)
        if missing:
            raise ProbeError(
                f"no fetched page is in {', '.join(missing)} ({seen}): check --languages, or "
                "raise --max-pages"
            )
        return tuple(["en"] + sorted(set(requested) - {"en"}))
    by_lang = Counter(p.lang for p in pages if is_config_code(p.lang))
    least = 2 if len(pages) >= 10 else 1
    langs = [lang for lang, n in sorted(by_lang.items(), key=lambda x: (-x[1], x[0])) if n >= least]
    if "en" not in langs:
        raise ProbeError(
            f"none of the {len(pages)} fetched pages is in English ({seen}), and parasim pairs "
            "every language with English: probe the site's English start page, or pass "
            "--languages if the pages declare the wrong language"
        )
    if len(langs) < 2:
        raise ProbeError(
            f"only one language has {least} or more of the {len(pages)} fetched pages ({seen}): "
            "probe a page that links to its translation, raise --max-pages, or pass --languages"
        )
    return tuple(["en"] + [lang for lang in langs if lang != "en"])


# ---------------------------------------------------------------- step 2: URL rewrites


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


# ---------------------------------------------------------------- steps 3-4: pairing evidence


def _probe_site(
    langs: tuple[str, ...], evidence: tuple[str, ...], rewrites=(), main_selector=None
) -> SiteConfig:
    return SiteConfig(
        name="probe",
        domain="probe",
        languages=langs,
        start_urls=("http://probe.invalid/",),
        allowed_domains=("probe.invalid",),
        main_selector=main_selector,
        evidence=evidence,
        rewrites=tuple(rewrites),
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


def _pairs(table: pa.Table, langs, evidence, rewrites=()) -> dict[tuple[str, str], str]:
    """(English URL, language) -> other URL, by :func:`parasim.pair.pair_pages`, many-to-one."""
    with _quiet("parasim.pair"):
        site = _probe_site(langs, evidence, rewrites)
        pairs, _ = pair_pages(table, site, 1, one_to_one=False)
    cols = [pairs.column(c).to_pylist() for c in ("en_url", "other_lang", "other_url")]
    return {(en, lang): other for en, lang, other in zip(*cols, strict=True)}


def untranslated_pairs(table: pa.Table, site: SiteConfig) -> list[dict]:
    """The pairs the pair stage leaves out as untranslated with the default
    ``clean.untranslated_pages`` settings (each with the measured languages of its pages)."""
    from parasim.config import validate_section

    settings = validate_section("clean", {})["untranslated_pages"]
    with _quiet("parasim.pair"):
        _, stats = pair_pages(table, site, 1, one_to_one=False, untranslated=settings)
    return stats.get("untranslated", [])


def _predictions(pages: list[Page], langs, rewrites) -> dict[tuple[str, str], dict[str, set]]:
    """(English page, language) -> kind -> the URLs that kind names as its counterpart (a fetched
    URL that redirected stands for where it landed)."""
    others = set(langs) - {"en"}
    landed = {p.url: p.base for p in pages}
    out: dict[tuple[str, str], dict[str, set]] = defaultdict(lambda: defaultdict(set))

    def name(url: str) -> str:
        url = canonical(url) or url
        return landed.get(url, url)

    for p in pages:
        if p.lang != "en":
            continue
        for kind, lang, url in extract_links(p.html, p.base).links:
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


def offsite_language_hosts(pages: list[Page], langs: tuple[str, ...], host: str) -> Counter:
    """Hosts other than ``host`` that the pages' hreflang and toggle links lead to, by pages."""
    out: Counter = Counter()
    for p in pages:
        hosts = {
            urlsplit(url).hostname
            for _, lang, url in extract_links(p.html, p.base).links
            if lang in langs and urlsplit(url).hostname not in (host, None)
        }
        out.update(hosts)
    return out


def evidence_counts(
    pages: list[Page], table: pa.Table, langs: tuple[str, ...], rewrites: list[Rewrite]
) -> dict:
    """Step 3: per evidence kind, the pages that carry it and the pairs it yields; and the English
    pages where two kinds name different counterparts."""
    carried: Counter = Counter()
    for p in pages:
        kinds = {kind for kind, lang, _ in extract_links(p.html, p.base).links if lang in langs}
        carried.update(kinds)
    pairs = {
        k: _pairs(table, langs, (k,), rewrites if k == "rewrite" else ()) for k in EVIDENCE_KINDS
    }
    carried["rewrite"] = sum(
        1 for p in pages for rw in rewrites if p.lang == "en" and rw.by_lang["en"] in p.url
    )
    disagree: dict[tuple[str, str], list[str]] = defaultdict(list)
    for (en_url, _lang), by_kind in sorted(_predictions(pages, langs, rewrites).items()):
        kinds = sorted(by_kind)
        for i, a in enumerate(kinds):
            for b in kinds[i + 1 :]:
                if not by_kind[a] & by_kind[b]:
                    pair_name = tuple(sorted((a, b), key=PREFERENCE.index))
                    disagree[pair_name].append(
                        f"{en_url}: {a} -> {sorted(by_kind[a])[0]}, {b} -> {sorted(by_kind[b])[0]}"
                    )
    return {
        "pages_carrying": {k: carried.get(k, 0) for k in EVIDENCE_KINDS},
        "pairs": {k: len(pairs[k]) for k in EVIDENCE_KINDS},
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
        chosen = tuple(k for k in EVIDENCE_KINDS if k in useful)
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
    return tuple(k for k in EVIDENCE_KINDS if k in kept), why


# ---------------------------------------------------------------- the whole suggestion


def site_name(url: str) -> str:
    """A site name from a URL's host: its first label that is not ``www``."""
    host = (urlsplit(url).hostname or "site").lower()
    labels = [x for x in host.split(".") if x and x != "www"] or ["site"]
    name = re.sub(r"[^a-z0-9_-]+", "-", labels[0] if not host[0].isdigit() else host).strip("-")
    return name or "site"


def suggest_pairing(
    pages: list[Page],
    table: pa.Table,
    langs: tuple[str, ...],
    host: str,
    main_selector: str | None = None,
) -> tuple[dict, dict, dict[str, list[str]]]:
    """Steps 2-4: the ``pairing`` section, its counts and notes (``evidence``, ``rewrites``);
    ``main_selector`` is where the pair stage measures a page's language.

    Raises:
        ProbeError: no kind of evidence pairs any two fetched pages.
    """
    notes: dict[str, list[str]] = defaultdict(list)
    linked = _pairs(table, langs, ("hreflang", "toggle"))
    url_pairs = [(en, other, lang) for (en, lang), other in linked.items()]
    url_pairs += named_pairs(pages, langs, set(linked))
    rewrites_all = infer_rewrites(url_pairs)
    # One pair's odd name (License-en.html -> Licence-fr.html) is not a pattern.
    least = 2 if len(url_pairs) >= 2 else 1
    rewrites = [rw for rw, n in rewrites_all if n >= least]
    ev = evidence_counts(pages, table, langs, rewrites)
    evidence, why = choose_evidence(ev)
    counts = {
        "rewrites": [{**rw.by_lang, "pairs": n} for rw, n in rewrites_all],
        "evidence": {k: v for k, v in ev.items() if k != "pair_sets"},
    }
    for k in EVIDENCE_KINDS:
        notes["evidence"].append(
            f"{k}: on {ev['pages_carrying'][k]} page(s), {ev['pairs'][k]} pair(s)"
        )
    for kinds, v in ev["disagreements"].items():
        notes["evidence"].append(f"{kinds} name different pages for {len(v)} page(s), e.g. {v[0]}")
    notes["evidence"].extend(why)
    if not evidence:
        away = offsite_language_hosts(pages, langs, host)
        hint = (
            f"; language links lead to other hosts ({', '.join(sorted(away))}): "
            "probe again with --allowed-domains"
            if away
            else "; raise --max-pages or start from a page that links to its translation"
        )
        raise ProbeError(
            f"no page pair found among the {len(pages)} fetched pages: no hreflang link, language "
            f"toggle or URL pattern leads from an English page to a fetched {'/'.join(langs[1:])} "
            f"page{hint}"
        )
    used = rewrites if "rewrite" in evidence else ()
    combined = _pairs(table, langs, evidence, used)
    untranslated = untranslated_pairs(table, _probe_site(langs, evidence, used, main_selector))
    counts["pairs_suggested"] = len(combined)
    counts["untranslated_pairs"] = untranslated
    notes["evidence"].append(
        f"with {', '.join(evidence)}: {len(combined)} pair(s) in the sample, of which the pair "
        f"stage leaves out {len(untranslated)} as untranslated (clean.untranslated_pages)"
    )
    for rw, n in rewrites_all:
        suffix = "" if rw in rewrites and "rewrite" in evidence else " (not used)"
        notes["rewrites"].append(f"{_fmt(rw.by_lang)}: explains {n} pair(s){suffix}")
    pairing: dict = {"evidence": list(evidence)}
    if "rewrite" in evidence:
        pairing["rewrites"] = [dict(rw.by_lang) for rw in rewrites]
    return pairing, counts, notes


def suggest_structure(
    pages: list[Page], start_url: str, hosts: tuple[str, ...]
) -> tuple[dict, dict, dict[str, list[str]]]:
    """Steps 5-6: ``link_attributes``, ``aliases`` and ``main_selector``, counts and notes."""
    parts = urlsplit(start_url)
    notes: dict[str, list[str]] = defaultdict(list)
    attrs = link_attribute_counts(pages, hosts)
    aliases_c = alias_counts(pages, f"{parts.scheme}://{parts.netloc}", hosts)
    mains = main_selector_counts(pages)
    counts = {"link_attributes": attrs, "aliases": aliases_c, "main_selector": mains}
    keys: dict = {}
    link_attrs = [a for a, v in attrs.items() if v["urls_no_href_reaches"] > 0]
    for a, v in attrs.items():
        notes["link_attributes"].append(
            f"{a}: on {v['pages']} page(s), {v['urls']} page URL(s), "
            f"{v['urls_no_href_reaches']} that no href reaches"
        )
    if link_attrs:
        keys["link_attributes"] = link_attrs
    aliases = choose_aliases(aliases_c)
    for a in aliases:
        v = aliases_c[a]
        notes["aliases"].append(
            f"{a}: {v['known']} of the {v['paths']} paths linked under it are this site's"
        )
    if aliases:
        keys["aliases"] = aliases
    keys["main_selector"], why = choose_main_selector(mains)
    notes["main_selector"].append(why)
    return keys, counts, notes


def suggest_site(
    table: pa.Table,
    start_url: str,
    *,
    languages: tuple[str, ...] | None = None,
    name: str | None = None,
    domain: str = "general",
    serve_dir: str | None = None,
    allowed_domains: tuple[str, ...] = (),
) -> Suggestion:
    """Suggest a ``sites:`` entry from a crawl sample of one site.

    Args:
        table: the sample's pages (:data:`parasim.io.PAGES_SCHEMA`).
        start_url: the URL the sample was crawled from.
        languages: the site's languages, when known (else measured).
        name: the site's name (default: from the host).
        domain: the corpus domain label.
        serve_dir: the local folder the site was served from, if any.
        allowed_domains: hosts the crawl may visit besides the start URL's.

    Returns:
        The entry, the counts behind each of its keys and the notes that explain them.

    Raises:
        ProbeError: no page fetched, no English page, one language only, or no pair found.
    """
    pages = read_pages(table)
    if not pages:
        raise ProbeError(f"no page of {start_url} could be fetched: check the URL and the network")
    langs = choose_languages(pages, languages)
    lc = language_counts(pages)
    notes: dict[str, list[str]] = defaultdict(list)
    notes["languages"].append(
        f"declared {_fmt(lc['declared'])}; measured {_fmt(lc['measured'])}; "
        f"{lc['declared_differs_from_measured']} page(s) read as another language than declared"
    )
    host = urlsplit(start_url).hostname or ""
    keys, structure_counts, structure_notes = suggest_structure(
        pages, start_url, (host, *allowed_domains)
    )
    pairing, pair_counts, pair_notes = suggest_pairing(
        pages, table, langs, host, keys["main_selector"]
    )
    counts = {"pages_fetched": len(pages), "languages": lc, **pair_counts, **structure_counts}
    notes.update(pair_notes)
    notes.update(structure_notes)
    entry: dict = {
        "name": name or site_name(start_url),
        "domain": domain,
        "languages": list(langs),
        "start_urls": [start_url],
    }
    if allowed_domains:
        entry["allowed_domains"] = sorted({host, *allowed_domains})
    if serve_dir:
        entry["serve_dir"] = serve_dir
    entry.update(keys)
    entry["pairing"] = pairing
    if domain == "general":
        notes["domain"].append("a label of your choice: government, insurance, ...")
    return Suggestion(entry, counts, dict(notes))


def _fmt(d: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items()) or "none"


def _flow(value: object) -> str:
    """One YAML value on one line (flow style)."""
    import yaml

    text = yaml.safe_dump(value, default_flow_style=True, width=10**9, allow_unicode=True)
    return text.strip().removesuffix("...").strip()


def render_yaml(s: Suggestion, header: list[str]) -> str:
    """The suggestion as a config file: ``sites:`` with the one entry, each key under comments that
    give the counts behind it.

    Args:
        s: the suggestion.
        header: comment lines for the top of the file.

    Returns:
        YAML text that :func:`parasim.config.validate_config` accepts as it is.
    """
    out = [f"# {line}" for line in header]
    out.append("sites:")
    first = True
    for key, value in s.entry.items():
        lead = "  - " if first else "    "
        first = False
        notes = s.notes.get(key, [])
        if key == "pairing":
            out.append(f"{lead}pairing:")
            for k, v in value.items():
                out.extend(f"      # {note}" for note in s.notes.get(k, []))
                out.append(f"      {k}: {_flow(v)}")
            if "rewrites" not in value:
                out.extend(f"      # rewrite {note}" for note in s.notes.get("rewrites", []))
            continue
        comment_lead = "    # " if not lead.startswith("  - ") else "  # "
        out.extend(f"{comment_lead}{note}" for note in notes)
        out.append(f"{lead}{key}: {_flow(value)}")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- crawling the sample


def crawl_sample(entry: dict, settings: dict, work: Path) -> tuple[pa.Table, dict]:
    """Run the crawl stage (``parasim crawl``) for one site entry in a child process.

    Scrapy's reactor runs once per process, and the probe crawls twice; a child process also keeps
    the probe callable from tests. The crawl's progress lines go to this process's stderr.

    Args:
        entry: a ``sites:`` entry (validated by the child).
        settings: the ``crawl`` config section.
        work: folder for the pages, the crawl state and the counts.

    Returns:
        The pages (:data:`parasim.io.PAGES_SCHEMA`) and the crawl's counts.

    Raises:
        ProbeError: the crawl failed.
    """
    from parasim.io import read_table

    stats = work / "crawl.json"
    cmd = [
        sys.executable,
        "-m",
        "parasim.cli",
        "crawl",
        "--site-json",
        json.dumps(entry),
        "--settings-json",
        json.dumps(settings),
        "--out",
        str(work / "pages"),
        "--state",
        str(work / "state"),
        "--stats",
        str(stats),
    ]
    # The crawler's own lines (progress, counts) are passed on; scrapy's, which log every failed
    # request with its traceback although the crawl counts it as a skip reason, only when the
    # crawl itself fails.
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    tail: deque[str] = deque(maxlen=40)
    for line in proc.stderr:
        tail.append(line)
        if _CRAWL_LOG_RE.match(line):
            sys.stderr.write(line)
    rc = proc.wait()
    proc.stderr.close()
    if rc != 0:
        sys.stderr.writelines(tail)
    if rc != 0 or not stats.is_file():
        raise ProbeError(
            f"the crawl of {entry['start_urls'][0]} failed (exit status {rc}); "
            "its messages are above"
        )
    return read_table(work / "pages"), json.loads(stats.read_text(encoding="utf-8"))


def _merge_crawls(first: dict, second: dict | None) -> dict:
    if not second:
        return first
    out = dict(first)
    for key in ("pages_ok", "requests", "rows", "fetched_pages"):
        out[key] = first.get(key, 0) + second.get(key, 0)
    reasons = Counter(first["pages_skipped_by_reason"])
    reasons.update(second["pages_skipped_by_reason"])
    out["pages_skipped_by_reason"] = dict(sorted(reasons.items()))
    return out


def probe_site(
    url: str,
    work: Path,
    *,
    serve_dir: str | None = None,
    languages: tuple[str, ...] | None = None,
    max_pages: int = 40,
    name: str | None = None,
    domain: str = "general",
    allowed_domains: tuple[str, ...] = (),
    crawl_settings: dict | None = None,
) -> tuple[Suggestion, dict]:
    """Crawl a sample of a site and suggest its ``sites:`` entry.

    Two crawls, both by the crawl stage (robots.txt, politeness and limits as in the workflow):
    breadth-first from ``url`` over three quarters of ``max_pages``, then the pages that only
    ``data-*`` attributes of that sample link to (menus loaded by script), up to the rest.

    Args:
        url: the start URL.
        work: folder for both crawls.
        serve_dir: a local folder holding the site, served on 127.0.0.1 for each crawl.
        languages: the site's languages, when known.
        max_pages: most URLs requested in all.
        name: the site's name (default: from the host).
        domain: the corpus domain label.
        allowed_domains: hosts the crawl may visit besides the start URL's.
        crawl_settings: the ``crawl`` config section (default: its defaults).

    Returns:
        The suggestion and the crawls' counts (summed).

    Raises:
        ProbeError: a crawl failed, or the pages cannot support a suggestion.
    """
    from parasim.config import validate_section

    settings = validate_section("crawl", crawl_settings or {})
    name = name or site_name(url)
    host = urlsplit(url).hostname or ""
    origin = "{0.scheme}://{0.netloc}".format(urlsplit(url))
    reserve = max_pages // 4
    entry = {
        "name": name,
        "domain": domain,
        "languages": list(languages or ("en", "fr")),  # the crawl does not read them
        "start_urls": [url],
        "limits": {"max_pages": max(1, max_pages - reserve)},
    }
    if allowed_domains:
        entry["allowed_domains"] = sorted({host, *allowed_domains})
    if serve_dir:
        entry["serve_dir"] = serve_dir
    table, crawl = crawl_sample(entry, settings, work / "sample")
    second = None
    fetched = set(table.column("url").to_pylist())
    found = script_links(read_pages(table), (host, *allowed_domains))
    extra = sorted(
        {u for v in found.values() for u in v["urls"] if u.startswith(origin + "/")} - fetched
    )[:reserve]
    if extra:
        more = {**entry, "start_urls": extra, "link_attributes": sorted(found)}
        more["limits"] = {"max_pages": len(extra), "max_depth": 0}
        table2, second = crawl_sample(more, settings, work / "scripts")
        table2 = table2.filter(
            pa.array([u not in fetched for u in table2.column("url").to_pylist()])
        )
        table = pa.concat_tables([table, table2.cast(table.schema)])
    crawl = {k: v for k, v in _merge_crawls(crawl, second).items() if k not in ("site", "stage")}
    crawl["script_linked_pages_requested"] = len(extra)
    if not crawl["pages_ok"]:
        reasons = crawl["pages_skipped_by_reason"]
        hint = (
            "it redirects to another host: probe the address it leads to"
            if reasons.get("offsite_redirect")
            else "check the URL, --serve-dir and the network"
        )
        raise ProbeError(
            f"no page of {url} could be fetched (not fetched: {_fmt(reasons)}): {hint}"
        )
    suggestion = suggest_site(
        table,
        url,
        languages=languages,
        name=name,
        domain=domain,
        serve_dir=serve_dir,
        allowed_domains=allowed_domains,
    )
    return suggestion, crawl
