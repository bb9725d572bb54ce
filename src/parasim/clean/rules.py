"""Hard rules: what no researcher would call a translation pair, each a named, counted reason.

The rules follow bicleaner-hardrules (Prompsit's pre-filter of the ParaCrawl corpora,
``hardrules.py``) where it has one; where parasim differs it says so. Every rule is switched by
the ``clean.rules`` config section (:class:`RulesSettings`); a pair gets the reason of the first
rule, in :data:`RULE_ORDER`, that rejects it.

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
- ``number_mismatch``: each side holds a number the other lacks (:func:`numbers_differ`):
  "v4.0.24 source code" | "Code source de v4.0.23", "External needs, x-axis position 0 of 5" |
  "… de 0 à 2", "April 11th, 2013" | "4 avril 2013": two different lines aligned, or an outdated
  translation. A number one side writes as a word ("3 lists" | "trois listes"), with other
  grouping ("86,399" | "86 399") or on the other clock ("1:00 pm" | "13h") is the same number;
  a number only one side holds (a dropped "100%") is not a mismatch. parasim's (bicleaner
  learns number agreement in its classifier, not as a hard rule).

Language identification (``wrong_language``, :mod:`.langid`) and deduplication run after these
in :mod:`.stage`.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

from parasim.clean.decision import _DIGITS, _TAG
from parasim.config import Settings, schema_default


@dataclass(frozen=True)
class RulesSettings(Settings, section="clean.rules"):
    """The ``clean.rules`` config section: each rule's switch (false: off) or threshold."""

    empty: bool
    identical: bool
    near_identical: float | bool
    no_letters: bool
    url_email: float | bool
    code_markup: float | bool
    placeholder: bool
    length_ratio: float | bool
    repeated_words: bool
    bad_encoding: bool
    number_mismatch: bool


#: The rules in the order they are checked (a pair gets the first reason): the schema's order.
RULE_ORDER = tuple(f.name for f in fields(RulesSettings))

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


@functools.lru_cache(maxsize=1 << 16)
def count_letters(text: str) -> int:
    """Number of letters in ``text`` (digits, symbols and spaces do not count; cached: the
    no-letters rule and the language check both ask)."""
    return len(_NON_LETTERS.sub("", text))


def clear_caches() -> None:
    """Forget the per-text caches (a benchmark that times several runs in one process)."""
    from . import bulk, decision

    for f in (
        letters_only,
        count_letters,
        normalize,
        _number_forms,
        decision._words,
        decision._numbers,
    ):
        f.cache_clear()
    bulk.clear_cache()


def _visible(text: str) -> int:
    """Number of non-space characters of ``text``."""
    return len("".join(text.split()))


@functools.lru_cache(maxsize=1 << 16)
def normalize(text: str) -> str:
    """The deduplication key of a side: NFKC, case folded, words (letters, digits) joined by one
    space; punctuation, symbols and spacing do not count."""
    return " ".join(_WORD.findall(unicodedata.normalize("NFKC", text).casefold()))


def _near(la: str, lb: str, threshold: float) -> bool:
    """Whether the Indel similarity (difflib's ratio, computed by rapidfuzz) of two
    letters-only forms is at least ``threshold``."""
    from rapidfuzz.fuzz import ratio

    if not la or not lb:
        return la == lb
    return ratio(la, lb, score_cutoff=100 * threshold) > 0


def _covers(pattern: re.Pattern, text: str, share: float) -> bool:
    """Whether matches of ``pattern`` cover at least ``share`` of the non-space characters of
    ``text`` (stops at the first match that reaches it)."""
    need = share * _visible(text)
    covered = 0
    for m in pattern.finditer(text):
        covered += _visible(m.group())
        if covered >= need:
            return covered > 0
    return False


def _url_email(text: str, share: float) -> bool:
    """Whether URL and e-mail tokens cover at least ``share`` of the non-space characters."""
    if _URL_HINT.search(text) is None:
        return False
    tokens = text.split()
    covered = sum(len(t) for t in tokens if _URL_TOKEN.match(t))
    return covered > 0 and covered >= share * sum(len(t) for t in tokens)


