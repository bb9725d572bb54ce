"""``crawl_site``: crawl one site into a pages dataset, resumably."""

from __future__ import annotations

import logging
import resource
import sys
import time
from collections import Counter
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from parasim import explain
from parasim.config import Settings, SiteConfig
from parasim.crawl.content import canonical, extract_links, parse_html
from parasim.crawl.frontier import NOT_REQUESTED, Frontier, OriginMap
from parasim.crawl.serve import serve_folder
from parasim.crawl.state import PART_GLOB, StateWriter, fingerprint, open_state, publish
from parasim.io import PAGES_SCHEMA, write_table
from parasim.spec import Stage
from parasim.stats import Recorder

#: scrapy's Twisted reactor cannot be restarted within one process.
_REACTOR_USED = False


@dataclass(frozen=True)
class CrawlSettings(Settings, section="crawl"):
    """The ``crawl`` config section (what each key means: the schema)."""

    concurrency: int
    timeout_s: float
    retries: int
    autothrottle: bool
    obey_robots: bool
    user_agent: str


def _peak_rss_mb() -> float:
    # ru_maxrss is in KiB on Linux.
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _origin(url: str) -> str:
    p = urlsplit(url)
    return f"{p.scheme}://{p.netloc}"


def replay(frontier: Frontier, stored: pa.Table, origins: OriginMap) -> int:
    """Replay finished levels from stored pages (no fetching) up to the first unfinished level.

    Links are re-extracted from the stored HTML with the same function as the live crawl, so the
    rebuilt frontier is the one the interrupted crawl had.

    Returns:
        The number of stored rows used.
    """
    if stored.num_rows == 0:
        return 0
    # Small columns as lists; the HTML stays in Arrow, addressed as (part, row).
    final = stored.column("final_url").to_pylist()
    skip = stored.column("skip_reason").to_pylist()
    html = stored.column("html").chunks
    where = [(c, j) for c, chunk in enumerate(html) for j in range(len(chunk))]
    index: dict[str, int] = {}
    for i, u in enumerate(stored.column("url").to_pylist()):
        index.setdefault(u, i)
    used = 0
    while not frontier.done:
        for url in frontier.current:
            i = index.get(url)
            if i is None or url in frontier.results:
                continue
            links: list[str] = []
            if skip[i] is None:
                c, j = where[i]
                text = html[c][j].as_py() or ""
                links = extract_links(
                    parse_html(text), final[i] or url, origins.normalize, origins.link_attrs
                )
            frontier.record(url, final[i], links)
            used += 1
        if frontier.pending() or not frontier.advance():
            break
    return used


def _record_rows(rec: Recorder, state_dir: Path, frontier: Frontier) -> tuple[int, dict]:
    """Record the counts over every stored row (resumed ones too) plus links never requested.

    Rows in: every URL the crawl met; out: the pages fetched; dropped: the URLs skipped (failed,
    or not requested), by reason; counts ``rows`` (the pages dataset's, failed URLs too) and
    ``charset_fixed``; figure ``depth_reached``.

    Returns:
        The usable pages and the skipped URLs by reason (for the log).
    """
    parts = sorted(state_dir.glob(PART_GLOB))
    tables = [pq.read_table(p, columns=["skip_reason", "error"]) for p in parts]
    t = pa.concat_tables(tables) if tables else None
    reasons: Counter = Counter()
    ok = fixed = 0
    if t is not None and t.num_rows:
        reasons.update(r for r in t.column("skip_reason").to_pylist() if r is not None)
        ok = t.num_rows - sum(reasons.values())
        err = t.column("error")
        fixed = pc.sum(pc.starts_with(pc.fill_null(err, ""), "charset_fixed")).as_py() or 0
    for reason in NOT_REQUESTED:
        if frontier.not_requested[reason]:
            reasons[reason] += frontier.not_requested[reason]
    rec.rows_in += ok + sum(reasons.values())
    rec.rows_out += ok
    for reason, n in sorted(reasons.items()):
        rec.drop(reason, n)
    rec.count("rows", 0 if t is None else t.num_rows)
    rec.count("charset_fixed", int(fixed))
    rec.figure("depth_reached", frontier.level)
    return ok, dict(sorted(reasons.items()))


