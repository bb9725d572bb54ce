"""What the corpus teaches: an encoder fine-tuned on graded or binary triples, or untrained.

The same encoder (multilingual-e5-small by default) is fine-tuned four ways on the same budget
(steps, batch size, learning rate, seed) with
:func:`parasim.train.core.contrastive.fit_contrastive`, one hard negative per positive: on
the corpus's **graded** triples (a divergent row as the hard negative, else an unrelated one)
and on its **binary** triples (seed 001's unrelated rows only), each with sentence-transformers'
multiple-negatives ranking loss (``graded``, ``binary``) and with the ranking loss over the
grades, :class:`parasim.train.core.losses.GradedRankingLoss` (``graded-ranking``,
``binary-ranking``: on the binary triples every negative is unrelated, so it ranks the
translations above the rest only); it is kept **untrained** as the baseline; and
``graded-ranking-merged`` is the ``graded-ranking`` model's weights moved back towards the
untrained start (:func:`parasim.train.core.contrastive.merge_weights`, WiSE-FT: ``--merge-share``
of the fine-tuned weights, 0.5 by default, WiSE-FT's; no training of its own; ``--merge-share
auto`` picks it from ``--select-grid`` on the selection split, :mod:`parasim.train.eval.select`:
Flores-200 silver cross-lingual STS and the corpus's test rows, never REFreSD or STSb, its
figures in ``DIR/select.json``);
``graded-ranking-retained`` trains as ``graded-ranking`` with every sentence of the batch pulled
back to where the untrained start puts it (:class:`parasim.train.core.losses.RetainedLoss`,
weight ``--retain``, 1 by default). Each is then
measured on public sets the corpus was not built from:

* REFreSD dev: the cosine of the English and French sides (with the training prefix). Binary
  weighted F1 (equivalent above the threshold) and 3-class weighted F1 (no meaning difference
  above t1, unrelated at or below t2, some meaning difference between), the thresholds picked
  on the dev set itself (each model its own: the best weighted F1 over every cut for the
  binary task, over a grid of the cosine's quantiles for t2 <= t1), with the majority class
  beside them;
* STSb-multi-mt dev, cross-lingual: sentence1 of the English file against sentence2 of the
  French (EN-FR) or Spanish (EN-ES) file, same row; Spearman of the cosine with the gold score.

Differences (:data:`COMPARISONS`: each trained model minus the untrained one, the graded ones
minus the binary ones) come with paired
bootstrap 95 % intervals and verdicts (:func:`parasim.train.core.verdict.compare`: the same
resamples of the items for every comparison; thresholds stay fixed at their dev values).
The sets, the thresholds and the measures are :mod:`parasim.train.eval.cosine`'s, shared with
the workflow's graded encoder (:mod:`parasim.train.graded`, rule ``train_graded_encoder``: the
graded triples under ``train.graded.loss`` against the untrained encoder, as a model of every
run).

Every variant lies in ``DIR/<variant>/``: the training run (``run/``: checkpoints while it
trains, the final ``run/model/``), its done marker ``done.json`` (a variant finished under the
same settings and triples is not retrained; its checkpoints are then removed) and the cosines
of every evaluation item, ``scores.json``. A rerun after ``kill -9`` resumes a training from its
newest checkpoint and skips what is done. ``DIR/teach.json`` holds every figure, the triples'
counts, the seconds and the machine; the Markdown table is printed.

Run::

    parasim bench teach --corpus results/corpus --out teach --steps 1000 --batch-size 16 \\
        --seed 0 [--partitions EN-FR-G ...] [--model e5-torch] [--data ../shared/data] \\
        [--only graded-ranking graded binary untrained ...] [--merge-share 0.5|auto] [--retain 1]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import platform
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from parasim.train.core.verdict import N_BOOT
from parasim.train.eval.cosine import (
    MEASURES,
    THREE_CLASSES,
    compare_measured,
    cosines,
    majority,
    measure,
)
from parasim.train.eval.cosine import eval_sets as read_sets

log = logging.getLogger("parasim.bench.teach")

#: The variants, in the table's order: the baseline first.
VARIANTS = (
    "untrained", "binary", "graded", "binary-ranking", "graded-ranking", "graded-ranking-merged",
    "graded-ranking-retained",
)  # fmt: skip
#: Each trained variant's triples (``grades`` of :func:`~parasim.train.core.contrastive.triples`)
#: and loss (:data:`~parasim.train.core.contrastive.LOSSES`).
RECIPES = {
    "binary": ("binary", "mnrl"),
    "graded": ("graded", "mnrl"),
    "binary-ranking": ("binary", "graded_ranking"),
    "graded-ranking": ("graded", "graded_ranking"),
    "graded-ranking-retained": ("graded", "graded_ranking"),
}
#: The trained variants with the pull back to the start (``--retain``: its weight).
RETAINED = ("graded-ranking-retained",)
#: The merged variants: the trained variant whose weights are merged with the untrained start.
MERGED = {"graded-ranking-merged": "graded-ranking"}
#: The comparisons: (model, baseline) variants.
COMPARISONS = (
    ("binary", "untrained"),
    ("graded", "untrained"),
    ("graded", "binary"),
    ("binary-ranking", "untrained"),
    ("graded-ranking", "untrained"),
    ("graded-ranking", "binary"),
    ("graded-ranking", "binary-ranking"),
    ("graded-ranking-merged", "untrained"),
    ("graded-ranking-merged", "binary"),
    ("graded-ranking-merged", "graded-ranking"),
    ("graded-ranking-retained", "untrained"),
    ("graded-ranking-retained", "binary"),
    ("graded-ranking-retained", "graded-ranking"),
)
DONE, SCORES, SELECT = "done.json", "scores.json", "select.json"
#: ``--merge-share auto``'s grid: the fine-tuned model's shares tried on the selection split.
SELECT_GRID = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


# --- the evaluation sets and measures: parasim.train.eval.cosine --------------------------


def eval_sets(data: Path) -> tuple[dict[str, dict[str, list]], dict[str, str]]:
    """The evaluation items found under ``data`` (``refresd/``, ``sts/stsb-multi-mt/``), and
    the sets missing with why (:func:`parasim.train.eval.cosine.eval_sets`)."""
    try:
        return read_sets(data / "refresd", data / "sts" / "stsb-multi-mt")
    except ValueError as exc:
        raise SystemExit(f"bench teach: {exc}") from None


def _text_hash(sets: Mapping[str, Mapping[str, list]]) -> str:
    return hashlib.sha1(json.dumps(sets, sort_keys=True).encode("utf-8")).hexdigest()[:16]


def comparisons(
    measured: Mapping[str, dict],
    sets: Mapping[str, Mapping[str, list]],
    seed: int,
    n_boot: int = N_BOOT,
) -> dict[str, dict[str, dict]]:
    """``{"graded - untrained": {measure: compare(...)}, ...}`` for the variants measured; the
    bootstrap's seed is the same for all, so every comparison sees the same resamples."""
    out: dict[str, dict[str, dict]] = {}
    for model, base in COMPARISONS:
        if model in measured and base in measured:
            out[f"{model} - {base}"] = compare_measured(
                measured[model], measured[base], sets, f"{base} encoder", seed, n_boot
            )
    return out


