"""REFreSD dev (seed 000 Tables 3 and 4): the set, its measures and the published figures.

* Sentences: equivalent vs divergent, per-class precision / recall / F1 and their
  support-weighted average (scikit-learn's ``weighted``) for scores F (divergent when -F > the
  threshold).
* Tokens: on the "some meaning difference" pairs, a word is predicted DIV when its P(DIV) > 0.5;
  gold DIV when at least one (union), two (pair-wise union) or three (intersection) annotators
  marked it in their rationale. F1 of DIV and EQ and their product (F1-Mul), over the words of
  both sides together, beside seeded uniform random tags (Table 4's random baseline).

The divergence ranker's evaluation (:mod:`parasim.train.ranker.evaluate`) and the alignment
baseline (``parasim bench divergences refresd``) read the set here.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

from parasim.train.core.metrics import class_report, token_f1

log = logging.getLogger("parasim.train")

#: Seed 000: weighted F1 (Table 3) and the token F1-Mul, union aggregation (Table 4).
PUBLISHED = {
    "LASER weighted F1": 0.53,
    "Divergent mBERT weighted F1": 0.84,
    "Divergent mBERT token F1-Mul (union)": 0.35,
    "random token F1-Mul (union)": 0.13,
}
AGGREGATIONS = {"union": 1, "pairwise_union": 2, "intersection": 3}
SOME = "some_meaning_difference"


#: REFreSD dev's sentence labels, in its folder.
SENTENCE_LABELS = "sentence_labels.dev.tsv"


def read_refresd(data: str | os.PathLike) -> list[dict]:
    """REFreSD dev sentence pairs of ``<data>/refresd/sentence_labels.dev.tsv``: ``binary``
    (equivalent/divergent), ``label`` (3 classes), ``en``, ``fr``."""
    return read_sentence_labels(Path(data) / "refresd" / SENTENCE_LABELS)


def read_sentence_labels(path: str | os.PathLike) -> list[dict]:
    """The rows of one REFreSD sentence-label file (:func:`read_refresd`'s, from any folder)."""
    rows = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        binary, label, en, fr = line.split("\t")
        rows.append({"binary": binary, "label": label, "en": en, "fr": fr})
    return rows


def read_rationales(folder: str | os.PathLike) -> list[dict]:
    """REFreSD dev rows with words and per-word annotator counts (``rationale.dev.tsv``)."""
    rows = []
    for line in (Path(folder) / "rationale.dev.tsv").read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        binary, label, en, fr, en_r, fr_r = line.split("\t")
        en_w, fr_w = en.split(" "), fr.split(" ")
        en_c, fr_c = [int(x) for x in en_r.split()], [int(x) for x in fr_r.split()]
        if len(en_c) != len(en_w) or len(fr_c) != len(fr_w):
            log.warning("rationale length differs from the words: row skipped (%s)", en[:40])
            continue
        rows.append(
            {"binary": binary, "label": label, "en": en_w, "fr": fr_w, "en_r": en_c, "fr_r": fr_c}
        )
    return rows


def sentence_results(scores: list[float], gold: list[str], threshold: float) -> dict[str, Any]:
    """Table 3's measures for scores F (divergent when -F > threshold)."""
    pred = ["divergent" if -s > threshold else "equivalent" for s in scores]
    return class_report(gold, pred, ["equivalent", "divergent"])


def token_results(
    rows: list[dict], en_p: list[list[float]], fr_p: list[list[float]], seed: int = 13
) -> dict[str, Any]:
    """Table 4's measures on ``rows`` (rationale rows) with per-word P(DIV), and random tags."""
    rng = random.Random(seed)
    pred = [p > 0.5 for e, f in zip(en_p, fr_p, strict=True) for p in e + f]
    rand = [rng.random() < 0.5 for _ in pred]
    out: dict[str, Any] = {"pairs": len(rows), "words": len(pred)}
    for name, k in AGGREGATIONS.items():
        gold = [c >= k for r in rows for c in r["en_r"] + r["fr_r"]]
        out[name] = {
            "model": token_f1(gold, pred),
            "random": token_f1(gold, rand),
            "gold_div_share": sum(gold) / max(1, len(gold)),
        }
    return out
