"""Nearest neighbours by inner product (faiss), the one search the mine and pair stages share.

Exact (``IndexFlatIP``) up to ``exact_max`` base vectors, an HNSW graph above, built on one
thread so that the graph, and with it the result, does not depend on the machine's thread count.
"""

from __future__ import annotations

import numpy as np


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Each row divided by its length (a zero row stays zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)


def nearest(
    queries: np.ndarray,
    base: np.ndarray,
    k: int,
    *,
    exact_max: int,
    hnsw_m: int = 32,
    hnsw_ef: int = 128,
) -> tuple[np.ndarray, np.ndarray, str]:
    """The ``k`` rows of ``base`` nearest each query, best first.

    Args:
        queries: float32 matrix, one query a row (unit rows: the inner product is the cosine).
        base: float32 matrix with the same number of columns, the rows searched.
        k: neighbours per query (at most the number of base rows; fewer there are -1 indices).
        exact_max: searched exactly up to this many base rows, with HNSW above.
        hnsw_m: the graph's links per node.
        hnsw_ef: its construction and search breadth (at least ``k``).

    Returns:
        Similarities and indices (queries x k), and ``"exact"`` or ``"hnsw"``.
    """
    import faiss

    k = min(k, base.shape[0])
    dim = base.shape[1]
    if base.shape[0] <= exact_max:
        index = faiss.IndexFlatIP(dim)
        index.add(np.ascontiguousarray(base))
        how = "exact"
    else:
        threads = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(1)  # HNSW insertion order decides the graph: one thread
        try:
            index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = max(40, hnsw_ef)
            index.add(np.ascontiguousarray(base))
        finally:
            faiss.omp_set_num_threads(threads)
        index.hnsw.efSearch = max(hnsw_ef, k)
        how = "hnsw"
    sims, idx = index.search(np.ascontiguousarray(queries), k)
    return sims, idx, how
