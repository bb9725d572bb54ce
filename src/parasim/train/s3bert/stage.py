"""S3BERT as a stage of the workflow (rules: ``workflow/rules/train.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import SCORES_SCHEMA
from parasim.spec import Stage

from .settings import S3bertConfig
from .training import train_s3bert

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "s3bert",
    rules=("train_s3bert",),
    results=("models/s3bert",),
    upstream="scores",
    settings=S3bertConfig,
    inputs={"scores": SCORES_SCHEMA},
    outputs={"out": None},
    run=train_s3bert,
)
