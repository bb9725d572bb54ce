"""The yield report sums shard stats per site and stage and draws the funnel."""

import json

from parasim.report import write_report, yield_table
from parasim.stats import Stats


def _put(root, rel, stats: Stats):
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(stats.to_dict()))


def test_yield_table_sums_shards_and_orders_the_funnel(tmp_path):
    crawl = Stats(
        "crawl", rows_in=12, rows_out=10, dropped={"http_404": 2}, figures={"pages_per_s": 99.0}
    )
    _put(tmp_path, "crawl_site/s.json", crawl)
    _put(tmp_path, "pair_pages/s.json", Stats("pair", 4, 4, counts={"pairs": {"fr": 3, "es": 1}}))
    _put(
        tmp_path,
        "align_lines/s/000.json",
        Stats("align", 2, 5, counts={"files_queued": 1}, seconds={"total": 0.5}),
    )
    _put(tmp_path, "align_lines/s/001.json", Stats("align", 3, 7, counts={"files_queued": 0}))
    _put(tmp_path, "align_lines/other/000.json", Stats("align", 9, 1000))
    clean = Stats("clean", 12, 9, dropped={"identical": 3}, seconds={"total": 0.1})
    _put(tmp_path, "clean_positives/s.json", clean)
    rows = yield_table(tmp_path, ["s"])
    funnel = [(r["stage"], r["value"]) for r in rows if r["metric"].startswith("funnel")]
    assert funnel == [("crawl", 10), ("pair", 4), ("align", 12), ("clean", 9)]
    metrics = {(r["stage"], r["metric"]): r["value"] for r in rows}
    assert metrics[("crawl", "dropped.http_404")] == 2 == metrics[("crawl", "dropped")]
    assert metrics[("pair", "pairs.fr")] == 3
    assert metrics[("align", "files_queued")] == 1 and metrics[("align", "rows_in")] == 5
    assert metrics[("clean", "dropped.identical")] == 3
    assert ("crawl", "pages_per_s") not in metrics and ("align", "total") not in metrics
    out = tmp_path / "out"
    out.mkdir()
    write_report(tmp_path, ["s"], out / "y.tsv", out / "y.json", out / "y.png")
    assert (out / "y.tsv").read_text().startswith("site\tstage\tmetric\tvalue\n")
    assert (out / "y.png").read_bytes()[:4] == b"\x89PNG"


def test_a_headline_from_the_counts_sums_its_breakdown(tmp_path):
    translate = Stats("translate", 4, 4, counts={"translated": 30, "lines": 40})
    _put(tmp_path, "translate_lines/s/000.json", translate)
    _put(tmp_path, "translate_lines/s/001.json", translate)
    rows = yield_table(tmp_path, ["s"])
    assert rows[0] == {
        "site": "s",
        "stage": "translate",
        "metric": "funnel: lines translated",
        "value": 60,
    }
