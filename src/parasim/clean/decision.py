"""One decision per pair: the translation itself as evidence against a rule's veto (issue 33).

The hard rules (:mod:`.rules`) and the language check (:mod:`.langid`) each look at one side, or
at the two sides' surface: a short line heliport misreads ("Apache Module mod_x" read as
Catalan), a line full of names ("Excellence in Public Service Delivery Government Technology
Exhibition"), a translated HTML example ("Cliquez <a href=…>ici</a>…") or two short lines that
differ in a few letters ("Scenario" / "Scénario") are vetoed although they translate each other.
The pipeline already holds stronger evidence: the other side's machine translation into English.
A copy of English text gains nothing from translation (the translator leaves English as it is),
a real translation does. So a pair is kept over the rules named in ``overrule`` when

- ``mt`` (the word cosine of the English side with the other side's translation) is at least
  ``min_mt_similarity``: the translation says the same as the English side;
- the other side is in the language it is declared in, by what the translator did to it:
  either the gain ``(mt - raw) / (1 - raw)`` (``raw``: the cosine of the English side with the
  untranslated other side; the gain is the share of the distance to a perfect match that
  translation closed) is at least ``min_gain``, or the words of the other side that the English
  side lacks were mostly changed by the translator (a share of at least ``min_changed_share``
  of them, holding at least ``min_changed_letters`` letters), on a pair whose untranslated sides
  are not already alike (``raw`` at most ``max_copy_similarity``: above, the other side is
  mostly a copy of the English one with a few words added, "Project documentations and design
  decision" | "Project documentations and design decision (en anglais)", and only the gain
  counts). A copy of English text gains
  nothing from translation and has nothing changed (the translator leaves English words as they
  are; a short English word that is also a French or Spanish word, "a", "on", "no", is too few
  letters), nor do names, numbers and code shared by both sides. The second test is for a
  rule-based translator such as Apertium, whose English often misses the reference's words
  ("Predeterminado" gives "Predetermined", not "Default") although the line is Spanish;
- both sides hold the same numbers (runs of digits, outside markup): a pair whose numbers differ
  ("Number of commits: 35" | "Nombre des « commits » 25") is two different lines aligned;
- with ``page_check``: on a page pair the pair stage measured untranslated, heliport does not
  put the line itself (alone, confidently) in the wrong language, unless a translated template
  (below) vouches for it: heliport reads "Code source : Lib/poplib.py" as English, the same
  reordering on 36 other lines of the site says it is the French template;
- with ``one_to_one_only``: the pair is one line on each side. The evidence of an n:m link is its
  lines' together, while a flag may concern one of them: a translated title merged with the
  English paragraph after it ("Format Strings Format strings describe…" | "Chaînes de
  spécification du format Format strings describe…") has its French words changed by the
  translator and matches the English side well, yet is mostly a copy. On the python-docs site
  every overruled n:m link was such a mix, and every overruled 1:1 pair a real translation.

A repeated swap is evidence too (``min_template_lines``): a line whose sides differ by the same
words as at least that many other distinct English lines of the site ("Kivi Shapiro
(@jkshapiro): 2 commits" | "… : 2 contributions", "Date modified: 2017-08-15" | "Date de
modification : 2017-08-15") is a translated template, even where its one translated word is
also English ("contributions") or too short for the changed-words test. It still needs ``mt``
at least ``min_mt_similarity`` and the same numbers, and the words both sides share (the
template's names) must mostly survive translation (a share of at least
``min_template_shared``): on "Misc NetFront 3.4 Appareils intégrés" | "Divers NetFront 3.4
Appareils intégrés" the shared words are French, the translator changes them, and the swap
"misc" | "divers" does not make the English side English. 1:1 links only. Where both sides hold
the same words in another order, the swap is the reordered stretch ("Source code: Lib/os.py" |
"Code source : Lib/os.py": "source code" | "code source", which Apertium leaves as "Code
Source"), repeated the same way on as many lines.

An HTML or code example is evidence of its own (``min_markup_skeleton``): where both sides hold
at least ``min_markup_tags`` elements (opening tags), the same tags in the same order (tag
names, a sequence ratio of at least ``min_markup_skeleton``: the same example, whatever its
attributes), and the translator changed the prose between them as the changed-words test above
asks (``min_changed_share``, ``min_changed_letters``, ``max_copy_similarity``), the pair is the
example translated ("<figcaption> <p>Looking for a Job</p> </figcaption>" | "<figcaption>
<p>Trouver un emploi</p> </figcaption>", which Apertium gives as "Find a work"). It needs no
``mt`` floor: the few words of an example are where a rule-based translator does worst
("Section qui glisse vers l'intérieur" gives "Section that slips to the interior" for "Section
that slides in"), while the markup says which example it is. It overrules only ``code_markup``,
``url_email`` and ``near_identical`` (flags of the pair's surface), never the language check;
links of as many lines on each side only (1:1, or 2:2 where a heading and its example are linked
together: "View code <section…> <h4>Image gallery</h4> …" | "Visualiser le code <section…>
<h4>Galerie d'images</h4> …"), and the numbers must agree.

Cosines are binary (each word type once, as the align stage's default ``weighting: binary``), on
lower-cased ``\\w+`` tokens, with HTML tags and tokens of digits only left out (a number or a
tag in both sides is not a translation). Only pairs a rule flagged are scored. Every overruled
pair keeps the list of what it overruled (the positives' ``overruled`` column): the markup of an
HTML example is kept as it is, not stripped, and is found by that flag.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from parasim.config import Settings

__all__ = [
    "DecisionSettings", "Evidence", "MARKUP_FLAGS", "markup_skeleton", "markup_vouches",
    "similarities", "swap", "template_counts", "template_vouches", "translated",
]  # fmt: skip

_TAG = re.compile(r"</?[A-Za-z][^<>]*>")
_TOKEN = re.compile(r"\w+")
_DIGITS = re.compile(r"\d+")
_TAG_NAME = re.compile(r"<(/?[A-Za-z][\w-]*)")

#: the flags a pair's markup evidence may overrule (its surface, not its language)
MARKUP_FLAGS = frozenset({"code_markup", "url_email", "near_identical"})


@dataclass(frozen=True)
class DecisionSettings(Settings, section="clean.decision"):
    """The ``clean.decision`` config section (what each key means: the schema)."""

    enabled: bool
    overrule: tuple[str, ...]
    min_mt_similarity: float
    min_gain: float
    min_changed_share: float
    min_changed_letters: int
    max_copy_similarity: float
    page_check: bool
    one_to_one_only: bool
    min_template_lines: int
    min_template_shared: float
    min_markup_skeleton: float
    min_markup_tags: int


def _sequence(text: str | None) -> tuple[str, ...]:
    """The lower-cased ``\\w+`` tokens of ``text`` in their order, repeats kept, HTML tags and
    tokens of digits only left out."""
    if not text:
        return ()
    return tuple(w for w in _TOKEN.findall(_TAG.sub(" ", text).lower()) if not w.isdigit())


@functools.lru_cache(maxsize=1 << 16)
def _words(text: str | None) -> frozenset[str]:
    """The distinct tokens of :func:`_sequence`."""
    return frozenset(_sequence(text))


@functools.lru_cache(maxsize=1 << 16)
def _numbers(text: str | None) -> frozenset[str]:
    """The numbers of ``text`` (runs of digits, markup left out)."""
    return frozenset(_DIGITS.findall(_TAG.sub(" ", text or "")))


def _cos(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    return len(a & b) / math.sqrt(len(a) * len(b))


@dataclass(frozen=True)
class Evidence:
    """What the decision reads of one pair (module docstring): the ``mt`` and ``raw`` word
    cosines, and of the other side's words that the English side lacks, how many there are
    (``own``), how many of them the translator changed (``changed``) and their letters."""

    mt: float
    raw: float
    own: int = 0
    changed: int = 0
    changed_letters: int = 0
    numbers_match: bool = True

    @property
    def gain(self) -> float:
        """The share of the distance between ``raw`` and a perfect match that translating the
        other side closed (0 when ``raw`` is 1 or translation made it worse)."""
        if self.raw >= 1.0:
            return 0.0
        return max(0.0, (self.mt - self.raw) / (1.0 - self.raw))

    @property
    def changed_share(self) -> float:
        """Share of the other side's own words (not in the English side) the translator changed."""
        return self.changed / self.own if self.own else 0.0


