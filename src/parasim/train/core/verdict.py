"""Whether a trained model beats its untrained baseline: a paired bootstrap and a verdict.

Every family measures its model and the untrained baseline on the same evaluation items and
calls :func:`compare` with a statistic of each over any resample of those items (accuracy,
macro F1, Spearman, a mean). The verdict is one of :data:`VERDICTS`:

* ``better``: the 95 % bootstrap interval of (model - baseline) lies above 0;
* ``no better``: the interval lies below 0 (worse), or it holds 0 and is narrow enough
  (half-width at most :data:`MAX_HALF_WIDTH`) to say the two are within that of each other;
* ``too little data to tell``: fewer than :data:`MIN_ITEMS` items, or an interval that holds 0
  and is wider than that.

Why these cut-offs. Below 30 items one item moves an accuracy by more than 3 points and the
bootstrap's percentile interval is unreliable (a 6-row test split can only resample 7 distinct
accuracies); at 30 items and accuracies near 0.8 the standard error of one model's accuracy is
already 0.07. A half-width of 0.05 is the largest at which the figures the shipped run compares
(differences of 0.03 to 0.09 between a model and its baseline, issue 34) can be told apart from
no difference; an evaluation whose interval is wider than that and holds 0 cannot say either way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

#: The three verdicts.
VERDICTS = ("better", "no better", "too little data to tell")
#: Fewer evaluation items than this: too little data (see the module docstring).
MIN_ITEMS = 30
#: An interval holding 0 and wider than +- this: too little data (see the module docstring).
MAX_HALF_WIDTH = 0.05
#: Bootstrap resamples.
N_BOOT = 1000

#: ``stat(indices) -> value`` over a resample of the evaluation items (None: undefined).
Stat = Callable[[Sequence[int]], "float | None"]


def accuracy_stat(gold: Sequence[Any], pred: Sequence[Any]) -> Stat:
    """Accuracy of ``pred`` against ``gold`` over the resampled items."""
    ok = [int(g == p) for g, p in zip(gold, pred, strict=True)]
    return lambda idx: sum(ok[i] for i in idx) / len(idx) if len(idx) else None


def macro_f1_stat(gold: Sequence[bool], pred: Sequence[bool]) -> Stat:
    """Macro F1 of both classes (as :func:`parasim.train.core.metrics.best_threshold`)."""
    from parasim.train.core.metrics import prf

    def stat(idx):
        g = [bool(gold[i]) for i in idx]
        p = [bool(pred[i]) for i in idx]
        return (prf(g, p, True)["f1"] + prf(g, p, False)["f1"]) / 2

    return stat


def spearman_stat(gold: Sequence[float], scores: Sequence[float]) -> Stat:
    """Spearman's rho of ``scores`` with ``gold`` over the resampled items."""
    from parasim.train.core.metrics import spearman

    return lambda idx: spearman([gold[i] for i in idx], [scores[i] for i in idx])


def mean_spearman_stat(gold: Sequence[Sequence[float]], scores: Sequence[Sequence[float]]) -> Stat:
    """Mean over several targets (e.g. S3BERT's aspects) of Spearman's rho; ``gold[k][i]`` and
    ``scores[k][i]``: target k, item i. Targets undefined on a resample are left out."""
    from parasim.train.core.metrics import spearman

    def stat(idx):
        vals = [
            spearman([g[i] for i in idx], [s[i] for i in idx])
            for g, s in zip(gold, scores, strict=True)
        ]
        vals = [v for v in vals if v is not None]
        return sum(vals) / len(vals) if vals else None

    return stat


def mean_stat(values: Sequence[float]) -> Stat:
    """Mean of per-item values (e.g. a retrieval hit of 0 or 1) over the resampled items."""
    return lambda idx: sum(values[i] for i in idx) / len(idx) if len(idx) else None


