"""Smatch through smatchpp: align the variables of two triple sets, count matching triples.

smatchpp (by the author of the aspect metrics of seed 002) does the alignment; parasim only
hands it triples it has normalised itself (:mod:`parasim.amr.graph`). Its hill-climber draws
random starts from Python's ``random`` module: :func:`smatch_counts` seeds a private state for
each call and restores the caller's afterwards, so scores are the same on every run and in every
process. ``solver="ilp"`` finds the optimal alignment (mip/CBC, about 5x slower).

The default solver climbs in C (``climb.c``, compiled on first use by :mod:`parasim.native`);
without a C compiler the same climb runs in numpy, with the same results.
"""

from __future__ import annotations

import ctypes
import logging
import random
from collections import Counter, defaultdict
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np

from parasim.amr.graph import Triple

log = logging.getLogger(__name__)
_CLIMB_SRC = Path(__file__).with_name("climb.c")
_I64P, _F64P = ctypes.POINTER(ctypes.c_int64), ctypes.POINTER(ctypes.c_double)

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
        def _compute_match_dicts(self, triples1, triples2, var1, var2, var_index):
            """smatchpp's unary and binary match tables for exact triple matching, built by
            hash joins on the relation (and constant) instead of comparing every triple pair
            in Python: the same tables (tested), a fraction of the time."""
            return (
                _unary_matches(triples1, triples2, var1, var2, var_index),
                _binary_matches(triples1, triples2, var1, var2, var_index),
            )

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


def _unary_matches(triples1, triples2, var1, var2, var_index) -> Counter:
    """``GraphAligner._make_unary_match_dict`` under exact matching: triples with one variable
    match on (relation, constant) when the variable is the source, on (constant, relation) when
    it is the target; every pair of such triples adds 1 to (variable 1, variable 2)."""
    # graph 2's one-variable triples: (relation, constant) -> {variable: count} for a variable
    # source, (constant, relation) -> {variable: count} for a variable target
    by_source, by_target = defaultdict(Counter), defaultdict(Counter)
    for s, r, t in triples2:
        if (s in var2) != (t in var2):
            if s in var2:
                by_source[(r, t)][var_index[s]] += 1
            else:
                by_target[(s, r)][var_index[t]] += 1
    data = Counter()
    for s, r, t in triples1:
        if (s in var1) == (t in var1):
            continue
        if s in var1:
            i, hits = var_index[s], by_source.get((r, t), {})
        else:
            i, hits = var_index[t], by_target.get((s, r), {})
        for j, k in hits.items():
            data[(i, j)] += k
    return data


def _binary_matches(triples1, triples2, var1, var2, var_index) -> Counter:
    """``GraphAligner._make_binary_match_dict`` under exact matching: triples between two
    variables match on the relation; each matching pair adds min(counts) / 2 to both
    (s1, s2, t1, t2) and (t1, t2, s1, s2)."""
    c1 = Counter(tr for tr in triples1 if tr[0] in var1 and tr[2] in var1)
    c2 = Counter(tr for tr in triples2 if tr[0] in var2 and tr[2] in var2)
    by_rel = {}
    for (s, r, t), k in c2.items():
        by_rel.setdefault(r, []).append((var_index[s], var_index[t], k))
    data = Counter()
    for (s, r, t), k1 in c1.items():
        i, j = var_index[s], var_index[t]
        for io, jo, k2 in by_rel.get(r, ()):
            half = min(k1, k2) / 2
            data[(i, io, j, jo)] += half
            data[(j, jo, i, io)] += half
    return data


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
        idx = np.array(keys, dtype=np.int64).reshape(-1, 4).T.copy()  # rows a, x, c, y
        ent = (idx, np.array([binary[k] for k in keys], dtype=np.float64))
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


@lru_cache(maxsize=1)
def _native_climb():
    """``parasim_climb`` of ``climb.c`` through ctypes, or None where it cannot be built."""
    from parasim.native import build

    so, why = build(_CLIMB_SRC)
    if so is None:
        log.warning("Smatch hill-climber runs in numpy (%s): same results, slower", why)
        return None
    f = ctypes.CDLL(so).parasim_climb
    f.restype = ctypes.c_double
    f.argtypes = [ctypes.c_int64, _F64P, ctypes.c_int64, _I64P, _I64P, _I64P, _I64P, _F64P, _I64P]
    return f


def _climb(
    u: np.ndarray, ent: Entries, p: np.ndarray, native: bool = True
) -> tuple[np.ndarray, float]:
    """Best-swap hill climbing from ``p`` to a local optimum; returns it and its objective.

    ``native``: climb in C where it is built (the same steps, tie-breaks and result as the numpy
    loop below, which runs otherwise).
    """
    n = len(p)
    f = _native_climb() if native else None
    if f is not None:
        u = np.ascontiguousarray(u, dtype=np.float64)
        (a, x, c, y), w = ent
        rows = [np.ascontiguousarray(r, dtype=np.int64) for r in (a, x, c, y)]
        w = np.ascontiguousarray(w, dtype=np.float64)
        q = np.array(p, dtype=np.int64)
        obj = f(
            n, u.ctypes.data_as(_F64P), len(w), *(r.ctypes.data_as(_I64P) for r in rows),
            w.ctypes.data_as(_F64P), q.ctypes.data_as(_I64P),
        )  # fmt: skip
        if obj >= 0:  # -1: out of memory in C; climb in numpy instead
            return q, float(obj)
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
