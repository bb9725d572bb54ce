"""A sentence encoder's cosine on REFreSD dev and STSb-multi-mt across languages: the sets, the
thresholds, the measures and the paired comparisons of two encoders.

* REFreSD dev (:mod:`.refresd`): the cosine of the English and French sides. Binary weighted
  F1 (equivalent above the threshold) and 3-class weighted F1 (no meaning difference above t1,
  unrelated at or below t2, some meaning difference between), the thresholds picked on the dev
  set itself, each encoder its own: the best weighted F1 over every cut for the binary task,
  over a grid of the cosine's quantiles for t2 <= t1. The rest of REFreSD is held back, so no
  other labelled split exists to pick them on: every encoder is read at its best cut, the
  figures are upper bounds and the comparison between two encoders is even-handed. The
  majority class goes beside them.
* STSb-multi-mt dev across languages (:mod:`.sts`): sentence 1 of the English file against
  sentence 2 of the French (EN-FR) or Spanish (EN-ES) file, row by row; Spearman of the cosine
  with the gold score.

:func:`compare_measured` compares two encoders measure by measure with
:func:`parasim.train.core.verdict.compare` (a paired bootstrap over the items; the thresholds
stay at their dev values). ``parasim bench teach`` and the graded encoder
(:mod:`parasim.train.graded`) measure their encoders here.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parasim.train.core.verdict import N_BOOT

BINARY_CLASSES = ("equivalent", "divergent")
THREE_CLASSES = ("no_meaning_difference", "some_meaning_difference", "unrelated")
#: The name of the REFreSD set in :func:`eval_sets`.
REFRESD = "refresd"
#: The STSb-multi-mt sets across languages: name -> the other language.
STS_SETS = {"stsb en-fr": "fr", "stsb en-es": "es"}
#: Each set, in words (a verdict's ``evaluated_on``).
SET_NAMES = {
    REFRESD: "REFreSD dev",
    "stsb en-fr": "STSb-multi-mt dev, English against French",
    "stsb en-es": "STSb-multi-mt dev, English against Spanish",
}
#: Quantiles of the cosine the 3-class thresholds are picked from (0, 1/40, ..., 1).
QUANTILE_GRID = 40
#: Each measure: (its name in tables and verdicts, the evaluation set it is computed on).
MEASURES = {
    "refresd_binary_weighted_f1": ("REFreSD binary weighted F1", REFRESD),
    "refresd_3class_weighted_f1": ("REFreSD 3-class weighted F1", REFRESD),
    "stsb_en_fr_spearman": ("STSb EN-FR Spearman", "stsb en-fr"),
    "stsb_en_es_spearman": ("STSb EN-ES Spearman", "stsb en-es"),
}

#: The items of the sets: ``{set: {"s1", "s2", ...gold}}`` (REFreSD's gold: ``binary`` and
#: ``label``; STSb's: ``gold``).
Sets = Mapping[str, Mapping[str, list]]


# --- the evaluation sets ------------------------------------------------------------------


def eval_sets(
    refresd: str | os.PathLike | None,
    sts: str | os.PathLike | None,
    sts_max_pairs: int | None = None,
) -> tuple[dict[str, dict[str, list]], dict[str, str]]:
    """The evaluation items found, and the sets missing with why.

    Args:
        refresd: REFreSD's folder (``sentence_labels.dev.tsv``), or None.
        sts: STSb-multi-mt's folder (``stsb-{en,fr,es}-dev.csv``), or None.
        sts_max_pairs: the first this many rows of each STSb set (None: all 1,500).

    Returns:
        ``({set: {"s1", "s2", gold...}}`` (:data:`Sets`), ``{set: why it is missing}``).

    Raises:
        ValueError: two STSb files that differ in length.
    """
    from parasim.train.eval.refresd import SENTENCE_LABELS, read_sentence_labels
    from parasim.train.eval.sts import read_stsb_crosslingual

    sets: dict[str, dict[str, list]] = {}
    missing: dict[str, str] = {}
    labels = Path(refresd) / SENTENCE_LABELS if refresd is not None else None
    if labels is None:
        missing[REFRESD] = "no REFreSD folder given"
    elif not labels.is_file():
        missing[REFRESD] = f"{labels} not found"
    else:
        rows = read_sentence_labels(labels)
        sets[REFRESD] = {
            "s1": [r["en"] for r in rows],
            "s2": [r["fr"] for r in rows],
            "binary": [r["binary"] for r in rows],
            "label": [r["label"] for r in rows],
        }
    for name, lang in STS_SETS.items():
        if sts is None:
            missing[name] = "no STSb-multi-mt folder given"
            continue
        files = [Path(sts) / f"stsb-{x}-dev.csv" for x in ("en", lang)]
        absent = [str(f) for f in files if not f.is_file()]
        if absent:
            missing[name] = f"{', '.join(absent)} not found"
            continue
        rows = read_stsb_crosslingual(sts, lang, sts_max_pairs)
        sets[name] = {
            "s1": [r[0] for r in rows],
            "s2": [r[1] for r in rows],
            "gold": [r[2] for r in rows],
        }
    return sets, missing


def cosines(model, sets: Sets, batch_size: int) -> dict[str, list[float]]:
    """The cosine of each item's two sides under ``model`` (a ``SentenceTransformer``; its
    default prompt, the training prefix, is prepended), every distinct text encoded once."""
    texts = sorted({t for s in sets.values() for side in ("s1", "s2") for t in s[side]})
    if not texts:
        return {name: [] for name in sets}
    vecs = model.encode(
        texts, batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
        show_progress_bar=False,
    )  # fmt: skip
    at = {t: i for i, t in enumerate(texts)}
    out = {}
    for name, s in sets.items():
        a = vecs[[at[t] for t in s["s1"]]]
        b = vecs[[at[t] for t in s["s2"]]]
        out[name] = [round(float(x), 6) for x in (a * b).sum(1)]
    return out


# --- the measures -------------------------------------------------------------------------


def weighted_f1(gold: Sequence[str], pred: Sequence[str], classes: Sequence[str]) -> float:
    """The support-weighted F1 of ``classes`` (:func:`parasim.train.core.metrics.class_report`)."""
    from parasim.train.core.metrics import class_report

    return class_report(gold, pred, classes)["weighted"]["f1"]


def binary_labels(cos: Sequence[float], t: float) -> list[str]:
    """Equivalent above ``t``, divergent at or below it."""
    return ["equivalent" if c > t else "divergent" for c in cos]


def three_labels(cos: Sequence[float], t1: float, t2: float) -> list[str]:
    """No meaning difference above ``t1``, unrelated at or below ``t2``, some between."""
    return [
        THREE_CLASSES[0] if c > t1 else THREE_CLASSES[2] if c <= t2 else THREE_CLASSES[1]
        for c in cos
    ]


def best_binary_threshold(cos: Sequence[float], gold: Sequence[str]) -> tuple[float, float]:
    """The cut with the best binary weighted F1 on (``cos``, ``gold``), over every cut between
    two distinct cosines and below them all: (threshold, weighted F1); the lowest of ties."""
    values = sorted(set(cos))
    cuts = [values[0] - 1e-6] + [(a + b) / 2 for a, b in zip(values, values[1:], strict=False)]
    cuts.append(values[-1])
    best = (cuts[0], -1.0)
    for t in cuts:
        f = weighted_f1(gold, binary_labels(cos, t), BINARY_CLASSES)
        if f > best[1]:
            best = (t, f)
    return best


def best_three_thresholds(
    cos: Sequence[float], gold: Sequence[str], grid: int = QUANTILE_GRID
) -> tuple[float, float, float]:
    """The pair t2 <= t1 of the cosine's quantiles (0, 1/grid, ..., 1, and one below them all)
    with the best 3-class weighted F1 on (``cos``, ``gold``): (t1, t2, weighted F1)."""
    qs = np.quantile(np.asarray(cos, float), np.linspace(0, 1, grid + 1))
    points = sorted({float(min(cos)) - 1e-6, *(float(q) for q in qs)})
    best = (points[-1], points[0], -1.0)
    for i, t2 in enumerate(points):
        for t1 in points[i:]:
            f = weighted_f1(gold, three_labels(cos, t1, t2), THREE_CLASSES)
            if f > best[2]:
                best = (t1, t2, f)
    return best


def majority_f1(gold: Sequence[str], classes: Sequence[str]) -> float:
    """The weighted F1 of always predicting the most frequent class (the majority baseline)."""
    top = max(classes, key=lambda c: (sum(g == c for g in gold), -classes.index(c)))
    return weighted_f1(gold, [top] * len(gold), classes)


def majority(sets: Sets) -> dict[str, float]:
    """The majority class's figure of each REFreSD measure (empty without REFreSD)."""
    if REFRESD not in sets:
        return {}
    s = sets[REFRESD]
    return {
        "refresd_binary_weighted_f1": majority_f1(s["binary"], BINARY_CLASSES),
        "refresd_3class_weighted_f1": majority_f1(s["label"], THREE_CLASSES),
    }


