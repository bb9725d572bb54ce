"""Align a finished run's translated shards again under other ``align`` settings, and score the
result against the Python documentation's paragraph gold.

Issues 33 and 35 (BENCHMARKS.md, "A static embedding scorer for the aligner", "On a real site's
paragraph gold"). Reads ``<run>/results/translated/<site>/*.parquet`` and the run's config, runs
``parasim align-lines`` on every shard with the config's ``align`` section updated by ``--set``
(a JSON object; nested objects are merged key by key) into ``<out>/results/aligned``, links the
run's pairs, lines, pages and translated shards beside it, then ``parasim bench clean gold
--reclean '{}'`` per site (the clean stage run again on the new aligned shards, same settings).
Prints one line per site: kept, recall, precision (Wilson 95 % intervals), misses by reason,
and the align jobs' CPU-seconds and peak RSS.

    PYTHONPATH=src python scripts/realign_gold.py --run build/mw1 --config build/pd-q.yaml \\
        --gold build/pd-q/gold --out build/realign/emb \\
        --set '{"scorer": "embeddings", "encoder": "e5-static"}'

The config is loaded from the folder it names its paths from (``--config-root``, default the
current folder).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path


def _merge(base: dict, over: dict) -> dict:
    for k, v in over.items():
        base[k] = _merge(dict(base.get(k) or {}), v) if isinstance(v, dict) else v
    return base


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a run with results/translated")
    ap.add_argument("--config", type=Path, required=True, help="that run's config file")
    ap.add_argument("--config-root", type=Path, default=Path.cwd())
    ap.add_argument("--gold", type=Path, required=True, help="folder of paragraphs_en_<lang>.tsv")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--set", default="{}", help="JSON merged into the align section")
    args = ap.parse_args(argv)

    from parasim.config import load_config

    here = Path.cwd()
    os.chdir(args.config_root)
    try:
        cfg = load_config(args.config.resolve())
    finally:
        os.chdir(here)
    align = _merge(cfg["align"], json.loads(args.set))
    run, out = args.run.resolve(), args.out.resolve()
    (out / "results").mkdir(parents=True, exist_ok=True)
    for sub in ("pairs", "lines", "pages", "translated"):
        link = out / "results" / sub
        if not link.exists() and (run / "results" / sub).exists():
            link.symlink_to(run / "results" / sub)
    parasim = [sys.executable, "-m", "parasim.cli"]
    for site in cfg["sites"]:
        name, lang = site["name"], [x for x in site["languages"] if x != "en"][0]
        cpu = 0.0
        rss = 0
        for shard in sorted((run / "results" / "translated" / name).glob("*.parquet")):
            aligned = out / "results" / "aligned" / name / shard.name
            stats = out / "stats" / name / f"{shard.stem}.json"
            aligned.parent.mkdir(parents=True, exist_ok=True)
            stats.parent.mkdir(parents=True, exist_ok=True)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(
                [*parasim, "align-lines", "--input", str(shard), "--output", str(aligned),
                 "--settings-json", json.dumps(align), "--stats", str(stats)],
                check=True, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
            rss = max(rss, after.ru_maxrss)
        gold = args.gold / f"paragraphs_en_{lang}.tsv"
        got = subprocess.run(
            [*parasim, "bench", "clean", "gold", "--results", str(out / "results"), "--site", name,
             "--gold", str(gold), "--reclean", "{}"],
            check=True, capture_output=True, text=True,
        )  # fmt: skip
        (out / f"gold_{name}.json").write_text(got.stdout)
        d = json.loads(got.stdout)
        print(
            f"{name}: kept {d['kept']} of {d['reaching_aligner']}, recall {d['recall']} "
            f"{d['recall_ci95']}, precision {d['precision']} {d['precision_ci95']}, misses "
            f"{d['misses']}; align {cpu:.1f} CPU-s, peak RSS {rss / 1024:.0f} MB"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
