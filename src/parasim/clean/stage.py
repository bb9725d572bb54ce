"""The clean stage: aligned sentence pairs of a site -> the positives a researcher would keep.

Between the align stage and everything downstream (negatives, corpus, divergences), for all
shards of a site at once (:func:`clean_positives`), in four steps, a function each on the site's
pairs (:class:`Site`, read by :func:`read_site`; :func:`split_shards` writes them out):

1. **hard rules** (:func:`apply_rules`, :mod:`.rules`): identical and near-identical sides, no
   letters, URLs and e-mail addresses, code and markup, placeholder text, length ratio, repeated
   words, mojibake;
2. **language identification** (:func:`identify_languages`, :mod:`.langid`, heliport): the
   English side must be English and the other side in its declared language; a line too short
   to identify is judged with its neighbours on the page, then by its page;
3. **the decision** (:func:`decide`, :mod:`.decision`): the flags of steps 1-2 and the page
   languages the pair stage measured (the pairs' ``*_page_lang`` columns) against the
   translation. On a page pair measured untranslated (``clean.untranslated_pages.mode:
   per_line``), a line that its own text does not place in the expected language is flagged
   ``untranslated``. A pair whose flags are all overrulable (``clean.decision.overrule``, and
   ``untranslated``) is kept when its translation says it is one (the ``overruled`` column lists
   the flags); any other flagged pair is dropped with its first flag, in the order rules,
   ``wrong_language_en``, ``wrong_language_other`` / ``untranslated``;
4. **deduplication** (:func:`deduplicate`): pairs equal after :func:`.rules.normalize` on both
   sides are kept once, the first in (English URL, other URL, line index) order; the kept row
   says how often (``n_seen``) and on how many page pairs (``n_pages``) it was seen, and
   ``furniture`` flags a pair found on at least ``furniture_share`` of the site's page pairs
   (headers, footers, "Questions or comments?"); ``drop_furniture: true`` drops those too.

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
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from parasim import explain, io
from parasim.config import Settings
from parasim.pair.stage import UntranslatedPagesSettings, is_untranslated
from parasim.spec import Stage
from parasim.stats import Recorder

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


@dataclass
class Site:
    """The aligned pairs of one site on their way through the steps (one entry per pair, in
    shard order), and what the steps decided about them."""

    s: CleanSettings
    rec: Recorder
    cols: dict[str, list]  # the ``_READ`` columns
    lines: dict[str, tuple[list, list]]  # pair_id -> the page pair's (English, other) lines
    untranslated_side: dict[str, tuple[bool, bool]]  # see _untranslated_pages
    check: rules.Checker
    reason: list[str | None] = field(default_factory=list)  # None: kept (so far)
    over: set[str] = field(default_factory=set)  # the flags the decision may overrule
    vouched: dict[int, bool] = field(default_factory=dict)
    templates: list = field(default_factory=list)  # the site's swap counts, made when needed
    by_template: set[int] = field(default_factory=set)  # vouched for by a translated template
    evidence: dict[int, decision.Evidence] = field(default_factory=dict)
    flags: dict[int, list[str]] = field(default_factory=dict)  # overrulable rules failed
    by_markup: set[int] = field(default_factory=set)  # kept over surface flags by markup alone
    markup_over: frozenset[str] | set[str] = frozenset()
    verdict: dict[str, list[str | None]] = field(default_factory=dict)  # side -> langid verdict
    overruled: list[list[str] | None] = field(default_factory=list)
    duplicate_of: list[str | None] = field(default_factory=list)
    n_seen: list[int] = field(default_factory=list)
    n_pages: list[int] = field(default_factory=list)
    furniture: list[bool] = field(default_factory=list)

    @property
    def n(self) -> int:
        """The site's aligned pairs."""
        return len(self.cols["id"])

    def single(self, i: int) -> bool:
        """Whether pair ``i`` is one line on each side."""
        return len(self.cols["en_idx"][i]) == 1 and len(self.cols["other_idx"][i]) == 1

    def square(self, i: int) -> bool:
        """Whether pair ``i`` has as many lines on each side (1:1, 2:2…)."""
        return len(self.cols["en_idx"][i]) == len(self.cols["other_idx"][i])

    def evidence_of(self, i: int) -> decision.Evidence:
        """The translation's evidence for pair ``i`` (:func:`.decision.similarities`, once)."""
        ev = self.evidence.get(i)
        if ev is None:
            c = self.cols
            ev = decision.similarities(c["en_text"][i], c["other_text"][i], c["other_en"][i])
            self.evidence[i] = ev
        return ev

    def vouches(self, i: int) -> bool:
        """Whether pair ``i``'s translation says it is one, or it is a translated template
        (:mod:`.decision`; 1:1 links only with ``one_to_one_only``, templates always)."""
        v = self.vouched.get(i)
        if v is None:
            dec = self.s.decision
            en_text, other_text = self.cols["en_text"], self.cols["other_text"]
            one = self.single(i)
            ev = self.evidence_of(i) if one or not dec.one_to_one_only else None
            v = ev is not None and decision.translated(ev, dec)
            if not v and one and dec.min_template_lines > 0:
                if not self.templates:
                    self.templates.append(decision.template_counts(en_text, other_text))
                v = decision.template_vouches(
                    en_text[i], other_text[i], self.cols["other_en"][i], self.templates[0], dec, ev
                )
                self.rec.count("vouched_by_template", int(v))
                if v:
                    self.by_template.add(i)
            self.vouched[i] = v
        return v


