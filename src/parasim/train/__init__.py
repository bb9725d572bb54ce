"""Model training on the corpus and the synthetic divergences; evaluation on REFreSD.

Shared machinery, used by every model family: :mod:`.data` (Parquet shards through `datasets`,
streamed when larger than memory), :mod:`.loop` (the accelerate training loop: device and dtype
through :mod:`parasim.accel`, DDP over processes, checkpoints and resume after ``kill -9``, early
stopping, progress on the log), :mod:`.card` (``metrics.json``, training curve, model card) and
:mod:`.metrics`. One module per model family: :mod:`.ranker`, the divergence ranker of seed 000
§3.3–3.4, evaluated by :mod:`.evaluate` (REFreSD dev, seed 000 Tables 3–4). The rules call
``parasim train-ranker`` and ``parasim eval-ranker`` (:mod:`.commands`).
"""

from .loop import TrainingArguments, TrainResult, fit
from .ranker import RankerConfig, load_ranker, ranker_settings, train_divergence_ranker

__all__ = [
    "RankerConfig",
    "TrainResult",
    "TrainingArguments",
    "fit",
    "load_ranker",
    "ranker_settings",
    "train_divergence_ranker",
]
