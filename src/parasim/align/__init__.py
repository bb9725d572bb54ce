"""ALIGN stage: translated page pairs -> positive sentence pairs.

The paper's line-by-line check (:mod:`.paper`), a DP aligner with n:m links (:mod:`.dp`) for the
files the paper cannot take, and a manual review queue (:mod:`.review`). The stage function and
its policy per page pair: :mod:`parasim.align.stage`.
"""

from parasim.align.stage import (
    AlignSettings,
    DPSettings,
    align_lines,
    align_pairs,
    dp_lengths,
    dp_params,
)

__all__ = ["AlignSettings", "DPSettings", "align_lines", "align_pairs", "dp_lengths", "dp_params"]