# --- the variants -------------------------------------------------------------------------


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _fingerprint(obj: Any) -> str:
    from parasim.train.core.loop import fingerprint

    return fingerprint(obj)


def train_variant(variant: str, args: argparse.Namespace, out: Path) -> dict:
    """Train ``variant`` (one of :data:`RECIPES`) unless its done marker says it is done under
    the same settings and triples; its done marker's content."""
    from parasim.train.core.contrastive import MODEL_DIR, fit_contrastive, triples

    vdir = out / variant
    grades, loss = RECIPES[variant]
    retain = _retain(variant, args)
    data = triples(args.corpus, args.partitions, "train", grades, args.seed)
    settings = _train_settings(args)
    fp = _fingerprint([settings, variant, data.fingerprint(), {"retain": retain}])
    done = _read_json(vdir / DONE)
    if done and done.get("fingerprint") == fp and (vdir / "run" / MODEL_DIR).is_dir():
        log.info("%s: done (%s), not retrained", variant, vdir / DONE)
        return {**done, "trained_now": False}
    (vdir / DONE).unlink(missing_ok=True)
    res = fit_contrastive(
        args.model, data, vdir / "run", steps=args.steps, batch_size=args.batch_size,
        learning_rate=args.learning_rate, freeze_embeddings=not args.train_embeddings,
        seed=args.seed, max_length=args.max_length, prefix=args.prefix,
        warmup_ratio=args.warmup_ratio, save_steps=args.save_steps, device=args.device,
        dtype=args.dtype, loss=loss, retain=retain,
        name=f"e5 fine-tuned on the {grades} triples, loss {loss}"
        + (f", retained to its start at {retain}" if retain else "") + " (parasim bench teach)",
    )  # fmt: skip
    record = {
        "fingerprint": fp,
        "settings": settings,
        "retain": retain,
        "model_dir": str(res.model_dir),
        "triples": data.counts,
        "train": {
            "global_step": res.global_step,
            "steps_run": res.steps_run,
            "resumed_from": res.resumed_from,
            "train_loss": res.train_loss,
            "seconds": res.seconds,
            "seconds_per_step": _median(res.step_seconds),
            "seconds_per_step_overall": (
                round(res.seconds / res.steps_run, 3) if res.steps_run else None
            ),
            "device": res.device,
            "precision": res.precision,
            "trainable_parameters": res.trainable_parameters,
            "frozen_parameters": res.frozen_parameters,
        },
    }
    from parasim.train.core.card import write_metrics

    write_metrics(vdir / DONE, record)
    shutil.rmtree(vdir / "run" / "checkpoints", ignore_errors=True)  # done: no resume needed
    return {**record, "trained_now": True}


