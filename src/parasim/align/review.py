"""Manual review queue (the paper aligns files with a few misaligned lines by hand).

For every queued page pair two files are written to ``<queue>/<site>/``:

* ``<pair_id>.html``: both sides side by side with the English translation, one row per proposed
  link, suspect lines highlighted, similarity shown;
* ``<pair_id>.tsv``: the proposed links, for editing. Columns ``en_idx``, ``other_idx``, ``keep``
  (then read-only text columns ``score``, ``suspect``, ``en_text``, ``other_text``,
  ``other_en`` that help the reviewer and are ignored on reading). Line indices are 0-based;
  several indices are comma-separated (``3,4``); an empty cell means no line on that side.
  ``keep`` is ``1`` / ``0`` (also yes/no, true/false, y/n). The first line is a comment
  ``# parasim-review pair_id=... n_en=... n_other=... fingerprint=...`` that ties the file to
  the exact page content.

The reviewer fixes the rows (re-pairs indices, sets ``keep``, adds or deletes rows) and saves the
file into ``<queue>/<site>/done/<pair_id>.tsv``. On the next run :func:`load_reviewed` reads
those files and the align stage emits the kept links as positives with method ``"review"``
(when the fingerprint still matches the page pair; otherwise the review is counted as stale).
"""

from __future__ import annotations

import csv
import hashlib
import html
import io
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

TSV_COLUMNS = [
    "en_idx",
    "other_idx",
    "keep",
    "score",
    "suspect",
    "en_text",
    "other_text",
    "other_en",
]
_TRUE = {"1", "yes", "y", "true", "t", "x"}
_FALSE = {"0", "no", "n", "false", "f", ""}
_DISPLAY_CHARS = 2000  # longer lines are cut in the HTML / TSV views (indices stay exact)

Link = tuple[tuple[int, ...], tuple[int, ...]]


@dataclass
class ReviewedPair:
    """Links a person kept for one page pair.

    Attributes:
        pair_id: the page pair.
        links: kept ``(en ids, other ids)`` links, both sides non-empty.
        n_en: English line count the review was made for (None if the header was missing).
        n_other: other-language line count.
        fingerprint: content fingerprint from the header (None if missing).
        path: the file read.
    """

    pair_id: str
    links: list[Link]
    n_en: int | None
    n_other: int | None
    fingerprint: str | None
    path: Path


def fingerprint(en_lines: Sequence[str | None], other_lines: Sequence[str | None]) -> str:
    """Short hash of both sides' lines (detects pages that changed after review)."""
    h = hashlib.sha1()
    for side in (en_lines, other_lines):
        for line in side:
            h.update((line or "").encode("utf-8"))
            h.update(b"\x1e")
        h.update(b"\x1d")
    return h.hexdigest()[:16]


def _ids(x: Sequence[int]) -> str:
    return ",".join(str(i) for i in x)


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _cut(text: str | None) -> str:
    text = text or ""
    return text if len(text) <= _DISPLAY_CHARS else text[:_DISPLAY_CHARS] + " [...]"


def write_review_item(
    queue_dir: str | os.PathLike,
    site: str,
    pair_id: str,
    en_lines: Sequence[str | None],
    other_lines: Sequence[str | None],
    other_en_lines: Sequence[str | None],
    links: Sequence[Link],
    scores: Sequence[float | None] | None = None,
    suspect_en: Sequence[int] = (),
    suspect_other: Sequence[int] = (),
    en_url: str = "",
    other_url: str = "",
) -> tuple[Path, Path]:
    """Write the HTML view and the editable TSV of one page pair to ``queue_dir/site/``.

    Args:
        queue_dir: the review queue root (e.g. ``results/review``).
        site: site name (a sub-folder).
        pair_id: page pair id (file name stem).
        en_lines: English lines.
        other_lines: other-language lines.
        other_en_lines: their English translations (None where untranslated).
        links: proposed links (e.g. line i with line i, or the DP's links); deletions allowed.
        scores: word cosine of each link, shown to the reviewer.
        suspect_en: English line indices flagged by the paper's check.
        suspect_other: other-side line indices flagged.
        en_url: shown in the page header.
        other_url: shown in the page header.

    Returns:
        the HTML and TSV paths.
    """
    folder = Path(queue_dir) / site
    scores = list(scores) if scores is not None else [None] * len(links)
    s_en, s_ot = set(suspect_en), set(suspect_other)
    fp = fingerprint(en_lines, other_lines)

    buf = io.StringIO()
    buf.write(
        f"# parasim-review pair_id={pair_id} n_en={len(en_lines)} "
        f"n_other={len(other_lines)} fingerprint={fp}\n"
    )
    w = csv.writer(buf, delimiter="\t", lineterminator="\n")
    w.writerow(TSV_COLUMNS)
    rows_html = []
    for (src, tgt), sc in zip(links, scores, strict=True):
        suspect = bool(s_en.intersection(src) or s_ot.intersection(tgt))
        keep = 1 if (src and tgt and not suspect) else 0
        en_t = " ".join(_cut(en_lines[i]) for i in src)
        ot_t = " ".join(_cut(other_lines[j]) for j in tgt)
        oe_t = " ".join(_cut(other_en_lines[j]) for j in tgt if other_en_lines[j] is not None)
        score = "" if sc is None or sc != sc else f"{sc:.3f}"
        flat = [x.replace("\t", " ").replace("\n", " ") for x in (en_t, ot_t, oe_t)]
        w.writerow([_ids(src), _ids(tgt), keep, score, int(suspect), *flat])
        cls = ' class="suspect"' if suspect else ""
        rows_html.append(
            f"<tr{cls}><td>{_ids(src)}</td><td>{html.escape(en_t)}</td><td>{_ids(tgt)}</td>"
            f"<td>{html.escape(ot_t)}</td><td class=mt>{html.escape(oe_t)}</td>"
            f"<td>{score}</td></tr>"
        )
    tsv_path = folder / f"{pair_id}.tsv"
    _atomic_write(tsv_path, buf.getvalue())

    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>review {html.escape(pair_id)}</title>
