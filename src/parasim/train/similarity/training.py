"""Seed 001's protocol for one encoder and training partition: k-fold cross-validation, voting,
cross-corpus tests, baselines (see the package docstring)."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.data import Split, corpus_partitions
from parasim.train.core.loop import code_fingerprint, peak_gpu_mb, peak_rss_mb
from parasim.train.core.metrics import accuracy_threshold

from .data import _partition_members, read_split
from .settings import model_name, similarity_settings

log = logging.getLogger("parasim.train")

#: The code a kept fold result was computed by (``parasim/train/``): other code, no reuse.
CODE = (
    "similarity/settings.py", "similarity/data.py", "similarity/model.py",
    "similarity/training.py", "core/data.py", "core/encoder.py", "core/loop.py", "core/metrics.py",
)  # fmt: skip


#: The keys of ``cv.json`` that ``metrics.json`` repeats (its ``cv``).
CV_METRICS = (
    "mean",
    "sd",
    "max_voting",
    "avg_voting",
    "fold_accuracy",
    "skipped_folds",
    "baselines",
)


def accuracy(gold: Sequence[int], pred: Sequence[int]) -> float | None:
    if not gold:
        return None
    return sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)


def vote(probs: Sequence[Sequence[float]]) -> tuple[list[int], list[int]]:
    """Max voting and average voting of several models' P(similar) over the same rows.

    Max voting: the label most models give (a tie goes to average voting). Average voting: mean
    P(similar) >= 0.5.
    """
    k = len(probs)
    n = len(probs[0]) if k else 0
    avg = [int(sum(p[i] for p in probs) / k >= 0.5) for i in range(n)]
    mx = []
    for i in range(n):
        yes = sum(p[i] >= 0.5 for p in probs)
        mx.append(1 if 2 * yes > k else 0 if 2 * yes < k else avg[i])
    return mx, avg


def mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


def head_groups(head_lr: float | None):
    """Optimizer groups: the classifier head at ``head_lr``, the rest at the loop's rate."""
    if head_lr is None:
        return None

    def groups(model) -> list[dict]:
        head = {id(p) for p in model.head.parameters()}
        rest = [p for p in model.parameters() if id(p) not in head]
        return [{"params": rest}, {"params": list(model.head.parameters()), "lr": head_lr}]

    return groups


#: The classes of the graded head: class 1 is similar in both heads.
GRADE_CLASS = {"unrelated": 0, "equivalent": 1, "divergent": 2}


def targets(split: Split, classes: int = 2) -> list[int]:
    """The class of every row: its binary label, or with three classes its grade's
    (:data:`GRADE_CLASS`; a row without a grade by its label)."""
    if classes == 2:
        return list(split.label)
    return [
        GRADE_CLASS[g] if g is not None else int(y)
        for g, y in zip(split.grade, split.label, strict=True)
    ]


def loss_fn_for(split: Split, classes: int = 2):
    """:data:`parasim.train.core.loop.LossFn` over row indices of ``split`` (summed
    cross-entropy over the head's classes: :func:`targets`)."""
    import torch
    import torch.nn.functional as F

    gold_of = targets(split, classes)

    def loss_fn(model, idx: Sequence[int]):
        logits = model([split.s1[i] for i in idx], [split.s2[i] for i in idx])
        gold = torch.tensor([gold_of[i] for i in idx], device=logits.device)
        return {"ce": (F.cross_entropy(logits, gold, reduction="sum"), len(idx))}

    return loss_fn


