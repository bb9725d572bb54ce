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


@lru_cache(maxsize=8)
def _aligner(solver: str, restarts: int):
    from smatchpp import preprocess, score, solvers

    if solver == "hillclimber":
        impl = solvers.HillClimber(rand_inits=restarts)
    elif solver == "ilp":
        impl = solvers.ILP()
    else:
        raise ValueError(f"unknown Smatch solver {solver!r}: 'hillclimber' or 'ilp'")
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
