"""One table of every trained model of a run (issue 34): ``results/models/README.md``.

:func:`.table.models_table` reads each model folder's ``metrics.json`` (its ``verdict``, written
by :func:`parasim.train.core.verdict.compare`) and writes one row per model: training data size,
the headline figure, the untrained baseline beside it, the difference with its bootstrap 95 %
interval, and the verdict. Command: ``parasim models-table`` (rule ``models_table``).
"""
