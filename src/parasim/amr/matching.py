"""Smatch through smatchpp: align the variables of two triple sets, count matching triples.

smatchpp (by the author of the aspect metrics of seed 002) does the alignment; parasim only
hands it triples it has normalised itself (:mod:`parasim.amr.graph`). Its hill-climber draws
random starts from Python's ``random`` module: :func:`smatch_counts` seeds a private state for
each call and restores the caller's afterwards, so scores are the same on every run and in every
process. ``solver="ilp"`` finds the optimal alignment (mip/CBC, about 5x slower).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from parasim.amr.graph import Triple

#: Random starts of the hill-climber (smatchpp's default is 4).
DEFAULT_RESTARTS = 4


@lru_cache(maxsize=1)
def _exact_matcher():
    """smatchpp's identity matcher without its ``str()`` of both triples (a third of the time)."""
    from smatchpp import interfaces

    class ExactTripleMatcher(interfaces.TripleMatcher):
        @staticmethod
        def _triplematch(t1, t2) -> int:
            return int(t1 == t2)

    return ExactTripleMatcher()


@lru_cache(maxsize=1)
def _aligner_class():
    """smatchpp's GraphAligner without the debug messages it formats on every call.

    ``GraphAligner.align`` builds its debug strings eagerly (``str.format`` of the match dicts,
    the alignment array and an interpretable mapping) whatever the log level: a fifth of the
    time of a Smatch call. This is the same sequence of steps without them.
    """
    from smatchpp import align

    class QuietGraphAligner(align.GraphAligner):
        def align(self, triples1, triples2, var1, var2):
            if not var1 or not var2:
                return np.array([]), {}, (0, 0)
            var_index = {v: i for i, v in enumerate(sorted(var1))}
            var_index.update({v: i for i, v in enumerate(sorted(var2))})
            unary, binary = self._compute_match_dicts(triples1, triples2, var1, var2, var_index)
            size = max(len(var1), len(var2))
            alignmat, objective, bound = self.solver.solve(unary, binary, size)
            return alignmat, var_index, (objective, bound)

    return QuietGraphAligner


class NumpyHillClimber:
    """smatchpp's hill-climbing search over variable alignments, with every swap's gain at once.

    Same objective as ``smatchpp.solvers.HillClimber`` (the unary and binary match tables that
    smatchpp's aligner builds), same moves (swap the targets of two variables) and random starts,
    but each step scores all n*(n-1)/2 swaps with numpy (:func:`swap_gains`, O(n^2 + matching
    edge pairs)) instead of one at a time in Python, then takes the best one. The first start is
    the greedy one (best unary matches first, as the ``smatch`` package's smart start), the
    others random from a seeded generator. Profiled on the WET site's pairs, smatchpp's
    ``_get_best_switch`` / ``_gain_of_switch`` were the largest cost of the 15 aspects
    (BENCHMARKS.md, issue 13).

    Args:
        restarts: Starts (the greedy one included).
        seed: Seed of the random starts.
    """

    def __init__(self, restarts: int = DEFAULT_RESTARTS, seed: int = 0) -> None:
        self.restarts = max(1, restarts)
        self.seed = seed

    def solve(self, unary, binary, size: int):
        """(alignment array: variable i of graph 1 -> j of graph 2, objective, bound)."""
        n = int(size)
        if n == 0:
            return np.zeros(0, int), 0.0, 0.0
        u = np.zeros((n, n))
        for (i, j), w in unary.items():
            u[i, j] += w
        keys = [k for k, w in binary.items() if w]
        ent = (
            np.array(keys, dtype=np.int64).reshape(-1, 4).T,
            np.array([binary[k] for k in keys], dtype=np.float64),
        )
        rng = np.random.default_rng(self.seed)
        best_p, best = None, -1.0
        for start in range(self.restarts):
            p = _greedy_start(u) if start == 0 else rng.permutation(n)
            p, score = _climb(u, ent, p)
            if score > best + 1e-9:
                best_p, best = p, score
        return best_p, best, 10000000


