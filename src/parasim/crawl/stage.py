"""``crawl_site``: crawl one site into a pages dataset, resumably."""

from __future__ import annotations

import contextlib
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
from parasim.crawl.content import canonical, parse_html, without_params
from parasim.crawl.frontier import (
    NOT_REQUESTED,
    Frontier,
    OriginMap,
    followed_links,
    host_allowed,
)
from parasim.crawl.serve import serve_folders
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
            first = 0
            if skip[i] is None:
                c, j = where[i]
                text = html[c][j].as_py() or ""
                links, first = followed_links(parse_html(text), final[i] or url, origins)
            frontier.record(url, final[i], links, first)
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
    links to the state's parts. With ``site.serve_dir`` (or ``site.serve``, one folder per host)
    the folders are served on 127.0.0.1 for the crawl and stored URLs keep the sites' origins, so
    outputs do not depend on the ports.

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

    starts, served, fp_info, site_map = _setup(site, settings)
    fp = fingerprint(fp_info)
    stored, next_part = open_state(state_dir, fp, fp_info, log)
    listed, alternates = _sitemap_starts(site, settings, served, site_map, state_dir, fp, log)
    frontier = Frontier(
        starts + [u for u in listed if u not in starts],
        list(site.allowed_domains),
        site.max_pages,
        site.max_depth,
        pairs_first=site_map["pairs_first"],
    )
    resumed = replay(frontier, stored, _origin_map(served, None, site_map))
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
        serving = serve_folders([f for _, f in served]) if served else nullcontext(None)
        with serving as local_origins:
            for (origin, folder), local in zip(served, local_origins or [], strict=False):
                log.info("crawl %s: serving %s at %s for %s", site.name, folder, local, origin)
            origins_map = _origin_map(served, local_origins, site_map)
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
    if site.sitemaps:  # the sitemaps' hreflang alternates: the pair stage's sitemap evidence
        _write_alternates(out_dir, alternates)
    ok, skipped = _record_rows(rec, state_dir, frontier)
    elapsed = time.perf_counter() - t0
    rec.count("requests", requests)
    if site.sitemaps:
        rec.count("sitemap_urls", len(listed))
        rec.count("sitemap_alternates", len(alternates))
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


def _setup(
    site: SiteConfig, settings: CrawlSettings
) -> tuple[list[str], list[tuple[str, str]], dict, dict]:
    """The start URLs, the served (canonical origin, folder) pairs (``serve_dir``, ``serve``;
    the start URLs' origin first), the state's fingerprint fields and the site's
    :class:`OriginMap` options.

    Raises:
        ValueError: serve_dir with start URLs on several origins.
        FileNotFoundError: a served folder is not a folder.
    """
    starts = [without_params(canonical(u) or u, site.drop_query_params) for u in site.start_urls]
    served: list[tuple[str, str]] = []
    if site.serve_dir:
        origins = sorted({_origin(u) for u in starts})
        if len(origins) != 1:
            raise ValueError(
                f"site {site.name!r}: serve_dir needs all start_urls on one origin, got {origins}"
            )
        served.append((origins[0], site.serve_dir))
        if not Path(site.serve_dir).is_dir():
            raise FileNotFoundError(
                f"site {site.name!r}: serve_dir is not a folder: {site.serve_dir}"
            )
    if site.serve:
        scheme = {urlsplit(u).hostname: urlsplit(u).scheme for u in starts}
        first = urlsplit(starts[0]).hostname
        hosts = sorted(site.serve, key=lambda hf: (hf[0] != first, hf[0]))
        served += [(f"{scheme.get(h, 'https')}://{h}", folder) for h, folder in hosts]
        for h, folder in hosts:
            if not Path(folder).is_dir():
                raise FileNotFoundError(f"site {site.name!r}: serve.{h} is not a folder: {folder}")
    # Aliases stand for the site's own origin (the first start URL's).
    site_origin = _origin(starts[0]) + "/"
    aliases = tuple((a if a.endswith("/") else a + "/", site_origin) for a in site.aliases)
    pairs_first = site.crawl_order == "pairs_first"
    fp_info = {
        "start_urls": starts,
        "allowed_domains": sorted(site.allowed_domains),
        "max_pages": site.max_pages,
        "max_depth": site.max_depth,
        "max_bytes": site.max_bytes,
        "serve_dir": site.serve_dir,
        "canonical_origin": served[0][0] if site.serve_dir else None,
        "obey_robots": bool(settings.obey_robots),
        "aliases": list(site.aliases),
        "link_attributes": list(site.link_attributes),
    }
    if site.serve:  # keys that older crawls did not have are written only when used
        fp_info["serve"] = dict(site.serve)
    if site.sitemaps:
        fp_info["sitemaps"] = True
    if site.drop_query_params:
        fp_info["drop_query_params"] = list(site.drop_query_params)
    if pairs_first:
        fp_info["crawl_order"] = site.crawl_order
        fp_info["language_attributes"] = list(site.language_attributes)
    site_map = {
        "aliases": aliases,
        "link_attrs": tuple(site.link_attributes),
        "pairs_first": pairs_first,
        "language_attrs": tuple(site.language_attributes) if pairs_first else (),
        "drop_params": tuple(site.drop_query_params),
    }
    return starts, served, fp_info, site_map


