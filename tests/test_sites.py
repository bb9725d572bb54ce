"""Real bilingual sites as users meet them (issue 50): sites on two hosts served locally
(``serve``), sitemaps, one page under several URLs (redirects, ``X`` / ``X/`` /
``X/index.html``), links on custom elements, language lists at the foot of the page (a probe
that samples page pairs), and the pair stage's checks on weak evidence (language lists,
``content_disagrees: drop``)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from parasim.bench.pairs import pair_metrics, read_gold
from parasim.config import ConfigError, SiteConfig, validate_config
from parasim.crawl.content import language_links, page_links, parse_html
from parasim.crawl.frontier import Frontier, OriginMap
from parasim.crawl.sitemap import parse_alternates, parse_sitemap, robots_sitemaps
from parasim.io import PAGES_SCHEMA, read_table, rows_to_table
from parasim.pair import pair_pages
from parasim.stats import Recorder

ROOT = Path(__file__).resolve().parents[1]
ORIGIN = "https://s.example"


# ---------------------------------------------------------------- the crawl


def _run(graph: dict[str, tuple[list[str], int]], max_pages: int, pairs_first: bool) -> Frontier:
    f = Frontier([f"{ORIGIN}/"], ["s.example"], max_pages, 10, pairs_first=pairs_first)
    while not f.done:
        for url in f.pending():
            links, first = graph.get(url, ([], 0))
            f.record(url, url, [f"{ORIGIN}{u}" for u in links], first)
        if not f.advance():
            break
    return f


def test_pairs_first_samples_page_pairs_within_the_budget():
    # A home page that links 20 English pages; each English page's first link is its
    # translation (a language list at the foot of the page, read first by the crawl).
    graph = {f"{ORIGIN}/": (["/fr/"] + [f"/en/{k}" for k in range(20)], 1)}
    for k in range(20):
        graph[f"{ORIGIN}/en/{k}"] = ([f"/fr/{k}", "/"], 1)
    breadth = _run(graph, 12, pairs_first=False)
    fetched = breadth.seen
    assert not any("/fr/" in u and u != f"{ORIGIN}/fr/" for u in fetched)  # English only
    pairs = _run(graph, 12, pairs_first=True)
    en = {u.rsplit("/", 1)[1] for u in pairs.seen if "/en/" in u}
    fr = {u.rsplit("/", 1)[1] for u in pairs.seen if "/fr/" in u and u != f"{ORIGIN}/fr/"}
    assert en and en == fr  # every English page of the sample with its translation
    assert pairs.requested <= 12
    # what was left is counted, once, as not requested for the page limit
    assert pairs.not_requested["page_limit"] == 20 - len(en)


def test_pairs_first_reads_language_links_first():
    doc = parse_html(
        '<html><head><link rel="alternate" hreflang="fr" href="/fr/a"></head><body>'
        '<nav><a href="/en/b">b</a></nav><x-header lang-href="/fr/c"></x-header>'
        '<footer><a hreflang="es" lang="es" href="/es/a">es</a></footer></body></html>'
    )
    base = f"{ORIGIN}/en/a"
    assert language_links(doc, base, None, ("lang-href",)) == [
        f"{ORIGIN}/fr/a",
        f"{ORIGIN}/es/a",
        f"{ORIGIN}/fr/c",
    ]
    links, first = page_links(doc, base, None, (), pairs_first=True)
    assert first == 2 and links[:2] == [f"{ORIGIN}/fr/a", f"{ORIGIN}/es/a"]
    assert page_links(doc, base, None, (), pairs_first=False)[1] == 0


def test_origin_map_with_two_served_hosts():
    m = OriginMap(
        "https://en.example",
        "http://127.0.0.1:4000",
        more_origins=(("https://fr.example", "http://127.0.0.1:4001"),),
    )
    assert m.to_local("https://fr.example/a") == "http://127.0.0.1:4001/a"
    assert m.to_canonical("http://127.0.0.1:4001/a") == "https://fr.example/a"
    assert m.to_canonical("http://127.0.0.1:4000/a") == "https://en.example/a"
    assert m.normalize("http://fr.example:8080/x") == "https://fr.example/x"
    assert m.scrub("GET http://127.0.0.1:4001/a") == "GET https://fr.example/a"


def test_serve_is_checked_in_the_config(tmp_path: Path):
    base = {"name": "s", "domain": "d", "languages": ["en", "fr"]}
    base["start_urls"] = ["https://en.example/"]
    ok = {**base, "allowed_domains": ["en.example", "fr.example"]}
    ok["serve"] = {"en.example": str(tmp_path), "fr.example": str(tmp_path)}
    site = SiteConfig.from_dict(validate_config({"sites": [ok]})["sites"][0])
    assert site.serve == (("en.example", str(tmp_path)), ("fr.example", str(tmp_path)))
    with pytest.raises(ConfigError, match="host 'other.example' is not among allowed_domains"):
        validate_config({"sites": [{**ok, "serve": {"other.example": str(tmp_path)}}]})
    with pytest.raises(ConfigError, match="serve_dir and serve: give one or the other"):
        validate_config({"sites": [{**ok, "serve_dir": str(tmp_path)}]})
    with pytest.raises(ConfigError, match=r"serve\.fr\.example: .* is not a folder"):
        validate_config({"sites": [{**ok, "serve": {"fr.example": str(tmp_path / "no")}}]})


def test_sitemaps_parse():
    urlset = (
        b'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        b"<url><loc> https://s.example/a.html </loc></url><url><loc>https://s.example/b</loc>"
        b"</url></urlset>"
    )
    assert parse_sitemap(urlset) == (["https://s.example/a.html", "https://s.example/b"], [])
    assert parse_sitemap(gzip.compress(urlset))[0][0] == "https://s.example/a.html"
    index = (
        b'<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><sitemap>'
        b"<loc>https://s.example/sm-1.xml</loc></sitemap></sitemapindex>"
    )
    assert parse_sitemap(index) == ([], ["https://s.example/sm-1.xml"])
    assert parse_sitemap(b"<html><body>not one</body></html>") == ([], [])
    alternates = (
        b'<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" xmlns:xhtml='
        b'"http://www.w3.org/1999/xhtml"><url><loc>https://s.example/en/</loc>'
        b'<xhtml:link rel="alternate" hreflang="fr" href="https://s.example/fr/"/>'
        b'<xhtml:link rel="alternate" hreflang="en" href="https://s.example/en/"/>'
        b'<xhtml:link rel="canonical" hreflang="de" href="https://s.example/de/"/>'
        b'<xhtml:link rel="alternate" href="https://s.example/nolang/"/></url>'
        b"<url><loc>https://s.example/b</loc></url></urlset>"
    )
    assert parse_alternates(alternates) == [
        ("https://s.example/en/", "fr", "https://s.example/fr/"),
        ("https://s.example/en/", "en", "https://s.example/en/"),
    ]
    assert parse_sitemap(alternates)[0] == ["https://s.example/en/", "https://s.example/b"]
    assert parse_alternates(urlset) == [] and parse_alternates(index) == []
    with pytest.raises(ValueError, match="not XML"):
        parse_sitemap(b"\x00 plain text")
    robots = "User-agent: *\nDisallow: /private\nSitemap: https://s.example/sm.xml\n"
    assert robots_sitemaps(robots) == ["https://s.example/sm.xml"]


# ---------------------------------------------------------------- fixture sites on disk


def _page(lang: str, title: str, text: str, head: str = "", body: str = "") -> str:
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><title>{title}</title>{head}</head><body>'
        f"{body}<main><h1>{title}</h1><p>{text}</p><p>{text} {len(title)}</p></main></body></html>"
    )


TEXTS = [
    ("Styles", "Colours, type and spacing for every page of the service.",
     "Styles", "Couleurs, typographie et espacement pour chaque page du service."),
    ("Alerts", "An alert tells people about a change that matters to them now.",
     "Alertes", "Une alerte signale un changement qui compte pour les gens maintenant."),
    ("About us", "The team builds the tools the public service uses every day.",
     "À propos", "L'équipe construit les outils que la fonction publique utilise chaque jour."),
    ("Contact", "Write to us or call the office from Monday to Friday.",
     "Joindre", "Écrivez-nous ou appelez le bureau du lundi au vendredi."),
]  # fmt: skip
SLUGS = [("styles", "styles"), ("components/alert", "composants/alerte"),
         ("about", "a-propos"), ("contact", "joindre")]  # fmt: skip


def two_host_site(root: Path) -> dict[str, Path]:
    """A site on two hosts (en.example, fr.example) with French slugs and absolute cross-host
    language links; folders linked without their trailing slash (the server redirects); the
    toggle names ``X/``, hreflang ``X/index.html``; one page pair only the sitemaps list."""
    en_dir, fr_dir = root / "en.example", root / "fr.example"
    pairs = list(zip(SLUGS, TEXTS, strict=True))
    for (en, fr), (t_en, x_en, t_fr, x_fr) in pairs:
        for folder, here, there, lang, other, title, text in (
            (en_dir, en, fr, "en", "https://fr.example", t_en, x_en),
            (fr_dir, fr, en, "fr", "https://en.example", t_fr, x_fr),
        ):
            head = f'<link rel="alternate" hreflang="{"fr" if lang == "en" else "en"}" '
            head += f'href="{other}/{there}/index.html">'
            toggle = f'<div id="wb-lng"><a lang="{"fr" if lang == "en" else "en"}" '
            toggle += (
                f'href="{other}/{there}/">{"Français" if lang == "en" else "English"}</a></div>'
            )
            nav = "".join(
                f'<a href="/{(e if lang == "en" else f)}">n</a>' for (e, f), _ in pairs[:3]
            )  # folders without their slash; the last pair is linked by nothing
            path = folder / here / "index.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_page(lang, title, text, head, toggle + f"<nav>{nav}</nav>"))
    for folder, lang in ((en_dir, "en"), (fr_dir, "fr")):
        nav = "".join(f'<a href="/{e if lang == "en" else f}">n</a>' for (e, f), _ in pairs[:3])
        (folder / "index.html").write_text(
            _page(
                lang,
                "Home" if lang == "en" else "Accueil",
                "Welcome to the design system." if lang == "en" else "Bienvenue au système.",
                f'<link rel="alternate" hreflang="{"fr" if lang == "en" else "en"}" href='
                f'"https://{"fr" if lang == "en" else "en"}.example/">',
                f'<div id="wb-lng"><a lang="{"fr" if lang == "en" else "en"}" href="https://'
                f'{"fr" if lang == "en" else "en"}.example">x</a></div><nav>{nav}</nav>',
            )
        )
        host = f"{lang}.example"
        slug = SLUGS[3][0] if lang == "en" else SLUGS[3][1]
        (folder / "sitemap.xml").write_text(
            '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
            f"<url><loc>https://{host}/</loc></url>"
            f"<url><loc>https://{host}/{slug}/index.html</loc></url></urlset>"
        )
    return {"en.example": en_dir, "fr.example": fr_dir}


def sitemap_site(root: Path) -> Path:
    """A site whose pages name no translation (no hreflang, no toggle, slugs that differ by
    language): only its sitemap's xhtml:link alternates say which page translates which."""
    site = root / "sm"
    pairs = list(zip(SLUGS, TEXTS, strict=True))
    urls = []
    for lang in ("en", "fr"):
        nav = "".join(f'<a href="/{lang}/{e if lang == "en" else f}/">n</a>' for (e, f), _ in pairs)
        home = site / lang / "index.html"
        home.parent.mkdir(parents=True, exist_ok=True)
        home.write_text(_page(lang, "Home", "Home page of the system " + lang, "", nav))
        for (e, f), (t_en, x_en, t_fr, x_fr) in pairs:
            here = e if lang == "en" else f
            path = site / lang / here / "index.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(_page(lang, t_en if lang == "en" else t_fr,
                                  x_en if lang == "en" else x_fr, "", nav))  # fmt: skip
    picker = '<a href="/en/">English</a><a href="/fr/">Français</a>'
    (site / "index.html").write_text(_page("en", "Site", "Pick a language.", "", picker))
    for e, f in [("", ""), *SLUGS]:
        en, fr = (
            f"https://sm.example/en/{e + '/' if e else ''}",
            f"https://sm.example/fr/{f + '/' if f else ''}",
        )
        links = (f'<xhtml:link rel="alternate" hreflang="en" href="{en}"/>'
                 f'<xhtml:link rel="alternate" hreflang="fr-CA" href="{fr}"/>')  # fmt: skip
        urls += [f"<url><loc>{en}</loc>{links}</url>", f"<url><loc>{fr}</loc>{links}</url>"]
    (site / "sitemap.xml").write_text(
        '<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:xhtml="http://www.w3.org/1999/xhtml">' + "".join(urls) + "</urlset>"
    )
    return site


