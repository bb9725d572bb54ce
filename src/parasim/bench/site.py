"""`parasim bench site`: crawl -> pair -> parse of one configured site, timed, scored on a gold TSV.

Prints crawl pages/s and peak memory, page-pair precision / recall against the gold, and parse
page pairs/s. Speed targets live here (and in BENCHMARKS.md), never in tests.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from parasim.config import load_config, site_by_name


def bench_site(
    config: str, site_name: str, gold: str | list[str] | None, work: str | None = None
) -> dict:
    """Run the first three stages of ``site_name`` for real and return the figures."""
    from parasim.bench.pairs import pair_metrics
    from parasim.io import read_table
    from parasim.pair import pair_pages
    from parasim.parse import parse_pairs
    from parasim.stats import Recorder, Stats

    cfg = load_config(config)
    site = site_by_name(cfg, site_name)
    work_dir = Path(work or tempfile.mkdtemp(prefix=f"parasim-bench-{site.name}-"))
    pages_dir, state, stats_file = work_dir / "pages", work_dir / "state", work_dir / "crawl.json"
    # The crawl runs in its own process, as in the workflow (one Twisted reactor per process).
    cmd = [
        sys.executable,
        "-m",
        "parasim.cli",
        "crawl-site",
        "--config",
        config,
        "--site",
        site.name,
        "--out",
        str(pages_dir),
        "--state",
        str(state),
        "--stats",
        str(stats_file),
    ]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stderr=subprocess.DEVNULL)
    crawl_wall = time.perf_counter() - t0
    crawl = Stats.read(stats_file)

    pages = read_table(pages_dir)
    rec = Recorder("pair", site=site.name)
    t0 = time.perf_counter()
    pairs = pair_pages(pages, site, cfg["shards"], rec=rec, one_to_one=site.one_to_one)
    pair_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    lines = parse_pairs(pairs, pages, site, cfg["parse"], rec=Recorder("parse", site=site.name))
    parse_s = time.perf_counter() - t0
    out = {
        "site": site.name,
        "pages_ok": crawl.rows_out,
        "pages_skipped": dict(crawl.dropped),
        "crawl_pages_per_s": crawl.figures["pages_per_s"],
        "crawl_wall_s": round(crawl_wall, 2),
        "crawl_peak_rss_mb": crawl.figures["peak_rss_mb"],
        "pairs": pairs.num_rows,
        "pair_s": round(pair_s, 3),
        "parse_pairs_per_s": round(pairs.num_rows / parse_s, 1) if parse_s else None,
        "equal_line_pairs": int(sum(lines.column("equal_lines").to_pylist())),
        "lines_en": int(sum(lines.column("n_en").to_pylist())),
        "work_dir": str(work_dir),
    }
    if gold:
        u = urlsplit(site.start_urls[0])
        m = pair_metrics(pairs, gold, f"{u.scheme}://{u.netloc}")
        keys = ("precision", "recall", "tp", "n_pred", "n_gold", "judged_precision", "n_judged")
        out |= {k: m[k] for k in keys}
        out["false_positives"] = m["fp"][:20]
        out["missed"] = m["fn"][:20]
    return out


def main(argv: list[str] | None = None) -> int:
    """Print the figures of :func:`bench_site` (used by `parasim bench site`)."""
    import argparse

    ap = argparse.ArgumentParser(prog="parasim bench site", description=__doc__.splitlines()[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--site", required=True)
    ap.add_argument(
        "--gold",
        nargs="+",
        help="TSVs of en_path<TAB>other_path relative to the site root, or of absolute URLs "
        "(one per language; read as one list)",
    )
    ap.add_argument("--work", help="folder for the crawl (default: a new temp folder)")
    args = ap.parse_args(argv)
    print(json.dumps(bench_site(args.config, args.site, args.gold, args.work), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