def _scrapy_settings(settings: CrawlSettings, max_bytes: int) -> dict:
    conc = int(settings.concurrency)
    timeout = float(settings.timeout_s)
    retries = int(settings.retries)
    out = {
        "BOT_NAME": "parasim",
        "USER_AGENT": settings.user_agent,
        "ROBOTSTXT_OBEY": bool(settings.obey_robots),
        "CONCURRENT_REQUESTS": conc,
        "CONCURRENT_REQUESTS_PER_DOMAIN": conc,
        "DOWNLOAD_DELAY": 0,
        "AUTOTHROTTLE_ENABLED": bool(settings.autothrottle),
        "AUTOTHROTTLE_START_DELAY": 0.001,  # loopback servers answer in a millisecond
        "AUTOTHROTTLE_MAX_DELAY": max(1.0, timeout),
        "AUTOTHROTTLE_TARGET_CONCURRENCY": float(conc),
        "DOWNLOAD_TIMEOUT": timeout,
        "RETRY_ENABLED": retries > 0,
        "RETRY_TIMES": retries,
        "RETRY_GIVE_UP_LOG_LEVEL": "INFO",  # counted as a skip reason, not an error
        "DOWNLOAD_MAXSIZE": int(max_bytes),
        "DOWNLOAD_WARNSIZE": 0,
        "HTTPERROR_ALLOW_ALL": True,
        "REDIRECT_MAX_TIMES": 10,
        # The callback yields nothing; scrapy would still start 100 cooperative tasks per response.
        "CONCURRENT_ITEMS": 1,
        "DUPEFILTER_CLASS": "scrapy.dupefilters.BaseDupeFilter",  # the frontier de-duplicates
        "DOWNLOADER_MIDDLEWARES": {"parasim.crawl.spider.ConfineMiddleware": 40},
        "TELNETCONSOLE_ENABLED": False,
        "REMOTE_CONTROL_ENABLED": False,
        "LOG_INSTALL_ROOT_HANDLER": False,  # the caller's logging configuration stays
        "LOG_VERSIONS": [],
        "LOGSTATS_INTERVAL": 0,  # the job logs its own progress
        "STATS_DUMP": False,
        "DNS_TIMEOUT": min(30.0, max(5.0, timeout)),
    }
    if sys.platform.startswith("linux"):
        # Measured: about 20% less CPU per page than scrapy's default asyncio reactor.
        out["TWISTED_REACTOR"] = "twisted.internet.epollreactor.EPollReactor"
    return out