def similarities(en: str, other: str, other_en: str | None) -> Evidence:
    """The pair's :class:`Evidence` (``other_en`` None: no translation, so ``mt = raw`` and
    nothing changed)."""
    e, o = _words(en), _words(other)
    raw = _cos(e, o)
    same_numbers = _numbers(en) == _numbers(other)
    if other_en is None:
        return Evidence(round(raw, 6), round(raw, 6), numbers_match=same_numbers)
    t = _words(other_en)
    own = o - e
    changed = own - t
    return Evidence(
        round(_cos(e, t), 6),
        round(raw, 6),
        len(own),
        len(changed),
        sum(len(w) for w in changed),
        same_numbers,
    )


def translated(ev: Evidence, s: DecisionSettings) -> bool:
    """Whether the evidence says the pair is a translation (thresholds of ``s``)."""
    if ev.mt < s.min_mt_similarity or not ev.numbers_match:
        return False
    return ev.gain >= s.min_gain or _changed(ev, s)


def _changed(ev: Evidence, s: DecisionSettings) -> bool:
    """The changed-words test (module docstring): the translator changed most of the other
    side's own words, on a pair whose untranslated sides are not already alike."""
    return (
        ev.raw <= s.max_copy_similarity
        and ev.changed_share >= s.min_changed_share
        and ev.changed_letters >= s.min_changed_letters
    )


