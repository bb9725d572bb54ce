"""Training S3BERT: the decomposition and consistency losses (seed 002 eq. 3-6) and the run that
writes the model folder, its card and metrics."""

from __future__ import annotations

import copy
import dataclasses
import logging
import os
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.config import ConfigError
from parasim.train.core.loop import run_resources

from .data import Pair, s3bert_data, scale_targets, target_scaling
from .evaluate import _mean, evaluate_slice
from .model import (
    _in_chunks,
    build_s3bert,
    embed,
    freeze_all_but_last,
    length_chunks,
    load_s3bert,
    mean_pool,
    save_s3bert,
)
from .settings import MODEL_KEY, S3bertConfig, aspect_names, s3bert_settings

log = logging.getLogger("parasim.train")


def s3bert_loss(tokenizer, teacher, cfg: S3bertConfig):
    """The loop's loss function: decomposition (count b) and consistency (count b²) sums."""
    import torch
    import torch.nn.functional as F

    h = cfg.feature_dim

    def loss_fn(model, batch: Sequence[Pair]):
        from torch.nn.parallel import DistributedDataParallel

        device = next(model.parameters()).device
        b = len(batch)
        texts = [p.a for p in batch] + [p.b for p in batch]
        # shortest to longest, each chunk padded on its own: the same embeddings, less padding
        # (DDP wants one forward per backward, so one chunk there)
        n = 1 if isinstance(model, DistributedDataParallel) else cfg.length_chunks
        chunks = length_chunks(tokenizer, texts, cfg.max_length, n)
        betas = []

        def student(inputs):
            e, beta = model(**inputs)
            betas.append(beta)
            return e

        emb = _in_chunks(student, tokenizer, texts, chunks, cfg.max_length, device).float()
        beta = betas[0]
        ea, eb = emb[:b], emb[b:]
        k = beta.shape[0]
        sims = torch.stack(
            [
                F.cosine_similarity(ea[:, i * h : (i + 1) * h], eb[:, i * h : (i + 1) * h])
                for i in range(k)
            ],
            dim=1,
        )
        target = torch.tensor([p.scores for p in batch], dtype=torch.float32, device=device)
        present = ~torch.isnan(target)
        err = (torch.nan_to_num(target) - beta.float() * sims) ** 2 * present
        per_pair = err.sum(1) / present.sum(1).clamp(min=1)
        teacher.to(device)
        with torch.no_grad():
            t = _in_chunks(
                lambda inputs: mean_pool(teacher, **inputs),
                tokenizer, texts, chunks, cfg.max_length, device,
            ).float()  # fmt: skip
        tn = F.normalize(t, dim=-1)
        sn = F.normalize(emb, dim=-1)
        t_sim = tn[:b] @ tn[b:].T
        s_sim = sn[:b] @ sn[b:].T
        consistency = ((t_sim - s_sim) ** 2).sum()
        return {
            "decomposition": (cfg.alpha * per_pair.sum(), b),
            "consistency": (consistency, b * b),
        }

    return loss_fn


@dataclasses.dataclass
class _S3bertRun:
    """What the steps of :func:`train_s3bert` share.

    Attributes:
        data: the scored pairs split (:func:`s3bert_data`); ``names``: the aspects.
        acc: the accelerator; ``encoder``, ``tokenizer``: the base model (trained in ``model``).
        dim: the encoder's hidden size.
        sts: STSb-multi-mt English dev (None: no forgetting check).
        before, sts_before: the untrained encoder's measures (SB-full, SB-rand; STSb).
        teacher: the frozen copy of the untrained encoder (the consistency loss).
        trainable: the encoder's trainable parameters.
        model: the S3BERT model being trained.
    """

    args: Any
    cfg: S3bertConfig
    out: Path
    t0: float
    data: Any
    names: Sequence[str]
    acc: Any
    encoder: Any
    tokenizer: Any
    dim: int
    sts: Any
    before: dict[str, Any]
    sts_before: float | None
    teacher: Any
    trainable: int
    model: Any


def train_s3bert(
    rows: Mapping[str, Sequence],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    sts_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
) -> dict[str, Any]:
    """Train S3BERT; write ``model/``, ``README.md``, ``metrics.json``, ``training_curve.png``.

    The steps: :func:`_prepare` (data, the base encoder and its untrained measures, the frozen
    teacher, the model), :func:`_train` (the loop, keeping the model of the lowest dev loss),
    :func:`_measure` (the best model against the untrained encoder) and :func:`_write_model`
    (the model folder, the run's files and the card).

    Args:
        rows: scored sentence pairs (see :func:`s3bert_data`).
        out_dir: the model's folder (``results/models/s3bert``).
        section: the ``train:`` config section.
        sts_dir: STSb-multi-mt folder for the forgetting check (skipped when None or absent).
        accelerator: an ``accelerate.Accelerator`` (default: one for ``train.device``/``dtype``).

    Raises:
        ConfigError: the model cannot be loaded, or has fewer dimensions than the aspects need.
        ValueError: no training or dev pair is left.
    """
    run = _prepare(rows, out_dir, section, sts_dir, accelerator)
    result, scaling = _train(run)
    train_s = time.perf_counter() - run.t0
    if not run.acc.is_main_process:
        return {}
    best, _, _ = load_s3bert(result.best_dir)
    metrics, verdict = _measure(run, result, best, train_s)
    _write_model(run, result, best, metrics, verdict, scaling)
    return metrics