def crawl_site(
    site: SiteConfig,
    settings: CrawlSettings | Mapping[str, Any] | None,
    out_dir: Path,
    state_dir: Path,
    log: logging.Logger | None = None,
    *,
    rec: Recorder,
    flush_pages: int = 200,
    flush_s: float = 2.0,
    log_interval_s: float = 10.0,
) -> None:
    """Crawl one site breadth-first into ``out_dir`` (Parquet parts of ``PAGES_SCHEMA``).

    Every requested URL becomes one row: usable HTML pages with ``html``; the others with a
    ``skip_reason`` (``http_404``, ``timeout``, ``connection``, ``dns``, ``too_large``,
    ``non_html``, ``redirect_loop``, ``offsite_redirect``, ``robots``, ``empty``, ...). Links that
    are never requested (``offsite``, ``depth_limit``, ``page_limit``) are counted, once per URL,
    but have no row. A usable page whose charset was wrong or missing keeps a note in ``error``
    (``charset_fixed: ...``); ``skip_reason`` null is what marks a usable page.

    The crawl is resumable: pages are persisted in ``state_dir`` as they arrive; a rerun after a
    kill replays the stored pages and fetches only what is missing. ``out_dir`` finally holds hard
    links to the state's parts. With ``site.serve_dir`` the folder is served on 127.0.0.1 for the
    crawl and stored URLs keep the start URLs' origin, so outputs do not depend on the port.

    Scrapy's reactor cannot restart: call this once per process.

    Args:
        site: the site (start URLs, allowed domains, limits, serve_dir).
        settings: the ``crawl`` settings (a mapping: the section as in the config, keys left out
            take the schema's defaults).
        out_dir: output folder (its ``part-*.parquet`` files are replaced).
        state_dir: crawl state folder, kept between runs.
        log: progress and summary go here (default: the ``parasim.crawl`` logger).
        rec: records the counts. Rows in: every URL met; out: the usable pages; dropped: the
            other URLs by skip reason (not requested ones too); counts ``rows``, ``requests``,
            ``fetched_pages``, ``resumed_pages``, ``charset_fixed``; seconds ``crawl`` (spider
            open to close) and ``total`` (the whole call, start-up included); figures
            ``depth_reached``, ``pages_per_s`` (fetched_pages / crawl seconds), ``peak_rss_mb``.
        flush_pages: persist after this many pages ...
        flush_s: ... or this many seconds, whichever first.
        log_interval_s: seconds between progress lines.

    Raises:
        ValueError: serve_dir with start URLs on several origins.
        FileNotFoundError: serve_dir is not a folder.
        RuntimeError: the crawl stopped before it finished (state is kept; rerun to resume).
    """
    log = log or logging.getLogger("parasim.crawl")
    settings = CrawlSettings.from_config(settings)
    t0 = time.perf_counter()
    out_dir, state_dir = Path(out_dir), Path(state_dir)

    starts, canonical_origin, fp_info, site_map = _setup(site, settings)
    stored, next_part = open_state(state_dir, fingerprint(fp_info), fp_info, log)
    frontier = Frontier(starts, list(site.allowed_domains), site.max_pages, site.max_depth)
    resumed = replay(frontier, stored, OriginMap(canonical_origin, **site_map))
    del stored
    if resumed:
        log.info(
            "crawl %s: resuming from %s: %d stored page(s), level %d, %d to fetch",
            site.name,
            state_dir,
            resumed,
            frontier.level,
            len(frontier.pending()),
        )

    writer = StateWriter(state_dir, next_part, flush_pages, flush_s)
    requests = fetched = 0
    crawl_s = 0.0
    if not frontier.done:
        serving = serve_folder(site.serve_dir) if site.serve_dir else nullcontext(None)
        with serving as local_origin:
            if local_origin:
                log.info("crawl %s: serving %s at %s", site.name, site.serve_dir, local_origin)
            origins_map = OriginMap(canonical_origin, local_origin, **site_map)
            job_stats = _run_scrapy(
                site, settings, frontier, writer, origins_map, log, log_interval_s
            )
        requests, fetched = job_stats["requests"], job_stats["fetched"]
        crawl_s = job_stats["crawl_s"]
        if not frontier.done:
            raise RuntimeError(
                f"crawl of {site.name!r} stopped before it finished "
                f"({job_stats['close_reason'] or job_stats['fatal']}); {writer.written} page(s) "
                f"stored in {state_dir}: run it again to resume"
            )

    if not any(state_dir.glob(PART_GLOB)):  # nothing requested at all: still a valid dataset
        write_table(PAGES_SCHEMA.empty_table(), state_dir / "part-000000.parquet")
    publish(state_dir, out_dir)
    ok, skipped = _record_rows(rec, state_dir, frontier)
    elapsed = time.perf_counter() - t0
    rec.count("requests", requests)
    rec.count("fetched_pages", fetched)
    rec.count("resumed_pages", resumed)
    rec.seconds("crawl", round(crawl_s, 3))
    rec.seconds("total", round(elapsed, 3))
    pages_per_s = round(fetched / crawl_s, 1) if fetched and crawl_s > 0 else 0.0
    rec.figure("pages_per_s", pages_per_s)
    peak_rss_mb = _peak_rss_mb()
    rec.figure("peak_rss_mb", peak_rss_mb)
    log.info(
        "crawl %s done: %d page(s) ok, skipped %s; %d fetched now (%d resumed), %.1f pages/s, "
        "peak RSS %.0f MB",
        site.name,
        ok,
        skipped,
        fetched,
        resumed,
        pages_per_s,
        peak_rss_mb,
    )


