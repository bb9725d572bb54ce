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

from parasim.config import ConfigError
from parasim.train.core.loop import code_fingerprint, peak_gpu_mb, peak_rss_mb

from .data import (
    Pairs,
    SkipModel,
    add_entities,
    bm25_silver_pairs,
    feature_matrix,
    read_pairs,
    read_sts_pairs,
)
from .evaluate import binary_scores, roc_auc
from .model import (
    bce_loss,
    build_mlp,
    build_siamese,
    cosine_loss,
    cosines,
    mlp_probs,
    save_entity_siamese,
)
from .settings import MISSING_VALUE, MODEL_KEY, MODEL_NAME, entity_siamese_settings, mlp_arguments

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


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


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


def train_entity_siamese(
    corpus_dir: str | os.PathLike,
    scores: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    eval_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    sts_dir: str | os.PathLike | None = None,
    nlp=None,
) -> dict[str, Any]:
    """Train and evaluate the entity-enriched Siamese model (module docstring).

    Writes ``out_dir``: ``model/``, ``metrics.json``, ``README.md``, ``training_curve.png``,
    ``stages/`` (finished parts); ``eval_dir``: ``test.json``, ``sts.json``, ``table.html``.
    ``nlp``: a loaded spaCy pipeline with NER (default: the first of ``spacy`` that loads).

    Raises:
        ConfigError: bad settings, or an encoder that cannot be loaded.
    """
    import torch

    from parasim.amr.parse import load_english
    from parasim.train.core.card import plot_curve, write_dir, write_metrics, write_model_card
    from parasim.train.core.data import corpus_partitions
    from parasim.train.core.loop import fingerprint, make_accelerator, set_seed
    from parasim.train.core.metrics import accuracy_threshold, spearman

    from .report import write_table

    t0, cpu0 = time.perf_counter(), _cpu_s()
    try:
        args, cfg = entity_siamese_settings(section)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    out, eval_dir = Path(out_dir), Path(eval_dir)
    out.mkdir(parents=True, exist_ok=True)
    found = corpus_partitions(corpus_dir)
    members = [p for p in (cfg.partitions or found) if p in found]
    base = {"partitions": members, "features": list(cfg.features)}
    feats = list(cfg.features)
    counts: Counter = Counter()
    try:
        train, test = Pairs.empty(), Pairs.empty()
        for p in members:
            tr, c1 = read_pairs(corpus_dir, scores, p, "train", feats)
            te, c2 = read_pairs(corpus_dir, scores, p, "test", feats)
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
            keep = sorted(random.Random(args.seed).sample(range(len(train)), cfg.max_train_pairs))
            train = train.take(keep)
        if not len(test):
            raise SkipModel(f"no test rows in {corpus_dir} for partitions {members}")
    except SkipModel as exc:
        return _skip(out, eval_dir, str(exc), {**base, **counts})
    counts.update(train_similar=int(sum(train.label)), test_similar=int(sum(test.label)))
    log.info("data: %s", dict(counts))

    acc = make_accelerator(args)
    set_seed(args.seed)
    data_fp = [
        [(str(f), f.stat().st_size) for f in sorted(Path(corpus_dir, "data").rglob("*.parquet"))],
        sorted((str(s), Path(s).stat().st_size) for s in scores), members,
        code_fingerprint(*CODE),
    ]  # fmt: skip
    untrained_enc, tokenizer = build_siamese(cfg.model, cfg.freeze_embeddings)
    untrained_enc.to(acc.device)
    sts = {}
    if sts_dir is not None:
        for lang in ("fr", "es"):
            s = read_sts_pairs(sts_dir, lang, cfg.sts_max_pairs)
            if s is not None:
                sts[f"en-{lang}"] = s
    if sts or cfg.silver:
        nlp = nlp or load_english(cfg.spacy)
    if sts:  # the entity side of every language is the English pair: one NER pass
        first = next(iter(sts.values()))
        with_ents = add_entities(first, nlp, feats)
        sts = {k: dataclasses.replace(v, ents=with_ents.ents) for k, v in sts.items()}

    def encode_all(enc) -> dict[str, list[float]]:
        got = {"train": cosines(enc, tokenizer, train.s1, train.s2, cfg),
               "test": cosines(enc, tokenizer, test.s1, test.s2, cfg)}  # fmt: skip
        for k, s in sts.items():
            got[f"sts {k}"] = cosines(enc, tokenizer, s.s1, s.s2, cfg)
        return got

    cos_untrained = encode_all(untrained_enc)
    history: list[dict] = []

    def run_round(rnd: int, pairs: Pairs):
        """Train the encoder (from the pretrained one) and then the MLP on ``pairs``."""
        stage = out / "stages" / f"round-{rnd}"
        fp = fingerprint([dataclasses.asdict(args), dataclasses.asdict(cfg),
                          cfg.train_encoder, data_fp, rnd, len(pairs),
                          fingerprint(pairs.label)])  # fmt: skip
        enc_dir = stage / "encoder"
        done = stage / "encoder.json"
        if cfg.train_encoder:
            prev = json.loads(done.read_text("utf-8")) if done.exists() else {}
            if prev.get("fingerprint") == fp:
                log.info("round %d: encoder trained earlier, kept", rnd)
                from parasim.models import load_encoder
                from parasim.train.core.encoder import TransformerMean

                e, _ = load_encoder(str(enc_dir), device="cpu", dtype="float32", key=MODEL_KEY)
                enc = TransformerMean(e).to(acc.device)
                hist = prev["history"]
                enc_state = prev["state"]
            else:
                from parasim.train.core.loop import fit

                set_seed(args.seed + rnd)
                enc, _ = build_siamese(cfg.model, cfg.freeze_embeddings)
                res = fit(
                    enc, list(range(len(pairs))), cosine_loss(tokenizer, pairs, cfg), args,
                    stage / "siamese", fingerprint_extra=[data_fp, rnd, fp], accelerator=acc,
                )  # fmt: skip
                enc, hist, enc_state = res.model, res.history, res.state
                write_dir(enc_dir, lambda d: (enc.encoder.save_pretrained(d),
                                             tokenizer.save_pretrained(d)))  # fmt: skip
                write_metrics(done, {"fingerprint": fp, "history": hist, "state": enc_state})
        else:
            enc, hist, enc_state = untrained_enc, [], {"step": 0}
        history.extend({**h, "part": f"encoder round {rnd}"} for h in hist)
        cos = encode_all(enc) if cfg.train_encoder else cos_untrained
        extra = pairs.take(range(len(train), len(pairs)))  # the silver pairs of round 2
        pair_cos = cos["train"] + cosines(enc, tokenizer, extra.s1, extra.s2, cfg)
        from parasim.train.core.loop import fit

        x = feature_matrix(pair_cos, pairs, len(feats))
        y = torch.tensor(pairs.label, dtype=torch.float32)
        margs = mlp_arguments(args, cfg)
        per_epoch = max(1, len(pairs) // margs.batch_size)
        if margs.checkpoint_every:  # the MLP's steps take milliseconds: at most one per epoch
            margs = dataclasses.replace(
                margs, checkpoint_every=max(margs.checkpoint_every, per_epoch),
                log_every=max(margs.log_every, per_epoch),
            )  # fmt: skip
        set_seed(args.seed + 100 + rnd)
        mlp = build_mlp(x.shape[1], cfg.hidden, x)
        res = fit(
            mlp, list(range(len(pairs))), bce_loss(x, y), margs,
            stage / "mlp", fingerprint_extra=[data_fp, rnd, fp], accelerator=acc,
        )  # fmt: skip
        history.extend({**h, "part": f"mlp round {rnd}"} for h in res.history)
        return enc, res.model.cpu(), cos, {"encoder_steps": enc_state["step"],
                                           "mlp_steps": res.state["step"]}  # fmt: skip

    t_train = time.perf_counter()
    enc, mlp, cos, steps = run_round(1, train)
    rounds = {"round_1": steps}
    gold_only = None
    if cfg.silver:
        silver, sc = bm25_silver_pairs(train, cfg.silver_per_query, cfg.silver_max_pairs,
                                       args.seed)  # fmt: skip
        counts.update(sc)
        if len(silver):
            silver = add_entities(silver, nlp, feats)
            s_cos = cosines(enc, tokenizer, silver.s1, silver.s2, cfg)
            probs = mlp_probs(mlp, feature_matrix(s_cos, silver, len(feats)))
            silver = dataclasses.replace(silver, label=[float(p) for p in probs])
            counts["silver_mean_label"] = round(sum(probs) / len(probs), 4)
            gold_only = (mlp, cos)
            enc, mlp, cos, steps = run_round(2, train + silver)
            rounds["round_2"] = steps
        else:
            log.warning("silver: BM25 found no new pair; one round only")
    train_s = time.perf_counter() - t_train

    def probs_of(model, c, pairs: Pairs) -> list[float]:
        return mlp_probs(model, feature_matrix(c, pairs, len(feats)))

    # thresholds of the cosine baselines: the accuracy-maximising cut on the training pairs
    gold_train = [int(x) for x in train.label]
    thr_siam, _ = accuracy_threshold(cos["train"], gold_train)
    thr_untr, _ = accuracy_threshold(cos_untrained["train"], gold_train)
    majority = int(2 * sum(gold_train) >= len(gold_train))
    scores_test = {
        "entity_siamese": probs_of(mlp, cos["test"], test),
        "siamese": cos["test"],
        "untrained": cos_untrained["test"],
    }
    cuts = {"entity_siamese": 0.5, "siamese": thr_siam, "untrained": thr_untr}
    if gold_only is not None:
        scores_test["entity_siamese_gold_only"] = probs_of(gold_only[0], gold_only[1]["test"], test)
        cuts["entity_siamese_gold_only"] = 0.5

    def table_for(idx: list[int]) -> dict:
        gold = [int(test.label[i]) for i in idx]
        row: dict[str, Any] = {"rows": len(idx)}
        for k, s in scores_test.items():
            sc = [s[i] for i in idx]
            row[k] = binary_scores(gold, [int(v > cuts[k]) if k in ("siamese", "untrained")
                                          else int(v >= 0.5) for v in sc], sc)  # fmt: skip
        row["majority"] = {"accuracy": sum(g == majority for g in gold) / len(gold)}
        for j, f in enumerate(feats):
            row[f] = {"auc": roc_auc([1.0 if test.ents[i][j] is None else test.ents[i][j]
                                      for i in idx], gold)}  # fmt: skip
        return row

    test_json = {"model": MODEL_NAME, **base, "all": table_for(list(range(len(test))))}
    test_json["lang_pairs"] = {
        lp: table_for([i for i, x in enumerate(test.lang_pair) if x == lp])
        for lp in sorted(set(test.lang_pair))
    }
    test_json["thresholds"] = cuts
    sts_json: dict[str, Any] = {"model": MODEL_NAME}
    if not sts:
        sts_json["skipped"] = f"STSb-multi-mt dev not found in {sts_dir}"
    for k, s in sts.items():
        row = {
            "pairs": len(s),
            "entity_siamese": spearman(probs_of(mlp, cos[f"sts {k}"], s), s.label),
            "siamese": spearman(cos[f"sts {k}"], s.label),
            "untrained": spearman(cos_untrained[f"sts {k}"], s.label),
        }
        if gold_only is not None:
            row["entity_siamese_gold_only"] = spearman(
                probs_of(gold_only[0], gold_only[1][f"sts {k}"], s), s.label
            )
        for j, f in enumerate(feats):
            row[f] = spearman([e[j] for e in s.ents], s.label)
        sts_json[k] = row

    info = {
        "model": cfg.model, "prefix": cfg.prefix, "max_length": cfg.max_length,
        "features": feats, "hidden": cfg.hidden, "missing_value": MISSING_VALUE,
        "inputs": ["siamese_cosine", *feats, "entities_missing"],
        "siamese_threshold": thr_siam,
    }  # fmt: skip
    write_dir(out / "model", lambda d: save_entity_siamese(enc, tokenizer, mlp, d, info))
    if cfg.train_encoder:  # the final encoder is also the last round's kept one: one copy on disk
        last = out / "stages" / f"round-{2 if 'round_2' in rounds else 1}" / "encoder"
        _share_identical_files(last, out / "model" / "encoder")
    write_metrics(eval_dir / "test.json", test_json)
    write_metrics(eval_dir / "sts.json", sts_json)
    write_table(eval_dir)
    plot_curve(
        _one_axis(history), out / "training_curve.png",
        f"{MODEL_NAME}: encoder (cosine MSE) then MLP (BCE), {len(rounds)} round(s)",
    )  # fmt: skip
    a = test_json["all"]
    metrics = {
        "model": MODEL_NAME, **base, "data": dict(counts), "rounds": rounds,
        "silver": cfg.silver, "encoder_trained": cfg.train_encoder,
        "test": {k: a[k] for k in (*scores_test, "majority")},
        "sts": {k: v for k, v in sts_json.items() if k != "model"},
        "train_s": round(train_s, 1), "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(_cpu_s() - cpu0, 1), "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device), "mixed_precision": acc.mixed_precision,
        "settings": {**dataclasses.asdict(args), **dataclasses.asdict(cfg),
                     "encoder_trained": cfg.train_encoder},
    }  # fmt: skip
    write_metrics(out / "metrics.json", metrics)
    summary = {
        f"test {k} accuracy": a[k]["accuracy"] for k in (*scores_test, "majority")
    } | {f"test {k} auc": a[k].get("auc") for k in scores_test} | {
        f"STSb {lp} Spearman ({k})": v[k] for lp, v in metrics["sts"].items()
        if isinstance(v, dict) for k in ("entity_siamese", "siamese", "untrained")
    }  # fmt: skip
    write_model_card(
        out / "README.md", MODEL_NAME,
        "Entity-enriched Siamese model of seed 004 §3: a Siamese bi-encoder "
        f"({cfg.model}, mean pooling, fine-tuned with the cosine regression objective"
        f"{'' if cfg.train_encoder else ': not fine-tuned here'}) whose cosine, with the "
        f"entity cosines {', '.join(feats)} of parasim's scores stage, feeds an MLP with a "
        "sigmoid, trained separately from the encoder on parasim's corpus "
        f"({', '.join(members)}): 1 = similar (aligned translation), 0 = hard negative"
        f"{'; then again with BM25-sampled silver pairs' if 'round_2' in rounds else ''}. "
        "Load `model/` with `parasim.train.entity_siamese.model.EntitySiamese`.",
        dict(counts), metrics["settings"], summary,
    )  # fmt: skip
    import shutil

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