def merge_variant(
    variant: str, tuned: Mapping[str, Any], args: argparse.Namespace, out: Path
) -> dict:
    """Merge the model of ``tuned`` (its trained variant's done marker) with the untrained
    start at ``--merge-share`` unless done for the same model and share; the done marker."""
    from parasim.train.core.card import write_metrics
    from parasim.train.core.contrastive import merge_weights

    vdir = out / variant
    merge = {"of": MERGED[variant], "share": args.merge_share}
    fp = _fingerprint([tuned["fingerprint"], variant, merge])
    done = _read_json(vdir / DONE)
    if done and done.get("fingerprint") == fp and (vdir / "model").is_dir():
        log.info("%s: done (%s), not merged again", variant, vdir / DONE)
        return {**done, "trained_now": False}
    (vdir / DONE).unlink(missing_ok=True)
    t0 = time.perf_counter()
    model_dir = merge_weights(
        args.model, tuned["model_dir"], args.merge_share, vdir / "model",
        max_length=args.max_length, prefix=args.prefix,
        name=f"e5 fine-tuned as {MERGED[variant]}, merged with its start (parasim bench teach)",
    )  # fmt: skip
    record = {
        "fingerprint": fp,
        "settings": tuned["settings"],
        "model_dir": str(model_dir),
        "triples": tuned["triples"],
        "merge": merge | {"seconds": round(time.perf_counter() - t0, 2)},
        "train": None,
    }
    write_metrics(vdir / DONE, record)
    return {**record, "trained_now": True}


