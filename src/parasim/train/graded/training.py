"""Training the graded encoder (the package docstring) and writing its model folder.

The folder (``results/models/graded-encoder``):

* ``run/``: the training run of :func:`parasim.train.core.contrastive.fit_contrastive`
  (``run/checkpoints/`` while it trains, ``run/model/`` once done) and its done marker
  ``run/done.json``. A rerun after ``kill -9`` resumes from the newest complete checkpoint; a
  run finished under the same settings, triples and training code is not trained again (its
  checkpoints are removed once it is done). None of it is a rule output, so it outlives
  Snakemake's removal of an interrupted job's outputs.
* ``model/``: the trained ``SentenceTransformer`` folder (hard links to ``run/model/``'s files;
  the weights sharded into the shared store ``results/models/.weights``,
  :mod:`parasim.train.core.storage`) with the model card; with ``train.graded.merge_share``
  below 1, the fine-tuned weights merged with the untrained start's (WiSE-FT).
* ``metrics.json`` (the verdict the models table reads), ``README.md`` (the card),
  ``training_curve.png`` and ``history.json`` (the logged losses).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parasim.train.core.loop import TrainingArguments

from .settings import MODEL_NAME, GradedConfig, graded_settings, training_steps

log = logging.getLogger("parasim.train")

#: The training run's folder in the model folder, and its done marker.
RUN_DIR, DONE = "run", "done.json"
#: The code a finished run was trained by (under ``parasim/train/``): other code, retrained.
CODE = ("core/contrastive.py", "core/losses.py", "graded/settings.py", "graded/training.py")
#: The counts of the triples that say how many took a divergent row as their hard negative.
DIVERGENT_SOURCES = ("negative_divergent_other", "negative_divergent_en")


@dataclasses.dataclass
class _GradedRun:
    """What the steps of :func:`train_graded_encoder` share.

    Attributes:
        args, cfg: the loop's and the family's settings.
        out: the model folder; ``data``: the triples (``Triples``); ``steps``: optimizer steps.
        train: the done marker's record (settings, fingerprint, losses, the run's figures).
        trained_now: whether this call trained (False: a finished run was reused).
    """

    args: TrainingArguments
    cfg: GradedConfig
    out: Path
    data: Any
    steps: int
    train: dict[str, Any] = dataclasses.field(default_factory=dict)
    trained_now: bool = False

    @property
    def run_dir(self) -> Path:
        return self.out / RUN_DIR


def train_graded_encoder(
    corpus_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    refresd: str | os.PathLike | None = None,
    sts: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Fine-tune the encoder on the corpus's graded triples, measure it and its untrained start,
    write the model folder (module docstring); returns the metrics of ``metrics.json``.

    The steps: :func:`read_triples` (the graded triples of the train split, or the reason to
    skip), :func:`train` (the run, or the finished one reused), :func:`link_model` (``model/``),
    :func:`.evaluate.evaluate_encoders` (both encoders on REFreSD dev and STSb) and
    :func:`write_outputs` (metrics, curve and card).

    Args:
        corpus_dir: the corpus folder (``results/corpus``).
        out_dir: the model folder (``results/models/graded-encoder``).
        section: the ``train:`` config section.
        refresd: REFreSD's folder (``sentence_labels.dev.tsv``), or None; absent, the model
            still trains and its verdict says why it was not measured.
        sts: STSb-multi-mt's folder (``stsb-{en,fr,es}-dev.csv``), or None.

    Raises:
        ConfigError: bad settings, or an encoder that cannot be loaded.
    """
    from parasim.config import ConfigError

    from .evaluate import evaluate_encoders

    t0 = time.perf_counter()
    try:
        args, cfg = graded_settings(section)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    out = Path(out_dir)
    data, reason, counts = read_triples(corpus_dir, cfg, args.seed)
    if reason:
        return write_skipped(out, reason, counts, cfg)
    run = _GradedRun(args, cfg, out, data, training_steps(args, len(data)))
    train(run)
    link_model(run)
    evaluation = evaluate_encoders(out / "model", cfg, args, refresd, sts)
    return write_outputs(run, evaluation, time.perf_counter() - t0)


def read_triples(
    corpus_dir: str | os.PathLike, cfg: GradedConfig, seed: int
) -> tuple[Any, str | None, dict[str, Any]]:
    """The graded triples of the train split of the partitions asked for, or why there is no
    model: ``(triples, None, counts)`` or ``(None, reason, counts)``.

    No model when none of the partitions is in the corpus, when they have no train shard, when
    no triple takes a divergent row as its hard negative (the corpus has no divergent grade:
    its triples would be seed 001's binary ones) or when no positive has a hard negative.
    """
    from parasim.train.core.contrastive import triples
    from parasim.train.core.data import corpus_partitions

    found = corpus_partitions(corpus_dir)
    members = [p for p in (cfg.partitions or found) if p in found]
    counts: dict[str, Any] = {"partitions": members}
    if not members:
        asked = list(cfg.partitions) if cfg.partitions else "any"
        return None, f"no partition ({asked}) in {Path(corpus_dir) / 'data'}", counts
    try:
        data = triples(corpus_dir, members, "train", "graded", seed)
    except ValueError as exc:
        return None, str(exc), counts
    counts.update(data.counts)
    divergent = sum(data.counts[k] for k in DIVERGENT_SOURCES)
    if not divergent:
        return None, (
            f"no divergent row in the train split of {', '.join(members)} is a hard negative "
            f"({data.counts['divergent_rows']} divergent rows, "
            f"{data.counts['divergent_unmatched']} without their positive): the triples would "
            "be the binary ones (corpus.divergent)"
        ), counts  # fmt: skip
    if not len(data):
        return None, "no positive of the train split has a hard negative", counts
    return data, None, counts


