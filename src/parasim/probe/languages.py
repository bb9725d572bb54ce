"""A page's measured language: heliport on its main text, as the pair stage measures it.

The same measure as the pair stage's check for untranslated page pairs
(:func:`parasim.pair.language.main_text_lines`, then
:meth:`parasim.clean.langid.LanguageId.page_language`), named in the config's ISO 639-1 codes.
"""

from __future__ import annotations

import re

from parasim.clean.langid import ISO3, LanguageId
from parasim.pair.language import main_text_lines

#: heliport's ISO 639-3 codes -> the config's ISO 639-1 codes (``nob`` is ``nb``).
ISO1: dict[str, str] = {three: one for one, three in ISO3.items() if one != "no"}
_CONFIG_CODE_RE = re.compile(r"^[a-z]{2}$")


def measure_language(html: str | None, lid: LanguageId | None = None) -> tuple[str | None, float]:
    """The language holding most letters of a page's text, and its share of them.

    Args:
        html: the page.
        lid: a :class:`LanguageId` to reuse (default: a new one).

    Returns:
        An ISO 639-1 code (heliport's 3-letter code when it has none) and its share of the
        identified letters; ``(None, 0.0)`` when no line of the page is long enough to identify.
    """
    lang, share = (lid or LanguageId()).page_language(main_text_lines(html))
    if lang == "und":
        return None, 0.0
    return ISO1.get(lang, lang), share


def is_config_code(lang: str | None) -> bool:
    """Whether ``lang`` can be a site language in the config (two lower-case letters)."""
    return bool(lang and _CONFIG_CODE_RE.match(lang))
