"""The yield report: per site and stage, what came in, what was kept, what was dropped and why.

Reads the stats JSON every job writes (``results/stats/<rule>/<site>[/<shard>].json``), sums the
shards, and writes a long table (TSV and JSON: site, stage, metric, value) and a funnel plot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.stagecli import sum_counts

#: (stage, stats folder under results/stats, headline metric of the funnel, its label).
STAGES: list[tuple[str, str, str, str]] = [
    ("crawl", "crawl_site", "pages_ok", "pages crawled"),
    ("pairs", "pair_pages", "pairs", "page pairs"),
    ("lines", "parse_pages", "pairs_out", "pairs parsed"),
    ("translate", "translate_lines", "translated", "lines translated"),
    ("aligned", "align_lines", "positives", "aligned pairs"),
    ("positives", "clean_positives", "kept", "positives (cleaned)"),
    ("divergences", "make_divergences", "n_rows", "divergence rows"),
    ("scores", "score_pairs", "pairs_scored", "pairs scored"),
]
__all__ = ["STAGES", "site_yield", "sum_counts", "write_report", "yield_table"]

#: Keys that are not counts (rates, timings, labels) and stay out of the report.
_SKIP_SUFFIXES = ("_per_s", "_s", "seconds", "_rate", "_mb")


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    out: dict[str, float] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping):
            out |= _flatten(v, key + ".")
        elif not k.endswith(_SKIP_SUFFIXES):
            out[key] = v
    return out


def _headline(counts: Mapping[str, Any], metric: str) -> float | None:
    v = counts.get(metric)
    if isinstance(v, Mapping):  # e.g. pairs per language
        return sum(x for x in v.values() if isinstance(x, (int, float)))
    return v


def site_yield(stats_root: str | os.PathLike, site: str) -> dict[str, dict[str, Any]]:
    """Summed counts per stage for one site (stages with no stats yet are left out)."""
    root = Path(stats_root)
    out: dict[str, dict[str, Any]] = {}
    for stage, folder, _, _ in STAGES:
        files = sorted((root / folder).glob(f"{site}.json")) + sorted(
            (root / folder / site).glob("*.json")
        )
        if files:
            out[stage] = sum_counts([json.loads(f.read_text()) for f in files])
    return out


def yield_table(stats_root: str | os.PathLike, sites: Sequence[str]) -> list[dict[str, Any]]:
    """Long table rows: site, stage, metric, value (headline metrics first, in funnel order)."""
    rows: list[dict[str, Any]] = []
    for site in sites:
        per_stage = site_yield(stats_root, site)
        for stage, _, metric, label in STAGES:
            if stage in per_stage:
                rows.append(
                    {
                        "site": site,
                        "stage": stage,
                        "metric": f"funnel: {label}",
                        "value": _headline(per_stage[stage], metric),
                    }
                )
        for stage, _, _, _ in STAGES:
            for metric, value in sorted(_flatten(per_stage.get(stage, {})).items()):
                rows.append({"site": site, "stage": stage, "metric": metric, "value": value})
    return rows


def write_report(
    stats_root: str | os.PathLike,
    sites: Sequence[str],
    tsv: str | os.PathLike,
    json_path: str | os.PathLike,
    png: str | os.PathLike,
) -> list[dict[str, Any]]:
    """Write the yield table (TSV, JSON) and the funnel plot (PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = yield_table(stats_root, sites)
    Path(tsv).parent.mkdir(parents=True, exist_ok=True)
    with open(tsv, "w", encoding="utf-8") as fh:
        fh.write("site\tstage\tmetric\tvalue\n")
        for r in rows:
            fh.write(f"{r['site']}\t{r['stage']}\t{r['metric']}\t{r['value']}\n")
    Path(json_path).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")

    funnel = [r for r in rows if r["metric"].startswith("funnel: ")]
    labels = [label for _, _, _, label in STAGES]
    fig, ax = plt.subplots(figsize=(8, 0.6 + 0.9 * len(labels)))
    height = 0.8 / max(1, len(sites))
    for k, site in enumerate(sites):
        vals = {r["metric"][8:]: r["value"] or 0 for r in funnel if r["site"] == site}
        ys = [i + k * height for i in range(len(labels))]
        ax.barh(ys, [vals.get(lab, 0) for lab in labels], height=height, label=site)
        for y, lab in zip(ys, labels, strict=True):
            if lab in vals:
                ax.text(vals[lab], y, f" {vals[lab]:,.0f}", va="center", fontsize=8)
    ax.set_yticks([i + 0.4 - height / 2 for i in range(len(labels))], labels)
    ax.invert_yaxis()
    ax.set_xscale("symlog")
    ax.set_xlabel("count (log scale)")
    ax.set_title("parasim yield per stage")
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    plt.close(fig)
    return rows
