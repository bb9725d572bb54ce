"""CORPUS stage: the labelled corpus, Parquet shards per partition and split, and its card.

See :mod:`parasim.corpus.stage`; partitions and splits come from :mod:`parasim.partition`.
"""

from parasim.corpus.stage import build_corpus, label_counts, write_card
from parasim.io import CORPUS_SCHEMA, CORPUS_SCHEMA_VERSION

__all__ = ["CORPUS_SCHEMA", "CORPUS_SCHEMA_VERSION", "build_corpus", "label_counts", "write_card"]
