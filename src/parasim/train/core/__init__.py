"""What every model family shares, and nothing family-specific.

:mod:`.loop` (the accelerate training loop: device and dtype, DDP, checkpoints and resume, early
stopping, progress on the log), :mod:`.data` (Parquet shards and corpus splits through
`datasets`), :mod:`.card` (``metrics.json``, training curve, model card), :mod:`.metrics` (the
measures more than one family reports) and :mod:`.encoder` (the training side's encoder loading
and mean pooling). Imports no model family and no evaluation.
"""
