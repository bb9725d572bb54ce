"""AMR graphs and metric scores for sentence pairs (seeds 002 and 004).

Sentences become AMR graphs in Penman notation (:mod:`~parasim.amr.parse`: the offline ``rules``
parser over spaCy parses, or an amrlib model), once each through a SQLite parse cache. A pair of
graphs gets the 15 aspect similarities of seed 002 (:mod:`~parasim.amr.aspects`: Smatch through
smatchpp, WLK and WWLK, the fine-grained scores of Damonte & Cohen, quantSim, degree and root
similarities); a pair of texts also gets seed 004's entity cosines and BM25 within its page pair
(:mod:`~parasim.amr.entities`). :func:`score_text_pairs` does all of it for a shard's columns.
"""

from parasim.amr.aspects import ASPECTS, aspect_scores
from parasim.amr.batch import ScoreSettings, TextPairScores, score_graph_pairs, score_text_pairs
from parasim.amr.cache import ParseCache
from parasim.amr.entities import (
    ENTITY_GROUPS,
    bm25_in_groups,
    count_cosine,
    entity_bags,
    entity_features,
)
from parasim.amr.graph import Graph, read_graph, read_graphs_file
from parasim.amr.matching import smatch_counts, smatch_f1
from parasim.amr.parse import ParseCounts, Parser, ParseSettings, load_english, parse_sentences
from parasim.amr.rules import RULES_VERSION, doc_to_amr
from parasim.amr.vectors import LabelVectors, load_vectors
from parasim.amr.wl import wlk, wwlk

__all__ = [
    "ASPECTS",
    "ENTITY_GROUPS",
    "RULES_VERSION",
    "Graph",
    "LabelVectors",
    "ParseCache",
    "ParseCounts",
    "ParseSettings",
    "Parser",
    "ScoreSettings",
    "TextPairScores",
    "aspect_scores",
    "bm25_in_groups",
    "count_cosine",
    "doc_to_amr",
    "entity_bags",
    "entity_features",
    "load_english",
    "load_vectors",
    "parse_sentences",
    "read_graph",
    "read_graphs_file",
    "score_graph_pairs",
    "score_text_pairs",
    "smatch_counts",
    "smatch_f1",
    "wlk",
    "wwlk",
]
