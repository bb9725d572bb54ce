"""`parasim align-lines` (rule ``align_lines``): the align stage as a command."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path

from parasim.stagecli import read_input, section_from_args, stage_job

log = logging.getLogger("parasim.align")


def cmd_align(args: argparse.Namespace) -> None:
    """Align one translated shard into positive sentence pairs."""
    from parasim.align import AlignSettings, align_pairs
    from parasim.io import write_table

    settings = AlignSettings.from_config(section_from_args(args, "align"))
    review_dir = Path(args.review_dir or settings.review_dir)
    translated = read_input(args.input, "translated shard")
    with stage_job("align", args.stats) as rec:
        write_table(align_pairs(translated, settings, review_dir, rec, log=log), args.output)


def cmd_static_encoder(args: argparse.Namespace) -> None:
    """Build the static encoder of ``align.static`` once (cached) and record where it lies."""
    import json
    import time
    from dataclasses import asdict

    from parasim.align import AlignSettings
    from parasim.models.static import StaticSpec, ensure_static_model, resolve_tune

    settings = AlignSettings.from_config(section_from_args(args, "align"))
    spec = resolve_tune(StaticSpec.from_mapping(asdict(settings.static)))  # files hashed once
    t0, c0 = time.perf_counter(), time.process_time()
    folder = ensure_static_model(spec, device=args.device)
    stamp = json.loads((folder / "parasim_static.json").read_text(encoding="utf-8"))
    out = {
        "folder": str(folder),
        "key": folder.name.removeprefix("e5-static-"),
        "settings": spec.settings(),
        "tuned": "tuning" in stamp,
        "build": stamp,
        "seconds_this_run": round(time.perf_counter() - t0, 2),
        "cpu_seconds_this_run": round(time.process_time() - c0, 2),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    log.info("static encoder: %s", folder)


def register(add: Callable[..., argparse.ArgumentParser], site_opts: Callable) -> None:
    """Add the stage's commands to the `parasim` parser."""
    sp = add("align-lines", cmd_align, "Align one translated shard into positive pairs.")
    site_opts(sp)
    sp.add_argument("--input", required=True, help="translated shard")
    sp.add_argument("--output", required=True, help="positives shard to write")
    sp.add_argument("--review-dir", help="review queue root (default: align.review_dir)")
    sp = add(
        "static-encoder", cmd_static_encoder,
        "Build the static encoder (align.static) once, cached; write where it lies.",
    )  # fmt: skip
    sp.add_argument("--settings-json", help="the align section as JSON")
    sp.add_argument("--config", help="a config.yaml")
    sp.add_argument("--out", required=True, help="JSON naming the built folder")
    sp.add_argument("--device", default="cpu", help="the distillation's device: cpu, cuda, auto")
