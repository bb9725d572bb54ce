"""Training and evaluating the entity-enriched Siamese model (the package docstring): the encoder,
then the MLP, optionally again with BM25 silver pairs; the test and STS tables and the model
folder."""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import time
import warnings
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.accel import cpu_seconds
from parasim.config import ConfigError
from parasim.train.core.loop import TrainingArguments, code_fingerprint, peak_gpu_mb, peak_rss_mb

from .data import (
    Pairs,
    SkipModel,
    add_entities,
    bm25_silver_pairs,
    feature_matrix,
    read_pairs,
    read_sts_pairs,
)
from .evaluate import binary_table, roc_auc, sts_row
from .model import (
    bce_loss,
    build_mlp,
    build_siamese,
    cosine_loss,
    cosines,
    mlp_probs,
    save_entity_siamese,
)
from .settings import (
    MISSING_VALUE,
    MODEL_KEY,
    MODEL_NAME,
    EntitySiameseConfig,
    entity_siamese_settings,
    mlp_arguments,
)

log = logging.getLogger("parasim.train")

#: The code a kept part was computed by (``parasim/train/``): other code, no reuse.
CODE = (
    "entity_siamese/settings.py", "entity_siamese/data.py", "entity_siamese/model.py",
    "entity_siamese/training.py", "core/data.py", "core/encoder.py", "core/loop.py",
)  # fmt: skip


def _share_identical_files(src: Path, dst: Path, min_bytes: int = 1 << 20) -> int:
    """Replace each file of ``dst`` that is byte-identical to the same-named file of ``src``
    (``min_bytes`` or larger) by a hard link to it; returns the bytes saved. Where links are not
    possible (another file system) the copies stay."""
    import filecmp

    saved = 0
    for f in sorted(dst.glob("*")) if src.is_dir() and dst.is_dir() else []:
        twin = src / f.name
        if not (f.is_file() and twin.is_file()) or f.stat().st_size < min_bytes:
            continue
        if os.path.samefile(f, twin) or not filecmp.cmp(f, twin, shallow=False):
            continue
        tmp = f.with_name(f".{f.name}.link")
        try:
            tmp.unlink(missing_ok=True)
            os.link(twin, tmp)
            os.replace(tmp, f)
            saved += f.stat().st_size
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            log.info("entity-siamese: %s kept as a copy (%s)", f, exc)
    return saved


def _skip(out: Path, eval_dir: Path, reason: str, extra: Mapping) -> dict:
    from parasim.train.core.card import plot_curve, write_metrics, write_model_card

    from .report import write_table

    log.warning("%s skipped: %s", MODEL_NAME, reason)
    metrics = {"model": MODEL_NAME, "skipped": reason, **extra}
    write_metrics(out / "metrics.json", metrics)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        plot_curve([], out / "training_curve.png", f"{MODEL_NAME}: skipped ({reason[:60]})")
    write_model_card(out / "README.md", MODEL_NAME, f"Not trained: {reason}", extra, {}, {})
    for f in ("test.json", "sts.json"):
        write_metrics(eval_dir / f, {"model": MODEL_NAME, "skipped": reason})
    write_table(eval_dir)
    return metrics


@dataclasses.dataclass
class _Run:
    """What the parts of one run share: settings, data, the pretrained encoder and its cosines,
    and the training history of every part."""

    args: TrainingArguments
    cfg: EntitySiameseConfig
    out: Path
    accelerator: Any
    data_fp: list
    train: Pairs
    test: Pairs
    sts: dict[str, Pairs]
    tokenizer: Any
    untrained: Any
    cos_untrained: dict[str, list[float]] = dataclasses.field(default_factory=dict)
    history: list[dict] = dataclasses.field(default_factory=list)

    @property
    def features(self) -> list[str]:
        return list(self.cfg.features)


