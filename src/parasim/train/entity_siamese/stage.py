"""The entity-enriched Siamese model as a stage of the workflow.

Its rules: ``workflow/rules/entity_siamese.smk``; its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import CORPUS_SCHEMA
from parasim.spec import Stage

from .settings import EntitySiameseConfig
from .training import train_entity_siamese

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "entity_siamese",
    rules=("train_entity_siamese",),
    results=("models/entity-siamese", "eval/entity-siamese"),
    upstream="corpus",
    settings=EntitySiameseConfig,
    inputs={"corpus": CORPUS_SCHEMA},
    outputs={"out": None, "eval_out": None},
    run=train_entity_siamese,
)
