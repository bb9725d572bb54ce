"""The Python documentation's translation catalogues rendered as a static bilingual website.

``parasim bench scale build`` calls :func:`build_site`; this module holds the rendering, the gold
files and the reStructuredText reducer (no ``main``: it is not a benchmark of its own).

The sites
    Each language's catalogues (one gettext ``.po`` per documentation page, ``library/os.po``)
    become one bilingual site whose English side is the version the catalogues translate, laid out
    as docs.python.org is: French pairs with English 3.13 (``/en/3.13/library/os.html`` and
    ``/fr/3.13/library/os.html``), Spanish with English 3.12 (``/en/3.12/…`` and ``/es/3.12/…``).
    The two sites share one served folder tree (``<out>/site/``) and one host, as on
    docs.python.org, and are two sites of the workflow (``python-docs-fr`` from
    ``/en/3.13/index.html``, ``python-docs-es`` from ``/en/3.12/index.html``): no page links across
    versions, so each crawl stays within its own pair. The two English sides are near-duplicates
    of each other (3.12 and 3.13 differ little), a real case of cross-site duplicates.

A page
    One page per catalogue, with every entry (not obsolete) as one paragraph, in catalogue order.
    The English page shows the ``msgid``; the translated page the ``msgstr``, or the English
    ``msgid`` where the entry is untranslated (empty ``msgstr``) or fuzzy (an outdated
    translation), as the real site does. An entry whose text renders empty (a lone ``::``) is left
    out of both pages. gettext keeps one entry for a paragraph that occurs several times in a
    page; it appears once. Every entry is a ``<p>`` (the catalogues do not say which entries are
    section titles), except doctest blocks (entries starting with ``>>>``), which are a ``<pre>``:
    Sphinx leaves literal blocks out of the catalogues, so those are the only code they hold (2
    Spanish entries, none in French). The ``::`` that introduces a literal block is rendered as
    docutils does: ``Example::`` shows ``Example:``, ``text ::`` shows ``text``.

    Around the content (``<div class="body" role="main">``) every page repeats a header (the
    documentation's title, the page's folder, a language switcher ``<a hreflang>`` inside
    ``#language-switcher``), a navigation sidebar (the index, the folder's index page, the
    previous and next pages and up to :data:`SIDEBAR_SIBLINGS` pages of the same folder on each
    side: bounded, whatever the folder's size) and a footer, all in the page's language. The head
    declares ``<html lang>`` and ``<link rel="alternate" hreflang>`` to both language versions.
    Links are root-relative (``/fr/3.13/…``), so a copy of the folder serves under any host.
    ``/<lang>/<version>/index.html`` links every page of its language, so a crawl from it reaches
    them all.

Gold files (``<out>/gold/``)
    ``pages_en_<lang>.tsv``: ``en_path``, ``other_path`` (paths under the served folder, as
    ``parasim bench site --gold`` reads them), one row per page pair, the index pages included.
    ``paragraphs_en_<lang>.tsv``: ``en_path``, ``entry`` (the entry's position in its catalogue,
    from 0), ``status`` (``translated``, ``untranslated`` or ``fuzzy``), ``en_text``,
    ``other_text``: the two paragraphs as a reader sees them, whitespace runs (no-break spaces
    too) as one space, as the parse stage writes a line.
    ``other_text`` is what the translated page shows there: the translation when ``translated``,
    the English text otherwise (so the gold translation pairs are the ``translated`` rows). Both
    are tab-separated with a header, quoted as Python's ``csv`` module does (a field holding ``"``
    is quoted). One known difference from the parse stage's lines: inscriptis 2.7.6 unescapes
    character references once more, so the 14 paragraphs that show one as text (``&gt;`` in
    ``library/html.parser``) come out of parse as the character (``>``).

Determinism
    Catalogues are read in sorted order from the archives in place (``tarfile``), nothing depends on
    the clock or on hash seeds, and files are written as UTF-8 with ``\\n`` line ends: the same
    archives give byte-identical output.
"""

from __future__ import annotations

import csv
import hashlib
import html
import json
import re
import shutil
import tarfile
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

#: ../shared/data/sites/python-docs relative to the repository root.
DATA_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "sites" / "python-docs"

#: Pages of the same folder the sidebar lists on each side of the current page.
SIDEBAR_SIBLINGS = 5


