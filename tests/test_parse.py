"""Tests for parasim.parse (page pairs to clean lines) and a WET-BOEW check."""

from __future__ import annotations

from dataclasses import replace

import pytest

from parasim.config import SiteConfig
from parasim.io import LINES_SCHEMA, PAGES_SCHEMA, PAIRS_SCHEMA, rows_to_table
from parasim.parse import clean_lines
from parasim.parse import parse_pairs as _parse_pairs
from parasim.stats import Recorder, Stats

ORIGIN = "https://s.example"
SITE = SiteConfig(
    name="s",
    domain="government",
    languages=("en", "fr"),
    start_urls=(ORIGIN + "/",),
    allowed_domains=("s.example",),
    main_selector="main",
)


def parse_pairs(pr, pg, site, settings=None) -> tuple[object, Stats]:
    """The parse stage on ``pr``: its lines table and the stats it recorded."""
    rec = Recorder("parse", site=site.name)
    lines = _parse_pairs(pr, pg, site, settings, rec=rec)
    return lines, rec.stats()


def doc(body: str, lang: str = "en") -> str:
    head = "<head><title>Title here</title></head>"
    return f"<!DOCTYPE html><html lang='{lang}'>{head}<body>{body}</body></html>"


def pages(**bodies: str | None):
    return rows_to_table(
        [{"url": f"{ORIGIN}/{k}", "status": 200, "html": v} for k, v in bodies.items()],
        PAGES_SCHEMA,
    )


def pairs(*names: tuple[str, str]):
    rows = [
        {
            "pair_id": f"p{i}",
            "site": "s",
            "domain": "government",
            "lang_pair": "en-fr",
            "en_url": f"{ORIGIN}/{en}",
            "other_url": f"{ORIGIN}/{fr}",
            "other_lang": "fr",
            "evidence": ["toggle"],
            "shard": 0,
        }
        for i, (en, fr) in enumerate(names)
    ]
    return rows_to_table(rows, PAIRS_SCHEMA)


def test_clean_lines_rules():
    text = "  Two   words \n\n2023-01-01 12:00\nOneword\n---\nÉté très chaud\n  \n"
    text += "  * Home\n  * Bullet item text\n  3. Numbered\n  4. Numbered item\n *\n"
    kept, counts = clean_lines(text, min_words=2)
    assert kept == ["Two words", "Été très chaud", "Bullet item text", "4. Numbered item"]
    assert counts == {"kept": 4, "blank": 3, "no_alpha": 2, "few_words": 3}
    kept, counts = clean_lines(text, min_words=1)
    assert kept[:3] == ["Two words", "Oneword", "Été très chaud"]
    assert "Home" in kept and "3. Numbered" in kept


NAV = "<nav><ul><li>Home page link</li><li>About us page</li></ul></nav>"


def test_selector_on_both_sides_reads_only_the_matches():
    en = doc(NAV + "<main><h1>Hello big world</h1><p>First para here.</p></main>tail text words")
    fr = doc(NAV + "<main><h1>Bonjour le monde</h1><p>Premier paragraphe ici.</p></main>", "fr")
    lines, stats = parse_pairs(pairs(("en", "fr")), pages(en=en, fr=fr), SITE)
    assert lines.schema.equals(LINES_SCHEMA, check_metadata=True)
    (row,) = lines.to_pylist()
    assert row["en_lines"] == ["Hello big world", "First para here."]
    assert row["other_lines"] == ["Bonjour le monde", "Premier paragraphe ici."]
    assert row["selector_used"] and row["equal_lines"] and (row["n_en"], row["n_other"]) == (2, 2)
    assert stats.counts["selector_used"] == 1 and stats.counts["selector_missed"] == 0


def test_selector_on_one_side_falls_back_to_whole_pages():
    en = doc(NAV + "<main><p>Only English has main.</p></main>")
    fr = doc(NAV + "<div><p>Pas de main ici.</p></div>", "fr")
    lines, stats = parse_pairs(pairs(("en", "fr")), pages(en=en, fr=fr), SITE)
    (row,) = lines.to_pylist()
    assert not row["selector_used"]
    assert "Home page link" in row["en_lines"] and "Home page link" in row["other_lines"]
    assert stats.counts["selector_missed"] == 1 and stats.counts["selector_missed_one_side"] == 1


def test_nested_and_multiple_matches_in_document_order():
    site = replace(SITE, main_selector="div.content")
    en = doc(
        "<div class='content'><p>Part one text.</p><div class='content'><p>Inner part text.</p>"
        "</div></div><p>Between the parts.</p><div class='content'><p>Part two text.</p></div>"
    )
    fr = doc("<div class='content'><p>Partie un texte.</p></div>", "fr")
    lines, _ = parse_pairs(pairs(("en", "fr")), pages(en=en, fr=fr), site)
    assert lines.column("en_lines").to_pylist()[0] == [
        "Part one text.",
        "Inner part text.",
        "Part two text.",
    ]


