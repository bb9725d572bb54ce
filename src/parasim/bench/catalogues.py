"""The Python documentation's French and Spanish translation catalogues
(``../shared/data/sites/python-docs``, gettext ``.po`` files in ``.tar.xz`` archives) read as
pages of paragraph pairs.

One page per catalogue (``library/os.po``), every entry (not obsolete) one paragraph in catalogue
order, its reStructuredText inline markup reduced to the text a reader sees (:func:`render_text`):
the English ``msgid`` and what the translated page shows, the ``msgstr`` or, for an untranslated
or fuzzy entry, the English text. :mod:`parasim.bench.scale_site` renders these pages as a
bilingual website with its gold files; :func:`translation_pairs` gives the gold translations as
training pairs, which ``parasim bench scale pairs`` writes as a JSON-lines file for the static
encoder's optional tuning (``align.static.tune.extra``). Read in sorted order from the archives
in place: the same archives give the same pages.
"""

from __future__ import annotations

import json
import re
import tarfile
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from parasim.paths import shared_data

#: The catalogues' archives in the shared data (``../shared/data/sites/python-docs``).
DATA_DIR = shared_data("sites", "python-docs")


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


def write_translation_pairs(
    out: Path, langs: Iterable[str] = ("fr",), data_dir: Path = DATA_DIR
) -> dict[str, int]:
    """Write the :func:`translation_pairs` of ``langs`` (in sorted order) to ``out``, one
    ``{"a": English, "b": translation}`` JSON object a line: a pair file of the static encoder's
    tuning (``align.static.tune.extra``, :func:`parasim.models.static.read_pair_file`).

    Returns:
        The pairs written per language.

    Raises:
        FileNotFoundError: a language's archive is not in ``data_dir``.
        KeyError: a language without catalogues.
    """
    counts: dict[str, int] = {}
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8") as fh:
        for lang in sorted(set(langs)):
            pairs = translation_pairs(lang, data_dir)
            fh.writelines(json.dumps({"a": a, "b": b}, ensure_ascii=False) + "\n" for a, b in pairs)
            counts[lang] = len(pairs)
    return counts


def catalogue_docs(archive: Path) -> list[str]:
    """The documentation paths of an archive's catalogues, sorted."""
    with tarfile.open(archive) as tar:
        return sorted(
            str(PurePosixPath(n).with_suffix("")).removeprefix("./")
            for n in tar.getnames()
            if n.endswith(".po")
        )
