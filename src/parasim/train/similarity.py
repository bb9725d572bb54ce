"""Seed 001 §4: sentence-pair similarity classifiers trained on the corpus, with its protocol.

For one encoder (``bilstm``: InferSent-style BiLSTM-max over frozen word vectors; ``biencoder``:
a fine-tuned transformer, see :mod:`.similarity_models`) and one training partition (a corpus
partition such as ``EN-FR-G``, or all of them together, named by their languages: ``EN-ES-FR``,
the seed's ``EN-FR-ES``), :func:`train_similarity` runs:

* **k-fold cross-validation on the corpus's folds** (the ``fold`` column of the train split,
  grouped by page pair): fold model i trains on the other folds for a fixed budget (no early
  stopping: the held-out fold is only measured) and is measured on fold i. Reported: mean ± sd
  (sample sd) of the fold accuracies (seed Table 4 "Mean").
* **Voting** of the k fold models on the partition's test split: max voting (the majority of the
  hard votes; a tie goes to the mean probability) and average voting (mean P(similar) ≥ 0.5)
  (seed Table 4 "Max voting", "Avg. voting").
* **Cross-corpus test accuracy** (seed Table 5) on the test split of every partition in the
  corpus, pooled per language pair (the seed's columns en-fr, en-es) and over all: the best fold
  model by held-out-fold accuracy (the seed's choice) and the average-voting ensemble.
* **Baselines beside every figure**: the majority class of the training rows, and the untrained
  encoder's cosine of the two sides (the BiLSTM at its seeded initialisation; the pretrained
  transformer, mean-pooled) with the accuracy-maximising threshold chosen on the training folds.

MSRP transfer (train on the corpus, fine-tune on MSRP train, test on MSRP test) is
:func:`evaluate_msrp`, run on the saved model when the user points ``eval.msrp_dir`` at a copy.

Bad input never crashes the run: a partition with no rows, or with fewer than two non-empty folds,
is a skipped model (``metrics.json`` says why); a fold whose training rows hold one class is a
skipped fold (its reason in the results); when every fold is skipped the model is skipped.
Finished folds are kept (``folds/fold-<i>/result.json``) and a running fold resumes from its last
checkpoint, so a rerun after ``kill -9`` loses at most ``checkpoint_every`` steps.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import statistics
import time
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.config import ConfigError, settings_from_dict

from .loop import TrainingArguments, code_fingerprint, model_settings, peak_gpu_mb, peak_rss_mb

log = logging.getLogger("parasim.train")

ENCODERS = ("bilstm", "biencoder")
COLUMNS = ("sentence1", "sentence2", "label", "lang_pair", "partition", "fold")


@dataclasses.dataclass(frozen=True)
class BiLSTMConfig:
    """``train.similarity.bilstm`` keys besides the loop's (:class:`TrainingArguments`).

    Attributes:
        word_vectors: a transformers encoder whose input embeddings are the word vectors (text
            split by its tokenizer; default the rebuilt multilingual e5), or a word2vec /
            fastText file (``.vec``/``.txt``: word2vec text, ``.bin``: word2vec binary).
        vectors_format: ``auto`` (by the file's suffix), ``word2vec``, ``word2vec-binary`` or
            ``fasttext`` (Facebook ``.bin`` with subword n-grams).
        lowercase: lowercase words before looking them up in a vector file (MUSE is lowercase).
        hidden: LSTM units per direction (seed: 600? InferSent: 2048).
        fc: units of the classifier's hidden layer (InferSent: 512).
        dropout: dropout in the classifier (seed: 0.5).
        max_length: tokens kept per sentence.
        max_folds: train the first this many fold models only (None: every fold).
    """

    word_vectors: str = "e5-torch"
    vectors_format: str = "auto"
    lowercase: bool = True
    hidden: int = 128
    fc: int = 128
    dropout: float = 0.5
    max_length: int = 64
    max_folds: int | None = None

    def __post_init__(self) -> None:
        if self.vectors_format not in ("auto", "word2vec", "word2vec-binary", "fasttext"):
            raise ValueError(
                f"train.similarity.bilstm.vectors_format: auto, word2vec, word2vec-binary or "
                f"fasttext, not {self.vectors_format!r}"
            )


@dataclasses.dataclass(frozen=True)
class BiEncoderConfig:
    """``train.similarity.biencoder`` keys besides the loop's.

    Attributes:
        model: transformers encoder to fine-tune (``e5-torch``: the rebuilt multilingual e5; a
            local folder; a hub name where reachable).
        prefix: prepended to every sentence (e5's ``"query: "`` for symmetric tasks).
        freeze_embeddings: keep the input embeddings fixed (most of e5's weights: faster steps,
            smaller optimiser state, words unseen in training keep their place).
        head_learning_rate: Adam learning rate of the new classifier head (None: the encoder's
            ``learning_rate``); a fine-tuning rate leaves a fresh head near chance for hundreds
            of steps.
        fc, dropout, max_length, max_folds: as :class:`BiLSTMConfig`.
    """

    model: str = "e5-torch"
    prefix: str = "query: "
    freeze_embeddings: bool = True
    head_learning_rate: float | None = 1e-3
    fc: int = 128
    dropout: float = 0.5
    max_length: int = 64
    max_folds: int | None = None


@dataclasses.dataclass(frozen=True)
class SimilarityConfig:
    """``train.similarity`` keys shared by both encoders.

    Attributes:
        encoders: the encoders the workflow trains.
        partitions: training partitions (None: every partition of ``corpus.partitions``).
        combined: also train on every partition together (when there are several).
        eval_batch_size: pairs per forward pass when predicting.
    """

    encoders: tuple[str, ...] = ENCODERS
    partitions: tuple[str, ...] | None = None
    combined: bool = True
    eval_batch_size: int = 64


_ENCODER_CFG = {"bilstm": BiLSTMConfig, "biencoder": BiEncoderConfig}


def similarity_settings(
    section: Mapping[str, Any] | None, encoder: str
) -> tuple[TrainingArguments, Any, SimilarityConfig]:
    """Split the ``train:`` section into the loop's, the encoder's and the shared settings.

    Top-level ``train`` keys (``seed``, ``device``, ``checkpoint_every``, ...) are shared by every
    model; ``train.similarity.<encoder>`` loop keys override them.
    """
    if encoder not in _ENCODER_CFG:
        raise ConfigError(f"similarity encoder: one of {list(ENCODERS)}, not {encoder!r}")
    section = dict(section or {})
    sim = dict(section.pop("similarity", None) or {})
    own = {e: dict(sim.pop(e, None) or {}) for e in ENCODERS}[encoder]
    loop, enc = model_settings(section, own, _ENCODER_CFG[encoder], f"train.similarity.{encoder}")
    shared_sim = settings_from_dict(
        SimilarityConfig, {k: v for k, v in sim.items() if k != "msrp_dir"}, "train.similarity"
    )
    return loop, enc, shared_sim


def combined_name(partitions: Mapping[str, Mapping[str, Any]]) -> str:
    """The name of all partitions together, by their languages, English first and the others
    sorted (independent of the partitions' order): en-fr + en-es -> ``EN-ES-FR`` (the seed's
    EN-FR-ES)."""
    langs = {
        lang
        for spec in partitions.values()
        for lang in str(spec.get("lang_pair", "")).split("-")
        if lang
    }
    ordered = (["en"] if "en" in langs else []) + sorted(langs - {"en"})
    return "-".join(lang.upper() for lang in ordered) or "ALL"


def similarity_partitions(
    corpus_section: Mapping[str, Any], train_section: Mapping[str, Any]
) -> list[str]:
    """The training partitions the workflow names models after (the Snakefile's wildcards)."""
    parts = dict(corpus_section.get("partitions") or {})
    sim = (train_section or {}).get("similarity") or {}
    names = list(sim.get("partitions") or parts)
    if sim.get("combined", True) and len(names) > 1:
        names.append(combined_name({n: parts.get(n, {}) for n in names}))
    return names


def model_name(encoder: str, partition: str) -> str:
    return f"similarity-{encoder}-{partition}"


# --- data --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Split:
    """Sentence pairs of one corpus split (one partition, or several together)."""

    s1: list[str]
    s2: list[str]
    label: list[int]
    fold: list[int | None]
    lang_pair: list[str]

    def __len__(self) -> int:
        return len(self.label)

    def take(self, idx: Sequence[int]) -> Split:
        return Split(*([getattr(self, f.name)[i] for i in idx] for f in dataclasses.fields(self)))

    @staticmethod
    def concat(parts: Sequence[Split]) -> Split:
        out = Split([], [], [], [], [])
        for p in parts:
            for f in dataclasses.fields(Split):
                getattr(out, f.name).extend(getattr(p, f.name))
        return out


def corpus_partitions(corpus_dir: str | os.PathLike) -> list[str]:
    """Partition folders of a corpus (``<corpus>/data/<partition>/``), sorted."""
    d = Path(corpus_dir) / "data"
    return sorted(p.name for p in d.iterdir() if p.is_dir()) if d.is_dir() else []


def read_split(corpus_dir: str | os.PathLike, partition: str, split: str) -> Split:
    """One partition's ``train`` or ``test`` split through `datasets` (empty when absent)."""
    from .data import load_parquet

    files = sorted((Path(corpus_dir) / "data" / partition).glob(f"{split}-*.parquet"))
    if not files:
        return Split([], [], [], [], [])
    ds = load_parquet(files, COLUMNS, streaming=False)
    if len(ds) == 0:
        return Split([], [], [], [], [])
    cols = ds.to_dict()
    return Split(
        cols["sentence1"], cols["sentence2"], [int(x) for x in cols["label"]],
        [None if f is None else int(f) for f in cols["fold"]], cols["lang_pair"],
    )  # fmt: skip


# --- measures ----------------------------------------------------------------------------------


def accuracy(gold: Sequence[int], pred: Sequence[int]) -> float | None:
    if not gold:
        return None
    return sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold)


def accuracy_threshold(scores: Sequence[float], gold: Sequence[int]) -> tuple[float, float]:
    """The threshold t (similar when score > t) with the best accuracy on (scores, gold): (t, acc).

    One sorted sweep; cuts lie midway between distinct scores.
    """
    n = len(scores)
    if n == 0:
        raise ValueError("accuracy_threshold: no scores")
    pairs = sorted(zip(scores, gold, strict=True))
    correct = sum(gold)  # everything above the lowest cut predicted similar
    best = (pairs[0][0] - 1e-6, correct / n)
    i = 0
    while i < n:
        j = i
        while j < n and pairs[j][0] == pairs[i][0]:
            correct += 1 if pairs[j][1] == 0 else -1
            j += 1
        cut = (pairs[i][0] + pairs[j][0]) / 2 if j < n else pairs[i][0]
        if correct / n > best[1]:
            best = (cut, correct / n)
        i = j
    return best


def vote(probs: Sequence[Sequence[float]]) -> tuple[list[int], list[int]]:
    """Max voting and average voting of several models' P(similar) over the same rows.

    Max voting: the label most models give (a tie goes to average voting). Average voting: mean
    P(similar) >= 0.5.
    """
    k = len(probs)
    n = len(probs[0]) if k else 0
    avg = [int(sum(p[i] for p in probs) / k >= 0.5) for i in range(n)]
    mx = []
    for i in range(n):
        yes = sum(p[i] >= 0.5 for p in probs)
        mx.append(1 if 2 * yes > k else 0 if 2 * yes < k else avg[i])
    return mx, avg


def mean_sd(xs: Sequence[float]) -> tuple[float | None, float | None]:
    if not xs:
        return None, None
    return statistics.fmean(xs), statistics.stdev(xs) if len(xs) > 1 else 0.0


# --- model helpers -----------------------------------------------------------------------------


def model_info(encoder: str, cfg: Any) -> dict:
    """The settings a fresh classifier is built from (saved in ``similarity.json``)."""
    info = dataclasses.asdict(cfg)
    info.pop("max_folds", None)
    if encoder == "bilstm":
        src = cfg.word_vectors
        is_file = Path(src).is_file() and not Path(src, "config.json").exists()
        info["vectors_source"] = "file" if is_file else "encoder"
    return info


def predict(model, split: Split, batch_size: int) -> list[float]:
    """P(similar) of every pair (eval mode, no gradients; the model's mode is restored)."""
    import torch

    out: list[float] = []
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(split), batch_size):
            logits = model(split.s1[i : i + batch_size], split.s2[i : i + batch_size])
            out += torch.softmax(logits, -1)[:, 1].cpu().tolist()
    model.train(was)
    return out


def cosines(model, split: Split, batch_size: int) -> list[float]:
    """Cosine of the two sides' vectors under ``model``'s encoder (the untrained baseline)."""
    import torch

    out: list[float] = []
    was = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(split), batch_size):
            a = model.embed(split.s1[i : i + batch_size])
            b = model.embed(split.s2[i : i + batch_size])
            out += torch.nn.functional.cosine_similarity(a.float(), b.float()).cpu().tolist()
    model.train(was)
    return out