def test_links_and_images_are_not_rendered():
    en = doc("<main><p>See <a href='/x'>the docs page</a> now <img alt='a logo'></p></main>")
    lines, _ = parse_pairs(pairs(("en", "en")), pages(en=en), SITE)
    assert lines.column("en_lines").to_pylist()[0] == ["See the docs page now"]


def test_strict_drops_unequal_and_default_flags_them():
    en = doc("<main><p>One line here.</p><p>Two lines here.</p></main>")
    fr = doc("<main><p>Une ligne ici.</p></main>", "fr")
    pg, pr = pages(en=en, fr=fr), pairs(("en", "fr"))
    lines, stats = parse_pairs(pr, pg, SITE)
    assert lines.column("equal_lines").to_pylist() == [False]
    assert stats.counts["unequal"] == 1 and stats.rows_out == 1
    lines, stats = parse_pairs(pr, pg, SITE, {"strict": True})
    assert lines.num_rows == 0 and stats.dropped["unequal_line_counts"] == 1
    assert stats.rows_out == 0


def test_bad_input_is_counted_not_fatal():
    good = doc("<main><p>Some real text.</p></main>")
    pg = pages(en=good, fr=good, failed=None, empty="", broken="<main><p>Unclosed <b>tags here<td>")
    pr = pairs(
        ("en", "missing"), ("failed", "fr"), ("en", "empty"), ("en", "broken"), ("empty", "empty")
    )
    table, stats = parse_pairs(pr, pg, SITE)
    lines = table.to_pylist()
    skipped = {
        k: stats.dropped[k] for k in ("missing_en_html", "missing_other_html", "parse_error")
    }
    assert skipped == {"missing_en_html": 1, "missing_other_html": 1, "parse_error": 0}
    assert stats.dropped["unequal_line_counts"] == 0 == stats.dropped["empty_side"]
    rows = {tuple(r[k].rsplit("/", 1)[1] for k in ("en_url", "other_url")): r for r in lines}
    assert set(rows) == {("en", "empty"), ("en", "broken"), ("empty", "empty")}
    assert rows[("en", "empty")]["other_lines"] == []
    assert not rows[("en", "empty")]["equal_lines"]
    assert rows[("empty", "empty")]["equal_lines"]
    assert rows[("en", "broken")]["other_lines"] == ["Unclosed tags here"]
    assert stats.counts["empty_pairs"] == 2 and stats.rows_in == 5 and stats.rows_out == 3
    # strict: the empty-on-both-sides pair is equal (0 == 0) but dropped as empty.
    _, stats = parse_pairs(pr, pg, SITE, {"strict": True})
    assert stats.dropped["empty_side"] == 1
    # every pair in is parsed or dropped by its reason
    assert stats.rows_in == 5 == stats.rows_out + stats.n_dropped
    assert stats.dropped["missing_en_html"] == 1


def test_invalid_arguments_are_rejected():
    with pytest.raises(ValueError, match="main_selector"):
        parse_pairs(pairs(), pages(), replace(SITE, main_selector="main[[["))
    with pytest.raises(ValueError, match="parse.min_words"):
        parse_pairs(pairs(), pages(), SITE, {"min_words": 0})


@pytest.mark.shared_data
def test_wet_parse_with_main_selector(shared_data):
    from parasim.bench.pairs import WET_ORIGIN, pages_from_dir, wet_site
    from parasim.pair import pair_pages

    root = shared_data / "sites" / "wet-boew" / "site"
    if not root.is_dir():
        pytest.skip("WET-BOEW site not in shared data")
    pg = pages_from_dir(root / "docs", WET_ORIGIN + "/docs")
    pr = pair_pages(pg, wet_site(("toggle",)), 1, rec=Recorder("pair"))
    keep = [i < 19 or u.endswith("/start-en.html") for i, u in enumerate(pr["en_url"].to_pylist())]
    pr = pr.filter(keep)
    lines, stats = parse_pairs(pr, pg, wet_site(("toggle",)))
    assert stats.rows_in == 20 and lines.num_rows == 20
    assert stats.counts["selector_used"] >= 15
    start = next(r for r in lines.to_pylist() if r["en_url"].endswith("/start-en.html"))
    assert start["en_lines"][0] == "Getting Started"
    assert start["other_lines"][0] == "Comment démarrer"
