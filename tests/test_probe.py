"""Tests of `parasim probe`: the analysis on small page tables in-process; probes (which crawl in
child processes) of the demo sites, the WET site (real data, skipped when absent) and a hostile
server (tests/badserver.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from parasim.bench.pairs import pages_from_dir, pair_metrics
from parasim.cli import main
from parasim.config import load_config, validate_config
from parasim.io import PAGES_SCHEMA, read_table, rows_to_table
from parasim.pair import pair_pages
from parasim.probe import ProbeError, diff_rewrite, measure_language, render_yaml, suggest_site
from parasim.probe.evidence import choose_evidence, evidence_counts
from parasim.probe.stage import probe_site, read_pages
from parasim.probe.structure import (
    alias_counts,
    choose_aliases,
    choose_main_selector,
    link_attribute_counts,
    main_selector_counts,
    word_counts,
)
from parasim.stats import Recorder

sys.path.insert(0, str(Path(__file__).resolve().parent))
import badserver  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
WET = ROOT.parent / "shared" / "data" / "sites" / "wet-boew"
ORIGIN = "https://s.example"

EN_TEXT = (
    "The service is open to all residents of the region. You can apply online or by mail, and "
    "the office will send you an answer within ten days. If you have questions about your file, "
    "call us from Monday to Friday."
)
FR_TEXT = (
    "Le service est ouvert à tous les résidents de la région. Vous pouvez faire une demande en "
    "ligne ou par la poste, et le bureau vous enverra une réponse dans les dix jours. Pour toute "
    "question sur votre dossier, appelez-nous du lundi au vendredi."
)


def html(lang, text, toggle=None, hreflang=None, extra=""):
    """A page with a nav, a <main> holding the text, an optional toggle and alternate link."""
    head = (
        f'<link rel="alternate" hreflang="{hreflang[0]}" href="{hreflang[1]}">' if hreflang else ""
    )
    sw = f'<a lang="{toggle[0]}" hreflang="{toggle[0]}" href="{toggle[1]}">x</a>' if toggle else ""
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><title>t</title>{head}</head><body>'
        f'<header><section id="wb-lng">{sw}</section><nav><a href="/">Home</a></nav></header>'
        f"<main><h1>Title</h1><p>{text}</p><p>{text}</p></main>{extra}"
        "<footer><p>Footer line</p></footer></body></html>"
    )


def table(*rows):
    full = [
        {"url": ORIGIN + path, "final_url": ORIGIN + path, "status": 200, "declared_lang": lang}
        | {"html": body}
        for path, lang, body in rows
    ]
    return rows_to_table(full, PAGES_SCHEMA)


def shipped_pairing(name: str) -> dict:
    cfg = load_config(ROOT / "config.yaml")
    return next(s for s in cfg["sites"] if s["name"] == name)["pairing"]


def run_probe(tmp_path: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "parasim.cli", "probe", url, "--out", str(tmp_path / "s.yaml")]
    cmd += ["--stats", str(tmp_path / "stats.json"), *extra]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)


# ---------------------------------------------------------------- pure steps


def test_diff_rewrite_cuts_at_delimiters():
    assert diff_rewrite(ORIGIN + "/a/about-en.html", ORIGIN + "/a/about-fr.html") == (
        "-en.html",
        "-fr.html",
    )
    assert diff_rewrite(ORIGIN + "/en/life.html", ORIGIN + "/es/life.html") == ("/en/", "/es/")
    assert diff_rewrite(ORIGIN + "/p?lang=en", ORIGIN + "/p?lang=fr") == ("=en", "=fr")
    # an odd name is its own pattern, and it must reproduce the other URL
    got = diff_rewrite(ORIGIN + "/License-en.html", ORIGIN + "/Licence-fr.html")
    assert got == ("/License-en.html", "/Licence-fr.html")
    assert diff_rewrite(ORIGIN + "/a", ORIGIN + "/a") is None


def test_word_counts_leave_out_what_nobody_reads():
    from parasim.crawl.content import parse_html

    root = parse_html(
        "<html><head><title>T</title><script>x y</script></head><body><p>a b<!-- c d -->e f"
        "<b>g</b> h</p><style>z</style>i<template>t</template></body></html>"
    )
    counts = word_counts(root)
    assert counts[root] == 7 and counts[root.find(".//p")] == 6


def test_measure_language_is_the_pair_stage_measure():
    lang, share = measure_language(f"<html><body><p>{EN_TEXT}</p></body></html>")
    assert lang == "en" and share > 0.9
    assert measure_language(f"<html><body><p>{FR_TEXT}</p></body></html>")[0] == "fr"
    es = (
        "El servicio está abierto a todos los residentes de la región. Puede hacer su solicitud "
        "en línea o por correo, y la oficina le enviará una respuesta en diez días."
    )
    assert measure_language(f"<p>{es}</p>")[0] == "es"
    # code samples are not the page's language; too little text is no language at all
    assert measure_language(f"<p>{FR_TEXT}</p><pre>{EN_TEXT}</pre>")[0] == "fr"
    assert measure_language("<p>Contact us</p>") == (None, 0.0)
    assert measure_language(None) == (None, 0.0)


def test_languages_declared_and_measured():
    pages = table(
        ("/a-en.html", "en", html("en", EN_TEXT, toggle=("fr", "/a-fr.html"))),
        ("/a-fr.html", "fr", html("fr", FR_TEXT, toggle=("en", "/a-en.html"))),
        ("/b-fr.html", "fr", html("fr", EN_TEXT, toggle=("en", "/b-en.html"))),  # untranslated
        ("/b-en.html", "en", html("en", EN_TEXT, toggle=("fr", "/b-fr.html"))),
    )
    s = suggest_site(pages, ORIGIN + "/a-en.html")
    assert s.entry["languages"] == ["en", "fr"]
    lc = s.counts["languages"]
    assert lc["declared"] == {"en": 2, "fr": 2} and lc["measured"] == {"en": 3, "fr": 1}
    assert lc["declared_differs_from_measured"] == 1 and "/b-fr.html" in lc["differ_examples"][0]


def test_one_language_or_no_english_is_one_sentence():
    only_en = table(("/a.html", "en", html("en", EN_TEXT)), ("/b.html", "en", html("en", EN_TEXT)))
    with pytest.raises(ProbeError, match=r"only one language has 1 or more .*declared en 2"):
        suggest_site(only_en, ORIGIN + "/a.html")
    only_fr = table(("/a.html", "fr", html("fr", FR_TEXT)))
    with pytest.raises(ProbeError, match="none of the 1 fetched pages is in English"):
        suggest_site(only_fr, ORIGIN + "/a.html")
    with pytest.raises(ProbeError, match=r"no fetched page is in de \(declared en 2;"):
        suggest_site(only_en, ORIGIN + "/a.html", languages=("en", "de"))
    unlinked = table(("/a.html", "en", html("en", EN_TEXT)), ("/b.html", "fr", html("fr", FR_TEXT)))
    with pytest.raises(ProbeError, match="no page pair found among the 2 fetched pages"):
        suggest_site(unlinked, ORIGIN + "/a.html")


def test_a_translation_on_another_host():
    fr = "https://fr.s.example"
    en_page = ("/a.html", "en", html("en", EN_TEXT, toggle=("fr", fr + "/a.html")))
    fr_row = {"url": fr + "/a.html", "final_url": fr + "/a.html", "status": 200}
    fr_row |= {
        "declared_lang": "fr",
        "html": html("fr", FR_TEXT, toggle=("en", ORIGIN + "/a.html")),
    }
    only_en = table(en_page, ("/b.html", "fr", html("fr", FR_TEXT)))
    with pytest.raises(
        ProbeError, match=r"other hosts \(fr.s.example\): probe again with --allowed"
    ):
        suggest_site(only_en, ORIGIN + "/a.html")
    both = rows_to_table(table(en_page).to_pylist() + [fr_row], PAGES_SCHEMA)
    s = suggest_site(both, ORIGIN + "/a.html", allowed_domains=("fr.s.example",))
    assert s.entry["allowed_domains"] == ["fr.s.example", "s.example"]
    assert s.counts["pairs_suggested"] == 1


def test_agreeing_kinds_are_all_kept():
    pages = table(
        ("/a-en.html", "en", html("en", EN_TEXT, ("fr", "/a-fr.html"), ("fr", "/a-fr.html"))),
        ("/a-fr.html", "fr", html("fr", FR_TEXT, ("en", "/a-en.html"), ("en", "/a-en.html"))),
        ("/b-en.html", "en", html("en", EN_TEXT, toggle=("fr", "/b-fr.html"))),
        ("/b-fr.html", "fr", html("fr", FR_TEXT)),
        ("/c-en.html", "en", html("en", EN_TEXT)),  # paired by its name only
        ("/c-fr.html", "fr", html("fr", FR_TEXT)),
    )
    s = suggest_site(pages, ORIGIN + "/a-en.html")
    assert s.entry["pairing"] == {
        "evidence": ["hreflang", "toggle", "rewrite"],
        "rewrites": [{"en": "-en.html", "fr": "-fr.html"}],
    }
    assert s.counts["evidence"]["pairs"] == {"hreflang": 1, "toggle": 2, "rewrite": 3}
    assert s.counts["pairs_suggested"] == 3


def test_kinds_that_disagree_leave_the_toggle_alone():
    # The toggle of /x-en.html leads to /y-fr.html, its name to /x-fr.html: the URL pattern is
    # not to be trusted here, although it pairs more pages (c, d) than the toggle. hreflang pairs
    # nothing the toggle does not.
    pages = table(
        ("/c-en.html", "en", html("en", EN_TEXT)),
        ("/c-fr.html", "fr", html("fr", FR_TEXT)),
        ("/d-en.html", "en", html("en", EN_TEXT)),
        ("/d-fr.html", "fr", html("fr", FR_TEXT)),
        ("/a-en.html", "en", html("en", EN_TEXT, ("fr", "/a-fr.html"), ("fr", "/a-fr.html"))),
        ("/a-fr.html", "fr", html("fr", FR_TEXT, ("en", "/a-en.html"))),
        ("/b-en.html", "en", html("en", EN_TEXT, toggle=("fr", "/b-fr.html"))),
        ("/b-fr.html", "fr", html("fr", FR_TEXT)),
        ("/x-en.html", "en", html("en", EN_TEXT, toggle=("fr", "/y-fr.html"))),
        ("/x-fr.html", "fr", html("fr", FR_TEXT)),
        ("/y-fr.html", "fr", html("fr", FR_TEXT)),
    )
    pages_ = read_pages(pages)
    from parasim.config import Rewrite

    ev = evidence_counts(
        pages_, pages, ("en", "fr"), [Rewrite({"en": "-en.html", "fr": "-fr.html"})]
    )
    assert list(ev["disagreements"]) == ["toggle/rewrite"]
    assert "/x-en.html" in ev["disagreements"]["toggle/rewrite"][0]
    assert ev["pairs"] == {"hreflang": 1, "toggle": 3, "rewrite": 5}
    evidence, why = choose_evidence(ev)
    assert evidence == ("toggle",)
    assert why[0] == "toggle leads: 3 pair(s), 3 different counterpart(s)"
    assert any("rewrite left out" in w for w in why) and any("hreflang left out" in w for w in why)
    s = suggest_site(pages, ORIGIN + "/a-en.html")
    assert s.entry["pairing"] == {"evidence": ["toggle"]}
    text = render_yaml(s, ["header"])
    assert "toggle/rewrite name different pages for 1 page(s)" in text
    assert validate_config(yaml.safe_load(text))["sites"][0]["pairing"]["evidence"] == ["toggle"]


def test_main_selector_is_the_element_holding_most_words():
    body = f'<div id="page"><div id="content"><p>{EN_TEXT}</p><p>{EN_TEXT}</p></div></div>'
    nav = "<nav>" + " ".join(["Home About Contact Services News"] * 3) + "</nav>"
    rows = [
        ("/a.html", "en", f"<html><body>{nav}{body}</body></html>"),
        ("/b.html", "en", f"<html><body>{nav}{body}<footer>{nav}</footer></body></html>"),
    ]
    counts = main_selector_counts(read_pages(table(*rows)))
    # #page and #content hold the same words (most of each page): the name decides the tie
    assert counts["#content"]["pages_holding_most"] == counts["#page"]["pages_holding_most"] == 2
    assert 0.5 < counts["#content"]["median_share"] < 0.95
    selector, why = choose_main_selector(counts)
    assert selector == "#content" and "2/2 pages" in why
    # <main> wins a tie
    pages = read_pages(table(("/a.html", "en", html("en", EN_TEXT))))
    assert choose_main_selector(main_selector_counts(pages))[0] == "main"
    # a page that is all one block: nothing to shed, no selector
    pages = read_pages(table(("/a.html", "en", f"<html><body><p>{EN_TEXT}</p></body></html>")))
    assert choose_main_selector(main_selector_counts(pages))[0] is None


def test_link_attributes_and_aliases():
    menu = (
        '<div data-ajax-replace="./ajax/menu-en.html" data-trgt="mb-pnl" data-x="2013-05-01">'
        '</div><a href="https://prod.example/site/docs/a-en.html">a</a>'
        '<a href="https://prod.example/site/docs/b-en.html">b</a>'
        '<a href="https://prod.example/site/c-en.html">c</a>'
        '<a href="https://other.example/index-en.html">o</a>'
        '<a href="docs/a-en.html">a</a><a href="docs/b-en.html">b</a><a href="c-en.html">c</a>'
    )
    pages = read_pages(table(("/index-en.html", "en", f"<html><body>{menu}</body></html>")))
    attrs = link_attribute_counts(pages, ("s.example",))
    assert attrs == {"data-ajax-replace": {"pages": 1, "urls": 1, "urls_no_href_reaches": 1}}
    aliases = alias_counts(pages, ORIGIN)
    assert aliases["https://prod.example/site/"] == {"paths": 3, "known": 3}
    # one root-level name in common is not an alias
    assert aliases["https://other.example/"] == {"paths": 1, "known": 1}
    assert choose_aliases(aliases) == ["https://prod.example/site/"]


def test_demo_pages_from_disk_give_the_shipped_evidence():
    for name, folder, start in (
        ("demo-gov", "gov", "/index-en.html"),
        ("demo-insure", "insure", "/en/index.html"),
    ):
        origin = f"https://{folder}.demo.parasim.example"
        pages = pages_from_dir(ROOT / "demo" / "sites" / folder, origin)
        s = suggest_site(pages, origin + start)
        full = validate_config({"sites": [s.entry]})["sites"][0]
        assert full["pairing"] == shipped_pairing(name), name
        assert s.entry["main_selector"] == "main"


# ---------------------------------------------------------------- probes (crawls)


@pytest.mark.parametrize(
    ("name", "folder", "start"),
    [("demo-gov", "gov", "/index-en.html"), ("demo-insure", "insure", "/en/index.html")],
)
@pytest.mark.slow
def test_probe_demo_site_suggests_the_shipped_entry(tmp_path, name, folder, start):
    url = f"https://{folder}.demo.parasim.example{start}"
    proc = run_probe(tmp_path, url, "--serve-dir", f"demo/sites/{folder}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout == (tmp_path / "s.yaml").read_text()  # printed and written
    raw = yaml.safe_load(proc.stdout)
    # serve_dir is relative to the folder the probe ran in (the repository root here)
    out = subprocess.run(
        [sys.executable, "-m", "parasim.cli", "validate-config", str(tmp_path / "s.yaml")],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 0 and "valid" in out.stdout, out.stderr
    shipped = next(s for s in load_config(ROOT / "config.yaml")["sites"] if s["name"] == name)
    entry = raw["sites"][0]
    assert entry["languages"] == shipped["languages"]
    assert entry["main_selector"] == shipped["main_selector"] == "main"
    assert entry["pairing"]["evidence"] == shipped["pairing"]["evidence"]
    assert entry["pairing"]["rewrites"] == shipped["pairing"]["rewrites"]
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["crawl"]["pages_ok"] <= 40
    assert "robots" in stats["crawl"]["pages_skipped_by_reason"]  # private/ was not fetched
    for key in ("# main: holds most of the words on", "# toggle: on ", "explains"):
        assert key in proc.stdout


@pytest.mark.slow
def test_probe_hostile_server(tmp_path):
    """Time-outs, errors, loops, oversized and malformed pages, an endless calendar: the probe
    stays within its page budget, obeys robots.txt, and pairs the one pair by its URL naming."""
    settings = {"timeout_s": 1.0, "retries": 1}
    with badserver.running() as server:
        s, crawl = probe_site(
            server.origin + "/", tmp_path / "a", max_pages=30, crawl_settings=settings
        )
        fetched = server.fetched()
        assert not any(p.startswith("/private") for p in fetched)
        assert len(set(fetched)) <= 30
        assert s.entry["pairing"] == {
            "evidence": ["rewrite"],
            "rewrites": [{"en": "-en", "fr": "-fr"}],
        }
        assert s.counts["pairs_suggested"] == 1
        assert crawl["pages_skipped_by_reason"].get("robots") == 1
        validate_config({"sites": [s.entry]})
        # nothing but the error page: one sentence naming what was not fetched
        with pytest.raises(
            ProbeError, match=r"no page of .* could be fetched \(not fetched: http_404"
        ):
            probe_site(server.origin + "/missing", tmp_path / "b", max_pages=5)
        with pytest.raises(ProbeError, match="it redirects to another host"):
            probe_site(server.origin + "/away", tmp_path / "c", max_pages=5)


def test_bench_probe_is_a_benchmark():
    import parasim.bench

    assert "probe" in parasim.bench.available()
    cmd = [sys.executable, "-m", "parasim.bench.probe", "--help"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "usage: parasim bench probe" in proc.stdout


def test_probe_command_errors_are_one_line(tmp_path, capsys):
    assert main(["probe", "not-a-url", "--out", str(tmp_path / "s.yaml")]) == 2
    assert "is not an absolute http(s) URL" in capsys.readouterr().err
    assert main(["probe", "https://a.example/", "--languages", "fr,de"]) == 2
    assert "English and at least one other" in capsys.readouterr().err
    assert main(["probe", "https://a.example/", "--serve-dir", str(tmp_path / "nope")]) == 2
    assert "is not a folder" in capsys.readouterr().err
    assert main(["probe", "https://a.example/", "--domain", "Bad Domain"]) == 2
    assert "domain" in capsys.readouterr().err
    assert not (tmp_path / "s.yaml").exists()


# ---------------------------------------------------------------- real data: WET-BOEW


@pytest.mark.shared_data
@pytest.mark.skipif(not WET.is_dir(), reason="needs ../shared/data/sites/wet-boew")
@pytest.mark.slow
def test_probe_wet_suggests_a_config_that_pairs_the_gold(tmp_path):
    url = "https://wet-boew.parasim.example/index-en.html"
    proc = run_probe(tmp_path, url, "--serve-dir", str(WET / "site"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    entry = yaml.safe_load(proc.stdout)["sites"][0]
    assert entry["pairing"] == {"evidence": ["toggle"]}
    assert entry["link_attributes"] == ["data-ajax-replace"]
    assert "https://wet-boew.github.io/wet-boew/" in entry["aliases"]
    assert entry["main_selector"] == "main" and entry["languages"] == ["en", "fr"]
    # The suggestion as it is: crawl the whole site with it, then the pair stage.
    cfg_path = tmp_path / "s.yaml"
    pages, state = tmp_path / "pages", tmp_path / "state"
    crawl = [sys.executable, "-m", "parasim.cli", "crawl", "--config", str(cfg_path)]
    crawl += ["--site", entry["name"], "--out", str(pages), "--state", str(state)]
    subprocess.run(crawl, check=True, capture_output=True, cwd=ROOT, timeout=600)
    cfg = load_config(cfg_path)
    from parasim.config import site_by_name

    site = site_by_name(cfg, entry["name"])
    rec = Recorder("pair", site=site.name)
    pairs = pair_pages(read_table(pages), site, cfg["shards"], rec=rec, one_to_one=site.one_to_one)
    m = pair_metrics(pairs, WET / "pairs_en_fr.tsv", "https://wet-boew.parasim.example")
    assert m["tp"] >= 262, m["fn"]
    assert m["precision"] == 1.0, m["fp"]
