"""REFreSD dev evaluation of a divergence ranker (seed 000 Tables 3 and 4).

* Sentences: equivalent vs divergent, per-class precision / recall / F1 and their
  support-weighted average (scikit-learn's ``weighted``), with the decision threshold the model
  folder carries (picked on the synthetic dev split by ``train.divergence_ranker.threshold``:
  no REFreSD label is used).
* Tokens: on the "some meaning difference" pairs, a word is predicted DIV when P(DIV) > 0.5 for
  any of its subwords; gold DIV when at least one (union), two (pair-wise union) or three
  (intersection) annotators marked it in their rationale. F1 of DIV and EQ and their product
  (F1-Mul), over the words of both sides together.
* Beside them: the untrained encoder (cosine of the two sides' mean-pooled vectors, threshold
  picked on the same synthetic dev split at training time), all-divergent (the majority class),
  seeded uniform random tags (Table 4's random baseline), the alignment baseline's figure
  (``parasim bench divergences refresd``) and the published figures.
"""

from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

from .metrics import class_report, token_f1

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


def evaluate_refresd(
    model_dir: str | os.PathLike, refresd: str | os.PathLike, device: str = "auto"
) -> dict[str, Any]:
    """Sentence and token measures of the ranker in ``model_dir`` on REFreSD dev."""
    from parasim.accel import resolve_device
    from parasim.bench.divergences import read_refresd

    from .ranker import Item, load_ranker, predict

    model, tokenizer, info = load_ranker(model_dir, resolve_device(device, "device"))
    max_length = int(info.get("max_length", 128))
    ref = read_refresd(Path(refresd).parent)  # reads <data>/refresd/sentence_labels.dev.tsv
    items = [Item(tuple(r["en"].split()), tuple(r["fr"].split()), (), (), 0) for r in ref]
    scores, _, _ = predict(model, tokenizer, items, max_length)
    gold = [r["binary"] for r in ref]
    sentence = sentence_results(scores, gold, float(info["threshold"]))
    rule = info.get("threshold_rule", "macro_f1")  # models saved before the option: macro F1
    all_div = class_report(gold, ["divergent"] * len(gold), ["equivalent", "divergent"])
    untrained = None
    if info.get("base_model") and "untrained_cosine_threshold" in info:
        from .ranker import encoder_cosines, load_encoder

        base, base_tok = load_encoder(info["base_model"], key=f"{model_dir}: base_model")
        base = base.to(next(model.parameters()).device)
        cos = encoder_cosines(base, base_tok, items, max_length)
        untrained = sentence_results(cos, gold, float(info["untrained_cosine_threshold"]))
        del base
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
