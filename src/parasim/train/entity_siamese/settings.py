"""The entity-enriched Siamese model's settings: ``train.entity_siamese`` and the loop's (the
encoder's, and the MLP's derived from them)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from parasim.config import PartialSettings
from parasim.train.core.loop import TrainingArguments, model_settings

MODEL_NAME = "entity-siamese"
MODEL_KEY = "train.entity_siamese.model"
#: Entity cosines of the scores stage (parasim.scores.stage.ENTITY_COLUMNS).
ENTITY_FEATURES = ("ent_geo", "ent_org", "ent_date", "ent_qty")
#: Value of an entity cosine the scores stage did not compute (its both-sides-empty value).
MISSING_VALUE = 1.0


@dataclasses.dataclass(frozen=True)
class EntitySiameseConfig(PartialSettings, section="train.entity_siamese"):
    """``train.entity_siamese`` keys besides the loop's (the loop keys train the encoder).

    Attributes:
        model: encoder of the Siamese part (``e5-torch``, a local folder, a hub name).
        train_encoder: fine-tune it (false: the pretrained encoder's cosine feeds the MLP).
        prefix: prepended to every sentence (e5's ``"query: "``).
        max_length: subword tokens per sentence.
        freeze_embeddings: keep the encoder's input embeddings fixed.
        partitions: training partitions (None: every partition the corpus has).
        features: entity cosines fed to the MLP besides the Siamese cosine (ablations).
        hidden: MLP hidden units (seed: 32).
        mlp_learning_rate, mlp_epochs, mlp_batch_size: the MLP's Adam rate, passes, batch.
        silver: BM25 silver pairs and a second training round (module docstring).
        silver_per_query: BM25 hits kept per English query.
        silver_max_pairs: silver pairs at most (a seeded sample; None: all).
        max_train_pairs: training pairs at most (a seeded sample; None: all).
        dev_folds: corpus folds ``0 .. dev_folds - 1`` of the training rows (grouped by page
            pair) are the encoder's dev split, left out of its training: the cosine's ROC AUC
            there picks the best encoder, the untrained start (step 0) included (0: no dev
            split, the last step ships).
        grades: ``graded`` (divergent rows with entity scores as hard negatives) or ``binary``.
        divergent_per_positive: divergent rows per positive at most under ``graded``.
        divergent_target: the encoder's cosine target of a divergent pair under ``graded``.
        eval_batch_size: sentences per forward pass when encoding.
        sts_max_pairs: STSb dev pairs evaluated at most (the first ones; None: all 1,500).
        spacy: spaCy pipelines for the NER of silver and STS pairs (first loadable wins).
    """

    model: str
    train_encoder: bool
    prefix: str
    max_length: int
    freeze_embeddings: bool
    partitions: tuple[str, ...] | None
    features: tuple[str, ...]
    hidden: int
    mlp_learning_rate: float
    mlp_epochs: int
    mlp_batch_size: int
    silver: bool
    silver_per_query: int
    silver_max_pairs: int | None
    max_train_pairs: int | None
    grades: str
    divergent_per_positive: int
    divergent_target: float
    dev_folds: int
    eval_batch_size: int
    sts_max_pairs: int | None
    spacy: tuple[str, ...]

    def __post_init__(self) -> None:
        bad = [f for f in self.features if f not in ENTITY_FEATURES]
        if bad:
            raise ValueError(
                f"train.entity_siamese.features: {bad} not among {list(ENTITY_FEATURES)}"
            )


def entity_siamese_settings(
    section: Mapping[str, Any] | None,
) -> tuple[TrainingArguments, EntitySiameseConfig]:
    """The encoder's loop settings and the model's own from the ``train:`` section (shared
    ``train`` keys, then ``train.entity_siamese`` loop keys, whose schema defaults are the encoder
    part's: the seed's Adam 2e-5, cut to 30 steps of 16 pairs for the CPU)."""
    return model_settings(section, EntitySiameseConfig)


def mlp_arguments(args: TrainingArguments, cfg: EntitySiameseConfig) -> TrainingArguments:
    """The MLP's loop settings: the encoder's, with the MLP's rate, epochs and batch size."""
    return dataclasses.replace(
        args, learning_rate=cfg.mlp_learning_rate, epochs=cfg.mlp_epochs,
        batch_size=cfg.mlp_batch_size, max_steps=None, warmup_steps=0, schedule="constant",
        eval_every=0, patience=0, weight_decay=0.0,
    )  # fmt: skip
