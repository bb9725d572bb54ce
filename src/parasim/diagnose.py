"""Why a site came out empty: one sentence naming the stage, the counts by reason and the fix.

A site's ``.done`` target (``parasim summarize``, ``parasim divergences-card``) fails when its
stage has no rows. It reads the stats of that stage and of every stage before it, and
:func:`explain_empty` explains the earliest stage of the funnel that came out empty, e.g.
"0 page pairs for site X: 15 English pages point to pages detected as fr, not de; check
`languages`". Shared by the report and the divergences commands (below every stage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: The per-site stages in funnel order, as the ``stage`` field of their stats names them (the
#: align stage writes "positives": its aligned sentence pairs, which "clean" turns into positives).
FUNNEL = ("crawl", "pairs", "lines", "translate", "positives", "clean", "divergences", "scores")
#: Names the ``.done`` targets use for a stage, where they differ from :data:`FUNNEL`.
ALIASES = {"translated": "translate"}
#: The last stage a ``.done`` target summarizes, where it is not the stage itself
#: (``positives.done`` covers align and clean).
LAST = {"positives": "clean"}

Stats = Mapping[str, Any]


def _n(stats: Stats, key: str) -> int:
    v = stats.get(key, 0)
    if isinstance(v, Mapping):
        return sum(x for x in v.values() if isinstance(x, (int, float)))
    return int(v or 0)


def _counts(items: Mapping[str, Any]) -> list[tuple[str, int]]:
    """The nonzero integer counts of ``items``, largest first (then by name)."""
    pairs = [(k, int(v)) for k, v in items.items() if isinstance(v, (int, float)) and v]
    return sorted(pairs, key=lambda kv: (-kv[1], kv[0]))


def _listing(counts: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


# Reasons a start URL fails, and what to check for each (the first that applies wins).
_CRAWL_HINTS = (
    ({"dns", "connection", "timeout"}, "check `start_urls` and the network"),
    ({"robots"}, "the site's robots.txt forbids the crawl (`crawl.obey_robots`)"),
    ({"offsite", "offsite_redirect"}, "check `start_urls`, `allowed_domains` and `aliases`"),
    ({"depth_limit", "page_limit"}, "raise `limits.max_depth` / `limits.max_pages`"),
    ({"non_html", "empty", "too_large"}, "`start_urls` must lead to HTML pages (`limits`)"),
)


def _crawl(site: str, s: Stats) -> str:
    reasons = _counts(s.get("pages_skipped_by_reason", {}))
    if not reasons:
        return f"0 pages fetched for site {site}: nothing was requested; check `start_urls`"
    top = reasons[0][0]
    hint = next((h for keys, h in _CRAWL_HINTS if top in keys), None)
    if hint is None:  # http_404, http_500, redirect_loop, ...
        hint = "check `start_urls` and that the site answers"
    return f"0 pages fetched for site {site}: {_listing(reasons)}; {hint}"


def _pairs(site: str, s: Stats) -> str:
    langs = sorted(s.get("pairs", {})) or ["the site's other languages"]
    wanted = " or ".join(langs)
    head = f"0 page pairs for site {site}"
    if not _n(s, "english_pages"):
        found = _listing(_counts(s.get("documents_by_lang", {}))) or "none"
        return (
            f"{head}: none of the {_n(s, 'pages_ok')} fetched pages is English (languages "
            f"found: {found}); check `languages`, `start_urls` and `pairing.rewrites`"
        )
    unexpected = ", ".join(sorted(s.get("unexpected_target_langs", {}))) or "another language"
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
    reasons = [(r, n) for r, n in _counts(s.get("unpaired_en", {})) if r in texts]
    if not reasons:
        return f"{head}: {_n(s, 'english_pages')} English pages, no candidate; check `languages`"
    parts = [texts[r][0](n) for r, n in reasons]
    return f"{head}: {'; '.join(parts)}; {texts[reasons[0][0]][1]}"


def _lines(site: str, s: Stats) -> str:
    n_in = _n(s, "pairs_in")
    reasons = _counts(s.get("skipped", {})) + _counts(
        {k: s.get(k, 0) for k in ("dropped_unequal", "dropped_empty")}
    )
    reasons.sort(key=lambda kv: (-kv[1], kv[0]))
    hints = {
        "dropped_unequal": "the two sides have unequal line counts and `parse.strict` is true",
        "dropped_empty": "no text is left on a side; check `main_selector` and `parse.min_words`",
        "missing_en_html": "the paired pages are missing from the crawl",
        "missing_other_html": "the paired pages are missing from the crawl",
        "parse_error": "the pages' HTML cannot be parsed",
    }
    top = reasons[0][0] if reasons else "dropped_empty"
    listing = _listing(reasons) or "nothing counted"
    hint = hints.get(top, hints["dropped_empty"])
    return f"0 page pairs parsed for site {site} (of {n_in}): {listing}; {hint}"


def _translate(site: str, s: Stats) -> str:
    reasons = _counts(s.get("untranslated_by_reason", {}))
    hint = (
        "check `translate.backend` and the site's `languages` (`parasim validate-config`)"
        if reasons and reasons[0][0] in ("unsupported_lang", "backend_unavailable")
        else "see the translate job's log"
    )
    return (
        f"0 of {_n(s, 'lines')} lines translated for site {site}: "
        f"{_listing(reasons) or 'no line to translate'}; {hint}"
    )


def _positives(site: str, s: Stats) -> str:
    outcomes = _counts(
        {k[6:]: v for k, v in s.items() if k.startswith("files_") and k != "files_in"}
    )
    return (
        f"0 aligned pairs for site {site} from {_plural(_n(s, 'files_in'), 'page pair')}: "
        f"{_listing(outcomes) or 'nothing counted'}; check `align.threshold` and "
        "`align.min_score`, or review the queue in `align.review_dir`"
    )


def _clean(site: str, s: Stats) -> str:
    reasons = _counts({k[8:]: v for k, v in s.items() if k.startswith("dropped_")})
    top = reasons[0][0] if reasons else ""
    if top.startswith("wrong_language"):
        hint = "check the site's `languages` and `clean.langid`"
    elif top in ("duplicate", "furniture"):
        hint = "check `clean.dedup` and `clean.drop_furniture`"
    elif top:
        hint = f"check `clean.rules.{top}`"
    else:
        hint = "see the clean job's log"
    return (
        f"0 positives kept for site {site} of {_plural(_n(s, 'aligned_in'), 'aligned pair')}: "
        f"{_listing(reasons) or 'nothing counted'}; {hint}"
    )


def _divergences(site: str, s: Stats) -> str:
    skipped = _counts(s.get("seed_skipped", {}))
    hint = (
        "check `divergences.min_tokens` and `divergences.max_tokens`"
        if skipped and skipped[0][0] in ("too_short", "too_long")
        else "check `divergences.types` and the spaCy models (`parasim validate-config`)"
    )
    return (
        f"0 divergence rows for site {site} from {_plural(_n(s, 'n_positives'), 'positive')}: "
        f"{_listing(skipped) or 'no seed kept'}; {hint}"
    )


def _scores(site: str, s: Stats) -> str:
    return (
        f"0 rows to score for site {site}: none of the tables in `scores.inputs` has a row of "
        "this site's shards; check `scores.inputs` and the hard negatives of the site"
    )


#: Per stage: whether its stats say it came out empty, and the sentence that explains it.
_EMPTY: dict[str, tuple[Callable[[Stats], bool], Callable[[str, Stats], str]]] = {
    "crawl": (lambda s: not _n(s, "pages_ok"), _crawl),
    "pairs": (lambda s: not _n(s, "pairs"), _pairs),
    "lines": (lambda s: not _n(s, "pairs_out"), _lines),
    # Rows pass through translation; it is empty when no line of any row got a translation.
    "translate": (
        lambda s: (
            not _n(s, "rows")
            or bool(_n(s, "untranslated") and not _n(s, "translated") and not _n(s, "cache_hits"))
        ),
        _translate,
    ),
    "positives": (lambda s: not _n(s, "positives"), _positives),
    "clean": (lambda s: not _n(s, "kept"), _clean),
    "divergences": (lambda s: not _n(s, "n_rows"), _divergences),
    "scores": (lambda s: not _n(s, "n_rows"), _scores),
}


#: The count of what each stage received from the one before it.
_INPUT = {
    "lines": "pairs_in",
    "translate": "rows",
    "positives": "files_in",
    "clean": "aligned_in",
    "divergences": "n_positives",
}

_PREVIOUS = dict(zip(FUNNEL[1:], FUNNEL, strict=False))


def group_by_stage(items: Sequence[Stats]) -> dict[str, dict[str, Any]]:
    """Stats files (one dict each) summed per their ``stage`` field (shards add up)."""
    from parasim.stagecli import sum_counts

    groups: dict[str, list[Stats]] = {}
    for item in items:
        groups.setdefault(ALIASES.get(item.get("stage", ""), item.get("stage", "")), []).append(
            item
        )
    return {stage: sum_counts(group) for stage, group in groups.items()}


def explain_empty(site: str, stage: str, by_stage: Mapping[str, Stats]) -> str:
    """One sentence on why ``stage`` of ``site`` has no rows.

    Args:
        site: the site's name.
        stage: the empty stage (a :data:`FUNNEL` name or an :data:`ALIASES` key).
        by_stage: summed stats per stage (``stage`` field of each stats file), this stage and
            the ones before it; stages without stats are skipped.

    Returns:
        The explanation of the earliest stage up to ``stage`` whose stats say it is empty; a
        generic sentence naming ``stage`` when none does.
    """
    stage = ALIASES.get(stage, stage)
    last = LAST.get(stage, stage)
    upto = FUNNEL[: FUNNEL.index(last) + 1] if last in FUNNEL else (stage,)
    for name in upto:
        if name in by_stage and name in _EMPTY:
            is_empty, sentence = _EMPTY[name]
            if not is_empty(by_stage[name]):
                continue
            if name in _INPUT and not _n(by_stage[name], _INPUT[name]):
                return (
                    f"0 rows from stage {name} for site {site}: the {_PREVIOUS[name]} stage gave "
                    "it nothing; see that stage's log and stats"
                )
            return sentence(site, by_stage[name])
    counts = _listing(_counts(by_stage.get(stage, {}))) or "nothing counted"
    return f"0 rows from stage {stage} for site {site}: {counts}; see the stage's log"


def require_rows(
    site: str,
    stage: str,
    rows: int,
    own: Sequence[Stats],
    upstream: Sequence[Stats] = (),
    allow_empty: bool = False,
) -> None:
    """Raise a one-sentence :class:`~parasim.stagecli.UsageError` when ``stage`` has no rows.

    Args:
        site: the site's name.
        stage: the stage being summarized.
        rows: its rows, summed over shards.
        own: the stage's stats files (one dict per shard; a ``stage`` field of their own, as
            the clean stats' in ``positives.done``, is kept).
        upstream: the stats files of the stages before it (their ``stage`` field says which).
        allow_empty: the config's ``allow_empty``: zero rows is then not an error.
    """
    from parasim.stagecli import UsageError

    if rows or allow_empty:
        return
    by_stage = group_by_stage([*upstream, *({"stage": stage, **s} for s in own)])
    raise UsageError(
        f"{explain_empty(site, stage, by_stage)} (or set `allow_empty: true` if an empty "
        "result is wanted)"
    )