def measure(scores: Mapping[str, list[float]], sets: Sets) -> dict[str, Any]:
    """One encoder's figures and thresholds from its cosines (:func:`cosines`), and its per-item
    predictions for the bootstrap: ``{"figures", "thresholds", "preds"}``."""
    from parasim.train.core.metrics import spearman

    figures: dict[str, float | None] = {}
    thresholds: dict[str, Any] = {}
    preds: dict[str, list] = {}
    if REFRESD in sets and sets[REFRESD]["s1"]:
        cos, s = scores[REFRESD], sets[REFRESD]
        t, f = best_binary_threshold(cos, s["binary"])
        figures["refresd_binary_weighted_f1"] = f
        thresholds["refresd_binary"] = t
        preds["refresd_binary_weighted_f1"] = binary_labels(cos, t)
        t1, t2, f3 = best_three_thresholds(cos, s["label"])
        figures["refresd_3class_weighted_f1"] = f3
        thresholds["refresd_3class"] = {"t1": t1, "t2": t2}
        preds["refresd_3class_weighted_f1"] = three_labels(cos, t1, t2)
    for key, (_, name) in MEASURES.items():
        if name in STS_SETS and name in sets:
            figures[key] = spearman(scores[name], sets[name]["gold"])
            preds[key] = scores[name]
    return {"figures": figures, "thresholds": thresholds, "preds": preds}