def _prepare(
    rows: Mapping[str, Sequence],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None,
    sts_dir: str | os.PathLike | None,
    accelerator: Any,
) -> _S3bertRun:
    """The settings and data, the seeded base encoder and its untrained measures, the frozen
    teacher and the model to train (its last ``tune_layers`` layers and the aspect weights)."""
    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.core.loop import make_accelerator, set_seed
    from parasim.train.eval.sts import read_stsb, stsb_spearman

    args, cfg = s3bert_settings(section)
    out = Path(out_dir)
    t0 = time.perf_counter()
    data = s3bert_data(rows, cfg, args.seed)
    log.info("data: %s", dict(sorted(data.counts.items())))
    if not data.train or not data.dev:
        raise ValueError(
            f"S3BERT needs training and dev pairs; the scored rows gave {dict(data.counts)}"
        )
    names = aspect_names()
    acc = accelerator or make_accelerator(args)
    set_seed(args.seed)
    encoder, tokenizer = load_training_encoder(cfg.model, key=MODEL_KEY)
    dim = encoder.config.hidden_size
    if dim <= len(names) * cfg.feature_dim:
        raise ConfigError(
            f"{MODEL_KEY}: {cfg.model!r} has {dim} dimensions; {len(names)} aspects of "
            f"{cfg.feature_dim} need more (train.s3bert.feature_dim)"
        )
    sts = None
    if sts_dir is not None and (Path(sts_dir) / "stsb-en-dev.csv").exists():
        sts = read_stsb(sts_dir, "en")
    before = evaluate_slice(encoder, tokenizer, data.test or data.dev, cfg, args.seed)
    sts_before = stsb_spearman(_embedder(encoder, tokenizer, cfg), sts) if sts else None
    teacher = copy.deepcopy(encoder).eval()
    for p in teacher.parameters():
        p.requires_grad = False
    trainable = freeze_all_but_last(encoder, cfg.tune_layers)
    model = build_s3bert(encoder, len(names))
    return _S3bertRun(
        args=args, cfg=cfg, out=out, t0=t0, data=data, names=names, acc=acc, encoder=encoder,
        tokenizer=tokenizer, dim=dim, sts=sts, before=before, sts_before=sts_before,
        teacher=teacher, trainable=trainable, model=model,
    )  # fmt: skip


def _train(run: _S3bertRun):
    """The loop on the scaled training targets, evaluated on the dev pairs from step 0 (the
    best model is saved to ``best/``): ``(the loop's result, the target scaling)``."""
    from parasim.train.core.card import write_dir
    from parasim.train.core.loop import fit

    args, cfg, data, tokenizer = run.args, run.cfg, run.data, run.tokenizer
    loss_fn = s3bert_loss(tokenizer, run.teacher, cfg)
    scaling = target_scaling(data.train, cfg.target_norm)
    train_pairs = scale_targets(data.train, scaling)
    dev_pairs = scale_targets(data.dev, scaling)

    def evaluate(m):
        """Minus the dev loss (the seed keeps the model of the lowest dev loss), and the dev
        mean aspect Spearman."""
        sums: Counter = Counter()
        counts: Counter = Counter()
        for i in range(0, len(dev_pairs), cfg.eval_batch_size):
            for name, (total, n) in loss_fn(m, dev_pairs[i : i + cfg.eval_batch_size]).items():
                sums[name] += float(total)
                counts[name] += n
        dev_loss = sum(sums[k] / max(counts[k], 1) for k in sums)
        r = evaluate_slice(m.encoder, tokenizer, data.dev, cfg, args.seed)["s3bert"]
        return {"minus_dev_loss": -dev_loss, "dev_mean_spearman": _mean(r) or 0.0}

    def save(m, path: Path) -> None:
        meta = {"aspects": list(run.names)}
        write_dir(path, lambda tmp: save_s3bert(m, tokenizer, tmp, meta))

    extra = [dataclasses.asdict(cfg), len(data.train), len(data.dev), train_pairs[:3]]
    result = fit(
        run.model, train_pairs, loss_fn, args, run.out,
        evaluate=evaluate, save=save, fingerprint_extra=extra, accelerator=run.acc,
        eval_at_start=True,
    )  # fmt: skip
    return result, scaling


