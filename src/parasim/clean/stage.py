"""The clean stage: aligned sentence pairs of a site -> the positives a researcher would keep.

Between the align stage and everything downstream (negatives, corpus, divergences), for all
shards of a site at once (:func:`clean_positives`), in three steps:

1. **hard rules** (:mod:`.rules`): identical and near-identical sides, no letters, URLs and
   e-mail addresses, code and markup, placeholder text, length ratio, repeated words, mojibake;
2. **language identification** (:mod:`.langid`, heliport): the English side must be English and
   the other side in its declared language; a line too short to identify is judged with its
   neighbours on the page, then by its page;
3. **deduplication**: pairs equal after :func:`.rules.normalize` on both sides are kept once, the
   first in (English URL, other URL, line index) order; the kept row says how often
   (``n_seen``) and on how many page pairs (``n_pages``) it was seen, and ``furniture`` flags a
   pair found on at least ``furniture_share`` of the site's page pairs (headers, footers, "Questions
   or comments?"); ``drop_furniture: true`` drops those too.

Nothing is lost: every dropped row goes to the site's ``dropped`` shards with its ``reason`` (the
rule, ``wrong_language_en`` / ``wrong_language_other``, ``duplicate`` with ``duplicate_of`` the
kept row's id, or ``furniture``). Since a repeated pair is kept on one page pair only, and the
corpus splits by page pair, a pair seen on pages of both splits ends up in one split.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa

from parasim import io

from . import langid, rules

__all__ = ["DEFAULTS", "clean_positives", "settings"]

#: The ``clean:`` config section and its defaults (mirrored in the config schema).
DEFAULTS: dict[str, Any] = {
    "rules": dict(rules.DEFAULT_RULES),
    "placeholders": list(rules.DEFAULT_PLACEHOLDERS),
    "langid": {"enabled": True, "min_letters": 20, "window": 2},
    "dedup": True,
    "furniture_share": 0.1,  # flag pairs seen on at least this share of the site's page pairs
    "furniture_min_pages": 3,  # ... and on at least this many page pairs
    "drop_furniture": False,
    "untranslated_pages": {"enabled": True, "min_share": 0.65},  # the pair stage's page check
}


def settings(cfg: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``clean`` section with defaults filled in (nested sections merged)."""
    cfg = dict(cfg or {})
    out = {**DEFAULTS, **cfg}
    for key in ("rules", "langid", "untranslated_pages"):
        out[key] = {**DEFAULTS[key], **(cfg.get(key) or {})}
    return out


def _context(lines: Sequence[str | None], idx: Sequence[int], window: int) -> str:
    lo, hi = max(0, min(idx) - window), max(idx) + window + 1
    return " ".join((x or "").strip() for x in lines[lo:hi])