def _train_settings(run: _GradedRun) -> dict[str, Any]:
    """What the run is trained under (the done marker's fingerprint covers it)."""
    a, c = run.args, run.cfg
    return {
        "model": c.model, "steps": run.steps, "batch_size": a.batch_size,
        "learning_rate": a.learning_rate, "freeze_embeddings": c.freeze_embeddings,
        "seed": a.seed, "max_length": c.max_length, "prefix": c.prefix,
        "warmup_ratio": c.warmup_ratio, "device": a.device, "dtype": a.dtype, "loss": c.loss,
        "retain": c.retain,
    }  # fmt: skip


def _fingerprint(run: _GradedRun, settings: Mapping[str, Any]) -> str:
    from parasim.train.core.loop import code_fingerprint, fingerprint

    return fingerprint([settings, run.data.fingerprint(), code_fingerprint(*CODE)])


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def train(run: _GradedRun) -> None:
    """Train the encoder in ``run/`` with :func:`fit_contrastive`, unless the done marker says a
    run under the same settings, triples and code finished; fills ``run.train``."""
    import numpy as np
    import torch

    from parasim.train.core.card import write_metrics
    from parasim.train.core.contrastive import MODEL_DIR, fit_contrastive
    from parasim.train.core.storage import share_weights

    args, cfg = run.args, run.cfg
    settings = _train_settings(run)
    fp = _fingerprint(run, settings)
    done = _read_json(run.run_dir / DONE)
    if done and done.get("fingerprint") == fp and (run.run_dir / MODEL_DIR).is_dir():
        log.info("%s: trained before (%s), not retrained", MODEL_NAME, run.run_dir / DONE)
        run.train = done
        return
    (run.run_dir / DONE).unlink(missing_ok=True)
    if args.threads:
        torch.set_num_threads(args.threads)
    res = fit_contrastive(
        cfg.model, run.data, run.run_dir, steps=run.steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, freeze_embeddings=cfg.freeze_embeddings,
        seed=args.seed, max_length=cfg.max_length, prefix=cfg.prefix,
        warmup_ratio=cfg.warmup_ratio,
        save_steps=args.checkpoint_every or run.steps,  # 0: only the end's (always written)
        save_total_limit=args.keep_checkpoints, logging_steps=args.log_every,
        device=args.device, dtype=args.dtype, name=f"{MODEL_NAME} ({cfg.model})", loss=cfg.loss,
        retain=cfg.retain,
    )  # fmt: skip
    # one copy on disk of what the model shares with the other e5 folders (its frozen rows)
    share_weights(res.model_dir, run.out.parent / ".weights")
    median = float(np.median(res.step_seconds)) if res.step_seconds else None
    run.train = {
        "fingerprint": fp,
        "settings": settings,
        "losses": res.losses,
        "result": {
            "global_step": res.global_step,
            "steps_run": res.steps_run,
            "resumed_from": res.resumed_from,
            "train_loss": res.train_loss,
            "seconds": res.seconds,
            "seconds_per_step": None if median is None else round(median, 3),
            "device": res.device,
            "precision": res.precision,
            "trainable_parameters": res.trainable_parameters,
            "frozen_parameters": res.frozen_parameters,
        },
    }
    write_metrics(run.run_dir / DONE, run.train)
    shutil.rmtree(run.run_dir / "checkpoints", ignore_errors=True)  # done: no resume needed
    run.trained_now = True


def link_model(run: _GradedRun) -> None:
    """``model/``: the finished run's folder, each file a hard link to ``run/model/``'s (a copy
    where links are not possible); with ``merge_share`` below 1, the run's weights merged with
    the untrained start's (:func:`parasim.train.core.contrastive.merge_weights`)."""
    from parasim.train.core.card import write_dir
    from parasim.train.core.contrastive import MODEL_DIR

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    src = run.run_dir / MODEL_DIR
    cfg = run.cfg
    if cfg.merge_share < 1.0:
        from parasim.train.core.contrastive import merge_weights
        from parasim.train.core.storage import share_weights

        merge_weights(
            cfg.model, src, cfg.merge_share, run.out / "model", max_length=cfg.max_length,
            prefix=cfg.prefix, name=f"{MODEL_NAME} ({cfg.model}), merged with its start",
        )  # fmt: skip
        share_weights(run.out / "model", run.out.parent / ".weights")
        return
    write_dir(run.out / "model", lambda tmp: shutil.copytree(src, tmp, copy_function=link))


