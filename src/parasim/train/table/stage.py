"""The models table as a stage of the workflow (rules: ``workflow/rules/models_table.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.spec import Stage

from .table import models_table

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "models_table",
    rules=("models_table",),
    results=("models/README.md", "models/table.json"),
    inputs={"metrics": None},
    outputs={"out": None, "json": None},
    run=models_table,
)