@dataclass(frozen=True)
class Translation:
    """One language's catalogues: the archive and the documentation version they translate."""

    lang: str
    version: str
    archive: str
    name: str  # the language's name in itself, for the switcher


TRANSLATIONS: dict[str, Translation] = {
    "fr": Translation("fr", "3.13", "python-docs-fr-3.13.po.tar.xz", "Français"),
    "es": Translation("es", "3.12", "python-docs-es-3.12.po.tar.xz", "Español"),
}

#: The repeated parts of a page, per language ({v}: the version).
UI = {
    "en": {
        "name": "English",
        "docs": "Python {v} documentation",
        "index": "Index",
        "prev": "Previous topic",
        "next": "Next topic",
        "this_folder": "In this section",
        "language": "Language",
        "footer": "© Copyright 2001-2024, Python Software Foundation. This page is licensed under "
        "the Python Software Foundation License Version 2. Examples, recipes, and other code in "
        "the documentation are additionally licensed under the Zero Clause BSD License.",
        "contents": "Contents of the documentation",
    },
    "fr": {
        "name": "Français",
        "docs": "Documentation Python {v}",
        "index": "Index",
        "prev": "Sujet précédent",
        "next": "Sujet suivant",
        "this_folder": "Dans cette section",
        "language": "Langue",
        "footer": "© Copyright 2001-2024, Python Software Foundation. Cette page est sous licence "
        "Python Software Foundation License Version 2. Les exemples, recettes et autres "
        "morceaux de code de la documentation sont également sous licence Zero Clause BSD.",
        "contents": "Sommaire de la documentation",
    },
    "es": {
        "name": "Español",
        "docs": "documentación de Python {v}",
        "index": "Índice",
        "prev": "Tema anterior",
        "next": "Próximo tema",
        "this_folder": "En esta sección",
        "language": "Idioma",
        "footer": "© Copyright 2001-2024, Python Software Foundation. Esta página está bajo la "
        "Python Software Foundation License Version 2. Los ejemplos, recetas y otros fragmentos "
        "de código de la documentación también están bajo la licencia Zero Clause BSD.",
        "contents": "Contenido de la documentación",
    },
}

# --- reStructuredText inline markup reduced to text ---------------------------------------------

_ROLE = re.compile(r":([A-Za-z0-9]+(?:[-_.+:][A-Za-z0-9]+)*):")
_EXPLICIT = re.compile(r"(?s)(.*?)\s*<([^<>]*)>\s*")
#: A docutils "simple reference name" ending the text before a ``name_`` reference.
_SIMPLENAME = re.compile(r"(?:(?!_)\w)+(?:[-._+:](?:(?!_)\w)+)*\Z")
_FOOTNOTE = re.compile(r"\[(#[\w-]*|\*|[\w-]+)\]_")
_OPEN_PUNCT = "-:/'\"<([{"
_CLOSE_PUNCT = "-.,:;!?\\/'\")]}>"


def _start_ok(s: str, i: int, width: int) -> bool:
    """docutils' start-string rule: after a boundary, and followed by a non-space."""
    j = i + width
    if j >= len(s) or s[j].isspace():
        return False
    if i == 0:
        return True
    prev = s[i - 1]
    return (
        prev.isspace()
        or prev in _OPEN_PUNCT
        or unicodedata.category(prev) in ("Ps", "Pi", "Pf", "Pd", "Po")
    )


def _end_ok(s: str, j: int) -> bool:
    """docutils' end-string rule: followed by the end, a space or punctuation."""
    if j >= len(s):
        return True
    nxt = s[j]
    return (
        nxt.isspace()
        or nxt in _CLOSE_PUNCT
        or unicodedata.category(nxt) in ("Pe", "Pi", "Pf", "Pd", "Po")
    )


def _find_end(s: str, start: int, end: str, escapes: bool = True) -> int:
    """Index of the end-string ``end`` closing markup whose content begins at ``start``; -1.

    ``escapes``: a backslash before the end-string escapes it (not so in inline literals).
    """
    k = s.find(end, start + 1)
    while k != -1:
        escaped = escapes and _escaped(s, k)
        doubled = end == "*" and s.startswith("**", k)  # `**` does not close emphasis
        if not s[k - 1].isspace() and not escaped and not doubled and _end_ok(s, k + len(end)):
            return k
        k = s.find(end, k + 1)
    return -1


def _escaped(s: str, k: int) -> bool:
    """Whether ``s[k]`` is escaped: an odd number of backslashes before it."""
    j = k
    while j > 0 and s[j - 1] == "\\":
        j -= 1
    return (k - j) % 2 == 1


