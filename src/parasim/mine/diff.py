"""What differs between two sentences of one language: the spans and their kind.

A mined divergence pairs a positive's English side with another line of the site; the positive's
own translation (the *partner*) is the reference, so what the mined line says differently is
what differs between the partner and the mined line, in one language. :func:`differences` diffs
the two token sequences (difflib's longest matching blocks over words, numbers and symbols) and
returns the character spans of the differing tokens on each side and their kind:

- ``date``: a month name, or a date written with digits (``2017-05-03``, ``3/5/2017``) or a
  year beside other changed tokens;
- ``version``: a dotted number (``3.8``), or a number after a version word;
- ``number``: other numbers;
- ``name``: capitalised words or code identifiers (``os.path``, ``snake_case``) not at the
  start of the sentence;
- ``other``: anything else (a content word, a phrase, a clause added or left out).

:func:`content_tokens` is the guards' view of a sentence: case folded words and numbers without
the language's function words (spaCy's stop word lists, no model needed).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher

#: A token: a run of word characters (digits with their inner dots and commas kept together,
#: so that ``3.8`` and ``1,000`` are one token) or one symbol.
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|\w+(?:[._]\w+)*|[^\w\s]", re.UNICODE)
_DIGITS = re.compile(r"^\d+(?:[.,]\d+)*$")
_DOTTED = re.compile(r"^\d+(?:\.\d+)+$")
_YEAR = re.compile(r"^(1[89]|20)\d\d$")
_DATE = re.compile(r"\b(\d{4}-\d\d-\d\d|\d{1,2}/\d{1,2}/\d{2,4})\b")
_IDENT = re.compile(r"^\w+(?:[._]\w+)+$")

#: Month names (English, French, Spanish), case folded (not "may": a verb more often).
MONTHS = frozenset(
    [
        "january",
        "february",
        "march",
        "april",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
        "janvier",
        "février",
        "fevrier",
        "mars",
        "avril",
        "mai",
        "juin",
        "juillet",
        "août",
        "aout",
        "septembre",
        "octobre",
        "novembre",
        "décembre",
        "decembre",
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "setiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ]
)
#: Words that make the number after them a version.
VERSION_WORDS = frozenset(
    ["version", "versions", "release", "python", "v", "versión", "versiones", "versión"]
)

KINDS = ("date", "version", "number", "name", "other")


@dataclass(frozen=True)
class Diff:
    """The differences of ``b`` from ``a``: character spans on each side and their kind."""

    a_spans: tuple[tuple[int, int], ...]
    b_spans: tuple[tuple[int, int], ...]
    kind: str | None  # None when the two have the same tokens


def span_structs(spans: Sequence[tuple[int, int]]) -> list[dict[str, int]]:
    """Character spans as the schemas' ``{"start", "end"}`` structs."""
    return [{"start": s, "end": e} for s, e in spans]


def tokens(text: str) -> list[tuple[str, int, int]]:
    """``(token, start, end)`` of every token of ``text``."""
    return [(m.group(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def _fold(tok: str) -> str:
    return unicodedata.normalize("NFKC", tok).casefold()


def _kind(changed: Sequence[tuple[str, bool, str | None]], texts: Sequence[str]) -> str:
    """The kind of a difference from its changed tokens: ``(token, sentence-initial, word
    before)``."""
    folded = [_fold(t) for t, _, _ in changed]
    if any(f in MONTHS for f in folded) or any(_DATE.search(t) for t in texts):
        return "date"
    words = [t for t in changed if not re.fullmatch(r"[^\w\s]", t[0])]
    if not words:
        return "other"
    if any(
        _DOTTED.match(t) or (_DIGITS.match(t) and before in VERSION_WORDS) for t, _, before in words
    ):
        return "version"
    if all(_DIGITS.match(t) for t, _, _ in words):
        if any(_YEAR.match(t) for t, _, _ in words) and len(words) > 1:
            return "date"
        return "number"
    if all(
        _DIGITS.match(t) or _IDENT.match(t) or (t[:1].isupper() and not initial)
        for t, initial, _ in words
    ):
        return "name"
    return "other"


def differences(a: str, b: str) -> Diff:
    """The tokens of ``b`` that differ from ``a`` (case folded), as spans on both sides.

    Args:
        a: the reference (a positive's own translation).
        b: the other sentence, in the same language (the mined line).
    """
    ta, tb = tokens(a), tokens(b)
    fa, fb = [_fold(t) for t, _, _ in ta], [_fold(t) for t, _, _ in tb]
    sm = SequenceMatcher(None, fa, fb, autojunk=False)
    a_spans: list[tuple[int, int]] = []
    b_spans: list[tuple[int, int]] = []
    changed: list[tuple[str, bool, str | None]] = []
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "equal":
            continue
        if i2 > i1:
            a_spans.append((ta[i1][1], ta[i2 - 1][2]))
            changed += [(ta[i][0], i == 0, fa[i - 1] if i else None) for i in range(i1, i2)]
        if j2 > j1:
            b_spans.append((tb[j1][1], tb[j2 - 1][2]))
            changed += [(tb[j][0], j == 0, fb[j - 1] if j else None) for j in range(j1, j2)]
    if not changed:
        return Diff((), (), None)
    pieces = [a[s:e] for s, e in a_spans] + [b[s:e] for s, e in b_spans]
    return Diff(tuple(a_spans), tuple(b_spans), _kind(changed, pieces))


@functools.cache
def stop_words(lang: str) -> frozenset[str]:
    """spaCy's stop words of ``lang`` (empty when spaCy has no list for it)."""
    import importlib

    try:
        mod = importlib.import_module(f"spacy.lang.{lang}.stop_words")
    except ImportError:
        return frozenset()
    return frozenset(_fold(w) for w in mod.STOP_WORDS)


def content_tokens(text: str, lang: str) -> frozenset[str]:
    """The words and numbers of ``text`` that are not function words of ``lang``, case folded
    (a plural ``s`` dropped from words of 4 letters or more)."""
    stops = stop_words(lang)
    out = set()
    for tok, _, _ in tokens(text):
        f = _fold(tok)
        if not re.search(r"\w", f) or f in stops:
            continue
        if len(f) >= 4 and f.endswith("s") and f[-2:] != "ss" and not _DIGITS.match(f):
            f = f[:-1]
        out.add(f)
    return frozenset(out)
