"""The yield report: per site and stage, what came in, what was kept, what was dropped and why.

Reads the stats every job of a funnel stage writes (:data:`parasim.stages.FUNNEL`, at each
stage's ``stats`` pattern), adds up the shards (:meth:`parasim.stats.Stats.total`), and writes a
long table (TSV and JSON: site, stage, metric, value) and a funnel plot. Per stage: the headline
(``funnel: <label>``), ``rows_in``, ``rows_out``, ``dropped`` and ``dropped.<reason>`` (which add
up to it), then the stage's other counts. Timings and figures stay out, and so do the counts of
what a shared cache saved (:attr:`parasim.stages.Stage.cache_counts`: they depend on the order the
jobs ran in and on earlier runs, not on the data), so two runs of one config on one input give the
same report, whatever their caches held and wherever their jobs ran.

After the sites' rows come the corpus's hardness figures (:func:`hardness_rows`: site ``all``,
stage ``corpus``): how well the untrained encoder tells the positives from each tier.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim import stages
from parasim.spec import Stage
from parasim.stats import Stats

__all__ = [
    "hardness_rows",
    "site_yield",
    "stats_path",
    "write_report",
    "yield_metrics",
    "yield_table",
]


def stats_path(stage: Stage, stats_root: str | os.PathLike) -> Path:
    """The folder under ``stats_root`` that holds ``stage``'s stats files."""
    return Path(stats_root) / stage.rules[0]


def _flatten(d: Mapping[str, Any], prefix: str = "") -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out |= _flatten(v, f"{prefix}{k}.")
        else:
            out[f"{prefix}{k}"] = v
    return out


def yield_metrics(stats: Stats, leave_out: Sequence[str] = ()) -> dict[str, int]:
    """A stage's figures in the report: rows in and out, drops (total, then by reason), counts
    (but those named in ``leave_out``, a stage's ``cache_counts``)."""
    out = {"rows_in": stats.rows_in, "rows_out": stats.rows_out, "dropped": stats.n_dropped}
    out |= {f"dropped.{r}": n for r, n in sorted(stats.dropped.items())}
    skip = set(leave_out)
    counts = {k: v for k, v in stats.counts.items() if k not in skip}
    return out | dict(sorted(_flatten(counts).items()))


def _headline(stats: Stats, metric: str) -> int | None:
    """The stage's headline figure; None when its stats lack the count (written by an older
    version of the stage: the funnel leaves the stage out rather than show 0)."""
    if metric == "rows_out":
        return stats.rows_out
    if metric not in stats.counts:
        return None
    v = stats.counts[metric]
    return sum(_flatten(v).values()) if isinstance(v, Mapping) else v


def site_yield(stats_root: str | os.PathLike, site: str) -> dict[str, Stats]:
    """Summed stats per funnel stage for one site (stages with no stats yet are left out)."""
    out: dict[str, Stats] = {}
    for stage in stages.FUNNEL:
        folder = stats_path(stage, stats_root)
        if stage.per == "site":
            files = [f for f in [folder / f"{site}.json"] if f.exists()]
        else:  # one file per shard
            files = sorted((folder / site).glob("*.json"))
        if files:
            out[stage.name] = Stats.total(Stats.read(f) for f in files)
    return out


def yield_table(stats_root: str | os.PathLike, sites: Sequence[str]) -> list[dict[str, Any]]:
    """Long table rows: site, stage, metric, value (headline metrics first, in funnel order)."""
    rows: list[dict[str, Any]] = []
    for site in sites:
        per_stage = site_yield(stats_root, site)
        for stage in stages.FUNNEL:
            if stage.name in per_stage and stage.metric:
                value = _headline(per_stage[stage.name], stage.metric)
                if value is None:
                    continue
                rows.append(
                    {"site": site, "stage": stage.name, "metric": f"funnel: {stage.label}",
                     "value": value}
                )  # fmt: skip
        for stage in stages.FUNNEL:
            if stage.name in per_stage:
                for metric, value in yield_metrics(
                    per_stage[stage.name], stage.cache_counts
                ).items():
                    rows.append(
                        {"site": site, "stage": stage.name, "metric": metric, "value": value}
                    )
    return rows


def hardness_rows(stats_root: str | os.PathLike) -> list[dict[str, Any]]:
    """The corpus's hardness figures (``build_corpus.json``'s ``hardness``: each tier's ROC AUC
    and best-threshold accuracy for the untrained encoder, all partitions and each), as rows of
    site ``all``, stage ``corpus``; none before the corpus is built or when it was not measured."""
    path = Path(stats_root) / "build_corpus.json"
    if not path.exists():
        return []
    from parasim.corpus.graded import hardness_groups

    rows = []
    for part, tiers in hardness_groups(Stats.read(path).figures.get("hardness") or {}):
        for tier, h in tiers.items():
            for key in ("roc_auc", "best_accuracy", "pairs"):
                rows.append(
                    {"site": "all", "stage": "corpus",
                     "metric": f"hardness.{part}.{tier}.{key}", "value": h[key]}
                )  # fmt: skip
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
    rows += hardness_rows(stats_root)
    Path(tsv).parent.mkdir(parents=True, exist_ok=True)
    with open(tsv, "w", encoding="utf-8") as fh:
        fh.write("site\tstage\tmetric\tvalue\n")
        for r in rows:
            fh.write(f"{r['site']}\t{r['stage']}\t{r['metric']}\t{r['value']}\n")
    Path(json_path).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")

    funnel = [r for r in rows if r["metric"].startswith("funnel: ")]  # per site
    labels = [stage.label for stage in stages.FUNNEL if stage.metric]
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


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "report",
    rules=("yield_report",),
    results=("report",),
    inputs={"stats_root": None},
    outputs={"tsv": None, "json": None, "png": None},
    run=write_report,
)