def _unescape(s: str) -> str:
    r"""Backslash escapes as docutils reads them: ``\ `` vanishes, ``\x`` is ``x``."""
    return re.sub(r"\\(\s|.)", lambda m: "" if m.group(1).isspace() else m.group(1), s)


def _explicit(content: str) -> tuple[str, str] | None:
    """(title, target) of ``title <target>``, or None for a bare target."""
    m = _EXPLICIT.fullmatch(content)
    if m and m.group(1).strip():
        return m.group(1).strip(), m.group(2)
    return None


def role_text(role: str, content: str) -> str:
    """The text a reader sees for ``:role:`content```.

    ``title <target>`` shows the title; a bare target shows itself with a leading ``!`` or ``~``
    stripped; ``:pep:`` and ``:rfc:`` show ``PEP n`` / ``RFC n``; ``:abbr:`LIFO (last-in,
    first-out)``` shows ``LIFO``; ``:samp:`` and ``:file:`` drop the braces around variable
    parts; ``:menuselection:`` shows ``-->`` as ``‣``; ``:guilabel:`` drops the ``&`` accelerator.
    """
    role = role.rsplit(":", 1)[-1].lower()
    content = content.strip()
    if role in ("abbr",):
        m = re.fullmatch(r"(?s)(.*?)\s*\((.*)\)", content)
        return _unescape(m.group(1) if m else content)
    explicit = _explicit(content)
    if explicit is not None:
        return _unescape(explicit[0])
    text = _unescape(content).lstrip("!~")
    if role in ("pep", "rfc"):
        return f"{role.upper()} {text}"
    if role in ("samp", "file"):
        return re.sub(r"\{([^{}]*)\}", r"\1", text)
    if role in ("menuselection", "guilabel"):
        text = text.replace("-->", "‣")
        return re.sub(r"&(.)", r"\1", text)
    return text


def _link_text(content: str) -> str:
    """The text of a hyperlink reference `` `text <url>`_ `` (the URL when there is no text)."""
    explicit = _explicit(content)
    if explicit is not None:
        return _unescape(explicit[0])
    m = re.fullmatch(r"\s*<([^<>]*)>\s*", content)
    return _unescape(m.group(1) if m else content)