def _measure(run: _S3bertRun, result, best, train_s: float) -> tuple[dict, dict]:
    """The best model's aspect Spearmans beside the untrained encoder's (SB-full, SB-rand), the
    STSb forgetting check and the verdict: ``(metrics, verdict)``."""
    from parasim.train.core.verdict import compare, mean_spearman_stat
    from parasim.train.eval.sts import stsb_spearman

    args, cfg, data, names, before = run.args, run.cfg, run.data, run.names, run.before
    after = evaluate_slice(best.encoder, run.tokenizer, data.test or data.dev, cfg, args.seed)
    sts = run.sts
    sts_after = stsb_spearman(_embedder(best.encoder, run.tokenizer, cfg), sts) if sts else None
    evaluated = data.test or data.dev
    gold = [[p.scores[k] for p in evaluated] for k in range(len(names))]
    verdict = compare(
        mean_spearman_stat(gold, after["cosines"]["s3bert"]),
        mean_spearman_stat(gold, before["cosines"]["rand"]),
        len(evaluated),
        measure="mean aspect Spearman", baseline_name="untrained encoder's SB-rand",
        evaluated_on=f"the scored pairs' {'test' if data.test else 'dev'} split",
    )  # fmt: skip
    table = {
        name: {
            "s3bert": after["s3bert"][name],
            "sb_full": before["full"][name],
            "sb_rand": before["rand"][name],
            "s3bert_full": after["full"][name],
        }
        for name in names
    }
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    metrics = {
        "model": "s3bert",
        "base_model": cfg.model,
        "data": dict(sorted(data.counts.items())),
        "evaluated_on": "test" if data.test else "dev",
        "aspects": table,
        "mean_spearman": {
            "s3bert": _mean(after["s3bert"]),
            "sb_full": _mean(before["full"]),
            "sb_rand": _mean(before["rand"]),
        },
        "aspects_above_sb_rand": sum(
            1
            for r in table.values()
            if r["s3bert"] is not None and r["sb_rand"] is not None and r["s3bert"] > r["sb_rand"]
        ),
        "stsb_en_dev_spearman": {"before": run.sts_before, "after": sts_after},
        "verdict": verdict,
        "shipped_start": result.state["best_step"] == 0,
        "beta": [round(float(x), 4) for x in best.beta.detach().cpu()],
        "target_norm": cfg.target_norm,
        "trainable_parameters": run.trainable + len(names),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "pairs_per_s": sum(speeds) / len(speeds) if speeds else None,
        "wall_s": round(train_s, 1),
        **run_resources(run.acc),
    }
    return metrics, verdict


def _write_model(run: _S3bertRun, result, best, metrics: dict, verdict: dict, scaling) -> None:
    """``model/`` (the best model with its aspect layout), the run's files and the model card
    (also in ``model/``); the loop's ``best/`` is removed."""
    from parasim.train.core.card import write_model_card, write_run
    from parasim.train.core.storage import share_weights

    args, cfg, data, names, out, dim = run.args, run.cfg, run.data, run.names, run.out, run.dim
    final = out / "model"
    shutil.rmtree(final, ignore_errors=True)
    layout = {
        "aspects": list(names),
        "feature_dim": cfg.feature_dim,
        "slices": {
            n: [k * cfg.feature_dim, (k + 1) * cfg.feature_dim] for k, n in enumerate(names)
        },
        "residual": [len(names) * cfg.feature_dim, dim],
        "pooling": "mean",
        "base_model": cfg.model,
        # beta_k * cos predicts (score - min) / (max - min) with minmax (None: the score itself)
        "target_scaling": scaling,
    }
    save_s3bert(best, run.tokenizer, final, layout)
    share_weights(final, out.parent / ".weights")
    shutil.rmtree(result.best_dir, ignore_errors=True)
    write_run(out, result.history, metrics, f"S3BERT ({cfg.model})")
    write_model_card(
        out / "README.md",
        "s3bert",
        "Sentence encoder whose embedding is partitioned into AMR aspects (seed 002, S3BERT): "
        f"dimensions [{cfg.feature_dim}k, {cfg.feature_dim}(k+1)) of the mean-pooled embedding "
        f"stand for aspect k of {list(names)}; "
        f"the last {dim - len(names) * cfg.feature_dim} are the residual. Trained on parasim's "
        "scored English sentence pairs (the English side and the translation of the other side "
        "of positives and hard negatives) with the decomposition and consistency losses. "
        "`model/` loads with `parasim.train.s3bert.model.load_s3bert`, or as a plain encoder with "
        "`AutoModel.from_pretrained` (mean pooling).",
        {**dict(sorted(data.counts.items()))},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {"mean_spearman": metrics["mean_spearman"],
         "aspects_above_sb_rand": metrics["aspects_above_sb_rand"],
         "stsb_en_dev_spearman": metrics["stsb_en_dev_spearman"],
         "steps": result.state["step"], "best_step": result.state["best_step"],
         "pairs_per_s": metrics["pairs_per_s"], "peak_rss_mb": metrics["peak_rss_mb"]},
        verdict=verdict, shipped_start=metrics["shipped_start"],
        needs=(
            f"more scored pairs than these {len(data.train)} training pairs and the GPU recipe "
            "`configs/train-gpu.yaml` (15 of 15 aspects above SB-rand there, BENCHMARKS.md)"
        ),
    )  # fmt: skip
    shutil.copyfile(out / "README.md", final / "README.md")


def _embedder(encoder, tokenizer, cfg: S3bertConfig):
    """:func:`~.model.embed` with ``cfg``'s length, as :func:`parasim.train.eval.sts.stsb_spearman`
    calls it (64 sentences per batch)."""
    return lambda texts: embed(encoder, tokenizer, texts, cfg.max_length)
