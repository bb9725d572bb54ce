"""What the crawler reads from a response: decoded HTML, its language and the links to follow.

These functions are pure (no scrapy engine, no network), so the live crawl and a resumed crawl,
which rebuilds its frontier from stored HTML, extract exactly the same links.
"""

from __future__ import annotations

import codecs
import contextlib
import fnmatch
import functools
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urljoin, urlsplit

import lxml.html
from lxml import etree
from w3lib.encoding import html_to_unicode
from w3lib.url import canonicalize_url

#: Content types stored as pages; anything else is skipped as ``non_html``.
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})

#: Link targets that are not pages (scrapy's LinkExtractor list, copied so this module needs no
#: scrapy import).
IGNORED_EXTENSIONS = frozenset(
    """
    7z 7zip bz2 rar tar tar.gz xz zip mng pct bmp gif jpg jpeg png pst psp tif tiff ai drw dxf eps
    ps svg cdr ico webp mp3 wma ogg wav ra aac mid au aiff 3gp asf asx avi mov mp4 mpg qt rm swf
    wmv m4a m4v flv webm xls xlsx ppt pptx pps doc docx odt ods odg odp css pdf exe bin rss dmg iso
    apk jar sh rb js hqx ttf woff woff2 eot json xml csv txt
    """.split()  # noqa: SIM905 - a word list reads better here
)

_SKIP_SCHEMES = ("javascript:", "mailto:", "tel:", "data:", "ftp:", "file:", "about:", "#")
_LANG_RE = re.compile(r"^[a-z]{2,3}$")
_PARSER = lxml.html.HTMLParser(encoding="utf-8", recover=True)


def _cp1252_fallback(err: UnicodeError) -> tuple[str, int]:
    """Codec error handler: decode the offending bytes as cp1252 (latin-1 where undefined)."""
    if not isinstance(err, UnicodeDecodeError):
        raise err
    chunk = err.object[err.start : err.end]
    try:
        text = chunk.decode("cp1252")
    except UnicodeDecodeError:
        text = chunk.decode("latin-1")
    return text, err.end


codecs.register_error("parasim_cp1252", _cp1252_fallback)


@dataclass(frozen=True)
class Decoded:
    """A decoded body: text, the encoding used, and a note when the declared charset was wrong."""

    text: str
    encoding: str
    note: str | None = None


def media_type(content_type: str | None) -> str | None:
    """``text/html; charset=utf-8`` -> ``text/html`` (lower-case); None when absent."""
    if not content_type:
        return None
    return content_type.split(";", 1)[0].strip().lower() or None


def decode_html(body: bytes, content_type: str | None) -> Decoded:
    """Decode an HTML body, repairing wrong or missing charsets.

    The encoding is taken from the BOM, the Content-Type header, then ``<meta charset>``; without
    any, UTF-8. When that decoding produces U+FFFD replacement characters that are not in the source
    (the usual case: Latin-1 bytes declared or assumed to be UTF-8), the offending bytes are decoded
    as cp1252 instead, and ``note`` says so.

    Args:
        body: the raw response body.
        content_type: the Content-Type header, if any.

    Returns:
        The decoded text, the encoding used and an optional note.
    """
    try:
        encoding, text = html_to_unicode(content_type, body, default_encoding="utf-8")
    except LookupError:  # an unknown charset name in the header or a meta tag
        encoding, text = "utf-8", body.decode("utf-8", errors="replace")
    encoding = codecs.lookup(encoding).name if _known(encoding) else encoding
    if "\ufffd" not in text or "\ufffd".encode() in body:
        return Decoded(text, encoding)
    if encoding == "utf-8":
        fixed = body.decode("utf-8", errors="parasim_cp1252")
        try:
            whole = body.decode("cp1252")
        except UnicodeDecodeError:
            whole = body.decode("latin-1")
        used = "cp1252" if fixed == whole else "utf-8+cp1252"
    else:
        try:
            fixed, used = body.decode("cp1252"), "cp1252"
        except UnicodeDecodeError:
            fixed, used = body.decode("latin-1"), "latin-1"
    declared = encoding
    return Decoded(fixed, used, f"charset_fixed: {declared} gave U+FFFD; decoded as {used}")