def reduce_inline(text: str, substitutions: Mapping[str, str] | None = None) -> str:
    """reStructuredText inline markup reduced to the text a reader sees.

    Roles (``:func:`os.path```, ``:ref:`text <target>```, suffix roles), interpreted text,
    ````literal````, ``*emphasis*``, ``**strong**``, hyperlink references (`` `text <url>`_ ``,
    ``name_``), inline targets, substitutions (``|name|``: its value in ``substitutions``, else
    the name), footnote references (``[1]_`` shows ``[1]``, auto-numbered ``[#]_`` nothing) and
    backslash escapes; markup is recognised only where docutils would (start- and end-string
    rules), so ``os.spawn*p*`` stays as written. Whitespace is left as it is.

    Args:
        text: one paragraph of reStructuredText.
        substitutions: values of ``|name|`` substitutions.

    Returns:
        The paragraph's text.
    """
    subs = substitutions or {}
    out: list[str] = []
    plain_from = 0  # where the current run of plain text starts in ``out``'s joined text
    i, n = 0, len(text)
    special = re.compile(r"[\\`*:|_\[]")
    while i < n:
        m = special.search(text, i)
        if m is None:
            out.append(text[i:])
            break
        if m.start() > i:
            out.append(text[i : m.start()])
            i = m.start()
        c = text[i]
        done = None  # (text, next index) when markup was recognised at i
        if c == "\\":
            if i + 1 < n:
                done = ("" if text[i + 1].isspace() else text[i + 1], i + 2)
            else:
                done = ("", i + 1)
        elif c == "`" and text.startswith("``", i) and _start_ok(text, i, 2):
            k = _find_end(text, i + 2, "``", escapes=False)
            if k != -1:
                done = (text[i + 2 : k], k + 2)
        elif c == "`" and _start_ok(text, i, 1):
            k = _find_end_interpreted(text, i)
            if k != -1:
                content, j = text[i + 1 : k], k + 1
                if text.startswith("__", j) and _end_ok(text, j + 2):
                    done = (_link_text(content), j + 2)
                elif text.startswith("_", j) and _end_ok(text, j + 1):
                    done = (_link_text(content), j + 1)
                elif (r := _ROLE.match(text, j)) and _end_ok(text, r.end()):
                    done = (role_text(r.group(1), content), r.end())
                elif _end_ok(text, j):
                    done = (_unescape(content), j)
        elif c == ":" and (r := _ROLE.match(text, i)) and text.startswith("`", r.end()):
            if i == 0 or _start_ok(text, i, 1):
                k = _find_end_interpreted(text, r.end())
                if k != -1:
                    done = (role_text(r.group(1), text[r.end() + 1 : k]), k + 1)
        elif c == "*" and text.startswith("**", i) and _start_ok(text, i, 2):
            k = _find_end(text, i + 2, "**")
            if k != -1:
                done = (_unescape(text[i + 2 : k]), k + 2)
        elif c == "*" and _start_ok(text, i, 1):
            k = _find_end(text, i + 1, "*")
            if k != -1:
                done = (_unescape(text[i + 1 : k]), k + 1)
        elif c == "|" and _start_ok(text, i, 1):
            k = _find_end(text, i + 1, "|")
            if k == -1:
                k = text.find("|", i + 1)  # `|name|_`: the end-string is followed by "_"
                k = k if k != -1 and text.startswith("_", k + 1) else -1
            if k != -1:
                j = k + 1 + (2 if text.startswith("__", k + 1) else text.startswith("_", k + 1))
                if _end_ok(text, j):
                    name = text[i + 1 : k]
                    done = (subs.get(name, name), j)
        elif c == "_" and text.startswith("_`", i) and _start_ok(text, i, 2):
            k = _find_end_interpreted(text, i + 1)
            if k != -1:
                done = (_unescape(text[i + 2 : k]), k + 1)
        elif c == "_":
            # `name_` / `name__`: a reference whose name is the plain text just before.
            j = i + (2 if text.startswith("__", i) else 1)
            before = "".join(out)[plain_from:]
            ref = _SIMPLENAME.search(before)
            if ref and _end_ok(text, j):
                start = len(before) - len(ref.group(0))
                if start == 0 or before[start - 1].isspace() or before[start - 1] in _OPEN_PUNCT:
                    done = ("", j)
        elif (
            c == "["
            and (f := _FOOTNOTE.match(text, i))
            and _end_ok(text, f.end())
            and _start_ok(text, i, 1)
        ):
            label = f.group(1)
            done = ("" if label.startswith(("#", "*")) else f"[{label}]", f.end())
        if done is None:
            out.append(c)
            i += 1
            continue
        piece, i = done
        out.append(piece)
        plain_from = len("".join(out))
    return "".join(out)


def _find_end_interpreted(s: str, start: int) -> int:
    """Index of the backtick closing interpreted text that opens at ``start``; -1."""
    k = s.find("`", start + 1)
    while k != -1:
        if not s[k - 1].isspace() and not _escaped(s, k):
            return k
        k = s.find("`", k + 1)
    return -1


def is_literal_block(msgid: str) -> bool:
    """Whether a catalogue entry is code shown as ``<pre>``: a doctest block (``>>>``)."""
    return msgid.lstrip().startswith(">>>")


def render_text(msg: str, literal: bool, substitutions: Mapping[str, str] | None = None) -> str:
    """The text a reader sees for one entry (its ``<p>`` or ``<pre>``), whitespace as written.

    A literal block is shown as written. Otherwise the ``::`` ending a paragraph is reduced as
    docutils does (``Example::`` → ``Example:``, ``text ::`` → ``text``, a lone ``::`` → nothing)
    and the inline markup by :func:`reduce_inline`.
    """
    if literal:
        return msg.strip("\n")
    body = msg.rstrip()
    if body.endswith("::"):
        head = body[:-2]
        body = head.rstrip() if (not head or head[-1].isspace()) else head + ":"
    return reduce_inline(body, substitutions).strip()


def collapse(text: str) -> str:
    """Whitespace runs (no-break spaces too) as one space, ends stripped: the gold files' text.

    The same normalisation as the parse stage gives each line, so a gold paragraph equals the
    line parse makes of it.
    """
    return " ".join(text.split())


# --- catalogues -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Paragraph:
    """One catalogue entry as shown on the two pages."""

    entry: int
    status: str  # translated | untranslated | fuzzy
    literal: bool
    en: str
    other: str  # what the translated page shows: the translation, or the English text


