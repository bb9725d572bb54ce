"""Issue 34: each model against its untrained baseline (verdict), step 0 in the best-model
choice, one copy on disk of shared weights, and the table of every model."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from parasim.train.core.verdict import (
    MAX_HALF_WIDTH,
    MIN_ITEMS,
    accuracy_stat,
    compare,
    headline,
    mean_spearman_stat,
    spearman_stat,
)


def _labels(n: int, model_ok: float, base_ok: float, seed: int = 1):
    r = random.Random(seed)
    gold = [r.random() < 0.5 for _ in range(n)]
    model = [g if r.random() < model_ok else not g for g in gold]
    base = [g if r.random() < base_ok else not g for g in gold]
    return gold, model, base


def _cmp(gold, model, base, **kw):
    return compare(
        accuracy_stat(gold, model), accuracy_stat(gold, base), len(gold),
        measure="accuracy", baseline_name="untrained cosine", evaluated_on="toy", **kw,
    )  # fmt: skip


def test_a_clearly_better_model_is_better_and_a_clearly_worse_one_says_below():
    gold, model, base = _labels(400, 0.9, 0.6)
    v = _cmp(gold, model, base)
    assert v["verdict"] == "better" and v["ci95"][0] > 0
    assert v["model"] == pytest.approx(sum(g == p for g, p in zip(gold, model, strict=True)) / 400)
    w = _cmp(gold, base, model)  # swapped: the model is the worse one
    assert w["verdict"] == "no better" and w["below_baseline"] and w["ci95"][1] < 0
    assert "Below its untrained baseline" in headline(w, needs="more data")
    assert "more data" in headline(w, needs="more data")
    assert "more data" not in headline(v, needs="more data")


def test_six_rows_are_too_little_data_whatever_the_accuracies():
    gold = [1, 0, 1, 0, 1, 0]
    v = _cmp(gold, gold, [0] * 6)  # 1.00 against 0.50
    assert v["n"] < MIN_ITEMS and v["verdict"] == "too little data to tell"


def test_an_interval_holding_zero_is_no_better_when_narrow_and_too_little_when_wide():
    gold, model, _ = _labels(4000, 0.8, 0.8)
    same = _cmp(gold, model, list(model))
    assert same["verdict"] == "no better" and same["ci95"] == [0.0, 0.0]
    gold, model, base = _labels(40, 0.7, 0.7, seed=3)
    wide = _cmp(gold, model, base)
    lo, hi = wide["ci95"]
    assert lo <= 0 <= hi and (hi - lo) / 2 > MAX_HALF_WIDTH
    assert wide["verdict"] == "too little data to tell"


def test_the_bootstrap_is_reproducible_and_spearman_stats_resample_items():
    gold, model, base = _labels(100, 0.8, 0.7)
    assert _cmp(gold, model, base) == _cmp(gold, model, base)
    r = random.Random(0)
    g = [r.random() for _ in range(50)]
    s = [x + 0.1 * r.random() for x in g]
    assert spearman_stat(g, s)(list(range(50))) > 0.9
    both = mean_spearman_stat([g, g], [s, [-x for x in s]])(list(range(50)))
    assert abs(both) < 1e-9  # +rho and -rho average out


def test_the_card_opens_with_the_verdict(tmp_path):
    from parasim.train.core.card import write_model_card

    gold, model, base = _labels(400, 0.6, 0.9)
    v = _cmp(gold, model, base)
    write_model_card(tmp_path / "README.md", "toy", "A toy.", {}, {}, {}, verdict=v,
                     needs="the GPU recipe", shipped_start=True)  # fmt: skip
    lines = (tmp_path / "README.md").read_text().splitlines()
    assert lines[0] == "# toy: below its untrained baseline"
    assert lines[2].startswith("**Below its untrained baseline**")
    assert "untrained start" in lines[2] and "the GPU recipe" in lines[2]


def _args(**kw):
    from parasim.train.core.loop import TrainingArguments

    base = dict(seed=0, learning_rate=0.1, weight_decay=0.0, epochs=1, max_steps=4, batch_size=2,
                schedule="constant", max_grad_norm=0.0, checkpoint_every=0, keep_checkpoints=1,
                eval_every=2, patience=0, max_minutes=None, log_every=0, device="cpu",
                dtype="float32", threads=1)  # fmt: skip
    return TrainingArguments(**{**base, **kw})


@pytest.mark.parametrize("at_start", [True, False])
def test_step_0_counts_when_asked_and_a_training_that_only_hurts_ships_its_start(
    tmp_path, at_start
):
    import torch

    from parasim.train.core.loop import fit

    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, 1.0)
    start = model.weight.detach().clone()

    def loss_fn(m, batch):  # pushes the weight up
        return {"loss": (-m(torch.ones(len(batch), 1)).sum(), len(batch))}

    def evaluate(m):  # the dev measure falls as the weight moves away from 1
        return {"dev": -abs(float(m.weight) - 1.0)}

    res = fit(model, list(range(8)), loss_fn, _args(), tmp_path, evaluate=evaluate,
              eval_at_start=at_start)  # fmt: skip
    evals = [h["step"] for h in res.history if h["kind"] == "eval"]
    if at_start:
        assert evals[0] == 0 and res.state["best_step"] == 0
        assert torch.equal(res.model.weight, start)
    else:
        assert 0 not in evals and res.state["best_step"] == 2
        assert not torch.equal(res.model.weight, start)


def test_shared_weights_are_one_file_on_disk_and_load_unchanged(tmp_path, tiny_model):
    import torch
    from transformers import AutoModel

    from parasim.train.core.storage import load_weights, prune_store, share_weights
    from parasim.train.table.table import folder_bytes

    models, store = tmp_path / "models", tmp_path / "models" / ".weights"
    base = AutoModel.from_pretrained(tiny_model)
    trained = AutoModel.from_pretrained(tiny_model)
    with torch.no_grad():  # a fine-tuning that moved one layer, embeddings frozen
        for p in trained.encoder.layer[0].parameters():
            p.add_(0.01)
    for name, m in (("a", base), ("b", base), ("c", trained)):
        m.save_pretrained(models / name)
        assert share_weights(models / name, store) > 1
    for name, m in (("a", base), ("c", trained)):
        back = AutoModel.from_pretrained(models / name)
        want = m.state_dict()
        assert all(torch.equal(v, want[k]) for k, v in back.state_dict().items())
        assert set(load_weights(models / name)) == set(want)
    whole = sum((models / "a" / s).stat().st_size for s in
                {*json.loads((models / "a" / "model.safetensors.index.json").read_text())
                 ["weight_map"].values()})  # fmt: skip
    # b adds nothing; c adds its changed layer's shard only
    layer0 = (models / "c" / json.loads(
        (models / "c" / "model.safetensors.index.json").read_text()
    )["weight_map"]["encoder.layer.0.attention.self.query.weight"]).stat().st_size  # fmt: skip
    assert folder_bytes(store) == whole + layer0
    import shutil

    shutil.rmtree(models / "c")
    assert prune_store(store) == 1  # c's own layer shard: no folder links it now


def test_the_table_has_a_row_per_model_and_states_the_cut_offs(tmp_path):
    from parasim.train.table.table import models_table

    gold, model, base = _labels(400, 0.6, 0.9)
    files = []
    for name, m in {
        "ranker": {"model": "divergence-ranker", "data": {"train_pairs": 712},
                   "verdict": _cmp(gold, model, base)},
        "sim": {"model": "similarity-bilstm-EN-FR-G", "data": {"train_rows": 222},
                "verdict": _cmp([1, 0] * 3, [1, 0] * 3, [0] * 6)},
        "skip": {"model": "similarity-bilstm-EN-FR-IB", "skipped": "no rows"},
    }.items():  # fmt: skip
        f = tmp_path / "models" / name / "metrics.json"
        f.parent.mkdir(parents=True)
        f.write_text(json.dumps(m))
        files.append(f)
    rows = models_table(files, tmp_path / "models" / "README.md", tmp_path / "t.json",
                        tmp_path / "models")  # fmt: skip
    assert [r["verdict"] for r in rows] == ["no better", "too little data to tell", "not trained"]
    text = Path(tmp_path / "models" / "README.md").read_text()
    assert "712 pairs" in text and "(below)" in text and f"fewer than {MIN_ITEMS}" in text
    assert json.loads((tmp_path / "t.json").read_text())["models"][1]["n"] == 6