def _known(encoding: str) -> bool:
    try:
        codecs.lookup(encoding)
    except LookupError:
        return False
    return True


def primary_lang(tag: str | None) -> str | None:
    """``en-CA`` / ``fr_CA`` / ``EN`` -> ``en``; None when it does not look like a language tag."""
    if not tag:
        return None
    first = re.split(r"[-_,;\s]", tag.strip().lower(), maxsplit=1)[0]
    return first if _LANG_RE.match(first) else None


def parse_html(text: str) -> etree._Element | None:
    """Parse (possibly malformed) HTML; None when nothing parseable is left."""
    if not text or not text.strip():
        return None
    try:
        root = lxml.html.document_fromstring(text.encode("utf-8", "replace"), parser=_PARSER)
    except (etree.ParserError, ValueError):
        return None
    return root


def declared_lang(root: etree._Element | None, content_language: str | None = None) -> str | None:
    """Primary language subtag of ``<html lang>`` (or xml:lang), else Content-Language (header,
    then ``<meta http-equiv>``), lower-case."""
    if root is not None:
        html = root if root.tag == "html" else root.getroottree().getroot()
        for attr in ("lang", "{http://www.w3.org/XML/1998/namespace}lang", "xml:lang"):
            lang = primary_lang(html.get(attr))
            if lang:
                return lang
    lang = primary_lang(content_language)
    if lang or root is None:
        return lang
    for meta in root.iter("meta"):
        if (meta.get("http-equiv") or "").lower() == "content-language":
            return primary_lang(meta.get("content"))
    return None


def looks_like_page(url: str) -> bool:
    """False for links to files that are not pages (images, PDFs, archives, ...)."""
    path = urlsplit(url).path.lower()
    ext = posixpath.splitext(path)[1].lstrip(".")
    if not ext:
        return True
    if ext in ("gz", "bz2", "xz") and path.endswith((".tar.gz", ".tar.bz2", ".tar.xz")):
        return False
    return ext not in IGNORED_EXTENSIONS


#: Query parameters that only track where a visitor came from (what ``parasim probe`` looks for).
TRACKING_PARAMS = ("utm_*", "fbclid", "gclid", "dclid", "msclkid", "mc_cid", "mc_eid", "_ga", "_gl")


def without_params(url: str, patterns: tuple[str, ...]) -> str:
    """``url`` without the query parameters whose names match one of ``patterns`` (shell-style:
    ``utm_*``); the other parameters keep their order."""
    if not patterns or "?" not in url:
        return url
    parts = urlsplit(url)
    kept = [
        kv
        for kv in parts.query.split("&")
        if kv and not any(fnmatch.fnmatchcase(kv.split("=", 1)[0], p) for p in patterns)
    ]
    return parts._replace(query="&".join(kept)).geturl()


def canonical(url: str) -> str | None:
    """The URL used for de-duplication and storage: canonicalized, no fragment; None if invalid."""
    try:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return None
        return canonicalize_url(url, keep_fragments=False)
    except ValueError:
        return None


@lru_cache(maxsize=200_000)
def _resolve(base: str, href: str, normalize: Callable[[str], str] | None) -> str | None:
    """The canonical page URL of ``href`` on a page whose base is ``base``; None if not a page.

    Cached: the same navigation links recur on every page of a site, and callers pass the base's
    folder (not the page) whenever the result cannot depend on the rest of it.
    """
    if href.lower().startswith(_SKIP_SCHEMES):
        return None
    try:
        absolute = urljoin(base, href)
    except ValueError:
        return None
    url = canonical(absolute)
    if url is None or not looks_like_page(url):
        return None
    return normalize(url) if normalize is not None else url


_LOWER = (
    "translate(normalize-space(@rel), 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz')"
)
#: hrefs of <a>, <area> and <link rel="alternate">, in document order (one XPath call per page).
_HREFS = etree.XPath(
    f"//a/@href | //area/@href | //link[contains(concat(' ', {_LOWER}, ' '), ' alternate ')]/@href",
    smart_strings=False,
)
_BASE = etree.XPath("(//base[@href])[1]/@href", smart_strings=False)


