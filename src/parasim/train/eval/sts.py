"""STSb-multi-mt dev: the pairs of one language and the Spearman of an encoder's cosine against
the gold scores (S3BERT's forgetting check; the entity-Siamese model's cross-lingual pairs)."""

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


def stsb_spearman(
    embed: Callable[[list[str]], Any], rows: Sequence[tuple[str, str, float]]
) -> float | None:
    """Spearman of the cosine of the two sides' vectors against the STSb gold scores of ``rows``
    (:func:`read_stsb`); ``embed`` maps texts to a numpy array, one row per text."""
    a = embed([r[0] for r in rows])
    b = embed([r[1] for r in rows])
    return spearman(row_cosines(a, b), [r[2] for r in rows])
