"""The paper's line-by-line alignment check (seed 001, section 2.1.4), exactly.

For a page pair whose two text files have the same number of lines:

1. the distance of line i is the word-frequency cosine distance ``1 - cos`` between line i of
   the English file and line i of the English translation of the other file (tokens:
   lower-cased unicode ``\\w+`` words, counted; see :mod:`parasim.align.scoring`);
2. every i with distance ``> threshold`` (0.6) is recorded as misaligned;
3. a misaligned index whose neighbours ``i - 1`` and ``i + 1`` are both not misaligned is
   dropped from the set (the translation may have lowered that one line's score);
4. an empty set: the file is aligned and every line pair is a positive; a non-empty set with at
   most ``max_review`` indices: the file goes to manual review; more: the file is discarded.

Files with different line counts are outside the method (the paper keeps only equal-count
files); :func:`check_file` reports them as ``"unequal"``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from .scoring import line_cosines

ALIGNED, REVIEW, DISCARDED, UNEQUAL, EMPTY = "aligned", "review", "discarded", "unequal", "empty"
OUTCOMES = (ALIGNED, REVIEW, DISCARDED, UNEQUAL, EMPTY)


@dataclass
class PaperCheck:
    """Outcome of the paper's check for one file pair.

    Attributes:
        outcome: one of ``aligned``, ``review``, ``discarded``, ``unequal``, ``empty``.
        sims: cosine similarity of each line pair (empty unless line counts are equal).
        raw_misaligned: indices with distance above the threshold.
        misaligned: the refined set (isolated indices dropped).
    """

    outcome: str
    sims: np.ndarray
    raw_misaligned: list[int]
    misaligned: list[int]


def refine_misaligned(indices: Sequence[int]) -> list[int]:
    """Drop every misaligned index that has no misaligned neighbour (i - 1 or i + 1)."""
    s = set(indices)
    return sorted(i for i in s if (i - 1) in s or (i + 1) in s)


def check_file(
    en_lines: Sequence[str | None],
    other_en_lines: Sequence[str | None],
    threshold: float = 0.6,
    max_review: int = 3,
) -> PaperCheck:
    """Run the paper's check on one file pair.

    Args:
        en_lines: lines of the English page.
        other_en_lines: English translation of the other page's lines (same order).
        threshold: cosine distance above which a line pair is misaligned (paper: 0.6).
        max_review: files with 1..max_review refined misaligned lines go to review.

    Returns:
        the outcome, similarities and misaligned index sets.
    """
    empty = np.zeros(0)
    if len(en_lines) != len(other_en_lines):
        return PaperCheck(UNEQUAL, empty, [], [])
    if len(en_lines) == 0:
        return PaperCheck(EMPTY, empty, [], [])
    sims = line_cosines(en_lines, other_en_lines)
    raw = np.nonzero((1.0 - sims) > threshold)[0].tolist()
    refined = refine_misaligned(raw)
    if not refined:
        outcome = ALIGNED
    elif len(refined) <= max_review:
        outcome = REVIEW
    else:
        outcome = DISCARDED
    return PaperCheck(outcome, sims, raw, refined)


def check_files(
    pairs: Iterable[tuple[Sequence[str | None], Sequence[str | None]]],
    threshold: float = 0.6,
    max_review: int = 3,
) -> tuple[list[PaperCheck], Counter]:
    """:func:`check_file` over many file pairs; also returns the count of each outcome."""
    results = [check_file(en, oth, threshold, max_review) for en, oth in pairs]
    counts = Counter({k: 0 for k in OUTCOMES})
    counts.update(r.outcome for r in results)
    return results, counts
