"""The aligned encoder as a stage of the workflow (rules: ``workflow/rules/align_encoder.smk``).

Its record, gathered by :mod:`parasim.stages`.
"""

from __future__ import annotations

from parasim.io import DIVERGENCES_SCHEMA, POSITIVES_SCHEMA, WORDPAIRS_SCHEMA
from parasim.spec import Stage

from .settings import AlignEncoderConfig
from .wordpairs import extract_word_pairs

#: The stage, as :mod:`parasim.stages` gathers it.
SPEC = Stage(
    "align_encoder",
    rules=("align_encoder_wordpairs", "train_align_encoder", "eval_align_encoder"),
    results=("align_encoder", "models/aligned-encoder", "eval/aligned-encoder"),
    upstream="clean",
    one_to_one=True,
    aliases={
        "align-encoder-wordpairs": ("align-wordpairs",),
        "eval-align-encoder": ("eval-cwr",),
    },
    settings=AlignEncoderConfig,
    inputs={"positives": POSITIVES_SCHEMA, "divergences": DIVERGENCES_SCHEMA},
    outputs={"out": WORDPAIRS_SCHEMA},
    run=extract_word_pairs,
)
