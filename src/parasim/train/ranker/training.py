"""Training the ranker: the margin and tag loss (seed 000 eq. 2), the dev measures and the decision
threshold on the synthetic dev split, and the run that writes the model folder."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.loop import run_resources

from .data import Item, RankerData, ranker_data
from .model import (
    build_ranker,
    encode,
    encoder_cosines,
    load_ranker,
    predict,
    resolve_pooling,
    save_ranker,
)
from .settings import MODEL_KEY, THRESHOLD_RULES, RankerConfig, ranker_settings

log = logging.getLogger("parasim.train")


def ranker_loss(tokenizer, items: Sequence[Item], cfg: RankerConfig):
    """The loss function of :func:`parasim.train.core.loop.fit` for (x, y) index pairs into
    ``items``."""
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    def loss_fn(model, pairs: Sequence[tuple[int, int]]):
        n = len(pairs)
        batch = [items[x] for x, _ in pairs] + [items[y] for _, y in pairs]
        device = next(model.parameters()).device
        chunks = [list(range(2 * n))]
        if cfg.length_chunks > 1 and not isinstance(model, DistributedDataParallel):
            # shortest to longest, each chunk padded on its own: the same sums, less padding
            # (DDP wants one forward per backward, so one chunk there)
            order = sorted(range(2 * n), key=lambda i: len(batch[i].en) + len(batch[i].other))
            size = math.ceil(2 * n / cfg.length_chunks)
            chunks = [order[i : i + size] for i in range(0, 2 * n, size)]
        parts, tag = [], []
        for chunk in chunks:
            inputs, labels, _ = encode(tokenizer, [batch[i] for i in chunk], cfg.max_length)
            s, logits = model(**{k: v.to(device) for k, v in inputs.items()})
            parts.append(s)
            ys = [j for j, i in enumerate(chunk) if i >= n]  # y rows: their tags are learnt
            if ys:
                lab = labels[ys].to(device)
                ce = F.cross_entropy(
                    logits[ys].transpose(1, 2), lab, ignore_index=-100, reduction="none"
                )
                tag.append((ce.sum(1) / (lab != -100).sum(1).clamp(min=1)).sum())
        where = torch.tensor([i for c in chunks for i in c], device=device)
        scores = torch.empty(2 * n, device=device, dtype=parts[0].dtype)
        scores = scores.index_copy(0, where, torch.cat(parts))
        margin = torch.relu(cfg.margin - scores[:n] + scores[n:]).sum()
        return {"margin": (margin, n), "tag": (cfg.tag_weight * torch.stack(tag).sum(), n)}

    return loss_fn


def dev_threshold(scores: Sequence[float], divergent: Sequence[bool], rule: str) -> float:
    """The divergence threshold t on ``scores`` (divergent when score > t) by ``rule``
    (:data:`THRESHOLD_RULES`)."""
    from parasim.train.core.metrics import best_threshold, equal_error_threshold

    if rule == "macro_f1":
        return best_threshold(scores, divergent)[0]
    if rule == "equal_error":
        return equal_error_threshold(scores, divergent)[0]
    raise ValueError(f"threshold rule: one of {list(THRESHOLD_RULES)}, not {rule!r}")


def _dev_cut(scores: Sequence[float], divergent: Sequence[bool], rule: str) -> tuple[float, float]:
    """(threshold by ``rule``, best macro F1 over all cuts): one macro-F1 sweep for both."""
    from parasim.train.core.metrics import best_threshold

    t, f = best_threshold(scores, divergent)
    return (t if rule == "macro_f1" else dev_threshold(scores, divergent, rule)), f


def dev_pairs(data: RankerData) -> list[tuple[int, int]]:
    """The dev groups' ranking pairs (each row above every row of the next rank present)."""
    out = []
    for g in data.dev_groups:
        levels = sorted({data.items[i].rank for i in g})
        for a, b in zip(levels, levels[1:], strict=False):
            out += [
                (x, y) for x in g if data.items[x].rank == a for y in g if data.items[y].rank == b
            ]
    return out


