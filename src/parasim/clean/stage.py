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
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from parasim import io
from parasim.config import Settings
from parasim.pair.stage import UntranslatedPagesSettings

from . import langid, rules

__all__ = ["CleanSettings", "LangidSettings", "clean_positives"]


@dataclass(frozen=True)
class LangidSettings(Settings, section="clean.langid"):
    """The ``clean.langid`` config section: line-level language identification."""

    enabled: bool
    min_letters: int
    window: int


@dataclass(frozen=True)
class CleanSettings(Settings, section="clean"):
    """The ``clean`` config section (what each key means: the schema). ``untranslated_pages`` is
    the pair stage's (:class:`parasim.pair.stage.UntranslatedPagesSettings`)."""

    rules: rules.RulesSettings
    placeholders: tuple[str, ...]
    langid: LangidSettings
    dedup: bool
    furniture_share: float
    furniture_min_pages: int
    drop_furniture: bool
    untranslated_pages: UntranslatedPagesSettings


#: The aligned columns the steps read (the rest goes from input to output as Arrow columns).
_READ = (
    "id",
    "pair_id",
    "other_lang",
    "en_text",
    "other_text",
    "en_idx",
    "other_idx",
    "en_url",
    "other_url",
)


def _context(lines: Sequence[str | None], idx: Sequence[int], window: int) -> str:
    lo, hi = max(0, min(idx) - window), max(idx) + window + 1
    return " ".join((x or "").strip() for x in lines[lo:hi])