def _replace_dir(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    src.rename(dst)


def _skip(out: Path, eval_dir: Path, name: str, reason: str, extra: dict) -> dict:
    """Write the outputs of a skipped model: metrics, card and eval JSONs that say why."""
    from parasim.train.core.card import plot_curve, write_metrics, write_model_card

    log.warning("%s skipped: %s", name, reason)
    metrics = {"model": name, "skipped": reason, **extra}
    write_metrics(out / "metrics.json", metrics)
    with warnings.catch_warnings():  # an empty plot: no legend entries
        warnings.simplefilter("ignore", UserWarning)
        plot_curve([], out / "training_curve.png", f"{name}: skipped ({reason[:60]})")
    write_model_card(out / "README.md", name, f"Not trained: {reason}", extra, {}, {})
    for f in ("cv.json", "test.json"):
        write_metrics(eval_dir / f, {"model": name, "skipped": reason})
    return metrics


@dataclasses.dataclass
class _Protocol:
    """What the steps of :func:`train_similarity` share.

    Attributes:
        name: the model's name (``similarity-<encoder>-<partition>``).
        members: the corpus partitions the training partition holds.
        base: what every output names (encoder, partition, members).
        train: the training rows of every member; ``tests``: each corpus partition's test rows.
        counts: the training data's counts.
        fold_ids: the folds cross-validated.
        acc: the accelerator (set by :func:`_baselines`, as what follows).
        texts: every sentence the model sees in training and testing (the BiLSTM's vocabulary).
        info: the model's settings (:func:`~.model.model_info`, then the built model's own).
        untrained: the untrained classifier (the cosine baseline; the BiLSTM folds' start).
        train_cos, test_cos: its cosines of the training rows and of each partition's test rows.
        majority: the training rows' majority class.
        data_fp: what identifies the data and code a kept fold result was computed from.
        folds: one record per fold (trained, kept or skipped); ``best``: the best fold's.
        threshold, threshold_accuracy: the cosine threshold on all training rows, its accuracy.
    """

    corpus_dir: str | os.PathLike
    out: Path
    eval_dir: Path
    encoder: str
    partition: str
    name: str
    args: Any
    cfg: Any
    sim: Any
    members: list[str]
    base: dict[str, Any]
    train: Split
    tests: dict[str, Split]
    counts: Counter
    fold_ids: list[int]
    t0: float
    acc: Any = None
    texts: list[str] = dataclasses.field(default_factory=list)
    info: dict[str, Any] = dataclasses.field(default_factory=dict)
    untrained: Any = None
    train_cos: list[float] = dataclasses.field(default_factory=list)
    test_cos: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    majority: int = 0
    data_fp: list = dataclasses.field(default_factory=list)
    folds: list[dict] = dataclasses.field(default_factory=list)
    best: dict | None = None
    threshold: float = 0.0
    threshold_accuracy: float = 0.0


def train_similarity(
    corpus_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    encoder: str,
    partition: str,
    section: Mapping[str, Any] | None = None,
    corpus_section: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run seed 001's protocol for one encoder and training partition (module docstring).

    The steps, in order: :func:`_read_corpus` (the partition's training and test rows; a
    partition without rows or without two folds is a skipped model), :func:`_baselines` (the
    untrained model, its cosines, the majority class), :func:`_run_fold` per fold (trained, or
    kept from an earlier run), :func:`_ship_start` (a bi-encoder whose untrained cosine beats
    the fold models ships its start), :func:`_test_tables` (Table 5, voting, the verdict),
    :func:`_cv_table` (Table 4) and :func:`_write_outputs` (curve, metrics, model card).

    Writes ``out_dir``: ``model/`` (the best fold model), ``metrics.json``, ``README.md``,
    ``training_curve.png``, ``folds/fold-<i>/result.json``; ``eval_dir``: ``cv.json`` (Table 4)
    and ``test.json`` (Table 5). Returns the metrics.

    Raises:
        ConfigError: bad settings or a model / vector file that cannot be loaded.
    """
    from parasim.train.core.card import write_metrics

    run = _read_corpus(corpus_dir, out_dir, eval_dir, encoder, partition, section, corpus_section)
    if isinstance(run, dict):
        return run
    _baselines(run)
    for f in run.fold_ids:
        _run_fold(run, f)
    trained = [r for r in run.folds if "accuracy" in r]
    if not trained:
        return _skip(
            run.out,
            run.eval_dir,
            run.name,
            "every fold was skipped: " + "; ".join(r["skipped"] for r in run.folds),
            {**run.base, **run.counts, "folds": run.folds},
        )
    _check_saved_fold(run)
    cv_mean, cv_sd = mean_sd([r["accuracy"] for r in trained])
    base_cv = {
        k: mean_sd([r[k] for r in run.folds if r.get(k) is not None])
        for k in ("majority_accuracy", "untrained_cosine_accuracy")
    }
    run.threshold, run.threshold_accuracy = accuracy_threshold(run.train_cos, run.train.label)
    shipped_start = _ship_start(run, base_cv["untrained_cosine_accuracy"][0], cv_mean)
    table, by_lang, verdict, own_test, voting_on = _test_tables(run, trained)
    cv = _cv_table(run, trained, (cv_mean, cv_sd), base_cv, own_test, voting_on)
    test = {
        "model": run.name,
        **run.base,
        "best_fold": run.best["fold"],
        "best_fold_accuracy": run.best["accuracy"],
        "partitions": table,
        "lang_pairs": by_lang,
    }
    write_metrics(run.eval_dir / "cv.json", cv)
    write_metrics(run.eval_dir / "test.json", test)
    return _write_outputs(run, trained, cv, by_lang, verdict, shipped_start)


def _read_corpus(
    corpus_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    encoder: str,
    partition: str,
    section: Mapping[str, Any] | None,
    corpus_section: Mapping[str, Any] | None,
) -> _Protocol | dict[str, Any]:
    """The settings, the partition's training rows and every partition's test rows, and the
    folds to cross-validate; or the metrics of a skipped model (no training rows, fewer than
    two non-empty folds)."""
    t0 = time.perf_counter()
    args, cfg, sim = similarity_settings(section, encoder)
    name = model_name(encoder, partition)
    out, eval_dir = Path(out_dir), Path(eval_dir)
    out.mkdir(parents=True, exist_ok=True)
    if corpus_section is None:
        from parasim.config import validate_section

        corpus_section = validate_section("corpus", {})
    found = corpus_partitions(corpus_dir)
    members = _partition_members(partition, corpus_section, sim, found)
    base = {"encoder": encoder, "partition": partition, "members": members}

    drawn: Counter = Counter()  # the train split's divergent rows, kept and left out

    def read(p: str, split: str) -> Split:
        return read_split(
            corpus_dir, p, split, sim.grades, sim.divergent_per_positive, args.seed,
            drawn if split == "train" else None,
        )  # fmt: skip

    train = Split.concat([read(p, "train") for p in members if p in found])
    tests = {p: read(p, "test") for p in found}
    counts = Counter(
        train_rows=len(train),
        train_similar=sum(train.label),
        train_rows_without_fold=sum(f is None for f in train.fold),
    )
    if sim.grades == "graded":
        counts["train_divergent"] = sum(g == "divergent" for g in train.grade)
        for key in ("divergent_parent_not_in_split", "divergent_spare_left_out"):
            counts[f"train_{key}"] = drawn[key]
    if not train:
        return _skip(
            out,
            eval_dir,
            name,
            f"partition {partition} has no training rows in {corpus_dir} "
            f"(partitions there: {found or 'none'})",
            base,
        )
    fold_ids = sorted({f for f in train.fold if f is not None})
    if len(fold_ids) < 2:
        return _skip(
            out,
            eval_dir,
            name,
            f"partition {partition}: {len(train)} training pairs fill {len(fold_ids)} fold(s); "
            f"k-fold cross-validation needs at least 2 non-empty folds (corpus.folds, more pairs)",
            {**base, **counts},
        )
    if cfg.max_folds is not None:
        fold_ids = fold_ids[: cfg.max_folds]
    return _Protocol(
        corpus_dir=corpus_dir,
        out=out,
        eval_dir=eval_dir,
        encoder=encoder,
        partition=partition,
        name=name,
        args=args,
        cfg=cfg,
        sim=sim,
        members=members,
        base=base,
        train=train,
        tests=tests,
        counts=counts,
        fold_ids=fold_ids,
        t0=t0,
    )


def _baselines(run: _Protocol) -> None:
    """The accelerator, the seeded untrained model, its cosines of the training and test rows
    (the cosine baseline), the majority class and the data fingerprint."""
    from parasim.train.core.loop import make_accelerator, set_seed

    from .model import build_classifier, cosines, model_info

    run.acc = make_accelerator(run.args)
    set_seed(run.args.seed)
    train, tests, eval_bs = run.train, run.tests, run.sim.eval_batch_size
    # vocabulary of the BiLSTM: every sentence the model will see in training and testing
    run.texts = train.s1 + train.s2 + [t for s in tests.values() for t in s.s1 + s.s2]
    info = model_info(run.encoder, run.cfg)
    if run.sim.classes != 2:  # seed 001's two-class models keep their similarity.json as before
        info["classes"] = run.sim.classes
    run.untrained = build_classifier(run.encoder, info, run.texts)
    run.info = dict(run.untrained.info)
    run.untrained.to(run.acc.device)
    # baselines: majority class and the untrained encoder's cosine with a training-fold threshold
    run.train_cos = cosines(run.untrained, train, eval_bs)
    run.test_cos = {p: cosines(run.untrained, s, eval_bs) for p, s in tests.items() if len(s)}
    run.majority = int(2 * sum(train.label) >= len(train))
    parquets = sorted(Path(run.corpus_dir, "data").rglob("*.parquet"))
    run.data_fp = [
        [(str(f), f.stat().st_size) for f in parquets],
        run.members,
        run.info,
        code_fingerprint(*CODE),
        [run.sim.grades, run.sim.divergent_per_positive],
    ]


def _fold_record(run: _Protocol, f: int) -> tuple[dict[str, Any], Split, Split]:
    """Fold ``f``'s record with its baselines (threshold and majority from the training folds
    only), its training rows and its held-out rows."""
    train, train_cos = run.train, run.train_cos
    val_idx = [i for i, x in enumerate(train.fold) if x == f]
    tr_idx = [i for i, x in enumerate(train.fold) if x is not None and x != f]
    val, tr = train.take(val_idx), train.take(tr_idx)
    tr_cos, val_cos = [train_cos[i] for i in tr_idx], [train_cos[i] for i in val_idx]
    fold_base = {
        "majority_accuracy": accuracy(val.label, [int(2 * sum(tr.label) >= len(tr))] * len(val)),
    }
    if tr_cos:
        t, _ = accuracy_threshold(tr_cos, tr.label)
        fold_base["untrained_cosine_accuracy"] = accuracy(val.label, [int(c > t) for c in val_cos])
    rec: dict[str, Any] = {"fold": f, "train_rows": len(tr), "val_rows": len(val), **fold_base}
    return rec, tr, val


def _fold_model(run: _Protocol, f: int):
    """A fresh seeded model for fold ``f``: a new bi-encoder, or a copy of the untrained BiLSTM
    (its vectors are shared) with its LSTM and head initialised again."""
    from parasim.train.core.loop import set_seed

    from .model import build_classifier

    set_seed(run.args.seed + f)
    model = (
        build_classifier(run.encoder, run.info, run.texts) if run.encoder == "biencoder" else None
    )
    if model is None:  # the BiLSTM's vectors are shared: copy the untrained model
        import copy

        model = copy.deepcopy(run.untrained).cpu()
        # a fresh seeded initialisation per fold
        model.encoder.lstm.reset_parameters()
        for m in model.head.modules():
            if hasattr(m, "reset_parameters") and m is not model.head:
                m.reset_parameters()
    return model


def _run_fold(run: _Protocol, f: int) -> None:
    """Fold ``f``: skipped (one class in its training folds), kept from an earlier run under the
    same fingerprint, or trained and measured; the best fold model so far goes to ``model/``."""
    from parasim.train.core.card import write_metrics
    from parasim.train.core.loop import fingerprint, fit

    from .model import predict

    name, args, eval_bs = run.name, run.args, run.sim.eval_batch_size
    fold_dir = run.out / "folds" / f"fold-{f}"
    rec, tr, val = _fold_record(run, f)
    if len(set(tr.label)) < 2:
        rec["skipped"] = (
            f"fold {f}: the training folds hold one class only "
            f"({len(tr)} rows, label {tr.label[0] if tr.label else 'none'})"
        )
        log.warning("%s: %s", name, rec["skipped"])
        run.folds.append(rec)
        return
    fp = fingerprint([dataclasses.asdict(args), run.data_fp, f])
    done = fold_dir / "result.json"
    if done.exists():
        prev = json.loads(done.read_text("utf-8"))
        if prev.get("fingerprint") == fp:
            log.info("%s fold %d: finished earlier, kept", name, f)
            run.folds.append(prev)
            if run.best is None or prev["accuracy"] > run.best["accuracy"]:
                run.best = prev
            return
    model = _fold_model(run, f)
    log.info("%s fold %d: %d training pairs, %d held out", name, f, len(tr), len(val))
    tf = time.perf_counter()
    result = fit(
        model,
        list(range(len(tr))),
        loss_fn_for(tr, run.sim.classes),
        args,
        fold_dir,
        fingerprint_extra=[run.data_fp, f],
        accelerator=run.acc,
        param_groups=head_groups(run.info.get("head_learning_rate")),
    )
    fold_s = time.perf_counter() - tf
    m = result.model
    val_p = predict(m, val, eval_bs)
    rec.update(
        fingerprint=fp,
        accuracy=accuracy(val.label, [int(p >= 0.5) for p in val_p]),
        steps=result.state["step"],
        stopped=result.state["stopped"],
        resumed_from=result.state["resumed_from"],
        train_s=round(fold_s, 1),
        pairs_per_s=_mean([h["examples_per_s"] for h in result.history if h["kind"] == "train"]),
        history=result.history,
        test_probs={p: predict(m, s, eval_bs) for p, s in run.tests.items() if len(s)},
    )
    log.info("%s fold %d: held-out accuracy %.4f", name, f, rec["accuracy"])
    if run.best is None or rec["accuracy"] > run.best["accuracy"]:
        _save_model(run, m, {"fold": f, "fold_accuracy": rec["accuracy"]})
        run.best = rec
    write_metrics(done, rec)  # after the model: a kept result never lacks its model
    run.folds.append(rec)


def _save_model(run: _Protocol, model, meta: dict[str, Any]) -> None:
    """``model`` with ``meta`` as the run's ``model/`` (replaced whole; weights shared)."""
    from parasim.train.core.storage import share_weights

    from .model import save_classifier

    tmp = run.out / ".model.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    save_classifier(model, tmp, meta)
    _replace_dir(tmp, run.out / "model")
    share_weights(run.out / "model", run.out.parent / ".weights")


def _check_saved_fold(run: _Protocol) -> None:
    """Warn when ``model/`` does not hold the best fold model of this run's results (a resumed
    run may have kept an earlier one)."""
    saved = json.loads((run.out / "model" / "similarity.json").read_text("utf-8"))
    if saved.get("fold") != run.best["fold"]:
        log.warning(
            "model/ holds fold %s, expected %s: results were reused",
            saved.get("fold"),
            run.best["fold"],
        )


def _ship_start(run: _Protocol, cos_cv: float | None, cv_mean: float) -> bool:
    """Whether ``model/`` ships the untrained start (and save it there if so).

    Step 0 counts: a bi-encoder's untrained form (its cosine at the training pairs' threshold)
    is its own baseline; when it beats the fold models on the held-out folds, training only made
    it worse, and ``model/`` ships the untrained start (its test answers become the best's).
    """
    shipped_start = run.encoder == "biencoder" and cos_cv is not None and cos_cv > cv_mean
    if not shipped_start:
        return False
    log.warning(
        "%s: untrained cosine %.4f beats the fold models %.4f on the held-out folds: "
        "model/ ships the untrained start",
        run.name,
        cos_cv,
        cv_mean,
    )
    thr = run.threshold
    _save_model(
        run,
        run.untrained.cpu(),
        {
            "fold": None,
            "decision": "cosine",
            "threshold": thr,
            "shipped_start": "the untrained encoder's cosine beat every fold model on CV",
        },
    )
    run.best = {
        **run.best,
        "test_probs": {p: [float(c > thr) for c in cs] for p, cs in run.test_cos.items()},
    }
    return True


def _test_row(
    run: _Protocol,
    gold: list[int],
    probs: list[list[float]],
    best_p: list[float],
    cos: list[float],
    grades: list[str | None] | None = None,
) -> dict[str, Any]:
    """One row of Table 5: the best fold model, both votes and both baselines on ``gold``; with
    the rows' ``grades`` (a graded corpus), the best fold model's and the untrained cosine's
    accuracy on each grade's rows (``by_grade``: a divergent row is right when called not
    similar)."""
    mx, avg = vote(probs)
    row = {
        "rows": len(gold),
        "best_fold_model": accuracy(gold, [int(p >= 0.5) for p in best_p]),
        "max_voting": accuracy(gold, mx),
        "avg_voting": accuracy(gold, avg),
        "majority_baseline": accuracy(gold, [run.majority] * len(gold)),
        "untrained_cosine_baseline": accuracy(gold, [int(c > run.threshold) for c in cos]),
    }
    if run.sim.grades == "graded" and grades and any(g is not None for g in grades):
        from parasim.train.core.metrics import accuracy_by_grade

        row["by_grade"] = accuracy_by_grade(grades, gold, {
            "best_fold_model": [int(p >= 0.5) for p in best_p],
            "untrained_cosine_baseline": [int(c > run.threshold) for c in cos],
        })  # fmt: skip
    return row


def _test_tables(run: _Protocol, trained: list[dict]):
    """Table 5 on every partition's test split, pooled per language pair and over all; the
    verdict (``model/`` against the untrained cosine over all); and the voting on the training
    partition's own test split.

    Returns:
        ``(per partition, per language pair, verdict, own test row or None, what it was on)``.
    """
    from parasim.train.core.verdict import accuracy_stat, compare

    best, thr = run.best, run.threshold
    table: dict[str, dict] = {}
    pooled: dict[str, list] = {}
    for p, s in run.tests.items():
        if not len(s):
            table[p] = {"rows": 0, "skipped": "no test rows"}
            continue
        probs = [r["test_probs"][p] for r in trained]
        table[p] = {
            "lang_pair": s.lang_pair[0],
            **_test_row(run, s.label, probs, best["test_probs"][p], run.test_cos[p], s.grade),
        }
        for key in (s.lang_pair[0], "all"):
            g = pooled.setdefault(key, [[], [[] for _ in trained], [], [], []])
            g[0] += s.label
            for j, r in enumerate(trained):
                g[1][j] += r["test_probs"][p]
            g[2] += best["test_probs"][p]
            g[3] += run.test_cos[p]
            g[4] += s.grade
    by_lang = {k: _test_row(run, *v) for k, v in pooled.items()}
    g_all, _, p_all, c_all, _ = pooled.get("all", [[], [], [], [], []])
    verdict = compare(
        accuracy_stat(g_all, [int(p >= 0.5) for p in p_all]),
        accuracy_stat(g_all, [int(c > thr) for c in c_all]),
        len(g_all),
        measure="test accuracy (model/)",
        baseline_name="untrained encoder's cosine",
        evaluated_on="the corpus test split, every partition"
        + (" (its divergent rows too)" if run.sim.grades == "graded" else ""),
    )
    own = [p for p in run.members if p in table and table[p].get("rows")]
    own_gold: list[int] = []
    own_probs: list[list[float]] = [[] for _ in trained]
    own_cos: list[float] = []
    own_grades: list[str | None] = []
    for p in own:
        own_gold += run.tests[p].label
        own_cos += run.test_cos[p]
        own_grades += run.tests[p].grade
        for j, r in enumerate(trained):
            own_probs[j] += r["test_probs"][p]
    own_best = [x for p in own for x in best["test_probs"][p]]
    own_test = (
        _test_row(run, own_gold, own_probs, own_best, own_cos, own_grades) if own_gold else None
    )
    voting_on = f"test split of {', '.join(own) or 'none'} ({len(own_gold)} pairs)"
    return table, by_lang, verdict, own_test, voting_on


def _cv_table(
    run: _Protocol,
    trained: list[dict],
    cv_mean_sd: tuple[float | None, float | None],
    base_cv: Mapping[str, tuple[float | None, float | None]],
    own_test: Mapping[str, Any] | None,
    voting_on: str,
) -> dict[str, Any]:
    """Table 4 (``cv.json``): the fold accuracies' mean and sd, the votes on the own test split
    and both baselines."""
    folds = run.folds
    return {
        "model": run.name,
        **run.base,
        "folds_trained": len(trained),
        "folds_skipped": len(folds) - len(trained),
        "fold_accuracy": {str(r["fold"]): r.get("accuracy") for r in folds},
        "skipped_folds": {str(r["fold"]): r["skipped"] for r in folds if "skipped" in r},
        "mean": cv_mean_sd[0],
        "sd": cv_mean_sd[1],
        "max_voting": own_test and own_test["max_voting"],
        "avg_voting": own_test and own_test["avg_voting"],
        "voting_on": voting_on,
        "baselines": {
            "majority_class": {
                "mean": base_cv["majority_accuracy"][0],
                "sd": base_cv["majority_accuracy"][1],
                "test": own_test and own_test["majority_baseline"],
            },
            "untrained_cosine": {
                "mean": base_cv["untrained_cosine_accuracy"][0],
                "sd": base_cv["untrained_cosine_accuracy"][1],
                "test": own_test and own_test["untrained_cosine_baseline"],
                "threshold": run.threshold,
                "train_accuracy": run.threshold_accuracy,
            },
        },
    }


def _write_outputs(
    run: _Protocol,
    trained: list[dict],
    cv: Mapping[str, Any],
    by_lang: Mapping[str, dict],
    verdict: Mapping[str, Any],
    shipped_start: bool,
) -> dict[str, Any]:
    """The training curve (the folds one after another), ``metrics.json`` and the model card
    (also in ``model/``); returns the metrics."""
    from parasim.train.core.card import plot_curve, write_metrics

    history = []
    offset = 0
    for r in trained:  # the folds' curves one after another on one step axis
        for h in r["history"]:
            history.append({**h, "step": h["step"] + offset})
        offset += r["steps"]
    plot_curve(history, run.out / "training_curve.png", f"{run.name}: {len(trained)} fold models")
    speeds = [r["pairs_per_s"] for r in trained if r.get("pairs_per_s")]
    metrics = {
        "model": run.name,
        **run.base,
        "data": dict(run.counts),
        "cv": {k: cv[k] for k in CV_METRICS},
        "test": {k: {kk: vv for kk, vv in v.items()} for k, v in by_lang.items()},
        "best_fold": run.best["fold"],
        "shipped_start": shipped_start,
        "verdict": verdict,
        "train_s": round(sum(r.get("train_s", 0) for r in trained), 1),
        "pairs_per_s": _mean(speeds),
        "wall_s": round(time.perf_counter() - run.t0, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(run.acc.device),
        "mixed_precision": run.acc.mixed_precision,
        "settings": {**dataclasses.asdict(run.args), **run.info},
    }
    write_metrics(run.out / "metrics.json", metrics)
    _write_card(run, len(trained), cv, by_lang, verdict, shipped_start)
    return metrics


def _write_card(
    run: _Protocol,
    n_trained: int,
    cv: Mapping[str, Any],
    by_lang: Mapping[str, dict],
    verdict: Mapping[str, Any],
    shipped_start: bool,
) -> None:
    """``README.md``, the model card, in the run's folder and in ``model/``."""
    from parasim.train.core.card import write_model_card

    cv_mean, cv_sd = cv["mean"], cv["sd"]
    summary = {
        "cv accuracy (mean ± sd)": f"{cv_mean:.4f} ± {cv_sd:.4f}",
        "max voting (own test)": cv["max_voting"],
        "avg voting (own test)": cv["avg_voting"],
        **{f"test {k} (best fold model)": v["best_fold_model"] for k, v in by_lang.items()},
        "majority baseline (cv)": cv["baselines"]["majority_class"]["mean"],
        "untrained cosine baseline (cv)": cv["baselines"]["untrained_cosine"]["mean"],
    }
    for grade, g in (by_lang.get("all", {}).get("by_grade") or {}).items():
        summary[f"test {grade} rows (best fold model / untrained cosine)"] = (
            f"{g['best_fold_model']:.4f} / {g['untrained_cosine_baseline']:.4f} ({g['rows']} rows)"
        )
    desc = (
        "InferSent-style BiLSTM-max over frozen word vectors"
        if run.encoder == "bilstm"
        else "fine-tuned transformer bi-encoder (mean pooling)"
    )
    write_model_card(
        run.out / "README.md",
        run.name,
        f"{desc} with the [u; v; |u-v|; u*v] classifier of seed 001 §4.1, trained on parasim's "
        f"corpus partition {run.partition} ({', '.join(run.members)}): 1 = similar (aligned "
        f"translation), 0 = dissimilar (hard negative)"
        + (
            f"; graded: {run.sim.divergent_per_positive} divergent row(s) per positive (a "
            "near-translation that changes a fact) join the negatives, and the head has three "
            "classes (unrelated, equivalent, divergent), P(similar) being the equivalent one"
            if run.sim.grades == "graded"
            else ""
        )
        + ". `model/` is "
        + (
            "the untrained encoder answering by its cosine at the training pairs' threshold "
            f"(it beat the {n_trained} fold models on the held-out folds)"
            if shipped_start
            else f"the best of the {n_trained} fold models (fold {run.best['fold']})"
        )
        + "; load it with "
        "`parasim.train.similarity.model.load_classifier`.",
        {**dict(run.counts), "folds": len(run.fold_ids)},
        {**dataclasses.asdict(run.args), **run.info},
        summary,
        verdict=verdict,
        shipped_start=shipped_start,
        needs=(
            f"a corpus test split of at least {verdict['min_items']} pairs (here "
            f"{verdict['n']}), more than these {len(run.train)} training pairs and the GPU recipe "
            "`configs/train-gpu.yaml`"
        ),
    )
    shutil.copyfile(run.out / "README.md", run.out / "model" / "README.md")


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else None
