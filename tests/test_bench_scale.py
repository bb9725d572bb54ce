"""`parasim bench scale build`: the Python documentation's catalogues as a bilingual site."""

from __future__ import annotations

import csv
import hashlib
import re
from pathlib import Path
from urllib.parse import urlsplit

import lxml.html
import pytest
import yaml

from parasim.bench import scale_site
from parasim.bench.scale import main
from parasim.bench.scale_site import collapse, reduce_inline, render_text, select_docs
from parasim.config import validate_config

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("rst", "text"),
    [
        (":func:`os.path`", "os.path"),
        (":func:`~os.path.join` and :meth:`!str.join`", "os.path.join and str.join"),
        (":c:func:`PyConfig_Read`", "PyConfig_Read"),
        ("see :ref:`the error handler <surrogateescape>` here", "see the error handler here"),
        (":ref:`utf8-mode` default", "utf8-mode default"),
        (":doc:`Tutorial <tutorial/index>`", "Tutorial"),
        (":option:`-X utf8 <-X>`", "-X utf8"),
        ("``os.stat(path)`` returns", "os.stat(path) returns"),
        ("``'posix'``, ``'nt'``", "'posix', 'nt'"),
        ("*path* in **bold**", "path in bold"),
        ("`Python <https://www.python.org/>`_ site", "Python site"),
        ("`anonymous <https://x.org/>`__ link", "anonymous link"),
        ("`<https://x.org/>`_", "https://x.org/"),
        ("a `named`_ ref and a bare_ one", "a named ref and a bare one"),
        ("See :pep:`540` and :rfc:`2822`.", "See PEP 540 and RFC 2822."),
        (":abbr:`LIFO (last-in, first-out)` stack", "LIFO stack"),
        (":samp:`python{X.Y}` and :file:`{dir}/x.py`", "pythonX.Y and dir/x.py"),
        (":menuselection:`Start --> Programs`", "Start ‣ Programs"),
        (":guilabel:`&Cancel`", "Cancel"),
        ("U+DC\\ *xx* on decoding", "U+DCxx on decoding"),
        ("Process-N\\ :sub:`1`", "Process-N1"),
        ("a `title reference` here", "a title reference here"),
        ("`text`:term: suffix", "text suffix"),
        ("an _`inline target` here", "an inline target here"),
        ('Equivalent to ``printf("%d")``. [1]_', 'Equivalent to printf("%d"). [1]'),
        ("note [#]_ here", "note  here"),
        ("|version| and |func-bytes|_", "3.13 and func-bytes"),
        # Not markup: docutils' start- and end-string rules.
        ("os.spawn*p* are not supported", "os.spawn*p* are not supported"),
        ("2 * 3 * 4", "2 * 3 * 4"),
        ("``A|B`` matches", "A|B matches"),
        ("the ``__init__`` and __init__ methods", "the __init__ and __init__ methods"),
        ("snake_case names", "snake_case names"),
        ("« *texte* »", "« texte »"),
        ("escaped \\*star\\*", "escaped *star*"),
        ("``C:\\`` drive", "C:\\ drive"),
        ("with Backslash (:kbd:`\\\\`), the", "with Backslash (\\), the"),
    ],
)
def test_inline_markup_is_reduced_to_its_text(rst, text):
    assert reduce_inline(rst, {"version": "3.13"}) == text


@pytest.mark.parametrize(
    ("rst", "text"),
    [
        ("Example::", "Example:"),
        ("Called as follows ::", "Called as follows"),
        ("::", ""),
        (":func:`f` is defined as::", "f is defined as:"),
    ],
)
def test_a_literal_block_marker_is_shown_as_docutils_shows_it(rst, text):
    assert render_text(rst, literal=False) == text


def test_doctest_entries_are_literal_blocks():
    assert scale_site.is_literal_block(">>> print(1)\n1")
    assert not scale_site.is_literal_block("Use ``>>>`` prompts")
    assert render_text(">>> f(*a)\n1", literal=True) == ">>> f(*a)\n1"


PO = r"""
msgid ""
msgstr ""
"Language: fr\n"
"Content-Type: text/plain; charset=UTF-8\n"

#: library/x.rst:2
msgid ":mod:`!x` --- A module"
msgstr ":mod:`!x` — Un module"

#: library/x.rst:7
msgid "Call :func:`f` with *n*."
msgstr ""

#: library/x.rst:9
#, fuzzy
msgid "An **outdated** one."
msgstr "Une ancienne."

#: library/x.rst:11
msgid "::"
msgstr "::"

#: library/x.rst:12
msgid ">>> f(1)\n2"
msgstr ">>> f(1)\n2"

#~ msgid "Obsolete."
#~ msgstr "Obsolète."
"""


def test_a_catalogue_becomes_paragraphs_with_their_status():
    paras = scale_site.read_catalogue(PO)
    assert [(p.entry, p.status, p.literal) for p in paras] == [
        (0, "translated", False),
        (1, "untranslated", False),
        (2, "fuzzy", False),
        (4, "translated", True),  # entry 3 (a lone "::") renders empty: left out
    ]
    assert [(p.en, p.other) for p in paras[:3]] == [
        ("x --- A module", "x — Un module"),
        ("Call f with n.", "Call f with n."),  # untranslated: English on the French page
        ("An outdated one.", "An outdated one."),  # fuzzy: English too
    ]