@dataclass(frozen=True)
class Page:
    """One catalogue: its documentation path (``library/os``) and paragraphs."""

    doc: str
    paragraphs: tuple[Paragraph, ...]


def read_catalogue(
    text: str, substitutions: Mapping[str, str] | None = None
) -> tuple[Paragraph, ...]:
    """Paragraphs of one ``.po`` file's text, in catalogue order (obsolete entries left out)."""
    import polib

    out = []
    for idx, e in enumerate(x for x in polib.pofile(text) if not x.obsolete):
        literal = is_literal_block(e.msgid)
        en = render_text(e.msgid, literal, substitutions)
        if not collapse(en):
            continue
        if "fuzzy" in e.flags:
            status, other = "fuzzy", en
        elif e.msgstr.strip():
            status, other = "translated", render_text(e.msgstr, literal, substitutions)
        else:
            status, other = "untranslated", en
        out.append(Paragraph(idx, status, literal, en, other))
    return tuple(out)


def page_order(doc: str) -> str:
    """The key subsets are drawn by: a hash of the page's path, stable across runs and machines.

    Taking the first N pages in this order gives nested subsets (¼ ⊂ ½ ⊂ all) spread over the
    documentation's folders.
    """
    return hashlib.sha1(doc.encode("utf-8")).hexdigest()


def select_docs(docs: Iterable[str], pages: int | None, subset: float | None) -> set[str]:
    """The pages to build: all, the first ``pages``, or the first ``subset`` share, by hash."""
    ranked = sorted(docs, key=lambda d: (page_order(d), d))
    if pages is not None:
        return set(ranked[:pages])
    if subset is not None:
        return set(ranked[: round(len(ranked) * subset)])
    return set(ranked)


def read_pages(
    archive: Path, docs: set[str] | None = None, substitutions: Mapping[str, str] | None = None
) -> list[Page]:
    """The pages of one archive (only ``docs`` when given), sorted by path, read in place."""
    pages = []
    with tarfile.open(archive) as tar:
        members = sorted(
            (m for m in tar.getmembers() if m.isfile() and m.name.endswith(".po")),
            key=lambda m: m.name,
        )
        for m in members:
            doc = str(PurePosixPath(m.name).with_suffix(""))
            doc = doc.removeprefix("./")
            if docs is not None and doc not in docs:
                continue
            fh = tar.extractfile(m)
            assert fh is not None
            pages.append(Page(doc, read_catalogue(fh.read().decode("utf-8"), substitutions)))
    return pages


def translation_pairs(lang: str, data_dir: Path = DATA_DIR) -> list[tuple[str, str]]:
    """The distinct (English, translation) paragraph pairs of one language's catalogues: the
    gold translations of ``paragraphs_en_<lang>.tsv`` (``translated`` entries), doctest blocks and
    pairs whose sides are equal left out, whitespace collapsed, in catalogue order."""
    tr = TRANSLATIONS[lang]
    subs = {"version": tr.version, "release": tr.version}
    seen: set[tuple[str, str]] = set()
    out = []
    for page in read_pages(Path(data_dir) / tr.archive, None, subs):
        for p in page.paragraphs:
            if p.status != "translated" or p.literal:
                continue
            pair = (collapse(p.en), collapse(p.other))
            if pair[0] and pair[1] and pair[0] != pair[1] and pair not in seen:
                seen.add(pair)
                out.append(pair)
    return out


def catalogue_docs(archive: Path) -> list[str]:
    """The documentation paths of an archive's catalogues, sorted."""
    with tarfile.open(archive) as tar:
        return sorted(
            str(PurePosixPath(n).with_suffix("")).removeprefix("./")
            for n in tar.getnames()
            if n.endswith(".po")
        )


# --- HTML ---------------------------------------------------------------------------------------


def _esc(s: str) -> str:
    return html.escape(s, quote=False)


def _attr(s: str) -> str:
    return html.escape(s, quote=True)


def page_title(page: Page, side: str) -> str:
    """A page's title in the sidebar and index: its first paragraph when short, else its path."""
    if page.paragraphs:
        text = collapse(getattr(page.paragraphs[0], side))
        if len(text) <= 80:
            return text
    return page.doc


