"""MkDocs hooks (mkdocs.yml `hooks:`): BENCHMARKS.md as the Benchmarks page, and the docstrings'
Sphinx roles shown as plain code.

BENCHMARKS.md stays at the repository root, where the README and the code point to it. In the
repository, docs/benchmarks.md is a pointer to it (a link outside docs/, which MkDocs cannot
follow); when the site is built, that page gets the file's text instead.

The docstrings name code with Sphinx roles (:func:`make_divergences`, :mod:`~parasim.amr.parse`),
which Markdown renders as the role's name before a code span; the API pages show the code span
alone.
"""

from __future__ import annotations

import re
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[1] / "BENCHMARKS.md"
#: A Sphinx role before a code span, and the `~` that shortens a dotted name in Sphinx.
_ROLE = re.compile(r":(?:py:)?(?:mod|func|class|meth|attr|data|exc|obj|const):(<code>)~?")


def on_page_markdown(markdown, page, config, files):
    """Replace docs/benchmarks.md's text by BENCHMARKS.md's; leave every other page alone."""
    if page.file.src_uri == "benchmarks.md":
        return BENCHMARKS.read_text(encoding="utf-8")
    return markdown


def on_page_content(html, page, config, files):
    """Drop the Sphinx roles in front of code spans (the API reference's docstrings)."""
    return _ROLE.sub(r"\1", html)
