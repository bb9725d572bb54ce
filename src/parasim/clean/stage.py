"""The clean stage: aligned sentence pairs of a site -> the positives a researcher would keep.

Between the align stage and everything downstream (negatives, corpus, divergences), for all
shards of a site at once (:func:`clean_positives`), in four steps:

1. **hard rules** (:mod:`.rules`): identical and near-identical sides, no letters, URLs and
   e-mail addresses, code and markup, placeholder text, length ratio, repeated words, mojibake;
2. **language identification** (:mod:`.langid`, heliport): the English side must be English and
   the other side in its declared language; a line too short to identify is judged with its
   neighbours on the page, then by its page;
3. **the decision** (:mod:`.decision`): the flags of steps 1-2 and the page languages the pair
   stage measured (the pairs' ``*_page_lang`` columns) against the translation. On a page pair
   measured untranslated (``clean.untranslated_pages.mode: per_line``), a line that its own text
   does not place in the expected language is flagged ``untranslated``. A pair whose flags are
   all overrulable (``clean.decision.overrule``, and ``untranslated``) is kept when its
   translation says it is one (the ``overruled`` column lists the flags); any other flagged pair
   is dropped with its first flag, in the order rules, ``wrong_language_en``,
   ``wrong_language_other`` / ``untranslated``;
4. **deduplication**: pairs equal after :func:`.rules.normalize` on both sides are kept once, the
   first in (English URL, other URL, line index) order; the kept row says how often
   (``n_seen``) and on how many page pairs (``n_pages``) it was seen, and ``furniture`` flags a
   pair found on at least ``furniture_share`` of the site's page pairs (headers, footers, "Questions
   or comments?"); ``drop_furniture: true`` drops those too.

Nothing is lost: every dropped row goes to the site's ``dropped`` shards with its ``reason`` (the
rule, ``wrong_language_en`` / ``wrong_language_other``, ``untranslated``, ``duplicate`` with
``duplicate_of`` the kept row's id, or ``furniture``). Since a repeated pair is kept on one page
pair only, and the corpus splits by page pair, a pair seen on pages of both splits ends up in one
split.
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
from parasim.pair.stage import UntranslatedPagesSettings, is_untranslated

from . import decision, langid, rules

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
    decision: decision.DecisionSettings
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
    "other_en",
    "en_idx",
    "other_idx",
    "en_url",
    "other_url",
)


def _context(lines: Sequence[str | None], idx: Sequence[int], window: int) -> str:
    lo, hi = max(0, min(idx) - window), max(idx) + window + 1
    return langid.prose(" ".join((x or "").strip() for x in lines[lo:hi]))


def clean_positives(
    aligned: Sequence[pa.Table],
    translated: Sequence[pa.Table],
    settings: CleanSettings | Mapping[str, Any] | None = None,
    log: logging.Logger | None = None,
    pairs: Sequence[pa.Table] | None = None,
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
        pairs: the site's page pairs (:data:`parasim.io.PAIRS_SCHEMA`), for the page languages
            the pair stage measured (None, or pairs without them: no page is untranslated).

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

    untranslated_side = _untranslated_pages(pairs, s.untranslated_pages)
    stats["page_pairs_untranslated"] = sum(
        1 for pid in lines if untranslated_side.get(pid, (False, False)) != (False, False)
    )

    # 1. hard rules
    check = rules.make_checker(s.rules, s.placeholders)
    check.prepare(en_text + other_text)  # each distinct side once, with Arrow's kernels
    reason: list[str | None] = list(map(check, en_text, other_text))
    dec = s.decision
    over = set(dec.overrule) if dec.enabled else set()
    vouched: dict[int, bool] = {}
    templates: list = []  # the site's swap counts, made when first needed
    by_template: set[int] = set()  # vouched for by a translated template
    evidence: dict[int, decision.Evidence] = {}

    def single(i: int) -> bool:
        """Whether pair ``i`` is one line on each side."""
        return len(cols["en_idx"][i]) == 1 and len(cols["other_idx"][i]) == 1

    def square(i: int) -> bool:
        """Whether pair ``i`` has as many lines on each side (1:1, 2:2…)."""
        return len(cols["en_idx"][i]) == len(cols["other_idx"][i])

    def evidence_of(i: int) -> decision.Evidence:
        ev = evidence.get(i)
        if ev is None:
            ev = evidence[i] = decision.similarities(en_text[i], other_text[i], cols["other_en"][i])
        return ev

    def vouches(i: int) -> bool:
        """Whether pair ``i``'s translation says it is one, or it is a translated template
        (:mod:`.decision`; 1:1 links only with ``one_to_one_only``, templates always)."""
        v = vouched.get(i)
        if v is None:
            one = single(i)
            ev = evidence_of(i) if one or not dec.one_to_one_only else None
            v = ev is not None and decision.translated(ev, dec)
            if not v and one and dec.min_template_lines > 0:
                if not templates:
                    templates.append(decision.template_counts(en_text, other_text))
                v = decision.template_vouches(
                    en_text[i], other_text[i], cols["other_en"][i], templates[0], dec, ev
                )
                stats["vouched_by_template"] += v
                if v:
                    by_template.add(i)
            vouched[i] = v
        return v

    # the rules that flag a pair the decision may keep: every rule it fails is overrulable and
    # its translation vouches for it (else it keeps its first rule, and skips the language check)
    flags: dict[int, list[str]] = {}
    by_markup: set[int] = set()  # kept over surface flags by the markup evidence alone
    markup_over = decision.MARKUP_FLAGS & over if dec.min_markup_skeleton > 0 else frozenset()
    if over:
        for i, r in enumerate(reason):
            if r not in over:
                continue
            if vouches(i):
                failed = check.reasons(en_text[i], other_text[i])
                if set(failed) <= over:
                    flags[i], reason[i] = failed, None
            elif r in markup_over and square(i):
                failed = check.reasons(en_text[i], other_text[i])
                if set(failed) <= markup_over and decision.markup_vouches(
                    en_text[i], other_text[i], evidence_of(i), dec
                ):
                    flags[i], reason[i] = failed, None
                    by_markup.add(i)

    # 2. language identification, per side (the other side per declared language)
    verdict: dict[str, list[str | None]] = {"en": [None] * n, "other": [None] * n}
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

            texts = [langid.prose(texts_all[i]) for i in members]
            opposite = lang if side == "en" else "en"
            verdicts = lid.judge(
                texts, "en" if side == "en" else lang, context, opposite, check.count_letters
            )
            for i, v in zip(members, verdicts, strict=True):
                stats[f"langid_{side}_{v}"] += 1
                verdict[side][i] = v

    # 3. the decision: the flags of each pair against its translation and its pages
    overruled: list[list[str] | None] = [None] * n
    for i in range(n):
        if reason[i] is not None:
            continue
        bad = untranslated_side.get(cols["pair_id"][i], (False, False))
        cands = list(flags.get(i, ()))
        strong_wrong = False  # heliport puts the line itself in the wrong language
        for side, page_bad in zip(("en", "other"), bad, strict=True):
            v = verdict[side][i]
            wrong = v in (langid.WRONG_LINE, langid.WRONG_NEIGHBOURS)
            if page_bad and v not in _CONFIRMED:
                # an untranslated page's line that its own text does not place: untranslated
                cands.append(UNTRANSLATED)
                strong_wrong |= v == langid.WRONG_LINE
            elif wrong:
                cands.append(f"wrong_language_{side}")
        if not cands:
            continue
        cands = list(dict.fromkeys(cands))
        keep = (
            dec.enabled
            and all(c in over or c == UNTRANSLATED for c in cands)
            and not (dec.page_check and strong_wrong and i not in by_template)
            and (vouches(i) or (i in by_markup and set(cands) <= markup_over))
        )
        if keep:
            stats["vouched_by_markup"] += i in by_markup
            overruled[i] = cands
            for c in cands:
                stats[f"overruled_{c}"] += 1
        else:
            reason[i] = cands[0]

    # 4. deduplication (and page furniture)
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
                    "overruled": [overruled[idx[j]] for j in k],
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
    stats["dropped"] = stats["aligned_in"] - stats["kept"]
    seconds = time.perf_counter() - t0
    stats["seconds"] = round(seconds, 3)
    out = dict(sorted(stats.items()))
    out["pairs_per_s"] = round(n / seconds, 1) if seconds > 0 else None
    log.info("clean: %s", out)
    return kept, dropped, out


#: Reason of a line of a page measured untranslated that its own text does not place.
UNTRANSLATED = "untranslated"
#: Language verdicts that place a line by its own text (:mod:`.langid`).
_CONFIRMED = (langid.OK_LINE, langid.OK_CLOSE, langid.OK_SHORT)


def _untranslated_pages(
    pairs: Sequence[pa.Table] | None, s: UntranslatedPagesSettings
) -> dict[str, tuple[bool, bool]]:
    """pair_id -> whether (the English page, the other page) was measured in the wrong language
    by the pair stage (:func:`parasim.pair.stage.is_untranslated`)."""
    out: dict[str, tuple[bool, bool]] = {}
    if not pairs or not s.enabled:
        return out
    need = ["pair_id", "other_lang", "en_page_lang", "en_page_share"]
    need += ["other_page_lang", "other_page_share"]
    for t in pairs:
        if not set(need) <= set(t.column_names):
            continue
        d = t.select(need).to_pydict()
        for pid, lg, el, es, ol, os_ in zip(*(d[c] for c in need), strict=True):
            out[pid] = (
                is_untranslated(el, es, lg, s.min_share),
                is_untranslated(ol, os_, "en", s.min_share),
            )
    return out


def _with_columns(table: pa.Table, extra: dict[str, list], schema: pa.Schema) -> pa.Table:
    """``table`` with the ``extra`` columns appended, as a table of ``schema``."""
    arrays = list(table.columns) + [
        pa.array(values, type=schema.field(name).type) for name, values in extra.items()
    ]
    return pa.Table.from_arrays(arrays, schema=schema)