def clean_positives(
    aligned: Sequence[pa.Table],
    translated: Sequence[pa.Table],
    settings: CleanSettings | Mapping[str, Any] | None,
    rec: Recorder,
    log: logging.Logger | None = None,
    pairs: Sequence[pa.Table] | None = None,
) -> tuple[list[pa.Table], list[pa.Table]]:
    """Clean the aligned pairs of one site: :func:`read_site`, :func:`apply_rules`,
    :func:`identify_languages`, :func:`decide`, :func:`deduplicate`, :func:`split_shards`.

    Args:
        aligned: the align stage's shards of the site (:data:`parasim.io.ALIGNED_SCHEMA`), in
            shard order.
        translated: the site's translated shards (the page lines, for the neighbours of short
            lines and the number of page pairs).
        settings: the ``clean`` settings (a mapping: the section as in the config, keys left out
            take the schema's defaults; None: all defaults).
        rec: the stage's counts. Rows in: aligned pairs; out: positives; dropped: by reason (a
            rule, ``wrong_language_<side>``, ``untranslated``, ``duplicate``, ``furniture``).
            Counts: ``page_pairs``, ``page_pairs_untranslated``, ``langid_<side>_<verdict>``,
            ``overruled_<reason>`` (kept by the decision over that flag),
            ``vouched_by_template``, ``vouched_by_markup``, ``furniture_pairs``; figure:
            ``pairs_per_s``.
        log: logger (module logger when None).
        pairs: the site's page pairs (:data:`parasim.io.PAIRS_SCHEMA`), for the page languages
            the pair stage measured (None, or pairs without them: no page is untranslated).

    Returns:
        per shard the kept pairs (:data:`parasim.io.POSITIVES_SCHEMA`) and the dropped ones
        (:data:`parasim.io.DROPPED_SCHEMA`).
    """
    log = log or logging.getLogger(__name__)
    t0 = time.perf_counter()
    site = read_site(aligned, translated, CleanSettings.from_config(settings), rec, pairs)
    apply_rules(site)
    identify_languages(site)
    decide(site)
    deduplicate(site)
    kept, dropped = split_shards(site, aligned)
    seconds = time.perf_counter() - t0
    rec.seconds("total", round(seconds, 3))
    rec.figure("pairs_per_s", round(site.n / seconds, 1) if seconds > 0 else None)
    log.info("clean: %s", rec.stats().to_dict())
    return kept, dropped


