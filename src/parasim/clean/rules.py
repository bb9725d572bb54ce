"""Hard rules: what no researcher would call a translation pair, each a named, counted reason.

The rules follow bicleaner-hardrules (Prompsit's pre-filter of the ParaCrawl corpora,
``hardrules.py``) where it has one; where parasim differs it says so. Every rule is switched by
the ``clean.rules`` config section (:data:`DEFAULT_RULES`, mirrored in the config schema); a pair
gets the reason of the first rule, in :data:`RULE_ORDER`, that rejects it.

Reasons, what each rejects, and how it relates to bicleaner:

- ``empty``: a side with no text (``no_empty``).
- ``identical``: sides equal after case folding, letters only (``"v4.0 - OK"`` = ``"V4.1 ok"``);
  bicleaner's ``no_identical``, same definition.
- ``near_identical``: letters-only forms whose similarity (difflib's ratio) is at least
  ``near_identical`` (0.95): a copy with a few letters changed ("commit" / "commits"). parasim's;
  word order counts, so "Source code" / "Code source" stays.
- ``no_letters``: a side of numbers, symbols, punctuation: at most 10 % letters, or at least 50 %
  digits (``no_only_symbols`` + ``no_only_numbers``, same thresholds).
- ``url_email``: a side whose URL and e-mail tokens cover at least ``url_email`` of its
  characters. bicleaner's ``no_urls`` drops any URL (off by default there); parasim keeps a
  sentence that mentions one.
- ``code_markup``: a side whose code covers at least ``code_markup`` of its characters: HTML/XML
  tags and attributes, JSON keys, braces, ``[[templates]]``, JS/CSS syntax, hex hashes of 7+
  digits, file paths with an extension. bicleaner's ``no_paren`` / ``no_literals`` cover a part;
  a sentence that mentions ``<li>`` is prose, not code.
- ``placeholder``: Lorem ipsum and "needs translation" markers (``placeholders``, regular
  expressions); bicleaner's ``no_literals`` is a fixed list.
- ``length_ratio``: character lengths whose ratio is outside [1/r, r], r = ``length_ratio``
  (bicleaner's rule and default, 3.0).
- ``repeated_words``: the same word three or more times in a row. bicleaner's
  ``no_repeated_words`` rejects one repeat, which French needs ("nous nous").
- ``bad_encoding``: mojibake (``Ã©``, ``â€™``, U+FFFD); bicleaner's ``no_bad_encoding`` looks for
  ``Ã``/``Â`` outside Portuguese/French.

Language identification (``wrong_language``, :mod:`.langid`) and deduplication run after these
in :mod:`.stage`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

#: Rule switches and thresholds (the ``clean.rules`` config section; false turns a rule off).
DEFAULT_RULES: dict[str, Any] = {
    "empty": True,
    "identical": True,
    "near_identical": 0.95,
    "no_letters": True,
    "url_email": 0.5,
    "code_markup": 0.2,
    "placeholder": True,
    "length_ratio": 3.0,
    "repeated_words": True,
    "bad_encoding": True,
}
RULE_ORDER = tuple(DEFAULT_RULES)

#: Placeholder text (case-insensitive regular expressions), the ``clean.placeholders`` default.
DEFAULT_PLACEHOLDERS: list[str] = [
    r"\blorem ipsum\b",
    r"\bdolor sit amet\b",
    r"\bconsectetur adipiscing\b",
    r"\bneeds? translation\b",
    r"\btranslation (?:needed|required|pending)\b",
    r"\bto be translated\b",
    r"\btraduction (?:requise|à venir|nécessaire)\b",
    r"\bà traduire\b",
    r"\btraducción pendiente\b",
    r"\bpor traducir\b",
]

_WORD = re.compile(r"\w+")
_URL_TOKEN = re.compile(
    r"^[(\[<\"'«]*(?:(?:https?|ftp)://|www\.|mailto:)"  # a URL with a scheme or www.
    r"|^[\w.+-]+@[\w-]+(?:\.[\w-]+)+"  # an e-mail address
    r"|^[\w-]+(?:\.[\w-]+)*\.(?:com|org|net|gov|edu|ca|fr|es|io)/",  # host/path
    re.IGNORECASE,
)
_URL_HINT = re.compile(r"://|www\.|mailto:|@|\.(?:com|org|net|gov|edu|ca|fr|es|io)/", re.IGNORECASE)
_EXT = r"(?:js|mjs|css|scss|less|html?|json|xml|php|hbs|md|txt|py|sh|ya?ml|png|jpe?g|gif|svg|zip)"
# Alternatives are anchored on a rare character (``<``, ``=``, ``(``, ``/``) rather than on a
# leading word, so that a search does not restart a word match at every position.
_CODE = re.compile(
    r"</?[A-Za-z][\w:-]*(?:\s[^<>]*)?/?>"  # HTML/XML tags
    r"|(?<=[\w-])=(?:\"[^\"]*\"|'[^']*')"  # attribute values: class="x"
    r"|\"[\w@$.-]+\"\s*:"  # JSON keys
    r"|[{}]|\[\[|\]\]"  # braces, [[templates]]
    r"|\$\(|=>|===|!==|&&|\|\||::"  # JS operators, jQuery
    r"|\bfunction\s*\(|\b(?:var|const)\s+\w+\s*="  # JS declarations
    r"|(?<=\w)\.\w+\([^()]*\)"  # method calls: a.b(...)
    r"|(?<=\w)\(\)"  # empty calls: init()
    r"|(?<=[\w-]):[ \t]*[^\s;:]+[ \t]*;"  # CSS declarations: color: red;
    r"|\b(?=[0-9a-f]{0,63}\d)(?=[0-9a-f]{0,63}[a-f])[0-9a-f]{7,64}\b"  # hex hashes
    rf"|(?<=[\w.-])/[\w./-]*\.{_EXT}\b",  # file paths with an extension
)
#: Every alternative of :data:`_CODE` needs one of these: a cheap test that skips prose.
_CODE_HINT = re.compile(
    r"[<>={}\[\]$&|;\"]|\(\)|::|\.\w+\(|/[\w./-]*\.\w|[0-9a-f]{7}|\bfunction\s*\("
)
_MOJIBAKE = re.compile(r"Ã[\x80-\xbf]|Â[\x80-\xbf]|â€|\ufffd")
_REPEATED = re.compile(r"\b(\w+)(?:\s+\1\b){2,}", re.IGNORECASE)


_NON_LETTERS = re.compile(r"[\W\d_]+")
_NON_DIGITS = re.compile(r"\D+")
_SPACES = re.compile(r"\s+")


@functools.lru_cache(maxsize=1 << 16)
def letters_only(text: str) -> str:
    """Case-folded letters of ``text`` (bicleaner's ``no_identical`` normal form)."""
    return _NON_LETTERS.sub("", text.casefold())


def count_letters(text: str) -> int:
    """Number of letters in ``text`` (digits, symbols and spaces do not count)."""
    return len(_NON_LETTERS.sub("", text))


def _visible(text: str) -> int:
    return len(_SPACES.sub("", text))


def normalize(text: str) -> str:
    """The deduplication key of a side: NFKC, case folded, words (letters, digits) joined by one
    space; punctuation, symbols and spacing do not count."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def _near(a: str, b: str, threshold: float) -> bool:
    """Whether the Indel similarity (difflib's ratio, computed by rapidfuzz) of the two
    letters-only forms is at least ``threshold``."""
    from rapidfuzz.fuzz import ratio

    la, lb = letters_only(a), letters_only(b)
    if not la or not lb:
        return la == lb
    return ratio(la, lb, score_cutoff=100 * threshold) > 0


def _share(pattern: re.Pattern, text: str) -> float:
    """Share of the non-space characters of ``text`` inside matches of ``pattern``."""
    if pattern.search(text) is None:
        return 0.0
    chars = _visible(text)
    covered = sum(_visible(m.group()) for m in pattern.finditer(text))
    return covered / chars if chars else 0.0


def _url_share(text: str) -> float:
    """Share of the non-space characters of ``text`` in URL and e-mail tokens."""
    if _URL_HINT.search(text) is None:
        return 0.0
    tokens = text.split()
    covered = sum(len(t) for t in tokens if _URL_TOKEN.match(t))
    return covered / sum(len(t) for t in tokens) if covered else 0.0


def _code_share(text: str) -> float:
    """Share of the non-space characters of ``text`` in code and markup (:data:`_CODE`)."""
    if _CODE_HINT.search(text) is None:
        return 0.0
    return _share(_CODE, text)


def _no_letters(text: str) -> bool:
    n = len(text)
    if not n:
        return True
    alpha = count_letters(text)
    digits = len(_NON_DIGITS.sub("", text))
    return alpha / n <= 0.1 or digits / n >= 0.5


def _ratio(a: str, b: str, r: float) -> bool:
    la, lb = len(a), len(b)
    if not la or not lb:
        return True
    return not (1 / r <= la / lb <= r)


def compile_placeholders(patterns: list[str]) -> re.Pattern:
    """One case-insensitive pattern of the placeholder expressions (an error names a bad one)."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as err:
            raise ValueError(
                f"clean.placeholders: {p!r} is not a regular expression ({err})"
            ) from None
    return re.compile("|".join(f"(?:{p})" for p in patterns) or r"(?!)", re.IGNORECASE)


def make_checker(
    rules: Mapping[str, Any] | None = None, placeholders: list[str] | None = None
) -> Callable[[str, str], str | None]:
    """A function ``(en, other) -> reason or None`` applying the switched-on rules in order.

    Args:
        rules: the ``clean.rules`` section (missing keys take :data:`DEFAULT_RULES`).
        placeholders: placeholder expressions (default :data:`DEFAULT_PLACEHOLDERS`).
    """
    cfg = {**DEFAULT_RULES, **(rules or {})}
    unknown = set(cfg) - set(DEFAULT_RULES)
    if unknown:
        raise ValueError(f"clean.rules: unknown rule(s) {sorted(unknown)}; known: {RULE_ORDER}")
    ph = compile_placeholders(DEFAULT_PLACEHOLDERS if placeholders is None else placeholders)
    on = {name: value for name, value in cfg.items() if value is not False and value is not None}

    side_tests: dict[str, Callable[[str], bool]] = {
        "no_letters": _no_letters,
        "url_email": lambda s: _url_share(s) >= float(on["url_email"]),
        "code_markup": lambda s: _code_share(s) >= float(on["code_markup"]),
        "placeholder": lambda s: ph.search(s) is not None,
        "repeated_words": lambda s: _REPEATED.search(s) is not None,
        "bad_encoding": lambda s: _MOJIBAKE.search(s) is not None,
    }
    pair_tests: dict[str, Callable[[str, str], bool]] = {
        "identical": lambda a, b: letters_only(a) == letters_only(b),
        "near_identical": lambda a, b: _near(a, b, float(on["near_identical"])),
        "length_ratio": lambda a, b: _ratio(a, b, float(on["length_ratio"])),
    }
    order = [name for name in RULE_ORDER if name in on]
    active_side = [name for name in order if name in side_tests]

    pos = {name: k for k, name in enumerate(order)}
    never = len(order)

    @functools.lru_cache(maxsize=1 << 16)
    def first_side_failure(text: str) -> int:
        """Position in ``order`` of the first side rule ``text`` fails (cached: page furniture
        repeats the same lines); ``len(order)`` when it fails none."""
        if not text.strip():
            return pos.get("empty", -1)
        for name in active_side:
            if side_tests[name](text):
                return pos[name]
        return never

    def check(en: str, other: str) -> str | None:
        first = min(first_side_failure(en), first_side_failure(other))
        if first < 0:
            return "empty"  # an empty side fails every comparison; never kept
        for name in order[:first]:
            if name in pair_tests and pair_tests[name](en, other):
                return name
        return order[first] if first < never else None

    return check
