"""Typed stats (parasim.stats): explicit rows and drops by reason, added up by field, not by key."""

import json

import numpy as np
import pytest

from parasim.stats import Stats, done_summary


def test_the_json_form_reads_back():
    s = Stats(
        "clean",
        site="s",
        rows_in=10,
        rows_out=7,
        dropped={"length_ratio": 2, "duplicate": 1},
        counts={"page_pairs": 3, "by": {"x": np.int64(4)}},
        seconds={"total": 0.25},
        figures={"pairs_per_s": 40.0, "note": "x"},
    )
    back = Stats.from_dict(json.loads(json.dumps(s.to_dict())))
    assert back == s and back.n_dropped == 3
    assert list(s.to_dict()) == [
        "stage", "site", "rows_in", "rows_out", "dropped", "counts", "seconds", "figures"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"counts": {"lines_per_s": 3.5}}, "counts.lines_per_s: a count must be an integer"),
        ({"counts": {"flag": True}}, "counts.flag: a count must be an integer"),
        ({"dropped": {"too_long": -1}}, "dropped.too_long: a count cannot be negative"),
        ({"seconds": {"total": "1s"}}, "seconds.total: a timing must be a number"),
        ({"counts": {"rows_in": 3}}, "counts may not be named ['rows_in']"),
    ],
)
def test_a_figure_in_the_wrong_field_is_an_error(kw, message):
    with pytest.raises((TypeError, ValueError), match=message.replace("[", r"\[")):
        Stats("x", **kw)


def test_total_adds_rows_reasons_counts_and_timings_but_not_figures():
    a = Stats("parse", 5, 3, {"empty_side": 2}, {"lines": {"en": 4}}, {"total": 0.1}, {"r": 1.0})
    b = Stats("parse", 4, 4, {"parse_error": 0}, {"lines": {"en": 1, "other": 2}}, {"total": 0.2})
    t = Stats.total([a, b])
    assert (t.rows_in, t.rows_out) == (9, 7)
    assert t.dropped == {"empty_side": 2, "parse_error": 0}
    assert t.counts == {"lines": {"en": 5, "other": 2}}
    assert t.seconds == {"total": 0.3} and t.figures == {}
    with pytest.raises(ValueError, match="one stage at a time"):
        Stats.total([a, Stats("clean")])


def test_an_old_stats_file_names_itself():
    with pytest.raises(ValueError, match="older parasim"):
        Stats.from_dict({"stage": "clean", "kept": 3, "dropped_length_ratio": 1}, "x.json")


def test_done_summary_adds_up_each_stage_apart():
    own = [Stats("align", 2, 5), Stats("align", 1, 1, {"error": 1}), Stats("clean", 6, 4, {"a": 2})]
    d = done_summary("clean", "s", 2, 4, own)
    assert d["rows"] == 4 and list(d["stats"]) == ["align", "clean"]
    assert d["stats"]["align"]["rows_out"] == 6 and d["stats"]["align"]["dropped"] == {"error": 1}


def test_a_recorder_builds_the_stats_a_stage_writes():
    from parasim.stats import Recorder

    rec = Recorder("parse", site="s")
    rec.rows_in += 5
    rec.drop("missing_page")
    rec.drop("missing_page", 2)
    rec.drop("empty_side", 0)  # a reason counted zero times is still named
    rec.count("selector_used", 2)
    rec.count("lines", {"en": {"kept": 3}, "fr": {"kept": 1}})
    rec.count("lines", {"en": {"kept": 2, "few_words": 1}})
    rec.rows_out = 2
    rec.seconds("parse", 0.5)
    rec.seconds("parse", 0.25)
    with rec.time("write"):
        pass
    rec.figure("pairs_per_s", 4.0)
    s = rec.stats()
    assert (s.stage, s.site, s.rows_in, s.rows_out) == ("parse", "s", 5, 2)
    assert s.dropped == {"missing_page": 3, "empty_side": 0}
    assert s.counts == {
        "selector_used": 2,
        "lines": {"en": {"kept": 5, "few_words": 1}, "fr": {"kept": 1}},
    }
    assert s.seconds["parse"] == 0.75 and s.seconds["write"] >= 0
    assert s.figures == {"pairs_per_s": 4.0}
    assert rec.counted("selector_used") == 2 and rec.dropped("missing_page") == 3
    assert rec.counted("never") == 0


def test_a_recorder_copies_what_it_is_given_and_checks_counts():
    from parasim.stats import Recorder

    rec = Recorder("x")
    given = {"a": {"b": 1}}
    rec.count("m", given)
    rec.count("m", given)
    assert given == {"a": {"b": 1}} and rec.counted("m") == {"a": {"b": 2}}
    with pytest.raises(TypeError, match="count share: a count must be an integer"):
        rec.count("share", 0.5)
    with pytest.raises(ValueError, match="drop bad: a count cannot be negative"):
        rec.drop("bad", -1)
    with pytest.raises(ValueError, match=r"counts may not be named \['rows_in'\]"):
        rec.count("rows_in", 1)
        rec.stats()