def clean_positives(
    aligned: Sequence[pa.Table],
    translated: Sequence[pa.Table],
    cfg: Mapping[str, Any] | None = None,
    log: logging.Logger | None = None,
) -> tuple[list[pa.Table], list[pa.Table], dict]:
    """Clean the aligned pairs of one site.

    Args:
        aligned: the align stage's shards of the site (:data:`parasim.io.ALIGNED_SCHEMA`), in
            shard order.
        translated: the site's translated shards (the page lines, for the neighbours of short
            lines and the number of page pairs).
        cfg: the ``clean`` config section (see :data:`DEFAULTS`).
        log: logger (module logger when None).

    Returns:
        per shard the kept pairs (:data:`parasim.io.POSITIVES_SCHEMA`) and the dropped ones
        (:data:`parasim.io.DROPPED_SCHEMA`), and a stats dict of counts.
    """
    log = log or logging.getLogger(__name__)
    s = settings(cfg)
    t0 = time.perf_counter()
    stats: Counter = Counter()
    rows: list[dict] = []
    shard_of: list[int] = []
    for k, table in enumerate(aligned):
        part = table.to_pylist()
        rows.extend(part)
        shard_of.extend([k] * len(part))
    stats["aligned_in"] = len(rows)
    lines: dict[str, tuple[list, list]] = {}
    for table in translated:
        d = table.select(["pair_id", "en_lines", "other_lines"]).to_pydict()
        for pid, en, other in zip(d["pair_id"], d["en_lines"], d["other_lines"], strict=True):
            lines[pid] = (en or [], other or [])
    stats["page_pairs"] = len(lines)

    # 1. hard rules
    reason: list[str | None] = [None] * len(rows)
    check = rules.make_checker(s["rules"], s["placeholders"])
    for i, r in enumerate(rows):
        reason[i] = check(r["en_text"], r["other_text"])

    # 2. language identification, per side (the other side per declared language)
    if s["langid"]["enabled"]:
        lid = langid.LanguageId(s["langid"]["min_letters"], s["langid"]["window"])
        todo = [i for i, x in enumerate(reason) if x is None]
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i in todo:  # grouped by (side, language): one expected and one opposite each
            groups[("en", rows[i]["other_lang"])].append(i)
            groups[("other", rows[i]["other_lang"])].append(i)
        for (side, lang), members in sorted(groups.items()):
            text_key, idx_key, pos = (
                ("en_text", "en_idx", 0) if side == "en" else ("other_text", "other_idx", 1)
            )

            def context(j: int, members=members, idx_key=idx_key, pos=pos) -> str | None:
                r = rows[members[j]]
                page = lines.get(r["pair_id"])
                if page is None or not r[idx_key]:
                    return None
                return _context(page[pos], r[idx_key], lid.window)

            texts = [rows[i][text_key] for i in members]
            opposite = rows[members[0]]["other_lang"] if side == "en" else "en"
            verdicts = lid.judge(texts, "en" if side == "en" else lang, context, opposite)
            for i, v in zip(members, verdicts, strict=True):
                stats[f"langid_{side}_{v}"] += 1
                if v in (langid.WRONG_LINE, langid.WRONG_NEIGHBOURS) and reason[i] is None:
                    reason[i] = f"wrong_language_{side}"

    # 3. deduplication (and page furniture)
    duplicate_of: list[str | None] = [None] * len(rows)
    n_seen = [1] * len(rows)
    n_pages = [1] * len(rows)
    furniture = [False] * len(rows)
    keep = [i for i, x in enumerate(reason) if x is None]
    keep.sort(
        key=lambda i: (
            rows[i]["en_url"],
            rows[i]["other_url"],
            rows[i]["en_idx"],
            rows[i]["other_idx"],
            rows[i]["id"],
        )
    )
    if s["dedup"]:
        first: dict[tuple[str, str], int] = {}
        pages: dict[int, set[str]] = defaultdict(set)
        for i in keep:
            key = (rules.normalize(rows[i]["en_text"]), rules.normalize(rows[i]["other_text"]))
            j = first.setdefault(key, i)
            pages[j].add(rows[i]["pair_id"])
            if j != i:
                reason[i], duplicate_of[i] = "duplicate", rows[j]["id"]
                n_seen[j] += 1
        bound = max(s["furniture_min_pages"], s["furniture_share"] * len(lines))
        for j, pids in pages.items():
            n_pages[j] = len(pids)
            if len(pids) >= bound:
                furniture[j] = True
                stats["furniture_pairs"] += 1
                if s["drop_furniture"]:
                    reason[j] = "furniture"

    kept: list[list[dict]] = [[] for _ in aligned]
    dropped: list[list[dict]] = [[] for _ in aligned]
    for i, r in enumerate(rows):
        k = shard_of[i]
        if reason[i] is None:
            kept[k].append(
                {**r, "n_seen": n_seen[i], "n_pages": n_pages[i], "furniture": furniture[i]}
            )
        else:
            stats[f"dropped_{reason[i]}"] += 1
            dropped[k].append({**r, "reason": reason[i], "duplicate_of": duplicate_of[i]})
    stats["kept"] = sum(len(x) for x in kept)
    stats["dropped"] = stats["aligned_in"] - stats["kept"]
    seconds = time.perf_counter() - t0
    stats["seconds"] = round(seconds, 3)
    out = dict(sorted(stats.items()))
    out["pairs_per_s"] = round(len(rows) / seconds, 1) if seconds > 0 else None
    log.info("clean: %s", out)
    return (
        [io.rows_to_table(x, io.POSITIVES_SCHEMA) for x in kept],
        [io.rows_to_table(x, io.DROPPED_SCHEMA) for x in dropped],
        out,
    )
