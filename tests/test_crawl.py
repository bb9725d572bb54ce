"""Tests of the crawl stage: pure helpers in-process; crawls in subprocesses (scrapy's reactor
cannot restart), against local servers only (tests/badserver.py and served folders)."""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from parasim.config import SiteConfig
from parasim.crawl import crawl_site
from parasim.crawl.content import declared_lang, decode_html, extract_links, parse_html
from parasim.crawl.frontier import NOT_REQUESTED, Frontier, OriginMap
from parasim.crawl.stage import replay
from parasim.crawl.state import PART_GLOB, fingerprint, open_state, publish
from parasim.io import PAGES_SCHEMA, read_table, rows_to_table, write_table
from parasim.stats import Recorder, Stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
import badserver  # noqa: E402

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
WET = SHARED / "sites" / "wet-boew"

SETTINGS = {
    "concurrency": 4,
    "timeout_s": 1.0,
    "retries": 1,
    "autothrottle": True,
    "obey_robots": True,
    "user_agent": "parasim-test",
}

_RUNNER = """
import json, logging, sys
from pathlib import Path
from parasim.config import SiteConfig
from parasim.crawl import crawl_site
from parasim.stats import Recorder
a = json.loads(sys.argv[1])
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
site = SiteConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in a["site"].items()})
rec = Recorder("crawl", site=site.name)
crawl_site(site, a["settings"], Path(a["out"]), Path(a["state"]), rec=rec, **a["kw"])
print("STATS=" + json.dumps(rec.stats().to_dict()))
"""


def _site(start: str, **kw) -> SiteConfig:
    host = start.split("/")[2].split(":")[0]
    base = dict(name="t", domain="test", languages=("en", "fr"), start_urls=(start,))
    base["allowed_domains"] = (host,)
    base.update(kw)
    return SiteConfig(**base)


def _args(site: SiteConfig, out: Path, state: Path, settings: dict, **kw) -> list[str]:
    site_d = {k: v for k, v in dataclasses.asdict(site).items() if k not in ("rewrites", "extra")}
    payload = {"site": site_d, "settings": settings, "out": str(out), "state": str(state)}
    payload["kw"] = kw
    return [sys.executable, "-c", _RUNNER, json.dumps(payload)]


