"""Parse page pairs into clean text lines (seed paper, section 2.1.2).

Text comes from inscriptis (no link targets, no image alt texts). It is split into lines; each line
has its whitespace runs collapsed to one space and inscriptis's ``*`` list bullet removed; blank
lines are skipped, and, as in the paper, lines without an alphabetic character are dropped, and so
are lines with fewer than ``min_words`` words (default 1: none; the paper's rule, 2, drops one-word
lines, which loses real translations such as "Numbers" | "Les nombres"); an ordered-list number
("3.") is kept in the line but not counted as a word. Every dropped line is counted by reason and
side.

Main content: when the site has a ``main_selector`` (CSS, e.g. ``main`` or ``div.content``) and it
matches on BOTH pages of a pair, only the matched elements are read (all outermost matches, in
document order); otherwise both pages are read whole, so the two sides stay comparable, and the
pair is counted as ``selector_missed``.

Decisions on bad input:

- a pair whose page is missing from the pages table, or has no html, is skipped and counted
  (dropped ``missing_en_html`` / ``missing_other_html``);
- a page lxml cannot parse at all, or that is too deeply nested for inscriptis, is skipped and
  counted (dropped ``parse_error``); malformed HTML that lxml recovers is parsed as recovered;
- an empty page (no kept lines on one or both sides) keeps its row, with empty line lists, and is
  counted in ``empty_pairs``; ``equal_lines`` is ``n_en == n_other`` as for any pair.
  ``strict=True`` (the paper's rule) keeps only pairs with equal, non-zero line counts (dropped
  ``unequal_line_counts`` / ``empty_side``).
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lxml.etree
import lxml.html
import pyarrow as pa
import pyarrow.compute as pc

from parasim import explain
from parasim.config import Settings, SiteConfig
from parasim.io import LINES_SCHEMA, PAGES_SCHEMA, PAIRS_SCHEMA, rows_to_table
from parasim.spec import Stage
from parasim.stats import Recorder

log = logging.getLogger(__name__)

DROP_REASONS = ("no_alpha", "few_words")
_ORDINAL_RE = re.compile(r"\d+\.")
_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


@dataclass(frozen=True)
class ParsePagesSettings(Settings, section="parse"):
    """The ``parse`` config section (what each key means: the schema)."""

    strict: bool
    min_words: int


class ParseSkip(Exception):
    """A page cannot be turned into text; the message says why."""


def clean_lines(text: str, min_words: int) -> tuple[list[str], Counter]:
    """Split extracted text into kept lines and count the dropped ones.

    Args:
        text: text from inscriptis.
        min_words: the fewest whitespace-separated words a kept line has.

    Returns:
        The kept lines (whitespace collapsed) and a Counter with ``kept``, ``blank``, ``no_alpha``,
        ``few_words``.
    """
    kept: list[str] = []
    counts: Counter = Counter({"kept": 0, "blank": 0, "no_alpha": 0, "few_words": 0})
    for raw in text.splitlines():
        words = raw.split()
        if words and words[0] == "*":  # inscriptis's bullet for <ul> items: markup, not text
            words = words[1:]
        if not words:
            counts["blank"] += 1
            continue
        line = " ".join(words)
        # An <ol> number ("3.") is kept in the text but is not a word of the line.
        n_words = len(words) - int(bool(_ORDINAL_RE.fullmatch(words[0])))
        if not any(ch.isalpha() for ch in line):
            counts["no_alpha"] += 1
        elif n_words < min_words:
            counts["few_words"] += 1
        else:
            kept.append(line)
            counts["kept"] += 1
    return kept, counts


def _tree(html: str) -> lxml.html.HtmlElement:
    if not html.strip():
        # An empty document: lxml refuses it, but it is a page with no text, not an error.
        return lxml.html.document_fromstring(b"<html><body></body></html>", parser=_PARSER)
    try:
        return lxml.html.document_fromstring(html.encode("utf-8", "replace"), parser=_PARSER)
    except (lxml.etree.ParserError, ValueError) as exc:
        raise ParseSkip(f"lxml cannot parse the page ({exc})") from exc


def _outermost(elements: list) -> list:
    """Matches that are not inside another match, in document order."""
    chosen = set(elements)
    out = []
    for el in elements:
        if not any(anc in chosen for anc in el.iterancestors()):
            out.append(el)
    return out


def _text(roots: list, config) -> str:
    from inscriptis import Inscriptis

    parts = []
    for root in roots:
        # inscriptis writes an element's tail (text after its end tag, outside the selection).
        root.tail = None
        try:
            parts.append(Inscriptis(root, config).get_text())
        except RecursionError as exc:
            raise ParseSkip("page too deeply nested for inscriptis") from exc
    return "\n".join(parts)


def _parser_config():
    from inscriptis.css_profiles import CSS_PROFILES
    from inscriptis.model.config import ParserConfig

    return ParserConfig(
        css=CSS_PROFILES["strict"].copy(),
        display_images=False,
        display_links=False,
        display_anchors=False,
    )


@dataclass
class PairText:
    """Clean lines of one page pair, and how they were found."""

    en_lines: list[str]
    other_lines: list[str]
    selector_used: bool  # the selector matched both pages, and only the matches were read
    en_matched: bool
    other_matched: bool
    en_counts: Counter
    other_counts: Counter


def page_pair_lines(
    en_html: str,
    other_html: str,
    selector=None,
    *,
    min_words: int,
    config=None,
) -> PairText:
    """Clean lines of one page pair.

    Args:
        en_html: the English page.
        other_html: its counterpart.
        selector: a compiled ``lxml.cssselect.CSSSelector`` or None.
        min_words: the fewest words a kept line has.
        config: an inscriptis ParserConfig (default: no links, no images).

    Returns:
        The pair's lines and line counts.

    Raises:
        ParseSkip: a page cannot be parsed.
    """
    config = config or _parser_config()
    en_tree, other_tree = _tree(en_html), _tree(other_html)
    en_roots, other_roots = [en_tree], [other_tree]
    en_match: list = []
    other_match: list = []
    if selector is not None:
        en_match, other_match = _outermost(selector(en_tree)), _outermost(selector(other_tree))
        if en_match and other_match:
            en_roots, other_roots = en_match, other_match
    en_lines, en_counts = clean_lines(_text(en_roots, config), min_words)
    other_lines, other_counts = clean_lines(_text(other_roots, config), min_words)
    return PairText(
        en_lines,
        other_lines,
        bool(en_match and other_match),
        bool(en_match),
        bool(other_match),
        en_counts,
        other_counts,
    )


def _html_by_url(pages: pa.Table, urls: set[str]) -> dict[str, str]:
    """html of the wanted pages (the first row with html wins when a URL repeats)."""
    if not urls or pages.num_rows == 0:
        return {}
    sub = pages.select(["url", "html"]).filter(
        pc.is_in(pages.column("url"), value_set=pa.array(sorted(urls), pa.string()))
    )
    out: dict[str, str] = {}
    urls, htmls = sub.column("url").to_pylist(), sub.column("html").to_pylist()
    for url, html in zip(urls, htmls, strict=True):
        if html is not None and url not in out:
            out[url] = html
    return out


def parse_pairs(
    pairs: pa.Table,
    pages: pa.Table,
    site: SiteConfig,
    settings: ParsePagesSettings | Mapping[str, Any] | None = None,
    *,
    rec: Recorder,
) -> pa.Table:
    """Turn page pairs into line lists (one row per page pair).

    Args:
        pairs: page pairs (:data:`parasim.io.PAIRS_SCHEMA`), e.g. one shard.
        pages: the crawl's pages (:data:`parasim.io.PAGES_SCHEMA`; ``url`` and ``html`` are used).
        site: the site (its ``main_selector``).
        settings: the ``parse`` settings (a mapping: the section as in the config, keys left out
            take the schema's defaults): ``strict`` keeps only pairs with equal, non-zero line
            counts (the paper's rule; off, every parsed pair is kept and flagged with
            ``equal_lines``); ``min_words`` is the fewest words a kept line has.
        rec: records the counts. Rows in and out: page pairs; dropped: pairs skipped
            (``missing_en_html``, ``missing_other_html``, ``parse_error``) or left out by
            ``strict`` (``unequal_line_counts``, ``empty_side``); counts: ``equal``,
            ``unequal``, ``empty_pairs``, ``selector_used``, ``selector_missed``,
            ``selector_missed_one_side``, ``lines`` (per side: kept, blank, no_alpha,
            few_words); seconds ``total``; figure ``pairs_per_s``.

    Returns:
        The lines table (:data:`parasim.io.LINES_SCHEMA`, in the order of ``pairs``).

    Raises:
        ValueError: ``min_words`` < 1 or an invalid ``main_selector``.
    """
    settings = ParsePagesSettings.from_config(settings)
    strict, min_words = settings.strict, settings.min_words
    selector = site.main_text_selector()
    config = _parser_config()
    t0 = time.perf_counter()
    rows_in = pairs.to_pylist()
    html = _html_by_url(pages, {r["en_url"] for r in rows_in} | {r["other_url"] for r in rows_in})

    rec.rows_in += len(rows_in)
    for reason in _DROPS:  # every reason named, 0 or not
        rec.drop(reason, 0)
    zeros = dict.fromkeys(("kept", "blank", "no_alpha", "few_words"), 0)
    for name in _COUNTS:
        rec.count(name, 0)
    rec.count("lines", {"en": zeros, "other": zeros})
    out = []
    for r in rows_in:
        en_html, other_html = html.get(r["en_url"]), html.get(r["other_url"])
        if en_html is None or other_html is None:
            reason = "missing_en_html" if en_html is None else "missing_other_html"
            rec.drop(reason)
            log.warning("parse: pair %s skipped (%s)", r["pair_id"], reason)
            continue
        try:
            pt = page_pair_lines(en_html, other_html, selector, min_words=min_words, config=config)
        except ParseSkip as exc:
            rec.drop("parse_error")
            log.warning("parse: pair %s skipped (%s)", r["pair_id"], exc)
            continue
        rec.count("lines", {"en": pt.en_counts, "other": pt.other_counts})
        if selector is not None:
            if pt.selector_used:
                rec.count("selector_used")
            else:
                rec.count("selector_missed")
                rec.count("selector_missed_one_side", int(pt.en_matched != pt.other_matched))
        n_en, n_other = len(pt.en_lines), len(pt.other_lines)
        equal = n_en == n_other
        rec.count("equal" if equal else "unequal")
        empty = n_en == 0 or n_other == 0
        rec.count("empty_pairs", int(empty))
        if strict and not equal:
            rec.drop("unequal_line_counts")
            continue
        if strict and empty:
            rec.drop("empty_side")
            continue
        out.append(_line_row(r, pt))
    seconds = time.perf_counter() - t0
    rec.rows_out += len(out)
    rec.seconds("total", round(seconds, 3))
    rec.figure("pairs_per_s", round(len(rows_in) / seconds, 1) if seconds > 0 else None)
    log.info(
        "parse %s: %d pairs in, %d out, skipped %s, equal %d, unequal %d, selector missed %d",
        site.name,
        len(rows_in),
        len(out),
        {k: rec.dropped(k) for k in _DROPS[:3]},
        rec.counted("equal"),
        rec.counted("unequal"),
        rec.counted("selector_missed"),
    )
    return rows_to_table(out, LINES_SCHEMA)


#: Why a page pair in is not a row out: skipped (first three), or left out by ``strict``.
_DROPS = (
    "missing_en_html",
    "missing_other_html",
    "parse_error",
    "unequal_line_counts",
    "empty_side",
)
#: Counts :func:`parse_pairs` always writes (0 or not), besides ``lines``.
_COUNTS = (
    "equal",
    "unequal",
    "empty_pairs",
    "selector_used",
    "selector_missed",
    "selector_missed_one_side",
)


def _line_row(r: dict, pt: PairText) -> dict:
    """The lines table's row of the page pair ``r`` with its lines ``pt``."""
    n_en, n_other = len(pt.en_lines), len(pt.other_lines)
    return {
        "pair_id": r["pair_id"],
        "site": r["site"],
        "domain": r["domain"],
        "lang_pair": r["lang_pair"],
        "en_url": r["en_url"],
        "other_url": r["other_url"],
        "other_lang": r["other_lang"],
        "en_lines": pt.en_lines,
        "other_lines": pt.other_lines,
        "n_en": n_en,
        "n_other": n_other,
        "equal_lines": n_en == n_other,
        "selector_used": pt.selector_used,
    }


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "parse",
    rules=("parse_pages",),
    results=("lines",),
    upstream="pair",
    per="shard",
    done="lines",
    metric="rows_out",
    label="pairs parsed",
    explain=explain.parse,
    one_to_one=True,
    aliases={"parse-pages": ("parse",)},
    settings=ParsePagesSettings,
    inputs={"pairs": PAIRS_SCHEMA, "pages": PAGES_SCHEMA},
    outputs={"out": LINES_SCHEMA},
    run=parse_pairs,
)
