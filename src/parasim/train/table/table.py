"""The models table (package docstring)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.verdict import MAX_HALF_WIDTH, MIN_ITEMS, fmt

#: Keys of a family's ``data`` counts that give its training data size, first found wins.
TRAIN_SIZE_KEYS = ("train_pairs", "train_rows", "units")


def train_size(m: Mapping[str, Any]) -> str:
    """The training data size of a model's metrics, in words."""
    data = m.get("data") or {}
    for k in TRAIN_SIZE_KEYS:
        if k in data:
            return f"{data[k]} {k.removeprefix('train_').replace('_', ' ')}"
    return "n/a"


def row(folder: str, m: Mapping[str, Any]) -> dict[str, Any]:
    """One model's row (a skipped model: its reason as the verdict)."""
    name = m.get("model") or Path(folder).name
    if "skipped" in m:
        return {"model": name, "folder": folder, "train_size": train_size(m), "skipped":
                m["skipped"], "verdict": "not trained"}  # fmt: skip
    v = m.get("verdict")
    if not v:
        return {"model": name, "folder": folder, "train_size": train_size(m),
                "verdict": "no verdict in metrics.json"}  # fmt: skip
    return {
        "model": name, "folder": folder, "train_size": train_size(m),
        "measure": v["measure"], "n": v["n"], "evaluated_on": v["evaluated_on"],
        "figure": v["model"], "baseline": v["baseline"], "baseline_name": v["baseline_name"],
        "difference": v["difference"], "ci95": v["ci95"], "verdict": v["verdict"],
        "why": v["why"], "below_baseline": v.get("below_baseline", False),
        "shipped_start": bool(m.get("shipped_start")),
    }  # fmt: skip


def markdown(rows: Sequence[Mapping[str, Any]], results_bytes: int | None = None) -> str:
    """The table as Markdown, with what the cut-offs are."""
    lines = [
        "# The trained models",
        "",
        "Every model of this run against its untrained baseline on the same evaluation items. "
        "Difference: model minus baseline, with its paired bootstrap 95 % interval (1,000 "
        "resamples of the evaluation items). Verdict: `better` when the interval lies above 0; "
        "`no better` when it lies below 0 (worse) or holds 0 within "
        f"+-{MAX_HALF_WIDTH}; `too little data to tell` with fewer than {MIN_ITEMS} evaluation "
        f"items (one item moves an accuracy by more than {100 / MIN_ITEMS:.1f} points and the "
        "bootstrap's percentile interval is unreliable) or an interval holding 0 wider than "
        f"+-{MAX_HALF_WIDTH} (`parasim.train.core.verdict`). Each model's card (`README.md` in "
        "its folder) opens with the same verdict.",
        "",
        "| model | training data | measure (items) | model | untrained baseline | difference "
        "[95 % CI] | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        if "measure" not in r:
            lines.append(f"| {r['model']} | {r['train_size']} | | | | | {r['verdict']}"
                         f"{': ' + r['skipped'] if r.get('skipped') else ''} |")  # fmt: skip
            continue
        ci = r["ci95"]
        diff = "n/a" if r["difference"] is None else f"{r['difference']:+.3f}"
        if ci:
            diff += f" [{ci[0]:+.3f}, {ci[1]:+.3f}]"
        verdict = r["verdict"] + (" (below)" if r["below_baseline"] else "")
        if r["shipped_start"]:
            verdict += ", ships its untrained start"
        lines.append(
            f"| {r['model']} | {r['train_size']} | {r['measure']} ({r['n']}) | "
            f"{fmt(r['figure'])} | {fmt(r['baseline'])} ({r['baseline_name']}) | {diff} | "
            f"{verdict} |"
        )
    if results_bytes is not None:
        lines += ["", f"Model folders on disk: {results_bytes / 1e6:,.0f} MB (hard links "
                  "counted once)."]  # fmt: skip
    return "\n".join(lines) + "\n"


def folder_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the files under ``folder``, each inode counted once (as ``du``)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for dirpath, _, files in os.walk(folder):
        for f in files:
            st = os.lstat(os.path.join(dirpath, f))
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_size
    return total


def models_table(
    metrics: Sequence[str | os.PathLike],
    out_md: str | os.PathLike,
    out_json: str | os.PathLike,
    models_dir: str | os.PathLike | None = None,
) -> list[dict[str, Any]]:
    """Write the table (Markdown and JSON) of the models whose ``metrics.json`` files are given;
    with ``models_dir``, prune its weight store (:func:`parasim.train.core.storage.prune_store`)
    and report its size. Returns the rows."""
    from parasim.train.core.card import write_metrics
    from parasim.train.core.storage import prune_store

    rows = []
    for f in metrics:
        m = json.loads(Path(f).read_text(encoding="utf-8"))
        rows.append(row(str(Path(f).parent), m))
    size = None
    if models_dir is not None:
        prune_store(Path(models_dir) / ".weights")
        size = folder_bytes(models_dir)
    Path(out_md).parent.mkdir(parents=True, exist_ok=True)
    Path(out_md).write_text(markdown(rows, size), encoding="utf-8")
    write_metrics(out_json, {"models": rows, "models_bytes": size})
    return rows
