"""Line- and page-level language identification with heliport (HeLI-OTS, 220 languages, offline).

heliport names languages with ISO 639-3 codes and says ``und`` (undetermined) when its confidence
is under the per-language threshold it ships with. parasim's configs use ISO 639-1 (``en``,
``fr``); :data:`ISO3` maps between them.

A side is judged in three steps (:meth:`LanguageId.judge`):

1. **the line itself**, when it has at least ``min_letters`` letters and heliport is confident:
   in the expected language it is kept, in the pair's other language it is wrong; in a third
   language it is wrong unless the expected one is among heliport's ``close_k`` best guesses
   (close languages: Spanish read as Galician or Asturian, French as Occitan);
   a shorter line that heliport still places confidently in the expected language is kept as
   ``short`` ("Autres", "Date de modification : 2015-05-15"): its own text's evidence, as for a
   long line, also on a page measured untranslated;
   else a line whose best guess (heliport's top language, confidence ignored) is the expected
   language is kept: weak evidence of its own outweighs its neighbours;
2. else **the line with its neighbours**: the ``window`` lines before and after it on the same page
   side, joined (a short heading is judged with the paragraph around it); neighbours count
   against the line only when they are in the pair's other language (English on the French
   side: an untranslated block), not when heliport guesses an unrelated language for them;
3. else **the page**: a line that neither its own text nor its neighbours can place (a name, a
   date, "OK") is kept; its page was measured as a whole by the pair stage, and on a page whose
   main text is in the wrong language such a line is dropped as ``untranslated`` unless its
   translation vouches for it (:mod:`.stage`, :mod:`.decision`). These lines are counted.

Markup is not language: a line's HTML tags (``<div class="row">``, ``</a>``) are left out before
it is identified (:func:`prose`), so an HTML example is judged by its prose, not by its English
attribute names.

Named entities need no rule of their own: a line that is only a name is too short to identify and
falls to steps 2-3; a name inside a sentence does not move heliport's decision for the sentence.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .decision import _TAG
from .rules import count_letters


def prose(text: str) -> str:
    """``text`` without its HTML tags (what heliport reads of a line)."""
    return " ".join(_TAG.sub(" ", text).split()) if "<" in text else text


#: ISO 639-1 (config) -> ISO 639-3 (heliport) for the languages parasim's backends translate, and
#: other common web languages. A language missing here is looked up by its 3-letter code as is.
ISO3: dict[str, str] = {
    "en": "eng",
    "fr": "fra",
    "es": "spa",
    "de": "deu",
    "it": "ita",
    "pt": "por",
    "nl": "nld",
    "ca": "cat",
    "gl": "glg",
    "eu": "eus",
    "ro": "ron",
    "pl": "pol",
    "cs": "ces",
    "sv": "swe",
    "da": "dan",
    "nb": "nob",
    "no": "nob",
    "fi": "fin",
    "el": "ell",
    "ru": "rus",
    "uk": "ukr",
    "tr": "tur",
    "ar": "arb",
    "zh": "cmn",
    "ja": "jpn",
    "ko": "kor",
}

#: Judgements of one side (counted in the stats as ``langid_<verdict>``).
OK_LINE, OK_CLOSE, OK_SHORT, OK_GUESS = "line", "close", "short", "guess"
OK_NEIGHBOURS, OK_PAGE = "neighbours", "page"
WRONG_LINE, WRONG_NEIGHBOURS = "wrong_line", "wrong_neighbours"


def iso3(lang: str) -> str:
    """heliport's code of a config language (``"fr"`` -> ``"fra"``)."""
    return ISO3.get(lang, lang)


@functools.lru_cache(maxsize=1)
def _identifier():
    try:
        from heliport import Identifier
    except ImportError as err:  # pragma: no cover - heliport is a pinned dependency
        raise RuntimeError(
            "language identification needs heliport (pip install heliport==1.0.1)"
        ) from err
    return Identifier()


#: Number of letters in a text (what heliport scores; digits and symbols are dropped).
letters = count_letters


def enough_letters(text: str, n: int) -> bool:
    """Whether ``text`` has at least ``n`` letters (a long text is decided on its start)."""
    if len(text) < n:
        return False
    return letters(text[: 4 * n]) >= n or letters(text) >= n