def compare(
    model: Stat,
    baseline: Stat,
    n: int,
    *,
    measure: str,
    baseline_name: str,
    evaluated_on: str,
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> dict[str, Any]:
    """The model against its baseline on ``n`` paired evaluation items: figures and verdict.

    Args:
        model: the model's statistic over a resample of item indices (:data:`Stat`).
        baseline: the baseline's, over the same resample.
        n: the evaluation items.
        measure: what the statistic is ("dev macro F1", "test accuracy"...).
        baseline_name: what the baseline is ("untrained e5 cosine"...).
        evaluated_on: the evaluation set, in words.
        seed: the bootstrap's random seed.

    Returns:
        ``{"measure", "evaluated_on", "n", "model", "baseline", "baseline_name", "difference",
        "ci95": [lo, hi] or None, "verdict", "why", "below_baseline"}``.
    """
    import random

    idx = list(range(n))
    m = model(idx) if n else None
    b = baseline(idx) if n else None
    out: dict[str, Any] = {
        "measure": measure,
        "evaluated_on": evaluated_on,
        "n": n,
        "model": m,
        "baseline": b,
        "baseline_name": baseline_name,
        "difference": None if m is None or b is None else m - b,
        "ci95": None,
        "min_items": MIN_ITEMS,
        "max_half_width": MAX_HALF_WIDTH,
    }
    out["below_baseline"] = out["difference"] is not None and out["difference"] < 0
    if m is None or b is None:
        return {**out, "verdict": VERDICTS[2], "why": "the measure is undefined on this set"}
    if n >= 2:
        rng = random.Random(seed)
        diffs = []
        for _ in range(n_boot):
            s = [rng.randrange(n) for _ in idx]
            dm, db = model(s), baseline(s)
            if dm is not None and db is not None:
                diffs.append(dm - db)
        if len(diffs) >= n_boot // 2:
            diffs.sort()
            lo = diffs[int(0.025 * (len(diffs) - 1))]
            hi = diffs[int(round(0.975 * (len(diffs) - 1)))]
            out["ci95"] = [lo, hi]
    out["verdict"], out["why"] = _verdict(n, out["ci95"])
    return out


def _verdict(n: int, ci: list[float] | None) -> tuple[str, str]:
    if n < MIN_ITEMS:
        return VERDICTS[2], f"{n} evaluation items, fewer than {MIN_ITEMS}"
    if ci is None:
        return VERDICTS[2], "no bootstrap interval (the measure is undefined on most resamples)"
    lo, hi = ci
    if lo > 0:
        return VERDICTS[0], "the 95 % interval of the difference lies above 0"
    if hi < 0:
        return VERDICTS[1], "worse: the 95 % interval of the difference lies below 0"
    if (hi - lo) / 2 <= MAX_HALF_WIDTH:
        return VERDICTS[1], f"the 95 % interval holds 0 and is within +-{MAX_HALF_WIDTH}"
    return VERDICTS[2], f"the 95 % interval holds 0 and is wider than +-{MAX_HALF_WIDTH}"


def fmt(x: float | None) -> str:
    """A figure as the table and the cards print it."""
    return "n/a" if x is None else f"{x:.3f}"


def headline(v: dict[str, Any], needs: str = "", shipped_start: bool | str = False) -> str:
    """The first line of a model card: the verdict and the figures (and, below the baseline,
    what the model would need). ``shipped_start``: the folder holds the untrained start (a
    sentence saying so is added; a string is that sentence, for a model of several parts)."""
    ci = v.get("ci95")
    ci_s = f" [{fmt(ci[0])}, {fmt(ci[1])}]" if ci else ""
    diff = v.get("difference")
    figures = (
        f"{v['measure']} {fmt(v['model'])} against {fmt(v['baseline'])} for the "
        f"{v['baseline_name']} (difference {'n/a' if diff is None else f'{diff:+.3f}'}{ci_s}, "
        f"{v['n']} items of {v['evaluated_on']})"
    )
    if v["verdict"] == "better":
        text = f"**Better than its untrained baseline**: {figures}."
    elif v.get("below_baseline"):
        text = f"**Below its untrained baseline** ({v['verdict']}: {v['why']}): {figures}."
    elif v["verdict"] == "no better":
        text = f"**No better than its untrained baseline** ({v['why']}): {figures}."
    else:
        text = f"**Too little data to tell** ({v['why']}): {figures}."
    if isinstance(shipped_start, str):
        text += f" {shipped_start}"
    elif shipped_start:
        text += (
            " Training only made it worse on its dev split: this folder holds its untrained "
            "start (step 0)."
        )
    if v["verdict"] != "better" and needs:
        text += f" It would need {needs}."
    return text
