"""The divergence ranker as a stage of the workflow (rules: ``workflow/rules/train.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import DIVERGENCES_SCHEMA
from parasim.spec import Stage

from .settings import RankerConfig
from .training import train_divergence_ranker

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "ranker",
    rules=("train_divergence_ranker", "eval_divergence_ranker"),
    results=("models/divergence-ranker", "eval/divergence-ranker"),
    upstream="divergences",
    aliases={
        "train-divergence-ranker": ("train-ranker",),
        "eval-divergence-ranker": ("eval-ranker",),
    },
    settings=RankerConfig,
    inputs={"divergences": DIVERGENCES_SCHEMA},
    outputs={"out": None},
    run=train_divergence_ranker,
)
