"""The `parasim` command: every stage is registered, errors are one line with exit status 2."""

import json

import pyarrow as pa
import pytest

from parasim.cli import build_parser, main
from parasim.io import PAIRS_SCHEMA, rows_to_table, write_table
from parasim.stats import Stats


def test_every_stage_has_a_command_and_its_older_name_still_works():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ["crawl-site", "pair-pages", "parse-pages", "translate-lines", "align-lines"]:
        assert name in sub.choices
    for new, old in [("make-divergences", "divergences"), ("clean-positives", "clean")]:
        assert sub.choices[old] is sub.choices[new]
    for name in ["summarize", "yield-report", "probe", "bench", "validate-config"]:
        assert name in sub.choices


def test_missing_input_is_one_line_and_exit_2(tmp_path, capsys):
    site = json.dumps(
        {"name": "s", "domain": "d", "languages": ["en", "fr"], "start_urls": ["http://a.b/"]}
    )
    missing = tmp_path / "nope"
    rc = main(
        [
            "pair",
            "--site-json",
            site,
            "--pages",
            str(missing),
            "--shards",
            "1",
            "--out",
            str(tmp_path / "p.parquet"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert f"pages dataset not found: {missing}" in err


def test_bad_site_json_names_the_key(tmp_path, capsys):
    site = json.dumps({"name": "s", "domain": "d", "languages": ["fr"], "start_urls": ["x"]})
    rc = main(["parse", "--site-json", site, "--pairs", "a", "--pages", "b", "--out", "c"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "sites[0].languages" in err and "sites[0].start_urls[0]" in err


def test_summarize_counts_rows_and_sums_stats(tmp_path):
    rows = [
        {
            "pair_id": f"p{i}",
            "site": "s",
            "domain": "d",
            "lang_pair": "en-fr",
            "en_url": "e",
            "other_url": "o",
            "other_lang": "fr",
            "evidence": ["toggle"],
            "shard": 0,
        }
        for i in range(3)
    ]
    write_table(rows_to_table(rows, PAIRS_SCHEMA), tmp_path / "000.parquet")
    write_table(pa.table({"pair_id": pa.array([], pa.string())}), tmp_path / "001.parquet")
    for i, n in enumerate([2, 5]):
        stats = Stats("pair", n + 1, n, {"no_evidence": 1}, {"by": {"x": n}}, figures={"r": 9.0})
        (tmp_path / f"{i}.json").write_text(json.dumps(stats.to_dict()))
    out = tmp_path / "s.done"
    rc = main(
        [
            "summarize",
            "--stage",
            "pair",
            "--site",
            "s",
            "--shards",
            str(tmp_path / "000.parquet"),
            str(tmp_path / "001.parquet"),
            "--stats",
            str(tmp_path / "0.json"),
            str(tmp_path / "1.json"),
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    done = json.loads(out.read_text())
    assert done["rows"] == 3 and done["shards"] == 2
    assert done["stats"]["pair"] == {
        "stage": "pair",
        "rows_in": 9,
        "rows_out": 7,
        "dropped": {"no_evidence": 2},
        "counts": {"by": {"x": 7}},
        "seconds": {},
        "figures": {},
    }


@pytest.mark.parametrize("cmd", ["crawl-site", "translate", "align-lines"])
def test_stage_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert "--stats" in capsys.readouterr().out


def test_summarize_fails_on_zero_rows_unless_allowed(tmp_path, capsys):
    write_table(rows_to_table([], PAIRS_SCHEMA), tmp_path / "000.parquet")
    (tmp_path / "0.json").write_text(json.dumps(Stats("parse").to_dict()))
    args = [
        "summarize",
        "--stage",
        "parse",
        "--site",
        "demo-x",
        "--shards",
        str(tmp_path / "000.parquet"),
        "--stats",
        str(tmp_path / "0.json"),
        "--out",
        str(tmp_path / "x.done"),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "0 rows from stage parse for site demo-x: the pair stage gave it nothing" in err
    assert not (tmp_path / "x.done").exists()
    assert main([*args, "--allow-empty"]) == 0


def test_summarize_names_an_unknown_stage_and_an_old_stats_file(tmp_path, capsys):
    write_table(rows_to_table([], PAIRS_SCHEMA), tmp_path / "000.parquet")
    (tmp_path / "0.json").write_text(json.dumps({"stage": "pairs", "pairs": {"fr": 0}}))
    args = ["summarize", "--site", "s", "--shards", str(tmp_path / "000.parquet")]
    args += ["--stats", str(tmp_path / "0.json"), "--out", str(tmp_path / "x.done")]
    assert main([*args, "--stage", "pairs"]) == 2
    assert "--stage: no stage 'pairs'; the stages: crawl, pair, parse" in capsys.readouterr().err
    assert main([*args, "--stage", "pair"]) == 2
    assert "not a parasim stats file (unknown keys ['pairs'])" in capsys.readouterr().err
