"""STSb-multi-mt dev: the pairs of one language, or of two (English sentence 1 against the other
language's sentence 2), and the Spearman of an encoder's cosine against the gold scores (S3BERT's
forgetting check; the entity-Siamese model's and the graded encoder's cross-lingual pairs)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from parasim.train.core.metrics import row_cosines, spearman


def read_stsb(folder: str | os.PathLike, lang: str = "en") -> list[tuple[str, str, float]]:
    """STSb-multi-mt dev pairs of one language (``stsb-<lang>-dev.csv``: s1, s2, score 0-5)."""
    import csv

    path = Path(folder) / f"stsb-{lang}-dev.csv"
    with open(path, encoding="utf-8", newline="") as fh:
        return [(r[0], r[1], float(r[2])) for r in csv.reader(fh) if len(r) >= 3]


def read_stsb_crosslingual(
    folder: str | os.PathLike, lang: str, max_pairs: int | None = None
) -> list[tuple[str, str, float]]:
    """STSb-multi-mt dev across two languages: sentence 1 of the English file against sentence 2
    of ``lang``'s, row by row (the rows line up across the languages), with the gold score; the
    first ``max_pairs`` rows (None: all).

    Raises:
        ValueError: the two files differ in length (their rows would not line up).
    """
    en, other = read_stsb(folder, "en"), read_stsb(folder, lang)
    if len(en) != len(other):
        raise ValueError(
            f"{Path(folder) / 'stsb-en-dev.csv'} and {Path(folder) / f'stsb-{lang}-dev.csv'} "
            "differ in length"
        )
    rows = [(e[0], o[1], e[2]) for e, o in zip(en, other, strict=True)]
    return rows if max_pairs is None else rows[:max_pairs]


def stsb_spearman(
    embed: Callable[[list[str]], Any], rows: Sequence[tuple[str, str, float]]
) -> float | None:
    """Spearman of the cosine of the two sides' vectors against the STSb gold scores of ``rows``
    (:func:`read_stsb`); ``embed`` maps texts to a numpy array, one row per text."""
    a = embed([r[0] for r in rows])
    b = embed([r[1] for r in rows])
    return spearman(row_cosines(a, b), [r[2] for r in rows])