def test_subsets_are_nested_and_stable():
    docs = [f"library/m{i}" for i in range(40)]
    quarter, half = select_docs(docs, None, 0.25), select_docs(docs, None, 0.5)
    assert len(quarter) == 10 and len(half) == 20 and quarter < half
    assert select_docs(reversed(docs), 10, None) == quarter
    assert select_docs(docs, None, None) == set(docs)


# --- a small build of the real catalogues ----------------------------------------------------


def _tree_digest(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def built(shared_data, tmp_path_factory) -> Path:
    """Three French catalogues and three Spanish ones, built twice."""
    data = shared_data / "sites" / "python-docs"
    out = tmp_path_factory.mktemp("python-docs")
    for name in ("a", "b"):
        assert main(["build", "--out", str(out / name), "--pages", "3", "--data", str(data)]) == 0
    return out


def test_the_build_is_deterministic(built):
    a, b = _tree_digest(built / "a"), _tree_digest(built / "b")
    assert a == b and len(a) == 2 * 2 * 4 + 4 + 1  # 2 langs × 2 sides × (3 pages + index)


def _gold(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_layout_and_language_links(built):
    site = built / "a" / "site"
    pages = _gold(built / "a" / "gold" / "pages_en_fr.tsv")
    assert len(pages) == 4 and pages[0] == {
        "en_path": "en/3.13/index.html",
        "other_path": "fr/3.13/index.html",
    }
    assert {p["en_path"].split("/")[:2] == ["en", "3.13"] for p in pages} == {True}
    assert [p["en_path"][3:] for p in pages] == [p["other_path"][3:] for p in pages]
    assert (site / "en" / "3.12" / "index.html").is_file()  # Spanish pairs with 3.12
    assert (site / "es" / "3.12" / "index.html").is_file()
    for row in pages:
        for lang, path, other in (("en", row["en_path"], row["other_path"]),
                                  ("fr", row["other_path"], row["en_path"])):  # fmt: skip
            root = lxml.html.parse(str(site / path)).getroot()
            assert root.get("lang") == lang
            alternates = {
                e.get("hreflang"): e.get("href") for e in root.iterfind(".//link[@hreflang]")
            }
            assert alternates == {"en": "/" + row["en_path"], "fr": "/" + row["other_path"]}
            switch = root.cssselect("#language-switcher a")
            assert [a.get("href") for a in switch] == ["/" + other]
            assert root.cssselect("header") and root.cssselect("footer")
            assert root.cssselect("nav.sphinxsidebar a")  # the sidebar links other pages
    # The index links every page: a crawl from it reaches the whole site.
    index = lxml.html.parse(str(site / "fr" / "3.13" / "index.html")).getroot()
    linked = {a.get("href") for a in index.cssselect("[role=main] a")}
    assert linked == {"/" + p["other_path"] for p in pages[1:]}


def test_untranslated_entries_show_english_on_the_french_page(built):
    site = built / "a" / "site"
    rows = _gold(built / "a" / "gold" / "paragraphs_en_fr.tsv")
    assert {r["status"] for r in rows} == {"translated", "untranslated", "fuzzy"}
    for page in sorted({r["en_path"] for r in rows}):
        mine = [r for r in rows if r["en_path"] == page]
        shown = {}
        for lang in ("en", "fr"):
            root = lxml.html.parse(str(site / page.replace("en/", f"{lang}/", 1))).getroot()
            body = root.cssselect("[role=main]")[0]
            shown[lang] = [collapse(e.text_content()) for e in body if e.tag in ("p", "pre")]
        # The pages hold the gold's rendered text, paragraph by paragraph.
        assert shown["en"] == [r["en_text"] for r in mine]
        assert shown["fr"] == [r["other_text"] for r in mine]
        for r in mine:
            if r["status"] != "translated":
                assert r["other_text"] == r["en_text"]
    # Rendered text is free of reStructuredText roles.
    assert not any(re.search(r":[a-z]+:`", r["en_text"] + r["other_text"]) for r in rows)
    assert all(int(r["entry"]) >= 0 for r in rows)


def test_the_config_serves_the_built_site(built, tmp_path, monkeypatch):
    """configs/python-docs.yaml: two sites, one per language pair, in the folder the build makes."""
    cfg = yaml.safe_load((ROOT / "configs" / "python-docs.yaml").read_text())
    sites = {s["name"]: s for s in cfg["sites"]}
    assert set(sites) == {"python-docs-fr", "python-docs-es"}
    for lang, version in (("fr", "3.13"), ("es", "3.12")):
        site = sites[f"python-docs-{lang}"]
        assert site["languages"] == ["en", lang] and site["pairing"]["evidence"] == ["hreflang"]
        assert site["serve_dir"] == "build/python-docs/site"
        (start,) = site["start_urls"]
        assert urlsplit(start).path == f"/en/{version}/index.html"
        assert (built / "a" / "site" / urlsplit(start).path.lstrip("/")).is_file()
    # serve_dir is checked relative to the working folder: a checkout with the site built.
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "python-docs").symlink_to(built / "a")
    monkeypatch.chdir(tmp_path)
    validate_config(cfg)
