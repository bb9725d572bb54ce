"""Tests of the entity-enriched Siamese model (parasim.train.entity_siamese): a toy corpus with
toy score shards, a tiny random BERT, a blank spaCy pipeline; seconds each, nothing downloaded."""

from __future__ import annotations

import json
import logging
import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytest.importorskip("bm25s")

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from conftest import TOY_WORDS  # noqa: E402

from parasim.corpus.stage import CORPUS_SCHEMA  # noqa: E402
from parasim.io import rows_to_table, write_table  # noqa: E402
from parasim.train.entity_siamese.data import Pairs, bm25_silver_pairs, read_pairs  # noqa: E402
from parasim.train.entity_siamese.model import EntitySiamese  # noqa: E402
from parasim.train.entity_siamese.settings import ENTITY_FEATURES  # noqa: E402
from parasim.train.entity_siamese.training import (  # noqa: E402
    _share_identical_files,
    encoder_dev_split,
    train_entity_siamese,
)


def toy(n_train: int = 48, n_test: int = 16, seed: int = 0, one_class: bool = False):
    """Corpus rows and their score rows: a positive's other side is the word-by-word translation
    (``f`` + word) and its entity cosines high; a negative's is another sentence's, entities low."""
    rng = random.Random(seed)
    rows, scores = [], []
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            en = rng.sample(TOY_WORDS, rng.randint(3, 6))
            label = 1 if one_class else i % 2
            other = en if label else rng.sample(TOY_WORDS, rng.randint(3, 6))
            rid = f"{split}-{i}"
            rows.append(
                {
                    "id": rid, "sentence1": " ".join(en),
                    "sentence2": " ".join(f"f{w}" for w in other), "label": label,
                    "lang_pair": "en-fr", "partition": "EN-FR-G", "domain": "government",
                    "site": "toy", "source": "aligned" if label else "lda-negative",
                    "pair_id": f"p{i // 4}", "pair_id2": f"p{i // 4}", "url1": "u", "url2": "u",
                    "idx1": [0], "idx2": [0], "split": split,
                    "fold": i // 4 % 5 if split == "train" else None,
                }
            )  # fmt: skip
            ent = [round(rng.uniform(0.6, 1.0) if label else rng.uniform(0.0, 0.4), 3)
                   for _ in ENTITY_FEATURES]  # fmt: skip
            scores.append(
                {"id": rid, "source": "positive" if label else "negative",
                 "other_en": " ".join(other),
                 **dict(zip(ENTITY_FEATURES, ent, strict=True))}
            )  # fmt: skip
    return rows, scores


def graded(rows: list[dict]) -> list[dict]:
    """The rows with their grade (the corpus's since schema version 2): label 1 equivalent,
    label 0 unrelated (seed 001's negatives)."""
    return [{"grade": "equivalent" if r["label"] else "unrelated", **r} for r in rows]


def write_toy(root: Path, rows, scores, drop: tuple[str, ...] = (), unscored: int = 0) -> tuple:
    """The corpus under ``root/corpus`` and one score shard; the last ``unscored`` score rows
    left out (rows the scores stage has not seen), ``drop`` columns removed."""
    for split in ("train", "test"):
        sub = [r for r in rows if r["split"] == split]
        write_table(
            rows_to_table(graded(sub), CORPUS_SCHEMA),
            root / "corpus" / "data" / "EN-FR-G" / f"{split}-00000-of-00001.parquet",
        )
    kept = scores[: len(scores) - unscored] if unscored else scores
    t = pa.Table.from_pylist(kept).drop_columns(list(drop))
    shard = root / "scores" / "toy" / "000.parquet"
    shard.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(t, shard)
    return root / "corpus", [shard]


def section(model: str, **own) -> dict:
    es = {"model": model, "prefix": "", "max_length": 16, "max_steps": 4, "epochs": 2,
          "batch_size": 8, "learning_rate": 1e-3, "mlp_epochs": 15, "mlp_batch_size": 8,
          "eval_batch_size": 16, **own}  # fmt: skip
    return {"seed": 3, "checkpoint_every": 2, "log_every": 1, "dtype": "float32",
            "device": "cpu", "entity_siamese": es}  # fmt: skip


@pytest.fixture(scope="module")
def blank_nlp():
    spacy = pytest.importorskip("spacy")
    return spacy.blank("en")


@pytest.fixture()
def toy_data(tmp_path):
    rows, scores = toy()
    return write_toy(tmp_path, rows, scores, unscored=3)


