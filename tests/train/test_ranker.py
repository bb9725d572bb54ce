"""Tests of the divergence ranker (parasim.train.ranker): tiny random BERT models and toy
divergences, seconds each, offline."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from conftest import TOY_WORDS as WORDS  # noqa: E402
from conftest import make_tiny_bert  # noqa: E402

from parasim.config import ConfigError  # noqa: E402
from parasim.divergences import DIVERGENCES_SCHEMA  # noqa: E402
from parasim.io import rows_to_table, stable_id, write_table  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: The word-level tiny model under its earlier name (test_align_encoder.py imports it).
make_tiny_model = make_tiny_bert
TYPES = ["equivalent", "lexical_substitution", "phrase_replacement", "subtree_deletion"]


# --- tiny model and toy data ------------------------------------------------------------------


def toy_rows(n_groups: int, seed: int = 0, site: str = "toy") -> list[dict]:
    """Ranking groups: an equivalent pair (wK <-> fwK) and three divergences of growing size.

    Seed words come from the first 16 words and replacements from the last 8, so that a tiny
    model separates the ranks in a few dozen steps."""
    import random

    rng = random.Random(seed)
    rows = []
    for g in range(n_groups):
        en = rng.sample(WORDS[:16], 6)
        other = [f"f{w}" for w in en]
        gid = stable_id(site, "g", str(g))
        for rank, typ in enumerate(TYPES):
            e, o = list(en), list(other)
            e_div, o_div = [False] * 6, [False] * 6
            for k in range(rank):  # replace `rank` English words: they and their links are DIV
                e[k] = rng.choice(WORDS[16:])
                e_div[k] = o_div[k] = True
            rows.append(
                {
                    "id": stable_id(gid, typ), "group_id": gid, "seed_id": gid,
                    "pair_id": stable_id(site, "page", str(g % 5)), "site": site,
                    "lang_pair": "en-fr", "other_lang": "fr", "type": typ, "rank": rank,
                    "side": "en" if rank else "none", "variant": 0,
                    "en_text": " ".join(e), "other_text": " ".join(o),
                    "en_tokens": e, "other_tokens": o,
                    "en_tags": ["DIV" if x else "EQ" for x in e_div],
                    "other_tags": ["DIV" if x else "EQ" for x in o_div],
                    "src_spans": [], "new_spans": [], "checks_failed": [],
                }
            )  # fmt: skip
    return rows


def write_toy(path: Path, rows: list[dict]) -> Path:
    write_table(rows_to_table(rows, DIVERGENCES_SCHEMA), path)
    return path


def settings(model: str, **over) -> dict:
    """A ``train:`` section for the tiny model: float32 on the CPU, no dropout."""
    ranker = {
        "model": model, "learning_rate": 1e-3, "batch_size": 8, "epochs": 2, "max_steps": None,
        "eval_every": 0, "patience": 0, "max_length": 32, "dev_fraction": 0.2, "dropout": 0.0,
        "margin": 1.0, "freeze_embeddings": False, "length_chunks": 1,
    }  # fmt: skip
    ranker.update(over.pop("ranker", {}))
    return {"device": "cpu", "dtype": "float32", "threads": 1, "log_every": 1,
            "checkpoint_every": 0, **over, "divergence_ranker": ranker}  # fmt: skip


def model_weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    from parasim.train.core.storage import load_weights

    w = load_weights(folder)
    w.update(
        {f"head.{k}": v for k, v in load_file(str(folder / "ranker_heads.safetensors")).items()}
    )
    return w


def model_weights_encoder(folder: Path) -> dict:
    from parasim.train.core.storage import load_weights

    return load_weights(folder)


def max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k].float() - b[k].float()).abs().max()) for k in a)


# --- the loop's pieces --------------------------------------------------------------------------


def test_settings_split_shared_and_ranker_keys():
    from parasim.config import validate_section
    from parasim.train.ranker.settings import ranker_settings

    args, cfg = ranker_settings(validate_section("train", settings("m", seed=7)))
    assert (args.seed, args.learning_rate, args.device, cfg.model) == (7, 1e-3, "cpu", "m")
    with pytest.raises(ConfigError, match="margin"):
        validate_section("train", {"divergence_ranker": {"margin": -1}})


# --- data and bad input -----------------------------------------------------------------------


def test_bad_input_is_a_counted_skip(tmp_path, tiny_model):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parasim.train.ranker.data import ranker_data
    from parasim.train.ranker.settings import RankerConfig

    rows = toy_rows(6)
    only_eq = [r for r in toy_rows(1, seed=5, site="eq") if r["rank"] == 0]
    no_tags = toy_rows(1, seed=6, site="nt")
    for r in no_tags[1:]:
        r["en_tags"] = []
    good = write_toy(tmp_path / "good.parquet", rows + only_eq + no_tags)
    other = tmp_path / "positives-like.parquet"
    pq.write_table(pa.table({"id": ["a"], "en_text": ["x"]}), other)
    empty = write_toy(tmp_path / "empty.parquet", [])
    test_pair = rows[0]["pair_id"]
    data = ranker_data(
        [good, other, empty], {test_pair}, RankerConfig.from_config({"dev_fraction": 0.3})
    )
    c = data.counts
    assert c["shards_without_groups"] == 1 and c["shards_empty"] == 1
    assert c["rows_bad_tags"] == 3
    assert c["groups_without_contrast"] == 2  # the equivalent alone, and the one left alone
    assert c["groups_test_split"] == sum(r["pair_id"] == test_pair for r in rows) // 4
    kept = 6 - c["groups_test_split"]
    assert c["train_groups"] + c["dev_groups"] == kept
    assert c["train_pairs"] == 3 * c["train_groups"]  # ranking: eq>lex>phrase>subtree
    assert all(data.items[x].rank + 1 == data.items[y].rank for x, y in data.train)


def test_streamed_shards_give_the_same_pairs_as_in_memory(tmp_path):
    from parasim.train.core.data import use_streaming
    from parasim.train.ranker.data import ranker_data
    from parasim.train.ranker.settings import RankerConfig

    shards = [
        write_toy(tmp_path / f"{i}.parquet", toy_rows(5, seed=i, site=f"s{i}")) for i in (0, 1)
    ]
    a = ranker_data(shards, (), RankerConfig.from_config({"streaming": False, "dev_fraction": 0.3}))
    b = ranker_data(shards, (), RankerConfig.from_config({"streaming": True, "dev_fraction": 0.3}))
    assert (a.items, a.train, a.dev_groups, a.counts) == (b.items, b.train, b.dev_groups, b.counts)
    assert len(a.train) + 3 * len(a.dev_groups) == 30
    assert not use_streaming(shards) and use_streaming(shards, True)


def test_a_model_that_cannot_load_names_the_config_key(tmp_path, capsys):
    from parasim.cli import main
    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.ranker.settings import MODEL_KEY

    bad = tmp_path / "bad-model"
    bad.mkdir()
    (bad / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match=r"train\.divergence_ranker\.model"):
        load_training_encoder(str(bad), key=MODEL_KEY)
    shard = write_toy(tmp_path / "000.parquet", toy_rows(10))
    cfg = json.dumps(settings(str(bad)))
    args = ["train-divergence-ranker", "--divergences", str(shard), "--out", str(tmp_path / "m")]
    assert main([*args, "--settings-json", cfg]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "train.divergence_ranker.model: cannot load" in err[0], err


def test_subword_labels_follow_their_word(tiny_model):
    from transformers import AutoTokenizer

    from parasim.train.ranker.data import Item
    from parasim.train.ranker.model import encode

    tok = AutoTokenizer.from_pretrained(tiny_model)
    it = Item(("w1", "w2"), ("fw1", "fw2", "fw3"), (True, False), (False, False, True), 1)
    _, labels, _ = encode(tok, [it], 32)
    assert labels[0].tolist() == [-100, 1, 0, -100, 0, 0, 1, -100]


# --- training ---------------------------------------------------------------------------------


def test_training_lowers_the_loss_and_writes_a_model_folder(tmp_path, tiny_model):
    from parasim.train.ranker.model import load_ranker
    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(40))
    out = tmp_path / "ranker"
    metrics = train_divergence_ranker(
        [shard], out, settings(tiny_model, ranker={"epochs": 3, "eval_every": 6})
    )
    hist = [h for h in json.loads((out / "history.json").read_text()) if h["kind"] == "train"]
    losses = [h["loss"] for h in hist]
    assert len(losses) == metrics["train"]["step"] >= 30
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5, losses
    assert metrics["dev"]["dev_pair_accuracy"] > 0.8  # chance: 0.5
    for name in ("README.md", "metrics.json", "training_curve.png", "model/config.json",
                 "model/README.md"):  # fmt: skip
        assert (out / name).exists(), name
    assert not (out / "checkpoints").exists() and not (out / "best").exists()
    card = (out / "README.md").read_text()
    assert "train_pairs" in card and "margin" in card and "dev_pair_accuracy" in card
    model, tok, info = load_ranker(out / "model")
    assert info["threshold"] == metrics["threshold"] and tok.is_fast
    # the encoder alone is a plain HF folder
    from transformers import AutoModel

    assert AutoModel.from_pretrained(out / "model").config.hidden_size == 32


def test_training_is_reproducible_on_the_cpu(tmp_path, tiny_model):
    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(12))
    cfg = settings(tiny_model, ranker={"epochs": 1, "dropout": 0.1})
    train_divergence_ranker([shard], tmp_path / "a", cfg)
    train_divergence_ranker([shard], tmp_path / "b", cfg)
    assert max_diff(model_weights(tmp_path / "a/model"), model_weights(tmp_path / "b/model")) == 0


def test_a_time_limit_stops_cleanly_with_every_output(tmp_path, tiny_model):
    from parasim.train.ranker.model import load_ranker
    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(40))
    out = tmp_path / "ranker"
    # a limit already passed at the first step boundary: one step, then the usual ending
    cfg = settings(tiny_model, max_minutes=1e-9, ranker={"epochs": 3})
    metrics = train_divergence_ranker([shard], out, cfg)
    assert metrics["train"]["stopped"] == "time_limit" and metrics["train"]["step"] == 1
    assert metrics["dev"]["dev_pair_accuracy"] >= 0  # the best model was evaluated
    assert "time_limit" in (out / "README.md").read_text()
    assert load_ranker(out / "model")[2]["threshold"] == metrics["threshold"]
    with pytest.raises(ValueError, match="max_minutes"):
        train_divergence_ranker([shard], tmp_path / "bad", settings(tiny_model, max_minutes=0))


def _cli(out: Path, shard: Path, cfg: dict, *launcher: str) -> list[str]:
    args = ["train-divergence-ranker", "--divergences", str(shard), "--out", str(out)]
    return [*launcher, *args, "--settings-json", json.dumps(cfg)]


def _env() -> dict:
    return {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}


@pytest.mark.slow
def test_a_rerun_after_kill_9_resumes_from_the_last_checkpoint(tmp_path, tiny_model):
    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(40))
    cfg = settings(tiny_model, checkpoint_every=3, ranker={"epochs": 25})
    out = tmp_path / "killed"
    cmd = _cli(out, shard, cfg, sys.executable, "-m", "parasim.cli")
    proc = subprocess.Popen(cmd, env=_env(), start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.time() + 120
    while not list(out.glob("checkpoints/step-*/trainer_state.json")):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "no checkpoint within 120 s"
        time.sleep(0.02)
    time.sleep(0.1)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "metrics.json").exists(), "finished before the kill: make the run longer"
    rerun = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert "resumed from" in rerun.stderr
    resumed = json.loads((out / "metrics.json").read_text())
    assert resumed["train"]["resumed_from"].startswith("step-")
    whole = train_divergence_ranker([shard], tmp_path / "whole", cfg)
    assert whole["train"]["resumed_from"] is None
    assert resumed["train"]["step"] == whole["train"]["step"]
    # same data order, restored optimizer and RNG: the same model (float32, one thread)
    assert max_diff(model_weights(out / "model"), model_weights(tmp_path / "whole/model")) < 1e-6


@pytest.mark.slow
def test_two_processes_train_the_model_of_one(tmp_path, tiny_model):
    """2 CPU processes (gloo, DDP through accelerate) against 1 process.

    Each process takes half of every global batch of 8 pairs and the loss is normalised by
    global counts, so the gradients agree up to float summation order; Adam then amplifies
    those differences where gradients are near 0. Tolerance: the weights differ by less than
    one Adam step (lr 1e-3) and by less than 5% of how far training moved them.
    """
    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(40))
    cfg = settings(tiny_model)
    # torchrun (what `accelerate launch --multi_gpu` runs): accelerate's `--cpu` launcher needs MPI
    launch = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
    ]
    two = subprocess.run(
        _cli(tmp_path / "two", shard, cfg, *launch, "-m", "parasim.cli"),
        env=_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert two.returncode == 0, two.stderr[-3000:]
    m2 = json.loads((tmp_path / "two/metrics.json").read_text())
    assert m2["processes"] == 2
    m1 = train_divergence_ranker([shard], tmp_path / "one", cfg)
    assert m1["processes"] == 1 and m1["train"]["step"] == m2["train"]["step"] > 10
    one, two_w = model_weights(tmp_path / "one/model"), model_weights(tmp_path / "two/model")
    diff = max_diff(one, two_w)
    start = model_weights_encoder(Path(tiny_model))
    moved = max_diff({k: one[k] for k in start}, start)
    assert diff < 1e-3 and diff < 0.05 * moved, (diff, moved)
    assert abs(m1["dev"]["dev_objective"] - m2["dev"]["dev_objective"]) < 1e-3


# --- evaluation ---------------------------------------------------------------------------------


def test_threshold_rule_is_a_validated_option(tmp_path, tiny_model):
    from parasim.train.ranker.settings import RankerConfig
    from parasim.train.ranker.training import dev_threshold, train_divergence_ranker

    scores = [0.1, 0.2, 0.3, 0.35, 0.4, 0.5, 0.6, 0.9]
    div = [False, False, True, False, True, True, True, True]
    assert dev_threshold(scores, div, "macro_f1") != dev_threshold(scores, div, "equal_error")
    with pytest.raises(ValueError, match="train.divergence_ranker.threshold"):
        RankerConfig.from_config({"threshold": "oracle"})
    shard = write_toy(tmp_path / "000.parquet", toy_rows(20))
    for rule in ("equal_error", "macro_f1"):
        cfg = settings(tiny_model, ranker={"epochs": 1, "threshold": rule})
        m = train_divergence_ranker([shard], tmp_path / rule, cfg)
        info = json.loads((tmp_path / rule / "model" / "ranker.json").read_text())
        assert info["threshold_rule"] == rule and info["threshold"] == m["threshold"]


def write_refresd(ref: Path) -> Path:
    """A three-pair REFreSD dev folder (sentence labels and rationales, the real files' layout)."""
    ref.mkdir(parents=True)
    lines = [
        ("equivalent", "no_meaning_difference", "w1 w2 w3", "fw1 fw2 fw3", "0 0 0", "0 0 0"),
        ("divergent", "some_meaning_difference", "w1 w20 w3", "fw1 fw2 fw3", "0 3 0", "0 2 0"),
        ("divergent", "unrelated", "w20 w21", "fw4 fw5 fw6", "3 3", "3 3 3"),
    ]
    head = "#binary_label\t#3_labels\t#english_sentence\t#french_sentence"
    (ref / "sentence_labels.dev.tsv").write_text(
        "\n".join([head] + ["\t".join(r[:4]) for r in lines]) + "\n"
    )
    (ref / "rationale.dev.tsv").write_text(
        "\n".join([head + "\t#en_r\t#fr_r"] + ["\t".join(r) for r in lines]) + "\n"
    )
    return ref


def test_eval_ranker_writes_the_refresd_measures(tmp_path, tiny_model):
    from parasim.cli import main

    shard = write_toy(tmp_path / "000.parquet", toy_rows(20))
    cfg = json.dumps(settings(tiny_model, ranker={"epochs": 1}))
    assert main(["train-divergence-ranker", "--divergences", str(shard),
                 "--out", str(tmp_path / "m"), "--settings-json", cfg]) == 0  # fmt: skip
    ref = write_refresd(tmp_path / "data" / "refresd")
    out = tmp_path / "eval" / "refresd.json"
    assert main(["eval-divergence-ranker", "--model", str(tmp_path / "m/model"),
                 "--refresd", str(ref), "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert res["n_pairs"] == 3
    assert set(res["sentence"]) == {"equivalent", "divergent", "weighted"}
    assert res["baselines"]["all_divergent_weighted_f1"] == pytest.approx(2 / 3 * 0.8)
    base = res["baselines"]["untrained_encoder_cosine"]
    assert set(base) == {"equivalent", "divergent", "weighted"}
    tok = res["tokens_some_meaning_difference"]
    assert tok["pairs"] == 1 and tok["words"] == 6
    assert tok["union"]["gold_div_share"] == pytest.approx(2 / 6)


def test_the_verdict_is_taken_on_refresd_when_it_is_there(tmp_path, tiny_model):
    from parasim.cli import main

    shard = write_toy(tmp_path / "000.parquet", toy_rows(20))
    cfg = json.dumps(settings(tiny_model, ranker={"epochs": 1}))
    ref = write_refresd(tmp_path / "data" / "refresd")
    args = ["train-divergence-ranker", "--divergences", str(shard), "--settings-json", cfg]
    assert main([*args, "--out", str(tmp_path / "m"), "--refresd", str(ref)]) == 0
    metrics = json.loads((tmp_path / "m" / "metrics.json").read_text())
    v = metrics["verdict"]
    assert v["measure"] == "REFreSD dev weighted F1" and v["n"] == 3
    assert v["verdict"] == "too little data to tell"  # 3 pairs: under the cut-off
    assert metrics["verdict_synthetic_dev"]["measure"] == "synthetic dev macro F1"
    # the figures are eval-divergence-ranker's on the same model
    out = tmp_path / "eval.json"
    assert main(["eval-divergence-ranker", "--model", str(tmp_path / "m/model"),
                 "--refresd", str(ref), "--out", str(out)]) == 0  # fmt: skip
    res = json.loads(out.read_text())
    assert v["model"] == pytest.approx(res["weighted_f1"])
    assert v["baseline"] == pytest.approx(
        res["baselines"]["untrained_encoder_cosine"]["weighted"]["f1"]
    )
    assert "REFreSD" in (tmp_path / "m" / "README.md").read_text()
    # no REFreSD where it was said to be: the synthetic dev split's verdict, said in the log
    assert main([*args, "--out", str(tmp_path / "n"), "--refresd", str(tmp_path / "none")]) == 0
    metrics = json.loads((tmp_path / "n" / "metrics.json").read_text())
    assert metrics["verdict"]["measure"] == "synthetic dev macro F1"
    assert "verdict_synthetic_dev" not in metrics


# --- issue 14 follow-up: skips, frozen embeddings, the best model's dev results, offline names ---


def test_no_training_pair_is_a_counted_skip_that_still_writes_the_outputs(tmp_path, tiny_model):
    """Every site empty (or only lone equivalents): no model, but the rule's outputs say why, so
    `rule all` goes on; the CLI exits 0."""
    from parasim.cli import main

    lone = [r for r in toy_rows(3) if r["rank"] == 0]
    shards = [write_toy(tmp_path / "empty.parquet", []), write_toy(tmp_path / "eq.parquet", lone)]
    out = tmp_path / "m"
    args = ["train-divergence-ranker", "--divergences", *map(str, shards), "--out", str(out)]
    assert main([*args, "--settings-json", json.dumps(settings(tiny_model))]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["skipped"].startswith("no contrastive training pair in 2 shard(s)")
    assert metrics["data"]["shards_empty"] == 1
    assert metrics["data"]["groups_without_contrast"] == 3
    assert "No model was trained" in (out / "README.md").read_text()
    assert (out / "model" / "README.md").exists() and (out / "training_curve.png").exists()
    with pytest.raises(FileNotFoundError, match="not a divergence ranker"):
        from parasim.train.ranker.model import load_ranker

        load_ranker(out / "model")


def test_frozen_embeddings_stay_fixed_while_the_layers_train(tmp_path, tiny_model):
    from safetensors.torch import load_file

    from parasim.train.ranker.training import train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(12))
    cfg = settings(tiny_model, ranker={"epochs": 1, "freeze_embeddings": True})
    train_divergence_ranker([shard], tmp_path / "a", cfg)
    before = load_file(str(Path(tiny_model) / "model.safetensors"))
    after = model_weights_encoder(tmp_path / "a/model")
    emb = "embeddings.word_embeddings.weight"
    assert torch.equal(before[emb], after[emb])
    moved = max(float((before[k] - after[k]).abs().max()) for k in before if "layer.0." in k)
    assert moved > 1e-4


def test_the_best_models_dev_results_are_those_of_its_evaluation(tmp_path, tiny_model):
    """The threshold and dev figures saved with the best model equal a fresh float32 scoring of
    the saved model (what eval-divergence-ranker does), and its evaluation during training picked
    it."""
    from parasim.train.ranker.data import ranker_data
    from parasim.train.ranker.model import load_ranker
    from parasim.train.ranker.settings import ranker_settings
    from parasim.train.ranker.training import dev_scores, train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(30))
    cfg = settings(tiny_model, ranker={"epochs": 2, "eval_every": 4})
    metrics = train_divergence_ranker([shard], tmp_path / "a", cfg)
    args, rk = ranker_settings(cfg)
    data = ranker_data([shard], (), rk, args.seed)
    model, tok, info = load_ranker(tmp_path / "a/model")
    fresh = dev_scores(model, tok, data, rk)
    assert metrics["threshold"] == pytest.approx(fresh["threshold"], abs=1e-5)
    assert info["threshold"] == metrics["threshold"]
    for k, v in fresh["metrics"].items():
        assert metrics["dev"][k] == pytest.approx(v, abs=1e-5), k
    best = [h for h in json.loads((tmp_path / "a/history.json").read_text()) if h["kind"] == "eval"]
    assert max(h["dev_objective"] for h in best) == pytest.approx(
        metrics["dev"]["dev_objective"], abs=1e-5
    )


@pytest.fixture
def fresh_accelerate_state():
    """accelerate keeps one process-wide state: a test with another precision needs it reset."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def test_a_bf16_run_saves_the_threshold_of_float32_scores(
    tmp_path, tiny_model, fresh_accelerate_state
):
    """Trained under bf16 autocast, the saved threshold and dev figures are still those of the
    saved model scored in float32, as eval-divergence-ranker scores REFreSD."""
    from parasim.train.ranker.data import ranker_data
    from parasim.train.ranker.model import load_ranker
    from parasim.train.ranker.settings import ranker_settings
    from parasim.train.ranker.training import dev_scores, train_divergence_ranker

    shard = write_toy(tmp_path / "000.parquet", toy_rows(30))
    cfg = settings(tiny_model, dtype="bfloat16", ranker={"epochs": 1, "eval_every": 4})
    metrics = train_divergence_ranker([shard], tmp_path / "a", cfg)
    assert metrics["mixed_precision"] == "bf16"
    args, rk = ranker_settings(cfg)
    data = ranker_data([shard], (), rk, args.seed)
    model, tok, info = load_ranker(tmp_path / "a/model")
    fresh = dev_scores(model, tok, data, rk)
    assert info["threshold"] == metrics["threshold"] == pytest.approx(fresh["threshold"], abs=1e-6)
    assert metrics["dev"]["dev_objective"] == pytest.approx(fresh["metrics"]["dev_objective"])
    assert "dev_objective_mixed_precision" in metrics["dev"]


def test_length_chunks_give_the_loss_and_gradients_of_one_pass(tiny_model):
    import random

    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.ranker.data import Item
    from parasim.train.ranker.model import build_ranker
    from parasim.train.ranker.settings import RankerConfig
    from parasim.train.ranker.training import ranker_loss

    rng = random.Random(3)
    items = []
    for k in range(12):
        n = rng.randint(1, 12)
        en = tuple(rng.choice(WORDS) for _ in range(n))
        items.append(Item(en, tuple(f"f{w}" for w in en), (False,) * n, (k % 2 == 1,) * n, k % 4))
    pairs = [(i, i + 1) for i in range(0, 12, 2)]
    got = []
    for chunks in (1, 3):
        torch.manual_seed(0)
        encoder, tok = load_training_encoder(tiny_model)
        model = build_ranker(encoder, dropout=0.0)
        cfg = RankerConfig.from_config(
            {"model": tiny_model, "length_chunks": chunks, "max_length": 32}
        )
        terms = ranker_loss(tok, items, cfg)(model, pairs)
        loss = sum(s for s, _ in terms.values())
        loss.backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        got.append((float(loss), grads))
    assert got[0][0] == pytest.approx(got[1][0], abs=1e-5)
    assert got[0][1].keys() == got[1][1].keys()
    assert max_diff(got[0][1], got[1][1]) < 1e-5


def test_predictions_come_back_in_the_items_order(tiny_model):
    """predict and encoder_cosines batch rows by length: their results keep the callers' order."""
    import random

    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.ranker.data import Item
    from parasim.train.ranker.model import build_ranker, encoder_cosines, predict

    rng = random.Random(5)
    items = []
    for _ in range(9):
        n = rng.randint(1, 10)
        en = tuple(rng.choice(WORDS) for _ in range(n))
        items.append(Item(en, tuple(f"f{w}" for w in en[::-1]), (), (), 0))
    torch.manual_seed(0)
    encoder, tok = load_training_encoder(tiny_model)
    model = build_ranker(encoder, dropout=0.0)
    batched = predict(model, tok, items, 32, batch_size=4)
    alone = [predict(model, tok, [it], 32, batch_size=1) for it in items]
    assert batched[0] == pytest.approx([a[0][0] for a in alone], abs=1e-5)
    assert [len(e) for e in batched[1]] == [len(it.en) for it in items]
    want = [a[1][0] for a in alone] + [a[2][0] for a in alone]
    for got, a in zip(batched[1] + batched[2], want, strict=True):
        assert got == pytest.approx(a, abs=1e-5)
    cos = encoder_cosines(encoder, tok, items, 32, batch_size=4)
    assert cos == pytest.approx(
        [encoder_cosines(encoder, tok, [it], 32)[0] for it in items], abs=1e-5
    )


def test_pooling_auto_reads_whether_the_checkpoint_trained_a_pooler(tmp_path, tiny_model):
    """BERT-like checkpoints (a trained pooler) score from [CLS]; encoders without one (e5) from
    the mean of the token states, and the random pooler is dropped. Saved and loaded, a mean-
    pooled ranker scores the same."""
    from transformers import AutoTokenizer, BertModel

    from parasim.train.core.encoder import load_training_encoder
    from parasim.train.ranker.data import Item
    from parasim.train.ranker.model import (
        build_ranker,
        load_ranker,
        predict,
        resolve_pooling,
        save_ranker,
    )

    with_pooler, _ = load_training_encoder(tiny_model)
    assert resolve_pooling("auto", with_pooler) == "cls"
    bare = tmp_path / "no-pooler"
    BertModel(with_pooler.config, add_pooling_layer=False).save_pretrained(bare)
    AutoTokenizer.from_pretrained(tiny_model).save_pretrained(bare)
    encoder, tok = load_training_encoder(str(bare))
    assert resolve_pooling("auto", encoder) == "mean"
    assert resolve_pooling("cls", encoder) == "cls"
    model = build_ranker(encoder, 0.0, "mean", head_learning_rate=1e-3)
    assert model.encoder.pooler is None
    groups = model.optimizer_groups(2e-5)
    assert "lr" not in groups[0] and groups[1]["lr"] == 1e-3
    assert len(groups[1]["params"]) == 4  # score and tagger: weight and bias each
    items = [Item(("w1", "w2"), ("fw1", "fw3"), (), (), 0), Item(("w4",), ("fw4",), (), (), 0)]
    before = predict(model, tok, items, 16)[0]
    save_ranker(model, tok, tmp_path / "r")
    loaded, tok2, info = load_ranker(tmp_path / "r")
    assert info["pooling"] == "mean" and loaded.encoder.pooler is None
    assert predict(loaded, tok2, items, 16)[0] == pytest.approx(before, abs=1e-6)
    with pytest.raises(ConfigError, match="pooling"):
        from parasim.config import validate_section

        validate_section("train", {"divergence_ranker": {"pooling": "max"}})