def dev_scores(model, tokenizer, data: RankerData, cfg: RankerConfig) -> dict[str, Any]:
    """Scores of every dev row, its word P(DIV), and the dev measures.

    ``dev_objective`` (watched by early stopping, higher is better) is minus the dev loss: the
    margin loss over the dev ranking pairs plus ``tag_weight`` times the word-level EQ/DIV
    cross-entropy (word P(DIV) = max over its subwords, as at prediction).

    Returns:
        ``{"metrics": {...}, "scores": {item: F}, "threshold": t}``; t is the divergence
        threshold on -F (divergent when -F > t) by ``cfg.threshold`` (equal error rates, or the
        best dev macro F1). ``dev_macro_f1`` is the best macro F1 over all cuts either way.
    """
    from parasim.train.core.metrics import token_f1

    rows = [i for g in data.dev_groups for i in g]
    items = [data.items[i] for i in rows]
    scores, en_p, other_p = predict(model, tokenizer, items, cfg.max_length, cfg.eval_batch_size)
    by_item = dict(zip(rows, scores, strict=True))
    pairs = dev_pairs(data)
    acc = sum(by_item[x] > by_item[y] for x, y in pairs) / max(1, len(pairs))
    margin = sum(max(0.0, cfg.margin - by_item[x] + by_item[y]) for x, y in pairs) / max(
        1, len(pairs)
    )
    t, f = _dev_cut([-s for s in scores], [it.rank > 0 for it in items], cfg.threshold)
    gold = [d for it in items for d in it.en_div + it.other_div]
    pred = [p > 0.5 for e, o in zip(en_p, other_p, strict=True) for p in e + o]
    tok = token_f1(gold, pred)
    probs = [min(max(p, 1e-7), 1 - 1e-7) for e, o in zip(en_p, other_p, strict=True) for p in e + o]
    word_ce = -sum(
        math.log(p) if d else math.log(1 - p) for p, d in zip(probs, gold, strict=True)
    ) / max(1, len(gold))
    metrics = {
        "dev_objective": -(margin + cfg.tag_weight * word_ce),
        "dev_pair_accuracy": acc,
        "dev_margin_loss": margin,
        "dev_word_ce": word_ce,
        "dev_macro_f1": f,
        "dev_token_f1_div": tok["f1_div"],
    }
    return {"metrics": metrics, "scores": by_item, "threshold": t}


def untrained_baseline(encoder, tokenizer, data: RankerData, cfg: RankerConfig) -> dict:
    """The untrained encoder's cosine on the dev rows, and its threshold (divergent when -cos >
    t, by ``cfg.threshold``): the baseline :mod:`.evaluate` puts beside the ranker."""
    items = [data.items[i] for g in data.dev_groups for i in g]
    cos = encoder_cosines(encoder, tokenizer, items, cfg.max_length, cfg.eval_batch_size)
    t, f = _dev_cut([-c for c in cos], [it.rank > 0 for it in items], cfg.threshold)
    return {"untrained_cosine_threshold": t, "untrained_cosine_dev_macro_f1": f, "cosines": cos}


def dev_verdict(
    data: RankerData, scores: Mapping[int, float], threshold: float, baseline: Mapping[str, Any]
) -> dict[str, Any]:
    """The ranker against the untrained cosine on the synthetic dev rows: macro F1 of both at
    their own thresholds (:func:`parasim.train.core.verdict.compare`)."""
    from parasim.train.core.verdict import compare, macro_f1_stat

    rows = [i for g in data.dev_groups for i in g]
    gold = [data.items[i].rank > 0 for i in rows]
    pred = [-scores[i] > threshold for i in rows]
    base = [-c > baseline["untrained_cosine_threshold"] for c in baseline["cosines"]]
    return compare(
        macro_f1_stat(gold, pred), macro_f1_stat(gold, base), len(rows),
        measure="synthetic dev macro F1", baseline_name="untrained encoder's cosine",
        evaluated_on="the synthetic dev split's rows",
    )  # fmt: skip


@dataclasses.dataclass
class _RankerRun:
    """What the steps of :func:`train_divergence_ranker` share.

    Attributes:
        divergences, test_pairs: the shards trained on and the test page pairs left out.
        data: the ranking pairs and dev groups (:func:`ranker_data`).
        acc: the accelerator; ``tokenizer``: the encoder's.
        baseline: the untrained encoder's dev cosines and threshold (:func:`untrained_baseline`).
        model: the ranker being trained.
    """

    args: Any
    cfg: RankerConfig
    out: Path
    t0: float
    divergences: Sequence[str | os.PathLike]
    test_pairs: Iterable[str]
    data: RankerData
    acc: Any = None
    tokenizer: Any = None
    baseline: dict[str, Any] = dataclasses.field(default_factory=dict)
    model: Any = None


