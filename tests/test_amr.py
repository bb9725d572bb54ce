"""Tests of parasim.amr: graphs, the 15 aspects, the rules parser, the cache, entity features."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import penman
import pytest

from parasim.amr import (
    ASPECTS,
    ParseCache,
    Parser,
    ParseSettings,
    aspect_scores,
    bm25_in_groups,
    count_cosine,
    entity_features,
    load_english,
    parse_sentences,
    read_graph,
    read_graphs_file,
    score_graph_pairs,
    smatch_counts,
    smatch_f1,
    wlk,
    wwlk,
)
from parasim.amr.vectors import hash_vectors, label_words

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"
GOLD = SHARED / "amr" / "little-prince-v1.6-training.amr"

WANT_GO = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-01 :ARG0 b))"
WANT_GO_NO_REENTRANCY = "(w / want-01 :ARG0 (b / boy) :ARG1 (g / go-01))"
HAND_GRAPHS = [
    WANT_GO,
    WANT_GO_NO_REENTRANCY,
    '(v / visit-01 :ARG0 (p / person :name (n / name :op1 "John" :op2 "Smith")) '
    ':ARG1 (c / city :name (n2 / name :op1 "Paris")) :time (d / date-entity :year 2020))',
    "(l / like-01 :polarity - :ARG0 (i / i) :ARG1 (s / sheep :quant 3))",
    "(a / and :op1 (s / see-01 :ARG0 (i / i)) :op2 (h / hear-01 :ARG0 i))",
    "(d / dog)",
]


@pytest.fixture(scope="module")
def vectors():
    return hash_vectors()


@pytest.fixture(scope="module")
def nlp():
    try:
        return load_english()
    except RuntimeError as exc:
        pytest.skip(str(exc))


# --------------------------------------------------------------------------- graphs and metrics


def test_read_graph_normalises_inverse_roles_domain_and_case():
    g = read_graph('(m / Man :ARG0-of (s / see-01) :domain (t / tall) :name (n / name :op1 "Bob"))')
    assert g.top == "m"
    assert g.concepts == {"m": "man", "s": "see-01", "t": "tall", "n": "name"}
    assert ("s", ":ARG0", "m") in g.relations
    assert ("t", ":mod", "m") in g.relations
    assert ("n", ":op1", "bob") in g.attributes
    with pytest.raises(ValueError, match="not a Penman graph"):
        read_graph("(a / b")


@pytest.mark.parametrize("text", HAND_GRAPHS)
def test_every_aspect_of_a_graph_against_itself_is_one(text, vectors):
    scores = aspect_scores(text, text, vectors)
    assert list(scores) == list(ASPECTS)
    assert scores == dict.fromkeys(ASPECTS, 1.0)


def test_known_values_of_a_reentrancy_pair(vectors):
    s = aspect_scores(WANT_GO, WANT_GO_NO_REENTRANCY, vectors)
    # 7 triples against 6 (3 instances, the root, 3 or 2 relations); 6 match
    assert s["smatch"] == pytest.approx(12 / 13, abs=1e-6)
    assert s["unlabeled"] == pytest.approx(12 / 13, abs=1e-6)
    assert s["coreference"] == 0.0  # only the first graph has a reentrancy
    # ARG relations with their nodes' concepts: 3 + 3 against 2 + 3, 5 match
    assert s["srl"] == pytest.approx(10 / 11, abs=1e-6)
    assert s["frames"] == s["concepts"] == 1.0
    assert s["named_entity"] == s["negation"] == s["quant"] == 1.0  # absent from both
    assert s["root"] == 1.0  # want-01 in both
    assert 0.0 < s["wlk"] < 1.0 and 0.0 < s["wwlk"] < 1.0


def test_negation_entities_and_quantities_in_one_graph_only(vectors):
    neg = "(l / like-01 :polarity - :ARG0 (i / i))"
    pos = "(l / like-01 :ARG0 (i / i))"
    s = aspect_scores(neg, pos, vectors)
    assert s["negation"] == 0.0
    assert s["named_entity"] == 1.0  # no entity in either
    paris = '(c / city :name (n / name :op1 "Paris"))'
    london = '(c / city :name (n / name :op1 "London"))'
    assert aspect_scores(paris, london, vectors)["named_entity"] == 0.0
    assert aspect_scores(paris, pos, vectors)["named_entity"] == 0.0
    three, four = "(d / dog :quant 3)", "(d / dog :quant 4)"
    assert aspect_scores(three, four, vectors)["quant"] == 0.0
    assert aspect_scores(three, three, vectors)["quant"] == 1.0
    assert aspect_scores(three, "(d / dog)", vectors)["quant"] == 0.0


def test_smatch_of_two_unrelated_concepts_is_one_half():
    # (d / dog) against (c / cat): instance triples differ, the root triple matches
    assert smatch_f1(read_graph("(d / dog)").triples, read_graph("(c / cat)").triples) == 0.5
    assert smatch_counts([], []) == (0.0, 0, 0)


def test_degree_and_root_similarities_follow_the_labels(vectors):
    a = "(s / see-01 :ARG0 (b / boy) :ARG1 (g / girl))"
    b = "(h / hear-01 :ARG0 (b / boy) :ARG1 (g / girl))"
    s = aspect_scores(a, b, vectors)
    assert s["root"] < 1.0 and s["max_outdegree"] < 1.0
    assert s["max_indegree"] == 1.0  # boy: the first node with one parent, in both


def test_wl_similarities_are_symmetric_and_bounded(vectors):
    g = [read_graph(t) for t in HAND_GRAPHS]
    for a in g:
        for b in g:
            assert wlk(a, b) == pytest.approx(wlk(b, a), abs=1e-9)
            assert 0.0 <= wwlk(a, b, vectors) <= 1.0
            assert wwlk(a, b, vectors) == pytest.approx(wwlk(b, a, vectors), abs=1e-6)


def test_label_words_drop_the_sense():
    assert label_words("look-after-01") == "look after"
    assert label_words("-") == "negative"


def test_batch_scores_do_not_depend_on_workers(vectors):
    ga = HAND_GRAPHS + [None]
    gb = list(reversed(HAND_GRAPHS)) + [HAND_GRAPHS[0]]
    one = score_graph_pairs(ga, gb, vectors, workers=1)
    two = score_graph_pairs(ga, gb, vectors, workers=2)
    assert one == two
    assert all(one[k][-1] is None for k in ASPECTS)
    assert one["smatch"][0] == aspect_scores(ga[0], gb[0], vectors)["smatch"]


@pytest.mark.shared_data
def test_smatch_agrees_with_the_smatch_package_on_gold_pairs():
    if not GOLD.is_file():
        pytest.skip("../shared/data absent")
    smatch = pytest.importorskip("smatch")
    gold = [read_graph(s) for _, s in read_graphs_file(str(GOLD))]
    oneline = [penman.encode(penman.decode(s), indent=None) for _, s in read_graphs_file(str(GOLD))]
    rng = random.Random(13)
    pairs = [(rng.randrange(len(gold)), rng.randrange(len(gold))) for _ in range(200)]
    ours, theirs = [], []
    totals = Counter()
    for a, b in pairs:
        m, n1, n2 = smatch_counts(gold[a].triples, gold[b].triples)
        ours.append(2 * m / (n1 + n2))
        smatch.match_triple_dict.clear()
        best, t1, t2 = smatch.get_amr_match(oneline[a], oneline[b])
        theirs.append(2 * best / (t1 + t2))
        totals.update(m=m, n=n1 + n2, best=best, t=t1 + t2)
    diffs = [abs(x - y) for x, y in zip(ours, theirs, strict=True)]
    assert sum(diffs) / len(diffs) <= 0.01
    assert abs(2 * totals["m"] / totals["n"] - 2 * totals["best"] / totals["t"]) <= 0.01
    # identical graphs score 1.0 in both
    assert smatch_f1(gold[0].triples, gold[0].triples) == 1.0


# --------------------------------------------------------------------------- the rules parser

SENTENCES = [
    "The man who saw me cannot go to Paris.",
    "The sheep was eaten by the boy.",
    "I do not like my drawing.",
    "John Smith visited Paris on 3 May 2020 and paid $5 million.",
    "Draw me a sheep!",
    "Why should anyone be frightened by a hat?",
    'He said "no" three times, then he left.',
    "I want to go home.",
    "It is the fifth planet, and it is very small.",
    "No!",
    "42",
]


def _parse(nlp, text: str):
    from parasim.amr.rules import doc_to_amr

    return read_graph(doc_to_amr(nlp(text)))


def test_parser_output_is_valid_penman(nlp):
    graphs = parse_sentences(SENTENCES + ["", "  ", "...", "x" * 2000])
    for text, g in zip(SENTENCES, graphs, strict=False):
        assert g is not None, text
        decoded = penman.decode(g)
        assert decoded.instances(), text
        assert read_graph(g).top
    assert graphs[len(SENTENCES) :] == [None, None, None, None]


def test_code_like_prepositions_give_role_names_penman_decodes(nlp):
    """spaCy tags code and protocol names as prepositions on technical lines; their role names
    lose Penman's delimiters instead of making the graph undecodable (the Python documentation
    had 169 such sentences, `parse_failed` before)."""
    from parasim.amr.rules import doc_to_amr

    for text in [
        "HTTP/1.1 RFC 7231, Section 6.2.1",
        "Spending only the compulsory argument: ask_ok('Do you?')",
        "The versions and debug builds now are compatible with ABI: define ./configure --with-x",
    ]:
        g = doc_to_amr(nlp(text))
        assert penman.decode(g).instances(), text
        assert all("/" not in role and "(" not in role for _, role, _ in penman.decode(g).edges())


def test_rules_roles_passive_negation_and_modals(nlp):
    g = _parse(nlp, "The sheep was eaten by the boy.")
    var = {c: v for v, c in g.concepts.items()}
    assert (var["eat-01"], ":ARG0", var["boy"]) in g.relations
    assert (var["eat-01"], ":ARG1", var["sheep"]) in g.relations
    g = _parse(nlp, "The man who saw me cannot go to Paris.")
    var = {c: v for v, c in g.concepts.items()}
    assert g.concepts[g.top] == "possible-01"
    assert (var["possible-01"], ":polarity", "-") in g.attributes
    assert (var["see-01"], ":ARG0", var["man"]) in g.relations  # the relative clause's noun
    assert (var["possible-01"], ":ARG1", var["go-01"]) in g.relations


def test_rules_entities_dates_and_coordination(nlp):
    g = _parse(nlp, "John Smith visited Paris on 3 May 2020 and paid $5 million.")
    concepts = set(g.concepts.values())
    assert {"person", "city", "date-entity", "and", "monetary-quantity"} <= concepts
    names = {t for s, r, t in g.attributes if r.startswith(":op") and g.concepts[s] == "name"}
    assert {"john", "smith", "paris"} <= names
    date = next(v for v, c in g.concepts.items() if c == "date-entity")
    assert {(r, t) for s, r, t in g.attributes if s == date} >= {(":year", "2020"), (":month", "5")}


def test_rules_reentrancy_for_repeated_pronouns_and_control(nlp):
    g = _parse(nlp, "I do not like my drawing.")
    i = next(v for v, c in g.concepts.items() if c == "i")
    assert g.in_degree[i] == 2  # :ARG0 of like-01 and :poss of drawing
    g = _parse(nlp, "I want to go home.")
    assert max(g.in_degree.values()) == 2  # I is the goer too


def test_rules_imperative_and_question(nlp):
    g = _parse(nlp, "Draw me a sheep!")
    assert (g.top, ":mode", "imperative") in g.attributes
    assert "you" in g.concepts.values()
    g = _parse(nlp, "Why should anyone be frightened by a hat?")
    assert "amr-unknown" in g.concepts.values()


def test_parse_cache_hit_on_rerun(tmp_path, nlp):
    path = tmp_path / "amr.sqlite"
    texts = SENTENCES[:4] + [SENTENCES[0]]
    with ParseCache(path) as cache:
        first, counts = Parser(ParseSettings(), cache).parse(texts)
        assert counts.parsed == 5 and counts.cached == 0
        # the repeated sentence is stored once: 4 graphs and the 4 entity bags of the same pass
        assert len(cache) == 8
    with ParseCache(path) as cache:
        again, counts = Parser(ParseSettings(), cache).parse(texts)
        assert counts.cached == 5 and counts.parsed == 0
        assert cache.hits == 4 and cache.misses == 0
    assert again == first


def test_amrlib_without_a_model_is_a_clear_error():
    parser = Parser(ParseSettings(parser="amrlib"))
    with pytest.raises(RuntimeError, match="amrlib"):
        parser.parse(["A sentence."])


def test_parse_settings_reject_unknown_keys():
    with pytest.raises(ValueError, match="unknown AMR parse settings"):
        ParseSettings.from_dict({"parsr": "rules"})
    with pytest.raises(ValueError, match="unknown AMR parser"):
        ParseSettings.from_dict({"parser": "neural"})
    assert ParseSettings.from_dict({"spacy": "en_core_web_sm"}).spacy == ("en_core_web_sm",)


# --------------------------------------------------------------------------- entities and BM25


def test_count_cosine_follows_algorithm_1():
    assert count_cosine(Counter(), Counter()) == 1.0
    assert count_cosine(Counter(a=1), Counter()) == 0.0
    assert count_cosine(Counter(a=2, b=1), Counter(a=2, b=1)) == pytest.approx(1.0)
    assert count_cosine(Counter(a=1), Counter(b=1)) == 0.0
    assert count_cosine(Counter(a=1, b=1), Counter(a=1)) == pytest.approx(2**-0.5)


def test_entity_features_per_group(nlp):
    a = ["John visited Paris in 2020.", "Nothing here.", None]
    b = ["John visited Paris in 2021.", "Nothing there.", "x"]
    f = entity_features(a, b, nlp)
    assert f["ent_geo"][0] == 1.0 and f["ent_org"][0] == 1.0
    assert f["ent_date"][0] == 0.0
    assert [f[k][1] for k in f] == [1.0, 1.0, 1.0, 1.0]  # no entity on either side
    assert all(f[k][2] is None for k in f)


def test_bm25_scores_a_pair_within_its_page_pair():
    q = ["the cat sat on the mat", "a dog barked at night", "red apples", None]
    d = ["a cat on a mat", "the dog barks at night", "green pears", "x"]
    out = bm25_in_groups(q, d, groups=["p1", "p1", "p2", "p2"])
    assert out["bm25_norm"][:2] == [1.0, 1.0]
    assert out["bm25"][0] > 0.0
    assert out["bm25"][2] == 0.0  # no shared word in its page pair
    assert out["bm25"][3] is None


# --------------------------------------------------------------------------- the benchmark


def test_baseline_graph_has_one_concept_per_content_word_and_no_edge(nlp):
    from parasim.bench.amr import baseline_graph

    g = baseline_graph(nlp("The little prince saw a sheep."))
    assert sorted(g.concepts.values()) == ["little", "prince", "see-01", "sheep"]
    assert not g.relations and not g.attributes


@pytest.mark.shared_data
def test_amr_benchmark_runs_on_a_few_gold_graphs(capsys, nlp):
    if not GOLD.is_file():
        pytest.skip("../shared/data absent")
    from parasim.bench.amr import main

    assert main(["--limit", "15", "--pairs", "10", "--vectors", "hash", "--workers", "2"]) == 0
    out = capsys.readouterr().out
    assert "smatch F1" in out and "pairs/s" in out and "sentences/s" in out


def test_label_vectors_persist_in_sqlite(tmp_path):
    from parasim.amr.vectors import load_vectors

    path = tmp_path / "vectors.sqlite"
    first = load_vectors("hash", cache=path)
    a = first(["see-01", "boy", "see-02"])
    assert first.n_encoded == 2  # see-01 and see-02 are both "see"
    again = load_vectors("hash", cache=path)
    b = again(["boy", "see-01"])
    assert again.n_encoded == 0
    assert (b == a[[1, 0]]).all()