def select_merge_share(tuned: Mapping[str, Any], args: argparse.Namespace, out: Path) -> dict:
    """``--merge-share auto``: merge the model of ``tuned`` (its trained variant's done
    marker) with the untrained start at each share of ``--select-grid``, measure each on the
    selection split (:mod:`parasim.train.eval.select`: Flores-200 under ``--data``, the
    corpus's test rows) and pick the share by :func:`~parasim.train.eval.select.pick_share`.
    The record (``DIR/select.json``), reused when written for the same model and split.

    Raises:
        SystemExit: the Flores-200 devtest missing under ``--data``, or the corpus without a
            test split, naming it.
    """
    from sentence_transformers import SentenceTransformer

    from parasim.accel import resolve_device
    from parasim.flores import flores_file
    from parasim.train.core.card import write_metrics
    from parasim.train.core.contrastive import build_model, merge_weights, split_rows
    from parasim.train.eval import select

    folder = Path(args.data) / "parallel" / "flores200-devtest"
    digest = hashlib.sha1()
    for lang in ("en", *select.SILVER_LANGS):
        try:
            digest.update(flores_file(lang, folder).read_bytes())
        except OSError as exc:
            raise SystemExit(f"bench teach: --merge-share auto needs Flores-200: {exc}") from None
    try:
        rows = split_rows(args.corpus, args.partitions, "test")
    except ValueError as exc:
        raise SystemExit(f"bench teach: --merge-share auto needs a test split: {exc}") from None
    grid = sorted(set(args.select_grid))
    fp = _fingerprint([
        tuned["fingerprint"], grid, args.select_near, args.select_far, args.select_sample,
        args.seed, args.model, args.max_length, args.prefix, digest.hexdigest(),
        _text_hash({"ids": [sorted(r["id"] for r in rows)]}), select.ALLOWANCE,
    ])  # fmt: skip
    path = out / SELECT
    kept = _read_json(path)
    if kept and kept.get("fingerprint") == fp:
        log.info("merge share: %s (%s, not measured again)", kept["share"], path)
        return kept
    device = resolve_device(args.device, "--device")
    t0 = time.perf_counter()
    start = build_model(args.model, max_length=args.max_length, prefix=args.prefix, device=device)
    split = select.selection_split(
        start, folder, rows, near=args.select_near, far=args.select_far,
        sample=args.select_sample, seed=args.seed, batch_size=args.eval_batch_size,
    )  # fmt: skip
    tmp = out / "select-merged"

    def merged(share: float):
        shutil.rmtree(tmp, ignore_errors=True)
        merge_weights(args.model, tuned["model_dir"], share, tmp, max_length=args.max_length,
                      prefix=args.prefix)  # fmt: skip
        log.info("selection split: share %g", share)
        return SentenceTransformer(str(tmp), device=device)

    record = select.select_share(lambda: start, merged, split, grid, args.eval_batch_size)
    shutil.rmtree(tmp, ignore_errors=True)
    record = {"fingerprint": fp, "of": tuned["model_dir"], **record,
              "seconds": round(time.perf_counter() - t0, 1)}  # fmt: skip
    write_metrics(path, record)
    log.info("merge share: %s", record["why"])
    return record


def _retain(variant: str, args: argparse.Namespace) -> float:
    """The retention weight ``variant`` trains with: ``--retain`` for :data:`RETAINED`, else 0."""
    return args.retain if variant in RETAINED else 0.0


def _median(xs: Sequence[float]) -> float | None:
    """The median of the step times (the first step's warm-up does not weigh on it)."""
    return round(float(np.median(xs)), 3) if len(xs) else None


def _train_settings(args: argparse.Namespace) -> dict:
    return {
        "corpus": str(Path(args.corpus).resolve()), "partitions": args.partitions,
        "model": args.model, "steps": args.steps, "batch_size": args.batch_size,
        "learning_rate": args.learning_rate, "seed": args.seed, "max_length": args.max_length,
        "prefix": args.prefix, "warmup_ratio": args.warmup_ratio,
        "freeze_embeddings": not args.train_embeddings, "device": args.device,
        "dtype": args.dtype,
    }  # fmt: skip


