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


def loss_fn_for(split: Split):
    """:data:`parasim.train.core.loop.LossFn` over row indices of ``split`` (summed
    cross-entropy)."""
    import torch
    import torch.nn.functional as F

    def loss_fn(model, idx: Sequence[int]):
        logits = model([split.s1[i] for i in idx], [split.s2[i] for i in idx])
        gold = torch.tensor([split.label[i] for i in idx], device=logits.device)
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

    Writes ``out_dir``: ``model/`` (the best fold model), ``metrics.json``, ``README.md``,
    ``training_curve.png``, ``folds/fold-<i>/result.json``; ``eval_dir``: ``cv.json`` (Table 4)
    and ``test.json`` (Table 5). Returns the metrics.

    Raises:
        ConfigError: bad settings or a model / vector file that cannot be loaded.
    """
    from parasim.train.core.card import plot_curve, write_metrics, write_model_card
    from parasim.train.core.loop import fingerprint, fit, make_accelerator, set_seed
    from parasim.train.core.storage import share_weights
    from parasim.train.core.verdict import accuracy_stat, compare

    from .model import build_classifier, cosines, model_info, predict, save_classifier

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

    train = Split.concat([read_split(corpus_dir, p, "train") for p in members if p in found])
    tests = {p: read_split(corpus_dir, p, "test") for p in found}
    counts = Counter(
        train_rows=len(train), train_similar=sum(train.label),
        train_rows_without_fold=sum(f is None for f in train.fold),
    )  # fmt: skip
    if not train:
        return _skip(
            out, eval_dir, name,
            f"partition {partition} has no training rows in {corpus_dir} "
            f"(partitions there: {found or 'none'})", base,
        )  # fmt: skip
    fold_ids = sorted({f for f in train.fold if f is not None})
    if len(fold_ids) < 2:
        return _skip(
            out, eval_dir, name,
            f"partition {partition}: {len(train)} training pairs fill {len(fold_ids)} fold(s); "
            f"k-fold cross-validation needs at least 2 non-empty folds (corpus.folds, more pairs)",
            {**base, **counts},
        )  # fmt: skip
    if cfg.max_folds is not None:
        fold_ids = fold_ids[: cfg.max_folds]

    acc = make_accelerator(args)
    set_seed(args.seed)
    # vocabulary of the BiLSTM: every sentence the model will see in training and testing
    texts = train.s1 + train.s2 + [t for s in tests.values() for t in s.s1 + s.s2]
    info = model_info(encoder, cfg)
    untrained = build_classifier(encoder, info, texts)
    info = dict(untrained.info)
    untrained.to(acc.device)
    # baselines: majority class and the untrained encoder's cosine with a training-fold threshold
    train_cos = cosines(untrained, train, sim.eval_batch_size)
    test_cos = {p: cosines(untrained, s, sim.eval_batch_size) for p, s in tests.items() if len(s)}
    majority = int(2 * sum(train.label) >= len(train))
    data_fp = [
        [(str(f), f.stat().st_size) for f in sorted(Path(corpus_dir, "data").rglob("*.parquet"))],
        members, info, code_fingerprint(*CODE),
    ]  # fmt: skip
    folds: list[dict] = []
    best: dict | None = None
    for f in fold_ids:
        fold_dir = out / "folds" / f"fold-{f}"
        val_idx = [i for i, x in enumerate(train.fold) if x == f]
        tr_idx = [i for i, x in enumerate(train.fold) if x is not None and x != f]
        val, tr = train.take(val_idx), train.take(tr_idx)
        # baselines on this fold: threshold and majority from the training folds only
        tr_cos, val_cos = [train_cos[i] for i in tr_idx], [train_cos[i] for i in val_idx]
        fold_base = {
            "majority_accuracy": accuracy(
                val.label, [int(2 * sum(tr.label) >= len(tr))] * len(val)
            ),
        }
        if tr_cos:
            t, _ = accuracy_threshold(tr_cos, tr.label)
            fold_base["untrained_cosine_accuracy"] = accuracy(
                val.label, [int(c > t) for c in val_cos]
            )
        rec: dict[str, Any] = {"fold": f, "train_rows": len(tr), "val_rows": len(val), **fold_base}
        if len(set(tr.label)) < 2:
            rec["skipped"] = (
                f"fold {f}: the training folds hold one class only "
                f"({len(tr)} rows, label {tr.label[0] if tr.label else 'none'})"
            )
            log.warning("%s: %s", name, rec["skipped"])
            folds.append(rec)
            continue
        fp = fingerprint([dataclasses.asdict(args), data_fp, f])
        done = fold_dir / "result.json"
        if done.exists():
            prev = json.loads(done.read_text("utf-8"))
            if prev.get("fingerprint") == fp:
                log.info("%s fold %d: finished earlier, kept", name, f)
                folds.append(prev)
                if best is None or prev["accuracy"] > best["accuracy"]:
                    best = prev
                continue
        set_seed(args.seed + f)
        model = build_classifier(encoder, info, texts) if encoder == "biencoder" else None
        if model is None:  # the BiLSTM's vectors are shared: copy the untrained model
            import copy

            model = copy.deepcopy(untrained).cpu()
            # a fresh seeded initialisation per fold
            model.encoder.lstm.reset_parameters()
            for m in model.head.modules():
                if hasattr(m, "reset_parameters") and m is not model.head:
                    m.reset_parameters()
        log.info("%s fold %d: %d training pairs, %d held out", name, f, len(tr), len(val))
        tf = time.perf_counter()
        result = fit(
            model, list(range(len(tr))), loss_fn_for(tr), args, fold_dir,
            fingerprint_extra=[data_fp, f], accelerator=acc,
            param_groups=head_groups(info.get("head_learning_rate")),
        )  # fmt: skip
        fold_s = time.perf_counter() - tf
        m = result.model
        val_p = predict(m, val, sim.eval_batch_size)
        rec.update(
            fingerprint=fp,
            accuracy=accuracy(val.label, [int(p >= 0.5) for p in val_p]),
            steps=result.state["step"],
            stopped=result.state["stopped"],
            resumed_from=result.state["resumed_from"],
            train_s=round(fold_s, 1),
            pairs_per_s=_mean(
                [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
            ),
            history=result.history,
            test_probs={p: predict(m, s, sim.eval_batch_size) for p, s in tests.items() if len(s)},
        )
        log.info("%s fold %d: held-out accuracy %.4f", name, f, rec["accuracy"])
        if best is None or rec["accuracy"] > best["accuracy"]:
            tmp = out / ".model.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            save_classifier(m, tmp, {"fold": f, "fold_accuracy": rec["accuracy"]})
            _replace_dir(tmp, out / "model")
            share_weights(out / "model", out.parent / ".weights")
            best = rec
        write_metrics(done, rec)  # after the model: a kept result never lacks its model
        folds.append(rec)
        del model, m, result

    trained = [r for r in folds if "accuracy" in r]
    if not trained:
        return _skip(
            out, eval_dir, name,
            "every fold was skipped: " + "; ".join(r["skipped"] for r in folds),
            {**base, **counts, "folds": folds},
        )  # fmt: skip
    # the model/ folder holds the best fold model of this run's results (a resumed run may have
    # kept an earlier one: check)
    saved = json.loads((out / "model" / "similarity.json").read_text("utf-8"))
    if saved.get("fold") != best["fold"]:
        log.warning(
            "model/ holds fold %s, expected %s: results were reused",
            saved.get("fold"),
            best["fold"],
        )

    accs = [r["accuracy"] for r in trained]
    cv_mean, cv_sd = mean_sd(accs)
    base_cv = {
        k: mean_sd([r[k] for r in folds if r.get(k) is not None])
        for k in ("majority_accuracy", "untrained_cosine_accuracy")
    }
    thr, thr_acc = accuracy_threshold(train_cos, train.label)
    # step 0 counts: a bi-encoder's untrained form (its cosine at the training pairs' threshold)
    # is its own baseline; when it beats the fold models on the held-out folds, training only
    # made it worse, and model/ ships the untrained start
    cos_cv = base_cv["untrained_cosine_accuracy"][0]
    shipped_start = encoder == "biencoder" and cos_cv is not None and cos_cv > cv_mean
    if shipped_start:
        log.warning(
            "%s: untrained cosine %.4f beats the fold models %.4f on the held-out folds: "
            "model/ ships the untrained start", name, cos_cv, cv_mean,
        )  # fmt: skip
        tmp = out / ".model.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        save_classifier(untrained.cpu(), tmp, {
            "fold": None, "decision": "cosine", "threshold": thr,
            "shipped_start": "the untrained encoder's cosine beat every fold model on CV",
        })  # fmt: skip
        _replace_dir(tmp, out / "model")
        share_weights(out / "model", out.parent / ".weights")
        best = {**best, "test_probs": {
            p: [float(c > thr) for c in cs] for p, cs in test_cos.items()
        }}  # fmt: skip

    def test_row(gold: list[int], probs: list[list[float]], best_p: list[float], cos: list[float]):
        mx, avg = vote(probs)
        return {
            "rows": len(gold),
            "best_fold_model": accuracy(gold, [int(p >= 0.5) for p in best_p]),
            "max_voting": accuracy(gold, mx),
            "avg_voting": accuracy(gold, avg),
            "majority_baseline": accuracy(gold, [majority] * len(gold)),
            "untrained_cosine_baseline": accuracy(gold, [int(c > thr) for c in cos]),
        }

    table: dict[str, dict] = {}
    pooled: dict[str, list] = {}
    for p, s in tests.items():
        if not len(s):
            table[p] = {"rows": 0, "skipped": "no test rows"}
            continue
        probs = [r["test_probs"][p] for r in trained]
        table[p] = {"lang_pair": s.lang_pair[0], **test_row(
            s.label, probs, best["test_probs"][p], test_cos[p]
        )}  # fmt: skip
        for key in (s.lang_pair[0], "all"):
            g = pooled.setdefault(key, [[], [[] for _ in trained], [], []])
            g[0] += s.label
            for j, r in enumerate(trained):
                g[1][j] += r["test_probs"][p]
            g[2] += best["test_probs"][p]
            g[3] += test_cos[p]
    by_lang = {k: test_row(*v) for k, v in pooled.items()}
    g_all, _, p_all, c_all = pooled.get("all", [[], [], [], []])
    verdict = compare(
        accuracy_stat(g_all, [int(p >= 0.5) for p in p_all]),
        accuracy_stat(g_all, [int(c > thr) for c in c_all]),
        len(g_all), measure="test accuracy (model/)",
        baseline_name="untrained encoder's cosine",
        evaluated_on="the corpus test split, every partition",
    )  # fmt: skip
    own = [p for p in members if p in table and table[p].get("rows")]
    own_gold: list[int] = []
    own_probs: list[list[float]] = [[] for _ in trained]
    own_cos: list[float] = []
    for p in own:
        own_gold += tests[p].label
        own_cos += test_cos[p]
        for j, r in enumerate(trained):
            own_probs[j] += r["test_probs"][p]
    own_test = (
        test_row(own_gold, own_probs, [x for p in own for x in best["test_probs"][p]], own_cos)
        if own_gold
        else None
    )

    cv = {
        "model": name, **base,
        "folds_trained": len(trained), "folds_skipped": len(folds) - len(trained),
        "fold_accuracy": {str(r["fold"]): r.get("accuracy") for r in folds},
        "skipped_folds": {str(r["fold"]): r["skipped"] for r in folds if "skipped" in r},
        "mean": cv_mean, "sd": cv_sd,
        "max_voting": own_test and own_test["max_voting"],
        "avg_voting": own_test and own_test["avg_voting"],
        "voting_on": f"test split of {', '.join(own) or 'none'} ({len(own_gold)} pairs)",
        "baselines": {
            "majority_class": {"mean": base_cv["majority_accuracy"][0],
                               "sd": base_cv["majority_accuracy"][1],
                               "test": own_test and own_test["majority_baseline"]},
            "untrained_cosine": {"mean": base_cv["untrained_cosine_accuracy"][0],
                                 "sd": base_cv["untrained_cosine_accuracy"][1],
                                 "test": own_test and own_test["untrained_cosine_baseline"],
                                 "threshold": thr, "train_accuracy": thr_acc},
        },
    }  # fmt: skip
    test = {
        "model": name, **base, "best_fold": best["fold"],
        "best_fold_accuracy": best["accuracy"],
        "partitions": table, "lang_pairs": by_lang,
    }  # fmt: skip
    write_metrics(eval_dir / "cv.json", cv)
    write_metrics(eval_dir / "test.json", test)

    history = []
    offset = 0
    for r in trained:  # the folds' curves one after another on one step axis
        for h in r["history"]:
            history.append({**h, "step": h["step"] + offset})
        offset += r["steps"]
    plot_curve(history, out / "training_curve.png", f"{name}: {len(trained)} fold models")
    speeds = [r["pairs_per_s"] for r in trained if r.get("pairs_per_s")]
    metrics = {
        "model": name, **base, "data": dict(counts),
        "cv": {k: cv[k] for k in ("mean", "sd", "max_voting", "avg_voting", "fold_accuracy",
                                  "skipped_folds", "baselines")},
        "test": {k: {kk: vv for kk, vv in v.items()} for k, v in by_lang.items()},
        "best_fold": best["fold"],
        "shipped_start": shipped_start,
        "verdict": verdict,
        "train_s": round(sum(r.get("train_s", 0) for r in trained), 1),
        "pairs_per_s": _mean(speeds),
        "wall_s": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "settings": {**dataclasses.asdict(args), **info},
    }  # fmt: skip
    write_metrics(out / "metrics.json", metrics)
    summary = {
        "cv accuracy (mean ± sd)": f"{cv_mean:.4f} ± {cv_sd:.4f}",
        "max voting (own test)": cv["max_voting"], "avg voting (own test)": cv["avg_voting"],
        **{f"test {k} (best fold model)": v["best_fold_model"] for k, v in by_lang.items()},
        "majority baseline (cv)": cv["baselines"]["majority_class"]["mean"],
        "untrained cosine baseline (cv)": cv["baselines"]["untrained_cosine"]["mean"],
    }  # fmt: skip
    desc = (
        "InferSent-style BiLSTM-max over frozen word vectors"
        if encoder == "bilstm"
        else "fine-tuned transformer bi-encoder (mean pooling)"
    )
    write_model_card(
        out / "README.md", name,
        f"{desc} with the [u; v; |u-v|; u*v] classifier of seed 001 §4.1, trained on parasim's "
        f"corpus partition {partition} ({', '.join(members)}): 1 = similar (aligned translation), "
        f"0 = dissimilar (hard negative). `model/` is "
        + (
            "the untrained encoder answering by its cosine at the training pairs' threshold "
            f"(it beat the {len(trained)} fold models on the held-out folds)"
            if shipped_start
            else f"the best of the {len(trained)} fold models (fold {best['fold']})"
        )
        + "; load it with "
        "`parasim.train.similarity.model.load_classifier`.",
        {**dict(counts), "folds": len(fold_ids)},
        {**dataclasses.asdict(args), **info}, summary,
        verdict=verdict,
        shipped_start=shipped_start,
        needs=(
            f"a corpus test split of at least {verdict['min_items']} pairs (here "
            f"{verdict['n']}), more than these {len(train)} training pairs and the GPU recipe "
            "`configs/train-gpu.yaml`"
        ),
    )  # fmt: skip
    shutil.copyfile(out / "README.md", out / "model" / "README.md")
    return metrics


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else None
