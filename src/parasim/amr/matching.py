"""Smatch through smatchpp: align the variables of two triple sets, count matching triples.

smatchpp (by the author of the aspect metrics of seed 002) does the alignment; parasim only
hands it triples it has normalised itself (:mod:`parasim.amr.graph`). Its hill-climber draws
random starts from Python's ``random`` module: :func:`smatch_counts` seeds a private state for
each call and restores the caller's afterwards, so scores are the same on every run and in every
process. ``solver="ilp"`` finds the optimal alignment (mip/CBC, about 5x slower).
"""

from __future__ import annotations

import random
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


#: Above this many variables the dense gain tables of :class:`NumpyHillClimber` (n**4 floats)
#: get large: smatchpp's own hill-climber takes over.
DENSE_MAX_VARS = 40


class NumpyHillClimber:
    """smatchpp's hill-climbing search over variable alignments, with every swap's gain at once.

    Same objective as ``smatchpp.solvers.HillClimber`` (the unary and binary match tables that
    smatchpp's aligner builds), same moves (swap the targets of two variables) and random starts,
    but each step scores all n*(n-1)/2 swaps with numpy instead of one at a time in Python, then
    takes the best one; the first start is the greedy one (best unary matches first, as the
    ``smatch`` package's smart start), the others random from a seeded generator. Profiled on
    the WET site's pairs, smatchpp's ``_get_best_switch`` / ``_gain_of_switch`` were 60 % of the
    time of all 15 aspects (BENCHMARKS.md, issue 13). Beyond :data:`DENSE_MAX_VARS` variables
    it hands over to smatchpp's climber.

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
        if n > DENSE_MAX_VARS:
            from smatchpp import solvers

            state = random.getstate()
            random.seed(self.seed)
            try:
                return solvers.HillClimber(rand_inits=self.restarts).solve(unary, binary, n)
            finally:
                random.setstate(state)
        u = np.zeros((n, n))
        for (i, j), w in unary.items():
            u[i, j] += w
        b = np.zeros((n, n, n, n))
        for (i, j, k, m), w in binary.items():
            b[i, j, k, m] += w
        rng = np.random.default_rng(self.seed)
        best_p, best = None, -1.0
        for start in range(self.restarts):
            p = _greedy_start(u) if start == 0 else rng.permutation(n)
            p, score = _climb(u, b, p)
            if score > best + 1e-9:
                best_p, best = p, score
        return best_p, best, 10000000


def _objective(u: np.ndarray, b: np.ndarray, p: np.ndarray) -> float:
    idx = np.arange(len(p))
    return float(u[idx, p].sum() + b[idx[:, None], p[:, None], idx[None, :], p[None, :]].sum())


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


def swap_gains(u: np.ndarray, b: np.ndarray, bt: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Objective change of swapping the targets of variables i and k, for every i < k (else 0).

    ``bt`` is ``b + b.transpose(2, 3, 0, 1)`` (pair terms counted from either end).
    """
    n = len(p)
    idx = np.arange(n)
    ii, kk = idx[:, None], idx[None, :]
    j, m = p[:, None], p[None, :]  # j = p[i], m = p[k] on the (i, k) grid
    # g[a, x]: pair terms of a -> x against every variable's current target
    g = bt[:, :, idx, p].sum(axis=2)
    gain = u[ii, m] + u[kk, j] - u[ii, j] - u[kk, m]
    gain = gain + g[ii, m] - g[ii, j] + g[kk, j] - g[kk, m]
    # g counted the pairs inside {i, k} at their old targets: take them out, put in the new
    gain -= bt[ii, m, ii, j] + bt[ii, m, kk, m] - bt[ii, j, ii, j] - bt[ii, j, kk, m]
    gain -= bt[kk, j, ii, j] + bt[kk, j, kk, m] - bt[kk, m, ii, j] - bt[kk, m, kk, m]
    new = b[ii, m, ii, m] + b[ii, m, kk, j] + b[kk, j, ii, m] + b[kk, j, kk, j]
    old = b[ii, j, ii, j] + b[ii, j, kk, m] + b[kk, m, ii, j] + b[kk, m, kk, m]
    gain += new - old
    return np.where(ii < kk, gain, 0.0)


def _climb(u: np.ndarray, b: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, float]:
    """Best-swap hill climbing from ``p`` to a local optimum; returns it and its objective."""
    n = len(p)
    p = p.copy()
    bt = b + b.transpose(2, 3, 0, 1)
    for _ in range(n * n + 10):  # each swap gains > 0: ends long before this
        gain = swap_gains(u, b, bt, p)
        flat = int(np.argmax(gain))
        if gain.flat[flat] <= 1e-9:
            break
        i, k = divmod(flat, n)
        p[i], p[k] = p[k], p[i]
    return p, _objective(u, b, p)


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
    matched = scorer.score(g1, g2, alignment, varindex)
    return float(matched[0]), len(t1), len(t2)


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
