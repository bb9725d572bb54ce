"""The selection split of ``bench teach``: figures that choose a setting without REFreSD or STSb.

The teaching target is judged on REFreSD dev and STSb-multi-mt dev, and neither holds a second
labelled split here, so a setting picked on them is tuned on the test itself. This module
measures a model on data the target never reads:

* **silver** cross-lingual STS on Flores-200 devtest (1,012 sentences in English, French and
  Spanish, news and wiki text that no corpus row comes from). The pairs: for every English
  sentence i, its ``near`` nearest English neighbours j under the untrained start, and ``far``
  other sentences drawn at random (seeded). A pair's silver score is the untrained start's
  cosine of the English sentences i and j. A model's figure for EN-FR (EN-ES) is the Spearman
  of its cosine of English sentence i and the French (Spanish) translation of sentence j with
  the silver score. That is what STSb cross-lingual asks of a model (the cross-lingual cosine
  follows how similar the two meanings are), with the start's English similarity as the judge:
  a fine-tuning that bends the general geometry lowers it.
* **hardness** on the corpus's *test* split: the ROC AUC of the model's cosine of the positives
  against each tier (:func:`parasim.corpus.graded.hardness`, the corpus card's measure, there of
  the untrained encoder): what the model learnt of the grades, on rows it did not train on.

:func:`pick_share` is the rule committed before its first use (``eval/teach/DECISIONS.md``,
2026-12-07): the largest WiSE-FT share of the grid whose silver EN-FR and EN-ES figures are each
at most ``allowance`` below the untrained start's; the smallest share of the grid when none is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

#: The languages the silver figures pair with English (Flores-200 codes in :mod:`parasim.flores`).
SILVER_LANGS = ("fr", "es")
#: The rule's allowance: the issue's STSb one (at most 0.01 below the untrained start).
ALLOWANCE = 0.01


def silver_pairs(vecs: np.ndarray, near: int = 10, far: int = 10, seed: int = 0) -> np.ndarray:
    """The silver pairs ``(i, j)`` of the English sentences whose unit vectors are ``vecs``
    (rows): for each i, its ``near`` nearest others by cosine (ties by index) and ``far`` others
    drawn at random among the rest (a generator seeded with ``seed``); never ``i`` itself, never
    a pair twice. An ``(n_pairs, 2)`` integer array, sorted."""
    n = len(vecs)
    if n < 2:
        raise ValueError(f"silver pairs need at least 2 sentences, not {n}")
    near, far = min(near, n - 1), min(far, n - 1 - min(near, n - 1))
    sims = vecs @ vecs.T
    np.fill_diagonal(sims, -np.inf)
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        order = np.lexsort((np.arange(n), -sims[i]))  # by cosine, then by index
        nearest = order[:near]
        rest = order[near : n - 1]  # the last one is i itself (-inf)
        drawn = rng.choice(rest, size=far, replace=False) if far else np.array([], int)
        pairs += [(i, int(j)) for j in (*nearest, *drawn)]
    return np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)


@dataclass
class SelectionSplit:
    """The texts a model is measured on (:func:`selection_split`).

    Attributes:
        flores: ``{"en": [...], "fr": [...], "es": [...]}``, line-parallel.
        pairs: :func:`silver_pairs` of the English sentences under the untrained start.
        silver: the untrained start's English-English cosine of each pair.
        test_rows: the corpus test rows the hardness is measured on (``hardness_sample``).
        counts: what the split holds, for the report.
    """

    flores: dict[str, list[str]]
    pairs: np.ndarray
    silver: np.ndarray
    test_rows: dict[str, list[dict]]
    counts: dict[str, Any]


def _encode(model, texts: Sequence[str], batch_size: int) -> np.ndarray:
    """Unit vectors of ``texts`` under a ``SentenceTransformer`` (its default prompt, the
    training prefix, prepended)."""
    return model.encode(
        list(texts), batch_size=batch_size, normalize_embeddings=True, convert_to_numpy=True,
        show_progress_bar=False,
    ).astype(np.float32)  # fmt: skip


def selection_split(
    start,
    flores_folder: str | Path,
    test_rows: Sequence[dict],
    *,
    near: int = 10,
    far: int = 10,
    sample: int = 1000,
    seed: int = 0,
    batch_size: int = 64,
) -> SelectionSplit:
    """The selection split: Flores-200 devtest's silver pairs under ``start`` (the untrained
    encoder, a ``SentenceTransformer``) and up to ``sample`` rows of each tier of the corpus's
    test rows ``test_rows`` (with as many positives; :func:`parasim.corpus.graded.hardness_sample`).

    Raises:
        FileNotFoundError: a Flores-200 file missing, naming it.
        ValueError: the Flores files not line-parallel, naming the language.
    """
    from parasim.corpus.graded import hardness_sample
    from parasim.flores import read_flores

    flores = {lang: read_flores(lang, flores_folder) for lang in ("en", *SILVER_LANGS)}
    for lang in SILVER_LANGS:
        if len(flores[lang]) != len(flores["en"]):
            raise ValueError(
                f"Flores-200 in {flores_folder}: {len(flores[lang])} {lang} lines against "
                f"{len(flores['en'])} English ones; the files must be line-parallel"
            )
    en = _encode(start, flores["en"], batch_size)
    pairs = silver_pairs(en, near, far, seed)
    silver = (en[pairs[:, 0]] * en[pairs[:, 1]]).sum(1)
    picked = hardness_sample(test_rows, sample, seed)
    counts = {
        "flores_sentences": len(flores["en"]),
        "silver_pairs": len(pairs),
        "near": near,
        "far": far,
        "test_rows": len(test_rows),
        "test_rows_measured": {tier: len(rs) for tier, rs in picked.items()},
    }
    return SelectionSplit(flores, pairs, silver, picked, counts)


def measure_model(model, split: SelectionSplit, batch_size: int = 64) -> dict[str, Any]:
    """The selection figures of ``model`` (a ``SentenceTransformer``): ``silver_en_fr`` and
    ``silver_en_es`` (Spearman, as the module docstring says) and ``hardness`` on the test rows
    (``{tier: {"roc_auc": ..., "best_accuracy": ..., ...}}``)."""
    from parasim.corpus.graded import hardness_of
    from parasim.train.core.metrics import spearman

    en = _encode(model, split.flores["en"], batch_size)
    out: dict[str, Any] = {}
    for lang in SILVER_LANGS:
        other = _encode(model, split.flores[lang], batch_size)
        cos = (en[split.pairs[:, 0]] * other[split.pairs[:, 1]]).sum(1)
        value = spearman(cos.tolist(), split.silver.tolist())
        out[f"silver_en_{lang}"] = None if value is None else round(value, 4)
    out["hardness"] = hardness_of(split.test_rows, lambda t: _encode(model, t, batch_size))
    return out


def pick_share(
    figures: Mapping[float, Mapping[str, Any]],
    untrained: Mapping[str, Any],
    allowance: float = ALLOWANCE,
) -> tuple[float, str]:
    """The rule: the largest share of ``figures`` (share -> :func:`measure_model`'s figures)
    whose silver EN-FR and EN-ES are each at most ``allowance`` below ``untrained``'s; the
    smallest share when none is. The share, and why, in words.

    Raises:
        ValueError: no share to pick from, or a silver figure missing.
    """
    if not figures:
        raise ValueError("pick_share: no share measured")

    def falls(f: Mapping[str, Any]) -> dict[str, float]:
        out = {}
        for lang in SILVER_LANGS:
            key = f"silver_en_{lang}"
            if f.get(key) is None or untrained.get(key) is None:
                raise ValueError(f"pick_share: no {key} figure to compare")
            out[lang] = round(float(untrained[key]) - float(f[key]), 4)
        return out

    kept = [s for s in sorted(figures) if all(d <= allowance for d in falls(figures[s]).values())]
    if kept:
        share = max(kept)
        why = (
            f"share {share:g}: the largest of {sorted(figures)} whose silver EN-FR and EN-ES "
            f"are each at most {allowance:g} below the untrained start's "
            f"(falls {falls(figures[share])})"
        )
        return share, why
    share = min(figures)
    return share, (
        f"share {share:g}: no share of {sorted(figures)} keeps the silver figures within "
        f"{allowance:g} of the untrained start's, so the smallest (falls {falls(figures[share])})"
    )


def select_share(
    start_model: Callable[[], Any],
    merged_model: Callable[[float], Any],
    split: SelectionSplit,
    grid: Sequence[float],
    batch_size: int = 64,
    allowance: float = ALLOWANCE,
) -> dict[str, Any]:
    """Measure the untrained start (``start_model()``) and each share of ``grid``
    (``merged_model(share)``: the merged ``SentenceTransformer``) on ``split`` and apply
    :func:`pick_share`: ``{"share", "why", "untrained", "shares": {share: figures}, "counts"}``."""
    untrained = measure_model(start_model(), split, batch_size)
    figures = {float(s): measure_model(merged_model(float(s)), split, batch_size) for s in grid}
    share, why = pick_share(figures, untrained, allowance)
    return {
        "share": share,
        "why": why,
        "allowance": allowance,
        "untrained": untrained,
        "shares": {f"{s:g}": f for s, f in sorted(figures.items())},
        "counts": split.counts,
    }
