"""What mining natural divergences costs: CPU per 1,000 positives and peak memory, by pool size.

The mine stage (:mod:`parasim.mine`) runs one job per site; its cost grows with the site's pool
(the positives of one language pair). This benchmark runs the stage function on a site's
positives and on seeded fractions of their page pairs (each page pair with all its positives, as
a smaller site would give them), each size in a fresh process so that its peak RSS is its own:

    parasim bench mine --positives results/positives/python-docs-fr \\
        --fractions 0.25 0.5 1 [--settings-json '{...}'] [--json out.json]

It prints, per size, the positives, the rows mined, the CPU seconds (user + system of the
process, the encoder's load included and also given apart), CPU seconds per 1,000 positives and
the peak RSS. Compare the CPU with the negatives stage's on the same positives
(``benchmarks/select_negatives*`` of the run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path


def _subset(positives, fraction: float, seed: int):
    """The positives of a seeded ``fraction`` of the page pairs."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from parasim.partition import seeded_key

    if fraction >= 1:
        return positives
    pairs = sorted(set(positives.column("pair_id").to_pylist()))
    pairs.sort(key=lambda p: seeded_key(seed, "bench-mine", p))
    keep = pairs[: max(1, round(len(pairs) * fraction))]
    return positives.filter(pc.is_in(positives["pair_id"], pa.array(keep)))


def _run(paths: list[str], fraction: float, seed: int, settings: dict, static: dict, q) -> None:
    from parasim.mine.stage import MineSettings, load_mine_encoder, mine_divergences
    from parasim.negatives.inputs import read_positives
    from parasim.stats import Recorder

    positives = _subset(read_positives(paths), fraction, seed)
    s = MineSettings.from_config(settings)
    t0 = resource.getrusage(resource.RUSAGE_SELF)
    encoder = load_mine_encoder(s, static)
    t1 = resource.getrusage(resource.RUSAGE_SELF)
    wall = time.perf_counter()
    rec = Recorder("mine")
    out = mine_divergences(positives, s, rec, encoder=encoder)
    wall = time.perf_counter() - wall
    t2 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = lambda a, b: (b.ru_utime - a.ru_utime) + (b.ru_stime - a.ru_stime)  # noqa: E731
    n = positives.num_rows
    q.put(
        {
            "fraction": fraction,
            "positives": n,
            "page_pairs": len(set(positives.column("pair_id").to_pylist())),
            "mined": out.num_rows,
            "cpu_s": round(cpu(t1, t2), 2),
            "cpu_s_load": round(cpu(t0, t1), 2),
            "cpu_s_per_1000": round(1000 * cpu(t1, t2) / n, 3) if n else None,
            "wall_s": round(wall, 2),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "steps_s": {k: round(v, 2) for k, v in rec.stats().seconds.items()},
            "dropped": rec.stats().dropped,
        }
    )


def measure(
    paths: Sequence[str], fractions: Sequence[float], seed: int, settings: dict, static: dict
) -> list[dict]:
    """One fresh process per fraction: its figures."""
    ctx = mp.get_context("spawn")
    out = []
    for f in fractions:
        q = ctx.Queue()
        p = ctx.Process(target=_run, args=(list(paths), f, seed, settings, static, q))
        p.start()
        res = None
        while res is None:
            try:
                res = q.get(timeout=1.0)
            except queue.Empty:
                if not p.is_alive() and q.empty():  # died without a result: say so, not hang
                    raise SystemExit(
                        f"bench mine: the run of fraction {f} failed (exit code {p.exitcode}); "
                        "its traceback is above"
                    ) from None
        p.join()
        out.append(res)
        print(json.dumps(res), file=sys.stderr, flush=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="parasim bench mine", description=__doc__)
    ap.add_argument("--positives", nargs="+", required=True, help="shards, or a site's folder")
    ap.add_argument("--fractions", nargs="+", type=float, default=[0.25, 0.5, 1.0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--settings-json", default="{}", help="the `mine` section")
    ap.add_argument("--align-json", default="{}", help="the `align` section (its `static`)")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args(argv)
    from parasim.config import validate_section

    paths = []
    for p in args.positives:
        if not Path(p).exists():
            raise SystemExit(f"bench mine: positives not found: {p}")
        paths += sorted(map(str, Path(p).glob("*.parquet"))) if Path(p).is_dir() else [p]
    static = validate_section("align", json.loads(args.align_json))["static"]
    rows = measure(paths, args.fractions, args.seed, json.loads(args.settings_json), static)
    print("| fraction | page pairs | positives | mined | CPU-s | CPU-s / 1,000 | peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['fraction']} | {r['page_pairs']} | {r['positives']:,} | {r['mined']:,} | "
            f"{r['cpu_s']} | {r['cpu_s_per_1000']} | {r['peak_rss_mb']} |"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0
