"""The measured language of a page's main text, to find untranslated page pairs.

A site often publishes a page in its second language before the text is translated: the WET
site's French pages marked "Needs translation" hold the English text. Such a page pairs perfectly
by its links and then yields copies of English sentences as "translations". The pair stage
measures the language of the main text of both pages of every pair (:func:`main_text_lines`,
then heliport through :class:`parasim.clean.langid.LanguageId`) and reports a pair whose other
page is mostly English, or whose English page is mostly in the other language, as untranslated:
counted, listed in the stats, and left out of the pairs.

Code samples (``<pre>``, ``<code>``, ``<script>``, ``<style>``) are left out of the measure: a
French page documenting HTML is French even when half its characters are English markup.
"""

from __future__ import annotations

import lxml.etree
import lxml.html
from lxml.cssselect import CSSSelector

_SKIP = {"script", "style", "pre", "code", "noscript", "template", "svg", "textarea"}
_BLOCKS = {
    "p", "div", "li", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "section", "article",
    "dt", "dd", "caption", "figcaption", "blockquote", "summary", "label", "option", "br",
}  # fmt: skip
_PARSER = lxml.html.HTMLParser(encoding="utf-8", remove_comments=True, remove_pis=True)


def parse_page(html: str | None) -> lxml.html.HtmlElement | None:
    """The page parsed by lxml (comments and processing instructions dropped); None for an
    empty page or one lxml gives up on."""
    if not html:
        return None
    try:
        return lxml.html.document_fromstring(html.encode("utf-8"), parser=_PARSER)
    except (lxml.etree.ParserError, ValueError):
        return None


def main_roots(root: lxml.html.HtmlElement, selector: CSSSelector | None = None) -> list:
    """The elements of a parsed page's main content: what ``selector`` matches, else
    ``<body>`` (else the whole document)."""
    roots = selector(root) if selector is not None else []
    if not roots:
        body = root.find("body")
        roots = [body if body is not None else root]
    return roots


def main_text_lines(html: str | None, selector: CSSSelector | None = None) -> list[str]:
    """The text lines of a page's main content (``selector`` matches, else ``<body>``).

    Lines break at block elements; code, scripts and styles are skipped.
    """
    root = parse_page(html)
    return [] if root is None else lines_of(main_roots(root, selector))


def lines_of(roots: list) -> list[str]:
    """The text lines of these elements (:func:`main_text_lines`)."""
    parts: list[str] = []

    def walk(el) -> None:
        tag = el.tag if isinstance(el.tag, str) else ""
        if tag in _SKIP:
            if el.tail:
                parts.append(el.tail)
            return
        if tag in _BLOCKS:
            parts.append("\n")
        if el.text:
            parts.append(el.text)
        for child in el:
            walk(child)
        if tag in _BLOCKS:
            parts.append("\n")
        if el.tail:
            parts.append(el.tail)

    for r in roots:
        tail, r.tail = r.tail, None  # the text after the main element is not main text
        walk(r)
        r.tail = tail
    return [" ".join(line.split()) for line in "".join(parts).split("\n") if line.strip()]
