"""Word-pair rows as parallel sets (one per other language), and the training units that give every
step the same number of sentence pairs of each language."""

from __future__ import annotations

import random
from collections.abc import Mapping

from parasim.train.eval.cwr import ParallelSet


def parallel_sets(table, max_pairs: int | None = None, seed: int = 13) -> dict[str, ParallelSet]:
    """Word-pair rows as one :class:`ParallelSet` per other language (a seeded sample when
    ``max_pairs`` caps it; rows keep their order otherwise)."""
    by: dict[str, list[dict]] = {}
    for r in table.to_pylist():
        by.setdefault(r["other_lang"], []).append(r)
    out = {}
    for lang, rows in sorted(by.items()):
        if max_pairs is not None and len(rows) > max_pairs:
            rows = random.Random(f"{seed}:{lang}").sample(rows, max_pairs)
        out[lang] = ParallelSet(
            en=[list(r["en_words"]) for r in rows],
            other=[list(r["other_words"]) for r in rows],
            links=[list(zip(r["en_index"], r["other_index"], strict=True)) for r in rows],
            lang=lang,
        )
    return out


def language_units(
    sets: Mapping[str, ParallelSet], seed: int
) -> tuple[list[str], list[tuple[int, ...]]]:
    """Training units: one sentence-pair index per language, the smaller corpora cycled.

    Returns:
        ``(languages, units)``: ``units[u][l]`` is a sentence pair of ``sets[languages[l]]``. A
        global batch of B units holds B sentence pairs of every language.
    """
    langs = sorted(lang for lang, s in sets.items() if len(s))
    if not langs:
        return [], []
    n = max(len(sets[lang]) for lang in langs)
    cols = []
    for lang in langs:
        size = len(sets[lang])
        rng = random.Random(f"{seed}:units:{lang}")
        col: list[int] = []
        while len(col) < n:
            order = list(range(size))
            rng.shuffle(order)
            col += order
        cols.append(col[:n])
    return langs, list(zip(*cols, strict=True))