def read_site(
    aligned: Sequence[pa.Table],
    translated: Sequence[pa.Table],
    s: CleanSettings,
    rec: Recorder,
    pairs: Sequence[pa.Table] | None,
) -> Site:
    """The columns the steps read, the page lines and the pages measured untranslated.

    Only the columns the steps read become Python lists; the output rows are taken from the
    Arrow tables (one column per step, not one dict per row).
    """
    cols: dict[str, list] = {c: [] for c in _READ}
    for table in aligned:
        d = table.select(list(_READ)).to_pydict()
        for c in _READ:
            cols[c].extend(d[c])
    rec.rows_in += len(cols["id"])
    lines: dict[str, tuple[list, list]] = {}
    for table in translated:
        d = table.select(["pair_id", "en_lines", "other_lines"]).to_pydict()
        for pid, en, other in zip(d["pair_id"], d["en_lines"], d["other_lines"], strict=True):
            lines[pid] = (en or [], other or [])
    rec.count("page_pairs", len(lines))
    untranslated_side = _untranslated_pages(pairs, s.untranslated_pages)
    rec.count(
        "page_pairs_untranslated",
        sum(1 for pid in lines if untranslated_side.get(pid, (False, False)) != (False, False)),
    )
    return Site(s, rec, cols, lines, untranslated_side, rules.make_checker(s.rules, s.placeholders))


def apply_rules(site: Site) -> None:
    """Step 1, the hard rules; and the rules that flag a pair the decision may keep: every rule
    it fails is overrulable and its translation vouches for it (else it keeps its first rule,
    and skips the language check)."""
    check, dec = site.check, site.s.decision
    en_text, other_text = site.cols["en_text"], site.cols["other_text"]
    check.prepare(en_text + other_text)  # each distinct side once, with Arrow's kernels
    site.reason = reason = list(map(check, en_text, other_text))
    site.over = over = set(dec.overrule) if dec.enabled else set()
    markup_over = decision.MARKUP_FLAGS & over if dec.min_markup_skeleton > 0 else frozenset()
    site.markup_over = markup_over
    if not over:
        return
    for i, r in enumerate(reason):
        if r not in over:
            continue
        if site.vouches(i):
            failed = check.reasons(en_text[i], other_text[i])
            if set(failed) <= over:
                site.flags[i], reason[i] = failed, None
        elif r in markup_over and site.square(i):
            failed = check.reasons(en_text[i], other_text[i])
            if set(failed) <= markup_over and decision.markup_vouches(
                en_text[i], other_text[i], site.evidence_of(i), dec
            ):
                site.flags[i], reason[i] = failed, None
                site.by_markup.add(i)


def identify_languages(site: Site) -> None:
    """Step 2, language identification per side (the other side per declared language) of the
    pairs the rules kept; a line too short to identify is judged with its neighbours on the
    page, then by its page."""
    cols, n, s = site.cols, site.n, site.s
    site.verdict = verdict = {"en": [None] * n, "other": [None] * n}
    if not s.langid.enabled:
        return
    lid = langid.LanguageId(s.langid.min_letters, s.langid.window)
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in (i for i, x in enumerate(site.reason) if x is None):
        # grouped by (side, language): one expected and one opposite each
        groups[("en", cols["other_lang"][i])].append(i)
        groups[("other", cols["other_lang"][i])].append(i)
    for (side, lang), members in sorted(groups.items()):
        texts_all, idx_all, pos = (
            (cols["en_text"], cols["en_idx"], 0)
            if side == "en"
            else (cols["other_text"], cols["other_idx"], 1)
        )

        def context(j: int, members=members, idx_all=idx_all, pos=pos) -> str | None:
            i = members[j]
            page = site.lines.get(cols["pair_id"][i])
            if page is None or not idx_all[i]:
                return None
            return _context(page[pos], idx_all[i], lid.window)

        texts = [langid.prose(texts_all[i]) for i in members]
        opposite = lang if side == "en" else "en"
        verdicts = lid.judge(
            texts, "en" if side == "en" else lang, context, opposite, site.check.count_letters
        )
        for i, v in zip(members, verdicts, strict=True):
            site.rec.count(f"langid_{side}_{v}")
            verdict[side][i] = v