def score_variant(
    variant: str,
    model_dir: str | None,
    args: argparse.Namespace,
    out: Path,
    sets: Mapping[str, Mapping[str, list]],
    trained_fp: str | None,
    reuse_only: bool = False,
) -> dict | None:
    """The cosines of every evaluation item under ``variant``'s model (the untrained encoder
    when ``model_dir`` is None), reused from ``scores.json`` when written for the same model
    and items (``reuse_only``: only then; None otherwise)."""
    from parasim.accel import resolve_device
    from parasim.train.core.card import write_metrics
    from parasim.train.core.contrastive import build_model

    fp = _fingerprint([variant, trained_fp, args.model, args.max_length, args.prefix,
                       _text_hash(sets)])  # fmt: skip
    path = out / variant / SCORES
    kept = _read_json(path)
    if kept and kept.get("fingerprint") == fp:
        return kept
    if reuse_only:
        return None
    device = resolve_device(args.device, "--device")
    t0 = time.perf_counter()
    if model_dir is None:
        model = build_model(
            args.model, max_length=args.max_length, prefix=args.prefix, device=device
        )
    else:
        from sentence_transformers import SentenceTransformer

        model = SentenceTransformer(model_dir, device=device)
    scores = cosines(model, sets, args.eval_batch_size)
    record = {"fingerprint": fp, "seconds": round(time.perf_counter() - t0, 2), "scores": scores}
    write_metrics(path, record)
    return record


# --- the report ---------------------------------------------------------------------------


def machine(args: argparse.Namespace) -> dict[str, Any]:
    """The CPU, the GPU, the torch device and threads, and the library versions."""
    import sentence_transformers
    import torch

    from parasim.accel import resolve_device

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return {
        "cpu": cpu,
        "cpu_count": os.cpu_count(),
        "gpu": gpu,
        "torch_device": resolve_device(args.device, "--device"),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "sentence_transformers": sentence_transformers.__version__,
        "python": platform.python_version(),
    }


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def _diff(v: dict | None) -> str:
    if not v or v["difference"] is None:
        return "n/a"
    ci = v["ci95"]
    ci_s = f" [{ci[0]:+.3f}, {ci[1]:+.3f}]" if ci else ""
    return f"{v['difference']:+.3f}{ci_s} {v['verdict']}"