@dataclass
class LanguageId:
    """heliport with parasim's rule for short lines.

    Attributes:
        min_letters: a line with fewer letters is judged with its neighbours (step 2).
        window: neighbour lines on each side joined for step 2.
        close_k: a line heliport puts in a third language is kept when the expected language is
            among its ``close_k`` best (Spanish read as Galician, French as Occitan).
    """

    min_letters: int = 20
    window: int = 2
    close_k: int = 3

    def identify(self, texts: Sequence[str], sure: bool = True) -> list[str]:
        """heliport's label of each text: ``und`` under its confidence threshold when ``sure``,
        else its best guess whatever the confidence."""
        if not texts:
            return []
        return list(_identifier().par_identify(list(texts), ignore_confidence=not sure))

    def identify_distinct(self, texts: Sequence[str], sure: bool = True) -> list[str]:
        """:meth:`identify`, each distinct text identified once (page furniture repeats)."""
        uniq = list(dict.fromkeys(texts))
        if len(uniq) == len(texts):
            return self.identify(texts, sure)
        label = dict(zip(uniq, self.identify(uniq, sure), strict=True))
        return [label[t] for t in texts]

    def page_language(self, lines: Sequence[str]) -> tuple[str, float]:
        """The language holding most letters of a page's lines, and its share of the letters.

        Lines too short to identify alone are left out of the vote; a page with no identifiable
        line is ``("und", 0.0)``.
        """
        keep = [ln for ln in lines if enough_letters(ln, self.min_letters)]
        labels = self.identify(keep)
        weight: dict[str, int] = {}
        for ln, lab in zip(keep, labels, strict=True):
            if lab != "und":
                weight[lab] = weight.get(lab, 0) + letters(ln)
        total = sum(letters(ln) for ln in keep)
        if not weight or not total:
            return "und", 0.0
        best = max(sorted(weight), key=weight.__getitem__)
        return best, weight[best] / total

    def judge(
        self,
        texts: Sequence[str],
        expected: str,
        context: Callable[[int], str | None],
        opposite: str,
        letters: Callable[[str], int] | None = None,
    ) -> list[str]:
        """The verdict of each text against its expected language (ISO 639-1).

        Args:
            texts: one side of each pair.
            expected: the language the side is declared in.
            context: ``context(i)`` is text ``i`` with its neighbours on the page, joined (None
                when unknown); asked only for texts too short or too unsure to judge alone.
            opposite: the language of the pair's other side: neighbours are only evidence
                against a line when they are in this language (a French page's English block),
                since heliport's guesses on short mixed text (names, numbers, menus) scatter over
                unrelated languages.
            letters: the letter count of a text, when the caller has it
                (:func:`.rules.count_letters` by default).

        Returns:
            per text one of ``line``, ``close``, ``short``, ``guess``, ``neighbours``, ``page``
            (kept) or ``wrong_line``, ``wrong_neighbours`` (in another language).
        """
        want, other = iso3(expected), iso3(opposite)
        out: list[str | None] = [None] * len(texts)
        count = letters or count_letters  # enough_letters(t, n) is count_letters(t) >= n
        own = [i for i, t in enumerate(texts) if count(t) >= self.min_letters]
        close: dict[str, str] = {}
        for i, lab in zip(own, self.identify_distinct([texts[i] for i in own]), strict=True):
            if lab == want:
                out[i] = OK_LINE
            elif lab == other:
                out[i] = WRONG_LINE
            elif lab != "und":  # a third language: a close one (Galician for Spanish) is noise
                v = close.get(texts[i])
                if v is None:
                    top = _identifier().identify_topk_with_score(texts[i], self.close_k)
                    v = close[texts[i]] = OK_CLOSE if want in {t[0] for t in top} else WRONG_LINE
                out[i] = v
        # a line too short for the letter floor that heliport still places confidently (its
        # own threshold) in the expected language: its own text's evidence ("Autres")
        own_set = set(own)
        short = [i for i, v in enumerate(out) if v is None and i not in own_set]
        for i, lab in zip(short, self.identify_distinct([texts[i] for i in short]), strict=True):
            if lab == want:
                out[i] = OK_SHORT
        unsure = [i for i, v in enumerate(out) if v is None]
        guesses = self.identify_distinct([texts[i] for i in unsure], sure=False)
        for i, lab in zip(unsure, guesses, strict=True):
            if lab == want:
                out[i] = OK_GUESS
        ctx: dict[int, str] = {}
        for i, v in enumerate(out):
            if v is None:
                c = context(i)
                if c and enough_letters(c, self.min_letters):
                    ctx[i] = c
        for i, lab in zip(ctx, self.identify_distinct(list(ctx.values())), strict=True):
            if lab == want:
                out[i] = OK_NEIGHBOURS
            elif lab == other:
                out[i] = WRONG_NEIGHBOURS
        return [v or OK_PAGE for v in out]
