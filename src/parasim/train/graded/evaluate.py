"""The graded encoder and its untrained start on the public sets (:mod:`parasim.train.eval.cosine`):
REFreSD dev (binary and 3-class weighted F1 of the cosine, each encoder at its thresholds picked
on dev) and STSb-multi-mt dev across languages (EN-FR, EN-ES Spearman), and the verdicts of the
trained encoder against the untrained one (the headline: REFreSD binary weighted F1)."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from parasim.train.core.loop import TrainingArguments
from parasim.train.eval.cosine import (
    MEASURES,
    REFRESD,
    SET_NAMES,
    compare_measured,
    cosines,
    eval_sets,
    majority,
    measure,
)

from .settings import GradedConfig

log = logging.getLogger("parasim.train")

#: The measure of the verdict (the models table's row).
HEADLINE = "refresd_binary_weighted_f1"
BASELINE_NAME = "untrained encoder's cosine"
#: The two encoders measured, the baseline first.
ENCODERS = ("untrained", "graded")


def not_measured(why: str) -> dict[str, Any]:
    """The headline verdict when REFreSD is not there: no figure, and why
    (:func:`parasim.train.core.verdict.compare` on no item)."""
    from parasim.train.core.verdict import compare

    label, name = MEASURES[HEADLINE]
    v = compare(
        lambda idx: None, lambda idx: None, 0, measure=label, baseline_name=BASELINE_NAME,
        evaluated_on=SET_NAMES[name],
    )  # fmt: skip
    return {**v, "why": f"not measured: {why}"}


def _load(which: str, model_dir: Path, cfg: GradedConfig, device: str):
    """The untrained start (built as training built it) or the trained folder."""
    from parasim.train.core.contrastive import build_model

    if which == "untrained":
        return build_model(cfg.model, max_length=cfg.max_length, prefix=cfg.prefix, device=device)
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_dir), device=device)


def evaluate_encoders(
    model_dir: str | os.PathLike,
    cfg: GradedConfig,
    args: TrainingArguments,
    refresd: str | os.PathLike | None,
    sts: str | os.PathLike | None,
) -> dict[str, Any]:
    """The trained encoder in ``model_dir`` and its untrained start (``cfg.model``) on the sets
    found in ``refresd`` and ``sts``.

    Returns:
        ``{"sets": {set: {"n"}}, "missing": {set: why}, "majority", "figures": {encoder:
        {measure: value}}, "thresholds": {encoder: ...}, "verdicts": {measure: compare(...)},
        "verdict": the headline's (or :func:`not_measured`), "seconds": {encoder: s}}``.
    """
    from parasim.accel import resolve_device

    sets, missing = eval_sets(refresd, sts, cfg.sts_max_pairs)
    for name, why in missing.items():
        log.info("%s: not evaluated (%s)", name, why)
    device = resolve_device(args.device, "train.device")
    measured, seconds = {}, {}
    for which in ENCODERS if sets else ():
        t0 = time.perf_counter()
        model = _load(which, Path(model_dir), cfg, device)
        measured[which] = measure(cosines(model, sets, cfg.eval_batch_size), sets)
        seconds[which] = round(time.perf_counter() - t0, 1)
        del model
        log.info("%s encoder: %s", which, measured[which]["figures"])
    verdicts = (
        compare_measured(measured["graded"], measured["untrained"], sets, BASELINE_NAME, args.seed)
        if measured
        else {}
    )
    headline = verdicts.get(HEADLINE) or not_measured(missing.get(REFRESD, "no REFreSD item"))
    sizes = {name: {"n": len(s["s1"])} for name, s in sets.items()}
    return {
        "sets": sizes,
        "missing": missing,
        "majority": majority(sets),
        "figures": {k: m["figures"] for k, m in measured.items()},
        "thresholds": {k: m["thresholds"] for k, m in measured.items()},
        "verdicts": verdicts,
        "verdict": headline,
        "seconds": seconds,
    }
