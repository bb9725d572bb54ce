"""The identity backend: text that is already English is passed through unchanged."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from parasim.translate.base import Translator


class IdentityTranslator(Translator):
    """Returns every line as it is (for English pages, or to skip translation in a test run)."""

    name: ClassVar[str] = "identity"
    default_batch_size: ClassVar[int] = 10_000
    batch_chars: ClassVar[int] = 10_000_000

    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        """Return ``lines`` unchanged."""
        return list(lines)
