"""Tests of the seed-001 similarity models (parasim.train.similarity): toy corpora, tiny random
encoders and word vectors, seconds each, nothing downloaded."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")
pytest.importorskip("gensim")

from test_eval import write_msrp  # noqa: E402

from parasim.config import ConfigError, validate_section  # noqa: E402
from parasim.corpus.stage import CORPUS_SCHEMA  # noqa: E402
from parasim.io import rows_to_table, write_table  # noqa: E402
from parasim.train.similarity.model import load_classifier  # noqa: E402
from parasim.train.similarity.msrp import evaluate_msrp  # noqa: E402
from parasim.train.similarity.report import similarity_tables  # noqa: E402
from parasim.train.similarity.settings import (  # noqa: E402
    combined_name,
    similarity_partitions,
    similarity_settings,
)
from parasim.train.similarity.training import train_similarity, vote  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
WORDS = [f"w{i}" for i in range(30)]
CORPUS = {
    "partitions": {
        "EN-FR-G": {"lang_pair": "en-fr", "domains": ["government"]},
        "EN-ES-IB": {"lang_pair": "en-es", "domains": ["insurance", "banking"]},
    }
}


def sentence(rng: random.Random) -> list[str]:
    return rng.sample(WORDS, rng.randint(3, 6))


def translate(words: list[str], lang: str) -> str:
    return " ".join(f"{lang}{w}" for w in words)


def toy_rows(partition: str, lang: str, n_train: int, n_test: int, folds: int, seed: int):
    """Balanced rows: a positive's other side is its word-by-word translation (``fr`` + word), a
    negative's is the translation of another sentence."""
    rng = random.Random(seed)
    rows = []
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            en = sentence(rng)
            label = i % 2
            other = en if label else sentence(rng)
            rows.append(
                {
                    "id": f"{partition}-{split}-{i}", "sentence1": " ".join(en),
                    "sentence2": translate(other, lang), "label": label,
                    "lang_pair": f"en-{lang}", "partition": partition, "domain": "d", "site": "toy",
                    "source": "aligned" if label else "lda-negative", "pair_id": f"p{i}",
                    "pair_id2": f"p{i}", "url1": "u", "url2": "u", "idx1": [0], "idx2": [0],
                    "split": split, "fold": (i // 2) % folds if split == "train" else None,
                }
            )  # fmt: skip
    return rows


def graded(rows: list[dict]) -> list[dict]:
    """The rows with their grade (the corpus's since schema version 2): label 1 equivalent,
    label 0 unrelated (seed 001's negatives)."""
    return [{"grade": "equivalent" if r["label"] else "unrelated", **r} for r in rows]


def write_corpus(root: Path, parts: dict[str, list[dict]]) -> Path:
    for p, rows in parts.items():
        for split in ("train", "test"):
            sub = [r for r in rows if r["split"] == split]
            if sub:
                path = root / "data" / p / f"{split}-00000-of-00001.parquet"
                write_table(rows_to_table(graded(sub), CORPUS_SCHEMA), path)
    return root


@pytest.fixture(scope="module")
def toy_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("corpus")
    return write_corpus(
        root,
        {
            "EN-FR-G": toy_rows("EN-FR-G", "fr", 96, 24, 3, 1),
            "EN-ES-IB": toy_rows("EN-ES-IB", "es", 72, 24, 3, 2),
        },
    )


@pytest.fixture(scope="module")
def vectors_file(tmp_path_factory) -> Path:
    """word2vec text vectors, 8-d; a word and its translations share one vector (aligned space,
    as MUSE)."""
    g = torch.Generator().manual_seed(0)
    path = tmp_path_factory.mktemp("vec") / "toy.vec"
    lines = []
    for w in WORDS:
        v = " ".join(f"{x:.5f}" for x in torch.randn(8, generator=g).tolist())
        lines += [f"{w} {v}", f"fr{w} {v}", f"es{w} {v}"]
    path.write_text(f"{len(lines)} 8\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def tiny_bert(tmp_path_factory) -> str:
    """A random 2-layer BERT (hidden 16) with a WordLevel tokenizer over the toy words."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    d = tmp_path_factory.mktemp("tiny-bert")
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
    words = WORDS + [f"fr{w}" for w in WORDS] + [f"es{w}" for w in WORDS]
    vocab = {w: i for i, w in enumerate(specials + words)}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="[UNK]", pad_token="[PAD]", cls_token="[CLS]",
        sep_token="[SEP]",
    )  # fmt: skip
    fast.save_pretrained(d)
    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=len(vocab), hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=32, max_position_embeddings=32, hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    BertModel(cfg).save_pretrained(d)
    return str(d)


def settings(encoder: str, **own) -> dict:
    """A validated ``train:`` section: float32 on one CPU thread, tiny models."""
    base = {
        "bilstm": {"hidden": 8, "fc": 8, "dropout": 0.0, "learning_rate": 0.02, "epochs": 6,
                   "batch_size": 16, "max_length": 16},
        "biencoder": {"fc": 8, "dropout": 0.0, "prefix": "", "learning_rate": 1e-3,
                      "max_steps": 3, "batch_size": 8, "max_length": 16, "max_folds": 2},
    }[encoder]  # fmt: skip
    return validate_section(
        "train",
        {
            "device": "cpu", "dtype": "float32", "threads": 1, "log_every": 1,
            "checkpoint_every": 0, "similarity": {encoder: {**base, **own}},
        },
    )  # fmt: skip


def run(corpus, tmp_path, encoder, partition, section, name="m"):
    out, ev = tmp_path / "models" / name, tmp_path / "eval" / name
    metrics = train_similarity(corpus, out, ev, encoder, partition, section, CORPUS)
    return metrics, out, ev


# --- measures ----------------------------------------------------------------------------------


def test_max_and_average_voting_on_a_hand_made_case():
    probs = [[0.9, 0.6, 0.4, 0.2], [0.4, 0.45, 0.7, 0.1], [0.8, 0.1, 0.45, 0.3]]
    mx, avg = vote(probs)
    assert mx == [1, 0, 0, 0]  # hard votes 2:1, 1:2, 1:2, 0:3
    assert avg == [1, 0, 1, 0]  # mean 0.517 in column 3: the two methods disagree
    # a tie (2 models) goes to the mean probability
    mx, avg = vote([[0.9, 0.51], [0.2, 0.0]])
    assert mx == avg == [1, 0]


def test_partitions_settings_and_combined_name():
    section = validate_section("train", {})
    corpus = validate_section("corpus", {})
    names = similarity_partitions(corpus, section)
    assert names[:-1] == list(corpus["partitions"]) and names[-1] == "EN-ES-FR"
    # the name does not depend on the partitions' order (the rules pass them as sorted JSON)
    reverse = dict(reversed(list(CORPUS["partitions"].items())))
    assert combined_name(CORPUS["partitions"]) == combined_name(reverse) == "EN-ES-FR"
    args, cfg, sim = similarity_settings({**section, "seed": 5}, "bilstm")
    assert args.seed == 5 and cfg.dropout == 0.5 and args.learning_rate == 1e-3
    args, cfg, _ = similarity_settings(section, "biencoder")
    assert cfg.model == "e5-torch" and args.max_steps == 12
    with pytest.raises(ConfigError, match=r"train\.similarity\.bilstm: unknown key"):
        similarity_settings({"similarity": {"bilstm": {"hiden": 3}}}, "bilstm")
    with pytest.raises(ConfigError):
        validate_section("train", {"similarity": {"encoders": ["lstm"]}})


# --- the protocol ------------------------------------------------------------------------------


def test_bilstm_protocol_on_a_toy_corpus(tmp_path, toy_corpus, vectors_file):
    section = settings("bilstm", word_vectors=str(vectors_file))
    metrics, out, ev = run(toy_corpus, tmp_path, "bilstm", "EN-FR-G", section)
    cv = json.loads((ev / "cv.json").read_text())
    test = json.loads((ev / "test.json").read_text())
    assert cv["folds_trained"] == 3 and len(cv["fold_accuracy"]) == 3
    # aligned vectors: translations look alike; the model learns it, far above the majority class
    assert cv["mean"] > 0.8 and cv["baselines"]["majority_class"]["mean"] == pytest.approx(0.5)
    assert cv["avg_voting"] > 0.8 and cv["max_voting"] > 0.8
    # cross-corpus: the test split of every partition, pooled per language pair and over all
    assert set(test["partitions"]) == {"EN-FR-G", "EN-ES-IB"}
    assert set(test["lang_pairs"]) == {"en-fr", "en-es", "all"}
    assert test["lang_pairs"]["all"]["rows"] == 48
    for r in test["lang_pairs"].values():
        assert {"majority_baseline", "untrained_cosine_baseline", "avg_voting"} <= set(r)
    for f in ("metrics.json", "README.md", "training_curve.png", "model/similarity.json"):
        assert (out / f).exists(), f
    assert metrics["pairs_per_s"] > 0 and metrics["peak_rss_mb"] > 0
    # the saved model is the best fold model: reloaded, it gives that fold's test predictions
    best = json.loads((out / "folds" / f"fold-{test['best_fold']}" / "result.json").read_text())
    model = load_classifier(out / "model")
    from parasim.train.similarity.data import read_split
    from parasim.train.similarity.model import predict

    probs = predict(model, read_split(toy_corpus, "EN-ES-IB", "test"), 64)
    assert probs == pytest.approx(best["test_probs"]["EN-ES-IB"], abs=1e-5)

    # a rerun keeps finished folds; one lost fold is retrained to the same result (seeded)
    (out / "folds" / "fold-1" / "result.json").unlink()
    again, _, _ = run(toy_corpus, tmp_path, "bilstm", "EN-FR-G", section)
    assert again["cv"]["fold_accuracy"] == metrics["cv"]["fold_accuracy"]


def test_combined_partition_trains_on_every_partition(tmp_path, toy_corpus, vectors_file):
    section = settings("bilstm", word_vectors=str(vectors_file), epochs=1, max_folds=2)
    corpus = dict(reversed(list(CORPUS["partitions"].items())))
    out, ev = tmp_path / "m", tmp_path / "e"
    metrics = train_similarity(
        toy_corpus, out, ev, "bilstm", "EN-ES-FR", section, {"partitions": corpus}
    )
    assert sorted(metrics["members"]) == ["EN-ES-IB", "EN-FR-G"]
    assert metrics["data"]["train_rows"] == 96 + 72


def test_bilstm_on_a_transformers_encoders_input_embeddings(tmp_path, toy_corpus, tiny_bert):
    section = settings("bilstm", word_vectors=tiny_bert, epochs=1, max_folds=2)
    metrics, out, _ = run(toy_corpus, tmp_path, "bilstm", "EN-ES-IB", section)
    assert metrics["settings"]["vectors_source"] == "encoder"
    vocab = json.loads((out / "model" / "vocab.json").read_text())
    assert "esw1" in vocab and (out / "model" / "tokenizer").is_dir()
    # the rows are the encoder's input embeddings
    from transformers import AutoModel, AutoTokenizer

    bert, tok = AutoModel.from_pretrained(tiny_bert), AutoTokenizer.from_pretrained(tiny_bert)
    model = load_classifier(out / "model")
    row = model.encoder.embed.weight[vocab.index("esw1")]
    table = bert.get_input_embeddings().weight
    assert torch.allclose(row, table[tok.convert_tokens_to_ids("esw1")])


def test_biencoder_protocol_and_model_folder(tmp_path, toy_corpus, tiny_bert):
    section = settings("biencoder", model=tiny_bert)
    metrics, out, ev = run(toy_corpus, tmp_path, "biencoder", "EN-FR-G", section)
    assert metrics["cv"]["fold_accuracy"].keys() == {"0", "1"}
    assert metrics["cv"]["baselines"]["untrained_cosine"]["mean"] is not None
    model = load_classifier(out / "model")
    assert model.kind == "biencoder" and (out / "model" / "config.json").exists()
    # the input embeddings stay frozen by default
    from transformers import AutoModel

    start = AutoModel.from_pretrained(tiny_bert).get_input_embeddings().weight
    assert torch.equal(model.encoder.encoder.get_input_embeddings().weight, start)
    # step 0 counts: model/ ships the untrained cosine exactly when it beats the fold models on
    # the held-out folds, and then answers by the cosine at its threshold
    cv = metrics["cv"]
    wins = cv["baselines"]["untrained_cosine"]["mean"] > cv["mean"]
    assert metrics["shipped_start"] is wins
    assert (model.info.get("decision") == "cosine") is wins
    from parasim.train.similarity.data import read_split
    from parasim.train.similarity.model import cosines, predict

    test = read_split(toy_corpus, "EN-FR-G", "test")
    model.info.update(decision="cosine", threshold=0.5)
    cos = cosines(model, test, 8)
    assert predict(model, test, 8) == [float(c > 0.5) for c in cos]


# --- the graded corpus (issue 49) ---------------------------------------------------------------


def divergent_rows(rows: list[dict], per_positive: int, seed: int) -> list[dict]:
    """``per_positive`` divergent rows per positive: its translation with one word swapped
    (label 0, the positive's split and fold, ``parent_id`` its id)."""
    rng = random.Random(seed)
    out = []
    for r in rows:
        if not r["label"]:
            continue
        for k in range(per_positive):
            words = r["sentence2"].split()
            words[rng.randrange(len(words))] = f"{r['lang_pair'][3:]}{rng.choice(WORDS)}"
            out.append({**r, "id": f"{r['id']}-d{k}", "label": 0, "grade": "divergent",
                        "parent_id": r["id"], "source": "synthetic",
                        "sentence2": " ".join(words)})  # fmt: skip
    return out


@pytest.fixture(scope="module")
def graded_corpus(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("graded")
    for p, lang, seed in (("EN-FR-G", "fr", 1), ("EN-ES-IB", "es", 2)):
        rows = graded(toy_rows(p, lang, 48, 24, 3, seed))
        rows += divergent_rows(rows, 2, seed)
        for split in ("train", "test"):
            sub = [r for r in rows if r["split"] == split]
            path = root / "data" / p / f"{split}-00000-of-00001.parquet"
            write_table(rows_to_table(sub, CORPUS_SCHEMA), path)
    return root


def test_graded_rows_take_divergent_hard_negatives_per_positive(graded_corpus):
    from parasim.train.similarity.data import read_split
    from parasim.train.similarity.training import GRADE_CLASS, targets

    binary = read_split(graded_corpus, "EN-FR-G", "train", "binary")
    assert len(binary) == 48 and set(binary.grade) == {"equivalent", "unrelated"}
    drawn: Counter = Counter()
    one = read_split(graded_corpus, "EN-FR-G", "train", "graded", 1, seed=0, counts=drawn)
    assert len(one) == 48 + 24 and one.grade.count("divergent") == 24  # 24 positives, 1 each
    # the spare divergent rows left out are counted, not dropped unsaid
    assert drawn["divergent"] == 24 and drawn["divergent_spare_left_out"] == 24
    assert read_split(graded_corpus, "EN-FR-G", "train", "graded", 1, seed=0) == one  # seeded
    other_seed = read_split(graded_corpus, "EN-FR-G", "train", "graded", 1, seed=5)
    assert other_seed.s2 != one.s2 and len(other_seed) == len(one)
    two = read_split(graded_corpus, "EN-FR-G", "train", "graded", 5)
    assert two.grade.count("divergent") == 48  # all there are
    # a divergent row keeps its parent's fold; the three classes, class 1 similar
    for s1, f, g in zip(one.s1, one.fold, one.grade, strict=True):
        if g == "divergent":
            assert f in {ff for ss, ff, gg in zip(one.s1, one.fold, one.grade, strict=True)
                         if ss == s1 and gg == "equivalent"}  # fmt: skip
    assert targets(one, 3) == [GRADE_CLASS[g] for g in one.grade]
    assert targets(one, 2) == one.label


def test_graded_bilstm_learns_three_classes_and_reports_each_grade(
    tmp_path, graded_corpus, vectors_file
):
    section = settings("bilstm", word_vectors=str(vectors_file), epochs=2, max_folds=2)
    metrics, out, ev = run(graded_corpus, tmp_path, "bilstm", "EN-FR-G", section)
    assert metrics["data"]["train_divergent"] == 24
    assert metrics["data"]["train_divergent_spare_left_out"] == 24
    assert metrics["data"]["train_divergent_parent_not_in_split"] == 0
    model = load_classifier(out / "model")
    assert model.info["classes"] == 3 and model.head.net[-1].out_features == 3
    test = json.loads((ev / "test.json").read_text())
    grades = test["lang_pairs"]["all"]["by_grade"]
    assert {g: v["rows"] for g, v in grades.items()} == {
        "divergent": 24, "equivalent": 24, "unrelated": 24,
    }  # fmt: skip
    for v in grades.values():
        assert 0 <= v["best_fold_model"] <= 1 and 0 <= v["untrained_cosine_baseline"] <= 1
    assert "(its divergent rows too)" in metrics["verdict"]["evaluated_on"]
    card = (out / "README.md").read_text()
    assert "three classes" in card and "test divergent rows" in card
    # seed 001's protocol stays: two classes, no divergent rows, no per-grade figures
    section["similarity"]["grades"] = "binary"
    section = validate_section("train", section)
    metrics, out, ev = run(graded_corpus, tmp_path, "bilstm", "EN-FR-G", section, name="b")
    assert "train_divergent" not in metrics["data"] and metrics["data"]["train_rows"] == 48
    assert "classes" not in json.loads((out / "model" / "similarity.json").read_text())
    assert "by_grade" not in json.loads((ev / "test.json").read_text())["lang_pairs"]["all"]


# --- bad input ---------------------------------------------------------------------------------


def test_bad_partitions_are_skipped_models_with_their_reason(tmp_path, vectors_file):
    one_fold = toy_rows("EN-FR-G", "fr", 12, 4, 1, 3)
    one_class = [r for r in toy_rows("EN-ES-IB", "es", 24, 4, 2, 4)]
    for r in one_class:  # fold 0 all similar, fold 1 all dissimilar
        if r["split"] == "train":
            r["fold"] = 0 if r["label"] else 1
    corpus = write_corpus(tmp_path / "c", {"EN-FR-G": one_fold, "EN-ES-IB": one_class})
    section = settings("bilstm", word_vectors=str(vectors_file), epochs=1)

    m, out, ev = run(corpus, tmp_path, "bilstm", "EN-FR-G", section, "few")
    few = m["skipped"]
    assert "at least 2 non-empty folds" in m["skipped"]
    assert json.loads((ev / "cv.json").read_text())["skipped"] == m["skipped"]
    assert (out / "README.md").exists() and (out / "training_curve.png").exists()

    m, _, _ = run(corpus, tmp_path, "bilstm", "EN-ES-IB", section, "oneclass")
    assert m["skipped"].startswith("every fold was skipped")
    assert "one class" in m["skipped"]

    m, _, _ = run(corpus, tmp_path, "bilstm", "EN-FR-IB", section, "absent")
    assert "no training rows" in m["skipped"]

    html, summary = similarity_tables([tmp_path / "eval" / n for n in ("few", "absent")])
    assert "Skipped models" in html and summary["few"]["skipped"] == few
    assert summary["absent"]["skipped"] == m["skipped"]
    assert "at least 2 non-empty folds" in html


@pytest.mark.slow
def test_cli_writes_a_skipped_model_and_exits_0(tmp_path, vectors_file):
    corpus = write_corpus(tmp_path / "c", {"EN-FR-G": toy_rows("EN-FR-G", "fr", 8, 2, 1, 5)})
    section = json.dumps(settings("bilstm", word_vectors=str(vectors_file)))
    cmd = [
        sys.executable, "-m", "parasim.cli", "train-similarity", "--corpus", str(corpus),
        "--encoder", "bilstm", "--partition", "EN-FR-G", "--settings-json", section,
        "--out", str(tmp_path / "m"), "--eval-out", str(tmp_path / "e"),
    ]  # fmt: skip
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": str(Path(sys.executable).parent)}
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "skipped" in json.loads((tmp_path / "m" / "metrics.json").read_text())


# --- MSRP --------------------------------------------------------------------------------------


def test_msrp_transfer(tmp_path, toy_corpus, vectors_file):
    section = settings("bilstm", word_vectors=str(vectors_file), epochs=2, max_folds=2)
    _, out, _ = run(toy_corpus, tmp_path, "bilstm", "EN-FR-G", section)
    msrp = write_msrp(tmp_path / "msrp", 40, 30)
    res = evaluate_msrp(out / "model", msrp, section)
    assert res["train_rows"] == 40 and res["test_rows"] == 30
    for k in ("zero_shot", "transfer", "from_scratch", "majority_baseline"):
        assert 0 <= res[k] <= 1, k
    assert res["majority_baseline"] == pytest.approx(20 / 30)
    assert res["transfer_steps"] == res["from_scratch_steps"] > 0


# --- workflow ----------------------------------------------------------------------------------


def test_workflow_plans_one_model_per_encoder_and_partition(tmp_path):
    """Dry run of the similarity target: every encoder x (partition + combined), MSRP when set."""
    import os

    import yaml

    cfg = yaml.safe_load((ROOT / "config.yaml").read_text())
    for site in cfg["sites"]:
        site["serve_dir"] = str(ROOT / site["serve_dir"])
    msrp = write_msrp(tmp_path / "msrp", 3, 3)
    cfg["eval"] = {"msrp_dir": str(msrp)}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(cfg))
    cmd = [
        sys.executable, "-m", "snakemake", "results/models/similarity.done",
        "--snakefile", str(ROOT / "Snakefile"), "--directory", str(tmp_path),
        "--configfile", str(tmp_path / "config.yaml"), "--cores", "2", "-n", "--quiet", "rules",
    ]  # fmt: skip
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ))
    assert p.returncode == 0, p.stdout + p.stderr
    counts = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].isdigit():
            counts[parts[0]] = int(parts[1])
    n = 2 * (len(validate_section("corpus", cfg.get("corpus", {}))["partitions"]) + 1)
    assert counts["train_similarity"] == n
    assert counts["eval_similarity_msrp"] == n
    assert counts["similarity_report"] == 1


def test_the_head_gets_its_own_learning_rate():
    from parasim.train.similarity.training import head_groups

    model = torch.nn.Module()
    model.body, model.head = torch.nn.Linear(3, 3), torch.nn.Linear(3, 2)
    groups = head_groups(1e-2)(model)
    opt = torch.optim.AdamW(groups, lr=1e-5)
    assert [g["lr"] for g in opt.param_groups] == [1e-5, 1e-2]
    assert len(opt.param_groups[1]["params"]) == 2 and head_groups(None) is None
