"""The entity-enriched Siamese model's measures: accuracy, F1 and ROC AUC of a binary scorer."""

from __future__ import annotations

from collections.abc import Sequence


def roc_auc(scores: Sequence[float], gold: Sequence[int]) -> float | None:
    """ROC AUC (Mann-Whitney U with average ranks); None with one class."""
    import numpy as np
    from scipy.stats import rankdata

    y = np.asarray(gold, int)
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    if not pos or not neg:
        return None
    r = rankdata(np.asarray(scores, float))
    return float((r[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def binary_scores(gold: Sequence[int], pred: Sequence[int], score: Sequence[float]) -> dict:
    tp = sum(g == 1 and p == 1 for g, p in zip(gold, pred, strict=True))
    fp = sum(g == 0 and p == 1 for g, p in zip(gold, pred, strict=True))
    fn = sum(g == 1 and p == 0 for g, p in zip(gold, pred, strict=True))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {
        "accuracy": sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold),
        "f1": f1,
        "auc": roc_auc(score, gold),
    }
