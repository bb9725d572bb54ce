"""Hard negatives: LDA topics per partition, sentence vectors, and the paper's Algorithm 1.

Stages (each a plain function over Arrow tables and arrays, wired into Snakemake by the lead):

1. :func:`parasim.negatives.topics.fit_topics` -- one LDA model per partition (language pair x
   domain group), the topic count with the best coherence, and each page pair's dominant topic.
2. :func:`parasim.negatives.vectors.encode` -- sentence vectors from a causal LM (mean-pooled last
   hidden states) or a sentence-transformers model, cached on disk.
3. :func:`parasim.negatives.calibrate.calibrate_band` -- optional: the cosine band from the
   encoder's own similarity distribution (0.80-0.90 was set for OpenAI GPT).
4. :func:`parasim.negatives.select.select_negatives` -- Algorithm 1, vectorized per topic block,
   with a false-negative guard and the balance to the number of positives.

:mod:`parasim.negatives.stage` runs them as the topics and negatives stages (a partition at a
time, then the gather, recording the stages' stats); :mod:`parasim.negatives.commands` is their
command line, :mod:`parasim.negatives.inputs` what it shares with `parasim build-corpus`.
"""

from __future__ import annotations

from dataclasses import dataclass

from parasim.config import Settings
from parasim.io import NEGATIVES_SCHEMA
from parasim.negatives.calibrate import (
    BandResult,
    CalibrateConfig,
    calibrate_band,
    calibration_rows,
)
from parasim.negatives.select import SelectConfig, select_negatives
from parasim.negatives.topics import TopicsConfig, TopicsResult, fit_topics, load_topics
from parasim.negatives.vectors import EncoderConfig, encode


@dataclass(frozen=True)
class NegativesSettings(Settings, section="negatives"):
    """The ``negatives`` config section: one settings object per step."""

    topics: TopicsConfig
    encoder: EncoderConfig
    select: SelectConfig
    calibrate: CalibrateConfig


__all__ = [
    "NEGATIVES_SCHEMA",
    "BandResult",
    "CalibrateConfig",
    "EncoderConfig",
    "NegativesSettings",
    "SelectConfig",
    "TopicsConfig",
    "TopicsResult",
    "calibrate_band",
    "calibration_rows",
    "encode",
    "fit_topics",
    "load_topics",
    "select_negatives",
]
