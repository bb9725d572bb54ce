"""Tests of S3BERT (parasim.train.s3bert): tiny random BERT, toy scored pairs, seconds, offline."""

from __future__ import annotations

import copy
import json
import math
import random
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from parasim.config import ConfigError  # noqa: E402
from parasim.train.core.metrics import spearman  # noqa: E402
from parasim.train.s3bert.data import Pair, s3bert_data, scale_targets, target_scaling  # noqa: E402
from parasim.train.s3bert.evaluate import assignments  # noqa: E402
from parasim.train.s3bert.model import _tokenize, build_s3bert, embed, load_s3bert, mean_pool  # noqa: E402
from parasim.train.s3bert.settings import aspect_names, s3bert_settings  # noqa: E402
from parasim.train.s3bert.training import s3bert_loss, train_s3bert  # noqa: E402

WORDS = [f"w{i}" for i in range(30)] + ["not", "two", "three"]
ASPECTS = aspect_names()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A random 3-layer BERT (hidden 40: 15 aspects x 2 dims + 10 residual), WordLevel vocab."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    d = tmp_path_factory.mktemp("tiny-s3bert")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    vocab = {w: i for i, w in enumerate(specials + WORDS)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]",
    ).save_pretrained(d)  # fmt: skip
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=40, num_hidden_layers=3, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    BertModel(cfg).save_pretrained(d)
    return str(d)


def toy_rows(n: int, seed: int = 0) -> dict[str, list]:
    """Scored pairs whose "negation" aspect is 1 when both or neither sentence has "not" and 0
    otherwise, and whose other aspects are word overlap: learnable from the words alone."""
    rng = random.Random(seed)
    cols: dict[str, list] = {"text_a": [], "text_b": [], "group": [], "source": []}
    cols.update({f"amr_{k}": [] for k in ASPECTS})
    for i in range(n):
        a = rng.sample(WORDS[:30], 5)
        b = a[:3] + rng.sample(WORDS[:30], 2) if i % 2 == 0 else rng.sample(WORDS[:30], 5)
        neg_a, neg_b = rng.random() < 0.5, rng.random() < 0.5
        if neg_a:
            a = ["not", *a]
        if neg_b:
            b = ["not", *b]
        overlap = len(set(a) & set(b)) / len(set(a) | set(b))
        cols["text_a"].append(" ".join(a))
        cols["text_b"].append(" ".join(b))
        cols["group"].append(f"page{i % 40}")
        cols["source"].append("positive" if i % 2 == 0 else "negative")
        for k in ASPECTS:
            cols[f"amr_{k}"].append(float(neg_a == neg_b) if k == "negation" else overlap)
    return cols


def settings(model: str, **over) -> dict:
    own = {
        "model": model, "feature_dim": 2, "tune_layers": 1, "max_length": 16,
        "learning_rate": 5e-3, "batch_size": 16, "epochs": 6, "eval_every": 0, "patience": 0,
        "dev_fraction": 0.2, "test_fraction": 0.2,
    }  # fmt: skip
    own.update(over)
    return {"device": "cpu", "dtype": "float32", "threads": 1, "log_every": 1,
            "checkpoint_every": 0, "s3bert": own}  # fmt: skip


def test_aspects_are_the_scores_stage_fifteen():
    assert len(ASPECTS) == 15 and len(set(ASPECTS)) == 15


def test_data_splits_by_page_pair_and_counts_skips():
    rows = toy_rows(200)
    rows["text_a"][0] = "  "
    for k in ASPECTS:
        rows[f"amr_{k}"][1] = None  # both graphs failed: no score at all
    rows["amr_smatch"][2] = None  # one aspect missing: kept, that aspect left out
    rows["source"][3] = "divergence"
    _, cfg = s3bert_settings(settings("x"))
    data = s3bert_data(rows, cfg, seed=13)
    c = data.counts
    assert c["skipped_empty_side"] == 1 and c["skipped_no_scores"] == 1
    assert c["skipped_source_divergence"] == 1
    assert len(data.train) + len(data.dev) + len(data.test) == 197
    groups = [{p.group for p in part} for part in (data.train, data.dev, data.test)]
    assert not (groups[0] & groups[1]) and not (groups[0] & groups[2]) and not groups[1] & groups[2]
    assert all(len(g) > 0 for g in groups)
    with_nan = [
        p for part in (data.train, data.dev, data.test) for p in part if math.isnan(p.scores[0])
    ]
    assert len(with_nan) == 1
    del rows["amr_negation"]
    with pytest.raises(ValueError, match="no amr_negation column"):
        s3bert_data(rows, cfg, seed=13)