def measure_stat(key: str, sets: Sets, pred: list) -> Callable:
    """The bootstrap statistic of measure ``key`` for one encoder's per-item predictions."""
    from parasim.train.core.metrics import class_report
    from parasim.train.core.verdict import spearman_stat

    name = MEASURES[key][1]
    if name in STS_SETS:
        return spearman_stat(sets[name]["gold"], pred)
    gold, classes = (
        (sets[name]["binary"], BINARY_CLASSES)
        if key == "refresd_binary_weighted_f1"
        else (sets[name]["label"], THREE_CLASSES)
    )

    def stat(idx):
        if not len(idx):
            return None
        return class_report([gold[i] for i in idx], [pred[i] for i in idx], classes)["weighted"][
            "f1"
        ]

    return stat


def compare_measured(
    model: Mapping[str, Any],
    baseline: Mapping[str, Any],
    sets: Sets,
    baseline_name: str,
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> dict[str, dict]:
    """``{measure: compare(...)}`` of two encoders' :func:`measure` results on the measures
    both have; the bootstrap's seed is the same for every measure (and every call), so the
    comparisons see the same resamples of each set."""
    from parasim.train.core.verdict import compare

    out = {}
    for key, (label, name) in MEASURES.items():
        if key not in model["preds"] or key not in baseline["preds"]:
            continue
        out[key] = compare(
            measure_stat(key, sets, model["preds"][key]),
            measure_stat(key, sets, baseline["preds"][key]),
            len(sets[name]["s1"]),
            measure=label,
            baseline_name=baseline_name,
            evaluated_on=SET_NAMES[name],
            seed=seed,
            n_boot=n_boot,
        )
    return out
