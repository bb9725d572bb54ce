"""``probe_site``: crawl a small sample of a site and suggest its ``sites:`` entry, with counts.

Steps: :func:`crawl_sample` (the crawl stage, in a child process), :func:`read_pages` (parse the
fetched pages, measure their language), :func:`choose_languages`, the page structure
(:mod:`parasim.probe.structure`: ``main_selector``, ``link_attributes``, ``aliases``), the
pairing evidence (:mod:`parasim.probe.evidence`: URL rewrites behind the pairs the language links
or the URL naming give, what each kind yields through :func:`parasim.pair.pair_pages`, where kinds
disagree, what the pair stage would leave out as untranslated); :func:`suggest_site` puts the
entry together and :func:`render_yaml` writes it with its counts.
"""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from parasim.clean.langid import LanguageId
from parasim.crawl.content import parse_html
from parasim.pair import EVIDENCE_KINDS, LINK_KINDS, norm_lang
from parasim.probe.evidence import (
    choose_evidence,
    evidence_counts,
    infer_rewrites,
    named_pairs,
    offsite_language_hosts,
    pair_map,
    probe_site_config,
    untranslated_pairs,
)
from parasim.probe.languages import is_config_code, measure_language
from parasim.probe.structure import (
    Page,
    alias_counts,
    choose_aliases,
    choose_main_selector,
    index_file_counts,
    is_language_attribute,
    link_attribute_counts,
    main_selector_counts,
    script_links,
    tracking_param_counts,
)

