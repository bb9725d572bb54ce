"""The training loop every model rule shares: accelerate (DDP), checkpoints, early stopping, logs.

Written like the ``accelerate`` examples (``nlp_example.py``): the same code runs on the CPU, one
GPU, or many processes (``accelerate launch --multi_gpu --num_processes N ...`` or ``torchrun
--nproc_per_node N ...`` with ``-m parasim.cli train-<model>``; gloo on CPUs, NCCL on GPUs; several
nodes: ``--num_machines`` / ``--nnodes``).

* **Data.** Every process holds the same example list and the same seeded order; a global batch
  of ``batch_size`` examples is cut into one contiguous slice per process. A loss function returns
  *sums* and *counts* per term (:data:`LossFn`); the loop divides each sum by the count summed over
  all processes, so N processes compute the gradient of the same global-batch mean as one process
  (up to float summation order).
* **Device and precision** through :mod:`parasim.accel`: CUDA when present, bf16 autocast where
  the hardware has it (``dtype: auto``), float32 otherwise.
* **Checkpoints** every ``checkpoint_every`` steps (``accelerator.save_state``: weights, optimizer,
  scheduler, every process's RNG) plus ``trainer_state.json``, written to a temporary folder and
  renamed, so a ``kill -9`` leaves the last complete one. A rerun resumes from it when the
  settings and data fingerprint match, and skips the batches already seen in that epoch: the
  resumed run ends with the model of an uninterrupted one.
* **Early stopping** on a dev metric (higher is better) evaluated every ``eval_every`` steps and
  at the end of each epoch; the best model is saved as it improves and is the one returned.
* **Progress** on the log every ``log_every`` steps: step, epoch, loss, learning rate, examples/s.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import random
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

log = logging.getLogger("parasim.train")

#: ``loss_fn(model, examples) -> {term: (sum tensor, count)}``; the loss is sum(sum / global count).
LossFn = Callable[[Any, Sequence[Any]], Mapping[str, tuple[Any, float]]]
#: ``evaluate(model) -> {metric: value}`` on the dev data (run on the unwrapped model).
EvalFn = Callable[[Any], Mapping[str, float]]
#: ``save(model, path)``: write a model folder (run on the main process, unwrapped model).
SaveFn = Callable[[Any, Path], None]


#: The loop keys with a value in code: those that some model's ``train:`` subsection does not
#: have (nor the shared section), fixed at these values for that model (torch's Adam betas and
#: epsilon, no warm-up steps, evaluation at each epoch's end, patience 2). Every other key's default
#: lives in the schema alone (:func:`model_settings`).
FIXED_LOOP_KEYS = (
    "adam_beta1", "adam_beta2", "adam_epsilon", "warmup_steps", "eval_every", "patience",
)  # fmt: skip


@dataclasses.dataclass(frozen=True, kw_only=True)
class TrainingArguments:
    """Settings of one training run: the shared keys of the ``train:`` config section and the loop
    keys of a model's subsection (:func:`model_settings`).

    Only the keys of :data:`FIXED_LOOP_KEYS` have a default here; the fields keep the order in
    which they are written into the model cards.

    Attributes:
        seed: seeds python, numpy and torch, the data order and dropout.
        learning_rate: Adam(W) learning rate.
        weight_decay: AdamW weight decay (0: Adam, as seed 000).
        adam_beta1, adam_beta2, adam_epsilon: Adam's betas and epsilon (torch's defaults).
        epochs: passes over the training examples at most.
        max_steps: stop after this many optimizer steps (None: ``epochs`` decide).
        batch_size: examples per optimizer step, over all processes together.
        warmup_steps: linear warm-up steps, then linear decay to 0 (0 and no decay: constant).
        schedule: "constant" or "linear" (decay to 0 at the last step).
        max_grad_norm: gradient clipping (0: none).
        checkpoint_every: steps between checkpoints (0: none).
        keep_checkpoints: how many of the latest checkpoints to keep.
        eval_every: steps between dev evaluations (0: at the end of each epoch only).
        patience: evaluations without improvement before stopping (0: never stop early).
        max_minutes: stop cleanly at the first step boundary after this many minutes of training
            in this process (a cluster job's wall-time limit): evaluate, save the best model and
            write every output as at the last step; the stop reason is ``time_limit``. None: no
            limit. Not part of the resume fingerprint (a rerun may give more time).
        log_every: steps between progress lines.
        device: "auto", "cpu" or "cuda" (:mod:`parasim.accel`).
        dtype: "auto", "float32", "bfloat16" or "float16": autocast precision.
        threads: torch CPU threads (0: torch's default).
    """

    seed: int
    learning_rate: float
    weight_decay: float
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_epsilon: float = 1e-8
    epochs: int
    max_steps: int | None
    batch_size: int
    warmup_steps: int = 0
    schedule: str
    max_grad_norm: float
    checkpoint_every: int
    keep_checkpoints: int
    eval_every: int = 0
    patience: int = 2
    max_minutes: float | None
    log_every: int
    device: str
    dtype: str
    threads: int

    def __post_init__(self) -> None:
        if self.batch_size < 1 or self.epochs < 1:
            raise ValueError("train: batch_size and epochs must be >= 1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError(f"train: max_steps must be >= 1 or null, not {self.max_steps}")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise ValueError(f"train: max_minutes must be > 0 or null, not {self.max_minutes}")
        if self.schedule not in ("constant", "linear"):
            raise ValueError(f"train: schedule 'constant' or 'linear', not {self.schedule!r}")


def model_settings(
    section: Mapping[str, Any] | None, config_cls: type
) -> tuple[TrainingArguments, Any]:
    """One model's settings from the ``train:`` section: the loop's and the model's own.

    The section is validated against the schema, which fills in every default. The shared keys of
    ``train:`` (``seed``, ``device``, ``dtype``, ``threads``, ``checkpoint_every``, ...) apply to
    every model; the loop keys of its subsection (``config_cls.section``, e.g.
    ``train.similarity.bilstm``: ``learning_rate``, ``epochs``, ...) override them, with that
    model's defaults; a loop key neither has keeps its :data:`FIXED_LOOP_KEYS` value. The other
    keys of the subsection build ``config_cls`` (a :class:`parasim.config.PartialSettings`).

    Raises:
        ConfigError: the section does not validate (an unknown key, a value out of range), naming
            the key path.
    """
    from parasim.config import validate_section

    train = validate_section("train", section)
    own = train
    for key in config_cls.section.split(".")[1:]:
        own = own[key]
    loop_keys = {f.name for f in dataclasses.fields(TrainingArguments)}
    own_keys = {f.name for f in dataclasses.fields(config_cls)}
    loop = {k: v for k, v in train.items() if k in loop_keys}
    loop.update({k: v for k, v in own.items() if k in loop_keys})
    args = TrainingArguments(**loop)
    cfg = config_cls.from_config({k: v for k, v in own.items() if k in own_keys})
    return args, cfg


@dataclasses.dataclass
class TrainResult:
    """What :func:`fit` returns.

    Attributes:
        model: the trained model, unwrapped: the best by the dev metric when ``evaluate`` was
            given without ``save``, else the last (the best is then in ``best_dir``).
        history: one dict per logged step / evaluation (``kind``: "train" or "eval").
        state: the final trainer state (steps, epochs, best metric, stop reason, resumed from).
    """

    model: Any
    history: list[dict]
    state: dict
    best_dir: Path | None = None


def set_seed(seed: int) -> None:
    """Seed python, numpy and torch (all devices)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def fingerprint(obj: Any) -> str:
    """A short stable hash of JSON-able settings: a checkpoint resumes only under the same one."""
    text = json.dumps(obj, sort_keys=True, default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def code_fingerprint(*modules: str) -> str:
    """Hash of these files of ``parasim.train`` (paths like ``"core/loop.py"``): a result kept
    from other code is not reused."""
    h = hashlib.sha1()
    for name in modules:
        h.update((Path(__file__).parents[1] / name).read_bytes())
    return h.hexdigest()[:16]


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    import resource

    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def peak_gpu_mb() -> float | None:
    """Peak GPU memory torch allocated in this process so far, in MB (None without CUDA)."""
    import torch

    if not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def run_resources(acc) -> dict[str, Any]:
    """What a finished run used, for its ``metrics.json``: peak memory (RSS, GPU), the device,
    the mixed precision and the number of processes of the accelerator ``acc``."""
    return {
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "processes": acc.num_processes,
    }


def epoch_order(n: int, seed: int, epoch: int) -> list[int]:
    """The seeded example order of one epoch (the same on every process)."""
    order = list(range(n))
    random.Random(f"{seed}:{epoch}").shuffle(order)
    return order


def global_batches(order: Sequence[int], batch_size: int, world: int) -> list[list[int]]:
    """Global batches of ``order``; a last batch smaller than ``world`` is dropped (DDP needs
    every process to see at least one example)."""
    out = [list(order[i : i + batch_size]) for i in range(0, len(order), batch_size)]
    if out and len(out[-1]) < world:
        out.pop()
    return out


def process_slice(batch: Sequence[int], rank: int, world: int) -> list[int]:
    """This process's contiguous share of a global batch (sizes differ by at most one)."""
    n, r = divmod(len(batch), world)
    start = rank * n + min(rank, r)
    return list(batch[start : start + n + (rank < r)])


def make_accelerator(args: TrainingArguments):
    """An ``Accelerator`` on the configured device, with bf16/fp16 autocast when resolved so."""
    import torch
    from accelerate import Accelerator

    from parasim.accel import resolve_device, resolve_dtype

    device = resolve_device(args.device, "train.device")
    dtype = resolve_dtype(device, args.dtype, "train.dtype")
    precision = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, "no")
    if device == "cpu" and precision == "fp16":
        precision = "no"
    if args.threads:
        torch.set_num_threads(args.threads)
    return Accelerator(cpu=device == "cpu", mixed_precision=precision)


def _lr_lambda(args: TrainingArguments, total: int) -> Callable[[int], float]:
    def f(step: int) -> float:
        if args.warmup_steps and step < args.warmup_steps:
            return (step + 1) / args.warmup_steps
        if args.schedule == "linear":
            return max(0.0, (total - step) / max(1, total - args.warmup_steps))
        return 1.0

    return f


def latest_checkpoint(ckpt_dir: Path, fp: str) -> Path | None:
    """The newest complete checkpoint written under fingerprint ``fp`` (None: start afresh)."""
    if not ckpt_dir.is_dir():
        return None
    found = []
    for d in ckpt_dir.glob("step-*"):
        state = d / "trainer_state.json"
        if not state.exists():
            continue
        s = json.loads(state.read_text(encoding="utf-8"))
        if s.get("fingerprint") == fp:
            found.append((s["step"], d))
        else:
            log.warning("checkpoint %s was written under other settings or data: not resumed", d)
    return max(found)[1] if found else None


def _save_checkpoint(acc, ckpt_dir: Path, state: dict, history: list[dict], keep: int) -> None:
    final = ckpt_dir / f"step-{state['step']:08d}"
    tmp = ckpt_dir / f".tmp-step-{state['step']:08d}"
    if acc.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
    acc.wait_for_everyone()
    acc.save_state(str(tmp))
    acc.wait_for_everyone()
    if acc.is_main_process:
        (tmp / "history.json").write_text(json.dumps(history), encoding="utf-8")
        # written last: a folder without it is incomplete and never resumed
        (tmp / "trainer_state.json").write_text(json.dumps(state), encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        for old in sorted(ckpt_dir.glob("step-*"))[:-keep] if keep > 0 else []:
            shutil.rmtree(old, ignore_errors=True)
        log.info("checkpoint: %s", final)
    acc.wait_for_everyone()


@dataclasses.dataclass(frozen=True, kw_only=True)
class FitOptions:
    """What a run may add to :func:`fit` beyond its model, examples, loss and settings.

    Attributes:
        evaluate: dev metric(s); the first key is the one early stopping watches (higher wins).
        save: writes the best model; without it the best weights are kept in memory.
        fingerprint_extra: what else identifies the run (data files, model name) for resuming.
        accelerator: an ``Accelerator`` to use (default: :func:`make_accelerator`).
        param_groups: ``param_groups(model)`` -> optimizer parameter groups (e.g. a new head
            with its own ``lr``); default: the model's own ``optimizer_groups(lr)`` where it has
            one, else every trainable parameter at ``args.learning_rate``.
        eval_at_start: evaluate before the first step too (step 0), so that the best model may
            be the untrained start: where the untrained form is the model's own baseline, a
            training that only made it worse on dev ships its start (``best_step`` 0).
    """

    evaluate: EvalFn | None = None
    save: SaveFn | None = None
    fingerprint_extra: Any = None
    accelerator: Any = None
    param_groups: Callable[[Any], list[dict]] | None = None
    eval_at_start: bool = False


@dataclasses.dataclass
class _Fit:
    """What the steps of one :func:`fit` share.

    Attributes:
        model, optimizer, scheduler: as ``accelerator.prepare`` returned them.
        total: the optimizer steps of the whole run.
        state: the trainer state written into every checkpoint (``trainer_state.json``).
        history: the logged steps and evaluations so far.
        best_weights: the best model's weights (``evaluate`` without ``save``).
        resume: the checkpoint resumed from (None: a fresh start).
        t_start, t_log, n_log: when training started, when the last progress line was written,
            and the examples seen since.
    """

    model: Any
    examples: Sequence[Any]
    loss_fn: LossFn
    args: TrainingArguments
    opts: FitOptions
    out_dir: Path
    acc: Any
    optimizer: Any
    scheduler: Any
    total: int
    state: dict[str, Any]
    history: list[dict] = dataclasses.field(default_factory=list)
    best_weights: dict | None = None
    resume: Path | None = None
    t_start: float = 0.0
    t_log: float = 0.0
    n_log: int = 0

    @property
    def ckpt_dir(self) -> Path:
        return self.out_dir / "checkpoints"

    @property
    def world(self) -> int:
        return self.acc.num_processes


def fit(
    model: Any,
    examples: Sequence[Any],
    loss_fn: LossFn,
    args: TrainingArguments,
    out_dir: str | Path,
    options: FitOptions | None = None,
    **kwargs: Any,
) -> TrainResult:
    """Train ``model`` on ``examples`` (see the module docstring for what is shared).

    The run is these steps: :func:`_prepare` (accelerator, seed, fingerprint, optimizer and
    schedule), :func:`_resume` (the latest checkpoint under the same fingerprint, else a fresh
    start), then :func:`_run_epoch` until the last step or a stop (per batch
    :func:`_train_step` and :func:`_after_step`: evaluation, stop reasons, checkpoint; at the
    epoch's end :func:`_end_epoch`), and :func:`_finish` (the last evaluation, the best model).

    Args:
        model: a ``torch.nn.Module``.
        examples: training examples, any objects ``loss_fn`` understands.
        loss_fn: :data:`LossFn`.
        args: the run's settings.
        out_dir: the model's folder: checkpoints go to ``<out_dir>/checkpoints``, the best model
            (when ``evaluate`` and ``save`` are given) to ``<out_dir>/best``.
        options: :class:`FitOptions`; or its fields as keywords (``evaluate=..., save=...``).

    Returns:
        :class:`TrainResult`.

    Raises:
        TypeError: both ``options`` and keywords, or an unknown keyword.
        ValueError: no training batch.
    """
    if options is not None and kwargs:
        raise TypeError("fit: give options or their keywords, not both")
    opts = options if options is not None else FitOptions(**kwargs)
    run = _prepare(model, examples, loss_fn, args, Path(out_dir), opts)
    _resume(run)
    if opts.eval_at_start and opts.evaluate is not None and run.resume is None:
        _evaluate(run)  # step 0: the untrained start competes for the best model
    run.model.train()
    run.t_start = run.t_log = time.perf_counter()
    while run.state["step"] < run.total and run.state["stopped"] is None:
        _run_epoch(run)
    return _finish(run)


def _optimizer_params(model: Any, args: TrainingArguments, opts: FitOptions) -> list:
    """The optimizer's parameters or groups: ``opts.param_groups``, else the model's own
    ``optimizer_groups`` (e.g. new heads at a higher learning rate), else every trainable one."""
    groups = getattr(model, "optimizer_groups", None)
    if opts.param_groups is not None:
        return opts.param_groups(model)
    if groups is not None:
        return groups(args.learning_rate)
    return [p for p in model.parameters() if p.requires_grad]


def _prepare(
    model: Any,
    examples: Sequence[Any],
    loss_fn: LossFn,
    args: TrainingArguments,
    out_dir: Path,
    opts: FitOptions,
) -> _Fit:
    """The accelerator, the seed, the run's fingerprint and step count, the prepared model,
    optimizer and schedule, and the trainer state of a fresh start."""
    import torch

    acc = opts.accelerator or make_accelerator(args)
    world = acc.num_processes
    if not acc.is_main_process:  # one progress log, the main process's
        log.setLevel(logging.WARNING)
    set_seed(args.seed)
    settings = {k: v for k, v in dataclasses.asdict(args).items() if k != "max_minutes"}
    fp = fingerprint([settings, len(examples), world, opts.fingerprint_extra])

    batches_per_epoch = len(global_batches(range(len(examples)), args.batch_size, world))
    if batches_per_epoch == 0:
        raise ValueError(f"no training batch: {len(examples)} examples for {world} process(es)")
    total = args.epochs * batches_per_epoch
    if args.max_steps is not None:
        total = min(total, args.max_steps)
    optimizer = torch.optim.AdamW(
        _optimizer_params(model, args, opts),
        lr=args.learning_rate,
        weight_decay=args.weight_decay,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, _lr_lambda(args, total))
    model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    log.info(
        "device %s, mixed precision %s (train.dtype %s), %d process(es), %d steps",
        acc.device,
        acc.mixed_precision,
        args.dtype,
        world,
        total,
    )
    state: dict[str, Any] = {
        "fingerprint": fp,
        "step": 0,
        "epoch": 0,
        "step_in_epoch": 0,
        "best_metric": None,
        "best_step": None,
        "bad_evals": 0,
        "stopped": None,
        "resumed_from": None,
        "world_size": world,
        "total_steps": total,
    }
    return _Fit(
        model=model,
        examples=examples,
        loss_fn=loss_fn,
        args=args,
        opts=opts,
        out_dir=out_dir,
        acc=acc,
        optimizer=optimizer,
        scheduler=scheduler,
        total=total,
        state=state,
    )


def _resume(run: _Fit) -> None:
    """Load the newest checkpoint written under the run's fingerprint (weights, optimizer,
    schedule, RNGs, state and history), or clear the checkpoints of other runs."""
    acc, state = run.acc, run.state
    run.resume = resume = latest_checkpoint(run.ckpt_dir, state["fingerprint"])
    if resume is not None:
        acc.load_state(str(resume))
        state.update(json.loads((resume / "trainer_state.json").read_text(encoding="utf-8")))
        run.history = json.loads((resume / "history.json").read_text(encoding="utf-8"))
        state["resumed_from"] = resume.name
        log.info("resumed from %s (step %d, epoch %d)", resume, state["step"], state["epoch"])
    elif acc.is_main_process:
        shutil.rmtree(run.ckpt_dir, ignore_errors=True)


def _evaluate(run: _Fit) -> bool:
    """Evaluate, keep the best; True when patience is used up."""
    import torch

    evaluate, save = run.opts.evaluate, run.opts.save
    if evaluate is None:
        return False
    acc, model, state = run.acc, run.model, run.state
    model.eval()
    with torch.no_grad():
        metrics = dict(evaluate(acc.unwrap_model(model)))
    model.train()
    key = next(iter(metrics))
    run.history.append({"kind": "eval", "step": state["step"], **metrics})
    log.info(
        "eval step %d: %s",
        state["step"],
        " ".join(f"{k} {v:.4f}" for k, v in metrics.items()),
    )
    if state["best_metric"] is None or metrics[key] > state["best_metric"]:
        state.update(best_metric=metrics[key], best_step=state["step"], bad_evals=0)
        if save is not None:
            if acc.is_main_process:
                save(acc.unwrap_model(model), run.out_dir / "best")
            acc.wait_for_everyone()
        else:
            run.best_weights = {
                k: v.detach().clone() for k, v in acc.unwrap_model(model).state_dict().items()
            }
        return False
    state["bad_evals"] += 1
    return bool(run.args.patience) and state["bad_evals"] >= run.args.patience


def _out_of_time(run: _Fit) -> bool:
    """Whether ``max_minutes`` has passed (any process: all stop at the same step)."""
    import torch

    if run.args.max_minutes is None:
        return False
    late = time.perf_counter() - run.t_start > 60 * run.args.max_minutes
    return run.acc.reduce(torch.tensor(float(late), device=run.acc.device), "max").item() > 0


def _run_epoch(run: _Fit) -> None:
    """The rest of the current epoch's batches (all of them, unless resumed inside it), each
    followed by its checks; a stop ends it early, else :func:`_end_epoch` closes it."""
    args, state = run.args, run.state
    epoch = state["epoch"]
    batches = global_batches(
        epoch_order(len(run.examples), args.seed, epoch), args.batch_size, run.world
    )
    for b in range(state["step_in_epoch"], len(batches)):
        _train_step(run, batches[b], epoch)
        state["step_in_epoch"] = b + 1
        _after_step(run)
        if state["stopped"]:
            return
    _end_epoch(run)


def _train_step(run: _Fit, batch: Sequence[int], epoch: int) -> None:
    """One optimizer step on this process's slice of the global ``batch``; a progress line
    every ``log_every`` steps and at the last."""
    import torch

    acc, args, state = run.acc, run.args, run.state
    world = run.world
    mine = [run.examples[i] for i in process_slice(batch, acc.process_index, world)]
    with acc.autocast():
        terms = run.loss_fn(run.model, mine)
    loss = 0.0
    sums = {}
    for name, (s, count) in terms.items():
        g_count = acc.reduce(torch.tensor(float(count), device=acc.device), "sum").item()
        loss = loss + s * (world / max(g_count, 1.0))
        sums[name] = (s.detach(), g_count)
    acc.backward(loss)
    if args.max_grad_norm:
        acc.clip_grad_norm_(run.model.parameters(), args.max_grad_norm)
    run.optimizer.step()
    run.scheduler.step()
    run.optimizer.zero_grad()
    state["step"] += 1
    run.n_log += len(batch)
    if args.log_every and state["step"] % args.log_every == 0 or state["step"] == run.total:
        _log_step(run, sums, epoch)


def _log_step(run: _Fit, sums: Mapping[str, tuple[Any, float]], epoch: int) -> None:
    """A ``train`` record of the history and a progress line: each loss term's global mean,
    their sum, the learning rate and the examples per second since the last line."""
    acc, state = run.acc, run.state
    parts = {
        name: acc.reduce(s.float(), "sum").item() / max(c, 1.0) for name, (s, c) in sums.items()
    }
    dt = time.perf_counter() - run.t_log
    rec = {
        "kind": "train",
        "step": state["step"],
        "epoch": epoch,
        "loss": sum(parts.values()),
        **parts,
        "lr": run.scheduler.get_last_lr()[0],
        "examples_per_s": run.n_log / dt if dt > 0 else math.nan,
    }
    run.history.append(rec)
    log.info(
        "step %d/%d epoch %d loss %.4f (%s) lr %.2e %.1f examples/s",
        state["step"],
        run.total,
        epoch,
        rec["loss"],
        " ".join(f"{k} {v:.4f}" for k, v in parts.items()),
        rec["lr"],
        rec["examples_per_s"],
    )
    run.t_log, run.n_log = time.perf_counter(), 0


def _after_step(run: _Fit) -> None:
    """After a step: the ``eval_every`` evaluation, the stop reasons (early stopping, the last
    step, ``max_minutes``) and the ``checkpoint_every`` checkpoint."""
    args, state = run.args, run.state
    if args.eval_every and state["step"] % args.eval_every == 0 and _evaluate(run):
        state["stopped"] = "early_stopping"
    if state["step"] >= run.total and state["stopped"] is None:
        state["stopped"] = "max_steps" if args.max_steps == run.total else "epochs"
    if state["stopped"] is None and _out_of_time(run):
        state["stopped"] = "time_limit"
        log.warning("train.max_minutes (%s) reached at step %d", args.max_minutes, state["step"])
    if args.checkpoint_every and state["step"] % args.checkpoint_every == 0:
        _save_checkpoint(run.acc, run.ckpt_dir, state, run.history, args.keep_checkpoints)


def _end_epoch(run: _Fit) -> None:
    """An epoch's end: the next epoch starts at its first batch; the evaluation of each epoch's
    end (no ``eval_every``) and its stop reasons."""
    state = run.state
    state["epoch"] += 1
    state["step_in_epoch"] = 0
    if not run.args.eval_every and _evaluate(run):
        state["stopped"] = "early_stopping"
    if state["step"] >= run.total and state["stopped"] is None:
        state["stopped"] = "epochs"


def _finish(run: _Fit) -> TrainResult:
    """The last evaluation (unless the last record is one), the best weights back in the model
    (kept in memory), the checkpoints removed: the run's :class:`TrainResult`."""
    acc, opts, state = run.acc, run.opts, run.state
    if opts.evaluate is not None and (not run.history or run.history[-1]["kind"] != "eval"):
        _evaluate(run)
    acc.wait_for_everyone()
    final = acc.unwrap_model(run.model)
    if opts.evaluate is not None and opts.save is None and run.best_weights is not None:
        final.load_state_dict(run.best_weights)
    if acc.is_main_process:
        shutil.rmtree(run.ckpt_dir, ignore_errors=True)
    state.pop("fingerprint", None)
    best_dir = run.out_dir / "best" if opts.evaluate is not None and opts.save is not None else None
    return TrainResult(model=final, history=run.history, state=state, best_dir=best_dir)