def decide(site: Site) -> None:
    """Step 3, the decision: the flags of each pair against its translation and its pages."""
    dec, reason, over, rec = site.s.decision, site.reason, site.over, site.rec
    site.overruled = [None] * site.n
    for i in range(site.n):
        if reason[i] is not None:
            continue
        bad = site.untranslated_side.get(site.cols["pair_id"][i], (False, False))
        cands = list(site.flags.get(i, ()))
        strong_wrong = False  # heliport puts the line itself in the wrong language
        for side, page_bad in zip(("en", "other"), bad, strict=True):
            v = site.verdict[side][i]
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
            and not (dec.page_check and strong_wrong and i not in site.by_template)
            and (site.vouches(i) or (i in site.by_markup and set(cands) <= site.markup_over))
        )
        if keep:
            rec.count("vouched_by_markup", int(i in site.by_markup))
            site.overruled[i] = cands
            for c in cands:
                rec.count(f"overruled_{c}")
        else:
            reason[i] = cands[0]


def deduplicate(site: Site) -> None:
    """Step 4, deduplication (and page furniture): pairs equal after :func:`.rules.normalize`
    on both sides are kept once, the first in (English URL, other URL, line index) order."""
    cols, n, reason, s = site.cols, site.n, site.reason, site.s
    site.duplicate_of = [None] * n
    site.n_seen, site.n_pages, site.furniture = [1] * n, [1] * n, [False] * n
    if not s.dedup:
        return
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
    en_text, other_text = cols["en_text"], cols["other_text"]
    first: dict[tuple[str, str], int] = {}
    pages: dict[int, set[str]] = defaultdict(set)
    known = site.check.dedup_keys([en_text[i] for i in keep] + [other_text[i] for i in keep])

    def norm(text: str) -> str:
        k = known.get(text)
        return rules.normalize(text) if k is None else k

    for i in keep:
        key = (norm(en_text[i]), norm(other_text[i]))
        j = first.setdefault(key, i)
        pages[j].add(cols["pair_id"][i])
        if j != i:
            reason[i], site.duplicate_of[i] = "duplicate", cols["id"][j]
            site.n_seen[j] += 1
    bound = max(s.furniture_min_pages, s.furniture_share * len(site.lines))
    for j, pids in pages.items():
        site.n_pages[j] = len(pids)
        if len(pids) >= bound:
            site.furniture[j] = True
            site.rec.count("furniture_pairs")
            if s.drop_furniture:
                reason[j] = "furniture"


def split_shards(site: Site, aligned: Sequence[pa.Table]) -> tuple[list[pa.Table], list[pa.Table]]:
    """Per shard, the kept pairs and the dropped ones with their reason; their counts."""
    reason = site.reason
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
                    "n_seen": [site.n_seen[idx[j]] for j in k],
                    "n_pages": [site.n_pages[idx[j]] for j in k],
                    "furniture": [site.furniture[idx[j]] for j in k],
                    "overruled": [site.overruled[idx[j]] for j in k],
                },
                io.POSITIVES_SCHEMA,
            )
        )
        dropped.append(
            _with_columns(
                base.take(pa.array(d, type=pa.int64())),
                {
                    "reason": [reason[idx[j]] for j in d],
                    "duplicate_of": [site.duplicate_of[idx[j]] for j in d],
                },
                io.DROPPED_SCHEMA,
            )
        )
    for why, n in Counter(x for x in reason if x is not None).items():
        site.rec.drop(why, n)
    site.rec.rows_out += sum(t.num_rows for t in kept)
    return kept, dropped


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


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "clean",
    rules=("clean_positives",),
    results=("positives", "dropped"),
    upstream="align",
    per="site",
    done="positives",
    done_covers=("align",),
    metric="rows_out",
    label="positives (cleaned)",
    explain=explain.clean,
    one_to_one=True,
    aliases={"clean-positives": ("clean",)},
    settings=CleanSettings,
    inputs={
        "aligned": io.ALIGNED_SCHEMA,
        "translated": io.TRANSLATED_SCHEMA,
        "pairs": io.PAIRS_SCHEMA,
    },
    outputs={"out": io.POSITIVES_SCHEMA, "dropped": io.DROPPED_SCHEMA},
    run=clean_positives,
)
