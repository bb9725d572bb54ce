"""AMR graphs and metric scores for every pair of the corpus and the divergences (seeds 002, 004).

The ``score_pairs`` stage reads a shard's positives, the hard negatives drawn for them and the
shard's divergences, and writes one row per input row (``results/scores/<site>/<shard>.parquet``,
keyed by the row's ``id`` and ``source``): both English texts as AMR graphs (Penman), the 15
aspect similarities of seed 002, the entity cosines of seed 004, BM25 within the page pair, chrF
and BLEU of the translation against the English side and the embedding cosine of the two
original sides. Empty, untranslated and over-long pairs are counted skips with a reason; a
sentence the parser fails on gives null graphs and aspects for its pair.

:func:`score_shard` is the stage function (:mod:`parasim.scores.stage`: a shard in blocks of
``scores.block_rows`` rows, each written as it is scored; :func:`score_pairs` gives one table);
:func:`load` gives the corpus or the divergences as a ``datasets.Dataset`` with the score
columns joined; :func:`plot_distributions` draws the score distributions per label and
divergence type (:func:`~parasim.scores.plot.plot_site`: a site's, for its `.done` target).
"""

from parasim.io import SCORE_COLUMNS, SCORES_SCHEMA
from parasim.scores.load import join_scores, load, read_scores
from parasim.scores.plot import PLOT_COLUMNS, plot_distributions
from parasim.scores.stage import (
    SKIP_REASONS,
    SOURCES,
    AmrSettings,
    ScoresSettings,
    SentenceVectors,
    embedding_cosines,
    entity_cosines,
    gather_pairs,
    iter_pairs,
    score_pairs,
    score_shard,
    skip_reasons,
    surface_scores,
)

__all__ = [
    "PLOT_COLUMNS",
    "SCORES_SCHEMA",
    "SCORE_COLUMNS",
    "SKIP_REASONS",
    "SOURCES",
    "AmrSettings",
    "ScoresSettings",
    "SentenceVectors",
    "embedding_cosines",
    "entity_cosines",
    "gather_pairs",
    "iter_pairs",
    "join_scores",
    "load",
    "plot_distributions",
    "read_scores",
    "score_pairs",
    "score_shard",
    "skip_reasons",
    "surface_scores",
]
