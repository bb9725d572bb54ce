"""The translator interface every backend implements, and the registry ``make_translator`` reads.

A backend only turns a batch of clean, single-line, non-empty texts in one source language into
English. Deduplication, caching, batching, retries with back-off, long-line chunking and the
counting of failures live in :mod:`parasim.translate.stage`, once for all backends.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from parasim.config import Settings


@dataclass(frozen=True)
class TranslateSettings(Settings, section="translate"):
    """The ``translate`` config section (what each key means: the schema).

    Every backend reads the common keys (``batch_size``: lines per backend call, None for the
    backend's own default; ``retries`` and ``backoff_s``: extra attempts after a failed call,
    with exponential back-off; ``timeout_s``: one call's limit; ``max_chars``: longer lines are
    split on sentence boundaries; ``max_line_chars``: longer lines are not translated;
    ``give_up_after``: consecutive failed calls before the backend is taken as down), and its
    own (``model``, ``device``, ... for marian; ``apertium_*``; ``mtranslate_delay_s``).
    """

    backend: str
    model: str | Mapping[str, str] | None
    batch_size: int | None
    device: str
    dtype: str
    num_beams: int
    max_new_tokens: int
    max_input_tokens: int
    retries: int
    backoff_s: float
    timeout_s: float
    give_up_after: int
    max_chars: int
    max_line_chars: int
    apertium_modes: Mapping[str, Sequence[str]]
    apertium_datadir: str | None
    mtranslate_delay_s: float
    cache: str


class TranslationError(RuntimeError):
    """A backend call failed (network, time-out, bad output); the caller may retry."""


class BackendUnavailable(RuntimeError):
    """A backend cannot be used at all here (binary, package or model missing)."""


class Translator(ABC):
    """Translate lines of one source language into English.

    Subclasses set :attr:`name`, may override :attr:`default_batch_size`, :meth:`supports`,
    :meth:`model_id` and :meth:`label`, and implement :meth:`translate_batch`.

    Args:
        settings: The ``translate`` settings (a mapping: the section as in the config, keys left
            out take the schema's defaults).
        threads: CPU threads the backend may use (apertium processes, torch threads); None:
            one apertium process, torch's default.
    """

    name: ClassVar[str] = "base"
    default_batch_size: ClassVar[int] = 32
    #: Upper bound on the characters of one batch (keeps one call's time and memory bounded).
    batch_chars: ClassVar[int] = 100_000
    #: Same input, same output: an empty output is then not worth retrying.
    deterministic: ClassVar[bool] = True

    def __init__(
        self,
        settings: TranslateSettings | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        self.settings = settings = TranslateSettings.from_config(settings)
        self.threads = threads
        size = settings.batch_size
        self.batch_size = int(self.default_batch_size if size is None else size)
        self.retries = int(settings.retries)
        self.backoff_s = float(settings.backoff_s)
        self.timeout_s = float(settings.timeout_s)
        self.max_chars = int(settings.max_chars)
        self.max_line_chars = int(settings.max_line_chars)
        self.give_up_after = int(settings.give_up_after)
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

#: Backend name -> "module:Class" (imported on first use) or a factory taking the settings and
#: ``threads`` (as :class:`Translator` does).
_REGISTRY: dict[str, str | Callable[..., Translator]] = {
    "apertium": "parasim.translate.apertium:ApertiumTranslator",
    "marian": "parasim.translate.marian:MarianTranslator",
    "mtranslate": "parasim.translate.mtranslate_backend:MTranslateTranslator",
    "identity": "parasim.translate.identity:IdentityTranslator",
}


def register_backend(name: str, factory: Callable[..., Translator]) -> None:
    """Make settings with ``backend`` ``name`` build their translator with
    ``factory(settings, threads=threads)`` (the schema knows the shipped backends only: build such
    settings with ``dataclasses.replace(settings, backend=name)``)."""
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    """Names ``make_translator`` accepts."""
    return sorted(_REGISTRY)


def make_translator(
    settings: TranslateSettings | Mapping[str, Any], threads: int | None = None
) -> Translator:
    """Build the translator the ``translate`` settings ask for.

    Args:
        settings: The settings, or the section as in the config, e.g.
            ``{"backend": "apertium", "retries": 3}``.
        threads: CPU threads the backend may use (see :class:`Translator`).

    Raises:
        ValueError: Unknown backend name (a :class:`parasim.config.ConfigError` for a mapping
            that does not validate).
        BackendUnavailable: The backend's binary, package or model is missing here.
    """
    settings = TranslateSettings.from_config(settings)
    name = settings.backend
    entry = _REGISTRY.get(name)
    if entry is None:
        known = available_backends()
        raise ValueError(f"translate.backend: unknown backend {name!r}; known: {known}")
    if isinstance(entry, str):
        module, cls = entry.split(":")
        entry = getattr(importlib.import_module(module), cls)
    return entry(settings, threads=threads)