def test_minmax_targets_scale_each_aspect_by_the_training_pairs():
    P = Pair
    train = [P("a", "b", "g1", (0.2, 0.5, math.nan)), P("c", "d", "g2", (0.6, 0.5, 0.3))]
    assert target_scaling(train, "none") is None
    scaling = target_scaling(train, "minmax")
    # aspect 1 is constant and aspect 2 has one value: both keep their scores
    assert scaling == {"min": [0.2, 0.0, 0.0], "max": [0.6, 1.0, 1.0]}
    got = scale_targets([*train, P("e", "f", "g3", (0.8, 0.1, 0.9))], scaling)
    assert [p.scores[0] for p in got] == pytest.approx([0.0, 1.0, 1.5])  # dev: the same map
    assert math.isnan(got[0].scores[2]) and got[1].scores[1:] == (0.5, 0.3)
    assert (got[2].a, got[2].group) == ("e", "g3")
    with pytest.raises((ValueError, ConfigError), match="target_norm"):
        s3bert_settings({"s3bert": {"target_norm": "zscore"}})


def test_unknown_keys_and_bad_fractions_are_config_errors():
    with pytest.raises(ConfigError, match=r"train.s3bert: unknown key\(s\) \['nope'\]"):
        s3bert_settings({"s3bert": {"nope": 1}})
    with pytest.raises((ValueError, ConfigError), match="dev_fraction"):
        s3bert_settings({"s3bert": {"dev_fraction": 0.6, "test_fraction": 0.5}})


def test_spearman_and_assignments():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 1, 1], [1, 2, 3]) is None  # constant side
    assert spearman([1, 2, float("nan"), 3], [1, 2, 5, 3]) == pytest.approx(1.0)
    rand = assignments("rand", 384, 15, 16, seed=0)
    flat = [int(x) for d in rand for x in d]
    assert len(flat) == 240 and len(set(flat)) == 240
    ours = assignments("s3bert", 384, 15, 16)
    assert list(ours[14]) == list(range(224, 240))
    assert all(len(d) == 384 for d in assignments("full", 384, 15, 16))


def test_consistency_is_zero_before_training_and_decomposition_hand_checked(tiny_model):
    from parasim.train.core.encoder import load_training_encoder

    _, cfg = s3bert_settings(settings(tiny_model))
    enc, tok = load_training_encoder(tiny_model)
    teacher = copy.deepcopy(enc).eval()
    model = build_s3bert(enc, 15).eval()
    batch = [
        Pair("w1 w2 w3", "w1 w2 w4", "g", tuple([0.5] * 15)),
        Pair("not w5", "w6 w7", "g", tuple([1.0] * 15)),
    ]
    terms = s3bert_loss(tok, teacher, cfg)(model, batch)
    assert float(terms["consistency"][0].detach()) == pytest.approx(0.0, abs=1e-10)
    assert terms["consistency"][1] == 4 and terms["decomposition"][1] == 2
    # by hand: alpha * (M - 1 * cos(slice_k))^2, mean over aspects, summed over the pairs
    with torch.no_grad():
        inputs = _tokenize(tok, [p.a for p in batch] + [p.b for p in batch], 16, "cpu")
        e = mean_pool(enc, **inputs)
    want = 0.0
    for i, p in enumerate(batch):
        errs = [
            (p.scores[k] - float(torch.nn.functional.cosine_similarity(
                e[i, 2 * k : 2 * k + 2], e[2 + i, 2 * k : 2 * k + 2], dim=0))) ** 2
            for k in range(15)
        ]  # fmt: skip
        want += cfg.alpha * sum(errs) / 15
    assert cfg.alpha == 0.25  # the default
    assert float(terms["decomposition"][0].detach()) == pytest.approx(want, rel=1e-5)


def test_length_chunks_give_the_same_loss_and_embed_keeps_the_row_order(tiny_model):
    from parasim.train.core.encoder import load_training_encoder

    enc, tok = load_training_encoder(tiny_model)
    teacher = copy.deepcopy(enc).eval()
    model = build_s3bert(enc, 15).eval()
    rng = random.Random(3)
    batch = [
        Pair(" ".join(rng.sample(WORDS[:30], rng.randint(1, 12))),
                    " ".join(rng.sample(WORDS[:30], rng.randint(1, 12))), "g",
                    tuple(rng.random() for _ in range(15)))
        for _ in range(7)
    ]  # fmt: skip
    got = {}
    for n in (1, 3, 20):
        _, cfg = s3bert_settings(settings(tiny_model, length_chunks=n))
        terms = s3bert_loss(tok, teacher, cfg)(model, batch)
        got[n] = {k: float(v[0].detach()) for k, v in terms.items()}
    for n in (3, 20):
        for k in got[1]:
            assert got[n][k] == pytest.approx(got[1][k], rel=1e-5, abs=1e-9), (n, k)
    texts = [p.a for p in batch]
    sorted_rows = embed(enc, tok, texts, 16, batch_size=2)
    one_by_one = [embed(enc, tok, [t], 16, batch_size=1)[0] for t in texts]
    assert sorted_rows == pytest.approx(np.stack(one_by_one), abs=1e-5)
    assert embed(enc, tok, [], 16).shape == (0, enc.config.hidden_size)