def head_groups(head_lr: float | None):
    """Optimizer groups: the classifier head at ``head_lr``, the rest at the loop's rate."""
    if head_lr is None:
        return None

    def groups(model) -> list[dict]:
        head = {id(p) for p in model.head.parameters()}
        rest = [p for p in model.parameters() if id(p) not in head]
        return [{"params": rest}, {"params": list(model.head.parameters()), "lr": head_lr}]

    return groups


def loss_fn_for(split: Split):
    """:data:`parasim.train.loop.LossFn` over row indices of ``split`` (summed cross-entropy)."""
    import torch
    import torch.nn.functional as F

    def loss_fn(model, idx: Sequence[int]):
        logits = model([split.s1[i] for i in idx], [split.s2[i] for i in idx])
        gold = torch.tensor([split.label[i] for i in idx], device=logits.device)
        return {"ce": (F.cross_entropy(logits, gold, reduction="sum"), len(idx))}

    return loss_fn


def _replace_dir(src: Path, dst: Path) -> None:
    shutil.rmtree(dst, ignore_errors=True)
    src.rename(dst)


# --- the protocol ------------------------------------------------------------------------------


def _partition_members(
    partition: str,
    corpus_section: Mapping[str, Any],
    sim: SimilarityConfig,
    found: Sequence[str],
) -> list[str]:
    """The corpus partitions a training partition is made of: itself, or, for the combined
    partition (:func:`combined_name`), every listed partition the corpus has rows for."""
    parts = dict(corpus_section.get("partitions") or {})
    names = list(sim.partitions or parts or found)
    if partition not in names and partition == combined_name({n: parts.get(n, {}) for n in names}):
        return [n for n in names if n in found]
    return [partition]


