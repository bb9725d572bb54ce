"""Synthetic divergences of varying granularity, with token tags and ranking groups.

Seed 000 §3.2–3.4 (Divergent mBERT): each equivalent seed pair (a row of the positives) is
perturbed three ways, from the finest edit to the coarsest,

1. lexical substitution: one English word becomes a WordNet hypernym or hyponym (picked by an LM);
2. phrase replacement: a short span becomes a span with the same tags from another sentence;
3. subtree deletion: a dependency subtree (< half the sentence) is deleted, on the English side or,
   through the word alignment, on the other side;

and every token gets an EQ/DIV tag (seed §3.4): the inserted tokens are DIV, and so are the words
aligned (eflomal, intersection of both directions, seed 003 §3.2) to the removed or replaced
tokens on the other side. A seed and its variants form a ranking group, ordered
equivalent (rank 0) > lexical substitution (1) > phrase replacement (2) > subtree deletion (3),
from which :func:`contrastive_pairs` forms the (x > y) training pairs of the seed's §6 settings.

Stage function: :func:`make_divergences` (positives table in, divergences table out, its counts
into a :class:`~parasim.stats.Recorder`), in :mod:`parasim.divergences.stage` with its named
steps; :func:`write_card` writes the dataset card
(:func:`~parasim.divergences.stage.write_site_card`: a site's, summed over its shards, for its
`.done` target).
"""

from ..io import DIVERGENCES_SCHEMA
from .contrastive import contrastive_pairs
from .stage import (
    EQUIVALENT,
    LEXICAL,
    PHRASE,
    RANK,
    SUBTREE,
    TYPES,
    DivergencesSettings,
    make_divergences,
    write_card,
)
from .tags import EQ

__all__ = [
    "DIVERGENCES_SCHEMA",
    "DivergencesSettings",
    "EQ",
    "EQUIVALENT",
    "LEXICAL",
    "PHRASE",
    "RANK",
    "SUBTREE",
    "TYPES",
    "contrastive_pairs",
    "make_divergences",
    "write_card",
]
