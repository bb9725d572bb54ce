"""`parasim bench mined_labels` (the false-negative sample and its score) and `bench mine`'s
page-pair subsets."""

from __future__ import annotations

import pyarrow as pa
import pytest

from parasim.bench import mined_labels
from parasim.bench.mine import _subset
from parasim.io import CORPUS_SCHEMA, write_table


def corpus_rows(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        kind = "mined" if i % 2 else "synthetic"
        rows.append({"id": f"r{i:03d}", "sentence1": f"Added in version 3.{i}.",
                     "sentence2": f"Nouveau dans la version 3.{i + 1}.", "label": 0,
                     "lang_pair": "en-fr", "partition": "P", "domain": "d", "site": f"s{i % 3}",
                     "source": f"{kind}-divergence", "pair_id": "p", "pair_id2": "p",
                     "url1": "u", "url2": "v", "idx1": [i], "idx2": [i], "split": "train",
                     "fold": 0, "grade": "divergent", "negative_kind": kind,
                     "diff_kind": "version", "mined_similarity": 0.8})  # fmt: skip
    return rows


def test_sample_draws_mined_rows_only_and_score_counts_translations(tmp_path, capsys):
    write_table(pa.Table.from_pylist(corpus_rows(40), schema=CORPUS_SCHEMA),
                tmp_path / "c" / "data" / "P" / "train-00000-of-00001.parquet")  # fmt: skip
    out = tmp_path / "sample.tsv"
    assert mined_labels.main(["sample", "--corpus", str(tmp_path / "c"), "--n", "10",
                              "--seed", "1", "--out", str(out)]) == 0  # fmt: skip
    picked = mined_labels._read_tsv(out)
    assert len(picked) == 10 and len({r["id"] for r in picked}) == 10
    assert all(int(r["id"][1:]) % 2 == 1 for r in picked)  # mined rows only
    again = tmp_path / "again.tsv"
    mined_labels.sample([tmp_path / "c"], 10, 1, again)
    assert again.read_text() == out.read_text()  # seeded
    labels = tmp_path / "labels.tsv"
    lines = ["id\tlabel\tsub_reason\tnote"]
    for k, r in enumerate(picked):
        label = "translation" if k < 2 else "unclear" if k == 2 else "divergent"
        lines.append(f"{r['id']}\t{label}\tversion\t")
    labels.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = mined_labels.score(out, labels)
    assert got["all"]["translation"] == 2 and got["all"]["labelled"] == 9
    assert got["all"]["share"] == round(2 / 9, 4) and got["all"]["wilson95"][0] > 0
    assert got["labels"]["unclear"] == 1 and set(got["by_site"]) <= {"s0", "s1", "s2"}


def test_bench_mine_subset_keeps_whole_page_pairs():
    rows = [{"pair_id": f"p{k}", "id": f"{k}-{i}"} for k in range(8) for i in range(3)]
    t = pa.Table.from_pylist(rows)
    quarter = _subset(t, 0.25, 0)
    pairs = set(quarter.column("pair_id").to_pylist())
    assert len(pairs) == 2 and quarter.num_rows == 6
    assert _subset(t, 0.25, 0).equals(quarter) and _subset(t, 1.0, 0) is t


def test_bench_mine_names_a_failed_run_instead_of_waiting_for_it(tmp_path):
    from parasim.bench.mine import main, measure

    with pytest.raises(SystemExit, match="positives not found"):
        main(["--positives", str(tmp_path / "none")])
    bad = tmp_path / "000.parquet"
    bad.write_text("not parquet")
    with pytest.raises(SystemExit, match="fraction 1.0 failed"):
        measure([str(bad)], [1.0], 0, {}, {})