def swap(en: str | None, other: str | None) -> tuple | None:
    """The words only the English side holds and those only the other side holds (the
    :func:`similarities` words); where both sides hold the same words in another order, the
    stretch of words between their common beginning and end on each side ("source code" |
    "code source"); None when neither is there."""
    e, o = _words(en), _words(other)
    a, b = e - o, o - e
    if a and b:
        return (a, b)
    if a or b or not e:
        return None
    x, y = _sequence(en), _sequence(other)
    if x == y:
        return None
    i = 0
    while i < min(len(x), len(y)) and x[i] == y[i]:
        i += 1
    j = 0
    while j < min(len(x), len(y)) - i and x[-1 - j] == y[-1 - j]:
        j += 1
    return (x[i : len(x) - j], y[i : len(y) - j])


def template_counts(en_texts: Iterable[str], other_texts: Iterable[str]) -> Counter:
    """For each :func:`swap` of the pairs, the number of distinct English texts that show it."""
    seen: dict[tuple, set[str]] = defaultdict(set)
    for en, other in set(zip(en_texts, other_texts, strict=True)):  # each distinct pair once
        sw = swap(en, other) if en != other else None
        if sw is not None:
            seen[sw].add(en)
    return Counter({k: len(v) for k, v in seen.items()})


def template_vouches(
    en: str,
    other: str,
    other_en: str | None,
    counts: Mapping,
    s: DecisionSettings,
    ev: Evidence | None = None,
) -> bool:
    """Whether a pair is a translated template (module docstring): its swap shown by at least
    ``min_template_lines`` English texts of ``counts``, ``mt`` and the numbers as for any
    overrule, and the shared words kept by the translator (a share of at least
    ``min_template_shared``). ``ev``: the pair's :func:`similarities`, when already made."""
    if s.min_template_lines <= 0 or other_en is None:
        return False
    sw = swap(en, other)
    if sw is None or counts.get(sw, 0) < s.min_template_lines:
        return False
    ev = ev or similarities(en, other, other_en)
    if ev.mt < s.min_mt_similarity or not ev.numbers_match:
        return False
    shared = _words(en) & _words(other)
    return not shared or len(shared & _words(other_en)) / len(shared) >= s.min_template_shared


@functools.lru_cache(maxsize=1 << 14)
def markup_skeleton(text: str | None) -> tuple[str, ...]:
    """The tag names of ``text`` in order, lower-cased, closing tags with their ``/``."""
    return tuple(m.lower() for m in _TAG_NAME.findall(text or ""))


def markup_vouches(en: str, other: str, ev: Evidence, s: DecisionSettings) -> bool:
    """Whether a pair is an HTML or code example whose prose is translated (module docstring):
    the same tags in the same order on both sides, the same numbers, and the other side's own
    words changed by the translator. ``ev``: the pair's :func:`similarities`."""
    if s.min_markup_skeleton <= 0 or not ev.numbers_match:
        return False
    a, b = markup_skeleton(en), markup_skeleton(other)
    if min(sum(not x.startswith("/") for x in tags) for tags in (a, b)) < max(s.min_markup_tags, 1):
        return False
    if not _changed(ev, s):
        return False
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio() >= s.min_markup_skeleton
