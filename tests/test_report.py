"""The yield report sums shard stats per site and stage and draws the funnel."""

import json

from parasim.report import sum_counts, write_report, yield_table


def _put(root, rel, d):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(d))


def test_yield_table_sums_shards_and_orders_the_funnel(tmp_path):
    _put(
        tmp_path,
        "crawl_site/s.json",
        {"pages_ok": 10, "pages_skipped_by_reason": {"http_404": 2}, "pages_per_s": 99.0},
    )
    _put(tmp_path, "pair_pages/s.json", {"pairs": {"fr": 3, "es": 1}})
    _put(tmp_path, "align_lines/s/000.json", {"positives": 5, "files_queued": 1, "seconds": 0.5})
    _put(tmp_path, "align_lines/s/001.json", {"positives": 7, "files_queued": 0})
    _put(tmp_path, "align_lines/other/000.json", {"positives": 1000})
    _put(tmp_path, "clean_positives/s.json", {"kept": 9, "dropped_identical": 3, "seconds": 0.1})
    rows = yield_table(tmp_path, ["s"])
    funnel = [(r["stage"], r["value"]) for r in rows if r["metric"].startswith("funnel")]
    assert funnel == [("crawl", 10), ("pairs", 4), ("aligned", 12), ("positives", 9)]
    metrics = {(r["stage"], r["metric"]): r["value"] for r in rows}
    assert metrics[("crawl", "pages_skipped_by_reason.http_404")] == 2
    assert metrics[("aligned", "files_queued")] == 1
    assert metrics[("positives", "dropped_identical")] == 3
    assert ("crawl", "pages_per_s") not in metrics and ("aligned", "seconds") not in metrics
    out = tmp_path / "out"
    out.mkdir()
    write_report(tmp_path, ["s"], out / "y.tsv", out / "y.json", out / "y.png")
    assert (out / "y.tsv").read_text().startswith("site\tstage\tmetric\tvalue\n")
    assert (out / "y.png").read_bytes()[:4] == b"\x89PNG"


def test_sum_counts_ignores_flags_and_text():
    assert sum_counts([{"a": 1, "b": True, "c": "x", "d": {"e": 2}}, {"a": 2, "d": {"e": 1}}]) == {
        "a": 3,
        "d": {"e": 3},
    }


def test_sum_counts_adds_counts_and_timings_but_not_rates_or_shares():
    got = sum_counts(
        [
            {"pairs": 3, "seconds": 1.5, "lines_per_s": 10.0, "kept_share": 0.5, "bleu": 20.1},
            {"pairs": 4, "seconds": 0.5, "lines_per_s": 30.0, "kept_share": 0.7, "bleu": 25.0},
        ]
    )
    assert got == {"pairs": 7, "seconds": 2.0}