def _sitemap_starts(
    site: SiteConfig,
    settings: CrawlSettings,
    served: list[tuple[str, str]],
    site_map: dict,
    state_dir: Path,
    fp: str,
    log: logging.Logger,
) -> tuple[list[str], list[list[str]]]:
    """With ``site.sitemaps``: the page URLs the sitemaps of the site's hosts list and their
    hreflang alternates (``[page URL, hreflang, URL]``), fetched once per crawl state
    (``sitemap.json`` beside the parts, so a resumed crawl starts from the same URLs); else
    none."""
    import json

    from parasim.crawl.sitemap import sitemap_urls

    if not site.sitemaps:
        return [], []
    kept = state_dir / "sitemap.json"
    if kept.is_file():
        with contextlib.suppress(OSError, ValueError, KeyError):
            data = json.loads(kept.read_text(encoding="utf-8"))
            if data.get("fingerprint") == fp:
                return list(data["urls"]), [list(a) for a in data["alternates"]]
    origins = list(dict.fromkeys(_origin(canonical(u) or u) for u in site.start_urls))
    origins += [origin for origin, _ in served if origin not in origins]
    known = {urlsplit(o).hostname for o in origins}
    origins += [f"https://{d}" for d in site.allowed_domains if d not in known]
    serving = serve_folders([f for _, f in served]) if served else nullcontext(None)
    with serving as local_origins:
        om = _origin_map(served, local_origins, site_map)
        found = sitemap_urls(
            origins,
            to_local=om.to_local,
            to_canonical=lambda text: om.scrub(text) or text,
            normalize=om.normalize,
            allowed=lambda u: host_allowed(u, site.allowed_domains),
            user_agent=settings.user_agent,
            timeout_s=float(settings.timeout_s),
            max_bytes=site.max_bytes * 10,
        )
    log.info(
        "crawl %s: %d page URL(s) from %d sitemap(s) %s",
        site.name,
        len(found.urls),
        len(found.sitemaps_read),
        found.sitemaps_read,
    )
    if found.alternates:
        log.info("crawl %s: %d hreflang alternate(s) in the sitemaps", site.name,
                 len(found.alternates))  # fmt: skip
    alternates = [list(a) for a in found.alternates]
    _write_json(kept, {"fingerprint": fp, "urls": found.urls, "alternates": alternates})
    return found.urls, alternates


def _write_alternates(out_dir: Path, alternates: list[list[str]]) -> None:
    """The sitemaps' alternates beside the published pages (:data:`ALTERNATES_FILE`)."""
    from parasim.crawl.sitemap import ALTERNATES_FILE

    _write_json(out_dir / ALTERNATES_FILE, alternates, indent=0)


def _write_json(path: Path, obj: Any, indent: int | None = None) -> None:
    """``obj`` as JSON at ``path``, atomically (a temporary sibling, then renamed)."""
    import json

    tmp = path.with_name(f".{path.name}.tmp")
    text = json.dumps(obj, indent=indent) + ("\n" if indent is not None else "")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def _origin_map(served: list[tuple[str, str]], local: list[str] | None, site_map: dict):
    """The :class:`OriginMap` for the served origins (``local``: their servers, when running)."""
    if not served:
        return OriginMap(**site_map)
    local = local or [None] * len(served)
    more = tuple((origin, loc) for (origin, _), loc in zip(served[1:], local[1:], strict=True))
    return OriginMap(served[0][0], local[0], more_origins=more, **site_map)


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
        served_hosts = {urlsplit(origin).hostname for origin, _ in origins.pairs}
        request_domains = [d for d in request_domains if d not in served_hosts] + ["127.0.0.1"]
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
