"""Tests of parasim.train.eval: the public sets' readers and measures (REFreSD, STS, CWR, MSRP),
on hand-made cases."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from parasim.train.eval.cwr import ParallelSet, csls_hits, procrustes, retrieval  # noqa: E402
from parasim.train.eval.msrp import read_msrp  # noqa: E402
from parasim.train.eval.sts import read_stsb, stsb_spearman  # noqa: E402

# --- REFreSD -------------------------------------------------------------------------------------


def test_sentence_measures_on_a_hand_made_case():
    from parasim.train.eval.refresd import sentence_results

    gold = ["equivalent", "equivalent", "divergent", "divergent", "divergent"]
    scores = [2.0, -1.0, -3.0, -2.0, 0.5]  # divergent when -F > 0: eq, div, div, div, eq
    r = sentence_results(scores, gold, threshold=0.0)
    assert r["equivalent"]["precision"] == r["equivalent"]["recall"] == 0.5
    assert r["divergent"]["f1"] == pytest.approx(2 / 3)
    assert r["weighted"]["f1"] == pytest.approx((2 * 0.5 + 3 * 2 / 3) / 5)  # 0.6


def test_token_measures_on_a_hand_made_case():
    from parasim.train.eval.refresd import token_results

    rows = [{"en_r": [0, 1, 2, 3], "fr_r": [0, 0, 3]}]
    en_p, fr_p = [[0.1, 0.9, 0.2, 0.8]], [[0.7, 0.1, 0.6]]
    r = token_results(rows, en_p, fr_p)
    # predicted DIV: en 1, en 3, fr 0, fr 2
    # union (>= 1): gold DIV en 1,2,3 + fr 2 -> tp 3, fp 1, fn 1: F1-DIV 0.75; EQ tp 2 fp 1 fn 1
    assert r["union"]["model"]["f1_div"] == pytest.approx(0.75)
    assert r["union"]["model"]["f1_eq"] == pytest.approx(2 / 3)
    assert r["union"]["model"]["f1_mul"] == pytest.approx(0.5)
    # intersection (3 annotators): gold DIV en 3 + fr 2 -> tp 2, fp 2, fn 0: F1-DIV 2/3
    assert r["intersection"]["model"]["f1_div"] == pytest.approx(2 / 3)
    assert r["words"] == 7


# --- STS -----------------------------------------------------------------------------------------


def test_stsb_reader_and_spearman(tmp_path, tiny_model):
    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.s3bert.model import embed

    (tmp_path / "stsb-en-dev.csv").write_text(
        'w1 w2,w1 w2,5.0\nw1 w2,w1 w3,3.0\nw4 w5,w6 w7,0.0\n"w8, w9",w8 w9,4.5\n',
        encoding="utf-8",
    )
    rows = read_stsb(tmp_path, "en")
    assert rows[3] == ("w8, w9", "w8 w9", 4.5)
    enc, tok = load_training_encoder(tiny_model)
    rho = stsb_spearman(lambda texts: embed(enc, tok, texts, 16), rows)
    assert rho is not None and -1 <= rho <= 1


def test_stsb_spearman_ranks_the_cosines_against_the_gold_scores():
    """Hand-made vectors: cosines 1, 0.6, 0 and -1 against gold 5, 3, 1 and 0 rank the same."""
    vec = {"a": [1, 0], "b": [0.6, 0.8], "c": [0, 1], "d": [-1, 0]}
    rows = [("a", "a", 5.0), ("a", "b", 3.0), ("a", "c", 1.0), ("a", "d", 0.0)]

    def embed(texts):
        return np.array([vec[t] for t in texts], dtype=float)

    assert stsb_spearman(embed, rows) == pytest.approx(1.0)
    assert stsb_spearman(embed, [(a, b, -g) for a, b, g in rows]) == pytest.approx(-1.0)


# --- CWR -----------------------------------------------------------------------------------------


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_csls_matches_its_definition_and_beats_cosine_against_a_hub():
    rng = np.random.default_rng(0)
    src = rng.normal(size=(40, 16)) + 2.0  # a shared offset: every word near the mean direction
    trg = np.vstack([src + rng.normal(size=(40, 16)) * 1.2, src.mean(0, keepdims=True)])
    cos = _unit(src) @ _unit(trg).T  # the last target, the mean, is a hub
    assert (cos.argmax(1) == 40).mean() > 0.4
    k = 10
    r_t = np.sort(cos, axis=1)[:, -k:].mean(1)
    r_s = np.sort(cos.T, axis=1)[:, -k:].mean(1)
    brute = (2 * cos - r_t[:, None] - r_s[None, :]).argmax(1) == np.arange(40)
    hits = csls_hits(src, trg, np.arange(40), np.arange(40), k=k)
    assert (hits == brute).all()
    assert hits.mean() > (cos.argmax(1) == np.arange(40)).mean() + 0.2
    # a subset of queries gives the same answers (the neighbourhoods use all rows)
    assert (csls_hits(src, trg, np.array([3, 7]), np.array([3, 7]), k=k) == hits[[3, 7]]).all()


def test_retrieval_contextual_non_contextual_unseen_and_pos():
    rng = np.random.default_rng(0)
    en = [["the", "cat", "eats"], ["the", "dog", "eats"]]
    fr = [["le", "chat", "mange"], ["le", "chien", "mange"]]
    links = [[(0, 0), (1, 1), (2, 2)], [(0, 0), (1, 1), (2, 2)]]
    pos = [["DET", "NOUN", "VERB"], ["DET", "NOUN", "VERB"]]
    ps = ParallelSet(en, fr, links, pos, "fr")
    vec = {w: rng.normal(size=8).astype(np.float32) for w in {*sum(en, []), *sum(fr, [])}}
    ctx = rng.normal(size=(2, 8)).astype(np.float32) * 0.1
    # each French word sits on its English word, plus a sentence-specific context offset
    en_v = [np.stack([vec[w] + ctx[s] for w in en[s]]) for s in range(2)]
    fr_v = [np.stack([vec[en[s][j]] + ctx[s] for j in range(3)]) for s in range(2)]
    r = retrieval(ps, en_v, fr_v, seen_types={("the", "le")}, k=2)
    assert r["seen_word_pairs_left_out"] == 2
    assert r["contextual"]["word_pairs"] == 4
    assert r["contextual"]["accuracy"] == 1.0
    # first occurrences only: "eats"/"mange" of sentence 2 go; "the"/"le" were seen
    assert r["non_contextual"]["word_pairs"] == 3
    assert set(r["contextual"]["by_pos"]) == {"open"}
    # scrambled French vectors retrieve at chance or worse
    bad = [v[::-1].copy() for v in fr_v]
    assert retrieval(ps, en_v, bad, k=2)["contextual"]["accuracy"] < 0.5


def test_procrustes_recovers_a_rotation():
    rng = np.random.default_rng(1)
    q, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    x = rng.normal(size=(200, 16))
    w = procrustes(x, x @ q)
    assert np.allclose(w, q, atol=1e-4)
    assert np.allclose(w.T @ w, np.eye(16), atol=1e-5)


# --- MSRP ----------------------------------------------------------------------------------------


#: The toy corpus's words (test_similarity.py: its word vectors cover them).
MSRP_WORDS = [f"w{i}" for i in range(30)]


def _sentence(rng: random.Random) -> list[str]:
    return rng.sample(MSRP_WORDS, rng.randint(3, 6))


def write_msrp(d: Path, n_train: int, n_test: int) -> Path:
    """MSRP's two files in Microsoft's layout (test_similarity.py trains on them too)."""
    rng = random.Random(7)
    d.mkdir(parents=True, exist_ok=True)
    for name, n in (("msr_paraphrase_train.txt", n_train), ("msr_paraphrase_test.txt", n_test)):
        lines = ["\ufeffQuality\t#1 ID\t#2 ID\t#1 String\t#2 String"]
        for i in range(n):
            a = _sentence(rng)
            label = i % 3 != 0  # MSRP is two-thirds paraphrases
            b = a[::-1] if label else _sentence(rng)
            lines.append(f"{int(label)}\t{i}\t{i + 1000}\t{' '.join(a)}\t{' '.join(b)}")
        (d / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return d


def test_msrp_reader_names_a_bad_line(tmp_path):
    d = write_msrp(tmp_path / "msrp", 3, 3)
    assert read_msrp(d / "msr_paraphrase_train.txt").label == [0, 1, 1]
    bad = d / "msr_paraphrase_test.txt"
    bad.write_text(bad.read_text() + "maybe\tx\ty\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"msr_paraphrase_test\.txt:5: not an MSRP row"):
        read_msrp(bad)
