"""The ranker as a module (score F and EQ/DIV tags over an encoded pair), its prediction, the
untrained encoder's cosine, and its model folder."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .data import Item

HEADS_FILE = "ranker_heads.safetensors"
RANKER_FILE = "ranker.json"


def resolve_pooling(pooling: str, encoder) -> str:
    """``cls`` or ``mean`` for a :class:`~.settings.RankerConfig` ``pooling`` and an encoder
    loaded by :func:`parasim.train.core.encoder.load_training_encoder`."""
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
    from parasim.train.core.encoder import load_training_encoder

    encoder, tokenizer = load_training_encoder(str(path), key=f"ranker model {path}")
    info = json.loads((path / RANKER_FILE).read_text(encoding="utf-8"))
    pooling = info.get("pooling", "cls")
    model = build_ranker(encoder, info.get("dropout", 0.1), "mean" if pooling == "mean" else "cls")
    heads = load_file(str(path / HEADS_FILE))
    model.score.load_state_dict({k[6:]: v for k, v in heads.items() if k.startswith("score.")})
    model.tagger.load_state_dict({k[7:]: v for k, v in heads.items() if k.startswith("tagger.")})
    return model.to(device).eval(), tokenizer, info
