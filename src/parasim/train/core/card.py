"""What every model folder gets besides its weights: metrics, training curve, model card."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def write_dir(path: str | os.PathLike, write: Callable[[Path], None]) -> None:
    """Write a folder atomically: ``write`` fills a sibling temporary folder, which then takes
    the place of ``path`` (a crash leaves the old folder or none, never half of one)."""
    import shutil

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    write(tmp)
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


def write_metrics(path: str | os.PathLike, metrics: Mapping[str, Any]) -> None:
    """``metrics.json`` (sorted keys, atomically)."""
    _atomic_write(Path(path), json.dumps(metrics, indent=2, sort_keys=True, default=str) + "\n")


def write_run(
    out: str | os.PathLike,
    history: Sequence[Mapping[str, Any]],
    metrics: Mapping[str, Any],
    title: str,
) -> None:
    """A trained model's folder files besides the model: ``metrics.json``,
    ``training_curve.png`` (:func:`plot_curve`) and ``history.json`` (every logged step)."""
    out = Path(out)
    write_metrics(out / "metrics.json", metrics)
    plot_curve(history, out / "training_curve.png", title)
    (out / "history.json").write_text(json.dumps(list(history)), encoding="utf-8")


def plot_curve(history: Sequence[Mapping[str, Any]], path: str | os.PathLike, title: str) -> None:
    """The training curve: loss terms per step, and the dev metrics on a second axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [h for h in history if h["kind"] == "train"]
    evals = [h for h in history if h["kind"] == "eval"]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if train:
        steps = [h["step"] for h in train]
        skip = {"kind", "step", "epoch", "lr", "examples_per_s"}
        for key in [k for k in train[0] if k not in skip]:
            ax.plot(steps, [h[key] for h in train], label=f"train {key}")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    if evals:
        ax2 = ax.twinx()
        for key in [k for k in evals[0] if k not in ("kind", "step")]:
            ax2.plot([h["step"] for h in evals], [h[key] for h in evals], "o--", label=key)
        ax2.set_ylabel("dev")
        ax2.legend(loc="upper right", fontsize=8)
    if train:
        ax.legend(loc="upper left", fontsize=8)
    else:
        ax.text(0.5, 0.5, "no training steps", ha="center", va="center", transform=ax.transAxes)
    ax.set_title(title)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(path).with_name(f".{Path(path).name}.tmp.png")
    fig.savefig(tmp)
    plt.close(fig)
    tmp.replace(path)


def _table(d: Mapping[str, Any]) -> str:
    rows = ["| key | value |", "| --- | --- |"]
    rows += [f"| `{k}` | {json.dumps(v, default=str)} |" for k, v in d.items()]
    return "\n".join(rows)


def write_model_card(
    path: str | os.PathLike,
    name: str,
    summary: str,
    data: Mapping[str, Any],
    settings: Mapping[str, Any],
    metrics: Mapping[str, Any],
    verdict: Mapping[str, Any] | None = None,
    needs: str = "",
    shipped_start: bool | str = False,
) -> None:
    """A ``README.md`` model card: what it is, the data, the settings, the metrics, the version.

    With ``verdict`` (:func:`parasim.train.core.verdict.compare`) the card opens with it: the
    title line names the verdict (a model below its baseline says so there), the first paragraph
    gives the figures and, unless the model is better, what it would need (``needs``)."""
    from parasim import __version__

    title = name
    head = ""
    if verdict is not None:
        from parasim.train.core.verdict import headline

        word = (
            "below its untrained baseline" if verdict.get("below_baseline") else verdict["verdict"]
        )
        title = f"{name}: {word}"
        head = headline(verdict, needs, shipped_start) + "\n\n"
    text = f"""# {title}

{head}{summary}

Trained by parasim {__version__}.

## Data

{_table(data)}

## Settings

{_table(settings)}

## Metrics

{_table(metrics)}
"""
    _atomic_write(Path(path), text)
