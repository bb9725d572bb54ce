"""The entity-enriched Siamese model's results table (seed 004) for the Snakemake report.

One HTML table from ``results/eval/entity-siamese/{test,sts}.json``: rows = the entity model,
the plain Siamese model (the same encoder's cosine), the untrained encoder, the majority class
and each entity cosine alone; columns = corpus test accuracy / F1 / AUC per language pair and
STSb-multi-mt dev Spearman (en-fr, en-es).
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Any

ROWS = {
    "entity_siamese": "entity-enriched Siamese (cosine + entities → MLP)",
    "entity_siamese_gold_only": "entity-enriched Siamese, gold pairs only (before silver)",
    "siamese": "plain Siamese (trained encoder's cosine)",
    "untrained": "untrained encoder's cosine",
    "majority": "majority class",
    "ent_geo": "GEO entity cosine alone",
    "ent_org": "ORG entity cosine alone",
    "ent_date": "DATE entity cosine alone",
    "ent_qty": "QTY entity cosine alone",
}


def _f(x: Any, pct: bool = True) -> str:
    if x is None:
        return "–"
    return f"{100 * x:.2f}" if pct else f"{x:.4f}"


def _load(p: Path) -> dict:
    return json.loads(p.read_text("utf-8")) if p.is_file() else {"skipped": f"no {p.name}"}


def entity_table(eval_dir: str | os.PathLike) -> str:
    """The HTML table of one eval folder (a paragraph with the reason when skipped)."""
    d = Path(eval_dir)
    test, sts = _load(d / "test.json"), _load(d / "sts.json")
    if test.get("skipped"):
        return f"<p>entity-siamese: skipped: {html.escape(test['skipped'])}</p>"
    groups = {"all": test["all"], **test.get("lang_pairs", {})}
    sts_langs = [k for k, v in sts.items() if isinstance(v, dict)]
    head = ["model"]
    for g in groups:
        head += [f"test {g} acc", f"test {g} F1", f"test {g} AUC"]
    head += [f"STSb {lp} ρ" for lp in sts_langs]
    body = []
    for key, label in ROWS.items():
        if key not in groups["all"]:
            continue
        row = [label]
        for g in groups.values():
            m = g.get(key, {})
            row += [_f(m.get("accuracy")), _f(m.get("f1")), _f(m.get("auc"))]
        row += [_f(sts[lp].get(key), pct=False) for lp in sts_langs]
        body.append(row)
    cells = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    rows = "".join(
        "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body
    )
    note = (
        f"<p>STSb: {html.escape(sts['skipped'])}</p>"
        if sts.get("skipped")
        else "<p>STSb-multi-mt dev, cross-lingual (English sentence 1, French / Spanish "
        "sentence 2): Spearman against the gold 0-5.</p>"
    )
    n = groups["all"]["rows"]
    return (
        f"<h3>entity-siamese (seed 004): corpus test split ({n} pairs) and STSb</h3>"
        f"<table><thead><tr>{cells}</tr></thead><tbody>{rows}</tbody></table>{note}"
    )


def write_table(eval_dir: str | os.PathLike) -> Path:
    """Write ``table.html`` into ``eval_dir`` (atomically); returns its path."""
    out = Path(eval_dir) / "table.html"
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(f"<html><body>{entity_table(eval_dir)}</body></html>\n", encoding="utf-8")
    tmp.replace(out)
    return out
