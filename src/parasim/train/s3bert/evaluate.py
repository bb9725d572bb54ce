"""S3BERT's evaluation (seed 002 §5.1): Spearman per aspect of the sub-embedding cosine against
the metric, beside SB-full (every dimension) and SB-rand (16 random dimensions per aspect)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from parasim.train.core.metrics import row_cosines, spearman

from .data import Pair
from .model import embed
from .settings import S3bertConfig, aspect_names


def assignments(kind: str, dim: int, n_aspects: int, h: int, seed: int = 0) -> list:
    """Dimensions of each aspect: ``s3bert`` (consecutive h-blocks), ``rand`` (h random
    dimensions each, no overlap; SB-rand), ``full`` (every dimension; SB-full)."""
    import numpy as np

    if kind == "full":
        return [np.arange(dim)] * n_aspects
    if kind == "s3bert":
        return [np.arange(i * h, (i + 1) * h) for i in range(n_aspects)]
    if kind == "rand":
        perm = np.random.default_rng(seed).permutation(dim)
        return [perm[i * h : (i + 1) * h] for i in range(n_aspects)]
    raise ValueError(kind)


def aspect_correlations(emb_a, emb_b, pairs: Sequence[Pair], dims: list) -> dict[str, float | None]:
    """Spearman of each aspect's sub-embedding cosine against its metric over ``pairs``."""
    out = {}
    for k, name in enumerate(aspect_names()):
        cos = row_cosines(emb_a[:, dims[k]], emb_b[:, dims[k]])
        out[name] = spearman(cos, [p.scores[k] for p in pairs])
    return out


def evaluate_slice(encoder, tokenizer, pairs: Sequence[Pair], cfg: S3bertConfig, seed: int):
    """Per-aspect Spearman on ``pairs`` for the S3BERT assignment, SB-rand and SB-full; under
    ``"cosines"``, each assignment's per-aspect cosines of every pair (``[aspect][pair]``, what
    a bootstrap over the pairs resamples)."""
    a = embed(encoder, tokenizer, [p.a for p in pairs], cfg.max_length, cfg.eval_batch_size)
    b = embed(encoder, tokenizer, [p.b for p in pairs], cfg.max_length, cfg.eval_batch_size)
    dim, k, h = a.shape[1], len(aspect_names()), cfg.feature_dim
    kinds = ("s3bert", "rand", "full")
    out: dict = {
        kind: aspect_correlations(a, b, pairs, assignments(kind, dim, k, h, seed)) for kind in kinds
    }
    out["cosines"] = {
        kind: [
            [float(x) for x in row_cosines(a[:, d], b[:, d])]
            for d in assignments(kind, dim, k, h, seed)
        ]
        for kind in kinds
    }
    return out


def _mean(d: Mapping[str, float | None]) -> float | None:
    vals = [v for v in d.values() if v is not None]
    return sum(vals) / len(vals) if vals else None