def run_crawl(site: SiteConfig, out: Path, state: Path, settings=SETTINGS, **kw) -> Stats:
    """crawl_site in a fresh process; the stats it recorded."""
    proc = subprocess.run(
        _args(site, out, state, settings, **kw), capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [x for x in proc.stdout.splitlines() if x.startswith("STATS=")][-1]
    return Stats.from_dict(json.loads(line[len("STATS=") :]))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rows(folder: Path) -> dict[str, dict]:
    return {r["url"]: r for r in read_table(folder).to_pylist()}


# ---------------------------------------------------------------- pure helpers


def test_decode_repairs_wrong_and_missing_charsets():
    latin = "<p>Déjà vu, café</p>".encode("latin-1")
    d = decode_html(latin, "text/html; charset=utf-8")
    assert "Déjà vu, café" in d.text and "\ufffd" not in d.text
    assert d.encoding == "cp1252" and d.note.startswith("charset_fixed")
    d = decode_html(latin, "text/html")  # no charset at all
    assert "café" in d.text and d.note
    d = decode_html("<p>été — ok</p>".encode(), None)
    assert d.text == "<p>été — ok</p>" and d.encoding == "utf-8" and d.note is None
    mixed = "<p>été</p>".encode() + "<p>café</p>".encode("latin-1")
    d = decode_html(mixed, "text/html; charset=utf-8")
    assert "été" in d.text and "café" in d.text and d.encoding == "utf-8+cp1252"
    d = decode_html('<meta charset="windows-1252"><p>caf\xe9</p>'.encode("latin-1"), None)
    assert "café" in d.text and d.note is None
    d = decode_html(b"<p>x</p>", "text/html; charset=no-such-codec")
    assert d.text == "<p>x</p>"


def test_declared_lang_and_links():
    html = (
        '<html lang="FR-ca"><head><base href="/docs/"><link rel="alternate" hreflang="en" '
        'href="page-en.html"><link rel="stylesheet" href="s.css"></head><body>'
        '<a href="a.html#frag">a</a><a href="a.html">dup</a><a href="#top">self</a>'
        '<a href="x.pdf">pdf</a><a href="mailto:a@b.c">m</a><a href="javascript:go()">j</a>'
        '<a href="https://other.example/z?b=2&a=1">o</a><a href="http://[bad">bad</a>'
        '<area href="/map"></body></html>'
    )
    root = parse_html(html)
    assert declared_lang(root) == "fr"
    links = extract_links(root, "https://site.example/start/index.html")
    assert links == [
        "https://site.example/docs/page-en.html",
        "https://site.example/docs/a.html",
        "https://other.example/z?a=1&b=2",
        "https://site.example/map",
    ]
    assert declared_lang(parse_html("<p>no lang</p>"), "en-GB, fr") == "en"
    assert (
        declared_lang(parse_html("")) is None and extract_links(parse_html(""), "http://x/") == []
    )


def test_origin_map_round_trip():
    m = OriginMap("https://gov.example", "http://127.0.0.1:4321")
    assert m.to_local("https://gov.example/a?b=1") == "http://127.0.0.1:4321/a?b=1"
    assert m.to_canonical("http://127.0.0.1:4321/a") == "https://gov.example/a"
    assert m.normalize("http://gov.example:8080/x") == "https://gov.example/x"
    assert m.to_local("https://other.example/a") == "https://other.example/a"
    assert m.scrub("GET http://127.0.0.1:4321/a failed") == "GET https://gov.example/a failed"
    plain = OriginMap()
    assert plain.to_local("http://a/") == plain.to_canonical("http://a/") == "http://a/"


def _links_graph() -> dict[str, list[str]]:
    o = "http://s.example"
    return {
        f"{o}/": [f"{o}/a", f"{o}/b", "http://else.example/", f"{o}/a"],
        f"{o}/a": [f"{o}/c", f"{o}/", "http://else.example/"],
        f"{o}/b": [f"{o}/c", f"{o}/d"],
        f"{o}/c": [f"{o}/e"],
        f"{o}/d": [f"{o}/f"],
    }


def _bfs(max_pages: int, max_depth: int) -> Frontier:
    graph = _links_graph()
    f = Frontier(["http://s.example/"], ["s.example"], max_pages, max_depth)
    while not f.done:
        for url in f.pending():
            f.record(url, url, graph.get(url, []))
        if not f.advance():
            break
    return f


def test_frontier_levels_limits_and_counts():
    f = _bfs(100, 10)
    assert f.requested == 7 and f.level == 3
    assert f.not_requested == {"offsite": 1}  # counted once although linked twice
    f = _bfs(100, 1)
    assert f.requested == 3 and f.not_requested == {"offsite": 1, "depth_limit": 2}
    f = _bfs(4, 10)
    assert f.requested == 4 and f.not_requested == {"offsite": 1, "page_limit": 2}  # d, e
    assert set(NOT_REQUESTED) >= set(f.not_requested)


def test_state_fingerprint_replay_and_publish(tmp_path: Path):
    log = logging.getLogger("test")
    state, out = tmp_path / "state", tmp_path / "out"
    table, nxt = open_state(state, fingerprint({"a": 1}), {"a": 1}, log)
    assert table.num_rows == 0 and nxt == 1
    rows = [
        {"url": "http://s.example/", "final_url": "http://s.example/", "depth": 0,
         "html": '<a href="/a">a</a><a href="/b">b</a>'},
        {"url": "http://s.example/a", "final_url": "http://s.example/a", "depth": 1,
         "html": '<a href="/c">c</a>'},
    ]  # fmt: skip
    write_table(rows_to_table(rows, PAGES_SCHEMA), state / "part-000001.parquet")
    table, nxt = open_state(state, fingerprint({"a": 1}), {"a": 1}, log)
    assert table.num_rows == 2 and nxt == 2
    f = Frontier(["http://s.example/"], ["s.example"], 100, 10)
    assert replay(f, table, OriginMap()) == 2
    assert f.level == 1 and f.pending() == ["http://s.example/b"]
    assert publish(state, out) == 1
    assert os.path.samefile(out / "part-000001.parquet", state / "part-000001.parquet")
    table, nxt = open_state(state, fingerprint({"a": 2}), {"a": 2}, log)  # other settings
    assert table.num_rows == 0 and not list(state.glob(PART_GLOB))


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def bad_crawl(tmp_path_factory):
    """One crawl of the misbehaving server; the offsite server must see no request."""
    tmp = tmp_path_factory.mktemp("bad")
    with badserver.running() as srv, badserver.running("127.0.0.2") as offsite:
        srv.offsite_url = offsite.origin + "/"
        srv.closed_url = f"http://127.0.0.1:{_closed_port()}/"
        site = _site(srv.origin + "/", max_pages=100, max_depth=4, max_bytes=4096)
        stats = run_crawl(site, tmp / "out", tmp / "state")
        yield {
            "stats": stats,
            "rows": _rows(tmp / "out"),
            "origin": srv.origin,
            "fetched": srv.fetched(),
            "offsite_requests": list(offsite.requests),
        }


@pytest.mark.slow
def test_bad_input_is_counted_by_reason(bad_crawl):
    o, rows, stats = bad_crawl["origin"], bad_crawl["rows"], bad_crawl["stats"]
    reason = {u[len(o) :]: r["skip_reason"] for u, r in rows.items() if u.startswith(o + "/")}
    assert reason["/"] is None and reason["/ok-en"] is None and reason["/ok-fr"] is None
    expected = {
        "/slow": "timeout",
        "/missing": "http_404",
        "/error": "http_500",
        "/loop-a": "redirect_loop",
        "/away": "offsite_redirect",
        "/report": "non_html",
        "/picture": "non_html",
        "/big": "too_large",
        "/big-chunked": "too_large",
        "/empty": "empty",
        "/private/secret": "robots",
    }
    for path, why in expected.items():
        assert reason[path] == why, path
    closed = [u for u in rows if u.startswith("http://127.0.0.1:") and not u.startswith(o)]
    assert [rows[u]["skip_reason"] for u in closed] == ["connection"]
    # every row's reason is counted, plus links never requested
    counts = {}
    for r in rows.values():
        if r["skip_reason"]:
            counts[r["skip_reason"]] = counts.get(r["skip_reason"], 0) + 1
    by_reason = stats.dropped
    assert {k: v for k, v in by_reason.items() if k not in NOT_REQUESTED} == counts
    assert by_reason["offsite"] == 1 and by_reason["depth_limit"] == 1
    assert stats.rows_out == sum(r["skip_reason"] is None for r in rows.values())
    assert stats.counts["rows"] == len(rows)
    assert stats.rows_in == stats.rows_out + stats.n_dropped
    for r in rows.values():
        assert (r["html"] is not None) == (r["skip_reason"] is None)
        assert r["skip_reason"] is not None or r["status"] == 200


def test_moved_page_and_calendar_depth(bad_crawl):
    o, rows = bad_crawl["origin"], bad_crawl["rows"]
    moved = rows[o + "/moved"]
    assert moved["skip_reason"] is None and moved["final_url"] == o + "/ok-en"
    months = sorted(int(u.rsplit("=", 1)[1]) for u in rows if "/cal?month=" in u)
    assert months == [1, 2, 3, 4]  # depth 1..4; month 5 is beyond max_depth
    assert rows[o + "/cal?month=4"]["depth"] == 4
    assert rows[o + "/ok-en"]["referer"] == o + "/"


def test_charsets_malformed_and_languages(bad_crawl):
    o, rows, stats = bad_crawl["origin"], bad_crawl["rows"], bad_crawl["stats"]
    assert "Déjà vu, naïve café." in rows[o + "/latin1"]["html"]
    assert "Crème brûlée." in rows[o + "/nocharset"]["html"]
    assert "Crème brûlée — été." in rows[o + "/nocharset-utf8"]["html"]
    assert rows[o + "/nocharset-utf8"]["encoding"] == "utf-8"
    assert stats.counts["charset_fixed"] == 2
    assert rows[o + "/malformed"]["skip_reason"] is None
    assert rows[o + "/malformed"]["declared_lang"] == "es"
    assert rows[o + "/ok-en"]["declared_lang"] == "en"
    assert rows[o + "/ok-fr"]["declared_lang"] == "fr"
    assert len(rows[o + "/ok-en"]["content_hash"]) == 64


def test_nothing_leaves_allowed_domains_or_robots(bad_crawl):
    assert bad_crawl["offsite_requests"] == []
    fetched = bad_crawl["fetched"]
    assert not any(p.startswith("/private") for p in fetched)
    assert "/file.pdf" not in fetched  # not a page: never requested
    assert fetched.count("/ok-fr") == 1  # linked from several pages: requested once


# ---------------------------------------------------------------- serve_dir, limits, resume


def _make_site(root: Path) -> None:
    o = "https://demo.parasim.example"
    files = {
        "index-en.html": page_html("en", ["about-en.html", f"{o}/docs/guide-en.html",
                                          "index-fr.html", "report.pdf"]),
        "index-fr.html": page_html("fr", ["about-fr.html", "index-en.html", "old-fr.html"]),
        "old-fr.html": '<html><head><meta http-equiv="refresh" content="0; '
        f'url={o}/about-fr.html"></head></html>',
        "about-en.html": page_html("en", ["about-fr.html", "http://demo.parasim.example/"]),
        "about-fr.html": page_html("fr", ["about-en.html"]),
        "docs/guide-en.html": page_html("en", ["../index-en.html", "/docs/deep/x-en.html"]),
        "docs/deep/x-en.html": page_html("en", ["/nowhere-en.html"]),
        "index.html": page_html("en", ["index-en.html"]),
    }  # fmt: skip
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    (root / "report.pdf").write_bytes(b"%PDF-1.4")


def page_html(lang: str, links: list[str]) -> str:
    return badserver.page(f"page {lang}", links, lang=lang, body="Some text.")


def test_serve_dir_outputs_do_not_depend_on_the_port(tmp_path: Path):
    root = tmp_path / "site"
    _make_site(root)
    site = _site("https://demo.parasim.example/index-en.html", serve_dir=str(root))
    s1 = run_crawl(site, tmp_path / "o1", tmp_path / "s1")
    r1 = _rows(tmp_path / "o1")
    o = "https://demo.parasim.example/"
    assert set(r1) == {o + p for p in ("index-en.html", "index-fr.html", "about-en.html",
                                       "about-fr.html", "docs/guide-en.html", "",
                                       "docs/deep/x-en.html", "nowhere-en.html",
                                       "old-fr.html")}  # fmt: skip
    assert s1.dropped == {"http_404": 1}
    # a meta refresh to the canonical origin is followed on the local server
    assert r1[o + "old-fr.html"]["final_url"] == o + "about-fr.html"
    assert "Some text." in r1[o + "old-fr.html"]["html"]
    assert r1[o + "docs/guide-en.html"]["referer"] == o + "index-en.html"
    assert "127.0.0.1" not in json.dumps(list(r1.values()), default=str)
    # a finished state: a rerun fetches nothing (no reactor needed, so in-process)
    rec = Recorder("crawl", site=site.name)
    crawl_site(site, SETTINGS, tmp_path / "o1", tmp_path / "s1", rec=rec)
    again = rec.stats()
    assert again.counts["resumed_pages"] == len(r1) and again.counts["requests"] == 0
    assert again.rows_out == s1.rows_out and again.dropped == s1.dropped
    # the page limit: most URLs requested, the rest counted once; another port, same rows
    s2 = run_crawl(dataclasses.replace(site, max_pages=3), tmp_path / "o2", tmp_path / "s2")
    r2 = _rows(tmp_path / "o2")
    assert s2.counts["rows"] == 3 and s2.dropped["page_limit"] == 4
    for url, row in r2.items():
        assert {**row, "fetched_at": None} == {**r1[url], "fetched_at": None}


@pytest.mark.slow
def test_resume_after_kill_fetches_nothing_twice(tmp_path: Path):
    with badserver.running() as srv:
        srv.tree_size, srv.tree_delay_s = 40, 0.1
        site = _site(srv.origin + "/tree/0", max_pages=1000)
        settings = {**SETTINGS, "concurrency": 2, "autothrottle": False}
        state, out = tmp_path / "state", tmp_path / "out"
        args = _args(site, out, state, settings, flush_pages=1, flush_s=0.0)
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if len(list(state.glob(PART_GLOB))) >= 8:
                    break
                time.sleep(0.05)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(10)
        persisted = set(read_table(state, columns=["url"]).column("url").to_pylist())
        assert 8 <= len(persisted) < 40
        first_run = srv.fetched()
        srv.requests.clear()
        stats = run_crawl(site, out, state, settings)
        second_run = srv.fetched()

    assert stats.counts["resumed_pages"] == len(persisted)
    assert not {srv.origin + p for p in second_run} & persisted  # nothing stored is refetched
    assert len(set(second_run)) == len(second_run)
    # only pages unfinished at the kill are repeated: the requests in flight plus the responses
    # already downloaded whose items were not yet written (scrapy frees a download slot, and
    # sends the next request, before the item reaches the state writer)
    assert len(set(first_run) & set(second_run)) <= 2 * settings["concurrency"]
    # the result is the uninterrupted crawl's: every node once, at its BFS depth, from its parent
    rows = _rows(out)
    assert stats.counts["rows"] == len(rows) == 40 == stats.rows_out
    for n in range(40):
        r = rows[f"{srv.origin}/tree/{n}"]
        assert r["depth"] == (n + 1).bit_length() - 1
        assert r["referer"] == (f"{srv.origin}/tree/{(n - 1) // 2}" if n else None)
        assert f"Node number {n}." in r["html"]


# ---------------------------------------------------------------- real data


@pytest.mark.slow
@pytest.mark.shared_data
@pytest.mark.skipif(not WET.is_dir(), reason="needs ../shared/data/sites/wet-boew")
def test_wet_boew_pairs_are_fetched(tmp_path: Path):
    o = "https://wet-boew.demo.parasim.example"
    site = _site(
        f"{o}/index-en.html",
        start_urls=(f"{o}/index-en.html", f"{o}/index-fr.html"),
        serve_dir=str(WET / "site"),
        max_pages=5000,
        max_depth=30,
    )
    stats = run_crawl(site, tmp_path / "out", tmp_path / "state", {**SETTINGS, "timeout_s": 15})
    ok = {u for u, r in _rows(tmp_path / "out").items() if r["skip_reason"] is None}
    # Four pairs are linked from no page (only from scripts), so no link crawler finds them.
    unlinked = {"docs/events-en.html", "docs/ref/docstmpl-en.html",
                "docs/ref/exitscript/exiturl-en.html", "docs/versions/rdmp-en.html"}  # fmt: skip
    pairs = [ln.split("\t") for ln in (WET / "pairs_en_fr.tsv").read_text().splitlines() if ln]
    missing = [(en, fr) for en, fr in pairs if f"{o}/{en}" not in ok or f"{o}/{fr}" not in ok]
    assert {en for en, _ in missing} == unlinked
    assert stats.rows_out > 800


def test_aliases_and_extra_link_attributes():
    """A production-host alias maps onto the site; data-* attributes can hold links."""
    from parasim.crawl.content import extract_links, parse_html
    from parasim.crawl.frontier import OriginMap

    om = OriginMap(
        "https://s.example",
        aliases=(("https://prod.example.org/site/", "https://s.example/"),),
        link_attrs=("data-ajax-replace",),
    )
    doc = parse_html(
        '<html><body><nav data-ajax-replace="menu-en.html"></nav>'
        '<a href="https://prod.example.org/site/docs/a-en.html">a</a>'
        '<a href="https://prod.example.org/other/b.html">b</a></body></html>'
    )
    links = extract_links(doc, "https://s.example/x/p.html", om.normalize, om.link_attrs)
    assert "https://s.example/docs/a-en.html" in links
    assert "https://s.example/x/menu-en.html" in links
    assert "https://prod.example.org/other/b.html" in links  # outside the alias: left alone
    assert "https://s.example/x/menu-en.html" not in extract_links(
        doc, "https://s.example/x/p.html", om.normalize
    )
