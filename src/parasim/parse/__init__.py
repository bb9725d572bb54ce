"""PARSE stage: the HTML of paired pages to clean text lines (seed paper, section 2.1.2).

See :mod:`parasim.parse.stage` for the line rules and the decisions on bad input.
"""

from parasim.parse.stage import (
    DROP_REASONS,
    PairText,
    ParseSkip,
    clean_lines,
    page_pair_lines,
    parse_pairs,
)

__all__ = [
    "DROP_REASONS",
    "PairText",
    "ParseSkip",
    "clean_lines",
    "page_pair_lines",
    "parse_pairs",
]
