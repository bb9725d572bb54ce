"""The two parts of the model (seed 004 Figure 1): the mean-pooled Siamese encoder with its cosine
loss, and the MLP over the cosine and the entity cosines; the model folder and its loader."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

from .data import Pairs, feature_matrix
from .settings import MODEL_KEY, EntitySiameseConfig

INFO_FILE = "entity_siamese.json"


def build_siamese(model: str, freeze_embeddings: bool):
    """The Siamese part: a mean-pooled transformers encoder and its tokenizer (float32, CPU)."""
    from parasim.models import load_encoder
    from parasim.train.core.encoder import TransformerMean

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


def cosine_targets(pairs: Pairs, cfg: EntitySiameseConfig) -> list[float]:
    """The encoder's cosine target of every pair: its label, and ``cfg.divergent_target`` for a
    divergent row (graded: between a translation's 1 and an unrelated pair's 0)."""
    return [
        cfg.divergent_target if g == "divergent" else float(y)
        for g, y in zip(pairs.grade, pairs.label, strict=True)
    ]


def cosine_loss(tokenizer, pairs: Pairs, cfg: EntitySiameseConfig):
    """Sentence-BERT's regression objective: summed (cos(u, v) - target)^2 over a batch
    (:func:`cosine_targets`)."""
    import torch
    import torch.nn.functional as F

    target = cosine_targets(pairs, cfg)

    def loss_fn(model, idx: Sequence[int]):
        dev = next(p for p in model.parameters()).device
        vec = _embed(model, tokenizer, [pairs.s1[i] for i in idx] + [pairs.s2[i] for i in idx],
                     cfg, dev)  # fmt: skip
        n = len(idx)
        cos = F.cosine_similarity(vec[:n].float(), vec[n:].float())
        gold = torch.tensor([target[i] for i in idx], device=cos.device)
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
        from parasim.train.core.encoder import TransformerMean

        path = Path(path)
        if not (path / INFO_FILE).is_file():
            raise FileNotFoundError(f"{path}: not an entity-siamese model folder (no {INFO_FILE})")
        self.info = json.loads((path / INFO_FILE).read_text("utf-8"))
        enc, self.tokenizer = load_encoder(
            str(path / "encoder"), device="cpu", dtype="float32", key=f"model {path}"
        )
        self.encoder = TransformerMean(enc).eval()
        self.cfg = EntitySiameseConfig.from_config(
            {k: self.info[k] for k in ("prefix", "max_length", "features")}
        )
        self.mlp = build_mlp(len(self.cfg.features) + 2, self.info["hidden"])
        self.mlp.load_state_dict(load_file(str(path / "mlp.safetensors")))
        self.mlp.eval()

    def predict(self, s1: Sequence[str], s2: Sequence[str], ents) -> list[float]:
        """P(similar) of each pair; ``ents``: one row of ``features`` values (None: missing)."""
        n = len(s1)
        pairs = Pairs(list(s1), list(s2), [None] * n, [list(e) for e in ents], [0.0] * n,
                      [""] * n, [""] * n, [None] * n)  # fmt: skip
        cos = cosines(self.encoder, self.tokenizer, pairs.s1, pairs.s2, self.cfg)
        return mlp_probs(self.mlp, feature_matrix(cos, pairs, len(self.cfg.features)))
