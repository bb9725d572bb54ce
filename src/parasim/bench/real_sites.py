"""`parasim bench real_sites`: every real site of ``../shared/data`` in one run (issue 51).

``build --out build/real-sites`` makes the two sites ``configs/real-sites.yaml`` serves from a
build folder: the Python documentation rendered from its translation catalogues
(``python-docs/``, :func:`parasim.bench.scale_site.build_site`) and the Debian website extracted
from its archive (``debian-www/site``; once, kept while the archive is the same). WET and
canada-design are served from ``../shared/data`` in place, the demo sites from ``demo/``.

``pairs --results RUN/results`` scores the run's page pairs of each site against its gold
(:func:`parasim.bench.pairs.pair_metrics`: precision, judged precision, recall); a site
without gold or without pairs in the run is listed as such.

Run::

    parasim bench real_sites build --out build/real-sites [--data ../shared/data]
    snakemake --configfile configs/real-sites.yaml --cores 2
    parasim bench real_sites pairs --results results [--build build/real-sites]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from parasim.paths import ROOT, SHARED_DATA

#: The config of every real site (paths relative to the repository root).
CONFIG = ROOT / "configs" / "real-sites.yaml"
#: The Debian website's archive under the shared data.
DEBIAN_ARCHIVE = ("sites", "debian-www", "debian-www-2018.tar.xz")
#: Each site's gold page pairs: ``("data", parts...)`` under the shared data, ``("build",
#: parts...)`` under the build folder; paths in them are relative to the site's start origin.
GOLD = {
    "wet-boew": [("data", "sites", "wet-boew", "pairs_en_fr.tsv")],
    "canada-design": [("data", "sites", "canada-design", "gold_en_fr.tsv")],
    "python-docs-fr": [("build", "python-docs", "gold", "pages_en_fr.tsv")],
    "python-docs-es": [("build", "python-docs", "gold", "pages_en_es.tsv")],
    "debian-www": [
        ("data", "sites", "debian-www", "gold_en_fr.tsv"),
        ("data", "sites", "debian-www", "gold_en_es.tsv"),
    ],
}


def build(out: Path, data: Path) -> dict:
    """Build ``out/python-docs`` and ``out/debian-www``; their figures (pages, bytes, seconds).

    Raises:
        SystemExit: the catalogues or the archive are missing under ``data``.
    """
    from parasim.bench.probe import extracted
    from parasim.bench.scale_site import build_site

    archive = data.joinpath(*DEBIAN_ARCHIVE)
    catalogues = data / "sites" / "python-docs"
    missing = [str(p) for p in (archive, catalogues) if not p.exists()]
    if missing:
        raise SystemExit(f"bench real_sites build: not found: {', '.join(missing)}")
    figures: dict = {"out": str(out)}
    t0 = time.perf_counter()
    figures["python-docs"] = build_site(out / "python-docs", data_dir=catalogues)
    t1 = time.perf_counter()
    site = extracted(archive, out / "debian-www")
    figures["debian-www"] = {
        "site": str(site),
        "files": sum(1 for p in site.rglob("*") if p.is_file()),
        "html_files": sum(1 for _ in site.rglob("*.html")),
    }
    figures["seconds"] = {
        "python-docs": round(t1 - t0, 1), "debian-www": round(time.perf_counter() - t1, 1)
    }  # fmt: skip
    figures["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    return figures


def pairs(results: Path, config: Path, data: Path, build_dir: Path) -> dict[str, dict]:
    """Per site of ``config``: its page pairs in ``results/pairs/<site>/`` against its gold."""
    from urllib.parse import urlsplit

    import pyarrow.parquet as pq
    import yaml

    from parasim.bench.pairs import pair_metrics

    roots = {"data": data, "build": build_dir}
    out: dict[str, dict] = {}
    for site in yaml.safe_load(config.read_text(encoding="utf-8"))["sites"]:
        name = site["name"]
        files = sorted((results / "pairs" / name).glob("*.parquet"))
        gold = [roots[root].joinpath(*parts) for root, *parts in GOLD.get(name, [])]
        if not gold:
            out[name] = {"skipped": "no gold page pairs"}
        elif missing := [str(g) for g in gold if not g.is_file()]:
            out[name] = {"skipped": f"gold not found: {', '.join(missing)}"}
        elif not files:
            out[name] = {"skipped": f"no pairs in {results / 'pairs' / name}"}
        else:
            u = urlsplit(site["start_urls"][0])
            table = pq.ParquetDataset(files).read(columns=["en_url", "other_url"])
            m = pair_metrics(table, gold, f"{u.scheme}://{u.netloc}")
            out[name] = {k: v for k, v in m.items() if k not in ("fp", "fn")}
            out[name] |= {"false_positives": m["fp"][:10], "missed": m["fn"][:10]}
    return out


def markdown(scores: dict[str, dict]) -> str:
    """The per-site table of :func:`pairs`."""
    lines = [
        "| site | pairs | gold | P | judged P | R |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, m in scores.items():
        if "skipped" in m:
            lines.append(f"| {name} | {m['skipped']} | | | | |")
            continue
        lines.append(
            f"| {name} | {m['n_pred']:,} | {m['n_gold']:,} | {m['precision']:.3f} | "
            f"{m['judged_precision']:.3f} | {m['recall']:.3f} ({m['tp']:,}/{m['n_gold']:,}) |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench real_sites build --out DIR [--data DATA]``."""
    ap = argparse.ArgumentParser(
        prog="parasim bench real_sites", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the sites configs/real-sites.yaml serves from build/")
    b.add_argument("--out", default="build/real-sites", help="the build folder")
    b.add_argument("--data", default=str(SHARED_DATA), help="the shared data folder")
    p = sub.add_parser("pairs", help="score a run's page pairs of each site against its gold")
    p.add_argument("--results", default="results", help="the run's results/ folder")
    p.add_argument("--config", default=str(CONFIG), help="the run's config (its sites)")
    p.add_argument(
        "--build", default="build/real-sites", help="the build folder (python-docs gold)"
    )
    p.add_argument("--data", default=str(SHARED_DATA), help="the shared data folder")
    p.add_argument("--json", action="store_true", help="print JSON instead of the table")
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command == "build":
        print(json.dumps(build(Path(args.out), Path(args.data)), indent=1))
        return 0
    scores = pairs(Path(args.results), Path(args.config), Path(args.data), Path(args.build))
    print(json.dumps(scores, indent=1) if args.json else markdown(scores))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
