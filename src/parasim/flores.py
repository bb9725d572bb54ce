"""Flores-200 devtest (``../shared/data/parallel/flores200-devtest``): one reader, one code map.

The benchmarks, the aligned encoder's word-pair evaluation and the bench's synthetic documents all
read the same 1,012 sentences per language, line by line parallel.
"""

from __future__ import annotations

from pathlib import Path

from parasim.paths import shared_data

__all__ = ["CODES", "FOLDER", "flores_file", "read_flores"]

#: parasim's language codes -> Flores-200's.
CODES = {"en": "eng_Latn", "fr": "fra_Latn", "es": "spa_Latn"}
#: The devtest folder in the shared data.
FOLDER = shared_data("parallel", "flores200-devtest")


def flores_file(lang: str, folder: str | Path | None = None) -> Path:
    """The devtest file of ``lang`` (``en``, ``fr``, ``es``) in ``folder`` (default :data:`FOLDER`).

    Raises:
        KeyError: a language Flores is not mapped for here (naming the known ones).
    """
    try:
        code = CODES[lang]
    except KeyError:
        raise KeyError(f"no Flores-200 code for {lang!r}; known: {', '.join(CODES)}") from None
    return Path(folder or FOLDER) / f"{code}.devtest"


def read_flores(lang: str, folder: str | Path | None = None, n: int | None = None) -> list[str]:
    """The devtest sentences of ``lang`` (the first ``n`` when given), one per line.

    Raises:
        FileNotFoundError: naming the missing file.
    """
    path = flores_file(lang, folder)
    if not path.is_file():
        raise FileNotFoundError(f"Flores-200 devtest not found: {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return lines if n is None else lines[:n]