def markdown(result: Mapping[str, Any]) -> str:
    """The table: each measure for each variant, and the differences with their intervals."""
    variants = [v for v in VARIANTS if v in result["variants"]]
    comps = [f"{m} - {b}" for m, b in COMPARISONS if f"{m} - {b}" in result["comparisons"]]
    head = ["measure", "n", "majority", *variants, *comps]
    lines = [
        "# What the corpus teaches",
        "",
        f"{result['settings']['model']} fine-tuned {result['settings']['steps']} steps of "
        f"{result['settings']['batch_size']} triples (lr {result['settings']['learning_rate']}, "
        f"seed {result['settings']['seed']}) on the graded or the binary triples (loss: "
        "multiple-negatives ranking, or `-ranking`: the ranking over the grades; `-merged`: "
        "that model's weights merged with the untrained start's, WiSE-FT), or untrained. "
        "Differences with paired bootstrap 95 % intervals (the same resamples for every "
        "comparison) and verdicts (`parasim.train.core.verdict`).",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for key, (label, name) in MEASURES.items():
        if name not in result["eval_sets"]:
            continue
        row = [label, str(result["eval_sets"][name]["n"])]
        row.append(_fmt(result["majority"].get(key)) if key in result["majority"] else "-")
        row += [_fmt(result["variants"][v]["figures"].get(key)) for v in variants]
        row += [_diff(result["comparisons"][c].get(key)) for c in comps]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for v in variants:
        t = result["variants"][v].get("train")
        tri = result["triples"].get(v)
        if t:
            per = t["seconds_per_step"]
            lines.append(
                f"- {v}: {tri['triples']} triples ({tri['left_out_no_negative']} positives "
                f"without a hard negative left out), {t['global_step']} steps, "
                f"{'n/a' if per is None else per} s a step (median) on {t['device']} "
                f"(precision {t['precision']}), final loss {_fmt(t['train_loss'])}"
            )
        if merge := result["variants"][v].get("merge"):
            lines.append(
                f"- {v}: the {merge['of']} model's weights, {merge['share']:g} of them merged "
                f"with {1 - merge['share']:g} of the untrained start's (WiSE-FT)"
            )
    if sel := result.get("selection"):
        lines += [
            f"- merge share picked on the selection split (Flores-200 silver cross-lingual STS, "
            f"not REFreSD or STSb): {sel['why']}",
            "",
            "| share | silver EN-FR | silver EN-ES | test AUC divergent | test AUC mined |",
            "|---|---:|---:|---:|---:|",
        ]
        for share, f in [("untrained", sel["untrained"]), *sel["shares"].items()]:
            auc = {t: (f["hardness"].get(t) or {}).get("roc_auc") for t in ("divergent", "mined")}
            lines.append(
                f"| {share} | {_fmt(f['silver_en_fr'])} | {_fmt(f['silver_en_es'])} | "
                f"{_fmt(auc['divergent'])} | {_fmt(auc['mined'])} |"
            )
        lines.append("")
    m = result["machine"]
    lines.append(f"- machine: {m['cpu']} ({m['cpu_count']} CPUs), GPU {m['gpu'] or 'none'}, "
                 f"torch device {m['torch_device']}")  # fmt: skip
    for name, why in result["missing_sets"].items():
        lines.append(f"- {name}: not evaluated ({why})")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Train, score and compare the variants asked for; every figure, also in ``teach.json``."""
    from parasim.train.core.card import write_metrics

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sets, missing = eval_sets(Path(args.data))
    if not sets:
        raise SystemExit(f"bench teach: no evaluation set under {args.data}: {missing}")
    asked = set(args.only or VARIANTS)
    asked |= {MERGED[v] for v in asked if v in MERGED}  # a merge needs its trained variant
    settings = _train_settings(args)
    done: dict[str, dict] = {}
    for v in RECIPES:  # the trained ones: those asked for, and those done before
        if v in asked:
            done[v] = train_variant(v, args, out)
        elif (
            (rec := _read_json(out / v / DONE))
            and rec.get("settings") == settings
            and rec.get("retain", 0.0) == _retain(v, args)
        ):
            done[v] = {**rec, "trained_now": False}
    selection = None
    for v, of in MERGED.items():
        if of not in done:
            continue
        if args.merge_share == "auto":
            selection = select_merge_share(done[of], args, out)
            args.merge_share = selection["share"]
        if v in asked:
            done[v] = merge_variant(v, done[of], args, out)
        elif (
            (rec := _read_json(out / v / DONE))
            and rec.get("settings") == settings
            and (rec["merge"]["share"] == args.merge_share)
        ):
            done[v] = {**rec, "trained_now": False}
    scored: dict[str, dict] = {}
    for v in VARIANTS:
        if v != "untrained" and v not in done:
            continue
        trained = done.get(v, {})
        s = score_variant(
            v, trained.get("model_dir"), args, out, sets, trained.get("fingerprint"),
            reuse_only=v not in asked,
        )  # fmt: skip
        if s is not None:
            scored[v] = s
    measured = {v: measure(s["scores"], sets) for v, s in scored.items()}
    result: dict[str, Any] = {
        "benchmark": "teach",
        "command": "parasim bench teach " + " ".join(args.argv),
        "settings": settings
        | {
            "data": str(args.data),
            "n_boot": args.n_boot,
            "merge_share": args.merge_share,
            "retain": args.retain,
        },
        "machine": machine(args),
        "eval_sets": {name: {"n": len(s["s1"])} for name, s in sets.items()},
        "missing_sets": missing,
        "majority": majority(sets),
        "triples": {v: d["triples"] for v, d in done.items() if v in scored},
        "variants": {},
        "comparisons": comparisons(measured, sets, args.seed, args.n_boot),
    }
    if selection is not None:
        result["selection"] = {k: v for k, v in selection.items() if k != "fingerprint"}
    if "refresd" in sets:
        result["eval_sets"]["refresd"]["classes"] = {
            c: sets["refresd"]["label"].count(c) for c in THREE_CLASSES
        }
    for v in VARIANTS:
        if v not in measured:
            continue
        entry = {
            "figures": measured[v]["figures"],
            "thresholds": measured[v]["thresholds"],
            "eval_seconds": scored[v]["seconds"],
        }
        if v in done:
            entry |= {k: done[v][k] for k in ("model_dir", "train", "trained_now")}
            if "merge" in done[v]:
                entry["merge"] = done[v]["merge"]
            if done[v].get("retain"):
                entry["retain"] = done[v]["retain"]
        result["variants"][v] = entry
    write_metrics(out / "teach.json", result)
    return result


def _share(text: str) -> float | str:
    """``--merge-share``: a number, or ``auto``."""
    if text == "auto":
        return text
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number in [0, 1] or auto") from None


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench teach --corpus C --out DIR --steps N [...]``."""
    from parasim.paths import SHARED_DATA

    ap = argparse.ArgumentParser(prog="parasim bench teach", description=__doc__.split("\n")[0])
    ap.add_argument("--corpus", required=True, help="the corpus folder (results/corpus)")
    ap.add_argument("--out", required=True, help="the benchmark's folder")
    ap.add_argument("--partitions", nargs="+", default=None, help="default: every partition")
    ap.add_argument("--steps", type=int, required=True, help="optimizer steps of each training")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--model", default="e5-torch", help="a HF folder or e5-torch")
    ap.add_argument("--data", default=str(SHARED_DATA), help="REFreSD and STSb (shared data)")
    ap.add_argument(
        "--only",
        nargs="+",
        choices=VARIANTS,
        default=None,
        help="train/score only these variants (the others done before are read)",
    )
    ap.add_argument(
        "--merge-share",
        type=_share,
        default=0.5,
        help="graded-ranking-merged: the fine-tuned weights' share (WiSE-FT; default 0.5), or "
        "auto: picked from --select-grid on the selection split (Flores-200 silver STS)",
    )
    ap.add_argument(
        "--select-grid", type=float, nargs="+", default=list(SELECT_GRID),
        help=f"--merge-share auto: the shares tried (default {' '.join(map(str, SELECT_GRID))})",
    )  # fmt: skip
    ap.add_argument("--select-near", type=int, default=10,
                    help="silver pairs: nearest English neighbours per sentence")  # fmt: skip
    ap.add_argument("--select-far", type=int, default=10,
                    help="silver pairs: random others per sentence")  # fmt: skip
    ap.add_argument("--select-sample", type=int, default=1000,
                    help="test rows per tier measured on the selection split")  # fmt: skip
    ap.add_argument(
        "--retain",
        type=float,
        default=1.0,
        help="graded-ranking-retained: the weight of the pull back to the start (default 1)",
    )
    ap.add_argument("--learning-rate", type=float, default=2e-5)
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--prefix", default="query: ", help="e5's prefix, on both sides")
    ap.add_argument("--warmup-ratio", type=float, default=0.1)
    ap.add_argument("--save-steps", type=int, default=200, help="steps between checkpoints")
    ap.add_argument(
        "--train-embeddings",
        action="store_true",
        help="train the word embedding matrix too (default: frozen)",
    )
    ap.add_argument("--device", default="auto")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--eval-batch-size", type=int, default=64)
    ap.add_argument("--n-boot", type=int, default=N_BOOT, help="bootstrap resamples")
    ap.add_argument("--json", action="store_true", help="print teach.json instead of the table")
    argv = list(sys.argv[1:] if argv is None else argv)
    args = ap.parse_args(argv)
    for share in ([] if args.merge_share == "auto" else [args.merge_share]) + args.select_grid:
        if not 0.0 <= share <= 1.0:
            ap.error(f"--merge-share / --select-grid {share}: must lie in [0, 1]")
    if not args.retain > 0:
        ap.error(f"--retain {args.retain}: must be above 0")
    args.argv = argv
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(name)s: %(message)s")
    result = run(args)
    print(json.dumps(result, indent=1) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
