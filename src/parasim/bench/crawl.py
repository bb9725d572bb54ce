"""The crawl on real data: the WET-BOEW site (880 pages, English/French) served on loopback.

``parasim bench crawl`` prints pages, pages/s, peak RSS and CPU time, and how
many of the gold page pairs (``pairs_en_fr.tsv``) were fetched.
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import sys
import tempfile
import time
from pathlib import Path

from parasim.config import SiteConfig
from parasim.paths import SHARED_DATA

ORIGIN = "https://wet-boew.demo.parasim.example"


def _cpu_s(who: int) -> float:
    """CPU seconds of ``who`` (``RUSAGE_SELF``: the crawler; ``RUSAGE_CHILDREN``: the server),
    apart: :func:`parasim.accel.cpu_seconds` gives only their sum."""
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def bench_crawl(
    data_dir: Path | None = None,
    work_dir: Path | None = None,
    concurrency: int = 16,
    log: logging.Logger | None = None,
) -> dict:
    """Crawl the WET-BOEW site from scratch and measure it (scrapy: once per process).

    Args:
        data_dir: the shared data folder (default ``../shared/data``).
        work_dir: where output and state go (default: a temporary folder, removed after).
        concurrency: concurrent requests.
        log: progress logger.

    Returns:
        The crawl's stats (:meth:`parasim.stats.Stats.to_dict`) plus ``wall_s``,
        ``crawler_cpu_s``, ``server_cpu_s`` and the pair coverage ``pairs``,
        ``pairs_en_fetched``, ``pairs_fr_fetched``, ``pairs_both_fetched``.
    """
    from parasim.crawl import crawl_site
    from parasim.io import read_table
    from parasim.stats import Recorder

    data_dir = Path(data_dir or SHARED_DATA)
    wet = data_dir / "sites" / "wet-boew"
    if not (wet / "site").is_dir():
        raise FileNotFoundError(f"WET-BOEW site not found: {wet / 'site'}")
    site = SiteConfig(
        name="wet-boew",
        domain="government",
        languages=("en", "fr"),
        start_urls=(f"{ORIGIN}/index-en.html", f"{ORIGIN}/index-fr.html"),
        allowed_domains=(ORIGIN.split("//")[1],),
        serve_dir=str(wet / "site"),
        max_pages=5000,
        max_depth=50,
        max_bytes=5_000_000,
    )
    settings = {
        "concurrency": concurrency,
        "timeout_s": 15,
        "retries": 2,
        "autothrottle": True,
        "obey_robots": True,
        "user_agent": "parasim-bench",
    }
    tmp = tempfile.TemporaryDirectory(prefix="parasim-bench-crawl-") if work_dir is None else None
    work = Path(tmp.name if tmp else work_dir)
    try:
        cpu0, child0, t0 = (
            _cpu_s(resource.RUSAGE_SELF),
            _cpu_s(resource.RUSAGE_CHILDREN),
            time.time(),
        )
        rec = Recorder("crawl", site=site.name)
        crawl_site(site, settings, work / "out", work / "state", log=log, rec=rec)
        stats = rec.stats().to_dict()
        stats["wall_s"] = round(time.time() - t0, 2)
        stats["crawler_cpu_s"] = round(_cpu_s(resource.RUSAGE_SELF) - cpu0, 2)
        stats["server_cpu_s"] = round(_cpu_s(resource.RUSAGE_CHILDREN) - child0, 2)
        pages = read_table(work / "out", columns=["url", "skip_reason"])
        ok = {
            u
            for u, r in zip(
                *(pages.column(c).to_pylist() for c in ("url", "skip_reason")), strict=True
            )
            if r is None
        }
    finally:
        if tmp:
            tmp.cleanup()
    pairs = [ln.split("\t") for ln in (wet / "pairs_en_fr.tsv").read_text().splitlines() if ln]
    en = [f"{ORIGIN}/{p[0]}" in ok for p in pairs]
    fr = [f"{ORIGIN}/{p[1]}" in ok for p in pairs]
    stats.update(
        pairs=len(pairs),
        pairs_en_fetched=sum(en),
        pairs_fr_fetched=sum(fr),
        pairs_both_fetched=sum(a and b for a, b in zip(en, fr, strict=True)),
        missing_pairs=[p for p, a, b in zip(pairs, en, fr, strict=True) if not (a and b)],
    )
    return stats


def main(argv: list[str] | None = None) -> int:
    """``parasim bench crawl [--data DIR] [--concurrency N]``."""
    p = argparse.ArgumentParser(prog="parasim bench crawl", description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, default=None, help="shared data folder")
    p.add_argument("--concurrency", type=int, default=16)
    args = p.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    s = bench_crawl(args.data, concurrency=args.concurrency)
    print(
        f"crawl wet-boew: {s['rows_out']} pages ok ({s['counts']['rows']} rows), "
        f"{s['figures']['pages_per_s']} pages/s, wall {s['wall_s']} s, "
        f"peak RSS {s['figures']['peak_rss_mb']} MB, CPU crawler {s['crawler_cpu_s']} s "
        f"+ server {s['server_cpu_s']} s; pairs fetched: {s['pairs_en_fetched']}/{s['pairs']} en, "
        f"{s['pairs_fr_fetched']}/{s['pairs']} fr, {s['pairs_both_fetched']} both"
    )
    print(json.dumps(s, sort_keys=True, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
