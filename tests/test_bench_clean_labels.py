"""`parasim bench clean_labels`: the pool, the stratified draw and the weighted scores."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.bench import clean_labels as cl


def _row(i, en, other, reason=None):
    r = {
        "site": "s",
        "lang_pair": "en-fr",
        "en_url": f"https://s/{i % 3}-en",
        "other_url": f"https://s/{i % 3}-fr",
        "en_idx": [i],
        "other_idx": [i],
        "en_text": en,
        "other_text": other,
    }
    return r if reason is None else {**r, "reason": reason}


def _run(folder, kept, dropped):
    for sub, rows in (("positives", kept), ("dropped", dropped)):
        (folder / sub / "s").mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), folder / sub / "s" / "000.parquet")
    return folder


KEPT = [
    _row(0, "Search", "Rechercher"),
    _row(1, "Date modified:", "Signaler un problème"),
    *[_row(i, f"filler {i}", f"remplissage {i}") for i in range(2, 10)],
]
DROPPED = [
    _row(10, "Description", "Description", "identical"),
    _row(11, "Download", "Download", "identical"),
    _row(12, "Jane Doe", "Jane Doe", "identical"),
    _row(13, "v4.0", "v4.0", "identical"),
    _row(14, "Search", "Rechercher", "duplicate"),  # another page: kept once elsewhere
]
# label, sub-reason per text pair; the unlabelled pool rows only weigh
LABEL = {
    ("Search", "Rechercher", 0): ("translation", "short"),
    ("Date modified:", "Signaler un problème", 1): ("not_translation", "misaligned"),
    ("Description", "Description", 10): ("translation", "same_form"),
    ("Download", "Download", 11): ("not_translation", "untranslated"),
    ("Search", "Rechercher", 14): ("translation", "short"),
}


@pytest.fixture
def labelled(tmp_path):
    results = _run(tmp_path / "main", KEPT, DROPPED)
    units = cl.pool(results, ["s"])
    assert len(units) == 15
    rows = []
    for r in KEPT[:2] + DROPPED[:2] + DROPPED[4:]:
        k = cl.unit_key(r["en_url"], r["other_url"], r["en_text"], r["other_text"])
        lab, sub = LABEL[(r["en_text"], r["other_text"], r["en_idx"][0])]
        rows.append(
            {**units[k], "key": k, "stratum": units[k]["decision"], "label": lab, "sub_reason": sub}
        )
    strata = [
        {"site": "s", "stratum": "kept", "pool": 10, "drawn": 2},
        {"site": "s", "stratum": "identical", "pool": 4, "drawn": 2},
        {"site": "s", "stratum": "duplicate", "pool": 1, "drawn": 1},
    ]
    cl.write_tsv(tmp_path / "labels.tsv", rows, cl.COLUMNS, "a tiny constructed sample")
    cl.write_tsv(tmp_path / "strata.tsv", strata, ("site", "stratum", "pool", "drawn"))
    return tmp_path


def test_pool_keys_and_decisions(tmp_path):
    units = cl.pool(_run(tmp_path, KEPT, DROPPED), ["s"])
    decisions = sorted(u["decision"] for u in units.values())
    assert decisions == ["duplicate"] + ["identical"] * 4 + ["kept"] * 10
    # the key is the two URLs and the two texts: the row id and line index play no part
    r = KEPT[0]
    assert cl.unit_key(r["en_url"], r["other_url"], r["en_text"], r["other_text"]) in units
    assert cl.unit_key(r["en_url"], r["other_url"], r["en_text"], "Chercher") not in units


def test_allocation_and_draw_are_stratified_and_seeded(tmp_path):
    assert cl.allocate({"a": 1000, "b": 40, "c": 4}, n=100, floor=15) == {"a": 96, "b": 15, "c": 4}
    units = cl.pool(_run(tmp_path, KEPT, DROPPED), ["s"])
    rows, strata = cl.draw(units, n=6, floor=3, seed=33)
    assert {(s["stratum"], s["pool"], s["drawn"]) for s in strata} == {
        ("kept", 10, 4),
        ("identical", 4, 3),
        ("duplicate", 1, 1),
    }
    assert [r["key"] for r in rows] == [r["key"] for r in cl.draw(units, 6, 3, 33)[0]]
    assert [r["key"] for r in rows] != [r["key"] for r in cl.draw(units, 6, 3, 34)[0]]


def test_a_fixed_number_of_kept_units_and_the_rest_dropped(tmp_path):
    units = cl.pool(_run(tmp_path / "run", KEPT, DROPPED), ["s"])
    rows, strata = cl.draw(units, n=3, floor=1, seed=51, kept=7)
    drawn = {s["stratum"]: s["drawn"] for s in strata}
    # the kept stratum gets its 7; the dropped strata share 3 (4:1 by size, floor 1)
    assert drawn == {"kept": 7, "identical": 3, "duplicate": 1}
    assert sum(r["stratum"] == "kept" for r in rows) == 7
    # the command writes the sample and its own strata file beside it, not strata.tsv
    out = tmp_path / "sample.tsv"
    cl.main(["draw", "--results", str(tmp_path / "run"), "--sites", "s", "--n", "3",
             "--floor", "1", "--kept", "7", "--seed", "51", "--out", str(out)])  # fmt: skip
    assert not (tmp_path / "strata.tsv").exists()
    assert cl.strata_path(out) == tmp_path / "sample-strata.tsv"
    assert "--kept 7" in out.read_text(encoding="utf-8").splitlines()[0]
    strata_sizes = {r["stratum"]: int(r["pool"]) for r in cl.read_tsv(cl.strata_path(out))}
    assert strata_sizes == {"kept": 10, "identical": 4, "duplicate": 1}
    # labelled, the sample is scored against its own strata
    labelled_rows = [{**r, "label": "translation", "sub_reason": "full"} for r in
                     cl.read_tsv(out)]  # fmt: skip
    cl.write_tsv(out, labelled_rows, cl.COLUMNS)
    rows_, sizes = cl.load_labels(out)
    assert len(rows_) == 11 and sizes[("s", "kept")] == 10


def test_weighted_precision_and_recall(labelled):
    res = cl.score(labelled / "main", labelled / "labels.tsv", reps=200)
    # kept: 2 labelled of 10 (weight 5), one real -> precision 5 / 10
    assert res["all"]["precision"] == 0.5
    # real: kept 5 + duplicate 1 (kept elsewhere) of kept 5 + identical 2 + duplicate 1
    assert res["all"]["recall"] == 0.75
    assert res["all"]["real_in_pool_estimate"] == 8
    assert res["by_decision"]["identical"]["real"] == 1
    assert res["by_decision"]["identical"]["real_share_ci95"] == cl.wilson(1, 2)
    lo, hi = res["all"]["recall_ci95"]
    assert lo <= 0.75 <= hi
    # the identical copy that is a right translation left out: nothing real is lost
    res = cl.score(labelled / "main", labelled / "labels.tsv", exclude=["same_form"], reps=200)
    assert res["all"]["recall"] == 1.0 and res["excluded"] == {"same_form": 1}


def test_another_run_is_joined_by_key(labelled):
    # a new clean decision keeps "Description" and loses the kept "Search" to the aligner
    kept = [r for r in KEPT if r["en_text"] != "Search"] + [
        {k: v for k, v in DROPPED[0].items() if k != "reason"}
    ]
    other = _run(labelled / "new", kept, DROPPED[1:])
    res = cl.score(other, labelled / "labels.tsv", reps=200)
    assert res["absent_from_run"] == 1
    assert res["by_decision"]["absent"]["real"] == 1
    # kept now: "Date modified" (weight 5, not real) and "Description" (weight 2, real)
    assert res["all"]["precision"] == round(2 / 7, 4)
    # real: duplicate 1 + Description 2 kept, Search 5 lost (absent)
    assert res["all"]["recall"] == 0.375


def test_a_translation_aligned_otherwise_is_held_by_the_kept_unit_that_nests_it(labelled):
    # the next run merges the heading into "Search" on the same page pair: the labelled unit is
    # absent (lost for `recall`) but a kept unit holds it on both sides (saved for `recall_held`)
    merged = {**KEPT[0], "en_text": "Site Search", "other_text": "Rechercher dans le site"}
    too_long = {**KEPT[1], "en_text": "Date modified: 2024-01-01 and a much longer line"}
    other = _run(labelled / "new", [merged, too_long, *KEPT[2:]], DROPPED)
    res = cl.score(other, labelled / "labels.tsv", reps=200)
    assert res["absent_from_run"] == 2
    assert res["all"]["recall"] == round(1 / 8, 4)  # only the duplicate "Search" (weight 1)
    # + "Search" (weight 5): "Search" in "Site Search", "Rechercher" in "Rechercher dans le site"
    # (10 of 23 characters: under half, so not held)
    assert res["all"]["real_held"] == 0
    held = {**KEPT[0], "en_text": "Site Search", "other_text": "Rechercher site"}
    other = _run(labelled / "new2", [held, too_long, *KEPT[2:]], DROPPED)
    res = cl.score(other, labelled / "labels.tsv", reps=200)
    assert res["all"]["recall"] == round(1 / 8, 4)
    assert res["all"]["recall_held"] == 0.75 and res["all"]["real_held"] == 1
    assert res["by_decision"]["absent"]["real_held"] == 1
    # a not-real unit held by a kept one changes nothing; precision joins by key only
    assert res["all"]["precision"] is None and res["all"]["kept_labelled"] == 0
    # with the labels' own run both recalls agree
    res = cl.score(labelled / "main", labelled / "labels.tsv", reps=200)
    assert res["all"]["recall_held"] == res["all"]["recall"] == 0.75


def test_unlabelled_rows_are_an_error(labelled):
    rows = cl.read_tsv(labelled / "labels.tsv")
    rows[0]["label"] = ""
    cl.write_tsv(labelled / "labels.tsv", rows, cl.COLUMNS)
    with pytest.raises(SystemExit, match="without a label"):
        cl.score(labelled / "main", labelled / "labels.tsv")


def test_the_command_prints_json(labelled, capsys):
    cl.main(
        [
            "score",
            "--results",
            str(labelled / "main"),
            "--labels",
            str(labelled / "labels.tsv"),
            "--reps",
            "50",
        ]
    )
    res = json.loads(capsys.readouterr().out)
    assert res["by_lang_pair"]["en-fr"]["precision"] == 0.5


def test_the_effective_size_interval_is_not_degenerate():
    # every labelled unit agrees: the bootstrap collapses to a point, Wilson's does not
    units = [{"w": 10.0, "real": True} for _ in range(15)]
    lo, hi = cl._wilson_eff(units, "real")
    assert hi == 1.0 and 0.75 < lo < 0.85 and (lo, hi) == cl.wilson(15, 15)
    # unequal weights shrink the effective size: a wider interval than 15 equal ones
    units = [{"w": 100.0 if i < 3 else 1.0, "real": True} for i in range(15)]
    assert cl._wilson_eff(units, "real")[0] < lo


def test_a_change_is_judged_on_what_it_gained_and_lost(tmp_path):
    """Two runs: the units kept only after (gained) and only before (lost) are drawn, seeded;
    a unit dropped as a duplicate of a kept one counts as kept on either side."""
    before = _run(tmp_path / "before", KEPT, DROPPED)
    gained_rows = [_row(20, "Numbers", "Les nombres"), _row(21, "Jane", "Jane Doe")]
    after_kept = [r for r in KEPT if r["en_text"] != "filler 9"] + gained_rows
    after_dropped = [*DROPPED, _row(9, "filler 9", "remplissage 9", "duplicate")]
    after = _run(tmp_path / "after", after_kept, [*after_dropped, _row(1, "x", "y", "identical")])
    base_units, after_units = cl.pool(before, ["s"]), cl.pool(after, ["s"])
    gained, lost = cl.changed_units(base_units, after_units)
    assert sorted(after_units[k]["en_text"] for k in gained) == ["Jane", "Numbers"]
    assert lost == []  # filler 9 is dropped as a duplicate: kept elsewhere
    after2 = _run(tmp_path / "after2", KEPT[2:] + gained_rows, DROPPED)
    gained, lost = cl.changed_units(base_units, cl.pool(after2, ["s"]))
    assert sorted(base_units[k]["en_text"] for k in lost) == ["Date modified:", "Search"]
    rows, strata = cl.draw_changes(base_units, cl.pool(after2, ["s"]), n=1, seed=34)
    assert [r["stratum"] for r in rows] == ["gained", "lost"]
    assert strata == [
        {"site": "s", "stratum": "gained", "pool": 2, "drawn": 1},
        {"site": "s", "stratum": "lost", "pool": 2, "drawn": 1},
    ]
    assert rows == cl.draw_changes(base_units, cl.pool(after2, ["s"]), n=1, seed=34)[0]
    # labelled: the gained one real, the lost one real -> net 2 - 2 real, noise 0 - 0
    for r in rows:
        r["label"], r["sub_reason"] = "translation", "short"
    cl.write_tsv(tmp_path / "ch.tsv", rows, cl.COLUMNS)
    cl.write_tsv(tmp_path / "ch-strata.tsv", strata, ("site", "stratum", "pool", "drawn"))
    res = cl.score_changes(tmp_path / "ch.tsv")
    assert res["gained"]["real_units"] == 2 and res["lost"]["real_units"] == 2
    assert res["net"]["real"] == 0 and res["net"]["noise"] == 0
    assert res["gained"]["real_units_ci95"][0] < 2 <= res["gained"]["real_units_ci95"][1]
