"""The Python documentation's translation catalogues rendered as a static bilingual website.

``parasim bench scale build`` calls :func:`build_site`; this module holds the rendering and the
gold files (no ``main``: it is not a benchmark of its own); :mod:`parasim.bench.catalogues` reads
the catalogues into pages of paragraphs.

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
import shutil
from collections.abc import Iterable
from pathlib import Path

from parasim.bench.catalogues import (
    DATA_DIR,
    TRANSLATIONS,
    Page,
    Translation,
    catalogue_docs,
    collapse,
    read_pages,
)

#: Pages of the same folder the sidebar lists on each side of the current page.
SIDEBAR_SIBLINGS = 5


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