def train_divergence_ranker(
    divergences: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    test_pairs: Iterable[str] = (),
    accelerator: Any = None,
    refresd: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Train the ranker; write ``model/``, ``README.md``, ``metrics.json``, ``training_curve.png``.

    No training pair or no dev group left after the skips (e.g. every site came out empty):
    nothing is trained, and ``metrics.json`` (``skipped``: the reason), ``README.md``, an empty
    ``model/`` (its README says why) and the curve say so.

    The steps: :func:`_build` (the seeded encoder, its untrained baseline, the ranker),
    :func:`_train` (the loop, early stopping on the dev objective), :func:`_measure` (the best
    model's float32 dev scores, threshold and verdict) and :func:`_write_model` (the model
    folder, the REFreSD verdict, the run's files and the card).

    Args:
        divergences: divergences shards (every site).
        out_dir: the model's folder, ``results/models/divergence-ranker``.
        section: the ``train:`` config section.
        test_pairs: page-pair ids of the corpus test split (left out of training and dev).
        accelerator: an ``accelerate.Accelerator`` (default: one for ``train.device``/``dtype``).
        refresd: REFreSD's folder, or None: when given, the verdict is the trained model's
            against the untrained cosine on REFreSD dev (:func:`.evaluate.refresd_verdict`), the
            synthetic dev split's kept as ``verdict_synthetic_dev``.

    Returns:
        The metrics written to ``metrics.json``.

    Raises:
        ConfigError: the model cannot be loaded (naming ``train.divergence_ranker.model``).
    """
    import time

    args, cfg = ranker_settings(section)
    out = Path(out_dir)
    t0 = time.perf_counter()
    data = ranker_data(divergences, test_pairs, cfg, args.seed)
    log.info("data: %s", dict(sorted(data.counts.items())))
    reason = None
    if not data.train:
        reason = f"no contrastive training pair in {len(divergences)} shard(s)"
    elif not data.dev_groups:
        reason = "no synthetic dev group (raise train.divergence_ranker.dev_fraction)"
    if reason:
        return _skipped(out, reason, data, len(divergences), cfg)
    run = _RankerRun(
        args=args, cfg=cfg, out=out, t0=t0, divergences=divergences, test_pairs=test_pairs,
        data=data,
    )  # fmt: skip
    _build(run, accelerator)
    result = _train(run)
    train_s = time.perf_counter() - t0
    if not run.acc.is_main_process:
        return {}
    best, info, dev, verdict, metrics = _measure(run, result, train_s)
    _write_model(run, result, best, info, dev, verdict, metrics, refresd)
    return metrics


def _build(run: _RankerRun, accelerator: Any) -> None:
    """The accelerator, the seeded encoder, its untrained dev baseline and the ranker on it."""
    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.core.loop import make_accelerator, set_seed

    args, cfg = run.args, run.cfg
    run.acc = accelerator or make_accelerator(args)
    set_seed(args.seed)
    encoder, run.tokenizer = load_training_encoder(cfg.model, key=MODEL_KEY)
    run.baseline = untrained_baseline(encoder, run.tokenizer, run.data, cfg)
    if cfg.freeze_embeddings:
        for p in encoder.get_input_embeddings().parameters():
            p.requires_grad_(False)
    pooling = resolve_pooling(cfg.pooling, encoder)
    log.info("pooling: %s (train.divergence_ranker.pooling %s)", pooling, cfg.pooling)
    run.model = build_ranker(encoder, cfg.dropout, pooling, cfg.head_learning_rate)


def _train(run: _RankerRun):
    """The loop on the training pairs, evaluated on the dev groups; the best model (with its dev
    results) is saved to ``best/``."""
    from parasim.train.core.card import write_dir
    from parasim.train.core.loop import fit

    cfg, data, tokenizer = run.cfg, run.data, run.tokenizer
    latest: dict[str, Any] = {}

    def evaluate(m):
        latest.update(dev_scores(m, tokenizer, data, cfg))
        return latest["metrics"]

    def save(m, path: Path) -> None:
        # called right after the evaluation that made ``m`` the best: its dev results go along
        # (the threshold comes from scoring the final model again in float32, below)
        write_dir(path, lambda tmp: save_ranker(m, tokenizer, tmp, {"dev": latest["metrics"]}))

    shards = [(str(f), Path(f).stat().st_size) for f in run.divergences]
    extra = [cfg, shards, sorted(run.test_pairs)]
    return fit(
        run.model, data.train, ranker_loss(tokenizer, data.items, cfg), run.args, run.out,
        evaluate=evaluate, save=save, fingerprint_extra=extra, accelerator=run.acc,
    )  # fmt: skip


def _measure(run: _RankerRun, result, train_s: float):
    """The best model's dev figures and threshold from its own float32 scores, the verdict on the
    synthetic dev rows and the metrics: ``(model, its saved info, dev, verdict, metrics)``.

    The figures are those `parasim eval-divergence-ranker` computes on REFreSD. Those of its
    evaluation during training ran under the mixed-precision autocast (bf16 on a CPU with native
    bf16), which moved the cut by about 0.01 in weighted F1 on REFreSD (BENCHMARKS.md, issue 14).
    """
    acc, cfg, data = run.acc, run.cfg, run.data
    best, _, info = load_ranker(result.best_dir, device=str(acc.device))
    during = info.pop("dev", None)
    dev = dev_scores(best, run.tokenizer, data, cfg)
    verdict = dev_verdict(data, dev["scores"], dev["threshold"], run.baseline)
    run.baseline = {k: v for k, v in run.baseline.items() if k != "cosines"}
    if during and acc.mixed_precision != "no":
        dev["metrics"]["dev_objective_mixed_precision"] = during.get("dev_objective")
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    metrics = {
        "model": "divergence-ranker",
        "base_model": cfg.model,
        "data": dict(sorted(data.counts.items())),
        "shards": len(run.divergences),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "dev": dev["metrics"],
        "threshold": dev["threshold"],
        "untrained_baseline": run.baseline,
        "verdict": verdict,
        "pairs_per_s": sum(speeds) / len(speeds) if speeds else None,
        "wall_s": round(train_s, 1),
        **run_resources(acc),
    }
    return best, info, dev, verdict, metrics


def _write_model(
    run: _RankerRun, result, best, info: dict, dev: dict, verdict: dict, metrics: dict, refresd
) -> None:
    """``model/`` (the best model with its threshold and baseline), the REFreSD verdict when
    ``refresd`` is given, the run's files and the model card (also in ``model/``)."""
    import shutil

    from parasim.train.core.card import write_model_card, write_run
    from parasim.train.core.storage import share_weights

    args, cfg, data, out = run.args, run.cfg, run.data, run.out
    meta = {
        **info,
        "threshold": dev["threshold"],
        "threshold_on": "-F (divergent when -F > threshold)",
        "threshold_rule": cfg.threshold,
        **run.baseline,
        "base_model": cfg.model,
        "margin": cfg.margin,
        "max_length": cfg.max_length,
    }
    final = out / "model"
    shutil.rmtree(final, ignore_errors=True)
    save_ranker(best, run.tokenizer, final, meta)
    share_weights(final, out.parent / ".weights")
    shutil.rmtree(result.best_dir, ignore_errors=True)
    if refresd:
        # The real set the seed reports decides the verdict when it is there; the synthetic dev
        # split's stays beside it (on a small corpus it is too few rows to tell).
        from .evaluate import refresd_verdict

        on_refresd = refresd_verdict(final, refresd, device=str(run.acc.device))
        if on_refresd is not None:
            metrics["verdict_synthetic_dev"] = verdict
            metrics["verdict"] = verdict = on_refresd
    write_run(out, result.history, metrics, f"divergence ranker ({cfg.model})")
    write_model_card(
        out / "README.md",
        "divergence-ranker",
        "Cross-encoder that ranks (English, other) sentence pairs by meaning equivalence and tags "
        "EQ/DIV words, trained on parasim's synthetic divergences with the margin loss and token "
        "cross-entropy of seed 000 (Divergent mBERT, §3.3–3.4). `model/` loads with "
        "`parasim.train.ranker.model.load_ranker`; its encoder alone with "
        "`AutoModel.from_pretrained`. "
        "Score F: high = equivalent; divergent when -F > `threshold` (picked on the synthetic dev "
        f"split: {cfg.threshold.replace('_', ' ')}).",
        {"divergence shards": len(run.divergences), **dict(sorted(data.counts.items())),
         "corpus test split page pairs left out": len(set(run.test_pairs))},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {**dev["metrics"], "threshold": dev["threshold"], "steps": result.state["step"],
         "stopped": result.state["stopped"], "pairs_per_s": metrics["pairs_per_s"],
         "peak_rss_mb": metrics["peak_rss_mb"]},
        verdict=verdict,
        needs=(
            f"more synthetic divergences than these {data.counts.get('train_pairs', 0)} training "
            "pairs and the GPU recipe `configs/train-gpu.yaml` (REFreSD dev weighted F1 0.811 "
            "there against 0.667 for the untrained cosine, BENCHMARKS.md)"
        ),
    )  # fmt: skip
    # the model folder describes itself too (HF shows a folder's README.md as its card)
    shutil.copyfile(out / "README.md", final / "README.md")


def _skipped(out: Path, reason: str, data: RankerData, n_shards: int, cfg: RankerConfig) -> dict:
    """No model: the outputs say why (a counted skip, so the rest of the workflow goes on)."""
    from parasim.train.core.card import plot_curve, write_metrics

    log.warning("divergence ranker not trained: %s; counts %s", reason, dict(data.counts))
    metrics = {
        "model": "divergence-ranker",
        "base_model": cfg.model,
        "skipped": reason,
        "data": dict(sorted(data.counts.items())),
        "shards": n_shards,
    }
    text = (
        f"# divergence-ranker\n\nNo model was trained: {reason}.\n\n"
        f"Data counts: `{json.dumps(metrics['data'], sort_keys=True)}`\n"
    )
    final = out / "model"
    final.mkdir(parents=True, exist_ok=True)
    (final / "README.md").write_text(text, encoding="utf-8")
    (out / "README.md").write_text(text, encoding="utf-8")
    plot_curve([], out / "training_curve.png", f"divergence ranker ({cfg.model}): not trained")
    write_metrics(out / "metrics.json", metrics)
    return metrics
