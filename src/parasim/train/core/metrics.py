"""Measures more than one model family reports (as scikit-learn and scipy compute them).

Pure Python, except :func:`spearman` and :func:`row_cosines` (numpy, scipy, imported when
called)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence


def prf(gold: Sequence, pred: Sequence, cls) -> dict[str, float]:
    """Precision, recall and F1 of class ``cls`` (0 where undefined, like scikit-learn)."""
    tp = sum(g == cls and p == cls for g, p in zip(gold, pred, strict=True))
    fp = sum(g != cls and p == cls for g, p in zip(gold, pred, strict=True))
    fn = sum(g == cls and p != cls for g, p in zip(gold, pred, strict=True))
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"precision": p, "recall": r, "f1": f, "support": sum(g == cls for g in gold)}


def class_report(gold: Sequence, pred: Sequence, classes: Sequence) -> dict[str, dict]:
    """Per-class P/R/F1 plus their support-weighted average (``weighted``), as seed 000 Table 3."""
    out = {str(c): prf(gold, pred, c) for c in classes}
    total = len(gold)
    out["weighted"] = {
        m: sum(out[str(c)][m] * out[str(c)]["support"] for c in classes) / total if total else 0.0
        for m in ("precision", "recall", "f1")
    }
    out["weighted"]["support"] = total
    return out


def best_threshold(scores: Sequence[float], positive: Sequence[bool]) -> tuple[float, float]:
    """Threshold t (positive when score > t) maximising the macro F1 of both classes: (t, F1).

    Macro, not weighted: a synthetic ranking group holds one equivalent row and several
    divergent ones, and weighted F1 there would push t towards "all divergent". One sorted sweep.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("best_threshold: no scores")
    pairs = sorted(zip(scores, positive, strict=True))
    n_pos = sum(positive)
    n_neg = n - n_pos

    def macro(tp: int, fp: int) -> float:
        fn, tn = n_pos - tp, n_neg - fp
        f_pos = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        f_neg = 2 * tn / (2 * tn + fn + fp) if tn else 0.0
        return (f_pos + f_neg) / 2

    # everything above the first cut is positive
    tp, fp = n_pos, n_neg
    best = (pairs[0][0] - 1e-6, macro(tp, fp))
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            tp -= pairs[j][1]
            fp -= not pairs[j][1]
            j += 1
        cut = (pairs[i][0] + pairs[j][0]) / 2 if j < n else pairs[i][0]
        f = macro(tp, fp)
        if f > best[1]:
            best = (cut, f)
        i = j
    return best


def token_f1(gold: Sequence[bool], pred: Sequence[bool]) -> dict[str, float]:
    """F1 of the DIV and EQ token classes and their product (seed 000 Table 4's F1-Mul)."""
    div = prf(gold, pred, True)["f1"]
    eq = prf(gold, pred, False)["f1"]
    return {"f1_div": div, "f1_eq": eq, "f1_mul": div * eq}


def equal_error_threshold(scores: Sequence[float], positive: Sequence[bool]) -> tuple[float, float]:
    """Threshold t (positive when score > t) where both classes' error rates are closest: (t, rate).

    The rate is the mean of the two (false-negative share of the positives, false-positive share
    of the negatives) at t. Unlike the macro-F1 cut of :func:`best_threshold` it does not depend
    on the class ratio, and where the classes overlap it does not slide to one tail: on parasim's
    synthetic dev split (1 equivalent to 3.6 divergent rows, near-identical scores) the macro-F1
    cut called 2 % of REFreSD equivalent, this one 21 % (BENCHMARKS.md, issue 14). One sorted sweep.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("equal_error_threshold: no scores")
    n_pos = sum(positive)
    n_neg = n - n_pos
    if not n_pos or not n_neg:
        return best_threshold(scores, positive)[0], 0.0
    pairs = sorted(zip(scores, positive, strict=True))
    fn, fp = 0, n_neg  # below the cut: positives missed; above it: negatives kept
    # everything above the first cut is positive
    best = (1.0, pairs[0][0] - 1e-6, 0.5)
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            fn += pairs[j][1]
            fp -= not pairs[j][1]
            j += 1
        cut = (pairs[i][0] + pairs[j][0]) / 2 if j < n else pairs[i][0]
        fnr, fpr = fn / n_pos, fp / n_neg
        if abs(fnr - fpr) < best[0]:
            best = (abs(fnr - fpr), cut, (fnr + fpr) / 2)
        i = j
    return best[1], best[2]


def accuracy_threshold(scores: Sequence[float], gold: Sequence[int]) -> tuple[float, float]:
    """The threshold t (similar when score > t) with the best accuracy on (scores, gold): (t, acc).

    One sorted sweep; cuts lie midway between distinct scores.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("accuracy_threshold: no scores")
    pairs = sorted(zip(scores, gold, strict=True))
    correct = sum(gold)  # everything above the lowest cut predicted similar
    best = (pairs[0][0] - 1e-6, correct / n)
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            correct += 1 if pairs[j][1] == 0 else -1
            j += 1
        cut = (pairs[i][0] + pairs[j][0]) / 2 if j < n else pairs[i][0]
        if correct / n > best[1]:
            best = (cut, correct / n)
        i = j
    return best


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None with fewer than 3 pairs or a constant side."""
    import numpy as np
    from scipy.stats import rankdata

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def row_cosines(a, b):
    """Cosine of each row of ``a`` with the same row of ``b`` (numpy arrays; a zero row: 0)."""
    import numpy as np

    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(na * nb, 1e-12)


def accuracy_by_grade(
    grades: Sequence[str | None], gold: Sequence[int], said: Mapping[str, Sequence[int]]
) -> dict[str, dict]:
    """Per grade of a graded test split (rows without a grade left out): its row count and each
    model's accuracy on its rows, ``{grade: {"rows": n, model: accuracy}}`` with ``said`` the
    models' 0/1 calls on every row (a divergent or unrelated row is right when called 0,
    against its gold ``label``)."""
    out: dict[str, dict] = {}
    for grade in sorted({g for g in grades if g is not None}):
        idx = [i for i, g in enumerate(grades) if g == grade]
        row: dict = {"rows": len(idx)}
        for name, calls in said.items():
            row[name] = sum(int(calls[i]) == int(gold[i]) for i in idx) / len(idx)
        out[grade] = row
    return out
