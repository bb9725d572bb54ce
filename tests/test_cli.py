"""The `parasim` command: every stage is registered, errors are one line with exit status 2."""

import json

import pyarrow as pa
import pytest

from parasim.cli import build_parser, main
from parasim.io import PAIRS_SCHEMA, rows_to_table, write_table


def test_every_stage_has_a_command():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in ["crawl", "pair", "parse", "translate", "align", "summarize", "validate-config"]:
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
        (tmp_path / f"{i}.json").write_text(json.dumps({"kept": n, "by": {"x": n}, "r_per_s": 9}))
    out = tmp_path / "s.done"
    rc = main(
        [
            "summarize",
            "--stage",
            "pairs",
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
    assert done["counts"] == {"kept": 7, "by": {"x": 7}}


@pytest.mark.parametrize("cmd", ["crawl", "translate", "align"])
def test_stage_help(cmd, capsys):
    with pytest.raises(SystemExit) as e:
        main([cmd, "--help"])
    assert e.value.code == 0
    assert "--stats" in capsys.readouterr().out


def test_summarize_fails_on_zero_rows_unless_allowed(tmp_path, capsys):
    write_table(rows_to_table([], PAIRS_SCHEMA), tmp_path / "000.parquet")
    (tmp_path / "0.json").write_text(json.dumps({"pairs_in": 0}))
    args = [
        "summarize",
        "--stage",
        "lines",
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
    assert "0 rows from stage lines for site demo-x: the pairs stage gave it nothing" in err
    assert not (tmp_path / "x.done").exists()
    assert main([*args, "--allow-empty"]) == 0
