"""Apertium: offline rule-based MT from the Debian packages (apertium, apertium-eng-spa, ...).

Spanish goes to English directly (``spa-eng``); a language with no direct pair is translated through
a pivot, found as the shortest chain of installed modes (French: ``fr-es`` then ``spa-eng``).

Speed comes from sending a whole batch through ONE ``apertium`` call per mode. Lines are separated
by a blank line: in Apertium's plain-text format a blank line ends a paragraph, which the tagger
and the structural transfer never cross (with single newlines, words do move between lines:
"la casa\\nroja es" comes back as "the red\\nhouse is"). The number of paragraphs that come back is
checked; when it differs, the batch is split in two and each half is sent again, down to single
lines.
"""

from __future__ import annotations

import locale
import os
import re
import shutil
import subprocess
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from parasim.translate.base import (
    BackendUnavailable,
    TranslateSettings,
    TranslationError,
    Translator,
)

#: Apertium language codes (ISO 639-3 or -1) -> the ISO 639-1 codes parasim uses.
_ISO1 = {
    "eng": "en", "spa": "es", "fra": "fr", "cat": "ca", "por": "pt", "ita": "it", "deu": "de",
    "glg": "gl", "oci": "oc", "eus": "eu", "ron": "ro", "nld": "nl", "afr": "af", "ara": "ar",
    "bel": "be", "rus": "ru", "ukr": "uk", "pol": "pl", "ces": "cs", "slk": "sk", "slv": "sl",
    "hbs": "sh", "bul": "bg", "mkd": "mk", "swe": "sv", "dan": "da", "nob": "nb", "nno": "nn",
    "isl": "is", "fao": "fo", "epo": "eo", "cym": "cy", "bre": "br", "gle": "ga", "mlt": "mt",
    "ind": "id", "msa": "ms", "kaz": "kk", "tat": "tt", "tur": "tr", "hin": "hi", "urd": "ur",
    "arg": "an", "ast": "ast", "srd": "sc", "cos": "co", "tgl": "tl",
}  # fmt: skip

_MODE_RE = re.compile(r"^([a-z]{2,3})-([a-z]{2,3})$")  # skips variants (spa-eng_US) and eco-*


def _iso1(code: str) -> str:
    return _ISO1.get(code, code)


def _utf8_env() -> dict[str, str]:
    env = dict(os.environ)
    if "utf" not in (locale.getpreferredencoding(False) or "").lower().replace("-", ""):
        env["LC_ALL"] = "C.UTF-8"
    return env


#: Debian packages of Apertium pairs that lead to English (Debian 12), by source language; the
#: rest of Debian's pairs (`apt-cache search apertium-`) reach English only through these.
DEBIAN_PACKAGES = {
    "es": "apertium-eng-spa",
    "fr": "apertium-fr-es apertium-eng-spa",
    "ca": "apertium-eng-cat",
    "gl": "apertium-en-gl",
    "eo": "apertium-eo-en",
    "eu": "apertium-eu-en",
    "sh": "apertium-hbs-eng",
    "is": "apertium-isl-eng",
    "mk": "apertium-mkd-eng",
    "pt": "apertium-es-pt apertium-eng-spa",
    "it": "apertium-spa-ita apertium-eng-spa",
    "ro": "apertium-es-ro apertium-eng-spa",
}


def list_modes(datadir: str | None = None) -> list[str] | None:
    """The modes ``apertium -l`` lists (``spa-eng``, ...), or None when ``apertium`` is missing."""
    binary = shutil.which("apertium")
    if binary is None:
        return None
    cmd = [binary, "-u"] + (["-d", str(datadir)] if datadir else []) + ["-l"]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, encoding="utf-8", env=_utf8_env(), timeout=60
    )
    return [m.strip() for m in proc.stdout.splitlines() if m.strip()]


def find_chain(src_lang: str, modes: Sequence[str]) -> list[str] | None:
    """The shortest chain of ``modes`` that takes ``src_lang`` to English, or None.

    Breadth-first over the modes named ``xxx-yyy`` (variants such as ``spa-eng_US`` and the
    ``eco-*`` modes are skipped): the fewest hops, and among equals the order of ``modes``.
    """
    edges: dict[str, list[tuple[str, str]]] = {}
    for mode in modes:
        m = _MODE_RE.match(mode)
        if m:
            edges.setdefault(_iso1(m.group(1)), []).append((_iso1(m.group(2)), mode))
    queue: deque[tuple[str, list[str]]] = deque([(src_lang, [])])
    seen = {src_lang}
    while queue:
        lang, path = queue.popleft()
        if lang == "en":
            return path or None
        for nxt, mode in edges.get(lang, []):
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, [*path, mode]))
    return None


def translatable(modes: Sequence[str]) -> list[str]:
    """The languages (ISO 639-1 where known) that ``modes`` take to English."""
    sources = {_iso1(m.group(1)) for mode in modes if (m := _MODE_RE.match(mode))}
    return sorted(lang for lang in sources if lang != "en" and find_chain(lang, modes))


def _strip_marks(out: str, src: str) -> str:
    """Drop Apertium's word marks (* unknown, # no surface form, @ not in the bilingual dictionary).

    A mark character the source line does not contain is removed wherever it is (a multiword can
    come back as "move# away"). Where the source has it ("#hashtag", "a@b.org") the output is left
    alone: a stray mark is the lesser harm.
    """
    for mark in "*#@":
        if mark in out and mark not in src:
            out = out.replace(mark, "")
    return " ".join(out.split())