def test_read_pairs_joins_entities_by_id(toy_data):
    corpus, shards = toy_data
    train, counts = read_pairs(corpus, shards, "EN-FR-G", "train")
    test, tcounts = read_pairs(corpus, shards, "EN-FR-G", "test")
    rows, scores = toy()
    by_id = {s["id"]: s for s in scores[:-3]}
    table = pq.read_table(corpus / "data/EN-FR-G/train-00000-of-00001.parquet").to_pylist()
    for r, e, oe in zip(table, train.ents, train.other_en, strict=True):
        assert e == [by_id[r["id"]][f] for f in ENTITY_FEATURES]
        assert oe == by_id[r["id"]]["other_en"]
    assert counts["rows"] == 48 and counts["rows_without_entities"] == 0
    # the last three test rows have no score row: no entities, counted
    assert tcounts["rows_without_entities"] == 3
    assert sum(all(v is None for v in e) for e in test.ents) == 3


def test_trains_evaluates_and_saves(tmp_path, toy_data, tiny_model):
    corpus, shards = toy_data
    out, ev = tmp_path / "m", tmp_path / "e"
    m = train_entity_siamese(corpus, shards, out, ev, section(tiny_model))
    assert "skipped" not in m
    for f in ("metrics.json", "README.md", "training_curve.png", "model/entity_siamese.json",
              "model/mlp.safetensors", "model/encoder/config.json"):  # fmt: skip
        assert (out / f).is_file(), f
    test = json.loads((ev / "test.json").read_text())
    assert (ev / "table.html").read_text().count("<tr>") >= 5
    assert json.loads((ev / "sts.json").read_text())["skipped"]
    assert m["rounds"]["round_1"]["encoder_steps"] == 4
    # folds 0 and 1 of the training rows were the encoder's dev split, step 0 evaluated too
    assert m["rounds"]["round_1"]["encoder_dev_rows"] == 24
    assert m["rounds"]["round_1"]["encoder_best_step"] in (0, 4)
    assert m["shipped_start"] == (m["rounds"]["round_1"]["encoder_best_step"] == 0)
    # the entity features separate the toy classes (3 test rows have none): the MLP learns it
    assert test["all"]["entity_siamese"]["accuracy"] >= 0.8
    assert test["all"]["majority"]["accuracy"] == pytest.approx(0.5)
    # the saved model reproduces the evaluated predictions
    model = EntitySiamese(out / "model")
    pairs, _ = read_pairs(corpus, shards, "EN-FR-G", "test")
    probs = model.predict(pairs.s1, pairs.s2, pairs.ents)
    acc = sum(int(p >= 0.5) == int(g) for p, g in zip(probs, pairs.label, strict=True)) / len(probs)
    assert acc == pytest.approx(test["all"]["entity_siamese"]["accuracy"])


def graded_toy(tmp_path):
    """The toy corpus with two divergent rows per positive: a synthetic one with a score row
    (its translation with one word swapped, entity cosines between), and a mined one without."""
    rows, scores = toy()
    rng = random.Random(7)
    extra, extra_scores = [], []
    for r in [r for r in rows if r["label"]]:
        words = r["sentence2"].split()
        words[0] = f"f{rng.choice(TOY_WORDS)}"
        for kind, source in (("s", "synthetic-divergence"), ("m", "mined-divergence")):
            rid = f"{r['id']}-{kind}"
            extra.append({**r, "id": rid, "label": 0, "source": source, "grade": "divergent",
                          "parent_id": r["id"], "sentence2": " ".join(words)})  # fmt: skip
            if kind == "s":
                ent = [round(rng.uniform(0.3, 0.7), 3) for _ in ENTITY_FEATURES]
                extra_scores.append({"id": rid, "source": "divergence", "other_en": "x",
                                     **dict(zip(ENTITY_FEATURES, ent, strict=True))})  # fmt: skip
    for split in ("train", "test"):
        sub = graded([r for r in rows if r["split"] == split])
        sub += [r for r in extra if r["split"] == split]
        write_table(
            rows_to_table(sub, CORPUS_SCHEMA),
            tmp_path / "corpus" / "data" / "EN-FR-G" / f"{split}-00000-of-00001.parquet",
        )
    shard = tmp_path / "scores" / "toy" / "000.parquet"
    shard.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(scores + extra_scores), shard)
    return tmp_path / "corpus", [shard]