Entries = tuple[np.ndarray, np.ndarray]  # ((a, x, c, y) index rows, weights): B[a, x, c, y]


def _objective(u: np.ndarray, ent: Entries, p: np.ndarray) -> float:
    (a, x, c, y), w = ent
    return float(u[np.arange(len(p)), p].sum() + w[(p[a] == x) & (p[c] == y)].sum())


def _greedy_start(u: np.ndarray) -> np.ndarray:
    """Each variable to its best free unary match, best matches first (ties: lower index)."""
    n = u.shape[0]
    p = np.full(n, -1)
    used = np.zeros(n, bool)
    order = np.lexsort((np.arange(n * n), -u.ravel()))
    for flat in order:
        i, j = divmod(int(flat), n)
        if p[i] < 0 and not used[j]:
            p[i], used[j] = j, True
    return p


def swap_gains(u: np.ndarray, ent: Entries, p: np.ndarray) -> np.ndarray:
    """Objective change of swapping the targets of variables i and k, for every i < k (else 0).

    The pair table B (``ent``: smatchpp's binary matches, symmetric: B[a,x,c,y] = B[c,y,a,x])
    is sparse. With j = p(i), m = p(k), the change of the pair terms is
    g[i,m] - g[i,j] + g[k,j] - g[k,m] (g[a,x]: 2 B[a,x,c,p(c)] summed over c), less what g
    counted inside {i, k} at the old targets, plus the terms inside {i, k}:
    -2B[i,m,i,j] - 2B[i,m,k,m] - 2B[k,j,i,j] - 2B[k,j,k,m] + B[i,j,i,j] + B[k,m,k,m]
    + 2B[i,j,k,m] + B[i,m,i,m] + B[k,j,k,j] + 2B[i,m,k,j]; each is scattered from the entries.
    """
    n = len(p)
    pinv = np.empty(n, dtype=np.int64)
    pinv[p] = np.arange(n)
    ii, kk = np.arange(n)[:, None], np.arange(n)[None, :]
    j, m = p[:, None], p[None, :]
    gain = u[ii, m] + u[kk, j] - u[ii, j] - u[kk, m]
    (a, x, c, y), w = ent
    if len(w):
        # scatters as bincounts of flat cell indices (np.add.at is several times slower); the
        # weights are whole numbers, so the sums do not depend on their order
        live = p[c] == y
        g = np.bincount(a[live] * n + x[live], 2.0 * w[live], n * n).reshape(n, n)
        gain += g[ii, m] - g[ii, j] + g[kk, j] - g[kk, m]
        self_ = a == c
        pa, pc = p[a], p[c]
        rows, cols, ws = [], [], []

        def both(r, q, v):  # cells (r, q) and (q, r)
            rows.extend((r, q))
            cols.extend((q, r))
            ws.extend((v, v))

        # B[i,m,i,j] (-2) and B[i,m,i,m] (+1): cell (i, pinv[x]); B[k,j,k,m] (-2), B[k,j,k,j] (+1)
        e = self_ & (y == pa)
        both(a[e], pinv[x[e]], -2.0 * w[e])
        e = self_ & (x == y)
        both(a[e], pinv[x[e]], w[e])
        # B[i,m,k,m] and B[k,j,i,j] (-2 each): cells (a, c) and (c, a) when x = y = p(c)
        e = (x == pc) & (y == pc)
        both(a[e], c[e], -2.0 * w[e])
        # 2B[i,j,k,m]: cell (a, c) when x = p(a), y = p(c); 2B[i,m,k,j]: x = p(c), y = p(a)
        for e in ((x == pa) & (y == pc), (x == pc) & (y == pa)):
            rows.append(a[e])
            cols.append(c[e])
            ws.append(2.0 * w[e])
        flat = np.concatenate(rows) * n + np.concatenate(cols)
        t = np.bincount(flat, np.concatenate(ws), n * n).reshape(n, n)
        # B[i,j,i,j] (+1) and B[k,m,k,m] (+1): a row and a column term
        e = self_ & (x == pa) & (y == pa)
        r = np.bincount(a[e], w[e], n)
        t += r[:, None] + r[None, :]
        gain += t
    return np.where(ii < kk, gain, 0.0)


