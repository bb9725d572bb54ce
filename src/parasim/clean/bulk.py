"""The per-text work of the clean stage over all distinct texts at once, with Arrow's kernels.

Python's regular expressions cost one call per text and rule; Arrow's string kernels (RE2 and
utf8proc) run over a whole column in C++. This module computes, for a batch of distinct texts:

- the letter count (:func:`.rules.count_letters`), the letters-only form
  (:func:`.rules.letters_only`) and the deduplication key (:func:`.rules.normalize`), exactly;
- for each side rule that is a regular expression search, a **pre-filter**: a mask that is true
  for every text the Python rule could reject (and for a few more). The exact Python rule then runs
  on the texts of the mask only, so the verdicts are those of :mod:`.rules`, by construction.

Where the two engines could disagree:

- **Unicode tables.** RE2's and utf8proc's tables (character classes, lower case, NFKC) need not
  be the version of Python's :mod:`unicodedata`. Every distinct character of the batch is checked
  once (:func:`_disagreeing`): its class under Python's ``\\w``, ``\\d``, ``\\s`` and letters, its
  lower case and case folding, its NFKC form, each against Arrow's. A text holding a character
  where they differ (none in the WET site, the demo, Flores or Tatoeba) goes to the Python rules
  whole.
- **Regular expressions.** RE2 has no look-around or back-references, its ``\\b``, ``\\w``,
  ``\\d``, ``\\s`` are ASCII, and its case folding differs from Python's for a few letters (``ı``,
  ``ſ``, the Kelvin sign). :func:`superset_pattern` rewrites a Python expression into an RE2
  expression that matches wherever the Python one does: assertions and ``\\b`` are dropped, a
  back-reference matches anything, ``\\w``/``\\d``/``\\s`` also match any non-ASCII character,
  and a case-insensitive letter also matches its other case and any non-ASCII character. A pattern
  it cannot rewrite (or RE2 cannot compile) gets no pre-filter: the Python rule runs on every text.
- **Repeated words** (a back-reference) are found on the words: split on Python's whitespace,
  a word equal (lower case) to the end of the word before and the start of the word after; the
  candidates are then checked by the Python expression.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from re import _constants as sre_c
from re import _parser as sre_parse

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: RE2 classes that equal Python's on every character that :func:`_disagreeing` lets through.
#: Python's ``\s`` (``str.isspace``), written out; RE2's ``\s`` is ASCII only.
SPACE = (
    r"\t-\r\x1c-\x20\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
    r"\x{205f}\x{3000}"
)
WORD = r"\pL\pN_"  # Python's \w: str.isalnum() or "_"
LETTER = r"\pL\p{Nl}\p{No}"  # Python's [^\W\d_]: \w without the decimal digits and "_"
DIGIT = r"\p{Nd}"

_NON_ASCII = r"\x{80}-\x{10FFFF}"
_ANY = r"[\x00-\x{10FFFF}]"
#: Superset classes of Python's categories (any non-ASCII character added where RE2 is ASCII).
_CATEGORY = {
    sre_c.CATEGORY_WORD: "0-9A-Za-z_" + _NON_ASCII,
    sre_c.CATEGORY_NOT_WORD: r"\x00-\x2f\x3a-\x40\x5b-\x5e\x60\x7b-\x{10FFFF}",
    sre_c.CATEGORY_DIGIT: "0-9" + _NON_ASCII,
    sre_c.CATEGORY_NOT_DIGIT: r"\x00-\x2f\x3a-\x{10FFFF}",
    sre_c.CATEGORY_SPACE: r"\t-\r\x1c-\x20" + _NON_ASCII,
    sre_c.CATEGORY_NOT_SPACE: r"\x00-\x08\x0e-\x1b\x21-\x{10FFFF}",
}
_REPEATS = (sre_c.MAX_REPEAT, sre_c.MIN_REPEAT, getattr(sre_c, "POSSESSIVE_REPEAT", None))


class _Unsupported(Exception):
    pass


def _x(code: int) -> str:
    return f"\\x{{{code:x}}}"


def _literal(code: int, icase: bool) -> str:
    """Class contents matching the character ``code`` (and, case-insensitively, a superset)."""
    if not icase:
        return _x(code)
    c = chr(code)
    if code < 0x80:
        if c.lower() == c.upper():
            return _x(code)
        return _x(ord(c.lower())) + _x(ord(c.upper())) + _NON_ASCII
    return "A-Za-z" + _NON_ASCII  # a non-ASCII letter's other case may be ASCII (K, ı, ſ)


def _class(items: list, icase: bool) -> str:
    if any(op == sre_c.NEGATE for op, _ in items):
        if icase or any(op not in (sre_c.NEGATE, sre_c.LITERAL, sre_c.RANGE) for op, _ in items):
            return _ANY
        inner = "".join(
            _x(av) if op == sre_c.LITERAL else f"{_x(av[0])}-{_x(av[1])}"
            for op, av in items
            if op != sre_c.NEGATE
        )
        return f"[^{inner}]"
    parts = []
    for op, av in items:
        if op == sre_c.LITERAL:
            parts.append(_literal(av, icase))
        elif op == sre_c.RANGE:
            parts.append(f"{_x(av[0])}-{_x(av[1])}" + ("A-Za-z" + _NON_ASCII if icase else ""))
        elif op == sre_c.CATEGORY and av in _CATEGORY:
            parts.append(_CATEGORY[av])
        else:
            return _ANY
    return "[" + "".join(parts) + "]"


def _emit(sub, icase: bool) -> str:
    out = []
    for op, av in sub:
        if op == sre_c.LITERAL:
            out.append("[" + _literal(av, icase) + "]")
        elif op == sre_c.NOT_LITERAL:
            out.append(_ANY if icase else f"[^{_x(av)}]")
        elif op == sre_c.ANY:
            out.append(_ANY)
        elif op == sre_c.IN:
            out.append(_class(av, icase))
        elif op == sre_c.BRANCH:
            out.append("(?:" + "|".join(_emit(b, icase) for b in av[1]) + ")")
        elif op == sre_c.SUBPATTERN:
            _group, add, _del, p = av
            out.append("(?:" + _emit(p, icase or bool(add & re.IGNORECASE)) + ")")
        elif op == sre_c.ATOMIC_GROUP:
            out.append("(?:" + _emit(av, icase) + ")")
        elif op in _REPEATS and op is not None:
            lo, hi, p = av
            body = "(?:" + _emit(p, icase) + ")"
            if lo > 1000:
                lo = 0
            if hi == sre_c.MAXREPEAT or hi > 1000:
                out.append(f"{body}{{{lo},}}")
            else:
                out.append(f"{body}{{{lo},{hi}}}")
        elif op in (sre_c.AT, sre_c.ASSERT, sre_c.ASSERT_NOT):
            continue  # dropping an assertion only widens the match
        elif op == sre_c.GROUPREF:
            out.append(_ANY + "*")
        elif op == sre_c.GROUPREF_EXISTS:
            _group, yes, no = av
            out.append("(?:" + _emit(yes, icase) + "|" + (_emit(no, icase) if no else "") + ")")
        else:
            raise _Unsupported(op)
    return "".join(out)


@functools.lru_cache(maxsize=64)
def superset_pattern(pattern: re.Pattern) -> str | None:
    """An RE2 expression that matches every string ``pattern`` finds a match in (``search``),
    or None when the pattern cannot be rewritten."""
    try:
        parsed = sre_parse.parse(pattern.pattern, pattern.flags)
        out = _emit(parsed, bool(parsed.state.flags & re.IGNORECASE))
        pc.match_substring_regex(pa.array([""]), out)  # RE2 compiles it
    except (_Unsupported, pa.ArrowInvalid, re.error, RecursionError, TypeError):
        return None
    return out


def candidates(texts: pa.Array, pattern: re.Pattern) -> list[bool] | None:
    """Per text, whether ``pattern.search`` could find a match (None: every text could)."""
    sup = superset_pattern(pattern)
    if sup is None:
        return None
    return pc.match_substring_regex(texts, sup).to_pylist()


# --- the character check ------------------------------------------------------------------

_CHECKS = (
    (re.compile(r"\w"), f"[{WORD}]"),
    (re.compile(r"[^\W\d_]"), f"[{LETTER}]"),
    (re.compile(r"\d"), DIGIT),
    (re.compile(r"\s"), f"[{SPACE}]"),
)


def _disagreeing(chars: list[str]) -> set[str]:
    """The characters on which Python and Arrow disagree (class, case, NFKC)."""
    if not chars:
        return set()
    bad: set[str] = set()
    arr = pa.array(chars)
    for py, re2 in _CHECKS:
        got = pc.match_substring_regex(arr, f"^(?:{re2})$").to_pylist()
        bad.update(c for c, g in zip(chars, got, strict=True) if g != (py.fullmatch(c) is not None))
    lower = pc.utf8_lower(arr).to_pylist()
    nfkc = pc.utf8_normalize(arr, "NFKC").to_pylist()
    # Arrow's whitespace (utf8_split_whitespace) against Python's str.isspace
    split = pc.list_value_length(
        pc.utf8_split_whitespace(pa.array([f"a{c}b" for c in chars]))
    ).to_pylist()
    word, letter, space = _CHECKS[0][0], _CHECKS[1][0], _CHECKS[3][0]
    for c, lo, nf, parts in zip(chars, lower, nfkc, split, strict=True):
        if (
            unicodedata.category(c) == "Cn"  # unassigned in Python's tables
            or c.lower() != lo  # also when the full lower case has 2 characters (İ)
            or c.casefold() != lo
            or unicodedata.normalize("NFKC", c) != nf
            or (parts == 2) != c.isspace()
            # the letter count and the repeated-word check class the lower case of a character
            or (word.match(c) is None) != (word.match(lo) is None)
            or (letter.match(c) is None) != (letter.match(lo) is None)
            or (space.match(c) is None) != (space.match(lo) is None)
        ):
            bad.add(c)
    return bad


#: Per character seen in this process: Python and Arrow agree on it and on its forms.
_agree: dict[str, bool] = {}
#: Per character: Python and Arrow agree on the character itself.
_own: dict[str, bool] = {}


def clear_cache() -> None:
    """Forget the checked characters (a benchmark that times runs from cold caches)."""
    _agree.clear()
    _own.clear()


def _forms(c: str) -> str:
    """The characters the rules classify in place of ``c``: its lower case, case folding and
    NFKC forms (the letters-only form and the deduplication key are made of these)."""
    return c.lower() + c.casefold() + unicodedata.normalize("NFKC", c)


def _bad_chars(chars: set[str]) -> set[str]:
    """The characters of ``chars`` on which Python and Arrow disagree (or on one of its forms)."""
    new = [c for c in chars if c not in _agree]
    if new:
        todo = sorted({d for c in new for d in c + _forms(c)} - _own.keys())
        bad = _disagreeing(todo)
        _own.update((d, d not in bad) for d in todo)
        for c in new:
            _agree[c] = all(_own[d] for d in c + _forms(c))
    return {c for c in chars if not _agree[c]}


def _chars(arr: pa.Array) -> set[str]:
    """The distinct characters of ``arr`` (ASCII always included)."""
    rest = pc.replace_substring_regex(arr, r"[\x00-\x7f]+", "")
    chars = set("".join(x for x in rest.to_pylist() if x))
    chars.update(map(chr, range(0x80)))
    return chars


def _class_of(chars: set[str]) -> str:
    return "[" + "".join(_x(ord(c)) for c in sorted(chars)) + "]"


class Batch:
    """The Arrow side of a batch of distinct texts.

    Attributes:
        texts: the texts.
        exact: per text, whether it holds a character on which Python and Arrow disagree (its
            rules then run in Python, whole).
        n_letters: per text, :func:`.rules.count_letters`.
        letters: per text, :func:`.rules.letters_only`.
    """

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.arr = pa.array(texts, type=pa.string())
        self.exact = self._holding(self.arr, _bad_chars(_chars(self.arr)))
        letters = pc.replace_substring_regex(pc.utf8_lower(self.arr), f"[^{LETTER}]+", "")
        self.letters = letters.to_pylist()
        # lower case keeps a checked character one character and keeps its class
        self.n_letters = pc.utf8_length(letters).to_pylist()

    def _holding(self, arr: pa.Array, bad: set[str]) -> list[bool]:
        if not bad:
            return [False] * len(arr)
        return pc.match_substring_regex(arr, _class_of(bad)).to_pylist()

    def keys(self, which: list[int] | None = None) -> list[str | None]:
        """:func:`.rules.normalize` of the texts ``which`` (indices; default all); None where
        Python must compute it (a character Python and Arrow disagree on, in the text or in its
        NFKC form)."""
        idx = list(range(len(self.texts))) if which is None else which
        if not idx:
            return []
        arr = self.arr.take(pa.array(idx, type=pa.int64())) if which is not None else self.arr
        nfkc = pc.utf8_normalize(arr, "NFKC")
        changed = pc.filter(nfkc, pc.not_equal(nfkc, arr))  # NFKC leaves most texts alone
        exact = self._holding(nfkc, _bad_chars(_chars(changed)))
        words = pc.replace_substring_regex(pc.utf8_lower(nfkc), f"[^{WORD}]+", " ")
        keys = pc.utf8_trim(words, " ").to_pylist()
        return [
            None if bad or self.exact[i] else k for i, k, bad in zip(idx, keys, exact, strict=True)
        ]

    def repeated_candidates(self) -> list[bool]:
        """Per text, whether a word (lower case) is the end of the word before it and the start
        of the word after it, words split on whitespace: what ``\\b(\\w+)(?:\\s+\\1\\b){2,}``
        needs (for a text whose characters Python and Arrow class alike).

        The words are dictionary-encoded, so the leading and trailing runs of word characters are
        computed once per distinct word and the comparisons are integer ones."""
        out = [False] * len(self.texts)
        tokens = pc.utf8_split_whitespace(pc.utf8_lower(self.arr))
        n = len(tokens.values) if hasattr(tokens, "values") else 0
        if n < 3:
            return out
        enc = pc.dictionary_encode(pc.list_flatten(tokens))
        vocab = enc.dictionary
        code = enc.indices.to_numpy(zero_copy_only=False)
        parent = pc.list_parent_indices(tokens).to_numpy(zero_copy_only=False)
        head = pc.index_in(pc.replace_substring_regex(vocab, f"[^{WORD}].*", ""), vocab)
        tail = pc.index_in(pc.replace_substring_regex(vocab, f".*[^{WORD}]", ""), vocab)
        head = pc.fill_null(head, -1).to_numpy(zero_copy_only=False)
        tail = pc.fill_null(tail, -1).to_numpy(zero_copy_only=False)
        empty = pc.utf8_length(vocab).to_numpy(zero_copy_only=False) == 0
        mid = code[1:-1]
        hit = (
            (tail[code[:-2]] == mid)
            & (head[code[2:]] == mid)
            & ~empty[mid]
            & (parent[:-2] == parent[2:])
        )
        for i in np.unique(parent[2:][hit]).tolist():
            out[i] = True
        return out