def test_graded_pairs_take_the_scored_divergent_rows_as_hard_negatives(tmp_path, tiny_model):
    from parasim.train.entity_siamese.model import cosine_targets
    from parasim.train.entity_siamese.settings import entity_siamese_settings

    corpus, shards = graded_toy(tmp_path)
    binary, c = read_pairs(corpus, shards, "EN-FR-G", "train")
    assert len(binary) == 48 and c["rows_divergent_left_out"] == 48
    train, c = read_pairs(corpus, shards, "EN-FR-G", "train", ENTITY_FEATURES, "graded", 1, 0)
    # 24 positives: each its scored divergent row; the mined ones (no score row) left out
    assert len(train) == 72 and c["rows_divergent"] == 24
    assert c["rows_divergent_without_entities_left_out"] == 24 and c["rows_without_entities"] == 0
    assert train.grade.count("divergent") == 24 and set(train.grade) == {
        "equivalent", "unrelated", "divergent",
    }  # fmt: skip
    _, cfg = entity_siamese_settings(section(tiny_model))
    targets = cosine_targets(train, cfg)
    assert {t for t, g in zip(targets, train.grade, strict=True) if g == "divergent"} == {0.5}
    assert [t for t, g in zip(targets, train.grade, strict=True) if g != "divergent"] == [
        y for y, g in zip(train.label, train.grade, strict=True) if g != "divergent"
    ]
    out, ev = tmp_path / "m", tmp_path / "e"
    m = train_entity_siamese(corpus, shards, out, ev, section(tiny_model))
    assert m["data"]["train_rows_divergent"] == 24
    by_grade = json.loads((ev / "test.json").read_text())["by_grade"]
    assert {g: v["rows"] for g, v in by_grade.items()} == {
        "divergent": 8, "equivalent": 8, "unrelated": 8,
    }  # fmt: skip
    assert 0 <= by_grade["divergent"]["entity_siamese"] <= 1
    assert m["verdicts"]["test"]["evaluated_on"].endswith(
        "(its divergent rows with entity scores too)"
    )
    card = (out / "README.md").read_text()
    assert "divergent row(s) per positive" in card and "test divergent rows accuracy" in card


def test_encoder_dev_split_takes_the_first_folds_or_says_why_not():
    def pairs(folds, labels):
        n = len(folds)
        return Pairs(["a"] * n, ["b"] * n, [None] * n, [[None]] * n, labels, ["en-fr"] * n,
                     ["P"] * n, folds)  # fmt: skip

    p = pairs([0, 1, 2, 3, None, 0], [1.0, 0.0, 1.0, 0.0, 0.5, 0.0])
    assert encoder_dev_split(p, 2) == ([0, 1, 5], "")  # silver rows (fold None) never dev
    assert encoder_dev_split(p, 0)[0] == [] and "0" in encoder_dev_split(p, 0)[1]
    assert "one class" in encoder_dev_split(pairs([0, 0, 3], [1.0, 1.0, 0.0]), 2)[1]
    assert "no training row" in encoder_dev_split(pairs([5, 6], [1.0, 0.0]), 2)[1]
    assert "every training row" in encoder_dev_split(pairs([0, 1], [1.0, 0.0]), 2)[1]


def test_a_fine_tuning_that_only_hurts_ships_the_untrained_encoder(
    tmp_path, toy_data, tiny_model, monkeypatch
):
    """Step 0 competes on the dev folds: an encoder trained the wrong way (the loss negated)
    loses to its start, which ships, and the card and metrics say so."""
    import torch
    from safetensors.torch import load_file

    from parasim.train.entity_siamese import training

    real = training.cosine_loss

    def wrong_way(*a, **k):
        f = real(*a, **k)
        return lambda m, batch: {n: (-s, c) for n, (s, c) in f(m, batch).items()}

    monkeypatch.setattr(training, "cosine_loss", wrong_way)
    corpus, shards = toy_data
    out = tmp_path / "m"
    m = train_entity_siamese(corpus, shards, out, tmp_path / "e",
                             section(tiny_model, learning_rate=5e-3))  # fmt: skip
    r1 = m["rounds"]["round_1"]
    assert r1["encoder_dev_rows"] == 24  # folds 0 and 1 of the 48 training rows
    assert r1["encoder_steps"] == 4 and r1["encoder_best_step"] == 0
    assert m["shipped_start"] is True
    card = (out / "README.md").read_text()
    assert "untrained encoder (step 0)" in card.split("\n\n")[1]
    base = load_file(str(Path(tiny_model) / "model.safetensors"))
    shipped = {}
    for f in sorted((out / "model" / "encoder").glob("*.safetensors")):
        shipped.update(load_file(str(f)))
    common = [k for k in base if k in shipped]
    assert common and all(torch.equal(base[k], shipped[k]) for k in common)