class _SiteWriter:
    """Writes one language pair's pages under ``root`` (``en/<v>/`` and ``<lang>/<v>/``)."""

    def __init__(self, root: Path, tr: Translation, pages: list[Page]):
        self.root, self.tr, self.pages = root, tr, pages
        self.docs = {p.doc for p in pages}
        by_folder: dict[str, list[Page]] = {}
        self.at: dict[str, int] = {}  # a page's position in its folder
        for p in pages:
            siblings = by_folder.setdefault(_folder(p.doc), [])
            self.at[p.doc] = len(siblings)
            siblings.append(p)
        self.by_folder = by_folder

    def url(self, lang: str, doc: str) -> str:
        return f"/{lang}/{self.tr.version}/{doc}.html"

    def write(self) -> int:
        """Write every page of both languages; the number of bytes written."""
        total = 0
        for lang, side in (("en", "en"), (self.tr.lang, "other")):
            for i, page in enumerate(self.pages):
                total += self._write(lang, page.doc, self._page(lang, side, i))
            total += self._write(lang, "index", self._index(lang, side))
        return total

    def _write(self, lang: str, doc: str, text: str) -> int:
        path = self.root / lang / self.tr.version / f"{doc}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        data = text.encode("utf-8")
        path.write_bytes(data)
        return len(data)

    def _frame(self, lang: str, doc: str, title: str, main: str, sidebar: str) -> str:
        ui, v = UI[lang], self.tr.version
        docs_title = ui["docs"].format(v=v)
        other = "en" if lang != "en" else self.tr.lang
        alternates = "".join(
            f'<link rel="alternate" hreflang="{code}" href="{_attr(self.url(code, doc))}">\n'
            for code in sorted(("en", self.tr.lang))
        )
        folder = _folder(doc)
        crumbs = f'<a href="{self.url(lang, "index")}">{_esc(docs_title)}</a>'
        if folder and f"{folder}/index" in self.docs and doc != f"{folder}/index":
            crumbs += f' » <a href="{self.url(lang, folder + "/index")}">{_esc(folder)}</a>'
        switcher = (
            f'<div id="language-switcher" class="language-switcher" '
            f'aria-label="{_attr(ui["language"])}">'
            f"<span>{_esc(ui['name'])}</span> | "
            f'<a href="{_attr(self.url(other, doc))}" hreflang="{other}" lang="{other}">'
            f"{_esc(UI[other]['name'])}</a></div>"
        )
        return (
            "<!DOCTYPE html>\n"
            f'<html lang="{lang}">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{_esc(title)} — {_esc(docs_title)}</title>\n"
            f"{alternates}</head>\n<body>\n"
            f'<header class="related" role="navigation">\n{crumbs}\n{switcher}\n</header>\n'
            f'<div class="document">\n<div class="body" role="main">\n{main}</div>\n'
            f'<nav class="sphinxsidebar" aria-label="{_attr(ui["index"])}">\n{sidebar}</nav>\n'
            "</div>\n"
            f'<footer class="footer">\n<p>{_esc(ui["footer"])}</p>\n</footer>\n'
            "</body>\n</html>\n"
        )

    def _link(self, lang: str, page: Page, side: str) -> str:
        return f'<a href="{_attr(self.url(lang, page.doc))}">{_esc(page_title(page, side))}</a>'

    def _page(self, lang: str, side: str, i: int) -> str:
        page = self.pages[i]
        ui = UI[lang]
        body = []
        for p in page.paragraphs:
            text = getattr(p, side)
            body.append(f"<pre>{_esc(text)}</pre>\n" if p.literal else f"<p>{_esc(text)}</p>\n")
        siblings = self.by_folder[_folder(page.doc)]
        at = self.at[page.doc]
        near = siblings[max(0, at - SIDEBAR_SIBLINGS) : at + SIDEBAR_SIBLINGS + 1]
        side_html = [f'<p><a href="{self.url(lang, "index")}">{_esc(ui["index"])}</a></p>\n']
        if i > 0:
            side_html.append(
                f"<h3>{_esc(ui['prev'])}</h3>\n<p>{self._link(lang, self.pages[i - 1], side)}</p>\n"
            )
        if i + 1 < len(self.pages):
            side_html.append(
                f"<h3>{_esc(ui['next'])}</h3>\n<p>{self._link(lang, self.pages[i + 1], side)}</p>\n"
            )
        side_html.append(f"<h3>{_esc(ui['this_folder'])}</h3>\n<ul>\n")
        side_html += [f"<li>{self._link(lang, p, side)}</li>\n" for p in near if p.doc != page.doc]
        side_html.append("</ul>\n")
        return self._frame(
            lang, page.doc, page_title(page, side), "".join(body), "".join(side_html)
        )

    def _index(self, lang: str, side: str) -> str:
        ui = UI[lang]
        docs_title = ui["docs"].format(v=self.tr.version)
        main = [f"<h1>{_esc(docs_title)}</h1>\n"]
        for folder in sorted(self.by_folder):
            if folder:
                main.append(f"<h2>{_esc(folder)}</h2>\n")
            main.append("<ul>\n")
            main += [f"<li>{self._link(lang, p, side)}</li>\n" for p in self.by_folder[folder]]
            main.append("</ul>\n")
        # The sidebar: each folder, by its index page where there is one.
        sidebar = [f"<h3>{_esc(ui['contents'])}</h3>\n<ul>\n"]
        for folder in sorted(f for f in self.by_folder if f):
            doc = f"{folder}/index" if f"{folder}/index" in self.docs else None
            doc = doc or self.by_folder[folder][0].doc
            sidebar.append(f'<li><a href="{_attr(self.url(lang, doc))}">{_esc(folder)}</a></li>\n')
        sidebar.append("</ul>\n")
        return self._frame(lang, "index", ui["contents"], "".join(main), "".join(sidebar))


