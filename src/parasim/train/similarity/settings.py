"""The similarity models' settings (``train.similarity``: shared keys, ``bilstm`` and ``biencoder``)
and the training partitions the workflow names models after (read when the Snakefile is parsed:
no heavy import here)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from parasim.config import ConfigError, PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

ENCODERS = ("bilstm", "biencoder")


@dataclasses.dataclass(frozen=True)
class BiLSTMConfig(PartialSettings, section="train.similarity.bilstm"):
    """``train.similarity.bilstm`` keys besides the loop's (:class:`TrainingArguments`).

    Attributes:
        word_vectors: a transformers encoder whose input embeddings are the word vectors (text
            split by its tokenizer; default the rebuilt multilingual e5), or a word2vec /
            fastText file (``.vec``/``.txt``: word2vec text, ``.bin``: word2vec binary).
        vectors_format: ``auto`` (by the file's suffix), ``word2vec``, ``word2vec-binary`` or
            ``fasttext`` (Facebook ``.bin`` with subword n-grams).
        lowercase: lowercase words before looking them up in a vector file (MUSE is lowercase).
        hidden: LSTM units per direction (seed: 600? InferSent: 2048).
        fc: units of the classifier's hidden layer (InferSent: 512).
        dropout: dropout in the classifier (seed: 0.5).
        max_length: tokens kept per sentence.
        max_folds: train the first this many fold models only (None: every fold).
    """

    word_vectors: str
    vectors_format: str
    lowercase: bool
    hidden: int
    fc: int
    dropout: float
    max_length: int
    max_folds: int | None

    def __post_init__(self) -> None:
        if self.vectors_format not in ("auto", "word2vec", "word2vec-binary", "fasttext"):
            raise ValueError(
                f"train.similarity.bilstm.vectors_format: auto, word2vec, word2vec-binary or "
                f"fasttext, not {self.vectors_format!r}"
            )


@dataclasses.dataclass(frozen=True)
class BiEncoderConfig(PartialSettings, section="train.similarity.biencoder"):
    """``train.similarity.biencoder`` keys besides the loop's.

    Attributes:
        model: transformers encoder to fine-tune (``e5-torch``: the rebuilt multilingual e5; a
            local folder; a hub name where reachable).
        prefix: prepended to every sentence (e5's ``"query: "`` for symmetric tasks).
        freeze_embeddings: keep the input embeddings fixed (most of e5's weights: faster steps,
            smaller optimiser state, words unseen in training keep their place).
        head_learning_rate: Adam learning rate of the new classifier head (None: the encoder's
            ``learning_rate``); a fine-tuning rate leaves a fresh head near chance for hundreds
            of steps.
        fc, dropout, max_length, max_folds: as :class:`BiLSTMConfig`.
    """

    model: str
    prefix: str
    freeze_embeddings: bool
    head_learning_rate: float | None
    fc: int
    dropout: float
    max_length: int
    max_folds: int | None


@dataclasses.dataclass(frozen=True)
class SimilarityConfig(PartialSettings, section="train.similarity"):
    """``train.similarity`` keys shared by both encoders.

    Attributes:
        encoders: the encoders the workflow trains.
        partitions: training partitions (None: every partition of ``corpus.partitions``).
        combined: also train on every partition together (when there are several).
        eval_batch_size: pairs per forward pass when predicting.
        grades: ``graded`` (the divergent rows as hard negatives, a three-class head) or
            ``binary`` (seed 001's protocol: equivalent and unrelated rows, two classes).
        divergent_per_positive: divergent rows per positive under ``graded``.
    """

    encoders: tuple[str, ...]
    partitions: tuple[str, ...] | None
    combined: bool
    eval_batch_size: int
    grades: str
    divergent_per_positive: int

    @property
    def classes(self) -> int:
        """The head's classes: 3 (unrelated, equivalent, divergent) graded, else 2."""
        return 3 if self.grades == "graded" else 2


_ENCODER_CFG = {"bilstm": BiLSTMConfig, "biencoder": BiEncoderConfig}


def similarity_settings(
    section: Mapping[str, Any] | None, encoder: str
) -> tuple[TrainingArguments, Any, SimilarityConfig]:
    """Split the ``train:`` section into the loop's, the encoder's and the shared settings.

    Top-level ``train`` keys (``seed``, ``device``, ``checkpoint_every``, ...) are shared by every
    model; ``train.similarity.<encoder>`` loop keys override them.
    """
    if encoder not in _ENCODER_CFG:
        raise ConfigError(f"similarity encoder: one of {list(ENCODERS)}, not {encoder!r}")
    loop, enc = model_settings(section, _ENCODER_CFG[encoder])
    sim = (section or {}).get("similarity") or {}
    shared_sim = SimilarityConfig.from_config({k: v for k, v in sim.items() if k not in ENCODERS})
    return loop, enc, shared_sim


def combined_name(partitions: Mapping[str, Mapping[str, Any]]) -> str:
    """The name of all partitions together, by their languages, English first and the others
    sorted (independent of the partitions' order): en-fr + en-es -> ``EN-ES-FR`` (the seed's
    EN-FR-ES)."""
    langs = {
        lang
        for spec in partitions.values()
        for lang in str(spec.get("lang_pair", "")).split("-")
        if lang
    }
    ordered = (["en"] if "en" in langs else []) + sorted(langs - {"en"})
    return "-".join(lang.upper() for lang in ordered) or "ALL"


def similarity_partitions(
    corpus_section: Mapping[str, Any], train_section: Mapping[str, Any]
) -> list[str]:
    """The training partitions the workflow names models after (the Snakefile's wildcards)."""
    parts = dict(corpus_section.get("partitions") or {})
    raw = (train_section or {}).get("similarity") or {}
    sim = SimilarityConfig.from_config({k: v for k, v in raw.items() if k not in ENCODERS})
    names = list(sim.partitions or parts)
    if sim.combined and len(names) > 1:
        names.append(combined_name({n: parts.get(n, {}) for n in names}))
    return names


def model_name(encoder: str, partition: str) -> str:
    return f"similarity-{encoder}-{partition}"
