"""`parasim bench probe`: probe a site, then run the suggested config as is and score its pairs.

``--site`` names a real site of ``../shared/data`` (default WET; ``debian-www``, extracted once
into a cache; ``canada-design``, served as its two hosts): ``parasim probe`` on a sample, then
``parasim bench site`` (crawl -> pair -> parse) on the suggestion as it is, scored on the gold
pairs. Targets: WET (issue 17) at least 262 of the 264 gold pairs at precision 1.0; debian-www
and canada-design (issue 50) P >= 0.98 and R >= 0.95.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from parasim.paths import shared_data

WET_START = "https://wet-boew.parasim.example/index-en.html"

#: The real sites of ``../shared/data`` the benchmark knows: start URL, how each is served, gold.
SITES = {
    "wet-boew": {
        "url": WET_START,
        "serve_dir": ("sites", "wet-boew", "site"),
        "gold": [("sites", "wet-boew", "pairs_en_fr.tsv")],
    },
    "debian-www": {
        "url": "https://www.debian.org/index.en.html",
        "archive": ("sites", "debian-www", "debian-www-2018.tar.xz"),
        "gold": [
            ("sites", "debian-www", "gold_en_fr.tsv"),
            ("sites", "debian-www", "gold_en_es.tsv"),
        ],
    },
    "canada-design": {
        "url": "https://design.canada.ca/",
        "serve": {
            "design.canada.ca": ("sites", "canada-design", "design.canada.ca"),
            "conception.canada.ca": ("sites", "canada-design", "conception.canada.ca"),
        },
        "gold": [("sites", "canada-design", "gold_en_fr.tsv")],
    },
}


def extracted(archive: Path, cache: Path) -> Path:
    """The ``site/`` folder of a site archive, extracted once into ``cache``."""
    import tarfile

    done = cache / ".extracted"
    if not done.is_file() or done.read_text() != str(archive.stat().st_size):
        cache.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive) as tar:
            tar.extractall(cache, filter="data")
        done.write_text(str(archive.stat().st_size))
    return cache / "site"


def bench_probe(
    url: str,
    serve_dir: str | None,
    gold: str | list[str] | None,
    max_pages: int,
    serve: dict[str, str] | None = None,
) -> dict:
    """Probe ``url``, write the suggestion, run it through crawl -> pair -> parse; the figures."""
    import yaml

    from parasim.bench.site import bench_site
    from parasim.probe.stage import probe_site, render_yaml

    work = Path(tempfile.mkdtemp(prefix="parasim-bench-probe-"))
    t0 = time.perf_counter()
    allowed = tuple(sorted(set(serve or ()) - {urlsplit(url).hostname}))
    suggestion, crawl = probe_site(
        url,
        work / "probe",
        serve_dir=serve_dir,
        max_pages=max_pages,
        serve=serve,
        allowed_domains=allowed,
    )
    probe_s = time.perf_counter() - t0
    config = work / "suggested.yaml"
    config.write_text(render_yaml(suggestion, [f"parasim bench probe {url}"]), encoding="utf-8")
    entry = yaml.safe_load(config.read_text(encoding="utf-8"))["sites"][0]
    site = bench_site(str(config), entry["name"], gold, str(work / "site"))
    return {
        "probe_pages_ok": crawl["pages_ok"],
        "probe_requests": crawl["requests"],
        "probe_wall_s": round(probe_s, 2),
        "suggested": entry,
        "config": str(config),
        **{k: v for k, v in site.items() if k != "work_dir"},
    }


def main(argv: list[str] | None = None) -> int:
    """Print the figures of :func:`bench_probe` as JSON."""
    ap = argparse.ArgumentParser(prog="parasim bench probe", description=__doc__.splitlines()[0])
    ap.add_argument(
        "--site",
        choices=sorted(SITES),
        default="wet-boew",
        help="a real site of ../shared/data: its start URL, serving and gold (default wet-boew)",
    )
    ap.add_argument("--url", help="start URL (default: the site's)")
    ap.add_argument("--serve-dir", help="local folder of the site (default: the site's)")
    ap.add_argument("--gold", nargs="+", help="gold TSVs (default: the site's)")
    ap.add_argument("--max-pages", type=int, default=40)
    ap.add_argument(
        "--cache",
        default=str(Path.home() / ".cache" / "parasim" / "sites"),
        help="where site archives are extracted (once)",
    )
    args = ap.parse_args(argv)
    preset = SITES[args.site]
    serve = None
    serve_dir = args.serve_dir
    if serve_dir is None and "serve_dir" in preset:
        serve_dir = str(shared_data(*preset["serve_dir"]))
    if serve_dir is None and "archive" in preset:
        archive = shared_data(*preset["archive"])
        if not archive.is_file():
            print(f"parasim bench probe: {archive} is not there", file=sys.stderr)
            return 2
        serve_dir = str(extracted(archive, Path(args.cache) / args.site))
    if serve_dir is None and "serve" in preset:
        serve = {h: str(shared_data(*parts)) for h, parts in preset["serve"].items()}
    for folder in [serve_dir] if serve_dir else list((serve or {}).values()):
        if not Path(folder).is_dir():
            print(f"parasim bench probe: {folder} is not a folder", file=sys.stderr)
            return 2
    gold = args.gold or [str(shared_data(*parts)) for parts in preset["gold"]]
    out = bench_probe(args.url or preset["url"], serve_dir, gold, args.max_pages, serve)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
