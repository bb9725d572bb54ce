"""The graded encoder as a stage of the workflow (rules: ``workflow/rules/graded_encoder.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import CORPUS_SCHEMA
from parasim.spec import Stage

from .settings import GradedConfig
from .training import train_graded_encoder

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "graded_encoder",
    rules=("train_graded_encoder",),
    results=("models/graded-encoder",),
    upstream="corpus",
    settings=GradedConfig,
    inputs={"corpus": CORPUS_SCHEMA},
    outputs={"out": None},
    run=train_graded_encoder,
)
