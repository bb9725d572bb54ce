"""mtranslate: the seed paper's choice, Google Translate's web page via the ``mtranslate`` package.

Needs internet access and ``pip install mtranslate``. One HTTP request per line. ``mtranslate``
sets no time limit of its own, so one is set on the socket for the duration of each call. The
service answers "" when it refuses a request: that counts as a failure, and is retried.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from parasim.translate.base import (
    BackendUnavailable,
    TranslateSettings,
    TranslationError,
    Translator,
)


class MTranslateTranslator(Translator):
    """Google Translate via ``mtranslate.translate(text, "en", src_lang)``, line by line.

    Settings (besides the common ones): ``mtranslate_delay_s``: pause between requests.

    Raises:
        BackendUnavailable: the ``mtranslate`` package is not installed.
    """

    name: ClassVar[str] = "mtranslate"
    default_batch_size: ClassVar[int] = 16
    deterministic: ClassVar[bool] = False  # a refused request ("" back) may pass on a retry

    def __init__(
        self,
        settings: TranslateSettings | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(settings, threads)
        try:
            from mtranslate import translate
        except ImportError as exc:
            raise BackendUnavailable(
                "translate.backend mtranslate needs the mtranslate package (pip install mtranslate)"
            ) from exc
        self._translate = translate
        self.delay_s = float(self.settings.mtranslate_delay_s)

    def model_id(self, src_lang: str) -> str:
        return "google-web"

    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        """One request per line; failed lines come back as None.

        Raises:
            TranslationError: every line of the batch failed (e.g. the network is down), so the
                caller backs off and retries the batch.
        """
        out: list[str | None] = []
        errors: list[BaseException] = []
        old_timeout = socket.getdefaulttimeout()
        socket.setdefaulttimeout(self.timeout_s)
        try:
            for i, line in enumerate(lines):
                if i and self.delay_s:
                    time.sleep(self.delay_s)
                try:
                    out.append(self._translate(line, "en", src_lang))
                except Exception as exc:  # network, HTTP 429, parse errors: all retryable
                    errors.append(exc)
                    out.append(None)
        finally:
            socket.setdefaulttimeout(old_timeout)
        if lines and len(errors) == len(lines):
            raise TranslationError(
                f"mtranslate: all {len(lines)} requests failed: {errors[0]!r}"
            ) from errors[0]
        return out
