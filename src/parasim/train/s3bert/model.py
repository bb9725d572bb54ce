"""The S3BERT module (a mean-pooled encoder and the aspects' β), layer freezing, length-sorted
batching, embedding, and the model folder."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from parasim.config import ConfigError

from .settings import MODEL_KEY

S3BERT_FILE = "s3bert.json"
BETA_FILE = "s3bert_beta.safetensors"


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

    from parasim.train.core.encoder import load_training_encoder

    path = Path(path)
    if not (path / S3BERT_FILE).exists():
        raise FileNotFoundError(f"{path}: not an S3BERT model (no {S3BERT_FILE})")
    encoder, tokenizer = load_training_encoder(str(path), key=f"s3bert model {path}")
    info = json.loads((path / S3BERT_FILE).read_text(encoding="utf-8"))
    model = build_s3bert(encoder, len(info["aspects"]))
    model.beta.data.copy_(load_file(str(path / BETA_FILE))["beta"])
    return model.to(device).eval(), tokenizer, info
