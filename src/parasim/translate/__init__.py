"""TRANSLATE stage: the non-English side of each page pair, into English, line by line.

Backends (``translate.backend`` in the config): ``apertium`` (offline, rule-based; the default),
``marian`` (MarianMT or any seq2seq model from transformers, CPU or CUDA), ``mtranslate`` (Google
Translate's web page, the seed paper's choice; needs internet) and ``identity``. See
:mod:`parasim.translate.stage` for what happens to each line.
"""

from parasim.translate.base import (
    BackendUnavailable,
    TranslateSettings,
    TranslationError,
    Translator,
    available_backends,
    make_translator,
    register_backend,
)
from parasim.translate.cache import TranslationCache
from parasim.translate.stage import (
    REASONS,
    normalize_line,
    split_long,
    translate_file,
    translate_lines,
    translate_texts,
)

__all__ = [
    "REASONS",
    "BackendUnavailable",
    "TranslateSettings",
    "TranslationCache",
    "TranslationError",
    "Translator",
    "available_backends",
    "make_translator",
    "normalize_line",
    "register_backend",
    "split_long",
    "translate_file",
    "translate_lines",
    "translate_texts",
]
