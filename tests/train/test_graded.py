"""Tests of parasim.train.graded (`parasim train-graded-encoder`) on a tiny random BERT, the toy
corpus of tests/train/test_contrastive.py and the tiny REFreSD / STSb folders of
tests/test_bench_teach.py: the model folder with its verdict and card, the verdict without
REFreSD, the skipped model of a corpus without divergent rows, the rerun that trains nothing and
the resume after a crash."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

from conftest import make_tiny_bert  # noqa: E402
from test_bench_teach import write_eval_data  # noqa: E402
from test_contrastive import corpus_rows, write_corpus  # noqa: E402


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("graded-inputs")
    data = write_eval_data(base / "data")
    return {
        "corpus": write_corpus(base / "corpus"),
        "refresd": data / "refresd",
        "sts": data / "sts" / "stsb-multi-mt",
        "model": Path(make_tiny_bert(base / "bert", chars=True)),
    }


def _section(model: Path, **graded) -> dict:
    return {
        "device": "cpu", "dtype": "float32", "log_every": 1, "checkpoint_every": 2,
        "graded": {"model": str(model), "max_steps": 2, "batch_size": 4, "max_length": 32,
                   "learning_rate": 1e-3, **graded},
    }  # fmt: skip


def _run(inputs, out: Path, section: dict, refresd=True, sts=True) -> dict:
    from parasim.cli import main

    argv = ["train-graded-encoder", "--corpus", str(inputs["corpus"]), "--out", str(out),
            "--settings-json", json.dumps(section)]  # fmt: skip
    if refresd:
        argv += ["--refresd", str(inputs["refresd"])]
    if sts:
        argv += ["--sts", str(inputs["sts"])]
    assert main(argv) in (0, None)
    return json.loads((out / "metrics.json").read_text())


def test_the_command_trains_measures_and_writes_a_verdict_and_a_card(inputs, tmp_path):
    from sentence_transformers import SentenceTransformer

    from parasim.train.eval.cosine import best_binary_threshold, cosines, eval_sets
    from parasim.train.table.table import row

    out = tmp_path / "models" / "graded-encoder"
    m = _run(inputs, out, _section(inputs["model"]))
    # both partitions' graded triples: the French ones and the Spanish positive's unrelated row
    assert m["data"]["train_pairs"] == m["data"]["triples"] == 10
    assert m["partitions"] == ["EN-ES-G", "EN-FR-G"] and m["grades"] == "graded"
    assert m["train"]["global_step"] == 2 and m["train"]["trained_now"]
    assert m["eval"]["sets"] == {"refresd": {"n": 9}, "stsb en-fr": {"n": 6},
                                 "stsb en-es": {"n": 6}}  # fmt: skip
    v = m["verdict"]
    assert v["measure"] == "REFreSD binary weighted F1" and v["evaluated_on"] == "REFreSD dev"
    assert v["n"] == 9 and v["verdict"] == "too little data to tell"  # 9 items, fewer than 30
    assert v["model"] == m["eval"]["figures"]["graded"]["refresd_binary_weighted_f1"]
    assert v["baseline"] == m["eval"]["figures"]["untrained"]["refresd_binary_weighted_f1"]
    assert set(m["verdicts"]) == {"refresd_binary_weighted_f1", "refresd_3class_weighted_f1",
                                  "stsb_en_fr_spearman", "stsb_en_es_spearman"}  # fmt: skip
    # the figure is the saved folder's: its cosines at their best cut on dev
    model = SentenceTransformer(str(out / "model"), device="cpu")
    assert model.default_prompt_name == "query"
    sets, _ = eval_sets(inputs["refresd"], None)
    cos = cosines(model, sets, 8)["refresd"]
    assert best_binary_threshold(cos, sets["refresd"]["binary"])[1] == pytest.approx(v["model"])
    # the card opens with the verdict; model/ holds it too, the run's own card stays
    card = (out / "README.md").read_text()
    assert card.startswith("# graded-encoder: too little data to tell")
    assert (out / "model" / "README.md").read_text() == card
    assert "parasim.train.core.contrastive" in (out / "run" / "model" / "README.md").read_text()
    assert "GradedRankingLoss" in card and m["settings"]["loss"] == "graded_ranking"  # default
    assert (out / "training_curve.png").is_file() and (out / "run" / "done.json").is_file()
    assert not (out / "run" / "checkpoints").exists()  # removed once done
    # the models table reads it as it reads every family's
    r = row(str(out), m)
    assert r["train_size"] == "10 pairs" and r["verdict"] == v["verdict"] and r["n"] == 9

    # a rerun trains nothing, even with the rule's outputs gone (as Snakemake removes them)
    weights = {p: p.stat().st_mtime_ns for p in (out / "run" / "model").rglob("*")}
    shutil.rmtree(out / "model")
    (out / "metrics.json").unlink()
    again = _run(inputs, out, _section(inputs["model"]))
    assert not again["train"]["trained_now"] and again["verdict"] == m["verdict"]
    assert {p: p.stat().st_mtime_ns for p in (out / "run" / "model").rglob("*")} == weights
    # other settings: trained again (no evaluation set: nothing to score)
    third = _run(inputs, out, _section(inputs["model"], max_steps=3), refresd=False, sts=False)
    assert third["train"]["trained_now"] and third["train"]["global_step"] == 3
    # the other loss: trained again, and the card says which
    mnrl = _run(inputs, out, _section(inputs["model"], max_steps=3, loss="mnrl"), refresd=False,
                sts=False)  # fmt: skip
    assert mnrl["train"]["trained_now"] and mnrl["settings"]["loss"] == "mnrl"
    assert "MultipleNegativesRankingLoss" in (out / "README.md").read_text()


def test_a_merge_share_ships_the_weights_between_the_start_and_the_run(inputs, tmp_path):
    import torch
    from sentence_transformers import SentenceTransformer

    from parasim.train.core.contrastive import MERGE_FILE, build_model

    out = tmp_path / "graded-encoder"
    m = _run(inputs, out, _section(inputs["model"], merge_share=0.25), sts=False)
    assert m["settings"]["merge_share"] == 0.25
    tuned = SentenceTransformer(str(out / "run" / "model"), device="cpu").state_dict()
    start = build_model(str(inputs["model"]), max_length=32).state_dict()
    shipped = SentenceTransformer(str(out / "model"), device="cpu").state_dict()
    moved = [k for k, v in tuned.items() if v.is_floating_point() and not torch.equal(v, start[k])]
    assert moved
    for k in moved:
        assert torch.allclose(shipped[k], 0.75 * start[k] + 0.25 * tuned[k], atol=1e-6), k
    assert json.loads((out / "model" / MERGE_FILE).read_text())["share"] == 0.25
    assert "0.25 of the fine-tuned ones" in (out / "README.md").read_text()
    # the verdict is the shipped (merged) model's
    plain = _run(inputs, tmp_path / "plain", _section(inputs["model"]), sts=False)
    assert plain["train"]["train_loss"] == m["train"]["train_loss"]  # the same run
    assert not (tmp_path / "plain" / "model" / MERGE_FILE).exists()


def test_a_retention_weight_trains_with_the_pull_back_to_the_start(inputs, tmp_path):
    out = tmp_path / "graded-encoder"
    m = _run(inputs, out, _section(inputs["model"], retain=0.5), refresd=False, sts=False)
    assert m["settings"]["retain"] == 0.5
    run_file = json.loads((out / "run" / "model" / "parasim_contrastive.json").read_text())
    assert run_file["settings"]["retain"] == 0.5
    assert "`train.graded.retain` 0.5" in (out / "README.md").read_text()
    plain = _run(inputs, tmp_path / "plain", _section(inputs["model"]), refresd=False, sts=False)
    assert plain["settings"]["retain"] == 0.0  # the default: none
    assert "train.graded.retain" not in (tmp_path / "plain" / "README.md").read_text()
    assert plain["train"]["train_loss"] != m["train"]["train_loss"]


def test_without_refresd_it_trains_and_the_verdict_says_why(inputs, tmp_path):
    out = tmp_path / "graded-encoder"
    m = _run(inputs, out, _section(inputs["model"]), refresd=False)
    assert m["train"]["global_step"] == 2 and (out / "model" / "modules.json").is_file()
    v = m["verdict"]
    assert v["measure"] == "REFreSD binary weighted F1" and v["n"] == 0 and v["model"] is None
    assert v["verdict"] == "too little data to tell"
    assert v["why"] == "not measured: no REFreSD folder given"
    assert set(m["verdicts"]) == {"stsb_en_fr_spearman", "stsb_en_es_spearman"}
    assert "not measured: no REFreSD folder given" in (out / "README.md").read_text()
    # a folder without REFreSD's file: the path it looked for
    m = _run(inputs, out, _section(inputs["model"]), sts=False)
    assert m["eval"]["missing"]["stsb en-fr"] == "no STSb-multi-mt folder given"
    assert m["verdicts"].keys() == {"refresd_binary_weighted_f1", "refresd_3class_weighted_f1"}


def test_a_corpus_without_divergent_rows_is_a_skipped_model(inputs, tmp_path):
    import pyarrow as pa

    from parasim.io import CORPUS_SCHEMA, write_table
    from parasim.train.table.table import row

    corpus = tmp_path / "corpus"
    rows = [r for r in corpus_rows() if r["grade"] != "divergent"]
    for part in ("EN-FR-G", "EN-ES-G"):
        mine = [r for r in rows if r["partition"] == part and r["split"] == "train"]
        write_table(pa.Table.from_pylist(mine, schema=CORPUS_SCHEMA),
                    corpus / "data" / part / "train-00000-of-00001.parquet")  # fmt: skip
    out = tmp_path / "graded-encoder"
    m = _run({**inputs, "corpus": corpus}, out, _section(inputs["model"]))
    assert m["skipped"].startswith("no divergent row in the train split of EN-ES-G, EN-FR-G")
    assert m["data"]["divergent_rows"] == 0 and m["data"]["triples"] == 7
    assert (out / "model" / "README.md").read_text().startswith("# graded-encoder")
    assert "No model was trained: no divergent row" in (out / "README.md").read_text()
    assert not (out / "run").exists()
    assert row(str(out), m)["verdict"] == "not trained"
    # partitions the corpus does not have: skipped too, saying so
    m = _run({**inputs, "corpus": corpus}, out, _section(inputs["model"], partitions=["EN-DE-G"]))
    assert m["skipped"] == f"no partition (['EN-DE-G']) in {corpus / 'data'}"


def test_a_rerun_after_a_crash_resumes_from_the_checkpoint(inputs, tmp_path, monkeypatch):
    import parasim.train.core.card as card

    out = tmp_path / "graded-encoder"
    section = _section(inputs["model"], max_steps=4)

    def crash(path, write):
        raise RuntimeError("killed before the final folder")

    monkeypatch.setattr(card, "write_dir", crash)  # fit_contrastive's last step
    with pytest.raises(RuntimeError, match="killed"):
        _run(inputs, out, section, refresd=False, sts=False)
    monkeypatch.undo()
    ckpts = out / "run" / "checkpoints"
    assert not (out / "run" / "done.json").exists()
    # killed while writing checkpoint-4: its state file not yet there
    (ckpts / "checkpoint-4" / "trainer_state.json").unlink()
    m = _run(inputs, out, section, refresd=False, sts=False)
    assert m["train"]["resumed_from"] == "checkpoint-2"
    assert m["train"]["steps_run"] == 2 and m["train"]["global_step"] == 4


def test_one_epoch_when_max_steps_is_null_and_the_fixed_trainer_keys():
    from parasim.config import ConfigError
    from parasim.train.graded.settings import graded_settings, training_steps

    args, cfg = graded_settings({"graded": {"max_steps": None, "epochs": 2, "batch_size": 4}})
    assert training_steps(args, 9) == 2 * 3 and training_steps(args, 0) == 2
    assert cfg.model == "e5-torch" and cfg.prefix == "query: " and cfg.partitions is None
    args, _ = graded_settings({"seed": 5})
    assert training_steps(args, 9) == 30 and args.seed == 5
    with pytest.raises(ConfigError, match=r"train\.graded\.max_grad_norm"):
        graded_settings({"graded": {"max_grad_norm": 0.5}})