def write_outputs(run: _GradedRun, evaluation: Mapping[str, Any], wall_s: float) -> dict:
    """``metrics.json``, ``training_curve.png`` and ``history.json``, and the model card
    (``README.md``, also in ``model/``); returns the metrics."""
    from parasim.train.core.card import write_model_card, write_run
    from parasim.train.core.contrastive import LOSSES, loss_words
    from parasim.train.core.loop import peak_gpu_mb, peak_rss_mb
    from parasim.train.core.verdict import fmt

    args, cfg, out, data = run.args, run.cfg, run.out, run.data
    result = run.train["result"]
    counts = {"train_pairs": len(data), **data.counts}
    metrics = {
        "model": MODEL_NAME,
        "base_model": cfg.model,
        "grades": data.grades,
        "partitions": data.partitions,
        "data": counts,
        "train": {**result, "trained_now": run.trained_now},
        "eval": {k: v for k, v in evaluation.items() if k not in ("verdict", "verdicts")},
        "verdict": evaluation["verdict"],
        "verdicts": evaluation["verdicts"],
        "wall_s": round(wall_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "settings": {**dataclasses.asdict(args), **dataclasses.asdict(cfg), "steps": run.steps},
    }
    history = [
        {"kind": "train", "step": s, "epoch": None, "loss": x} for s, x in run.train["losses"]
    ]
    write_run(out, history, metrics, f"{MODEL_NAME} ({cfg.model}): {LOSSES[cfg.loss]}")
    figures = evaluation["figures"]
    summary: dict[str, Any] = {
        f"{m} ({enc})": fmt(v) for enc, f in figures.items() for m, v in f.items()
    }
    summary |= {k: result[k] for k in ("global_step", "train_loss", "seconds", "device")}
    summary |= {f"{s}: not evaluated": why for s, why in evaluation["missing"].items()}
    write_model_card(
        out / "README.md",
        MODEL_NAME,
        f"{cfg.model} (mean pooling) fine-tuned by `parasim train-graded-encoder` with "
        f"{loss_words(cfg.loss, cfg.retain, '`train.graded.retain`')} on the graded triples of the "
        f"corpus's train split ({', '.join(data.partitions)}): each aligned pair (anchor, "
        "positive) with one of its divergent rows as the hard negative (a synthetic edit or a "
        "mined line; its unrelated row when it has none). Measured beside its untrained start "
        "on REFreSD dev (the cosine's weighted F1, each encoder at its threshold picked on dev) "
        "and STSb-multi-mt dev across languages (Spearman). Load `model/` with "
        f"`SentenceTransformer(path)`; `encode` prepends the training prefix {cfg.prefix!r}."
        + (
            f" Its weights are {cfg.merge_share:g} of the fine-tuned ones and "
            f"{1 - cfg.merge_share:g} of the untrained start's (WiSE-FT, "
            "`train.graded.merge_share`)."
            if cfg.merge_share < 1.0
            else ""
        ),
        counts,
        metrics["settings"],
        summary,
        verdict=metrics["verdict"],
        needs=(
            f"more graded triples than these {len(data)} (the divergent tier: "
            f"{sum(data.counts[k] for k in DIVERGENT_SOURCES)} of them) and the GPU recipe "
            "`configs/train-gpu.yaml` (one epoch)"
        ),
    )  # fmt: skip
    card = out / "model" / "README.md"
    card.unlink(missing_ok=True)  # a hard link to run/model's card: replace it, do not write it
    shutil.copyfile(out / "README.md", card)
    return metrics


def write_skipped(out: Path, reason: str, counts: Mapping[str, Any], cfg: GradedConfig) -> dict:
    """No model: ``metrics.json`` (``skipped``: the reason), the card, ``model/README.md`` and an
    empty curve say why (a counted skip: the rest of the workflow goes on)."""
    from parasim.train.core.card import plot_curve, write_metrics, write_model_card

    log.warning("%s not trained: %s", MODEL_NAME, reason)
    data = {k: v for k, v in counts.items() if k != "partitions"}
    metrics = {
        "model": MODEL_NAME,
        "base_model": cfg.model,
        "skipped": reason,
        "partitions": list(counts.get("partitions", [])),
        "data": data,
    }
    write_metrics(out / "metrics.json", metrics)
    plot_curve([], out / "training_curve.png", f"{MODEL_NAME}: not trained")
    write_model_card(
        out / "README.md", MODEL_NAME, f"No model was trained: {reason}.", data, {}, {}
    )
    shutil.rmtree(out / "model", ignore_errors=True)  # no model left from an earlier run
    (out / "model").mkdir(parents=True)
    shutil.copyfile(out / "README.md", out / "model" / "README.md")
    return metrics
