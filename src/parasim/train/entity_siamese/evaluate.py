"""The entity-enriched Siamese model's measures and tables: accuracy, F1 and ROC AUC per model on
the corpus test split (overall and per language pair), Spearman on the STS pairs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from parasim.train.core.metrics import spearman

from .data import Pairs

#: The models scored by a cosine and a threshold (the others by a probability, similar at 0.5).
COSINE_MODELS = ("siamese", "untrained")


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
    """Accuracy, F1 of the similar class and ROC AUC of one model's predictions and scores."""
    tp = sum(g == 1 and p == 1 for g, p in zip(gold, pred, strict=True))
    fp = sum(g == 0 and p == 1 for g, p in zip(gold, pred, strict=True))
    fn = sum(g == 1 and p == 0 for g, p in zip(gold, pred, strict=True))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {
        "accuracy": sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold),
        "f1": f1,
        "auc": roc_auc(score, gold),
    }


def binary_table(
    test: Pairs,
    scores: Mapping[str, Sequence[float]],
    cuts: Mapping[str, float],
    majority: int,
    features: Sequence[str],
) -> dict[str, Any]:
    """``{"all": row, "lang_pairs": {lang pair: row}}``: each model's :func:`binary_scores` on
    the test pairs (``scores``: model -> one score per pair; similar when a cosine exceeds its
    cut in ``cuts``, a probability is 0.5 or more), the majority class's accuracy and each entity
    cosine's AUC alone (missing: 1.0, the scores stage's empty-sides value)."""

    def row_for(idx: list[int]) -> dict:
        gold = [int(test.label[i]) for i in idx]
        row: dict[str, Any] = {"rows": len(idx)}
        for k, s in scores.items():
            sc = [s[i] for i in idx]
            row[k] = binary_scores(gold, [int(v > cuts[k]) if k in COSINE_MODELS
                                          else int(v >= 0.5) for v in sc], sc)  # fmt: skip
        row["majority"] = {"accuracy": sum(g == majority for g in gold) / len(gold)}
        for j, f in enumerate(features):
            row[f] = {"auc": roc_auc([1.0 if test.ents[i][j] is None else test.ents[i][j]
                                      for i in idx], gold)}  # fmt: skip
        return row

    return {
        "all": row_for(list(range(len(test)))),
        "lang_pairs": {
            lp: row_for([i for i, x in enumerate(test.lang_pair) if x == lp])
            for lp in sorted(set(test.lang_pair))
        },
    }


def sts_row(
    pairs: Pairs, scores: Mapping[str, Sequence[float]], features: Sequence[str]
) -> dict[str, Any]:
    """Spearman of each model's scores (``scores``: model -> one per pair) and of each entity
    cosine alone against the STS gold scores of ``pairs``."""
    row: dict[str, Any] = {"pairs": len(pairs)}
    row.update({k: spearman(s, pairs.label) for k, s in scores.items()})
    for j, f in enumerate(features):
        row[f] = spearman([e[j] for e in pairs.ents], pairs.label)
    return row
