"""CPU-seconds and peak RSS of the three global stages on a run's positives, and on copies of them.

Issue 32, item 3 (BENCHMARKS.md, "Global stages at scale"). Reads ``<run>/results/positives``
(a workflow run to the positives), makes ``--copies N`` of every site under another name (ids,
page pairs, site and URLs renamed; the text as is: what ``parasim bench scale``'s copies under
other host names give with cross-site dedupe off), and runs, as the workflow's rules run them,
``fit-topics`` (one job, or ``fit-topics-partition`` per partition and the gather with
``--split``), ``select-negatives`` and ``build-corpus`` under ``/usr/bin/time``. Prints one TSV
line per job: size, job, CPU-seconds (user + system), peak RSS (MB), wall, positives.

    PYTHONPATH=src python scripts/scale_global_stages.py --run build/runs/x1 --copies 4 \\
        --work build/runs/x4 --settings build/runs/light.yaml [--split]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml


def copy_positives(
    src: Path, dst: Path, copies: int, sites: list[str] | None = None, subset: float = 1.0
) -> list[str]:
    """``copies`` renamed copies of every positives shard under ``dst``; the files written.

    ``sites``: only these sites' shards. ``subset`` < 1: only the positives of that share of the
    page pairs (the lowest seeded hashes of ``pair_id``): a smaller site, each page pair's
    positives as its own pages gave them.
    """
    from parasim.partition import seeded_key

    out = []
    for f in sorted(src.glob("*/*.parquet")):
        if sites and f.parent.name not in sites:
            continue
        t = pq.read_table(f)
        if subset < 1:
            keep = [
                int(seeded_key(7, "subset", p)[:8], 16) < subset * 16**8
                for p in t.column("pair_id").to_pylist()
            ]
            t = t.filter(pa.array(keep))
        for k in range(copies):
            site = f.parent.name if k == 0 else f"{f.parent.name}-c{k}"
            c = t
            if k:
                for col in ("id", "pair_id"):
                    c = c.set_column(
                        c.schema.get_field_index(col), col, pc.binary_join_element_wise(
                            pa.array([f"c{k}"] * c.num_rows), c.column(col), "-"),
                    )  # fmt: skip
                c = c.set_column(
                    c.schema.get_field_index("site"), "site", pa.array([site] * c.num_rows)
                )
                for col in ("en_url", "other_url"):
                    c = c.set_column(
                        c.schema.get_field_index(col), col,
                        pc.replace_substring_regex(c.column(col), r"^(https?://)", rf"\1c{k}."),
                    )  # fmt: skip
            p = dst / site / f.name
            p.parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(c, p, compression="zstd")
            out.append(str(p))
    return out


def timed(cmd: list[str], log: Path) -> dict:
    """Run ``cmd`` under /usr/bin/time -v; CPU-seconds, peak RSS (MB), wall."""
    t0 = time.perf_counter()
    with open(log, "w") as fh:
        proc = subprocess.run(["/usr/bin/time", "-v", *cmd], stdout=fh, stderr=subprocess.STDOUT)
    wall = time.perf_counter() - t0
    text = log.read_text()
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed, see {log}")

    def grab(name: str) -> float:
        return float(re.search(rf"{re.escape(name)}: ([\d.]+)", text).group(1))

    cpu = grab("User time (seconds)") + grab("System time (seconds)")
    return {
        "cpu_s": round(cpu, 1),
        "rss_mb": round(grab("Maximum resident set size (kbytes)") / 1024),
        "wall_s": round(wall, 1),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, type=Path, help="a run folder with results/positives")
    ap.add_argument("--work", required=True, type=Path, help="folder to write in")
    ap.add_argument("--copies", type=int, default=1)
    ap.add_argument("--settings", type=Path, help="config overrides (negatives, corpus) as YAML")
    ap.add_argument("--split", action="store_true", help="fit-topics per partition + gather")
    ap.add_argument("--stages", default="topics,negatives,corpus")
    ap.add_argument("--label", default="")
    ap.add_argument("--sites", nargs="+", help="only these sites' positives")
    ap.add_argument("--subset", type=float, default=1.0, help="share of the page pairs kept")
    ap.add_argument("--cache-dir", type=Path, help="sentence-vector cache (default: in --work)")
    args = ap.parse_args()
    from parasim.partition import CorpusConfig, partition_column

    over = yaml.safe_load(args.settings.read_text()) if args.settings else {}
    neg = json.dumps(over.get("negatives", {}), sort_keys=True)
    corpus = json.dumps(over.get("corpus", {}), sort_keys=True)
    args.work.mkdir(parents=True, exist_ok=True)
    files = copy_positives(
        args.run / "results" / "positives", args.work / "positives", args.copies, args.sites,
        args.subset,
    )  # fmt: skip
    table = pa.concat_tables([pq.read_table(f, columns=["lang_pair", "domain"]) for f in files])
    n_pos = table.num_rows
    py = [sys.executable, "-m", "parasim.cli"]
    common = ["--negatives-json", neg, "--corpus-json", corpus]
    topics, negs = args.work / "topics", args.work / "negatives.parquet"
    label = args.label or f"x{args.copies}"
    stages = args.stages.split(",")
    rows = []
    if "topics" in stages:
        if args.split:
            parts = sorted(
                set(
                    partition_column(table, CorpusConfig.from_config(over.get("corpus")).partitions)
                )
            )
            for p in parts:
                r = timed(
                    [
                        *py,
                        "fit-topics-partition",
                        "--partition",
                        p,
                        "--positives",
                        *files,
                        "--out",
                        str(topics),
                        *common,
                        "--threads",
                        "2",
                    ],
                    args.work / f"fit_topics_{p}.log",
                )
                rows.append(("fit_topics_partition:" + p, r))
            r = timed(
                [
                    *py,
                    "fit-topics",
                    "--from-partitions",
                    *parts,
                    "--out",
                    str(topics),
                    *common,
                    "--stats",
                    str(args.work / "fit_topics.json"),
                ],
                args.work / "fit_topics.log",
            )
            rows.append(("fit_topics(gather)", r))
        else:
            r = timed(
                [
                    *py,
                    "fit-topics",
                    "--positives",
                    *files,
                    "--out",
                    str(topics),
                    *common,
                    "--threads",
                    "2",
                    "--stats",
                    str(args.work / "fit_topics.json"),
                ],
                args.work / "fit_topics.log",
            )
            rows.append(("fit_topics", r))
    if "negatives" in stages:
        r = timed(
            [
                *py,
                "select-negatives",
                "--positives",
                *files,
                "--topics",
                str(topics),
                "--out",
                str(negs),
                "--cache-dir",
                str(args.cache_dir or args.work / "cache"),
                *common,
                "--threads",
                "2",
                "--stats",
                str(args.work / "select_negatives.json"),
            ],
            args.work / "select_negatives.log",
        )
        rows.append(("select_negatives", r))
    if "corpus" in stages:
        r = timed(
            [
                *py,
                "build-corpus",
                "--positives",
                *files,
                "--negatives",
                str(negs),
                "--topics",
                str(topics),
                "--out",
                str(args.work / "corpus"),
                *common,
                "--stats",
                str(args.work / "build_corpus.json"),
            ],
            args.work / "build_corpus.log",
        )
        rows.append(("build_corpus", r))
    for job, r in rows:
        per_k = r["cpu_s"] / n_pos * 1000
        code = os.environ.get("PYTHONPATH", "")
        cols = (label, job, r["cpu_s"], f"{per_k:.2f}", r["rss_mb"], r["wall_s"], n_pos, code)
        print("\t".join(str(c) for c in cols), flush=True)


if __name__ == "__main__":
    main()