class ApertiumTranslator(Translator):
    """Translate with the ``apertium`` command line (one process per mode per batch).

    Settings (besides the common ones): ``apertium_modes``: {lang: [mode, ...]} to override
    the chains found with ``apertium -l``; ``apertium_datadir``: passed as ``-d``. ``threads``:
    a batch is cut into this many parts, translated by as many apertium processes at once.

    Raises:
        BackendUnavailable: ``apertium`` is not on PATH.
    """

    name: ClassVar[str] = "apertium"
    default_batch_size: ClassVar[int] = 1000
    batch_chars: ClassVar[int] = 200_000

    def __init__(
        self,
        settings: TranslateSettings | Mapping[str, Any] | None = None,
        threads: int | None = None,
    ) -> None:
        super().__init__(settings, threads)
        self.binary = shutil.which("apertium")
        if self.binary is None:
            raise BackendUnavailable(
                "translate.backend apertium: the `apertium` command is not on PATH "
                "(Debian/Ubuntu: apt-get install apertium apertium-eng-spa apertium-fr-es)"
            )
        self.datadir = self.settings.apertium_datadir
        self._env = _utf8_env()
        self.modes = list_modes(self.datadir) or []
        overrides = self.settings.apertium_modes
        self._chains: dict[str, list[str] | None] = {k: list(v) for k, v in overrides.items()}
        unknown = sorted({m for v in self._chains.values() for m in v or []} - set(self.modes))
        if unknown:
            raise BackendUnavailable(
                f"translate.apertium_modes: mode(s) {unknown} are not installed; "
                f"`apertium -l` lists {self.modes}"
            )
        self.threads = max(1, int(threads or 1))
        #: Batches whose paragraph count came back wrong and were split (for the log).
        self.n_resplit = 0

    def _base_cmd(self) -> list[str]:
        cmd = [self.binary, "-u"]
        if self.datadir:
            cmd += ["-d", str(self.datadir)]
        return cmd

    def chain(self, src_lang: str) -> list[str] | None:
        """The modes that take ``src_lang`` to English (shortest chain), or None when none do."""
        if src_lang in self._chains:
            return self._chains[src_lang]
        found = find_chain(src_lang, self.modes)
        self._chains[src_lang] = found or None
        return self._chains[src_lang]

    def supports(self, src_lang: str) -> bool:
        return bool(self.chain(src_lang))

    def model_id(self, src_lang: str) -> str:
        return "+".join(self.chain(src_lang) or ["unsupported"])

    def translate_batch(self, lines: Sequence[str], src_lang: str) -> list[str | None]:
        """Translate ``lines`` through every mode of the chain, one process per mode."""
        chain = self.chain(src_lang)
        if not chain:
            raise TranslationError(f"apertium: no installed modes take {src_lang!r} to English")
        texts = list(lines)
        n = min(self.threads, max(1, len(texts) // 50))  # a process costs ~0.2 s to start
        if n == 1:
            return self._run_chain(texts, chain)
        from concurrent.futures import ThreadPoolExecutor

        step = -(-len(texts) // n)
        parts = [texts[i : i + step] for i in range(0, len(texts), step)]
        with ThreadPoolExecutor(len(parts)) as pool:
            done = list(pool.map(lambda p: self._run_chain(p, chain), parts))
        return [t for part in done for t in part]

    def _run_chain(self, texts: list[str], chain: list[str]) -> list[str]:
        for mode in chain:
            out = self._run_mode(texts, mode)
            texts = [_strip_marks(o, s) for o, s in zip(out, texts, strict=True)]
        return texts

    def _call(self, lines: list[str], mode: str) -> list[str]:
        """One apertium process for ``lines``; returns its paragraphs (count not checked)."""
        text = "\n\n".join(lines) + "\n"
        # A big batch of long lines takes a while: allow 1 s per 2,000 characters on top.
        limit = self.timeout_s + len(text) / 2000
        try:
            proc = subprocess.run(
                [*self._base_cmd(), mode],
                input=text, capture_output=True, text=True, encoding="utf-8",
                errors="replace", env=self._env, timeout=limit,
            )  # fmt: skip
        except subprocess.TimeoutExpired as exc:
            raise TranslationError(
                f"apertium {mode}: no answer within {limit:.0f} s for {len(lines)} lines"
            ) from exc
        if proc.returncode != 0:
            raise TranslationError(
                f"apertium {mode} exited with {proc.returncode}: {proc.stderr.strip()[:300]}"
            )
        out = proc.stdout.rstrip("\n")
        if not out:
            return [""] if len(lines) == 1 else []
        return [" ".join(p.split()) for p in out.split("\n\n")]

    def _run_mode(self, lines: list[str], mode: str) -> list[str]:
        parts = self._call(lines, mode)
        if len(parts) == len(lines):
            return parts
        if len(lines) == 1:
            # One line came back as several paragraphs: keep all of it, on one line.
            return [" ".join(p for p in parts if p)]
        self.n_resplit += 1
        mid = len(lines) // 2
        return self._run_mode(lines[:mid], mode) + self._run_mode(lines[mid:], mode)