def test_same_seed_same_figures_and_rerun_keeps_the_encoder(tmp_path, toy_data, tiny_model,
                                                            caplog):  # fmt: skip
    corpus, shards = toy_data
    a = train_entity_siamese(corpus, shards, tmp_path / "a", tmp_path / "ea", section(tiny_model))
    b = train_entity_siamese(corpus, shards, tmp_path / "b", tmp_path / "eb", section(tiny_model))
    assert a["test"] == b["test"]
    # a rerun in the same folder (after a crash past the encoder) keeps the trained encoder
    (tmp_path / "a" / "metrics.json").unlink()
    with caplog.at_level(logging.INFO, logger="parasim.train"):
        c = train_entity_siamese(
            corpus, shards, tmp_path / "a", tmp_path / "ea", section(tiny_model)
        )
    assert "encoder trained earlier, kept" in caplog.text
    assert c["test"] == a["test"]


def test_resumes_the_encoder_from_its_checkpoint(tmp_path, toy_data, tiny_model, monkeypatch):
    """Interrupted after the encoder's 2nd step (a checkpoint), the rerun resumes there and ends
    with the figures of an uninterrupted run."""
    import parasim.train.core.loop as loop

    corpus, shards = toy_data
    ref = train_entity_siamese(corpus, shards, tmp_path / "r", tmp_path / "er",
                               section(tiny_model))  # fmt: skip
    real = loop._save_checkpoint
    calls = {"n": 0}

    def crash(acc, ckpt_dir, state, history, keep):
        real(acc, ckpt_dir, state, history, keep)
        calls["n"] += 1
        if "siamese" in str(ckpt_dir) and state["step"] == 2:
            raise KeyboardInterrupt("killed")

    monkeypatch.setattr(loop, "_save_checkpoint", crash)
    with pytest.raises(KeyboardInterrupt):
        train_entity_siamese(corpus, shards, tmp_path / "k", tmp_path / "ek", section(tiny_model))
    assert (tmp_path / "k/stages/round-1/siamese/checkpoints/step-00000002").is_dir()
    monkeypatch.setattr(loop, "_save_checkpoint", real)
    res = train_entity_siamese(corpus, shards, tmp_path / "k", tmp_path / "ek",
                               section(tiny_model))  # fmt: skip
    assert res["test"] == ref["test"]


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("no_columns", "no ent_geo"),
        ("no_shards", "no score shards"),
        ("no_entities", "no training row has an entity score"),
        ("one_class", "one class only"),
    ],
)
def test_bad_input_is_a_skipped_model(tmp_path, tiny_model, case, needle):
    rows, scores = toy(one_class=case == "one_class")
    if case == "no_entities":
        scores = [{**s, **dict.fromkeys(ENTITY_FEATURES)} for s in scores]
    corpus, shards = write_toy(
        tmp_path, rows, scores, drop=ENTITY_FEATURES if case == "no_columns" else ()
    )
    if case == "no_shards":
        shards = []
    out, ev = tmp_path / "m", tmp_path / "e"
    m = train_entity_siamese(corpus, shards, out, ev, section(tiny_model))
    assert needle in m["skipped"]
    assert json.loads((out / "metrics.json").read_text())["skipped"] == m["skipped"]
    for f in ("test.json", "sts.json"):
        assert json.loads((ev / f).read_text())["skipped"] == m["skipped"]
    assert "skipped" in (ev / "table.html").read_text()
    assert not (out / "model").exists()


