"""The Python documentation in EN/FR/ES as a site at the seed's scale (issue 32).

``parasim bench scale build --out build/python-docs [--pages N | --subset F] [--langs fr es]``
renders the translation catalogues of ``../shared/data/sites/python-docs`` as a static bilingual
website with gold page and paragraph pairs (:mod:`parasim.bench.scale_site` says how);
``configs/python-docs.yaml`` then runs the workflow on it::

    parasim bench scale build --out build/python-docs
    snakemake --configfile configs/python-docs.yaml --cores 2

Each step of the benchmark is one subcommand: a ``cmd_<step>`` function and its subparser in
:func:`parser`.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from parasim.bench.scale_site import DATA_DIR, TRANSLATIONS, build_site


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
    return ap


def main(argv: list[str] | None = None) -> int:
    """`parasim bench scale <step> ...`."""
    args = parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    raise SystemExit(main())
