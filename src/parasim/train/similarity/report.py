"""Seed 001's results tables from the similarity models' eval folders (the Snakemake report).

Table 4 (k-fold CV mean ± sd, max and average voting), Table 5 (test accuracy across language
pairs: rows = training partition, columns = test language pair) and, when MSRP was evaluated,
Tables 5-6's MSRP column; every trained figure has its baselines beside it (majority class,
untrained-encoder cosine with a training-fold threshold).
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def _pct(x: Any) -> str:
    return "–" if x is None else f"{100 * x:.2f}"


def _load(d: Path, name: str) -> dict | None:
    p = d / name
    return json.loads(p.read_text("utf-8")) if p.is_file() else None


def similarity_tables(eval_dirs: Sequence[str | os.PathLike]) -> tuple[str, dict]:
    """``(html, summary)`` for the given ``results/eval/similarity-*`` folders."""
    rows4, rows5, rows6, skipped = [], [], [], []
    langs: list[str] = []
    summary: dict[str, Any] = {}
    tests = {}
    for d in map(Path, eval_dirs):
        cv, test, msrp = _load(d, "cv.json"), _load(d, "test.json"), _load(d, "msrp.json")
        name = d.name
        if cv is None or cv.get("skipped"):
            reason = (cv or {}).get("skipped", "no cv.json")
            skipped.append((name, reason))
            summary[name] = {"skipped": reason}
            continue
        b = cv["baselines"]
        rows4.append([
            name, f"{_pct(cv['mean'])} ± {_pct(cv['sd'])}", _pct(cv["max_voting"]),
            _pct(cv["avg_voting"]), str(cv["folds_trained"]),
            f"{_pct(b['majority_class']['mean'])}",
            f"{_pct(b['untrained_cosine']['mean'])} ± {_pct(b['untrained_cosine']['sd'])}",
        ])  # fmt: skip
        tests[name] = test
        for lp in test["lang_pairs"]:
            if lp not in langs:
                langs.append(lp)
        summary[name] = {"cv_mean": cv["mean"], "cv_sd": cv["sd"], "max_voting": cv["max_voting"],
                         "avg_voting": cv["avg_voting"], "test": test["lang_pairs"]}  # fmt: skip
        if msrp and not msrp.get("skipped"):
            rows6.append([
                name, _pct(msrp["zero_shot"]), _pct(msrp["transfer"]), _pct(msrp["from_scratch"]),
                _pct(msrp["majority_baseline"]), _pct(msrp["untrained_cosine_baseline"]),
            ])  # fmt: skip
            summary[name]["msrp"] = msrp
    langs.sort(key=lambda x: (x == "all", x))
    for name, test in tests.items():
        cells = [name]
        for lp in langs:
            r = test["lang_pairs"].get(lp)
            cells.append(
                "–" if r is None else
                f"{_pct(r['best_fold_model'])} / {_pct(r['avg_voting'])} "
                f"<small>({_pct(r['majority_baseline'])}, "
                f"{_pct(r['untrained_cosine_baseline'])})</small>"
            )  # fmt: skip
        rows5.append(cells)

    def table(head: list[str], rows: list[list[str]]) -> str:
        h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
        b = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
        return f"<table border='1' cellpadding='4'><tr>{h}</tr>{b}</table>"

    parts = [
        "<h2>Similarity models (seed 001 §4): accuracy, %</h2>",
        "<h3>k-fold cross-validation (Table 4)</h3>",
        "<p>Mean ± sd of the held-out fold accuracies; max and average voting of the fold models "
        "on the partition's test split; baselines: majority class of the training folds, "
        "untrained-encoder cosine with a threshold chosen on the training folds.</p>",
        table(
            [
                "model",
                "CV mean ± sd",
                "max voting",
                "avg voting",
                "folds",
                "majority",
                "untrained cosine",
            ],
            rows4,
        ),  # fmt: skip
        "<h3>Test accuracy across language pairs (Table 5)</h3>",
        "<p>Rows: training partition; columns: test language pair. Each cell: best fold model / "
        "average voting (majority baseline, untrained cosine baseline).</p>",
        table(["model", *langs], rows5),
    ]
    if rows6:
        parts += [
            "<h3>MSRP (Tables 5-6)</h3>",
            table(
                [
                    "model",
                    "zero-shot",
                    "transfer + fine-tuning",
                    "from scratch",
                    "majority",
                    "untrained cosine",
                ],
                rows6,
            ),  # fmt: skip
        ]
    if skipped:
        parts += ["<h3>Skipped models</h3><ul>"]
        parts += [f"<li>{html.escape(n)}: {html.escape(r)}</li>" for n, r in skipped]
        parts += ["</ul>"]
    return "<html><body>" + "\n".join(parts) + "</body></html>\n", summary