def test_training_learns_the_aspects_keeps_frozen_layers_and_writes_the_model(tmp_path, tiny_model):
    from safetensors.torch import load_file

    from parasim.train.core.storage import load_weights

    out = tmp_path / "s3bert"
    metrics = train_s3bert(toy_rows(400), out, settings(tiny_model))
    for name in ("model/config.json", "model/s3bert.json", "model/README.md", "README.md",
                 "metrics.json", "training_curve.png"):  # fmt: skip
        assert (out / name).exists(), name
    assert not (out / "checkpoints").exists() and not (out / "best").exists()
    hist = json.loads((out / "history.json").read_text())
    losses = [h["loss"] for h in hist if h["kind"] == "train"]
    assert sum(losses[-5:]) / 5 < 0.8 * sum(losses[:5]) / 5
    # the Negation sub-embedding learnt what the untrained model's random 2 dims do not know
    neg = metrics["aspects"]["negation"]
    assert neg["s3bert"] is not None and neg["s3bert"] > 0.3
    assert neg["s3bert"] > (neg["sb_rand"] or 0) + 0.2
    assert set(metrics["aspects"]) == set(ASPECTS)
    # frozen: embeddings and the first two layers; tuned: the last layer
    before = load_file(str(Path(tiny_model) / "model.safetensors"))
    after = load_weights(out / "model")
    strip = {k.removeprefix("bert."): v for k, v in before.items()}
    for k, v in after.items():
        k0 = k.removeprefix("bert.")
        if k0.startswith(("embeddings.", "encoder.layer.0.", "encoder.layer.1.")):
            assert torch.equal(v, strip[k0]), k
    assert any(
        not torch.equal(v, strip[k.removeprefix("bert.")])
        for k, v in after.items()
        if "encoder.layer.2." in k
    )
    model, _, info = load_s3bert(out / "model")
    assert info["aspects"] == list(ASPECTS) and info["slices"]["smatch"] == [0, 2]
    assert model.beta.shape == (15,) and info["target_scaling"] is None


def test_minmax_training_saves_its_scaling(tmp_path, tiny_model):
    rows = toy_rows(200)
    metrics = train_s3bert(rows, tmp_path / "m", settings(tiny_model, target_norm="minmax"))
    _, _, info = load_s3bert(tmp_path / "m" / "model")
    _, cfg = s3bert_settings(settings(tiny_model))
    train = s3bert_data(rows, cfg, seed=13).train
    assert metrics["target_norm"] == "minmax"
    assert info["target_scaling"] == target_scaling(train, "minmax")


def test_too_few_dimensions_names_the_config_key(tmp_path, tiny_model):
    with pytest.raises(ConfigError, match="train.s3bert.model: .* has 40 dimensions"):
        train_s3bert(toy_rows(100), tmp_path / "m", settings(tiny_model, feature_dim=16))


def _score_shard(path: Path, n: int, seed: int = 0) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = toy_rows(n, seed)
    table = pa.table(
        {
            "id": [f"r{i}" for i in range(n)],
            "source": rows.pop("source"),
            "pair_id": rows.pop("group"),
            "en_text": rows.pop("text_a"),
            "other_text": ["x"] * n,
            "other_en": rows.pop("text_b"),
            "skip_reason": [None] * n,
            **{k: pa.array(v, pa.float32()) for k, v in rows.items()},
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.slow
def test_train_s3bert_command_reads_score_shards(tmp_path, tiny_model):
    import subprocess
    import sys

    shards = [_score_shard(tmp_path / f"s{k}.parquet", 120, seed=k) for k in range(2)]
    cfg = settings(tiny_model, epochs=1, max_steps=4)
    cmd = [sys.executable, "-m", "parasim.cli", "train-s3bert", "--scores", *map(str, shards),
           "--settings-json", json.dumps(cfg), "--out", str(tmp_path / "m")]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    assert metrics["train"]["step"] == 4 and metrics["data"]["rows"] == 240
    assert metrics["stsb_en_dev_spearman"] == {"before": None, "after": None}  # no --sts
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a"]}), tmp_path / "bad.parquet")
    bad = [*cmd[:5], str(tmp_path / "bad.parquet"), *cmd[7:]]
    proc = subprocess.run(bad, capture_output=True, text=True)
    assert proc.returncode == 2 and "not a score shard with AMR aspects" in proc.stderr
    assert "Traceback" not in proc.stderr