def two_host_gold() -> set[tuple[str, str]]:
    out = {("https://en.example/index.html", "https://fr.example/index.html")}
    out |= {
        (f"https://en.example/{e}/index.html", f"https://fr.example/{f}/index.html")
        for e, f in SLUGS
    }
    return out


def web_component_site(root: Path) -> Path:
    """A site built with web components: no ``<a>`` at all; links are ``href`` on custom
    elements, the language link ``lang-href`` on the custom header; slugs differ by language."""
    site = root / "wc"
    pairs = list(zip(SLUGS, TEXTS, strict=True))
    for lang in ("en", "fr"):
        nav = "".join(
            f'<x-nav-link href="/{lang}/{e if lang == "en" else f}"></x-nav-link>'
            for (e, f), _ in pairs
        )
        there = "/fr/" if lang == "en" else "/en/"
        home = site / lang / "index.html"
        home.parent.mkdir(parents=True, exist_ok=True)
        home.write_text(
            _page(
                lang,
                "Home",
                "Home page of the system " + lang,
                "",
                f'<x-header lang-href="{there}"></x-header>{nav}',
            )  # fmt: skip
        )
        for (e, f), (t_en, x_en, t_fr, x_fr) in pairs:
            here, other = (e, f) if lang == "en" else (f, e)
            other_lang = "fr" if lang == "en" else "en"
            path = site / lang / here / "index.html"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                _page(
                    lang,
                    t_en if lang == "en" else t_fr,
                    x_en if lang == "en" else x_fr,
                    "",
                    f'<x-header lang-href="/{other_lang}/{other}/"></x-header>{nav}',
                )
            )
    return site