def _climb(u: np.ndarray, ent: Entries, p: np.ndarray) -> tuple[np.ndarray, float]:
    """Best-swap hill climbing from ``p`` to a local optimum; returns it and its objective."""
    n = len(p)
    p = p.copy()
    for _ in range(n * n + 10):  # each swap gains > 0: ends long before this
        gain = swap_gains(u, ent, p)
        flat = int(np.argmax(gain))
        if gain.flat[flat] <= 1e-9:
            break
        i, k = divmod(flat, n)
        p[i], p[k] = p[k], p[i]
    return p, _objective(u, ent, p)


@lru_cache(maxsize=8)
def _aligner(solver: str, restarts: int):
    from smatchpp import preprocess, score, solvers

    if solver == "hillclimber":
        impl = NumpyHillClimber(restarts)
    elif solver == "hillclimber-smatchpp":
        impl = solvers.HillClimber(rand_inits=restarts)
    elif solver == "ilp":
        impl = solvers.ILP()
    else:
        raise ValueError(
            f"unknown Smatch solver {solver!r}: 'hillclimber', 'hillclimber-smatchpp' or 'ilp'"
        )
    matcher = _exact_matcher()
    return (
        preprocess.BasicGraphPairPreparer(),
        _aligner_class()(matcher, impl),
        score.TripleScorer(matcher),
    )


def smatch_counts(
    triples1: Sequence[Triple],
    triples2: Sequence[Triple],
    solver: str = "hillclimber",
    restarts: int = DEFAULT_RESTARTS,
    seed: int = 0,
) -> tuple[float, int, int]:
    """Matched triples under the best alignment found, and the two triple counts.

    Args:
        triples1: Triples of the first graph; a variable is a source of an ``:instance`` triple.
        triples2: Triples of the second graph.
        solver: ``"hillclimber"`` (default) or ``"ilp"``.
        restarts: Random starts of the hill-climber.
        seed: Seed of the hill-climber's starts.

    Returns:
        (matched triples, len(triples1), len(triples2)).
    """
    t1, t2 = list(dict.fromkeys(triples1)), list(dict.fromkeys(triples2))
    if not t1 or not t2:
        return 0.0, len(t1), len(t2)
    preparer, aligner, scorer = _aligner(solver, restarts)
    g1, g2, v1, v2 = preparer.prepare_get_vars(t1, t2)
    state = random.getstate()
    random.seed(seed)
    try:
        alignment, varindex, _ = aligner.align(g1, g2, v1, v2)
    finally:
        random.setstate(state)
    if not varindex:  # one side has no variables: only constant-free triples can match
        return float(len(set(g1) & set(g2))), len(t1), len(t2)
    # smatchpp's TripleScorer compares every triple with every other in Python (a third of the
    # time of a call); with exact matching its count is the multiset intersection of the triples
    # of graph 1 renamed by the alignment and those of graph 2, counted here directly.
    mapped = list(g1)
    scorer._map_triples(mapped, alignment, varindex)
    c2 = Counter(g2)
    matched = sum(min(n, c2[t]) for t, n in Counter(mapped).items() if t in c2)
    return float(matched), len(t1), len(t2)


def f1(matched: float, n1: int, n2: int, empty: float = 1.0) -> float:
    """Smatch F1 from counts; ``empty`` when both sides have no triples."""
    if n1 + n2 == 0:
        return empty
    return min(1.0, 2.0 * matched / (n1 + n2))


def smatch_f1(
    triples1: Sequence[Triple],
    triples2: Sequence[Triple],
    solver: str = "hillclimber",
    restarts: int = DEFAULT_RESTARTS,
) -> float:
    """Smatch F1 of two triple sets (1.0 when both are empty)."""
    return f1(*smatch_counts(triples1, triples2, solver, restarts))
