"""Weisfeiler-Leman AMR similarities (Opitz et al. 2021): WLK (symbolic) and WWLK (Wasserstein).

Both read a graph as a labelled multigraph in which every attribute constant is a node of its
own (``:polarity -`` becomes an edge to a node labelled ``-``), as the reference implementation
(flipz357/weisfeiler-leman-amr-metrics) does. Written after reading it:

- WLK: bag-of-labels vectors of both graphs; iteration 0 holds node labels and
  (label, role, label) triples (occurrence, 0/1), iterations 1..k hold the refined labels (a
  node's label joined with its sorted neighbours' role + label, both directions; counts).
  Iteration i is weighted 1/(1+i); the score is the cosine of the two concatenated vectors.
- WWLK: node vectors start as the label's word vector; an iteration adds to each node the mean of
  its neighbours' vectors, each scaled by a fixed weight of the edge's role in [0.25, 0.35]
  (derived from the role's name, where the reference draws it at random). A node is the
  concatenation of its vectors over iterations 0..k, normalised; the distance is the earth
  mover's distance between the two node sets (uniform mass, Euclidean cost, POT's exact
  solver). Node vectors have unit length, so the distance is at most 2 and the similarity is
  ``1 - distance / 2``.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Sequence

import numpy as np

from parasim.amr.graph import Graph

#: WL iterations (the reference's default k).
DEFAULT_ITERS = 2

Edge = tuple[int, str, int]


def node_graph(g: Graph) -> tuple[list[str], list[Edge]]:
    """Node labels and (source, role, target) edges, with each attribute constant a node."""
    index = {v: i for i, v in enumerate(g.concepts)}
    labels = list(g.concepts.values())
    edges = [(index[s], r, index[t]) for s, r, t in g.relations]
    for s, r, const in g.attributes:
        labels.append(const)
        edges.append((index[s], r, len(labels) - 1))
    return labels, edges


def _wl_bags(labels: list[str], edges: list[Edge], iters: int) -> list[Counter]:
    """Bags of iteration 0 (labels + triples, 0/1) and 1..iters (refined labels, counts)."""
    first = Counter(dict.fromkeys(labels, 1))
    first.update(dict.fromkeys((f"{labels[s]}_{r}_{labels[t]}" for s, r, t in edges), 1))
    bags = [first]
    neigh: list[list[tuple[str, int]]] = [[] for _ in labels]
    for s, r, t in edges:
        neigh[s].append((r, t))
        neigh[t].append((r, s))
    current = list(labels)
    for _ in range(iters):
        current = [
            current[n] + " ::: " + " ::: ".join(sorted(f"{r}_{current[m]}" for r, m in neigh[n]))
            for n in range(len(current))
        ]
        bags.append(Counter(current))
    return bags


def wlk(g1: Graph, g2: Graph, iters: int = DEFAULT_ITERS) -> float:
    """WLK similarity of two graphs in [0, 1] (1.0 for two empty graphs)."""
    b1 = _wl_bags(*node_graph(g1), iters)
    b2 = _wl_bags(*node_graph(g2), iters)
    dot = n1 = n2 = 0.0
    for i, (x, y) in enumerate(zip(b1, b2, strict=True)):
        w2 = (1.0 / (1 + i)) ** 2
        dot += w2 * sum(c * y[k] for k, c in x.items() if k in y)
        n1 += w2 * sum(c * c for c in x.values())
        n2 += w2 * sum(c * c for c in y.values())
    if n1 == 0 and n2 == 0:
        return 1.0
    if n1 == 0 or n2 == 0:
        return 0.0
    return float(min(1.0, dot / np.sqrt(n1 * n2)))


def edge_weight(role: str) -> float:
    """The fixed WWLK weight of a role, in [0.25, 0.35]."""
    h = hashlib.blake2b(role.encode("utf-8"), digest_size=4).digest()
    return 0.25 + 0.1 * int.from_bytes(h, "little") / 0xFFFFFFFF


def wl_node_vectors(
    labels: list[str], edges: list[Edge], base: np.ndarray, iters: int = DEFAULT_ITERS
) -> np.ndarray:
    """Contextualised node vectors, ``(n, dim * (iters + 1))``, unit rows."""
    n = len(labels)
    if n == 0:
        return np.zeros((0, base.shape[1] * (iters + 1)), np.float32)
    adj = np.zeros((n, n), np.float32)
    for s, r, t in edges:
        w = edge_weight(r)
        adj[s, t] += w
        adj[t, s] += w
    count = np.zeros(n, np.float32)
    for s, _, t in edges:
        count[s] += 1
        count[t] += 1
    mean_op = adj / np.where(count == 0, 1.0, count)[:, None]
    parts = [base]
    cur = base
    for _ in range(iters):
        cur = cur + mean_op @ cur
        parts.append(cur)
    out = np.concatenate(parts, axis=1)
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms == 0, 1.0, norms)


def wwlk(
    g1: Graph,
    g2: Graph,
    vectors: Callable[[Sequence[str]], np.ndarray],
    iters: int = DEFAULT_ITERS,
) -> float:
    """WWLK similarity of two graphs in [0, 1] (1.0 for two empty graphs).

    Args:
        g1: First graph.
        g2: Second graph.
        vectors: Label vectors (:mod:`parasim.amr.vectors`), unit rows.
        iters: WL iterations.
    """
    import ot

    l1, e1 = node_graph(g1)
    l2, e2 = node_graph(g2)
    if not l1 and not l2:
        return 1.0
    if not l1 or not l2:
        return 0.0
    base = vectors(l1 + l2).astype(np.float64)
    x1 = wl_node_vectors(l1, e1, base[: len(l1)], iters)
    x2 = wl_node_vectors(l2, e2, base[len(l1) :], iters)
    cost = ot.dist(x1, x2, metric="euclidean")
    a = np.full(len(l1), 1.0 / len(l1))
    b = np.full(len(l2), 1.0 / len(l2))
    distance = float(ot.emd2(a, b, cost))
    return float(min(1.0, max(0.0, 1.0 - distance / 2.0)))
