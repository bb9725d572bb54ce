"""REFreSD dev evaluation of a divergence ranker (seed 000 Tables 3 and 4).

The set and its measures are :mod:`parasim.train.eval.refresd`'s; here the ranker scores it:

* Sentences: the decision threshold is the one the model folder carries (picked on the synthetic
  dev split by ``train.divergence_ranker.threshold``: no REFreSD label is used).
* Tokens: a word's P(DIV) is the highest of its subwords'.
* Beside them: the untrained encoder (cosine of the two sides' mean-pooled vectors, threshold
  picked on the same synthetic dev split at training time), all-divergent (the majority class),
  seeded uniform random tags (Table 4's random baseline), the alignment baseline's figure
  (``parasim bench divergences refresd``) and the published figures.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from parasim.train.core.metrics import class_report
from parasim.train.eval.refresd import (
    PUBLISHED,
    SOME,
    read_rationales,
    read_refresd,
    sentence_results,
    token_results,
)

from .data import Item
from .model import encoder_cosines, load_ranker, predict


def _sentence_scores(model, tokenizer, info: dict, model_dir, refresd) -> tuple:
    """REFreSD dev's rows, the ranker's scores F and the untrained encoder's cosines (None when
    the model folder holds no untrained threshold: an older model)."""
    max_length = int(info.get("max_length", 128))
    ref = read_refresd(Path(refresd).parent)  # reads <data>/refresd/sentence_labels.dev.tsv
    items = [Item(tuple(r["en"].split()), tuple(r["fr"].split()), (), (), 0) for r in ref]
    scores, _, _ = predict(model, tokenizer, items, max_length)
    cos = None
    if info.get("base_model") and "untrained_cosine_threshold" in info:
        from parasim.train.core.encoder import load_training_encoder

        base, base_tok = load_training_encoder(info["base_model"], key=f"{model_dir}: base_model")
        base = base.to(next(model.parameters()).device)
        cos = encoder_cosines(base, base_tok, items, max_length)
        del base
    return ref, list(scores), cos


def refresd_verdict(
    model_dir: str | os.PathLike, refresd: str | os.PathLike, device: str = "auto"
) -> dict[str, Any] | None:
    """The ranker in ``model_dir`` against its untrained encoder's cosine on REFreSD dev.

    Weighted F1 of the sentence decision (Table 3's headline), each at the threshold its model
    folder carries (both picked on the synthetic dev split: no REFreSD label is used), compared on
    the same 312 pairs with a paired bootstrap (:func:`parasim.train.core.verdict.compare`).
    None when the folder holds no untrained threshold (an older model).
    """
    from parasim.accel import resolve_device
    from parasim.train.core.verdict import compare

    model, tokenizer, info = load_ranker(model_dir, resolve_device(device, "device"))
    ref, scores, cos = _sentence_scores(model, tokenizer, info, model_dir, refresd)
    if cos is None:
        return None
    gold = [r["binary"] for r in ref]
    t_model, t_base = float(info["threshold"]), float(info["untrained_cosine_threshold"])

    def stat(values: list[float], threshold: float):
        def weighted_f1(idx: list[int]) -> float:
            res = sentence_results([values[i] for i in idx], [gold[i] for i in idx], threshold)
            return res["weighted"]["f1"]

        return weighted_f1

    return compare(
        stat(scores, t_model), stat(list(cos), t_base), len(ref),
        measure="REFreSD dev weighted F1", baseline_name="untrained encoder's cosine",
        evaluated_on="REFreSD dev (real EN-FR sentence pairs labelled by hand)",
    )  # fmt: skip


def evaluate_refresd(
    model_dir: str | os.PathLike, refresd: str | os.PathLike, device: str = "auto"
) -> dict[str, Any]:
    """Sentence and token measures of the ranker in ``model_dir`` on REFreSD dev."""
    from parasim.accel import resolve_device

    model, tokenizer, info = load_ranker(model_dir, resolve_device(device, "device"))
    max_length = int(info.get("max_length", 128))
    ref, scores, cos = _sentence_scores(model, tokenizer, info, model_dir, refresd)
    gold = [r["binary"] for r in ref]
    sentence = sentence_results(scores, gold, float(info["threshold"]))
    rule = info.get("threshold_rule", "macro_f1")  # models saved before the option: macro F1
    all_div = class_report(gold, ["divergent"] * len(gold), ["equivalent", "divergent"])
    untrained = None
    if cos is not None:
        untrained = sentence_results(cos, gold, float(info["untrained_cosine_threshold"]))
    rats = [r for r in read_rationales(refresd) if r["label"] == SOME]
    titems = [Item(tuple(r["en"]), tuple(r["fr"]), (), (), 0) for r in rats]
    _, en_p, fr_p = predict(model, tokenizer, titems, max_length)
    mean = {
        lab: sum(s for s, r in zip(scores, ref, strict=True) if r["label"] == lab)
        / sum(r["label"] == lab for r in ref)
        for lab in sorted({r["label"] for r in ref})
    }
    return {
        "benchmark": "refresd-dev",
        "model": str(model_dir),
        "base_model": info.get("base_model"),
        "n_pairs": len(ref),
        "threshold": info["threshold"],
        "threshold_from": f"synthetic dev split ({rule.replace('_', ' ')}); no REFreSD label used",
        "sentence": sentence,
        "weighted_f1": sentence["weighted"]["f1"],
        "mean_score_by_class": mean,
        "tokens_some_meaning_difference": token_results(rats, en_p, fr_p),
        "baselines": {
            "all_divergent_weighted_f1": all_div["weighted"]["f1"],
            "untrained_encoder_cosine": untrained,
            "alignment_unaligned_share_weighted_f1": {
                "value": 0.744,
                "command": "parasim bench divergences refresd",
                "note": "eflomal unaligned share, threshold from synthetic data (BENCHMARKS.md)",
            },
            "published": PUBLISHED,
        },
    }
