"""Why one stage came out empty, in one sentence: its counts by reason and the likely fix.

One sentence-maker per stage, ``(site, stats) -> str``, each named by the stage's record in
:mod:`parasim.stages`; :mod:`parasim.diagnose` picks the earliest empty stage of a site and calls
its sentence-maker. They read the stage's :class:`~parasim.stats.Stats` (summed over shards): the
drops by reason, and the counts the stage names in its ``counts``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from parasim.stats import Stats


def _n(counts: Mapping[str, Any], key: str) -> int:
    """A count, or the sum of a mapping of counts (0 when absent)."""
    v = counts.get(key, 0)
    if isinstance(v, Mapping):
        return sum(_n(v, k) for k in v)
    return int(v or 0)


def _counts(items: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The nonzero integer counts of ``items``, largest first (then by name)."""
    pairs = [(k, int(v)) for k, v in items.items() if isinstance(v, int) and v]
    return sorted(pairs, key=lambda kv: (-kv[1], kv[0]))


def _listing(counts: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def listing(stats: Stats) -> str:
    """The drops of ``stats`` by reason, largest first ("duplicate 3, identical 1")."""
    return _listing(_counts(stats.dropped))


# Reasons a start URL fails, and what to check for each (the first that applies wins).
_CRAWL_HINTS = (
    ({"dns", "connection", "timeout"}, "check `start_urls` and the network"),
    ({"robots"}, "the site's robots.txt forbids the crawl (`crawl.obey_robots`)"),
    ({"offsite", "offsite_redirect"}, "check `start_urls`, `allowed_domains` and `aliases`"),
    ({"depth_limit", "page_limit"}, "raise `limits.max_depth` / `limits.max_pages`"),
    ({"non_html", "empty", "too_large"}, "`start_urls` must lead to HTML pages (`limits`)"),
)


def crawl(site: str, s: Stats) -> str:
    """0 pages fetched: the URLs' skip reasons and what to check for the commonest."""
    reasons = _counts(s.dropped)
    if not reasons:
        return f"0 pages fetched for site {site}: nothing was requested; check `start_urls`"
    top = reasons[0][0]
    hint = next((h for keys, h in _CRAWL_HINTS if top in keys), None)
    if hint is None:  # http_404, http_500, redirect_loop, ...
        hint = "check `start_urls` and that the site answers"
    return f"0 pages fetched for site {site}: {_listing(reasons)}; {hint}"


def pair(site: str, s: Stats) -> str:
    """0 page pairs: no English page, or why the English pages found no counterpart."""
    c = s.counts
    langs = sorted(c.get("pairs", {})) or ["the site's other languages"]
    wanted = " or ".join(langs)
    head = f"0 page pairs for site {site}"
    if not _n(c, "english_pages"):
        found = _listing(_counts(c.get("documents_by_lang", {}))) or "none"
        return (
            f"{head}: none of the {_n(c, 'pages_ok')} fetched pages is English (languages "
            f"found: {found}); check `languages`, `start_urls` and `pairing.rewrites`"
        )
    unexpected = ", ".join(sorted(c.get("unexpected_target_langs", {}))) or "another language"
    texts: dict[str, tuple[Callable[[int], str], str]] = {
        "target_wrong_language": (
            lambda n: (
                f"{_plural(n, 'English page')} point to pages detected as {unexpected}, "
                f"not {wanted}"
            ),
            "check `languages`",
        ),
        "no_evidence": (
            lambda n: (
                f"{_plural(n, 'English page')} carry no hreflang, toggle or rewrite "
                f"evidence of a {wanted} page"
            ),
            "check `pairing.evidence` and `pairing.rewrites`",
        ),
        "target_not_fetched": (
            lambda n: f"{_plural(n, 'English page')} point to pages the crawl did not fetch",
            "check `limits`, `allowed_domains` and `aliases`",
        ),
        "target_failed": (
            lambda n: f"{_plural(n, 'English page')} point to pages that failed to download",
            "see the crawl's skip counts in its log",
        ),
        "conflict": (
            lambda n: f"{_plural(n, 'English page')} lost their counterpart to another page",
            "check `pairing.one_to_one`",
        ),
        "untranslated": (
            lambda n: f"{_plural(n, 'English page')} point to pages whose text is not translated",
            "the site's other-language pages hold English text "
            "(`clean.untranslated_pages` left them out)",
        ),
    }
    reasons = [(r, n) for r, n in _counts(s.dropped) if r in texts]
    if not reasons:
        return f"{head}: {_n(c, 'english_pages')} English pages, no candidate; check `languages`"
    parts = [texts[r][0](n) for r, n in reasons]
    return f"{head}: {'; '.join(parts)}; {texts[reasons[0][0]][1]}"


_PARSE_HINTS = {
    "unequal_line_counts": "the two sides have unequal line counts and `parse.strict` is true",
    "empty_side": "no text is left on a side; check `main_selector` and `parse.min_words`",
    "missing_en_html": "the paired pages are missing from the crawl",
    "missing_other_html": "the paired pages are missing from the crawl",
    "parse_error": "the pages' HTML cannot be parsed",
}


def parse(site: str, s: Stats) -> str:
    """0 page pairs parsed: the drops by reason and the hint for the commonest."""
    reasons = _counts(s.dropped)
    top = reasons[0][0] if reasons else "empty_side"
    hint = _PARSE_HINTS.get(top, _PARSE_HINTS["empty_side"])
    listed = _listing(reasons) or "nothing counted"
    return f"0 page pairs parsed for site {site} (of {s.rows_in}): {listed}; {hint}"


def translate_is_empty(s: Stats) -> bool:
    """Rows pass through translation: it is empty when no line of any row got a translation."""
    c = s.counts
    if "lines_translated" in c:
        return not s.rows_out or bool(_n(c, "untranslated") and not _n(c, "lines_translated"))
    # stats written before ``lines_translated``: what the backend and the cache gave
    return not s.rows_out or bool(
        _n(c, "untranslated") and not _n(c, "translated") and not _n(c, "cache_hits")
    )


def translate(site: str, s: Stats) -> str:
    """No line translated: why (by reason) and where to look."""
    reasons = _counts(s.counts.get("untranslated_by_reason", {}))
    hint = (
        "check `translate.backend` and the site's `languages` (`parasim validate-config`)"
        if reasons and reasons[0][0] in ("unsupported_lang", "backend_unavailable")
        else "see the translate job's log"
    )
    return (
        f"0 of {_n(s.counts, 'lines')} lines translated for site {site}: "
        f"{_listing(reasons) or 'no line to translate'}; {hint}"
    )


#: The align stage's page-pair outcomes that pass sentence pairs on (in its ``counts``).
_ALIGN_KEPT = ("files_aligned", "files_reviewed", "files_realigned")


def align(site: str, s: Stats) -> str:
    """0 aligned pairs: what became of the page pairs (dropped ones and those that gave none)."""
    outcomes = _counts({**s.dropped, **{k[6:]: s.counts[k] for k in _ALIGN_KEPT if k in s.counts}})
    return (
        f"0 aligned pairs for site {site} from {_plural(s.rows_in, 'page pair')}: "
        f"{_listing(outcomes) or 'nothing counted'}; check `align.threshold` and "
        "`align.min_score`, or review the queue in `align.review_dir`"
    )


def clean(site: str, s: Stats) -> str:
    """0 positives kept: the drops by reason and the setting behind the commonest."""
    reasons = _counts(s.dropped)
    top = reasons[0][0] if reasons else ""
    if top.startswith("wrong_language"):
        hint = "check the site's `languages` and `clean.langid`"
    elif top in ("duplicate", "furniture"):
        hint = "check `clean.dedup` and `clean.drop_furniture`"
    elif top == "untranslated":
        hint = (
            "the site's other-language pages hold English text "
            "(`clean.untranslated_pages` measured them untranslated)"
        )
    elif top:
        hint = f"check `clean.rules.{top}`"
    else:
        hint = "see the clean job's log"
    return (
        f"0 positives kept for site {site} of {_plural(s.rows_in, 'aligned pair')}: "
        f"{_listing(reasons) or 'nothing counted'}; {hint}"
    )


def divergences(site: str, s: Stats) -> str:
    """0 divergence rows: the seeds skipped by reason."""
    skipped = _counts(s.dropped)
    hint = (
        "check `divergences.min_tokens` and `divergences.max_tokens`"
        if skipped and skipped[0][0] in ("too_short", "too_long")
        else "check `divergences.types` and the spaCy models (`parasim validate-config`)"
    )
    return (
        f"0 divergence rows for site {site} from {_plural(s.rows_in, 'positive')}: "
        f"{_listing(skipped) or 'no seed kept'}; {hint}"
    )


def mine(site: str, s: Stats) -> str:
    """0 mined divergences: the candidates the guards dropped, by reason."""
    dropped = _counts(s.dropped)
    n_low = _n(s.counts, "candidates_below_min_similarity")
    if s.rows_in < 2:
        hint = "a pool needs two positives or more"
    elif dropped:
        hint = f"every candidate left was dropped ({_listing(dropped)})"
    else:
        hint = f"{_plural(n_low, 'candidate')} below `mine.min_similarity`"
    return (
        f"0 mined divergences for site {site} from {_plural(s.rows_in, 'positive')}: {hint}; "
        "check `mine.min_similarity` and `mine.neighbours`"
    )


def scores(site: str, s: Stats) -> str:
    """0 rows to score: none of the tables the scores read has a row of the site."""
    return (
        f"0 rows to score for site {site}: none of the tables in `scores.inputs` has a row of "
        "this site's shards; check `scores.inputs` and the hard negatives of the site"
    )
