"""PAIR stage: find each English page's counterpart in every other language of its site.

See :mod:`parasim.pair.stage` for the evidence kinds and how candidates are chosen.
"""

from parasim.pair.stage import (
    EVIDENCE_KINDS,
    LINK_KINDS,
    UNPAIRED_REASONS,
    PageLinks,
    clean_url,
    extract_links,
    norm_lang,
    pair_pages,
    rewrite_targets,
)

__all__ = [
    "EVIDENCE_KINDS",
    "LINK_KINDS",
    "UNPAIRED_REASONS",
    "PageLinks",
    "clean_url",
    "extract_links",
    "norm_lang",
    "pair_pages",
    "rewrite_targets",
]
