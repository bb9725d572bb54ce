"""The align stage: translated page pairs -> positive sentence pairs (:func:`align_pairs`).

The paper's method (:mod:`.paper`, seed 001 section 2.1.4) decides per page pair with equal line
counts: line i against line i by word-frequency cosine; clean files give every line pair as a
positive, files with a few misaligned lines go to manual review (:mod:`.review`), the rest are
discarded. Beyond the paper, a DP aligner (:mod:`.dp`) with n:m links and deletions realigns the
files the paper cannot take (different line counts, misaligned lines).

Policy of :func:`align_pairs` per page pair:

1. a reviewed TSV for the pair (``<review_dir>/<site>/done/<pair_id>.tsv``) whose fingerprint
   matches the page content: its kept links are the positives (method ``"review"``);
2. equal line counts: the paper's check. ``aligned``: every line pair is a positive (method
   ``"paper"``, never filtered: that is the paper). ``review``: the pair is written to the review
   queue and, when ``realign`` is true, realigned by DP now. ``discarded``: realigned by DP when
   ``realign`` is true, else discarded;
3. different line counts: DP when ``realign`` is true, else discarded;
4. a line one side holds that the DP merged into a neighbouring link: :func:`parasim.align.dp.trim`
   takes a first or last line out of an n:m link that matches better without it by more than
   ``trim_margin`` (counted: ``dp_lines_trimmed``; the line is then a deletion);
5. lines the two pages list in another order (a list sorted by name in each language): after the
   DP, :func:`parasim.align.dp.reorder` links the pairs that are each other's clear best match
   nearby (``reorder_margin``, ``reorder_max_jump``) and takes apart the DP links they
   contradict (counted: ``dp_links_reordered``, ``dp_links_broken``);
6. DP links with one empty side are not positives; DP links whose score is under ``min_score``
   (word cosine; ``min_score_emb`` for the sentence-vector cosine) are dropped and counted,
   except a short link held between two confident ones (:func:`held`; a reordered link is never
   held: its neighbours in the list are not its neighbours on the pages).

With the ``embeddings`` / ``both`` scorers the DP compares sentence vectors centred on their
language's mean (``center``; the mean over the distinct lines of the shard's pages that go to the
DP, :func:`_language_means`): without it, an encoder whose vectors share a large common
component (multilingual e5, more so after alignment) gives every line pair a high cosine, and in
``both`` the word cosine then decides almost alone (BENCHMARKS.md, issue 16).

Untranslated lines (null in ``other_en_lines``) fall back to the original line for the word
cosine (a page that left English text untranslated still compares) and are counted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from parasim import explain, io
from parasim.config import Settings
from parasim.spec import Stage
from parasim.stats import Recorder

from . import dp, paper, review, scoring

__all__ = ["AlignSettings", "DPSettings", "align_pairs", "align_lines", "dp_lengths", "dp_params"]


@dataclass(frozen=True)
class DPSettings(Settings, section="align.dp"):
    """The ``align.dp`` config section: the DP search (:class:`parasim.align.dp.DPParams`)."""

    max_size: int
    max_side: int
    del_penalty: float
    size_penalty: float
    merge_penalty: float
    length_weight: float
    length_text: str
    width: int
    anchor_width: int


@dataclass(frozen=True)
class StaticTuneSettings(Settings, section="align.static.tune"):
    """The ``align.static.tune`` config section (:class:`parasim.models.static.TuneSpec`)."""

    epochs: int
    learning_rate: float
    batch_size: int
    seed: int
    symmetric: bool
    extra: tuple[str, ...]
    average_seeds: int


@dataclass(frozen=True)
class StaticSettings(Settings, section="align.static"):
    """The ``align.static`` config section: the static encoder's build
    (:class:`parasim.models.static.StaticSpec`)."""

    source: str
    pca_dims: int | None
    sif_coefficient: float | None
    tune: StaticTuneSettings


@dataclass(frozen=True)
class AlignSettings(Settings, section="align"):
    """The ``align`` config section (what each key means: the schema)."""

    threshold: float
    max_review: int
    realign: bool
    scorer: str
    encoder: str
    emb_weight: float
    center: bool
    center_min_lines: int
    weighting: str
    min_score: float
    held_max_words: int
    trim_margin: float | None
    trim_agree: float | None
    reorder_margin: float | None
    reorder_max_jump: int
    min_score_emb: float
    review_dir: str
    dp: DPSettings
    static: StaticSettings


PAPER, DP, REVIEW = "paper", "dp", "review"
#: Outcomes of a page pair that pass its sentence pairs on (``files_<outcome>`` in the counts);
#: the others drop it (by outcome).
KEPT_OUTCOMES = ("aligned", "reviewed", "realigned")


def dp_params(settings: AlignSettings | Mapping[str, Any] | None = None) -> dp.DPParams:
    """DP search parameters from the ``align`` settings (or that section as in the config)."""
    knobs = asdict(AlignSettings.from_config(settings).dp)
    del knobs["length_text"]  # which lines the caller measures: see dp_lengths
    return dp.DPParams(**knobs)


def dp_lengths(
    src_lines: Sequence[str | None],
    tgt_lines: Sequence[str | None],
    tgt_en_lines: Sequence[str | None],
    src_en_lines: Sequence[str | None] | None = None,
    scorer: str = "words",
    length_text: str = "original",
) -> tuple[np.ndarray, np.ndarray]:
    """Character lengths of each side's lines for the DP's length term (``align.dp.length_text``).

    ``original``: the lines as written on both pages (Gale and Church's signal: a sentence's
    length predicts its translation's). ``scorer``: the text the scorer reads, the English
    translations for ``words`` / ``both`` (``src_en_lines``, or ``src_lines`` when the source is
    English already) and the originals for ``embeddings``.
    """
    if length_text not in ("original", "scorer"):
        raise ValueError(f"align.dp.length_text must be original or scorer, got {length_text!r}")
    if length_text == "scorer" and scorer != "embeddings":
        src_lines = src_lines if src_en_lines is None else src_en_lines
        tgt_lines = tgt_en_lines
    return (
        np.array([len((x or "").strip()) for x in src_lines], np.float64),
        np.array([len((x or "").strip()) for x in tgt_lines], np.float64),
    )


def _join(lines: Sequence[str | None], idx: Sequence[int]) -> str:
    return " ".join((lines[i] or "").strip() for i in idx)


def align_lines(
    en_lines: Sequence[str | None],
    other_lines: Sequence[str | None],
    other_en_lines: Sequence[str | None],
    settings: AlignSettings | Mapping[str, Any] | None = None,
    encoder: scoring.Encoder | None = None,
    centers: tuple[np.ndarray, np.ndarray] | None = None,
    src_en_lines: Sequence[str | None] | None = None,
    max_overlap: int = 3,
) -> tuple[dp.Alignment, list[float], list[float | None]]:
    """DP-align one page pair.

    Args:
        en_lines: English lines.
        other_lines: other-language lines.
        other_en_lines: their English translations (no None: fall back before calling).
        settings: the ``align`` settings (a mapping: the section as in the config, keys left
            out take the schema's defaults).
        encoder: sentence encoder, required for the ``embeddings`` and ``both`` scorers.
        centers: the English and the other language's mean sentence vectors: the DP's
            embedding cosines are taken after centring on them
            (:class:`~parasim.align.scoring.EmbeddingScorer`); None: raw cosines.
        src_en_lines: the first side's lines in the language of ``other_en_lines``, where the
            first side is not English (a benchmark's German side, translated): the word
            cosine and the length term of ``align.dp.length_text: scorer`` read them; None:
            ``en_lines`` (English already), as in the stage.
        max_overlap: the embedding scorer embeds runs of up to this many lines
            (:meth:`~parasim.align.scoring.EmbeddingScorer.from_lines`).

    Returns:
        the alignment (with ``align.trim_margin``, trimmed by :func:`parasim.align.dp.trim`:
        ``extra["trimmed"]`` counts the lines it detached; with ``align.reorder_margin``,
        repaired by :func:`parasim.align.dp.reorder`: ``extra["moved"]`` marks its new links,
        ``extra["broken"]`` counts the links it took apart), the word cosine of each link and
        its sentence-vector cosine (None when embeddings are not used; NaN / None for
        deletions).
    """
    s = AlignSettings.from_config(settings)
    params = dp_params(s)
    k = params.max_side
    kind = s.scorer
    words = emb = None
    src_en = en_lines if src_en_lines is None else src_en_lines
    if kind in ("words", "both"):
        words = scoring.WordScorer.from_lines(src_en, other_en_lines, k, k, s.weighting)
    if kind in ("embeddings", "both"):
        if encoder is None:
            raise ValueError(f"align.scorer={kind} needs a sentence encoder")
        emb = scoring.EmbeddingScorer.from_lines(
            en_lines, other_lines, encoder, k, k, max_overlap=max_overlap, centers=centers
        )
    if kind == "words":
        sc: scoring.Scorer = words
    elif kind == "embeddings":
        sc = emb
    else:
        sc = scoring.CombinedScorer(words, emb, s.emb_weight)
    lengths = dp_lengths(
        en_lines, other_lines, other_en_lines, src_en_lines, kind, s.dp.length_text
    )
    res = dp.align(sc, params, lengths)
    if s.trim_margin is not None:
        cut = dp.trim(res.links, sc, s.trim_margin, res.sims, s.trim_agree)
        res = replace(
            res, links=cut.links, sims=cut.sims, extra={**res.extra, "trimmed": cut.detached}
        )
    if s.reorder_margin is not None:
        rep = dp.reorder(res.links, sc, s.reorder_margin, s.reorder_max_jump, res.sims)
        res = replace(
            res, links=rep.links, extra={**res.extra, "moved": rep.moved, "broken": rep.broken}
        )
    wsims: list[float] = []
    esims: list[float | None] = []
    for src, tgt in res.links:
        if not src or not tgt:
            wsims.append(float("nan"))
            esims.append(None)
            continue
        wsims.append(
            scoring.cosine(scoring.bag(_join(src_en, src)), scoring.bag(_join(other_en_lines, tgt)))
        )
        if emb is not None:
            a, b = len(src), len(tgt)
            esims.append(float(emb.raw_src[a][src[-1] + 1] @ emb.raw_tgt[b][tgt[-1] + 1]))
        else:
            esims.append(None)
    return res, wsims, esims


def align_pairs(
    translated: pa.Table,
    settings: AlignSettings | Mapping[str, Any] | None,
    review_dir: Path | None,
    rec: Recorder,
    encoder: scoring.Encoder | None = None,
    log: logging.Logger | None = None,
) -> pa.Table:
    """Align every page pair of a translated shard into positive sentence pairs.

    Args:
        translated: rows of :data:`parasim.io.TRANSLATED_SCHEMA`.
        settings: the ``align`` settings (a mapping: the section as in the config, keys left
            out take the schema's defaults); ``review_dir`` is an argument of its own.
        review_dir: review queue root (``results/review``): queued pairs are written to
            ``<review_dir>/<site>/``, reviewed ones read from ``<review_dir>/<site>/done/``.
            None: nothing written or read.
        rec: the stage's counts. Rows in: page pairs; out: aligned sentence pairs; dropped: the
            page pairs that gave none, by their outcome (``queued_only``, ``discarded_<why>``,
            ``error``). The page pairs that gave some are counted as ``files_<outcome>``
            (:data:`KEPT_OUTCOMES`); ``files_queued`` counts the page pairs queued for review,
            realigned ones too (a count, not an outcome); then ``positives_<method>``,
            ``review_*``, ``dp_*``, ``center_*`` and ``untranslated_lines``.
        encoder: sentence encoder for the ``embeddings`` / ``both`` scorers; loaded by name
            (``align.encoder``) on first need when None.
        log: logger (module logger when None).

    Returns:
        the aligned pairs (:data:`parasim.io.ALIGNED_SCHEMA`; the clean stage makes them
        positives).
    """
    log = log or logging.getLogger(__name__)
    s = AlignSettings.from_config(settings)
    t0 = time.perf_counter()
    rows: list[dict] = []
    reviewed_by_site: dict[str, dict[str, review.ReviewedPair]] = {}
    enc = encoder
    if s.scorer in ("embeddings", "both") and s.realign and enc is None and len(translated):
        try:
            enc = scoring.cached_encoder(s.encoder, static=s.static)
        except Exception as err:  # a configuration problem: stop before any work
            raise RuntimeError(
                f"align.encoder={s.encoder!r} could not be loaded for align.scorer="
                f"{s.scorer}: {type(err).__name__}: {err}"
            ) from err

    # first every page's own decisions (a person's review, the paper's check), then the language
    # means over the pages left for the DP, then the DP
    pages: list[_Page] = []
    for row in translated.to_pylist():
        rec.rows_in += 1
        try:
            pages.append(_triage(row, s, review_dir, reviewed_by_site, rec, log))
        except Exception as err:  # one bad page pair must not lose the shard's finished work
            _failed(row, err, rec, log)
    centers = _language_means(pages, s, enc, rec, log) if enc is not None else {}
    for page in pages:
        try:
            new, outcome = page.positives, page.outcome
            if outcome is None:
                new, outcome = _realign(
                    page, s, review_dir, enc, rec, centers.get(page.row["other_lang"])
                )
        except Exception as err:  # one bad page pair must not lose the shard's finished work
            _failed(page.row, err, rec, log)
            continue
        if outcome in KEPT_OUTCOMES:
            rec.count(f"files_{outcome}")
        else:
            rec.drop(outcome)
        rows.extend(new)

    for r in rows:
        rec.count(f"positives_{r['method']}")
    rec.rows_out += len(rows)
    rec.seconds("total", round(time.perf_counter() - t0, 3))
    table = io.rows_to_table(rows, io.ALIGNED_SCHEMA)
    log.info("align: %s", rec.stats().to_dict())
    return table


def _language_means(pages, s, enc, rec, log) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per other language, the (English, other) mean sentence vectors the DP centres on.

    Taken over the distinct lines of the shard's page pairs left for the DP: neither a person's
    review nor the paper's check took them (their lines are embedded for the DP anyway, so the
    encoder's cache serves both). A language with fewer than ``center_min_lines`` distinct lines
    on either side gets raw cosines (counted: ``center_off_<lang>``).
    """
    if not (s.center and s.realign and s.scorer in ("embeddings", "both")):
        return {}
    en_lines: list[str] = []
    other_lines: dict[str, list[str]] = {}
    for page in pages:
        if page.outcome is None:
            en_lines += page.en
            other_lines.setdefault(page.row["other_lang"], []).extend(page.other)

    out = {}
    n_en = len(scoring.distinct_texts(en_lines))
    for lang, lines in sorted(other_lines.items()):
        n_other = len(scoring.distinct_texts(lines))
        if min(n_en, n_other) < s.center_min_lines:
            log.info("align: %s: %d English / %d %s distinct lines to realign, fewer than "
                     "align.center_min_lines=%d: raw cosines", lang, n_en, n_other, lang,
                     s.center_min_lines)  # fmt: skip
            rec.count(f"center_off_{lang}")
            continue
        out[lang] = (scoring.language_mean(en_lines, enc), scoring.language_mean(lines, enc))
        rec.count(f"center_lines_{lang}", n_other)
    if out:
        rec.count("center_lines_en", n_en)
    return out


def _page_lines(row: dict) -> tuple[list, list, list, list] | None:
    """English lines, other lines, their raw translations (None: untranslated) and the
    translations with the original line standing in; None when the counts disagree."""
    en = list(row["en_lines"] or [])
    other = list(row["other_lines"] or [])
    raw_tr = row.get("other_en_lines")
    raw_tr = list(raw_tr) if raw_tr is not None else [None] * len(other)
    if len(raw_tr) != len(other):
        return None
    other_en = [t if t is not None else o for t, o in zip(raw_tr, other, strict=True)]
    return en, other, raw_tr, other_en


def _base(row: dict) -> dict:
    return {
        k: row[k]
        for k in ("pair_id", "site", "domain", "lang_pair", "other_lang", "en_url", "other_url")
    }


def held(
    links: Sequence[dp.Link],
    wsims: Sequence[float],
    k: int,
    en_lines: Sequence[str | None],
    min_score: float,
    max_words: int,
) -> bool:
    """Whether DP link ``k``, under the word-cosine floor, is kept all the same
    (``align.held_max_words``): its English side has at most ``max_words`` words, and the links
    just before and after it are links (not deletions) at or above ``min_score``. The links cover
    every line in order, so those two are its neighbours on both pages: the line sits where two
    confident links put it. On a short line the word cosine of a real translation is often 0
    (one word Apertium does not know: "Estonian" | "estonien"), so the floor then measures the
    translator, not the pair; on a long line it stays the test.
    """
    if max_words <= 0 or k == 0 or k + 1 >= len(links):
        return False
    if len(_join(en_lines, links[k][0]).split()) > max_words:
        return False
    return all(links[j][0] and links[j][1] and wsims[j] >= min_score for j in (k - 1, k + 1))


def _positive(row, en, other, other_en, src, tgt, method, score, score_emb=None) -> dict:
    return {
        **_base(row),
        "id": io.stable_id(row["pair_id"], review._ids(src), review._ids(tgt)),
        "en_text": _join(en, src),
        "other_text": _join(other, tgt),
        "other_en": _join(other_en, tgt),
        "method": method,
        "en_idx": list(src),
        "other_idx": list(tgt),
        "score": None if score is None or score != score else float(score),
        "score_emb": None if score_emb is None or score_emb != score_emb else float(score_emb),
    }


@dataclass
class _Page:
    """One page pair as :func:`_triage` left it: decided (``outcome`` set, with its positives)
    or left for the DP (``outcome`` None; ``check`` is the paper's verdict)."""

    row: dict
    outcome: str | None = None
    positives: list[dict] = field(default_factory=list)
    en: list = field(default_factory=list)
    other: list = field(default_factory=list)
    raw_tr: list = field(default_factory=list)
    other_en: list = field(default_factory=list)
    check: paper.PaperCheck | None = None


def _failed(row: dict, err: Exception, rec: Recorder, log: logging.Logger) -> None:
    log.error("align: page pair %s failed: %s: %s", row.get("pair_id"), type(err).__name__, err)
    rec.drop("error")


def _triage(row, s, review_dir, reviewed_by_site, rec: Recorder, log) -> _Page:
    """A page pair's own decisions: bad input, a person's review, the paper's check."""
    pid, site = row["pair_id"], row["site"]
    lines = _page_lines(row)
    if lines is None:
        n_tr, n_other = len(row["other_en_lines"]), len(row["other_lines"] or [])
        log.warning("align: %s: %d translations for %d lines", pid, n_tr, n_other)
        return _Page(row, "discarded_translation_mismatch")
    en, other, raw_tr, other_en = lines
    n_untr = sum(t is None for t in raw_tr)
    rec.count("untranslated_lines", n_untr)
    if not en and not other:
        return _Page(row, "discarded_empty_page")
    if not en or not other:
        return _Page(row, "discarded_empty_side")

    # 1. a person's review wins
    if review_dir is not None:
        if site not in reviewed_by_site:
            errs: list[str] = []
            reviewed_by_site[site] = review.load_reviewed(
                Path(review_dir) / site / "done", errs, log
            )
            rec.count("review_files_invalid", len(errs))
        item = reviewed_by_site[site].get(pid)
        if item is not None:
            if item.fingerprint not in (None, review.fingerprint(en, other)) or (
                item.n_en not in (None, len(en)) or item.n_other not in (None, len(other))
            ):
                log.warning("align: %s: review %s is stale (page changed)", pid, item.path)
                rec.count("review_stale")
            else:
                out = []
                for src, tgt in item.links:
                    if max(src) >= len(en) or max(tgt) >= len(other) or min(src + tgt) < 0:
                        rec.count("review_links_invalid")
                        continue
                    sc = scoring.cosine(
                        scoring.bag(_join(en, src)), scoring.bag(_join(other_en, tgt))
                    )
                    out.append(_positive(row, en, other, other_en, src, tgt, REVIEW, sc))
                return _Page(row, "reviewed", out)

    # 2. the paper's check (equal line counts)
    chk = paper.check_file(en, other_en, s.threshold, s.max_review)
    if chk.outcome == paper.ALIGNED:
        out = [
            _positive(row, en, other, other_en, (i,), (i,), PAPER, chk.sims[i])
            for i in range(len(en))
        ]
        return _Page(row, "aligned", out)

    return _Page(row, None, [], en, other, raw_tr, other_en, chk)


def _realign(
    page: _Page, s, review_dir, enc, rec: Recorder, centers=None
) -> tuple[list[dict], str]:
    """DP realignment of a page pair the paper's check did not take (and the review queue)."""
    row, chk = page.row, page.check
    pid, site = row["pair_id"], row["site"]
    en, other, raw_tr, other_en = page.en, page.other, page.raw_tr, page.other_en
    res = wsims = esims = None
    if s.realign:
        res, wsims, esims = align_lines(en, other, other_en, s, enc, centers)
    if chk.outcome == paper.REVIEW:
        if review_dir is not None:
            if res is not None:
                links, scores = res.links, wsims
            else:
                links = [((i,), (i,)) for i in range(len(en))]
                scores = chk.sims.tolist()
            review.write_review_item(
                review_dir, site, pid, en, other, raw_tr, links, scores,
                chk.misaligned, chk.misaligned, row["en_url"], row["other_url"],
            )  # fmt: skip
            rec.count("review_items_written")
        rec.count("files_queued")
    if res is None:
        reason = "unequal_lines" if chk.outcome == paper.UNEQUAL else chk.outcome
        return [], "queued_only" if chk.outcome == paper.REVIEW else f"discarded_{reason}"

    out = []
    moved = res.extra.get("moved") or [False] * len(res.links)
    rec.count("dp_links_broken", res.extra.get("broken", 0))
    rec.count("dp_lines_trimmed", res.extra.get("trimmed", 0))
    for k, ((src, tgt), ws, es) in enumerate(zip(res.links, wsims, esims, strict=True)):
        if not src or not tgt:
            rec.count("dp_deletions")
            continue
        low = ws < s.min_score and s.scorer != "embeddings"
        if low and (moved[k] or not held(res.links, wsims, k, en, s.min_score, s.held_max_words)):
            rec.count("dp_links_low_score")
            continue
        if es is not None and es < s.min_score_emb:
            rec.count("dp_links_low_score")
            continue
        if low:  # counted once it is a positive (the sentence-vector floor may still drop it)
            rec.count("dp_links_held")
        if moved[k]:
            rec.count("dp_links_reordered")
        out.append(_positive(row, en, other, other_en, src, tgt, DP, ws, es))
    rec.count(f"dp_from_{chk.outcome}")
    return out, "realigned"


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "align",
    rules=("align_lines", "static_encoder"),
    results=("aligned", "models/static-encoder"),
    upstream="translate",
    per="shard",
    metric="rows_out",
    label="aligned pairs",
    explain=explain.align,
    aliases={"align-lines": ("align",)},
    settings=AlignSettings,
    inputs={"input": io.TRANSLATED_SCHEMA},
    outputs={"output": io.ALIGNED_SCHEMA},
    run=align_pairs,
)