def _code_markup(text: str, share: float) -> bool:
    """Whether code and markup (:data:`_CODE`) cover at least ``share`` of the non-space
    characters of ``text``."""
    if _CODE_HINT.search(text) is None:
        return False
    return _covers(_CODE, text, share)


def _no_letters(text: str, alpha: int | None = None) -> bool:
    """At most 10 % letters, or at least 50 % digits (``alpha``: the letter count, if known)."""
    n = len(text)
    if not n:
        return True
    if alpha is None:
        alpha = count_letters(text)
    if alpha / n <= 0.1:
        return True
    if 2 * alpha > n:  # letters and digits are disjoint: fewer than half can be digits
        return False
    return len(_NON_DIGITS.sub("", text)) / n >= 0.5


# digits grouped by thousands: 86,399 / 86 399 / 4.294.967.295 (a non-breaking or thin space too)
_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:[,.\u00a0\u202f\u2009 ]\d{3})+(?![\d])")
_GROUP_SEP = re.compile(r"[,.\u00a0\u202f\u2009 ]")
# 8 a.m., 1:30 pm, 7:00am: the 12-hour clock
_CLOCK_12 = re.compile(r"\b(\d{1,2})(?:[:.h](\d{2}))?\s*([ap])\.?\s?m\b\.?", re.IGNORECASE)
# 13h, 13 h 30, 21:00: the 24-hour clock
_CLOCK_24 = re.compile(r"\b(\d{1,2})\s?(?:h|:)\s?(\d{2})?\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
#: Number words of English, French and Spanish, 0-12: "three" = "trois" = "3".
_NUMBER_WORDS = {
    w: str(n)
    for n, ws in enumerate(
        [
            "zero zéro cero",
            "one un une uno una",
            "two deux dos",
            "three trois tres",
            "four quatre cuatro",
            "five cinq cinco",
            "six seis",
            "seven sept siete",
            "eight huit ocho",
            "nine neuf nueve",
            "ten dix diez",
            "eleven onze once",
            "twelve douze doce",
        ]
    )
    for w in ws.split()
}


def _clock(hour: int, minute: str | None) -> str:
    return f"{hour:02d}:{int(minute or 0):02d}"


@functools.lru_cache(maxsize=1 << 16)
def _number_forms(text: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """The numbers of ``text`` (markup left out) in two readings, and its number words:

    - runs of digits (thousands groups joined, leading zeros dropped);
    - the same with times of day read on the 24-hour clock first (``1:30 pm`` and ``13h30``
      are both ``13:30``);
    - the numbers its number words name (``three``, ``trois``: ``3``).
    """
    t = _TAG.sub(" ", text)
    t = _GROUPED.sub(lambda m: _GROUP_SEP.sub("", m.group()), t)
    plain = frozenset(str(int(d)) for d in _DIGITS.findall(t))
    times: list[str] = []

    def twelve(m: re.Match) -> str:
        hour = int(m.group(1))
        if hour > 12:
            return m.group()
        times.append(_clock(hour % 12 + (12 if m.group(3).lower() == "p" else 0), m.group(2)))
        return " "

    def twenty_four(m: re.Match) -> str:
        hour = int(m.group(1))
        if hour > 24:
            return m.group()
        times.append(_clock(hour, m.group(2)))
        return " "

    rest = _CLOCK_24.sub(twenty_four, _CLOCK_12.sub(twelve, t))
    timed = frozenset([*times, *(str(int(d)) for d in _DIGITS.findall(rest))])
    words = frozenset(_NUMBER_WORDS[w] for w in _WORD.findall(t.lower()) if w in _NUMBER_WORDS)
    return plain, timed, words


def numbers_differ(a: str, b: str) -> bool:
    """Whether each of two texts holds a number the other lacks, read as runs of digits and
    again with times of day on the 24-hour clock (both readings must differ), a number the other
    side writes as a word counting as held."""
    if _DIGIT.search(a) is None or _DIGIT.search(b) is None:  # no number on a side: no mismatch
        return False
    plain_a, timed_a, words_a = _number_forms(a)
    plain_b, timed_b, words_b = _number_forms(b)
    # x - y - words_b: the numbers of a that b lacks, in digits and in words
    return all(
        x != y and bool(x - y - words_b) and bool(y - x - words_a)
        for x, y in ((plain_a, plain_b), (timed_a, timed_b))
    )


def _ratio(a: str, b: str, r: float) -> bool:
    la, lb = len(a), len(b)
    if not la or not lb:
        return True
    return not (1 / r <= la / lb <= r)


def compile_placeholders(patterns: Sequence[str]) -> re.Pattern:
    """One case-insensitive pattern of the placeholder expressions (an error names a bad one)."""
    for p in patterns:
        try:
            re.compile(p)
        except re.error as err:
            raise ValueError(
                f"clean.placeholders: {p!r} is not a regular expression ({err})"
            ) from None
    return re.compile("|".join(f"(?:{p})" for p in patterns) or r"(?!)", re.IGNORECASE)


class Checker:
    """``checker(en, other) -> reason or None``: the switched-on rules, in :data:`RULE_ORDER`.

    The side rules of a text are computed once (page furniture repeats the same lines);
    :meth:`prepare` computes them for many texts at once (:mod:`.bulk`), with the same verdicts.

    Args:
        rules: the ``clean.rules`` settings (a mapping: the section as in the config, keys left
            out take the schema's defaults).
        placeholders: placeholder expressions (None: the schema's ``clean.placeholders``).
    """

    def __init__(
        self,
        rules: RulesSettings | Mapping[str, Any] | None = None,
        placeholders: Sequence[str] | None = None,
    ) -> None:
        cfg = asdict(RulesSettings.from_config(rules))
        if placeholders is None:
            placeholders = schema_default("clean.placeholders")
        ph = compile_placeholders(placeholders)
        #: The expression each side rule searches first (a text it finds nothing in passes).
        self._hint_of: dict[str, re.Pattern] = {
            "url_email": _URL_HINT,
            "code_markup": _CODE_HINT,
            "placeholder": ph,
            "bad_encoding": _MOJIBAKE,
        }
        on = {k: v for k, v in cfg.items() if v is not False and v is not None}
        side_tests: dict[str, Callable[[str], bool]] = {
            "no_letters": lambda s: _no_letters(s, self.count_letters(s)),
            "url_email": functools.partial(_url_email, share=float(on.get("url_email", 1))),
            "code_markup": functools.partial(_code_markup, share=float(on.get("code_markup", 1))),
            "placeholder": lambda s: ph.search(s) is not None,
            "repeated_words": lambda s: _REPEATED.search(s) is not None,
            "bad_encoding": lambda s: _MOJIBAKE.search(s) is not None,
        }
        pair_tests: dict[str, Callable[[str, str], bool]] = {
            "identical": lambda a, b: self.letters(a) == self.letters(b),
            "near_identical": lambda a, b: _near(
                self.letters(a), self.letters(b), float(on["near_identical"])
            ),
            "length_ratio": lambda a, b: _ratio(a, b, float(on["length_ratio"])),
            "number_mismatch": numbers_differ,
        }
        self._side_test_of = {n: t for n, t in side_tests.items() if n in on}
        self._pair_test_of = {n: t for n, t in pair_tests.items() if n in on}
        self.order = [name for name in RULE_ORDER if name in on]
        pos = {name: k for k, name in enumerate(self.order)}
        self._side_tests = [(pos[n], side_tests[n]) for n in self.order if n in side_tests]
        self._side_names = [n for n in self.order if n in side_tests]
        self._pair_tests = [pair_tests.get(n) for n in self.order]
        self._empty = pos.get("empty", -1)
        self._never = len(self.order)
        self._side: dict[str, int] = {}
        self._letters: dict[str, str] = {}
        self._count: dict[str, int] = {}
        self._batch: Any = None
        self._batch_pos: dict[str, int] = {}
        self._masks: dict[str, list[bool] | None] = {}

    def letters(self, text: str) -> str:
        """:func:`letters_only` of ``text`` (from :meth:`prepare` when it saw the text)."""
        x = self._letters.get(text)
        return letters_only(text) if x is None else x

    def count_letters(self, text: str) -> int:
        """:func:`count_letters` of ``text`` (from :meth:`prepare` when it saw the text)."""
        x = self._count.get(text)
        return count_letters(text) if x is None else x

    def prepare(self, texts: Iterable[str]) -> None:
        """Judge the side rules of ``texts`` at once: Arrow's kernels compute the letter counts
        and letters-only forms and pre-filter the expressions (:mod:`.bulk`); the Python rules
        run on the texts the pre-filters let through."""
        from . import bulk

        todo = [t for t in dict.fromkeys(texts) if t not in self._side]
        if not todo:
            return
        b = self._batch = bulk.Batch(todo)
        self._batch_pos = {t: i for i, t in enumerate(todo)}
        masks: dict[str, list[bool] | None] = {
            name: bulk.candidates(b.arr, self._hint_of[name])
            for name in self._side_names
            if name in self._hint_of
        }
        if "repeated_words" in self._side_names:
            masks["repeated_words"] = b.repeated_candidates()
        self._masks = masks
        tests = [
            (k, masks.get(name), test)
            for (k, test), name in zip(self._side_tests, self._side_names, strict=True)
        ]
        side = self._side
        for i, text in enumerate(todo):
            if b.exact[i]:
                side[text] = self._first_side_failure(text)
                continue
            self._letters[text] = b.letters[i]
            self._count[text] = b.n_letters[i]
            if not text.strip():
                side[text] = self._empty
                continue
            side[text] = next(
                (k for k, mask, test in tests if (mask is None or mask[i]) and test(text)),
                self._never,
            )

    def dedup_keys(self, texts: Iterable[str]) -> dict[str, str]:
        """:func:`normalize` of those of ``texts`` that :meth:`prepare` saw and Arrow can
        compute (the caller computes the rest)."""
        if self._batch is None:
            return {}
        pos = self._batch_pos
        which = sorted({pos[t] for t in texts if t in pos})
        keys = self._batch.keys(which)
        return {self._batch.texts[i]: k for i, k in zip(which, keys, strict=True) if k is not None}

    def side(self, text: str) -> int:
        """Position in ``order`` of the first side rule ``text`` fails; ``len(order)`` when it
        fails none, -1 for an empty side when the ``empty`` rule is off."""
        k = self._side.get(text)
        if k is None:
            k = self._side[text] = self._first_side_failure(text)
        return k

    def _first_side_failure(self, text: str) -> int:
        if not text.strip():
            return self._empty
        for k, test in self._side_tests:
            if test(text):
                return k
        return self._never

    def reasons(self, en: str, other: str) -> list[str]:
        """Every switched-on rule the pair fails, in :data:`RULE_ORDER` (``__call__`` gives the
        first; the decision of :mod:`.decision` needs them all to overrule a pair)."""
        if not en.strip() or not other.strip():
            return ["empty"]
        first = {t: self.side(t) for t in (en, other)}  # cached: the rules before it pass
        out = []
        for k, name in enumerate(self.order):
            pair = self._pair_test_of.get(name)
            if pair is not None:
                if pair(en, other):
                    out.append(name)
                continue
            side = self._side_test_of.get(name)
            if side is not None and any(
                first[t] == k or (first[t] < k and self._may_fail(name, t) and side(t))
                for t in (en, other)
            ):
                out.append(name)
        return out

    def _may_fail(self, name: str, text: str) -> bool:
        """False when :meth:`prepare`'s pre-filter for side rule ``name`` let ``text`` pass."""
        mask = self._masks.get(name)
        i = self._batch_pos.get(text)
        return mask is None or i is None or self._batch.exact[i] or bool(mask[i])

    def __call__(self, en: str, other: str) -> str | None:
        first = min(self.side(en), self.side(other))
        if first < 0:
            return "empty"  # an empty side fails every comparison; never kept
        for k in range(first):
            test = self._pair_tests[k]
            if test is not None and test(en, other):
                return self.order[k]
        return self.order[first] if first < self._never else None


def make_checker(
    rules: RulesSettings | Mapping[str, Any] | None = None,
    placeholders: Sequence[str] | None = None,
) -> Checker:
    """A :class:`Checker`: ``(en, other) -> reason or None`` applying the switched-on rules in
    order (``rules``: the ``clean.rules`` settings; ``placeholders``: placeholder expressions)."""
    return Checker(rules, placeholders)
