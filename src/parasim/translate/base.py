"""The translator interface every backend implements, and the registry ``make_translator`` reads.

A backend only turns a batch of clean, single-line, non-empty texts in one source language into
English. Deduplication, caching, batching, retries with back-off, long-line chunking and the
counting of failures live in :mod:`parasim.translate.stage`, once for all backends.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

#: Settings every backend understands (the ``translate:`` config section), with their defaults.
COMMON_DEFAULTS: dict[str, Any] = {
    "batch_size": None,  # lines per backend call; None: the backend's own default
    "retries": 3,  # extra attempts after a failed call, with exponential back-off
    "backoff_s": 1.0,  # first back-off; doubles on every retry
    "timeout_s": 30.0,  # limit for one backend call (apertium, mtranslate)
    "max_chars": 1000,  # longer lines are split on sentence boundaries and translated in chunks
    "max_line_chars": 20000,  # longer lines are not translated at all (reason "too_long")
    "give_up_after": 3,  # consecutive failed calls before the backend is taken as down
}


class TranslationError(RuntimeError):
    """A backend call failed (network, time-out, bad output); the caller may retry."""


class BackendUnavailable(RuntimeError):
    """A backend cannot be used at all here (binary, package or model missing)."""


class Translator(ABC):
    """Translate lines of one source language into English.

    Subclasses set :attr:`name`, may override :attr:`default_batch_size`, :meth:`supports`,
    :meth:`model_id` and :meth:`label`, and implement :meth:`translate_batch`.

    Args:
        cfg: The ``translate:`` config section (backend-specific keys plus
            :data:`COMMON_DEFAULTS`); missing keys take their defaults.
    """

    name: ClassVar[str] = "base"
    default_batch_size: ClassVar[int] = 32
    #: Upper bound on the characters of one batch (keeps one call's time and memory bounded).
    batch_chars: ClassVar[int] = 100_000
    #: Same input, same output: an empty output is then not worth retrying.
    deterministic: ClassVar[bool] = True

    def __init__(self, cfg: Mapping[str, Any] | None = None) -> None:
        cfg = dict(cfg or {})
        merged = {**COMMON_DEFAULTS, **{k: v for k, v in cfg.items() if v is not None}}
        self.cfg = merged
        size = merged["batch_size"]
        self.batch_size = int(self.default_batch_size if size is None else size)
        self.retries = int(merged["retries"])
        self.backoff_s = float(merged["backoff_s"])
        self.timeout_s = float(merged["timeout_s"])
        self.max_chars = int(merged["max_chars"])
        self.max_line_chars = int(merged["max_line_chars"])
        self.give_up_after = int(merged["give_up_after"])
        if self.batch_size < 1 or self.retries < 0 or self.max_chars < 1:
            raise ValueError(
                f"translate: batch_size >= 1, retries >= 0 and max_chars >= 1 required "
                f"(got {self.batch_size}, {self.retries}, {self.max_chars})"
            )

    def supports(self, src_lang: str) -> bool:
        """Whether this backend can translate ``src_lang`` into English."""
        return True

    def model_id(self, src_lang: str) -> str:
        """What, besides the backend name, decides the output (part of the cache key)."""
        return ""

    def label(self, src_lang: str) -> str:
        """The ``mt_backend`` value written next to the translations."""
        mid = self.model_id(src_lang)
        return f"{self.name}:{mid}" if mid else self.name

    @abstractmethod
    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        """Translate ``lines`` (non-empty, no newlines) from ``src_lang`` into English.

        Returns one entry per input line: the translation, or None/"" where that line failed.
        Raises :class:`TranslationError` (or any exception) when the whole call failed.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release processes, models or connections."""


# ---------------------------------------------------------------- registry

#: Backend name -> "module:Class" (imported on first use) or a factory taking the config.
_REGISTRY: dict[str, str | Callable[[Mapping[str, Any]], Translator]] = {
    "apertium": "parasim.translate.apertium:ApertiumTranslator",
    "marian": "parasim.translate.marian:MarianTranslator",
    "mtranslate": "parasim.translate.mtranslate_backend:MTranslateTranslator",
    "identity": "parasim.translate.identity:IdentityTranslator",
}


def register_backend(name: str, factory: Callable[[Mapping[str, Any]], Translator]) -> None:
    """Make ``translate: {backend: name}`` build its translator with ``factory(cfg)``."""
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    """Names ``make_translator`` accepts."""
    return sorted(_REGISTRY)


def make_translator(cfg: Mapping[str, Any]) -> Translator:
    """Build the translator the ``translate:`` config section asks for.

    Args:
        cfg: The section, e.g. ``{"backend": "apertium", "retries": 3}``.

    Raises:
        ValueError: Unknown backend name.
        BackendUnavailable: The backend's binary, package or model is missing here.
    """
    name = cfg.get("backend", "apertium")
    entry = _REGISTRY.get(name)
    if entry is None:
        known = available_backends()
        raise ValueError(f"translate.backend: unknown backend {name!r}; known: {known}")
    if isinstance(entry, str):
        module, cls = entry.split(":")
        entry = getattr(importlib.import_module(module), cls)
    return entry(cfg)