@functools.lru_cache(maxsize=8)
def _attr_xpath(attrs: tuple[str, ...]) -> etree.XPath:
    return etree.XPath(" | ".join(f"//@{a}" for a in attrs), smart_strings=False)


def _folder(url: str) -> str:
    """``https://h/a/b.html?q`` -> ``https://h/a/``: what a relative path is resolved against."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    path = parts.path or "/"
    return f"{parts.scheme}://{parts.netloc}{path[: path.rfind('/') + 1]}"


def extract_links(
    root: etree._Element | None,
    base_url: str,
    normalize: Callable[[str], str] | None = None,
    extra_attrs: tuple[str, ...] = (),
) -> list[str]:
    """Links to pages in a parsed document, canonical, in document order, without duplicates.

    ``<a href>``, ``<area href>`` and ``<link rel=alternate href>`` (language counterparts) count;
    ``<base href>`` is honoured; fragments are stripped; non-page extensions are dropped.

    Args:
        root: the parsed document (``parse_html``); None gives no links.
        base_url: the page's URL (after redirects).
        normalize: maps a canonical URL to the form used in the crawl (e.g. the served origin).
        extra_attrs: attributes of any element whose values are links too (after the hrefs),
            e.g. ``data-ajax-replace`` for menus a site loads with JavaScript.
    """
    return _links_of(root, base_url, _HREFS, extra_attrs, normalize)


#: hrefs of the links that name a page's translations: ``<link rel=alternate hreflang>``,
#: ``<a hreflang>`` and ``<a lang>`` (language toggles and lists), in document order.
_LANGUAGE_HREFS = etree.XPath(
    f"//link[@hreflang][contains(concat(' ', {_LOWER}, ' '), ' alternate ')]/@href"
    " | //a[@hreflang]/@href | //a[@lang]/@href",
    smart_strings=False,
)


def language_links(
    root: etree._Element | None,
    base_url: str,
    normalize: Callable[[str], str] | None = None,
    language_attrs: tuple[str, ...] = (),
) -> list[str]:
    """The links of a page that name its translations (hreflang alternates, ``<a hreflang>`` and
    ``<a lang>``, and the values of ``language_attrs`` on any element), as :func:`extract_links`
    resolves them."""
    return _links_of(root, base_url, _LANGUAGE_HREFS, language_attrs, normalize)


def _links_of(
    root: etree._Element | None,
    base_url: str,
    xpath: etree.XPath,
    attrs: tuple[str, ...],
    normalize: Callable[[str], str] | None,
) -> list[str]:
    """The values ``xpath`` finds, then those of ``attrs`` on any element, resolved."""
    if root is None:
        return []
    hrefs = xpath(root)
    if attrs:
        hrefs = list(hrefs) + list(_attr_xpath(attrs)(root))
    return _resolve_all(root, base_url, hrefs, normalize)


def page_links(
    root: etree._Element | None,
    base_url: str,
    normalize: Callable[[str], str] | None = None,
    extra_attrs: tuple[str, ...] = (),
    pairs_first: bool = False,
    language_attrs: tuple[str, ...] = (),
) -> tuple[list[str], int]:
    """The links the crawl follows from a page, and how many of them come first as its language
    links (``pairs_first``; else 0 and the links of :func:`extract_links` as they are)."""
    links = extract_links(root, base_url, normalize, extra_attrs)
    if not pairs_first:
        return links, 0
    first = language_links(root, base_url, normalize, language_attrs)
    known = set(first)
    return first + [u for u in links if u not in known], len(first)


def _resolve_all(
    root: etree._Element,
    base_url: str,
    hrefs: list[str],
    normalize: Callable[[str], str] | None,
) -> list[str]:
    """``hrefs`` as canonical page URLs against the page's base, in order, without duplicates."""
    base = base_url
    for href in _BASE(root):
        with contextlib.suppress(ValueError):
            base = urljoin(base_url, href.strip())
    folder = _folder(base)
    out: list[str] = []
    seen: set[str] = set()
    for href in hrefs:
        href = href.strip()
        if not href:
            continue
        # Only an empty path (query-only or parameter-only href) depends on more than the folder.
        url = _resolve(base if href[0] in "?;" else folder, href, normalize)
        if url is not None and url not in seen:
            seen.add(url)
            out.append(url)
    return out