def test_bm25_silver_pairs_are_new_and_capped():
    rows, scores = toy(n_train=40, n_test=0)
    oe = {s["id"]: s["other_en"] for s in scores}
    train = Pairs(
        [r["sentence1"] for r in rows], [r["sentence2"] for r in rows],
        [oe[r["id"]] for r in rows], [[0.5] * 4 for _ in rows], [float(r["label"]) for r in rows],
        ["en-fr"] * len(rows), ["EN-FR-G"] * len(rows), [0] * len(rows),
    )  # fmt: skip
    silver, counts = bm25_silver_pairs(train, per_query=2, max_pairs=None, seed=1)
    assert len(silver) > 0
    gold = set(zip(train.s1, train.s2, strict=True))
    partner = {a: b for a, b, y in zip(train.s1, train.s2, train.label, strict=True) if y == 1}
    for a, b, o in zip(silver.s1, silver.s2, silver.other_en, strict=True):
        assert (a, b) not in gold and partner[a] != b
        assert a in partner  # queries are the English sides of aligned pairs
        assert o == " ".join(w[1:] for w in b.split())  # the translation of the chosen side
        # BM25 retrieved it: it shares a word with the query
        assert set(a.split()) & set(o.split())
    assert max(sum(s == a for s in silver.s1) for a in set(silver.s1)) <= 2
    capped, c2 = bm25_silver_pairs(train, per_query=2, max_pairs=3, seed=1)
    again, _ = bm25_silver_pairs(train, per_query=2, max_pairs=3, seed=1)
    assert len(capped) == 3 and c2["silver_candidates"] == len(silver)
    assert capped.s1 == again.s1 and capped.s2 == again.s2


def test_silver_round_and_sts(tmp_path, toy_data, tiny_model, blank_nlp):
    """With silver pairs a second round trains on gold + silver (the round-1 figures kept
    beside); STSb is read cross-lingual (en sentence 1, fr / es sentence 2)."""
    corpus, shards = toy_data
    sts = tmp_path / "sts"
    sts.mkdir()
    rng = random.Random(5)
    en, fr, es = [], [], []
    for i in range(12):
        a = rng.sample(TOY_WORDS, 4)
        b = a if i % 2 else rng.sample(TOY_WORDS, 4)
        score = 5.0 - i % 5
        en.append(f"{' '.join(a)},{' '.join(b)},{score}")
        fr.append(f"{' '.join(a)},{' '.join('f' + w for w in b)},{score}")
        es.append(f"{' '.join(a)},{' '.join('f' + w for w in b)},{score}")
    for lang, lines in (("en", en), ("fr", fr), ("es", es)):
        (sts / f"stsb-{lang}-dev.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    m = train_entity_siamese(
        corpus, shards, tmp_path / "m", tmp_path / "e",
        section(tiny_model, silver=True, silver_per_query=2), sts_dir=sts, nlp=blank_nlp,
    )  # fmt: skip
    assert "round_2" in m["rounds"] and m["data"]["silver_pairs"] > 0
    assert 0.0 < m["data"]["silver_mean_label"] < 1.0
    assert "entity_siamese_gold_only" in m["test"]
    s = json.loads((tmp_path / "e" / "sts.json").read_text())
    assert set(s) >= {"en-fr", "en-es"} and s["en-fr"]["pairs"] == 12
    assert s["en-fr"]["siamese"] is not None
    # blank pipeline: no entity anywhere, every cosine 1.0: no correlation to report
    assert s["en-fr"]["ent_geo"] is None


def test_frozen_encoder_is_the_untrained_cosine(tmp_path, toy_data, tiny_model):
    corpus, shards = toy_data
    m = train_entity_siamese(corpus, shards, tmp_path / "m", tmp_path / "e",
                             section(tiny_model, train_encoder=False))  # fmt: skip
    assert m["rounds"]["round_1"]["encoder_steps"] == 0 and not m["encoder_trained"]
    assert m["test"]["siamese"] == m["test"]["untrained"]
    assert not (tmp_path / "m" / "stages" / "round-1" / "encoder").exists()


def test_identical_files_are_shared_by_a_hard_link_and_others_kept(tmp_path):
    src, dst = tmp_path / "stage", tmp_path / "model"
    src.mkdir()
    dst.mkdir()
    (src / "w.bin").write_bytes(b"x" * 64)
    (dst / "w.bin").write_bytes(b"x" * 64)
    (src / "other.bin").write_bytes(b"a" * 64)
    (dst / "other.bin").write_bytes(b"b" * 64)
    (dst / "only.bin").write_bytes(b"c" * 64)
    saved = _share_identical_files(src, dst, min_bytes=1)
    assert saved == 64
    assert (dst / "w.bin").samefile(src / "w.bin") and (dst / "w.bin").read_bytes() == b"x" * 64
    assert not (dst / "other.bin").samefile(src / "other.bin")
    assert (dst / "only.bin").read_bytes() == b"c" * 64
    assert _share_identical_files(src, dst, min_bytes=1) == 0  # already shared
    assert _share_identical_files(tmp_path / "missing", dst) == 0