def clean_positives(
    aligned: Sequence[pa.Table],
    translated: Sequence[pa.Table],
    settings: CleanSettings | Mapping[str, Any] | None = None,
    log: logging.Logger | None = None,
) -> tuple[list[pa.Table], list[pa.Table], dict]:
    """Clean the aligned pairs of one site.

    Args:
        aligned: the align stage's shards of the site (:data:`parasim.io.ALIGNED_SCHEMA`), in
            shard order.
        translated: the site's translated shards (the page lines, for the neighbours of short
            lines and the number of page pairs).
        settings: the ``clean`` settings (a mapping: the section as in the config, keys left out
            take the schema's defaults).
        log: logger (module logger when None).

    Returns:
        per shard the kept pairs (:data:`parasim.io.POSITIVES_SCHEMA`) and the dropped ones
        (:data:`parasim.io.DROPPED_SCHEMA`), and a stats dict of counts.
    """
    log = log or logging.getLogger(__name__)
    s = CleanSettings.from_config(settings)
    t0 = time.perf_counter()
    stats: Counter = Counter()
    # Only the columns the steps read become Python lists; the output rows are taken from the
    # Arrow tables (one column per step, not one dict per row).
    cols: dict[str, list] = {c: [] for c in _READ}
    shard_of: list[int] = []
    for k, table in enumerate(aligned):
        d = table.select(list(_READ)).to_pydict()
        for c in _READ:
            cols[c].extend(d[c])
        shard_of.extend([k] * table.num_rows)
    n = len(shard_of)
    en_text, other_text, other_lang = cols["en_text"], cols["other_text"], cols["other_lang"]
    stats["aligned_in"] = n
    lines: dict[str, tuple[list, list]] = {}
    for table in translated:
        d = table.select(["pair_id", "en_lines", "other_lines"]).to_pydict()
        for pid, en, other in zip(d["pair_id"], d["en_lines"], d["other_lines"], strict=True):
            lines[pid] = (en or [], other or [])
    stats["page_pairs"] = len(lines)

    # 1. hard rules
    check = rules.make_checker(s.rules, s.placeholders)
    check.prepare(en_text + other_text)  # each distinct side once, with Arrow's kernels
    reason: list[str | None] = list(map(check, en_text, other_text))

    # 2. language identification, per side (the other side per declared language)
    if s.langid.enabled:
        lid = langid.LanguageId(s.langid.min_letters, s.langid.window)
        todo = [i for i, x in enumerate(reason) if x is None]
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for i in todo:  # grouped by (side, language): one expected and one opposite each
            groups[("en", other_lang[i])].append(i)
            groups[("other", other_lang[i])].append(i)
        for (side, lang), members in sorted(groups.items()):
            texts_all, idx_all, pos = (
                (en_text, cols["en_idx"], 0) if side == "en" else (other_text, cols["other_idx"], 1)
            )

            def context(j: int, members=members, idx_all=idx_all, pos=pos) -> str | None:
                i = members[j]
                page = lines.get(cols["pair_id"][i])
                if page is None or not idx_all[i]:
                    return None
                return _context(page[pos], idx_all[i], lid.window)

            texts = [texts_all[i] for i in members]
            opposite = lang if side == "en" else "en"
            verdicts = lid.judge(
                texts, "en" if side == "en" else lang, context, opposite, check.count_letters
            )
            for i, v in zip(members, verdicts, strict=True):
                stats[f"langid_{side}_{v}"] += 1
                if v in (langid.WRONG_LINE, langid.WRONG_NEIGHBOURS) and reason[i] is None:
                    reason[i] = f"wrong_language_{side}"

    # 3. deduplication (and page furniture)
    duplicate_of: list[str | None] = [None] * n
    n_seen = [1] * n
    n_pages = [1] * n
    furniture = [False] * n
    keep = [i for i, x in enumerate(reason) if x is None]
    keep.sort(
        key=lambda i: (
            cols["en_url"][i],
            cols["other_url"][i],
            cols["en_idx"][i],
            cols["other_idx"][i],
            cols["id"][i],
        )
    )
    if s.dedup:
        first: dict[tuple[str, str], int] = {}
        pages: dict[int, set[str]] = defaultdict(set)
        known = check.dedup_keys([en_text[i] for i in keep] + [other_text[i] for i in keep])

        def norm(text: str) -> str:
            k = known.get(text)
            return rules.normalize(text) if k is None else k

        for i in keep:
            key = (norm(en_text[i]), norm(other_text[i]))
            j = first.setdefault(key, i)
            pages[j].add(cols["pair_id"][i])
            if j != i:
                reason[i], duplicate_of[i] = "duplicate", cols["id"][j]
                n_seen[j] += 1
        bound = max(s.furniture_min_pages, s.furniture_share * len(lines))
        for j, pids in pages.items():
            n_pages[j] = len(pids)
            if len(pids) >= bound:
                furniture[j] = True
                stats["furniture_pairs"] += 1
                if s.drop_furniture:
                    reason[j] = "furniture"

    kept: list[pa.Table] = []
    dropped: list[pa.Table] = []
    start = 0
    for table in aligned:
        idx = range(start, start + table.num_rows)
        start += table.num_rows
        base = table.select([f.name for f in io.ALIGNED_SCHEMA]).cast(io.ALIGNED_SCHEMA)
        k = [j for j, i in enumerate(idx) if reason[i] is None]
        d = [j for j, i in enumerate(idx) if reason[i] is not None]
        kept.append(
            _with_columns(
                base.take(pa.array(k, type=pa.int64())),
                {
                    "n_seen": [n_seen[idx[j]] for j in k],
                    "n_pages": [n_pages[idx[j]] for j in k],
                    "furniture": [furniture[idx[j]] for j in k],
                },
                io.POSITIVES_SCHEMA,
            )
        )
        dropped.append(
            _with_columns(
                base.take(pa.array(d, type=pa.int64())),
                {
                    "reason": [reason[idx[j]] for j in d],
                    "duplicate_of": [duplicate_of[idx[j]] for j in d],
                },
                io.DROPPED_SCHEMA,
            )
        )
    stats.update(Counter(f"dropped_{x}" for x in reason if x is not None))
    stats["kept"] = sum(t.num_rows for t in kept)
    stats["kept"] = sum(len(x) for x in kept)
    stats["dropped"] = stats["aligned_in"] - stats["kept"]
    seconds = time.perf_counter() - t0
    stats["seconds"] = round(seconds, 3)
    out = dict(sorted(stats.items()))
    out["pairs_per_s"] = round(n / seconds, 1) if seconds > 0 else None
    log.info("clean: %s", out)
    return kept, dropped, out


def _with_columns(table: pa.Table, extra: dict[str, list], schema: pa.Schema) -> pa.Table:
    """``table`` with the ``extra`` columns appended, as a table of ``schema``."""
    arrays = list(table.columns) + [
        pa.array(values, type=schema.field(name).type) for name, values in extra.items()
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