def _setup(site: SiteConfig, settings: CrawlSettings) -> tuple[list[str], str | None, dict, dict]:
    """The start URLs, the canonical origin (with ``serve_dir``), the state's fingerprint
    fields and the site's :class:`OriginMap` options.

    Raises:
        ValueError: serve_dir with start URLs on several origins.
        FileNotFoundError: serve_dir is not a folder.
    """
    starts = [canonical(u) or u for u in site.start_urls]
    canonical_origin = None
    if site.serve_dir:
        origins = sorted({_origin(u) for u in starts})
        if len(origins) != 1:
            raise ValueError(
                f"site {site.name!r}: serve_dir needs all start_urls on one origin, got {origins}"
            )
        canonical_origin = origins[0]
        if not Path(site.serve_dir).is_dir():
            raise FileNotFoundError(
                f"site {site.name!r}: serve_dir is not a folder: {site.serve_dir}"
            )
    # Aliases stand for the site's own origin (the first start URL's).
    site_origin = _origin(starts[0]) + "/"
    aliases = tuple((a if a.endswith("/") else a + "/", site_origin) for a in site.aliases)
    fp_info = {
        "start_urls": starts,
        "allowed_domains": sorted(site.allowed_domains),
        "max_pages": site.max_pages,
        "max_depth": site.max_depth,
        "max_bytes": site.max_bytes,
        "serve_dir": site.serve_dir,
        "canonical_origin": canonical_origin,
        "obey_robots": bool(settings.obey_robots),
        "aliases": list(site.aliases),
        "link_attributes": list(site.link_attributes),
    }
    site_map = {"aliases": aliases, "link_attrs": tuple(site.link_attributes)}
    return starts, canonical_origin, fp_info, site_map


def _run_scrapy(
    site: SiteConfig,
    settings: CrawlSettings,
    frontier: Frontier,
    writer: StateWriter,
    origins: OriginMap,
    log: logging.Logger,
    log_interval_s: float,
) -> dict:
    """Run the spider to the end of the crawl (in this process's Twisted reactor)."""
    global _REACTOR_USED
    if _REACTOR_USED:
        raise RuntimeError(
            "crawl_site already ran in this process and scrapy's reactor cannot restart: "
            "run each crawl in its own process"
        )
    _REACTOR_USED = True
    from scrapy.crawler import CrawlerProcess

    from parasim.crawl.spider import CrawlJob, PageSpider

    # Requests go to the local server when there is one; scrapy's offsite filter (redirects) must
    # allow it instead of the canonical host.
    request_domains = list(site.allowed_domains)
    if origins.active:
        canon_host = urlsplit(origins.canonical_origin).hostname
        request_domains = [d for d in request_domains if d != canon_host] + ["127.0.0.1"]
    job = CrawlJob(frontier, writer, origins, log, log_interval_s=log_interval_s)
    quiet = not log.isEnabledFor(logging.DEBUG)  # scrapy logs every response at DEBUG
    if quiet:
        logging.getLogger("scrapy").setLevel(logging.WARNING)
    process = CrawlerProcess(_scrapy_settings(settings, site.max_bytes))
    if quiet:
        logging.getLogger("scrapy").setLevel(logging.WARNING)
    crawler = process.create_crawler(PageSpider)
    process.crawl(crawler, job=job, request_domains=request_domains)
    process.start()
    writer.flush()
    return {
        "requests": int(crawler.stats.get_value("downloader/request_count", 0)),
        "fetched": job.fetched,
        "crawl_s": (job.finished or time.monotonic()) - job.started,
        "close_reason": job.close_reason,
        "fatal": job.fatal,
    }


#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "crawl",
    rules=("crawl_site",),
    results=("pages",),
    per="site",
    metric="rows_out",
    label="pages crawled",
    explain=explain.crawl,
    input_from_upstream=False,
    one_to_one=True,
    aliases={"crawl-site": ("crawl",)},
    settings=CrawlSettings,
    outputs={"out": PAGES_SCHEMA},
    run=crawl_site,
)