#: Log lines of the crawl stage itself (``parasim.cli``'s format).
_CRAWL_LOG_RE = re.compile(r"^\S+ \S+ (INFO|WARNING|ERROR) parasim\.crawl: ")


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
    language_attributes: tuple[str, ...] = (),
) -> tuple[dict, dict, dict[str, list[str]]]:
    """Steps 2-4: the ``pairing`` section, its counts and notes (``evidence``, ``rewrites``,
    ``language_attributes``); ``main_selector`` is where the pair stage measures a page's
    language; links in ``language_attributes`` count as toggles.

    Raises:
        ProbeError: no kind of evidence pairs any two fetched pages.
    """
    notes: dict[str, list[str]] = defaultdict(list)
    attrs = tuple(language_attributes)
    linked = pair_map(table, langs, ("hreflang", "toggle"), (), attrs)
    url_pairs = [(en, other, lang) for (en, lang), other in linked.items()]
    url_pairs += named_pairs(pages, langs, set(linked))
    rewrites_all = infer_rewrites(url_pairs)
    # One pair's odd name (License-en.html -> Licence-fr.html) is not a pattern.
    least = 2 if len(url_pairs) >= 2 else 1
    rewrites = [rw for rw, n in rewrites_all if n >= least]
    ev = evidence_counts(pages, table, langs, rewrites, attrs)
    evidence, why = choose_evidence(ev)
    counts = {
        "rewrites": [{**rw.by_lang, "pairs": n} for rw, n in rewrites_all],
        "evidence": {k: v for k, v in ev.items() if k != "pair_sets"},
    }
    for k in LINK_KINDS:
        notes["evidence"].append(
            f"{k}: on {ev['pages_carrying'][k]} page(s), {ev['pairs'][k]} pair(s)"
        )
    for kinds, v in ev["disagreements"].items():
        notes["evidence"].append(f"{kinds} name different pages for {len(v)} page(s), e.g. {v[0]}")
    notes["evidence"].extend(why)
    if not evidence:
        away = offsite_language_hosts(pages, langs, host, attrs)
        hint = (
            f"; language links lead to other hosts ({', '.join(sorted(away))}): "
            "probe again with --allowed-domains"
            if away
            else "; raise --max-pages, start from a page that links to its translation, or "
            "pair the pages by what they say (pairing.evidence: [content])"
        )
        raise ProbeError(
            f"no page pair found among the {len(pages)} fetched pages: no hreflang link, language "
            f"toggle or URL pattern leads from an English page to a fetched {'/'.join(langs[1:])} "
            f"page{hint}"
        )
    used = rewrites if "rewrite" in evidence else ()
    combined = pair_map(table, langs, evidence, used, attrs)
    untranslated = untranslated_pairs(
        table, probe_site_config(langs, evidence, used, main_selector, attrs)
    )
    counts["pairs_suggested"] = len(combined)
    counts["untranslated_pairs"] = untranslated
    notes["evidence"].append(
        f"with {', '.join(evidence)}: {len(combined)} pair(s) in the sample, of which the pair "
        f"stage measures {len(untranslated)} as untranslated (clean.untranslated_pages)"
    )
    for rw, n in rewrites_all:
        suffix = "" if rw in rewrites and "rewrite" in evidence else " (not used)"
        notes["rewrites"].append(f"{_fmt(rw.by_lang)}: explains {n} pair(s){suffix}")
    pairing: dict = {"evidence": list(evidence)}
    if "rewrite" in evidence:
        pairing["rewrites"] = [dict(rw.by_lang) for rw in rewrites]
    if attrs:
        pairing["language_attributes"] = list(attrs)
        notes["language_attributes"].append(
            f"{', '.join(attrs)}: attribute(s) of any element naming the page in another "
            f"language, read as toggles ({ev['pages_carrying']['toggle']} page(s) carry toggles)"
        )
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
    tracking = tracking_param_counts(pages)
    if tracking:
        counts["tracking_params"] = tracking
        keys["drop_query_params"] = list(tracking)
        notes["drop_query_params"].append(
            f"links carry tracking parameters ({_fmt(tracking)}): left out, one page per URL"
        )
    from parasim.config import SiteConfig

    known = SiteConfig.index_files
    index_files = index_file_counts(pages, known)
    if index_files:
        counts["index_files"] = index_files
        keys["index_files"] = [*known, *index_files]
        notes["index_files"].append(
            "the server answers a directory URL X/ with "
            + ", ".join(f"X/{n} ({k} URL(s))" for n, k in index_files.items())
            + ": one page under both"
        )
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
    serve: dict[str, str] | None = None,
    sitemap_urls: list[str] | tuple[str, ...] = (),
    sitemap_alternates: list | tuple = (),
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
        serve: the local folders the site's hosts were served from ({host: folder}), if any.
        sitemap_urls: the page URLs the sitemaps of the site's hosts list
            (:func:`find_sitemap_urls`), if any.
        sitemap_alternates: their hreflang alternates, ``(page URL, hreflang, URL)``.

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
    language_attrs = tuple(a for a in keys.get("link_attributes", ()) if is_language_attribute(a))
    pairing, pair_counts, pair_notes = suggest_pairing(
        pages, table, langs, host, keys["main_selector"], language_attrs
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
    if serve:
        entry["serve"] = dict(serve)
    entry.update(keys)
    entry["pairing"] = pairing
    if domain == "general":
        notes["domain"].append("a label of your choice: government, insurance, ...")
    suggestion = Suggestion(entry, counts, dict(notes))
    suggest_sitemaps(suggestion, list(sitemap_urls), pages, table, list(sitemap_alternates))
    suggest_content(suggestion)
    return suggestion


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
    """Run the crawl stage (``parasim crawl-site``) for one site entry in a child process.

    Scrapy's reactor runs once per process, and the probe crawls twice; a child process also keeps
    the probe callable from tests. The crawl's progress lines go to this process's stderr.

    Args:
        entry: a ``sites:`` entry (validated by the child).
        settings: the ``crawl`` config section.
        work: folder for the pages, the crawl state and the counts.

    Returns:
        The pages (:data:`parasim.io.PAGES_SCHEMA`) and the crawl's counts (``pages_ok``,
        ``pages_skipped_by_reason`` and the crawl stats' other counts, in one mapping).

    Raises:
        ProbeError: the crawl failed.
    """
    from parasim.io import read_table
    from parasim.stats import Stats

    stats = work / "crawl.json"
    cmd = [
        sys.executable,
        "-m",
        "parasim.cli",
        "crawl-site",
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
    counts = Stats.read(stats)
    flat = {"pages_ok": counts.rows_out, "pages_skipped_by_reason": dict(counts.dropped)}
    return read_table(work / "pages"), flat | dict(counts.counts)


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
    serve: dict[str, str] | None = None,
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
        serve: local folders holding the site's hosts ({host: folder}), each served on
            127.0.0.1 for each crawl (a site on several hosts).

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
        # Each page's language links before the rest: the sample holds page pairs.
        "crawl_order": "pairs_first",
    }
    if allowed_domains:
        entry["allowed_domains"] = sorted({host, *allowed_domains})
    if serve_dir:
        entry["serve_dir"] = serve_dir
    if serve:
        entry["serve"] = dict(serve)
    table, crawl = crawl_sample(entry, settings, work / "sample")
    second = None
    fetched = set(table.column("url").to_pylist())
    hosts = (host, *allowed_domains)
    first_pages = read_pages(table)
    found = script_links(first_pages, hosts)
    reach = link_attribute_counts(first_pages, hosts)
    # Links on custom elements (href on <x-nav-link>, lang-href): the whole sample again,
    # reading them, within what is left of the budget.
    structural = [
        a for a in found if not a.startswith("data-") and reach[a]["urls_no_href_reaches"]
    ]
    extra = []
    if structural:
        again = {**entry, "link_attributes": sorted(found)}
        again["limits"] = {"max_pages": max(reserve, max_pages - crawl["requests"])}
        lang_attrs = [a for a in sorted(found) if is_language_attribute(a)]
        if lang_attrs:
            again["pairing"] = {"language_attributes": lang_attrs}
        table, second = crawl_sample(again, settings, work / "attributes")
    else:
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
    crawl["attribute_links_recrawl"] = sorted(found) if structural else []
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
    sitemap_urls, sitemap_alternates = find_sitemap_urls(entry, settings, work / "sitemaps")
    suggestion = suggest_site(
        table,
        url,
        languages=languages,
        name=name,
        domain=domain,
        serve_dir=serve_dir,
        allowed_domains=allowed_domains,
        serve=serve,
        sitemap_urls=sitemap_urls,
        sitemap_alternates=sitemap_alternates,
    )
    suggest_limits(suggestion, crawl)
    return suggestion, crawl


def suggest_content(s: Suggestion) -> None:
    """``content`` evidence, with ``content_disagrees: drop``, where the crawl will pair pages
    the sample's links cannot vouch for: pages only the sitemaps list (no page of the site links
    them: old versions, demos, drafts, whose language links are often wrong). Content then checks
    every link pair, drops those it contradicts unless the two pages link each other, and pairs
    the pages the links leave."""
    pairing = s.entry["pairing"]
    listed = s.counts.get("sitemap_urls", {}).get("not_linked_from_sample", 0)
    if not listed or "content" in pairing["evidence"]:
        return
    pairing["evidence"] = [*pairing["evidence"], "content"]
    pairing["content_disagrees"] = "drop"
    s.notes["evidence"].append(
        f"content: {listed} page(s) only the sitemaps list: what the pages say checks the link "
        "pairs and pairs the pages the links leave (static e5 vectors, a few ms of CPU a page)"
    )
    s.notes["content_disagrees"] = [
        "drop: a link pair content contradicts is left out unless its pages link each other"
    ]


def find_sitemap_urls(entry: dict, settings: dict, work: Path) -> tuple[list[str], list]:
    """The page URLs the sitemaps of a site entry's hosts list (its local folders served), and
    their hreflang alternates (``[page URL, hreflang, URL]``)."""
    import logging

    from parasim.config import SiteConfig, validate_config
    from parasim.crawl.stage import CrawlSettings, _setup, _sitemap_starts

    site = SiteConfig.from_dict(validate_config({"sites": [entry]})["sites"][0])
    site = dataclasses.replace(site, sitemaps=True)
    crawl_settings = CrawlSettings.from_config(settings)
    _, served, _, site_map = _setup(site, crawl_settings)
    work.mkdir(parents=True, exist_ok=True)
    log = logging.getLogger("parasim.probe")
    return _sitemap_starts(site, crawl_settings, served, site_map, work, "probe", log)


def suggest_sitemaps(
    s: Suggestion,
    listed: list[str],
    pages: list[Page],
    table: pa.Table,
    alternates: list | tuple = (),
) -> None:
    """``sitemaps: true`` when the site's hosts have sitemaps that list page URLs; counted, the
    ones no page of the sample (``pages``, read from ``table``) links or was fetched at. And
    ``sitemap`` evidence when the sitemaps name translations (hreflang alternates in another of
    the site's languages)."""
    from parasim.crawl.content import extract_links

    if not listed:
        return
    fetched = set(table.column("url").to_pylist()) | set(table.column("final_url").to_pylist())
    linked = {u for p in pages for u in extract_links(p.root, p.base)} | fetched
    unlinked = sum(1 for u in listed if u not in linked)
    s.entry["sitemaps"] = True
    s.counts["sitemap_urls"] = {"listed": len(listed), "not_linked_from_sample": unlinked}
    s.notes["sitemaps"] = [
        f"the sitemaps list {len(listed)} page URL(s), {unlinked} of them not linked from the "
        "sample: the crawl starts from them too"
    ]
    langs = set(s.entry["languages"])
    named = {
        (page, norm_lang(lang))
        for page, lang, url in alternates
        if norm_lang(lang) in langs and url != page
    }
    if not named:
        return
    evidence = s.entry["pairing"]["evidence"]
    if "sitemap" not in evidence:
        kinds = [*evidence, "sitemap"]
        s.entry["pairing"]["evidence"] = [k for k in EVIDENCE_KINDS if k in kinds]
    pages_named = len({page for page, _ in named})
    s.counts["sitemap_alternates"] = {"pages": pages_named, "links": len(named)}
    s.notes.setdefault("evidence", []).append(
        f"sitemap: the sitemaps name the translations of {pages_named} page(s) "
        f"({len(named)} hreflang alternate(s) in the site's languages)"
    )


#: ``limits.max_pages`` the probe suggests for a site larger than its sample: a bound against
#: endless URL spaces (calendars, search pages), not an estimate of the site's size.
SITE_MAX_PAGES = 100_000


def suggest_limits(s: Suggestion, crawl: dict) -> None:
    """``limits.max_pages`` when the sample stopped at its page limit with URLs left to fetch:
    the default (5000) would cut a large site's crawl as it cut the sample."""
    from parasim.config import SiteConfig

    left = crawl["pages_skipped_by_reason"].get("page_limit", 0)
    if not left:
        return
    s.entry["limits"] = {"max_pages": SITE_MAX_PAGES}
    s.counts["urls_left_by_sample"] = left
    s.notes["limits"] = [
        f"the sample stopped at its page limit with {left} URL(s) of the site left to fetch: "
        f"a bound of {SITE_MAX_PAGES} pages instead of the default {SiteConfig.max_pages}; "
        "lower it for a partial crawl"
    ]


#: The probe suggests a site's config before any run: not a stage of the workflow.
SPECS = ()
