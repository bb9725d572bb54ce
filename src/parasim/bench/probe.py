"""`parasim bench probe`: probe a site, then run the suggested config as is and score its pairs.

Defaults to the WET site in ``../shared/data``: ``parasim probe`` on a sample, then
``parasim bench site`` (crawl -> pair -> parse) on the suggestion, scored on the gold pairs. The
issue-17 target: at least 262 of the 264 gold pairs at precision 1.0.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from parasim.paths import shared_data

WET_START = "https://wet-boew.parasim.example/index-en.html"


def bench_probe(url: str, serve_dir: str | None, gold: str | None, max_pages: int) -> dict:
    """Probe ``url``, write the suggestion, run it through crawl -> pair -> parse; the figures."""
    import yaml

    from parasim.bench.site import bench_site
    from parasim.probe.stage import probe_site, render_yaml

    work = Path(tempfile.mkdtemp(prefix="parasim-bench-probe-"))
    t0 = time.perf_counter()
    suggestion, crawl = probe_site(url, work / "probe", serve_dir=serve_dir, max_pages=max_pages)
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
    ap.add_argument("--url", default=WET_START, help="start URL (default: the WET site's)")
    ap.add_argument(
        "--serve-dir",
        default=str(shared_data("sites", "wet-boew", "site")),
        help="local folder of the site (default: the WET site in ../shared/data)",
    )
    ap.add_argument(
        "--gold",
        default=str(shared_data("sites", "wet-boew", "pairs_en_fr.tsv")),
        help="TSV of en_path<TAB>other_path relative to the site root",
    )
    ap.add_argument("--max-pages", type=int, default=40)
    args = ap.parse_args(argv)
    if args.serve_dir and not Path(args.serve_dir).is_dir():
        print(f"parasim bench probe: {args.serve_dir} is not a folder", file=sys.stderr)
        return 2
    out = bench_probe(args.url, args.serve_dir or None, args.gold or None, args.max_pages)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
