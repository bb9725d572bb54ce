"""The one way a stage command runs (parasim.stagecli): its recorder, its stats, its errors."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.io import PAIRS_SCHEMA
from parasim.stagecli import UsageError, read_input, stage_job


def test_a_job_writes_the_stats_its_function_recorded(tmp_path):
    out = tmp_path / "stats" / "job.json"
    with stage_job("parse", str(out), site="s") as rec:
        rec.rows_in += 3
        rec.rows_out += 2
        rec.drop("missing_page")
    d = json.loads(out.read_text())
    assert (d["stage"], d["site"], d["rows_in"], d["rows_out"]) == ("parse", "s", 3, 2)
    assert d["dropped"] == {"missing_page": 1}


def test_a_failed_job_leaves_no_stats_and_names_its_input(tmp_path):
    out = tmp_path / "job.json"
    error = pytest.raises(UsageError, match=r"^in\.parquet: no column 'x'$")
    with error, stage_job("parse", str(out), culprit="in.parquet") as rec:
        rec.rows_in += 1
        raise ValueError("no column 'x'")
    assert not out.exists()
    # without a culprit: not a user's error
    with pytest.raises(ValueError, match="a bug"), stage_job("parse", str(out)):
        raise ValueError("a bug")
    assert not out.exists()


def test_an_input_is_read_or_named_in_one_sentence(tmp_path):
    with pytest.raises(UsageError, match="pairs shard not found: .*nope.parquet"):
        read_input(tmp_path / "nope.parquet", "pairs shard")
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.table({"pair_id": ["a"]}), bad)
    with pytest.raises(UsageError, match=r"bad.parquet: not a pairs shard \(no column site, "):
        read_input(bad, "pairs shard", schema=PAIRS_SCHEMA)
    assert read_input(bad, "pairs shard", columns=["pair_id"], schema=PAIRS_SCHEMA).num_rows == 1
    junk = tmp_path / "junk.parquet"
    junk.write_text("not parquet")
    with pytest.raises(UsageError, match="junk.parquet: cannot read the pairs shard"):
        read_input(junk, "pairs shard")


def test_required_columns_are_checked_but_everything_is_read(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"id": ["a"], "x": [1]}), path)
    assert read_input(path, "positives shard", require=["id"]).column_names == ["id", "x"]
    with pytest.raises(UsageError, match=r"t.parquet: not a positives shard \(no column en_text\)"):
        read_input(path, "positives shard", require=["id", "en_text"])
