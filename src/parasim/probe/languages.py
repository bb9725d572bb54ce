"""A cheap language measure: the share of a text's words that are frequent function words.

Good enough to tell a page's language from a few hundred words of running text in the languages
below (the ones the shipped translation backends serve, and their neighbours); it is a sanity check
of the declared ``<html lang>``, not a language identifier for short lines.
"""

from __future__ import annotations

import re
from collections import Counter

#: Frequent function words per language (ISO 639-1). Words shared by several languages count for
#: each of them; the distinctive ones decide.
STOPWORDS: dict[str, frozenset[str]] = {
    lang: frozenset(words.split())
    for lang, words in {
        "en": "the of and to in is that for it with as was on are be by this from or an at not "
        "have which you can your will has but all their they more if we our its these about",
        "fr": "le la les des et est une un du que qui dans pour pas sur au aux ce cette sont avec "
        "par plus ou nous vous leur être été ses son mais comme il elle ne se",
        "es": "el la los las de del y que en un una por con para es se no al lo como más pero "
        "sus su está son este esta o le ha muy",
        "de": "der die das und ist nicht ein eine zu den von mit sich des auf für im dem auch es "
        "an als werden wird oder bei aus nach wie sie",
        "it": "il lo la gli le di che e è un una per non con del della dei nel sono si da al "
        "come più anche questo ma alla delle",
        "pt": "o a os as de do da dos das que e é um uma para com não no na em por se mais ao "
        "pelo pela como mas são seu sua",
        "nl": "de het een en van is dat niet in op te zijn met voor er die maar ook als aan bij "
        "door om nog wordt deze u",
    }.items()
}

_WORD_RE = re.compile(r"[^\W\d_]+")

#: Fewest function words a text needs before a language is named.
MIN_HITS = 8
#: Smallest share of the text's words that must be function words of the winning language.
MIN_SHARE = 0.08


def measure_language(text: str) -> str | None:
    """The language whose function words make up most of ``text``; None when too little to tell.

    Args:
        text: running text (a page's visible text).

    Returns:
        An ISO 639-1 code from :data:`STOPWORDS`, or None when the text has fewer than
        :data:`MIN_HITS` function words or they make up less than :data:`MIN_SHARE` of it.
    """
    words = _WORD_RE.findall(text.lower())
    if not words:
        return None
    counts = Counter(words)
    hits = {lang: sum(counts[w] for w in sw) for lang, sw in STOPWORDS.items()}
    best = max(sorted(hits), key=lambda lang: hits[lang])
    if hits[best] < MIN_HITS or hits[best] / len(words) < MIN_SHARE:
        return None
    return best
