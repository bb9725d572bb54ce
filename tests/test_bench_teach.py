"""Tests of `parasim bench teach` on a tiny random BERT, the toy corpus of
tests/train/test_contrastive.py and a tiny REFreSD / STSb-multi-mt folder of the real files'
formats: the three variants, their comparisons, the rerun that retrains nothing and the resume
of a variant whose run crashed."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sentence_transformers")

sys.path.insert(0, str(Path(__file__).resolve().parent / "train"))
from conftest import make_tiny_bert  # noqa: E402
from test_contrastive import write_corpus  # noqa: E402
from test_select import write_flores  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

#: REFreSD-like rows: (binary, 3-class label, English, French).
REFRESD = [
    ("equivalent", "no_meaning_difference", "The office opens at nine.",
     "Le bureau ouvre à neuf heures."),
    ("equivalent", "no_meaning_difference", "The park closes in winter.",
     "Le parc ferme en hiver."),
    ("equivalent", "no_meaning_difference", "Read the guide first.", "Lisez d'abord le guide."),
    ("divergent", "some_meaning_difference", "The fee is twelve dollars.",
     "Les frais sont de vingt dollars."),
    ("divergent", "some_meaning_difference", "Apply before May.", "Demandez avant juin."),
    ("divergent", "some_meaning_difference", "Bring two pieces of identification.",
     "Apportez une pièce d'identité avec photo."),
    ("divergent", "unrelated", "Call us for more information.", "Le musée est fermé le lundi."),
    ("divergent", "unrelated", "Parking is limited downtown.", "Le train part à midi."),
    ("divergent", "unrelated", "Children ride free.", "La bibliothèque prête des livres."),
]  # fmt: skip
#: STSb-like rows in three languages: (en s1, en s2, fr s1, fr s2, es s1, es s2, score).
STS = [
    ("A man is dancing.", "A man dances.", "Un homme danse.", "Un homme est en train de danser.",
     "Un hombre baila.", "Un hombre está bailando.", 5.0),
    ("A child rides a horse.", "A kid is on a horse.", "Un enfant monte à cheval.",
     "Un gamin est sur un cheval.", "Un niño monta a caballo.", "Un chico está a caballo.", 4.2),
    ("A cat sleeps.", "A dog barks.", "Un chat dort.", "Un chien aboie.", "Un gato duerme.",
     "Un perro ladra.", 0.8),
    ("The sun is bright.", "It is sunny, warm and bright.", "Le soleil brille.",
     "Il fait beau, chaud et lumineux.", "El sol brilla.", "Hace sol, calor y luz.", 3.5),
    ("Two women talk.", "A man eats an apple.", "Deux femmes parlent.",
     "Un homme mange une pomme.", "Dos mujeres hablan.", "Un hombre come una manzana.", 0.0),
    ("A bird flies.", "A bird is flying in the sky.", "Un oiseau vole.",
     "Un oiseau vole dans le ciel.", "Un pájaro vuela.", "Un pájaro vuela en el cielo.", 4.6),
]  # fmt: skip


def write_eval_data(d: Path) -> Path:
    """``d/refresd/sentence_labels.dev.tsv`` and ``d/sts/stsb-multi-mt/stsb-{en,fr,es}-dev.csv``
    in the formats of ../shared/data."""
    (d / "refresd").mkdir(parents=True)
    lines = ["#binary_label #3_labels #english_sentence #french_sentence"]
    lines += ["\t".join(r) for r in REFRESD]
    (d / "refresd" / "sentence_labels.dev.tsv").write_text("\n".join(lines) + "\n")
    sts = d / "sts" / "stsb-multi-mt"
    sts.mkdir(parents=True)
    for k, lang in enumerate(("en", "fr", "es")):
        with open(sts / f"stsb-{lang}-dev.csv", "w", newline="", encoding="utf-8") as fh:
            csv.writer(fh).writerows((r[2 * k], r[2 * k + 1], r[6]) for r in STS)
    write_flores(d / "parallel" / "flores200-devtest")  # the selection split of --merge-share auto
    return d


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, str]:
    base = tmp_path_factory.mktemp("teach-inputs")
    return {
        "corpus": str(write_corpus(base / "corpus")),
        "data": str(write_eval_data(base / "data")),
        "model": make_tiny_bert(base / "bert", chars=True),
    }


def _argv(inputs, out: Path, *extra: str, steps: int = 2) -> list[str]:
    return [
        "--corpus", inputs["corpus"], "--out", str(out), "--steps", str(steps),
        "--batch-size", "4", "--seed", "0", "--model", inputs["model"], "--data",
        inputs["data"], "--max-length", "32", "--learning-rate", "1e-3", "--device", "cpu",
        "--dtype", "float32", "--n-boot", "100", *extra,
    ]  # fmt: skip


def test_the_variants_are_trained_scored_and_compared(inputs, tmp_path, capsys):
    from parasim.bench import available
    from parasim.bench.teach import main
    from parasim.train.eval.cosine import (
        BINARY_CLASSES,
        THREE_CLASSES,
        best_binary_threshold,
        best_three_thresholds,
    )  # fmt: skip

    assert available()["teach"].startswith("What the corpus teaches")
    out = tmp_path / "teach"
    assert main(_argv(inputs, out)) == 0
    table = capsys.readouterr().out
    assert "| REFreSD binary weighted F1 | 9 |" in table
    for col in ("untrained", "binary", "graded", "graded - binary", "graded - untrained",
                "graded-ranking - untrained", "graded-ranking - binary"):  # fmt: skip
        assert col in table
    res = json.loads((out / "teach.json").read_text())
    assert set(res["variants"]) == {
        "untrained", "binary", "graded", "binary-ranking", "graded-ranking",
        "graded-ranking-merged", "graded-ranking-retained",
    }  # fmt: skip
    assert set(res["comparisons"]) == {
        "binary - untrained", "graded - untrained", "graded - binary",
        "binary-ranking - untrained", "graded-ranking - untrained", "graded-ranking - binary",
        "graded-ranking - binary-ranking", "graded-ranking-merged - untrained",
        "graded-ranking-merged - binary", "graded-ranking-merged - graded-ranking",
        "graded-ranking-retained - untrained", "graded-ranking-retained - binary",
        "graded-ranking-retained - graded-ranking",
    }  # fmt: skip
    merged = res["variants"]["graded-ranking-merged"]
    assert merged["merge"]["of"] == "graded-ranking" and merged["merge"]["share"] == 0.5
    assert merged["train"] is None and (out / "graded-ranking-merged" / "model").is_dir()
    assert res["triples"]["graded-ranking-merged"] == res["triples"]["graded"]
    assert res["eval_sets"] == {
        "refresd": {"n": 9, "classes": dict.fromkeys(THREE_CLASSES, 3)},
        "stsb en-fr": {"n": 6},
        "stsb en-es": {"n": 6},
    }
    # both partitions: the French ones and the Spanish positive with an unrelated row
    assert res["triples"]["graded"]["triples"] == 10 and res["triples"]["binary"]["triples"] == 7
    assert res["triples"]["graded-ranking"] == res["triples"]["graded"]  # the same triples
    assert res["triples"]["binary-ranking"] == res["triples"]["binary"]
    assert res["triples"]["graded-ranking-retained"] == res["triples"]["graded"]
    retained = res["variants"]["graded-ranking-retained"]
    assert retained["retain"] == 1.0 and "retain" not in res["variants"]["graded-ranking"]
    for v in ("binary", "graded", "binary-ranking", "graded-ranking", "graded-ranking-retained"):
        train = res["variants"][v]["train"]
        assert train["global_step"] == 2 and train["steps_run"] == 2 and train["device"] == "cpu"
        assert (out / v / "done.json").is_file() and (out / v / "run" / "model").is_dir()
        assert not (out / v / "run" / "checkpoints").exists()  # removed once done
        run_file = json.loads((out / v / "run" / "model" / "parasim_contrastive.json").read_text())
        assert run_file["settings"]["loss"] == (
            "GradedRankingLoss" if "-ranking" in v else "MultipleNegativesRankingLoss"
        )
        assert run_file["settings"]["retain"] == (1.0 if v == "graded-ranking-retained" else 0)
    assert res["machine"]["torch_device"] == "cpu" and res["machine"]["cpu"]
    assert res["majority"]["refresd_binary_weighted_f1"] == pytest.approx(
        2 * (6 / 9) * 1 / (6 / 9 + 1) * 6 / 9  # all divergent: F1 of divergent, weight 6/9
    )
    # the figures are those of the cosines kept in scores.json
    refresd = [r for r in (Path(inputs["data"]) / "refresd" / "sentence_labels.dev.tsv")
               .read_text().splitlines() if not r.startswith("#")]  # fmt: skip
    binary = [r.split("\t")[0] for r in refresd]
    labels = [r.split("\t")[1] for r in refresd]
    for v in ("untrained", "graded"):
        cos = json.loads((out / v / "scores.json").read_text())["scores"]["refresd"]
        fig = res["variants"][v]["figures"]
        assert fig["refresd_binary_weighted_f1"] == best_binary_threshold(cos, binary)[1]
        assert fig["refresd_3class_weighted_f1"] == best_three_thresholds(cos, labels)[2]
        assert set(binary) == set(BINARY_CLASSES)
    comp = res["comparisons"]["graded - untrained"]["stsb_en_fr_spearman"]
    assert comp["verdict"] == "too little data to tell" and comp["n"] == 6
    figs = res["variants"]
    assert comp["difference"] == pytest.approx(
        figs["graded"]["figures"]["stsb_en_fr_spearman"]
        - figs["untrained"]["figures"]["stsb_en_fr_spearman"]
    )

    # a rerun retrains and rescores nothing
    marks = {p: p.stat().st_mtime_ns for p in out.glob("*/*.json")}
    assert main(_argv(inputs, out)) == 0
    again = json.loads((out / "teach.json").read_text())
    assert not again["variants"]["graded"]["trained_now"]
    assert not again["variants"]["binary"]["trained_now"]
    assert not again["variants"]["graded-ranking-merged"]["trained_now"]
    assert {p: p.stat().st_mtime_ns for p in out.glob("*/*.json")} == marks
    assert again["comparisons"] == res["comparisons"]
    # other settings: that variant is trained again
    assert main(_argv(inputs, out, "--only", "graded", steps=3)) == 0
    third = json.loads((out / "teach.json").read_text())
    assert third["variants"]["graded"]["train"]["global_step"] == 3
    assert "binary" not in third["variants"]  # trained under other settings: left out
    # another retention weight: the retained variant is another model, the others stay
    assert main(_argv(inputs, out, "--only", "graded-ranking-retained", "--retain", "2")) == 0
    fourth = json.loads((out / "teach.json").read_text())
    assert fourth["variants"]["graded-ranking-retained"]["trained_now"]
    assert fourth["variants"]["graded-ranking-retained"]["retain"] == 2.0
    assert not fourth["variants"]["graded-ranking"]["trained_now"]


def test_merge_share_auto_is_picked_on_the_selection_split(inputs, tmp_path, capsys):
    import shutil

    from parasim.bench.teach import main

    out = tmp_path / "teach"
    auto = ("--only", "graded-ranking-merged", "--merge-share", "auto", "--select-grid", "0.5", "1")
    assert main(_argv(inputs, out, *auto)) == 0
    table = capsys.readouterr().out
    res = json.loads((out / "teach.json").read_text())
    sel = res["selection"]
    assert sel["share"] in (0.5, 1.0) and set(sel["shares"]) == {"0.5", "1"}
    assert res["variants"]["graded-ranking-merged"]["merge"]["share"] == sel["share"]
    assert res["settings"]["merge_share"] == sel["share"]
    # 6 sentences: the 10 nearest capped at the 5 others, so no random ones
    assert sel["counts"]["flores_sentences"] == 6 and sel["counts"]["silver_pairs"] == 6 * 5
    assert "merge share picked on the selection split" in table and "| untrained |" in table
    assert (out / "select.json").is_file() and not (out / "select-merged").exists()
    # a rerun measures nothing again
    mark = (out / "select.json").stat().st_mtime_ns
    assert main(_argv(inputs, out, *auto)) == 0
    assert (out / "select.json").stat().st_mtime_ns == mark
    # no Flores-200 under --data: named, before anything is merged
    data = tmp_path / "data"
    shutil.copytree(inputs["data"], data)
    shutil.rmtree(data / "parallel")
    bad = _argv({**inputs, "data": str(data)}, tmp_path / "teach2", *auto)
    with pytest.raises(SystemExit, match="Flores-200"):
        main(bad)
    for wrong in (["--merge-share", "half"], ["--select-grid", "1.5"]):
        with pytest.raises(SystemExit):
            main(_argv(inputs, tmp_path / "teach3", *wrong))


def test_thresholds_separate_what_the_cosine_separates():
    from parasim.train.eval.cosine import best_binary_threshold, best_three_thresholds, majority_f1

    cos = [0.9, 0.8, 0.5, 0.45, 0.1, 0.05]
    binary = ["equivalent", "equivalent", "divergent", "divergent", "divergent", "divergent"]
    t, f = best_binary_threshold(cos, binary)
    assert 0.5 < t < 0.8 and f == 1.0
    labels = ["no_meaning_difference"] * 2 + ["some_meaning_difference"] * 2 + ["unrelated"] * 2
    t1, t2, f3 = best_three_thresholds(cos, labels)
    assert f3 == 1.0 and 0.45 <= t1 < 0.8 and 0.1 <= t2 < 0.45
    assert best_binary_threshold(cos, binary[::-1])[1] < 1.0
    assert majority_f1(binary, ("equivalent", "divergent")) == pytest.approx(2 / 3 * 0.8)


def test_only_the_untrained_baseline(inputs, tmp_path, capsys):
    from parasim.bench.teach import main

    out = tmp_path / "teach"
    assert main(_argv(inputs, out, "--only", "untrained")) == 0
    res = json.loads((out / "teach.json").read_text())
    assert list(res["variants"]) == ["untrained"] and res["comparisons"] == {}
    assert not (out / "graded").exists()
    assert "| STSb EN-ES Spearman | 6 |" in capsys.readouterr().out


def test_a_variant_whose_run_crashed_resumes_from_its_checkpoint(inputs, tmp_path, monkeypatch):
    import parasim.train.core.card as card
    from parasim.bench.teach import main

    out = tmp_path / "teach"
    argv = _argv(inputs, out, "--only", "graded", "--save-steps", "2", steps=4)

    def crash(path, write):
        raise RuntimeError("killed before the final folder")

    monkeypatch.setattr(card, "write_dir", crash)  # fit_contrastive's last step
    with pytest.raises(RuntimeError, match="killed"):
        main(argv)
    monkeypatch.undo()
    ckpts = out / "graded" / "run" / "checkpoints"
    assert not (out / "graded" / "done.json").exists()
    # killed while writing checkpoint-4: its state file not yet there
    (ckpts / "checkpoint-4" / "trainer_state.json").unlink()
    assert main(argv) == 0
    train = json.loads((out / "teach.json").read_text())["variants"]["graded"]["train"]
    assert train["resumed_from"] == "checkpoint-2"
    assert train["steps_run"] == 2 and train["global_step"] == 4


@pytest.mark.slow
def test_a_rerun_after_kill_9_continues(inputs, tmp_path):
    out = tmp_path / "teach"
    cmd = [sys.executable, "-m", "parasim.bench", "teach",
           *_argv(inputs, out, "--only", "graded", "--save-steps", "5", steps=300)]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stderr=subprocess.PIPE)
    deadline = time.time() + 180
    ckpts = out / "graded" / "run" / "checkpoints"
    while not list(ckpts.glob("checkpoint-*/trainer_state.json")):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "no checkpoint within 180 s"
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (out / "graded" / "done.json").exists(), "finished before the kill"
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    train = json.loads((out / "teach.json").read_text())["variants"]["graded"]["train"]
    assert train["resumed_from"].startswith("checkpoint-") and train["global_step"] == 300
    assert train["steps_run"] < 300
