"""The yield report sums shard stats per site and stage and draws the funnel."""

import json

from parasim.io import LINES_SCHEMA, rows_to_table
from parasim.report import write_report, yield_table
from parasim.stats import Recorder, Stats
from parasim.translate import TranslationCache, Translator, translate_lines


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
    translate = Stats("translate", 4, 4, counts={"lines_translated": 30, "lines": 40})
    _put(tmp_path, "translate_lines/s/000.json", translate)
    _put(tmp_path, "translate_lines/s/001.json", translate)
    rows = yield_table(tmp_path, ["s"])
    assert rows[0] == {
        "site": "s",
        "stage": "translate",
        "metric": "funnel: lines translated",
        "value": 60,
    }


class _Upper(Translator):
    name = "upper"

    def supports(self, src_lang: str) -> bool:
        return True

    def model_id(self, src_lang: str) -> str:
        return "v1"

    def translate_batch(self, lines, src_lang):
        return [line.upper() for line in lines]


def _translated_stats(cache: TranslationCache) -> Stats:
    row = {
        "pair_id": "p1", "site": "s", "domain": "d", "lang_pair": "en-fr", "en_url": "https://x/e",
        "other_url": "https://x/f", "other_lang": "fr", "en_lines": ["a", "b", "c"],
        "other_lines": ["Bonjour", "Menu", "Menu"], "n_en": 3, "n_other": 3,
        "equal_lines": True, "selector_used": False,
    }  # fmt: skip
    rec = Recorder("translate")
    translate_lines(rows_to_table([row], LINES_SCHEMA), _Upper(), cache, rec=rec)
    return rec.stats()


def _scores(parsed: int, cached: int) -> Stats:
    return Stats(
        "scores", 10, 10,
        counts={"pairs_scored": 10, "sentences_parsed": parsed, "sentences_cached": cached,
                "sentences_failed": 1},
    )  # fmt: skip


def test_counts_of_what_a_shared_cache_saved_stay_out_of_the_report(tmp_path):
    """Two runs of one input, one on a cold cache and one on a warm cache (or with its jobs in
    another order: which score shard parses a shared sentence first), give the same report; the
    translate headline counts the lines that came out translated, not the calls to the backend."""
    reports = []
    with TranslationCache(tmp_path / "c.sqlite") as cache:
        for k, (parsed, cached) in enumerate([(20, 0), (12, 8)]):
            root = tmp_path / f"run{k}"
            st = _translated_stats(cache)
            assert (st.counts["translated"], st.counts["cache_hits"]) == [(2, 0), (0, 2)][k]
            _put(root, "translate_lines/s/000.json", st)
            _put(root, "score_pairs/s/000.json", _scores(parsed, cached))
            reports.append(yield_table(root, ["s"]))
    assert reports[0] == reports[1]
    metrics = {(r["stage"], r["metric"]): r["value"] for r in reports[0]}
    assert metrics[("translate", "funnel: lines translated")] == 3
    assert metrics[("translate", "lines_translated")] == 3
    assert metrics[("scores", "sentences_failed")] == 1
    left_out = {"cache_hits", "translated", "backend_calls", "retries", "resplits"}
    left_out |= {"sentences_parsed", "sentences_cached"}
    assert not left_out & {m for _, m in metrics}


def test_stats_of_an_older_translate_stage_leave_its_headline_out(tmp_path):
    """Stats written before ``lines_translated`` existed: no funnel row, rather than a 0."""
    _put(tmp_path, "translate_lines/s/000.json", Stats("translate", 4, 4, counts={"lines": 9}))
    rows = yield_table(tmp_path, ["s"])
    assert not [r for r in rows if r["metric"].startswith("funnel")]
    assert {"site": "s", "stage": "translate", "metric": "lines", "value": 9} in rows


# ---------------------------------------------------------------- `parasim summarize --extra`


def _summarize(tmp_path, stage: str, shards: list[int], stats: list[Stats], *extra: str) -> int:
    """`parasim summarize` of ``stage`` over shards (of the scores schema) of these many rows."""
    from parasim.cli import main
    from parasim.io import SCORES_SCHEMA, write_table

    paths, files = [], []
    for k, (n, s) in enumerate(zip(shards, stats, strict=True)):
        paths.append(str(tmp_path / f"{k:03d}.parquet"))
        row = {"source": "positive", "en_text": "a", "other_text": "b", "chrf": 50.0}
        rows = [{**row, "id": f"r{k}-{i}"} for i in range(n)]
        write_table(rows_to_table(rows, SCORES_SCHEMA), paths[-1])
        _put(tmp_path, f"{k}.json", s)
        files.append(str(tmp_path / f"{k}.json"))
    argv = ["summarize", "--stage", stage, "--site", "s", "--shards", *paths, "--stats", *files]
    return main([*argv, "--out", str(tmp_path / "s.done"), "--allow-empty", *extra])


def test_summarize_writes_the_stage_extras(tmp_path):
    png = tmp_path / "plot" / "d.png"
    png.parent.mkdir()
    stats = [Stats("scores", 2, 2), Stats("scores", 0, 0)]
    assert _summarize(tmp_path, "scores", [2, 0], stats, "--extra", f"png={png}") == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    done = json.loads((tmp_path / "s.done").read_text())
    assert done["rows"] == 2 and done["stats"]["scores"]["rows_out"] == 2


def test_summarize_finds_stale_stats_of_a_per_shard_stage(tmp_path, capsys):
    stats = [Stats("parse", 3, 3), Stats("parse", 1, 1)]
    assert _summarize(tmp_path, "parse", [3, 2], stats) == 2
    err = capsys.readouterr().err
    assert "1.json: says 1 rows but" in err and "001.parquet has 2 (stale stats?)" in err
    assert not (tmp_path / "s.done").exists()
    # a per-site stage's one stats file is of every shard: not checked shard by shard
    assert _summarize(tmp_path, "pair", [3], [Stats("pair", 9, 9)]) == 0


def test_summarize_names_the_known_extras_of_a_stage(tmp_path, capsys):
    stats = [Stats("parse", 1, 1)]
    assert _summarize(tmp_path, "parse", [1], stats, "--extra", "card=x.md") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith("--extra card: stage parse has no such extra (none)")
    assert _summarize(tmp_path, "scores", [1], [Stats("scores", 1, 1)], "--extra", "x=y") == 2
    assert "stage scores has no such extra (png)" in capsys.readouterr().err


def test_every_done_extra_resolves_and_its_done_rule_asks_for_it():
    import importlib
    from pathlib import Path

    from parasim import stages

    rules = Path(__file__).resolve().parents[1] / "workflow" / "rules"
    text = "\n".join(p.read_text() for p in sorted(rules.glob("*.smk")))
    for s in stages.STAGES:
        for name, target in s.done_extras.items():
            module, _, function = target.partition(":")
            assert callable(getattr(importlib.import_module(module), function)), target
            assert f"--stage {s.name} " in text and f"--extra {name}=" in text, s.name