<style>
body {{ font-family: sans-serif; margin: 1em; }}
table {{ border-collapse: collapse; width: 100%; }}
td, th {{ border: 1px solid #ccc; padding: 3px 6px; vertical-align: top; font-size: 90%; }}
tr.suspect td {{ background: #ffe0e0; }}
td.mt {{ color: #555; font-style: italic; }}
</style></head><body>
<h1>Review {html.escape(pair_id)} ({html.escape(site)})</h1>
<p>EN: <a href="{html.escape(en_url)}">{html.escape(en_url)}</a><br>
other: <a href="{html.escape(other_url)}">{html.escape(other_url)}</a></p>
<p>Suspect rows are red. Edit <code>{html.escape(pair_id)}.tsv</code> (columns en_idx, other_idx,
keep; 0-based line indices, comma-separated for several lines) and save it as
<code>done/{html.escape(pair_id)}.tsv</code>.</p>
<table><tr><th>en</th><th>English</th><th>other</th><th>other language</th>
<th>translation</th><th>score</th></tr>
{chr(10).join(rows_html)}
</table></body></html>
"""
    html_path = folder / f"{pair_id}.html"
    _atomic_write(html_path, page)
    return html_path, tsv_path


def _parse_ids(cell: str) -> tuple[int, ...]:
    cell = (cell or "").strip().strip("[]")
    if not cell:
        return ()
    return tuple(int(x) for x in cell.replace(" ", ",").split(",") if x.strip())


def read_review_tsv(path: str | os.PathLike) -> ReviewedPair:
    """Read one reviewed TSV.

    Raises:
        ValueError: naming the file and line of a malformed row or a missing column.
    """
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")
    meta: dict[str, str] = {}
    lines = text.splitlines()
    body = []
    for line in lines:
        if line.startswith("#"):
            if "parasim-review" in line:
                for tok in line.split()[2:]:
                    k, _, v = tok.partition("=")
                    meta[k] = v
            continue
        body.append(line)
    reader = csv.DictReader(body, delimiter="\t")
    missing = {"en_idx", "other_idx", "keep"} - set(reader.fieldnames or [])
    if missing:
        raise ValueError(f"{path}: missing column(s) {sorted(missing)}")
    links: list[Link] = []
    for no, row in enumerate(reader, 2):
        keep = (row.get("keep") or "").strip().lower()
        if keep not in _TRUE | _FALSE:
            raise ValueError(f"{path}: row {no}: keep must be 1/0, got {row.get('keep')!r}")
        try:
            src, tgt = _parse_ids(row["en_idx"]), _parse_ids(row["other_idx"])
        except ValueError as err:
            raise ValueError(f"{path}: row {no}: bad line index ({err})") from err
        if keep in _TRUE and src and tgt:
            links.append((src, tgt))

    def as_int(v: str | None) -> int | None:
        return int(v) if v and v.isdigit() else None

    return ReviewedPair(
        pair_id=meta.get("pair_id") or path.stem,
        links=links,
        n_en=as_int(meta.get("n_en")),
        n_other=as_int(meta.get("n_other")),
        fingerprint=meta.get("fingerprint"),
        path=path,
    )


def load_reviewed(
    folder: str | os.PathLike,
    errors: list[str] | None = None,
    log: logging.Logger | None = None,
) -> dict[str, ReviewedPair]:
    """Read every ``*.tsv`` in ``folder`` (a ``done/`` folder), keyed by pair id.

    A malformed file is skipped and reported (appended to ``errors``, logged); it never stops
    the run. A missing folder gives an empty dict.
    """
    folder = Path(folder)
    out: dict[str, ReviewedPair] = {}
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.tsv")):
        try:
            item = read_review_tsv(path)
        except (ValueError, OSError, UnicodeDecodeError) as err:
            msg = f"skipped reviewed file: {err}"
            if errors is not None:
                errors.append(msg)
            if log:
                log.warning(msg)
            continue
        out[item.pair_id] = item
    return out
