"""The similarity models as a stage of the workflow (rules: ``workflow/rules/similarity.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import CORPUS_SCHEMA
from parasim.spec import Stage

from .settings import SimilarityConfig
from .training import train_similarity

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "similarity",
    rules=("train_similarity", "eval_similarity_msrp", "similarity_report"),
    results=("models/similarity", "eval/similarity"),
    upstream="corpus",
    aliases={"similarity-report": ("similarity-table",)},
    settings=SimilarityConfig,
    inputs={"corpus": CORPUS_SCHEMA},
    outputs={"out": None, "eval_out": None},
    run=train_similarity,
)