def _probe(tmp_path: Path, url: str, *args: str) -> dict:
    out = tmp_path / "s.yaml"
    cmd = [sys.executable, "-m", "parasim.cli", "probe", url, "--out", str(out), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return yaml.safe_load(out.read_text())["sites"][0]


def urlpairs(pairs) -> set[tuple[str, str]]:
    en, other = pairs.column("en_url").to_pylist(), pairs.column("other_url").to_pylist()
    return set(zip(en, other, strict=True))


def _crawl_and_pair(tmp_path: Path, config: Path) -> tuple[object, dict]:
    entry = yaml.safe_load(config.read_text())["sites"][0]
    pages = tmp_path / "pages"
    cmd = [sys.executable, "-m", "parasim.cli", "crawl-site", "--config", str(config)]
    cmd += ["--site", entry["name"], "--out", str(pages), "--state", str(tmp_path / "state")]
    cmd += ["--stats", str(tmp_path / "crawl.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    cfg = validate_config(yaml.safe_load(config.read_text()))
    site = SiteConfig.from_dict(cfg["sites"][0])
    rec = Recorder("pair", site=site.name)
    # content evidence with the tests' hashed encoder: no model to build
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_pair_content import encoder

    pairs = pair_pages(
        read_table(pages), site, 1, rec=rec, one_to_one=site.one_to_one, encoder=encoder
    )
    return pairs, json.loads((tmp_path / "crawl.json").read_text())


@pytest.mark.slow
def test_a_two_host_site_with_redirects_and_a_sitemap_is_probed_crawled_and_paired(tmp_path):
    hosts = two_host_site(tmp_path / "site")
    serve = [f"--serve={h}={d}" for h, d in hosts.items()]
    entry = _probe(tmp_path, "https://en.example/", *serve)
    assert entry["serve"] == {h: str(d) for h, d in hosts.items()}
    assert entry["allowed_domains"] == ["en.example", "fr.example"]
    assert entry["sitemaps"] is True  # the sitemaps list the page no link reaches
    # ... so content checks the link pairs there
    assert entry["pairing"]["content_disagrees"] == "drop"
    assert "content" in entry["pairing"]["evidence"]
    assert "hreflang" in entry["pairing"]["evidence"] or "toggle" in entry["pairing"]["evidence"]
    pairs, crawl = _crawl_and_pair(tmp_path, tmp_path / "s.yaml")
    assert crawl["counts"]["sitemap_urls"] == 4
    got = urlpairs(pairs)
    # One page under three URLs: /styles (linked; the server redirects it to /styles/), /styles/
    # (the toggle) and /styles/index.html (hreflang): named by its index file, the others aliases
    assert ("https://en.example/styles/index.html", "https://fr.example/styles/index.html") in got
    en, ev = pairs.column("en_url").to_pylist(), pairs.column("evidence").to_pylist()
    evidence = dict(zip(en, ev, strict=True))["https://en.example/styles/index.html"]
    assert "en_alias:https://en.example/styles/" in evidence, evidence
    assert "en_alias:https://en.example/styles" in evidence, evidence
    gold = tmp_path / "gold.tsv"
    gold.write_text("".join(f"{a}\t{b}\n" for a, b in sorted(two_host_gold())))
    m = pair_metrics(pairs, gold, "https://en.example")
    assert m["precision"] == 1.0 and m["recall"] == 1.0, (m["fp"], m["fn"])


@pytest.mark.slow
def test_a_web_component_site_is_crawled_and_paired_from_the_probe_suggestion(tmp_path):
    site = web_component_site(tmp_path)
    entry = _probe(tmp_path, "https://wc.example/en/", "--serve-dir", str(site))
    assert "href" in entry["link_attributes"] and "lang-href" in entry["link_attributes"]
    assert entry["pairing"]["language_attributes"] == ["lang-href"]
    pairs, _ = _crawl_and_pair(tmp_path, tmp_path / "s.yaml")
    got = urlpairs(pairs)
    want = {("https://wc.example/en/", "https://wc.example/fr/")}
    want |= {(f"https://wc.example/en/{e}/", f"https://wc.example/fr/{f}/") for e, f in SLUGS}
    assert got == want


@pytest.mark.slow
def test_a_site_whose_translations_only_its_sitemap_names_is_probed_crawled_and_paired(tmp_path):
    from parasim.crawl.sitemap import ALTERNATES_FILE

    site = sitemap_site(tmp_path)
    entry = _probe(tmp_path, "https://sm.example/", "--serve-dir", str(site))
    assert entry["sitemaps"] is True and "sitemap" in entry["pairing"]["evidence"]
    pairs, crawl = _crawl_and_pair_command(tmp_path, tmp_path / "s.yaml")
    assert crawl["counts"]["sitemap_alternates"] == 20  # 10 <url>s, 2 alternates each
    assert (tmp_path / "pages" / ALTERNATES_FILE).is_file()
    want = {("https://sm.example/en/", "https://sm.example/fr/")}
    want |= {(f"https://sm.example/en/{e}/", f"https://sm.example/fr/{f}/") for e, f in SLUGS}
    assert urlpairs(pairs) == want
    assert all("sitemap" in ev for ev in pairs.column("evidence").to_pylist())


def _crawl_and_pair_command(tmp_path: Path, config: Path) -> tuple[object, dict]:
    """The crawl, then the pair stage as the workflow runs it (`parasim pair-pages`)."""
    entry = yaml.safe_load(config.read_text())["sites"][0]
    pages, out = tmp_path / "pages", tmp_path / "pairs.parquet"
    cli = [sys.executable, "-m", "parasim.cli"]
    crawl = [
        *cli,
        "crawl-site",
        "--config",
        str(config),
        "--site",
        entry["name"],
        "--out",
        str(pages),
        "--state",
        str(tmp_path / "state"),
        "--stats",
        str(tmp_path / "c.json"),
    ]
    pair = [
        *cli,
        "pair-pages",
        "--config",
        str(config),
        "--site",
        entry["name"],
        "--pages",
        str(pages),
        "--shards",
        "1",
        "--out",
        str(out),
        "--stats",
        str(tmp_path / "p.json"),
    ]
    for cmd in (crawl, pair):
        proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=300)
        assert proc.returncode == 0, proc.stderr[-3000:]
    return read_table(out), json.loads((tmp_path / "c.json").read_text())


# ---------------------------------------------------------------- the pair stage


def test_sitemap_alternates_pair_pages_that_name_no_translation():
    """Alternates (the page itself included, as sitemaps list them; fr-CA read as fr) pair
    pages with nothing else between them; an alternate of a page not fetched names nothing;
    without sitemap evidence they are not read."""
    rows = [_row("/en/a/", "en", ""), _row("/fr/x/", "fr", ""), _row("/en/b/", "en", "")]
    alts = [
        (f"{ORIGIN}/en/a/", "en", f"{ORIGIN}/en/a/"),
        (f"{ORIGIN}/en/a/", "fr-CA", f"{ORIGIN}/fr/x/"),
        (f"{ORIGIN}/fr/x/", "en", f"{ORIGIN}/en/a/"),
        (f"{ORIGIN}/en/b/", "fr", f"{ORIGIN}/fr/not-fetched/"),
        (f"{ORIGIN}/gone/", "fr", f"{ORIGIN}/fr/x/"),
    ]
    site = _site(languages=("en", "fr"), evidence=("sitemap",), sitemaps=True)
    rec = Recorder("pair", site="s")
    pairs = pair_pages(rows_to_table(rows, PAGES_SCHEMA), site, 1, rec=rec, alternates=alts)
    assert [(r["en_url"], r["other_url"], r["evidence"]) for r in pairs.to_pylist()] == [
        (f"{ORIGIN}/en/a/", f"{ORIGIN}/fr/x/", ["sitemap"])
    ]
    assert rec.stats().dropped["target_not_fetched"] == 1  # /en/b/'s French page
    plain = pair_pages(rows_to_table(rows, PAGES_SCHEMA), _site(languages=("en", "fr")), 1,
                       rec=Recorder("pair", site="s"), alternates=alts)  # fmt: skip
    assert plain.num_rows == 0


def test_sitemap_evidence_needs_the_sitemaps_and_their_file(tmp_path):
    entry = {"name": "s", "domain": "d", "languages": ["en", "fr"],
             "start_urls": ["https://s.example/"],
             "pairing": {"evidence": ["sitemap"]}}  # fmt: skip
    with pytest.raises(ConfigError, match="sitemap needs sitemaps: true"):
        validate_config({"sites": [entry]})
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"sites": [entry | {"sitemaps": True}]}))
    pages = tmp_path / "pages"
    pages.mkdir()
    from parasim.io import write_table

    write_table(rows_to_table([_row("/en/a/", "en", "")], PAGES_SCHEMA), pages / "part-0.parquet")
    cmd = [sys.executable, "-m", "parasim.cli", "pair-pages", "--config", str(config), "--site",
           "s", "--pages", str(pages), "--shards", "1", "--out", str(tmp_path / "p.parquet"),
           "--stats", str(tmp_path / "p.json")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode != 0 and "sitemap_alternates.json: not found" in proc.stderr
    assert "sitemaps: true" in proc.stderr


def _row(url: str, lang: str, body: str, final: str | None = None) -> dict:
    return {
        "url": ORIGIN + url,
        "final_url": ORIGIN + (final or url),
        "status": 200,
        "declared_lang": lang,
        "html": f'<html lang="{lang}"><body>{body}<main><p>text of {url}</p></main></body></html>',
    }


def _site(**kw) -> SiteConfig:
    base = {"name": "s", "domain": "d", "languages": ("en", "fr", "es")}
    base |= {"start_urls": (ORIGIN + "/",), "allowed_domains": ("s.example",)}
    return SiteConfig(**(base | kw))


def test_an_english_language_list_that_leaves_a_language_out_is_heeded():
    # /a lists French and Spanish; /b lists French only, and the Spanish page of /b's name is a
    # listing page that links back to it: not its translation.
    def ls(*pairs):
        return "".join(f'<a hreflang="{g}" lang="{g}" href="{u}">{g}</a>' for g, u in pairs)

    rows = [
        _row("/a.en.html", "en", ls(("fr", "/a.fr.html"), ("es", "/a.es.html"))),
        _row("/a.fr.html", "fr", ls(("en", "/a.en.html"))),
        _row("/a.es.html", "es", ls(("en", "/a.en.html"))),
        _row("/b.en.html", "en", ls(("fr", "/b.fr.html"))),
        _row("/b.fr.html", "fr", ls(("en", "/b.en.html"))),
        _row("/b.es.html", "es", ls(("en", "/b.en.html"))),
    ]
    site = _site(
        evidence=("toggle", "rewrite"),
        rewrites=(__import__("parasim.config").config.Rewrite({"en": ".en.", "es": ".es.",
                                                                "fr": ".fr."}),),
    )  # fmt: skip
    rec = Recorder("pair", site="s")
    pairs = pair_pages(rows_to_table(rows, PAGES_SCHEMA), site, 1, rec=rec, one_to_one=False)
    got = {(a[len(ORIGIN) :], b[len(ORIGIN) :]) for a, b in urlpairs(pairs)}
    assert got == {("/a.en.html", "/a.fr.html"), ("/a.en.html", "/a.es.html"),
                   ("/b.en.html", "/b.fr.html")}  # fmt: skip
    stats = rec.stats()
    assert stats.counts["language_list_conflicts"] == 1
    assert stats.counts["unpaired_en_by_lang"]["es"]["conflict"] == 1
    # A bilingual site has no such list: the count is not there at all.
    rec = Recorder("pair", site="s")
    pair_pages(rows_to_table(rows[:2], PAGES_SCHEMA), _site(languages=("en", "fr")), 1, rec=rec)
    assert "language_list_conflicts" not in rec.stats().counts


def test_a_link_to_an_origin_without_its_slash_finds_the_page():
    rows = [
        _row("/", "en", '<a lang="fr" href="https://fr.s.example">fr</a>'),
        {
            **_row("/", "fr", ""),
            "url": "https://fr.s.example/",
            "final_url": "https://fr.s.example/",
        },
        _row("/guide/", "en", '<a lang="fr" href="/guide-fr">fr</a>'),
        _row("/guide-fr/index.html", "fr", ""),
    ]
    site = _site(languages=("en", "fr"), allowed_domains=("s.example", "fr.s.example"))
    pairs = pair_pages(rows_to_table(rows, PAGES_SCHEMA), site, 1, rec=Recorder("pair", site="s"))
    got = urlpairs(pairs)
    assert got == {(ORIGIN + "/", "https://fr.s.example/"),
                   (ORIGIN + "/guide/", ORIGIN + "/guide-fr/index.html")}  # fmt: skip


def test_content_disagrees_drop_leaves_out_weak_link_pairs_content_contradicts():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_pair_content import TOPICS, encoder, page

    from parasim.config import Rewrite

    # The URL pattern pairs page-k with page-k, but the French pages 0 and 1 hold each other's
    # text; 2 is right. The French page 3 links the English page 3 back, content says it is 4's.
    rows = []
    for k in range(5):
        en, _ = TOPICS[k]
        fr = TOPICS[{0: 1, 1: 0, 3: 4, 4: 3}.get(k, k)][1]
        rows.append(page(f"{ORIGIN}/en/page-{k}.html", "en", [en, f"{1000 + k}"]))
        rows.append(page(f"{ORIGIN}/fr/page-{k}.html", "fr", [fr, "x"]))
    table = rows_to_table(rows, PAGES_SCHEMA)
    rw = (Rewrite({"en": "/en/", "fr": "/fr/"}),)
    for mode, kept in (("flag", 5), ("drop", 1)):
        site = _site(languages=("en", "fr"), evidence=("rewrite", "content"), rewrites=rw)
        site = __import__("dataclasses").replace(site, content_disagrees=mode)
        rec = Recorder("pair", site="s")
        pairs = pair_pages(table, site, 1, rec=rec, encoder=encoder)
        flagged = [e for e in pairs.column("evidence").to_pylist() if any(
            x.startswith("content_disagrees:") for x in e)]  # fmt: skip
        assert pairs.num_rows == kept, (mode, pairs.to_pylist())
        counts = rec.stats().counts
        if mode == "flag":
            assert len(flagged) == 4 and "content_dropped" not in counts
        else:
            assert flagged == [] and counts["content_dropped"] == {"fr": 4}
            assert counts["unpaired_en_by_lang"]["fr"]["conflict"] == 4


def test_gold_lists_of_paths_or_urls_and_several_languages(tmp_path: Path):
    (tmp_path / "fr.tsv").write_text("en_path\tother_path\na.en.html\ta.fr.html\nx/\tx-fr/\n")
    (tmp_path / "es.tsv").write_text("en_url\tes_url\nhttps://s.example/a.en.html\t"
                                     "https://s.example/a.es.html\n")  # fmt: skip
    assert read_gold(tmp_path / "fr.tsv", ORIGIN) == {
        (f"{ORIGIN}/a.en.html", f"{ORIGIN}/a.fr.html"),
        (f"{ORIGIN}/x/index.html", f"{ORIGIN}/x-fr/index.html"),
    }
    pairs = rows_to_table(
        [{"en_url": f"{ORIGIN}/a.en.html", "other_url": f"{ORIGIN}/a.es.html"},
         {"en_url": f"{ORIGIN}/x/", "other_url": f"{ORIGIN}/x-fr/index.html"}],
        __import__("parasim.io").io.PAIRS_SCHEMA,
    )  # fmt: skip
    m = pair_metrics(pairs, [tmp_path / "fr.tsv", tmp_path / "es.tsv"], ORIGIN)
    assert (m["tp"], m["n_gold"], m["precision"]) == (2, 3, 1.0)


def test_tracking_parameters_are_left_out_everywhere():
    from parasim.crawl.content import extract_links, without_params
    from parasim.probe.stage import suggest_site

    assert without_params(f"{ORIGIN}/a?utm_source=x&id=3&fbclid=9", ("utm_*", "fbclid")) == (
        f"{ORIGIN}/a?id=3"
    )
    assert without_params(f"{ORIGIN}/a?utm_medium=m", ("utm_*",)) == f"{ORIGIN}/a"
    om = OriginMap(drop_params=("utm_*",))
    doc = parse_html('<a href="/a?utm_source=news">a</a><a href="/a">again</a>')
    assert extract_links(doc, f"{ORIGIN}/", om.normalize) == [f"{ORIGIN}/a"]  # one page
    # the pair stage reads the toggle without them
    rows = [
        _row("/a-en", "en", '<a lang="fr" href="/a-fr?utm_campaign=x">fr</a>'),
        _row("/a-fr", "fr", ""),
    ]
    site = _site(languages=("en", "fr"), evidence=("toggle",))
    table = rows_to_table(rows, PAGES_SCHEMA)
    assert pair_pages(table, site, 1, rec=Recorder("pair", site="s")).num_rows == 0
    site = __import__("dataclasses").replace(site, drop_query_params=("utm_*",))
    assert pair_pages(table, site, 1, rec=Recorder("pair", site="s")).num_rows == 1
    # ... and the probe suggests the key when the sample's links carry them
    s = suggest_site(table, ORIGIN + "/a-en", languages=("en", "fr"))
    assert s.entry["drop_query_params"] == ["utm_*"]


def test_the_probe_suggests_the_default_document_the_server_answers_with():
    """/en/ redirected to /en/default.aspx, and /fr/ fetched with the same bytes as
    /fr/default.aspx: the probe suggests index_files with default.aspx; with it the pair stage
    reads the toggle to /fr/ as the page at /fr/default.aspx."""
    from parasim.probe.stage import suggest_site

    fr_body = '<a lang="en" href="/en/">en</a>'
    rows = [
        _row("/en/", "en", '<a lang="fr" href="/fr/">fr</a>', final="/en/default.aspx"),
        _row("/fr/", "fr", fr_body),
        _row("/fr/default.aspx", "fr", fr_body),
        _row("/fr/page.aspx", "fr", "other page"),
    ]
    rows[2]["html"] = rows[1]["html"]  # the same bytes under both URLs
    table = rows_to_table(rows, PAGES_SCHEMA)
    s = suggest_site(table, ORIGIN + "/en/", languages=("en", "fr"))
    assert s.entry["index_files"] == ["index.html", "index.htm", "default.aspx"]
    assert s.counts["index_files"] == {"default.aspx": 2}
    assert "X/default.aspx (2 URL(s))" in s.notes["index_files"][0]
    site = _site(languages=("en", "fr"), evidence=("toggle",),
                 index_files=tuple(s.entry["index_files"]))  # fmt: skip
    pairs = pair_pages(table, site, 1, rec=Recorder("pair", site="s"))
    assert [(r["en_url"], r["other_url"]) for r in pairs.to_pylist()] == [
        (f"{ORIGIN}/en/default.aspx", f"{ORIGIN}/fr/default.aspx")
    ]
    redirect = suggest_site(rows_to_table(rows[:2], PAGES_SCHEMA), ORIGIN + "/en/",
                            languages=("en", "fr"))  # fmt: skip
    assert redirect.counts["index_files"] == {"default.aspx": 1}  # the redirect alone shows it
    rows[0]["final_url"] = rows[0]["url"]
    plain = suggest_site(rows_to_table(rows[:2], PAGES_SCHEMA), ORIGIN + "/en/",
                         languages=("en", "fr"))  # fmt: skip
    assert "index_files" not in plain.entry and "index_files" not in plain.counts


def test_a_pairs_first_crawl_replays_to_the_same_frontier(tmp_path: Path):
    """A pairs-first crawl killed after a level resumes to the very frontier it had."""
    from parasim.crawl.frontier import followed_links
    from parasim.crawl.stage import replay

    om = OriginMap(pairs_first=True)
    htmls = {f"{ORIGIN}/": "".join(f'<a href="/en/{k}">e</a>' for k in range(8))}
    htmls[f"{ORIGIN}/"] += '<a hreflang="fr" href="/fr/">fr</a>'
    for k in range(8):
        htmls[f"{ORIGIN}/en/{k}"] = f'<a href="/en/{k + 1}">n</a><a lang="fr" href="/fr/{k}">f</a>'
        htmls[f"{ORIGIN}/fr/{k}"] = f'<a lang="en" href="/en/{k}">e</a>'

    def live(stop_after: int | None) -> tuple[Frontier, list[dict]]:
        f = Frontier([f"{ORIGIN}/"], ["s.example"], 9, 10, pairs_first=True)
        rows = []
        while not f.done:
            for url in f.pending():
                html = htmls.get(url, "")
                links, first = followed_links(parse_html(html), url, om) if html else ([], 0)
                f.record(url, url, links, first)
                rows.append({"url": url, "final_url": url, "status": 200, "html": html or None,
                             "skip_reason": None if html else "http_404"})  # fmt: skip
            if stop_after is not None and f.level == stop_after:
                break
            if not f.advance():
                break
        return f, rows

    whole, _ = live(None)
    assert 0 < whole.requested <= 9
    part, rows = live(1)
    f = Frontier([f"{ORIGIN}/"], ["s.example"], 9, 10, pairs_first=True)
    replay(f, rows_to_table(rows, PAGES_SCHEMA), om)
    while not f.done:  # go on from where the replay stopped, as the live crawl would
        for url in f.pending():
            html = htmls.get(url, "")
            links, first = followed_links(parse_html(html), url, om) if html else ([], 0)
            f.record(url, url, links, first)
        if not f.advance():
            break
    assert f.seen == whole.seen and f.requested == whole.requested
    assert f.not_requested == whole.not_requested


def test_the_sitemap_list_is_kept_with_the_crawl_state(tmp_path: Path):
    import logging

    from parasim.crawl.stage import CrawlSettings, _setup, _sitemap_starts

    site_dir = tmp_path / "site"
    site_dir.mkdir()
    (site_dir / "sitemap.xml").write_text(
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>'
        "https://s.example/a.html</loc></url><url><loc>https://else.example/b.html</loc></url>"
        "<url><loc>https://s.example/logo.png</loc></url></urlset>"
    )
    entry = {"name": "s", "domain": "d", "languages": ["en", "fr"], "sitemaps": True}
    entry |= {"start_urls": ["https://s.example/"], "serve_dir": str(site_dir)}
    site = SiteConfig.from_dict(validate_config({"sites": [entry]})["sites"][0])
    settings = CrawlSettings.from_config({})
    _, served, _, site_map = _setup(site, settings)
    log = logging.getLogger("test")
    state = tmp_path / "state"
    state.mkdir()
    got = _sitemap_starts(site, settings, served, site_map, state, "fp1", log)
    assert got == (["https://s.example/a.html"], [])  # on the site, a page; no alternates
    (site_dir / "sitemap.xml").unlink()
    assert _sitemap_starts(site, settings, served, site_map, state, "fp1", log) == got  # kept
    assert _sitemap_starts(site, settings, served, site_map, state, "fp2", log) == ([], [])


def test_the_probe_reads_x_slash_and_x_index_html_as_one_page():
    from parasim.probe.evidence import evidence_counts
    from parasim.probe.stage import read_pages

    text = "The office will answer your letter within ten days, from Monday to Friday. " * 3
    texte = "Le bureau répondra à votre lettre dans les dix jours, du lundi au vendredi. " * 3

    def body(lang, head, toggle, words):
        return (
            f'<html lang="{lang}"><head>{head}</head><body><div id="wb-lng">{toggle}</div>'
            f"<main><p>{words}</p></main></body></html>"
        )

    rows = []
    for k in range(3):
        head = f'<link rel="alternate" hreflang="fr" href="/fr/x{k}/index.html">'
        toggle = f'<a lang="fr" href="/fr/x{k}/">fr</a>'
        rows.append(_row(f"/en/x{k}/", "en", "") | {"html": body("en", head, toggle, text)})
        back = f'<a lang="en" href="/en/x{k}/">en</a>'
        rows.append(_row(f"/fr/x{k}/index.html", "fr", "") | {"html": body("fr", "", back, texte)})
    table = rows_to_table(rows, PAGES_SCHEMA)
    ev = evidence_counts(read_pages(table), table, ("en", "fr"), [])
    assert ev["disagreements"] == {}
    assert ev["pairs"]["hreflang"] == ev["pairs"]["toggle"] == 3