def _skip(out: Path, eval_dir: Path, name: str, reason: str, extra: dict) -> dict:
    """Write the outputs of a skipped model: metrics, card and eval JSONs that say why."""
    from .card import plot_curve, write_metrics, write_model_card

    log.warning("%s skipped: %s", name, reason)
    metrics = {"model": name, "skipped": reason, **extra}
    write_metrics(out / "metrics.json", metrics)
    with warnings.catch_warnings():  # an empty plot: no legend entries
        warnings.simplefilter("ignore", UserWarning)
        plot_curve([], out / "training_curve.png", f"{name}: skipped ({reason[:60]})")
    write_model_card(out / "README.md", name, f"Not trained: {reason}", extra, {}, {})
    for f in ("cv.json", "test.json"):
        write_metrics(eval_dir / f, {"model": name, "skipped": reason})
    return metrics


def train_similarity(
    corpus_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    encoder: str,
    partition: str,
    section: Mapping[str, Any] | None = None,
    corpus_section: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Run seed 001's protocol for one encoder and training partition (module docstring).

    Writes ``out_dir``: ``model/`` (the best fold model), ``metrics.json``, ``README.md``,
    ``training_curve.png``, ``folds/fold-<i>/result.json``; ``eval_dir``: ``cv.json`` (Table 4)
    and ``test.json`` (Table 5). Returns the metrics.

    Raises:
        ConfigError: bad settings or a model / vector file that cannot be loaded.
    """
    from .card import plot_curve, write_metrics, write_model_card
    from .loop import fingerprint, fit, make_accelerator, set_seed
    from .similarity_models import build_classifier, save_classifier

    t0 = time.perf_counter()
    args, cfg, sim = similarity_settings(section, encoder)
    name = model_name(encoder, partition)
    out, eval_dir = Path(out_dir), Path(eval_dir)
    out.mkdir(parents=True, exist_ok=True)
    if corpus_section is None:
        from parasim.config import validate_section

        corpus_section = validate_section("corpus", {})
    found = corpus_partitions(corpus_dir)
    members = _partition_members(partition, corpus_section, sim, found)
    base = {"encoder": encoder, "partition": partition, "members": members}

    train = Split.concat([read_split(corpus_dir, p, "train") for p in members if p in found])
    tests = {p: read_split(corpus_dir, p, "test") for p in found}
    counts = Counter(
        train_rows=len(train), train_similar=sum(train.label),
        train_rows_without_fold=sum(f is None for f in train.fold),
    )  # fmt: skip
    if not train:
        return _skip(
            out, eval_dir, name,
            f"partition {partition} has no training rows in {corpus_dir} "
            f"(partitions there: {found or 'none'})", base,
        )  # fmt: skip
    fold_ids = sorted({f for f in train.fold if f is not None})
    if len(fold_ids) < 2:
        return _skip(
            out, eval_dir, name,
            f"partition {partition}: {len(train)} training pairs fill {len(fold_ids)} fold(s); "
            f"k-fold cross-validation needs at least 2 non-empty folds (corpus.folds, more pairs)",
            {**base, **counts},
        )  # fmt: skip
    if cfg.max_folds is not None:
        fold_ids = fold_ids[: cfg.max_folds]

    acc = make_accelerator(args)
    set_seed(args.seed)
    # vocabulary of the BiLSTM: every sentence the model will see in training and testing
    texts = train.s1 + train.s2 + [t for s in tests.values() for t in s.s1 + s.s2]
    info = model_info(encoder, cfg)
    untrained = build_classifier(encoder, info, texts)
    info = dict(untrained.info)
    untrained.to(acc.device)
    # baselines: majority class and the untrained encoder's cosine with a training-fold threshold
    train_cos = cosines(untrained, train, sim.eval_batch_size)
    test_cos = {p: cosines(untrained, s, sim.eval_batch_size) for p, s in tests.items() if len(s)}
    majority = int(2 * sum(train.label) >= len(train))
    data_fp = [
        [(str(f), f.stat().st_size) for f in sorted(Path(corpus_dir, "data").rglob("*.parquet"))],
        members, info, code_fingerprint("similarity.py", "similarity_models.py", "loop.py"),
    ]  # fmt: skip
    folds: list[dict] = []
    best: dict | None = None
    for f in fold_ids:
        fold_dir = out / "folds" / f"fold-{f}"
        val_idx = [i for i, x in enumerate(train.fold) if x == f]
        tr_idx = [i for i, x in enumerate(train.fold) if x is not None and x != f]
        val, tr = train.take(val_idx), train.take(tr_idx)
        # baselines on this fold: threshold and majority from the training folds only
        tr_cos, val_cos = [train_cos[i] for i in tr_idx], [train_cos[i] for i in val_idx]
        fold_base = {
            "majority_accuracy": accuracy(
                val.label, [int(2 * sum(tr.label) >= len(tr))] * len(val)
            ),
        }
        if tr_cos:
            t, _ = accuracy_threshold(tr_cos, tr.label)
            fold_base["untrained_cosine_accuracy"] = accuracy(
                val.label, [int(c > t) for c in val_cos]
            )
        rec: dict[str, Any] = {"fold": f, "train_rows": len(tr), "val_rows": len(val), **fold_base}
        if len(set(tr.label)) < 2:
            rec["skipped"] = (
                f"fold {f}: the training folds hold one class only "
                f"({len(tr)} rows, label {tr.label[0] if tr.label else 'none'})"
            )
            log.warning("%s: %s", name, rec["skipped"])
            folds.append(rec)
            continue
        fp = fingerprint([dataclasses.asdict(args), data_fp, f])
        done = fold_dir / "result.json"
        if done.exists():
            prev = json.loads(done.read_text("utf-8"))
            if prev.get("fingerprint") == fp:
                log.info("%s fold %d: finished earlier, kept", name, f)
                folds.append(prev)
                if best is None or prev["accuracy"] > best["accuracy"]:
                    best = prev
                continue
        set_seed(args.seed + f)
        model = build_classifier(encoder, info, texts) if encoder == "biencoder" else None
        if model is None:  # the BiLSTM's vectors are shared: copy the untrained model
            import copy

            model = copy.deepcopy(untrained).cpu()
            # a fresh seeded initialisation per fold
            model.encoder.lstm.reset_parameters()
            for m in model.head.modules():
                if hasattr(m, "reset_parameters") and m is not model.head:
                    m.reset_parameters()
        log.info("%s fold %d: %d training pairs, %d held out", name, f, len(tr), len(val))
        tf = time.perf_counter()
        result = fit(
            model, list(range(len(tr))), loss_fn_for(tr), args, fold_dir,
            fingerprint_extra=[data_fp, f], accelerator=acc,
            param_groups=head_groups(info.get("head_learning_rate")),
        )  # fmt: skip
        fold_s = time.perf_counter() - tf
        m = result.model
        val_p = predict(m, val, sim.eval_batch_size)
        rec.update(
            fingerprint=fp,
            accuracy=accuracy(val.label, [int(p >= 0.5) for p in val_p]),
            steps=result.state["step"],
            stopped=result.state["stopped"],
            resumed_from=result.state["resumed_from"],
            train_s=round(fold_s, 1),
            pairs_per_s=_mean(
                [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
            ),
            history=result.history,
            test_probs={p: predict(m, s, sim.eval_batch_size) for p, s in tests.items() if len(s)},
        )
        log.info("%s fold %d: held-out accuracy %.4f", name, f, rec["accuracy"])
        if best is None or rec["accuracy"] > best["accuracy"]:
            tmp = out / ".model.tmp"
            shutil.rmtree(tmp, ignore_errors=True)
            save_classifier(m, tmp, {"fold": f, "fold_accuracy": rec["accuracy"]})
            _replace_dir(tmp, out / "model")
            best = rec
        write_metrics(done, rec)  # after the model: a kept result never lacks its model
        folds.append(rec)
        del model, m, result

    trained = [r for r in folds if "accuracy" in r]
    if not trained:
        return _skip(
            out, eval_dir, name,
            "every fold was skipped: " + "; ".join(r["skipped"] for r in folds),
            {**base, **counts, "folds": folds},
        )  # fmt: skip
    # the model/ folder holds the best fold model of this run's results (a resumed run may have
    # kept an earlier one: check)
    saved = json.loads((out / "model" / "similarity.json").read_text("utf-8"))
    if saved.get("fold") != best["fold"]:
        log.warning(
            "model/ holds fold %s, expected %s: results were reused",
            saved.get("fold"),
            best["fold"],
        )

    accs = [r["accuracy"] for r in trained]
    cv_mean, cv_sd = mean_sd(accs)
    base_cv = {
        k: mean_sd([r[k] for r in folds if r.get(k) is not None])
        for k in ("majority_accuracy", "untrained_cosine_accuracy")
    }
    thr, thr_acc = accuracy_threshold(train_cos, train.label)

    def test_row(gold: list[int], probs: list[list[float]], best_p: list[float], cos: list[float]):
        mx, avg = vote(probs)
        return {
            "rows": len(gold),
            "best_fold_model": accuracy(gold, [int(p >= 0.5) for p in best_p]),
            "max_voting": accuracy(gold, mx),
            "avg_voting": accuracy(gold, avg),
            "majority_baseline": accuracy(gold, [majority] * len(gold)),
            "untrained_cosine_baseline": accuracy(gold, [int(c > thr) for c in cos]),
        }

    table: dict[str, dict] = {}
    pooled: dict[str, list] = {}
    for p, s in tests.items():
        if not len(s):
            table[p] = {"rows": 0, "skipped": "no test rows"}
            continue
        probs = [r["test_probs"][p] for r in trained]
        table[p] = {"lang_pair": s.lang_pair[0], **test_row(
            s.label, probs, best["test_probs"][p], test_cos[p]
        )}  # fmt: skip
        for key in (s.lang_pair[0], "all"):
            g = pooled.setdefault(key, [[], [[] for _ in trained], [], []])
            g[0] += s.label
            for j, r in enumerate(trained):
                g[1][j] += r["test_probs"][p]
            g[2] += best["test_probs"][p]
            g[3] += test_cos[p]
    by_lang = {k: test_row(*v) for k, v in pooled.items()}
    own = [p for p in members if p in table and table[p].get("rows")]
    own_gold: list[int] = []
    own_probs: list[list[float]] = [[] for _ in trained]
    own_cos: list[float] = []
    for p in own:
        own_gold += tests[p].label
        own_cos += test_cos[p]
        for j, r in enumerate(trained):
            own_probs[j] += r["test_probs"][p]
    own_test = (
        test_row(own_gold, own_probs, [x for p in own for x in best["test_probs"][p]], own_cos)
        if own_gold
        else None
    )

    cv = {
        "model": name, **base,
        "folds_trained": len(trained), "folds_skipped": len(folds) - len(trained),
        "fold_accuracy": {str(r["fold"]): r.get("accuracy") for r in folds},
        "skipped_folds": {str(r["fold"]): r["skipped"] for r in folds if "skipped" in r},
        "mean": cv_mean, "sd": cv_sd,
        "max_voting": own_test and own_test["max_voting"],
        "avg_voting": own_test and own_test["avg_voting"],
        "voting_on": f"test split of {', '.join(own) or 'none'} ({len(own_gold)} pairs)",
        "baselines": {
            "majority_class": {"mean": base_cv["majority_accuracy"][0],
                               "sd": base_cv["majority_accuracy"][1],
                               "test": own_test and own_test["majority_baseline"]},
            "untrained_cosine": {"mean": base_cv["untrained_cosine_accuracy"][0],
                                 "sd": base_cv["untrained_cosine_accuracy"][1],
                                 "test": own_test and own_test["untrained_cosine_baseline"],
                                 "threshold": thr, "train_accuracy": thr_acc},
        },
    }  # fmt: skip
    test = {
        "model": name, **base, "best_fold": best["fold"],
        "best_fold_accuracy": best["accuracy"],
        "partitions": table, "lang_pairs": by_lang,
    }  # fmt: skip
    write_metrics(eval_dir / "cv.json", cv)
    write_metrics(eval_dir / "test.json", test)

    history = []
    offset = 0
    for r in trained:  # the folds' curves one after another on one step axis
        for h in r["history"]:
            history.append({**h, "step": h["step"] + offset})
        offset += r["steps"]
    plot_curve(history, out / "training_curve.png", f"{name}: {len(trained)} fold models")
    speeds = [r["pairs_per_s"] for r in trained if r.get("pairs_per_s")]
    metrics = {
        "model": name, **base, "data": dict(counts),
        "cv": {k: cv[k] for k in ("mean", "sd", "max_voting", "avg_voting", "fold_accuracy",
                                  "skipped_folds", "baselines")},
        "test": {k: {kk: vv for kk, vv in v.items()} for k, v in by_lang.items()},
        "best_fold": best["fold"],
        "train_s": round(sum(r.get("train_s", 0) for r in trained), 1),
        "pairs_per_s": _mean(speeds),
        "wall_s": round(time.perf_counter() - t0, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "settings": {**dataclasses.asdict(args), **info},
    }  # fmt: skip
    write_metrics(out / "metrics.json", metrics)
    summary = {
        "cv accuracy (mean ± sd)": f"{cv_mean:.4f} ± {cv_sd:.4f}",
        "max voting (own test)": cv["max_voting"], "avg voting (own test)": cv["avg_voting"],
        **{f"test {k} (best fold model)": v["best_fold_model"] for k, v in by_lang.items()},
        "majority baseline (cv)": cv["baselines"]["majority_class"]["mean"],
        "untrained cosine baseline (cv)": cv["baselines"]["untrained_cosine"]["mean"],
    }  # fmt: skip
    desc = (
        "InferSent-style BiLSTM-max over frozen word vectors"
        if encoder == "bilstm"
        else "fine-tuned transformer bi-encoder (mean pooling)"
    )
    write_model_card(
        out / "README.md", name,
        f"{desc} with the [u; v; |u-v|; u*v] classifier of seed 001 §4.1, trained on parasim's "
        f"corpus partition {partition} ({', '.join(members)}): 1 = similar (aligned translation), "
        f"0 = dissimilar (hard negative). `model/` is the best of the {len(trained)} fold models "
        f"(fold {best['fold']}); load it with "
        "`parasim.train.similarity_models.load_classifier`.",
        {**dict(counts), "folds": len(fold_ids)},
        {**dataclasses.asdict(args), **info}, summary,
    )  # fmt: skip
    shutil.copyfile(out / "README.md", out / "model" / "README.md")
    return metrics


def _mean(xs: Sequence[float]) -> float | None:
    xs = [x for x in xs if x is not None and not math.isnan(x)]
    return sum(xs) / len(xs) if xs else None


# --- MSRP transfer -----------------------------------------------------------------------------

MSRP_FILES = {"train": "msr_paraphrase_train.txt", "test": "msr_paraphrase_test.txt"}


def read_msrp(path: str | os.PathLike) -> Split:
    """One MSRP file: tab-separated ``Quality``, ``#1 ID``, ``#2 ID``, ``#1 String``, ``#2 String``
    under a header line (the layout Microsoft ships).

    Raises:
        ValueError: naming the file and line of a row that is not in this layout.
    """
    import csv

    p = Path(path)
    out = Split([], [], [], [], [])
    with p.open(encoding="utf-8-sig", newline="") as fh:
        rows = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
        for n, row in enumerate(rows, 1):
            if n == 1 and row and row[0].strip().lower() == "quality":
                continue
            if not row or not "".join(row).strip():
                continue
            if len(row) != 5 or row[0].strip() not in ("0", "1"):
                raise ValueError(
                    f"{p}:{n}: not an MSRP row (5 tab-separated fields, Quality 0 or 1)"
                )
            out.s1.append(row[3])
            out.s2.append(row[4])
            out.label.append(int(row[0]))
            out.fold.append(None)
            out.lang_pair.append("en-en")
    if not out.label:
        raise ValueError(f"{p}: no MSRP rows")
    return out


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

    from .loop import fit, make_accelerator, set_seed
    from .similarity_models import build_classifier, extend_vocabulary, load_classifier

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
