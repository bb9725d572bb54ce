"""MSRP transfer of a trained similarity model (seed 001 Tables 5-6): zero-shot, fine-tuned on
MSRP train, and the same architecture trained on MSRP train alone, on the set of
:mod:`parasim.train.eval.msrp`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from parasim.train.core.metrics import accuracy_threshold
from parasim.train.eval.msrp import MSRP_FILES, read_msrp

from .settings import similarity_settings
from .training import accuracy, head_groups, loss_fn_for


def evaluate_msrp(
    model_dir: str | os.PathLike,
    msrp_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Seed 001 Tables 5-6 on MSRP for a trained similarity model.

    ``zero_shot``: the corpus model on MSRP test (Table 5, column en-en); ``transfer``: that model
    fine-tuned on MSRP train, then tested (Table 6, "Transfer + Finetuning"); ``from_scratch``:
    the same architecture trained on MSRP train only; with the majority-class and untrained
    cosine baselines (threshold on MSRP train). The fine-tuning budget is the encoder's
    ``train.similarity.<encoder>`` loop settings.
    """
    import tempfile

    from parasim.train.core.loop import fit, make_accelerator, set_seed

    from .model import build_classifier, cosines, extend_vocabulary, load_classifier, predict

    d = Path(msrp_dir)
    missing = [f for f in MSRP_FILES.values() if not (d / f).is_file()]
    if missing:
        raise FileNotFoundError(f"eval.msrp_dir {d}: missing {', '.join(missing)}")
    train, test = read_msrp(d / MSRP_FILES["train"]), read_msrp(d / MSRP_FILES["test"])
    model = load_classifier(model_dir)
    encoder = model.kind
    args, _, sim = similarity_settings(section, encoder)
    acc = make_accelerator(args)
    added = extend_vocabulary(model, train.s1 + train.s2 + test.s1 + test.s2)
    model.to(acc.device)
    bs = sim.eval_batch_size

    def acc_of(m) -> float | None:
        return accuracy(test.label, [int(p >= 0.5) for p in predict(m, test, bs)])

    res: dict[str, Any] = {
        "model": str(model_dir), "encoder": encoder, "train_rows": len(train),
        "test_rows": len(test), "vocabulary_rows_added": added,
        "zero_shot": acc_of(model),
    }  # fmt: skip
    info = {k: v for k, v in model.info.items() if k not in ("fold", "fold_accuracy")}
    set_seed(args.seed)
    fresh = build_classifier(encoder, info, train.s1 + train.s2 + test.s1 + test.s2)
    fresh.to(acc.device)
    cos_tr, cos_te = cosines(fresh, train, bs), cosines(fresh, test, bs)
    t, _ = accuracy_threshold(cos_tr, train.label)
    majority = int(2 * sum(train.label) >= len(train))
    res["majority_baseline"] = accuracy(test.label, [majority] * len(test))
    res["untrained_cosine_baseline"] = accuracy(test.label, [int(c > t) for c in cos_te])
    with tempfile.TemporaryDirectory() as tmp:
        for key, m in (("transfer", model), ("from_scratch", fresh)):
            set_seed(args.seed)
            r = fit(
                m.train(), list(range(len(train))), loss_fn_for(train), args,
                Path(tmp) / key, accelerator=acc,
                param_groups=head_groups(info.get("head_learning_rate")),
            )  # fmt: skip
            res[key] = acc_of(r.model)
            res[f"{key}_steps"] = r.state["step"]
    return res
