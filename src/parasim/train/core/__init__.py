"""What every model family shares, and nothing family-specific.

:mod:`.loop` (the accelerate training loop: device and dtype, DDP, checkpoints and resume, early
stopping, progress on the log), :mod:`.data` (Parquet shards and corpus splits through
`datasets`), :mod:`.card` (``metrics.json``, training curve, model card), :mod:`.metrics` (the
measures more than one family reports), :mod:`.encoder` (the training side's encoder loading
and mean pooling) and :mod:`.contrastive` (an encoder fine-tuned on the corpus's triples, hard
negatives from its grades, with a multiple-negatives ranking loss). Imports no model family and
no evaluation.
"""