def train_entity_siamese(
    corpus_dir: str | os.PathLike,
    scores: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    sts_dir: str | os.PathLike | None = None,
    nlp=None,
) -> dict[str, Any]:
    """Train and evaluate the entity-enriched Siamese model (package docstring).

    Writes ``out_dir``: ``model/``, ``metrics.json``, ``README.md``, ``training_curve.png``,
    ``stages/`` (finished parts); ``eval_dir``: ``test.json``, ``sts.json``, ``table.html``.
    ``nlp``: a loaded spaCy pipeline with NER (default: the first of ``spacy`` that loads).

    Raises:
        ConfigError: bad settings, or an encoder that cannot be loaded.
    """
    from parasim.amr.parse import load_english
    from parasim.train.core.data import corpus_partitions
    from parasim.train.core.loop import make_accelerator, set_seed

    t0, cpu0 = time.perf_counter(), cpu_seconds()
    try:
        args, cfg = entity_siamese_settings(section)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    out, eval_dir = Path(out_dir), Path(eval_dir)
    out.mkdir(parents=True, exist_ok=True)
    found = corpus_partitions(corpus_dir)
    members = [p for p in (cfg.partitions or found) if p in found]
    base = {"partitions": members, "features": list(cfg.features)}
    counts: Counter = Counter()
    try:
        train, test = read_training_data(corpus_dir, scores, cfg, args.seed, found, counts)
    except SkipModel as exc:
        return _skip(out, eval_dir, str(exc), {**base, **counts})
    counts.update(train_similar=int(sum(train.label)), test_similar=int(sum(test.label)))
    log.info("data: %s", dict(counts))

    acc = make_accelerator(args)
    set_seed(args.seed)
    untrained, tokenizer = build_siamese(cfg.model, cfg.freeze_embeddings)
    untrained.to(acc.device)
    sts = read_sts_sets(sts_dir, cfg)
    if sts or cfg.silver:
        nlp = nlp or load_english(cfg.spacy)
    run = _Run(
        args, cfg, out, acc, _data_fingerprint(corpus_dir, scores, members), train, test,
        sts_with_entities(sts, nlp, cfg.features), tokenizer, untrained,
    )  # fmt: skip
    run.cos_untrained = encode_sets(run, untrained)

    t_train = time.perf_counter()
    enc, mlp, cos, steps = train_round(run, 1, train)
    rounds = {"round_1": steps}
    gold_only = None
    if cfg.silver:
        silver = labelled_silver_pairs(run, enc, mlp, nlp, counts)
        if len(silver):
            gold_only = (mlp, cos)
            enc, mlp, cos, rounds["round_2"] = train_round(run, 2, train + silver)
        else:
            log.warning("silver: BM25 found no new pair; one round only")
    train_s = time.perf_counter() - t_train

    test_json, sts_json, thr_siam = evaluate_run(run, mlp, cos, gold_only, base, sts_dir)
    verdicts = model_verdicts(run, mlp, cos, gold_only)
    save_model(run, enc, mlp, thr_siam, len(rounds))
    write_evaluation(eval_dir, test_json, sts_json)
    timing = {"train_s": round(train_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
              "cpu_s": round(cpu_seconds() - cpu0, 1)}  # fmt: skip
    return write_metrics_and_card(run, base, counts, rounds, test_json, sts_json, timing, verdicts)


def model_verdicts(run: _Run, mlp, cos, gold_only) -> dict[str, dict]:
    """The entity model against the untrained encoder's cosine
    (:func:`parasim.train.core.verdict.compare`): Spearman on each STSb-multi-mt set and
    accuracy on the corpus test split (the untrained cosine at its training-pair threshold);
    the first is the headline (STSb, the larger set, when it is there)."""
    from parasim.train.core.metrics import accuracy_threshold
    from parasim.train.core.verdict import accuracy_stat, compare, spearman_stat

    out: dict[str, dict] = {}
    for k, s in run.sts.items():
        sc = _model_scores(run, mlp, cos, gold_only, f"sts {k}", s)
        out[f"sts {k}"] = compare(
            spearman_stat(s.label, sc["entity_siamese"]), spearman_stat(s.label, sc["untrained"]),
            len(s), measure=f"STSb {k} Spearman", baseline_name="untrained encoder's cosine",
            evaluated_on=f"STSb-multi-mt dev {k}",
        )  # fmt: skip
    gold_train = [int(x) for x in run.train.label]
    thr_untr, _ = accuracy_threshold(run.cos_untrained["train"], gold_train)
    sc = _model_scores(run, mlp, cos, gold_only, "test", run.test)
    gold = [int(x) for x in run.test.label]
    out["test"] = compare(
        accuracy_stat(gold, [int(p >= 0.5) for p in sc["entity_siamese"]]),
        accuracy_stat(gold, [int(c > thr_untr) for c in sc["untrained"]]),
        len(gold), measure="test accuracy", baseline_name="untrained encoder's cosine",
        evaluated_on="the corpus test split"
        + (" (its divergent rows with entity scores too)" if run.cfg.grades == "graded" else ""),
    )  # fmt: skip
    return out


def read_training_data(
    corpus_dir: str | os.PathLike,
    scores: Sequence[str | os.PathLike],
    cfg: EntitySiameseConfig,
    seed: int,
    found: Sequence[str],
    counts: Counter,
) -> tuple[Pairs, Pairs]:
    """The train and test pairs of the training partitions with their entity features; the rows
    counted in ``counts`` (a seeded sample of ``max_train_pairs`` training pairs at most).

    Raises:
        SkipModel: no training row, none with entity scores, one class only, or no test row.
    """
    members = [p for p in (cfg.partitions or found) if p in found]
    feats = list(cfg.features)
    train, test = Pairs.empty(), Pairs.empty()
    for p in members:
        graded = (cfg.grades, cfg.divergent_per_positive, seed)
        tr, c1 = read_pairs(corpus_dir, scores, p, "train", feats, *graded)
        te, c2 = read_pairs(corpus_dir, scores, p, "test", feats, *graded)
        train, test = train + tr, test + te
        counts.update({f"train_{k}": v for k, v in c1.items()})
        counts.update({f"test_{k}": v for k, v in c2.items()})
    if not len(train):
        raise SkipModel(
            f"no training rows in {corpus_dir} for partitions {cfg.partitions or found}"
        )
    if counts["train_rows_without_entities"] == len(train):
        raise SkipModel(
            "no training row has an entity score (scores.entities off, or every row "
            "skipped by the scores stage)"
        )
    if len({int(x) for x in train.label}) < 2:
        raise SkipModel(f"the {len(train)} training rows hold one class only")
    if cfg.max_train_pairs is not None and len(train) > cfg.max_train_pairs:
        counts["train_rows_sampled_out"] = len(train) - cfg.max_train_pairs
        keep = sorted(random.Random(seed).sample(range(len(train)), cfg.max_train_pairs))
        train = train.take(keep)
    if not len(test):
        raise SkipModel(f"no test rows in {corpus_dir} for partitions {members}")
    return train, test


def _data_fingerprint(
    corpus_dir: str | os.PathLike, scores: Sequence[str | os.PathLike], members: Sequence[str]
) -> list:
    """What identifies the run's data and code: a kept part from other data or code is retrained."""
    return [
        [(str(f), f.stat().st_size) for f in sorted(Path(corpus_dir, "data").rglob("*.parquet"))],
        sorted((str(s), Path(s).stat().st_size) for s in scores), members,
        code_fingerprint(*CODE),
    ]  # fmt: skip


def read_sts_sets(sts_dir: str | os.PathLike | None, cfg: EntitySiameseConfig) -> dict[str, Pairs]:
    """STSb-multi-mt dev, English against French and Spanish, where ``sts_dir`` has them."""
    sts = {}
    if sts_dir is not None:
        for lang in ("fr", "es"):
            s = read_sts_pairs(sts_dir, lang, cfg.sts_max_pairs)
            if s is not None:
                sts[f"en-{lang}"] = s
    return sts


def sts_with_entities(sts: dict[str, Pairs], nlp, features: Sequence[str]) -> dict[str, Pairs]:
    """The STS pairs with their entity cosines: the entity side of every language is the English
    pair, so one NER pass serves them all."""
    if not sts:
        return sts
    with_ents = add_entities(next(iter(sts.values())), nlp, list(features))
    return {k: dataclasses.replace(v, ents=with_ents.ents) for k, v in sts.items()}


def encode_sets(run: _Run, enc) -> dict[str, list[float]]:
    """The cosines of ``enc`` on the train and test pairs and on every STS set."""
    cfg, tok = run.cfg, run.tokenizer
    got = {"train": cosines(enc, tok, run.train.s1, run.train.s2, cfg),
           "test": cosines(enc, tok, run.test.s1, run.test.s2, cfg)}  # fmt: skip
    for k, s in run.sts.items():
        got[f"sts {k}"] = cosines(enc, tok, s.s1, s.s2, cfg)
    return got


def train_round(run: _Run, rnd: int, pairs: Pairs):
    """Train the encoder (from the pretrained one) and then the MLP on ``pairs``.

    Returns:
        ``(encoder, MLP, cosines of the encoder (:func:`encode_sets`), steps of both parts)``.
    """
    from parasim.train.core.loop import fingerprint

    args, cfg = run.args, run.cfg
    fp = fingerprint([dataclasses.asdict(args), dataclasses.asdict(cfg),
                      cfg.train_encoder, run.data_fp, rnd, len(pairs),
                      fingerprint([pairs.label, pairs.grade])])  # fmt: skip
    enc, hist, enc_state = _encoder_part(run, rnd, pairs, fp)
    run.history.extend({**h, "part": f"encoder round {rnd}"} for h in hist)
    cos = encode_sets(run, enc) if cfg.train_encoder else run.cos_untrained
    extra = pairs.take(range(len(run.train), len(pairs)))  # the silver pairs of round 2
    pair_cos = cos["train"] + cosines(enc, run.tokenizer, extra.s1, extra.s2, cfg)
    mlp, res = _mlp_part(run, rnd, pairs, pair_cos, fp)
    run.history.extend({**h, "part": f"mlp round {rnd}"} for h in res.history)
    steps = {"encoder_steps": enc_state["step"], "mlp_steps": res.state["step"]}
    for k in ("dev_rows", "dev_skipped", "best_step", "best_metric"):
        if enc_state.get(k) is not None:
            steps[f"encoder_{k}"] = enc_state[k]
    return enc, mlp, cos, steps


def _encoder_part(run: _Run, rnd: int, pairs: Pairs, fp: str):
    """The round's encoder, its history and state: kept from an earlier run under the same
    fingerprint, trained with the cosine loss, or the pretrained one (``train_encoder: false``)."""
    from parasim.train.core.card import write_dir, write_metrics
    from parasim.train.core.loop import fit, set_seed
    from parasim.train.core.storage import share_weights

    args, cfg, tokenizer = run.args, run.cfg, run.tokenizer
    stage = run.out / "stages" / f"round-{rnd}"
    enc_dir = stage / "encoder"
    done = stage / "encoder.json"
    if not cfg.train_encoder:
        return run.untrained, [], {"step": 0}
    prev = json.loads(done.read_text("utf-8")) if done.exists() else {}
    if prev.get("fingerprint") == fp:
        log.info("round %d: encoder trained earlier, kept", rnd)
        from parasim.models import load_encoder
        from parasim.train.core.encoder import TransformerMean

        e, _ = load_encoder(str(enc_dir), device="cpu", dtype="float32", key=MODEL_KEY)
        return TransformerMean(e).to(run.accelerator.device), prev["history"], prev["state"]
    set_seed(args.seed + rnd)
    enc, _ = build_siamese(cfg.model, cfg.freeze_embeddings)
    dev, why = encoder_dev_split(pairs, cfg.dev_folds)
    evaluate = None
    if dev:
        dev_pairs, dev_gold = pairs.take(dev), [int(pairs.label[i]) for i in dev]

        def evaluate(m):
            """The cosine's ROC AUC on the dev rows (does it rank similar pairs first)."""
            return {"dev_auc": roc_auc(cosines(m, tokenizer, dev_pairs.s1, dev_pairs.s2, cfg),
                                       dev_gold)}  # fmt: skip
    else:
        log.warning("round %d: the encoder has no dev split (%s): the last step ships", rnd, why)
    held = set(dev)
    res = fit(
        enc, [i for i in range(len(pairs)) if i not in held], cosine_loss(tokenizer, pairs, cfg),
        args, stage / "siamese", evaluate=evaluate, eval_at_start=True,
        fingerprint_extra=[run.data_fp, rnd, fp], accelerator=run.accelerator,
    )  # fmt: skip
    enc = res.model
    res.state["dev_rows"] = len(dev)
    if not dev:
        res.state["dev_skipped"] = why
    elif res.state.get("best_step") == 0:
        log.warning(
            "round %d: fine-tuning did not beat the untrained encoder on dev (ROC AUC "
            "%.4f at step 0): the untrained encoder ships",
            rnd,
            res.state["best_metric"],
        )
    write_dir(enc_dir, lambda d: (enc.encoder.save_pretrained(d),
                                 tokenizer.save_pretrained(d)))  # fmt: skip
    share_weights(enc_dir, run.out.parent / ".weights")
    write_metrics(done, {"fingerprint": fp, "history": res.history, "state": res.state})
    return enc, res.history, res.state


def encoder_dev_split(pairs: Pairs, dev_folds: int) -> tuple[list[int], str]:
    """Indices of ``pairs`` in corpus folds below ``dev_folds`` (the encoder's dev split), or
    ``([], why)`` when there is none: ``dev_folds`` 0, no row in those folds, one class only
    (no ROC AUC), or every row (nothing left to train on)."""
    if dev_folds <= 0:
        return [], "train.entity_siamese.dev_folds is 0"
    idx = [i for i, f in enumerate(pairs.fold) if f is not None and f < dev_folds]
    if not idx:
        return [], f"no training row in corpus folds 0-{dev_folds - 1}"
    if len({int(pairs.label[i]) for i in idx}) < 2:
        return [], f"the {len(idx)} rows of corpus folds 0-{dev_folds - 1} hold one class only"
    if len(idx) == len(pairs):
        return [], f"every training row is in corpus folds 0-{dev_folds - 1}"
    return idx, ""


def _mlp_part(run: _Run, rnd: int, pairs: Pairs, pair_cos: Sequence[float], fp: str):
    """The round's MLP trained on ``pairs`` (their encoder cosines ``pair_cos`` and entity
    cosines): ``(MLP on the CPU, the loop's result)``."""
    import torch

    from parasim.train.core.loop import fit, set_seed

    x = feature_matrix(pair_cos, pairs, len(run.features))
    y = torch.tensor(pairs.label, dtype=torch.float32)
    margs = mlp_arguments(run.args, run.cfg)
    per_epoch = max(1, len(pairs) // margs.batch_size)
    if margs.checkpoint_every:  # the MLP's steps take milliseconds: at most one per epoch
        margs = dataclasses.replace(
            margs, checkpoint_every=max(margs.checkpoint_every, per_epoch),
            log_every=max(margs.log_every, per_epoch),
        )  # fmt: skip
    set_seed(run.args.seed + 100 + rnd)
    mlp = build_mlp(x.shape[1], run.cfg.hidden, x)
    res = fit(
        mlp, list(range(len(pairs))), bce_loss(x, y), margs, run.out / "stages" / f"round-{rnd}"
        / "mlp", fingerprint_extra=[run.data_fp, rnd, fp], accelerator=run.accelerator,
    )  # fmt: skip
    return res.model.cpu(), res


def labelled_silver_pairs(run: _Run, enc, mlp, nlp, counts: Counter) -> Pairs:
    """BM25 silver pairs (seed 004 §3.2) with their entity cosines, labelled by the first round's
    model with its probability (soft labels); counted in ``counts``. Empty when BM25 finds none."""
    cfg, feats = run.cfg, run.features
    silver, sc = bm25_silver_pairs(run.train, cfg.silver_per_query, cfg.silver_max_pairs,
                                   run.args.seed)  # fmt: skip
    counts.update(sc)
    if not len(silver):
        return silver
    silver = add_entities(silver, nlp, feats)
    s_cos = cosines(enc, run.tokenizer, silver.s1, silver.s2, cfg)
    probs = mlp_probs(mlp, feature_matrix(s_cos, silver, len(feats)))
    counts["silver_mean_label"] = round(sum(probs) / len(probs), 4)
    return dataclasses.replace(silver, label=[float(p) for p in probs])


def _model_scores(run: _Run, mlp, cos, gold_only, key: str, pairs: Pairs) -> dict[str, list]:
    """Each model's scores of ``pairs`` (``key``: their cosines in ``cos``): the entity model's
    probability, the trained and the untrained encoder's cosine, and the gold-only entity model's
    probability (before the silver round) when there was one."""
    n = len(run.features)
    out = {
        "entity_siamese": mlp_probs(mlp, feature_matrix(cos[key], pairs, n)),
        "siamese": cos[key],
        "untrained": run.cos_untrained[key],
    }
    if gold_only is not None:
        gold_mlp, gold_cos = gold_only
        out["entity_siamese_gold_only"] = mlp_probs(
            gold_mlp, feature_matrix(gold_cos[key], pairs, n)
        )
    return out


def grade_accuracy(
    test: Pairs, scores: Mapping[str, Sequence[float]], cuts: Mapping[str, float]
) -> dict[str, dict]:
    """Per grade of the test rows: their count and each model's accuracy at its cut (as
    :func:`~.evaluate.binary_table`: a cosine above its cut, a probability at least 0.5; a
    divergent or unrelated row is right when called not similar)."""
    from parasim.train.core.metrics import accuracy_by_grade

    from .evaluate import COSINE_MODELS

    said = {
        name: [int(x > cut) if name in COSINE_MODELS else int(x >= 0.5) for x in scores[name]]
        for name, cut in cuts.items()
        if name in scores
    }
    return accuracy_by_grade(test.grade, test.label, said)


def evaluate_run(
    run: _Run, mlp, cos, gold_only, base: Mapping[str, Any], sts_dir
) -> tuple[dict, dict, float]:
    """``test.json`` and ``sts.json`` of the trained model and its baselines, and the plain
    Siamese model's threshold.

    The cosine baselines' thresholds are the accuracy-maximising cuts on the training pairs.
    """
    from parasim.train.core.metrics import accuracy_threshold

    gold_train = [int(x) for x in run.train.label]
    thr_siam, _ = accuracy_threshold(cos["train"], gold_train)
    thr_untr, _ = accuracy_threshold(run.cos_untrained["train"], gold_train)
    majority = int(2 * sum(gold_train) >= len(gold_train))
    scores_test = _model_scores(run, mlp, cos, gold_only, "test", run.test)
    cuts = {"entity_siamese": 0.5, "siamese": thr_siam, "untrained": thr_untr}
    if gold_only is not None:
        cuts["entity_siamese_gold_only"] = 0.5
    test_json = {
        "model": MODEL_NAME, **base,
        **binary_table(run.test, scores_test, cuts, majority, run.features),
        "thresholds": cuts,
    }  # fmt: skip
    if run.cfg.grades == "graded":
        test_json["by_grade"] = grade_accuracy(run.test, scores_test, cuts)
    sts_json: dict[str, Any] = {"model": MODEL_NAME}
    if not run.sts:
        sts_json["skipped"] = f"STSb-multi-mt dev not found in {sts_dir}"
    for k, s in run.sts.items():
        scores = _model_scores(run, mlp, cos, gold_only, f"sts {k}", s)
        sts_json[k] = sts_row(s, scores, run.features)
    return test_json, sts_json, thr_siam


def save_model(run: _Run, enc, mlp, thr_siam: float, n_rounds: int) -> None:
    """``model/``: the last round's encoder (hard-linked to its kept copy) and MLP, and how to
    use them (:data:`INFO_FILE`)."""
    from parasim.train.core.card import write_dir
    from parasim.train.core.storage import share_weights

    cfg, out = run.cfg, run.out
    info = {
        "model": cfg.model, "prefix": cfg.prefix, "max_length": cfg.max_length,
        "features": run.features, "hidden": cfg.hidden, "missing_value": MISSING_VALUE,
        "inputs": ["siamese_cosine", *run.features, "entities_missing"],
        "siamese_threshold": thr_siam,
    }  # fmt: skip
    write_dir(out / "model", lambda d: save_entity_siamese(enc, run.tokenizer, mlp, d, info))
    # the final encoder is also the last round's kept one (or the untrained one): one copy on
    # disk, shared with every other model folder holding the same weights
    share_weights(out / "model" / "encoder", out.parent / ".weights")


def write_evaluation(eval_dir: Path, test_json: Mapping, sts_json: Mapping) -> None:
    """``test.json``, ``sts.json`` and the report's ``table.html``."""
    from parasim.train.core.card import write_metrics

    from .report import write_table

    write_metrics(eval_dir / "test.json", test_json)
    write_metrics(eval_dir / "sts.json", sts_json)
    write_table(eval_dir)


def write_metrics_and_card(
    run: _Run,
    base: Mapping[str, Any],
    counts: Counter,
    rounds: Mapping[str, dict],
    test_json: Mapping[str, Any],
    sts_json: Mapping[str, Any],
    timing: Mapping[str, float],
    verdicts: Mapping[str, dict] | None = None,
) -> dict[str, Any]:
    """The training curve, ``metrics.json`` and the ``README.md`` model card (in ``model/``
    too); returns the metrics."""
    import shutil

    from parasim.train.core.card import plot_curve, write_metrics, write_model_card

    args, cfg, out, acc, feats = run.args, run.cfg, run.out, run.accelerator, run.features
    plot_curve(
        _one_axis(run.history), out / "training_curve.png",
        f"{MODEL_NAME}: encoder (cosine MSE) then MLP (BCE), {len(rounds)} round(s)",
    )  # fmt: skip
    a = test_json["all"]
    scored = list(test_json["thresholds"])  # the models, in the order they were scored
    last = rounds[max(rounds)]
    # the dev split chose the untrained encoder over every fine-tuned step
    shipped_start = cfg.train_encoder and last.get("encoder_best_step") == 0
    metrics = {
        "model": MODEL_NAME, **base, "data": dict(counts), "rounds": dict(rounds),
        "silver": cfg.silver, "encoder_trained": cfg.train_encoder,
        "shipped_start": shipped_start,
        "test": {k: a[k] for k in (*scored, "majority")},
        "sts": {k: v for k, v in sts_json.items() if k != "model"},
        "train_s": timing["train_s"], "wall_s": timing["wall_s"],
        "cpu_s": timing["cpu_s"], "peak_rss_mb": peak_rss_mb(),
        "verdict": next(iter(verdicts.values())) if verdicts else None,
        "verdicts": dict(verdicts or {}),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device), "mixed_precision": acc.mixed_precision,
        "settings": {**dataclasses.asdict(args), **dataclasses.asdict(cfg),
                     "encoder_trained": cfg.train_encoder},
    }  # fmt: skip
    write_metrics(out / "metrics.json", metrics)
    summary = {
        f"test {k} accuracy": a[k]["accuracy"] for k in (*scored, "majority")
    } | {f"test {k} auc": a[k].get("auc") for k in scored} | {
        f"STSb {lp} Spearman ({k})": v[k] for lp, v in metrics["sts"].items()
        if isinstance(v, dict) for k in ("entity_siamese", "siamese", "untrained")
    }  # fmt: skip
    for grade, g in (test_json.get("by_grade") or {}).items():
        summary[f"test {grade} rows accuracy (entity model / untrained cosine)"] = (
            f"{g['entity_siamese']:.4f} / {g['untrained']:.4f} ({g['rows']} rows)"
        )
    write_model_card(
        out / "README.md", MODEL_NAME,
        "Entity-enriched Siamese model of seed 004 §3: a Siamese bi-encoder "
        f"({cfg.model}, mean pooling, fine-tuned with the cosine regression objective"
        f"{'' if cfg.train_encoder else ': not fine-tuned here'}) whose cosine, with the "
        f"entity cosines {', '.join(feats)} of parasim's scores stage, feeds an MLP with a "
        "sigmoid, trained separately from the encoder on parasim's corpus "
        f"({', '.join(base['partitions'])}): 1 = similar (aligned translation), 0 = hard "
        f"negative{'; then again with BM25-sampled silver pairs' if 'round_2' in rounds else ''}"
        + (
            f"; graded: up to {cfg.divergent_per_positive} divergent row(s) per positive (a "
            "near-translation that changes a fact, with entity scores) join the negatives, the "
            f"encoder's cosine regressed to {cfg.divergent_target} on them"
            if cfg.grades == "graded"
            else ""
        )
        + ". "
        "Load `model/` with `parasim.train.entity_siamese.model.EntitySiamese`.",
        dict(counts), metrics["settings"], summary,
        verdict=metrics["verdict"],
        shipped_start=shipped_start and (
            "Fine-tuning only made the encoder worse on its dev split (the cosine's ROC AUC on "
            f"{last.get('encoder_dev_rows')} training rows of the held-out corpus folds): "
            "this folder holds the untrained encoder (step 0) under the trained MLP."
        ),
        needs=(
            f"more corpus pairs than these {counts.get('train_rows', 0)} training rows and the "
            "GPU recipe `configs/train-gpu.yaml`"
        ),
    )  # fmt: skip
    shutil.copyfile(out / "README.md", out / "model" / "README.md")
    return metrics


def _one_axis(history: Sequence[Mapping]) -> list[dict]:
    """The parts' curves one after another on one step axis (train records only)."""
    out, offset, last, prev = [], 0, None, 0
    for h in history:
        if h["kind"] != "train":
            continue
        if h["part"] != last:
            offset, last = offset + prev, h["part"]
        key = "cos_mse" if "cos_mse" in h else "bce"
        out.append({"kind": "train", "step": h["step"] + offset, "epoch": h["epoch"],
                    "cos_mse": h.get("cos_mse", math.nan) if key == "cos_mse" else math.nan,
                    "bce": h.get("bce", math.nan) if key == "bce" else math.nan})  # fmt: skip
        prev = h["step"]
    return out
