"""Score distributions per label and divergence type: the plot of ``results/scores/<site>.done``."""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence

import pyarrow as pa

from parasim.stats import Stats

#: Columns plotted by default (one panel each; a column with no value is left out).
PLOT_COLUMNS = (
    "amr_smatch",
    "amr_wwlk",
    "amr_concepts",
    "amr_srl",
    "amr_named_entity",
    "ent_org",
    "bm25_norm",
    "chrf",
    "bleu",
    "emb_cosine",
)


def score_group(source: str, label, type_: str | None) -> str:
    """The plot group of a row: ``positive``, ``negative`` or ``divergence: <type>``."""
    if source == "divergence":
        return f"divergence: {type_}"
    return source


def plot_distributions(
    table: pa.Table,
    png: str | os.PathLike,
    title: str = "",
    columns: Sequence[str] = PLOT_COLUMNS,
) -> list[str]:
    """Box plots of each score column per group (positives, negatives, each divergence type).

    Args:
        table: Score rows (:data:`parasim.scores.SCORES_SCHEMA`), e.g. every shard of a site.
        png: Where the figure goes.
        title: Figure title.
        columns: Score columns to plot.

    Returns:
        The columns that were plotted (those with at least one value).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = table.select(["source", "label", "type", *columns]).to_pydict()
    groups = [
        score_group(s, lab, t) for s, lab, t in zip(d["source"], d["label"], d["type"], strict=True)
    ]
    order = sorted(set(groups), key=lambda g: (not g.startswith("pos"), not g.startswith("neg"), g))
    shown = [c for c in columns if any(v is not None for v in d[c])]
    ncols = 2
    nrows = max(1, (len(shown) + ncols - 1) // ncols)
    fig, axes = plt.subplots(
        nrows, ncols, figsize=(11, 1.2 + 0.35 * len(order) * nrows), squeeze=False
    )
    for ax, col in zip(axes.flat, shown, strict=False):
        data, labels = [], []
        for g in order:
            vals = [v for v, gg in zip(d[col], groups, strict=True) if gg == g and v is not None]
            if vals:
                data.append(vals)
                labels.append(f"{g} (n={len(vals)})")
        ax.boxplot(data, orientation="horizontal", showfliers=False)
        ax.set_yticks(range(1, len(labels) + 1), labels, fontsize=7)
        ax.invert_yaxis()
        ax.set_title(col, fontsize=9)
        ax.tick_params(axis="x", labelsize=7)
    for ax in list(axes.flat)[len(shown) :]:
        ax.axis("off")
    if not shown:
        axes.flat[0].text(0.5, 0.5, "no scored pairs", ha="center", va="center")
    fig.suptitle(title or "score distributions", fontsize=10)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    return shown


def plot_site(
    path: str | os.PathLike, shards: Sequence[str], stats: Sequence[Stats], site: str | None
) -> list[str]:
    """The scores' `.done` extra ``png`` (``parasim summarize --extra png=PATH``): the score
    distributions of every shard of a site (:func:`plot_distributions`).

    Args:
        path: the PNG to write.
        shards: the site's scores shards.
        stats: their stats (unused: the plot is of the rows).
        site: the site's name (in the title).

    Returns:
        The columns that were plotted.
    """
    import pyarrow.parquet as pq

    from parasim.io import SCORES_SCHEMA

    columns = ["source", "label", "type", *PLOT_COLUMNS]
    tables = [pq.read_table(p, columns=columns) for p in shards]
    table = pa.concat_tables(tables) if tables else SCORES_SCHEMA.empty_table().select(columns)
    shown = plot_distributions(table, path, f"{site or ''}: score distributions")
    logging.getLogger("parasim.scores").info("plot: %s (%s)", path, ", ".join(shown))
    return shown
