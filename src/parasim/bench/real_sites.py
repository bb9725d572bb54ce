"""`parasim bench real_sites`: every real site of ``../shared/data`` in one run (issue 51).

``build --out build/real-sites`` makes the two sites ``configs/real-sites.yaml`` serves from a
build folder: the Python documentation rendered from its translation catalogues
(``python-docs/``, :func:`parasim.bench.scale_site.build_site`) and the Debian website extracted
from its archive (``debian-www/site``; once, kept while the archive is the same). WET and
canada-design are served from ``../shared/data`` in place, the demo sites from ``demo/``.

Run::

    parasim bench real_sites build --out build/real-sites [--data ../shared/data]
    snakemake --configfile configs/real-sites.yaml --cores 2
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


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``parasim bench real_sites build --out DIR [--data DATA]``."""
    ap = argparse.ArgumentParser(
        prog="parasim bench real_sites", description=__doc__.split("\n")[0]
    )
    sub = ap.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build the sites configs/real-sites.yaml serves from build/")
    b.add_argument("--out", default="build/real-sites", help="the build folder")
    b.add_argument("--data", default=str(SHARED_DATA), help="the shared data folder")
    args = ap.parse_args(list(sys.argv[1:] if argv is None else argv))
    print(json.dumps(build(Path(args.out), Path(args.data)), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