def _folder(doc: str) -> str:
    return doc.rsplit("/", 1)[0] if "/" in doc else ""


# --- the build ----------------------------------------------------------------------------------


def _write_tsv(path: Path, header: list[str], rows: Iterable[list]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter="\t", lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


def build_site(
    out: Path,
    langs: Iterable[str] = ("fr", "es"),
    pages: int | None = None,
    subset: float | None = None,
    data_dir: Path = DATA_DIR,
) -> dict:
    """Render the catalogues of ``langs`` as one served folder ``out/site`` and the gold files.

    Args:
        out: the build folder: ``site/`` (to serve), ``gold/`` and ``build.json`` (the figures)
            are written there; a former build's ``site/`` and ``gold/`` are replaced.
        langs: languages of :data:`TRANSLATIONS` to build.
        pages: build only this many pages per language (the first by :func:`page_order`).
        subset: build only this share of each language's pages (the first by the same order).
        data_dir: the folder holding the archives (read in place).

    Returns:
        Per language: pages (the index left out), paragraphs by status, bytes of HTML.
    """
    out = Path(out)
    if out.exists() and any(out.iterdir()) and not (out / "build.json").is_file():
        raise SystemExit(f"{out} is not empty and holds no build.json: not replacing it")
    for sub in ("site", "gold"):
        shutil.rmtree(out / sub, ignore_errors=True)
    (out / "gold").mkdir(parents=True)
    figures: dict[str, dict] = {}
    for lang in sorted(set(langs)):
        tr = TRANSLATIONS[lang]
        archive = Path(data_dir) / tr.archive
        docs = select_docs(catalogue_docs(archive), pages, subset)
        subs = {"version": tr.version, "release": tr.version}
        site_pages = read_pages(archive, docs, subs)
        n_bytes = _SiteWriter(out / "site", tr, site_pages).write()
        _write_gold(out / "gold", tr, site_pages)
        status = {"translated": 0, "untranslated": 0, "fuzzy": 0}
        for page in site_pages:
            for p in page.paragraphs:
                status[p.status] += 1
        figures[lang] = {
            "version": tr.version,
            "pages": len(site_pages),
            "paragraphs": sum(status.values()),
            **status,
            "html_bytes": n_bytes,
        }
    (out / "build.json").write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
    return figures


def _write_gold(gold: Path, tr: Translation, pages: list[Page]) -> None:
    v, lang = tr.version, tr.lang
    page_rows = [[f"en/{v}/index.html", f"{lang}/{v}/index.html"]]
    page_rows += [[f"en/{v}/{p.doc}.html", f"{lang}/{v}/{p.doc}.html"] for p in pages]
    _write_tsv(gold / f"pages_en_{lang}.tsv", ["en_path", "other_path"], sorted(page_rows))
    _write_tsv(
        gold / f"paragraphs_en_{lang}.tsv",
        ["en_path", "entry", "status", "en_text", "other_text"],
        (
            [f"en/{v}/{page.doc}.html", p.entry, p.status, collapse(p.en), collapse(p.other)]
            for page in pages
            for p in page.paragraphs
        ),
    )
