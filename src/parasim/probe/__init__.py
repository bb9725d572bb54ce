"""PROBE: crawl a few dozen pages of a new site and suggest its ``sites:`` entry.

``parasim probe URL`` runs the crawl stage on a small sample (same crawler, politeness and
robots.txt rules), then reads the pages: their languages (declared and measured), which pairing
evidence they carry and how many pairs each kind yields through the pair stage, the URL rewrites
behind the pairs, the element holding most of the text (``main_selector``), ``data-*``
attributes that link pages, and other URL prefixes the site links itself by (``aliases``).
:mod:`parasim.probe.stage` runs the steps; :mod:`parasim.probe.evidence` and
:mod:`parasim.probe.structure` hold the pairing and page-structure ones.
"""

from parasim.probe.evidence import choose_evidence, diff_rewrite, evidence_counts
from parasim.probe.languages import measure_language
from parasim.probe.stage import ProbeError, Suggestion, probe_site, render_yaml, suggest_site

__all__ = [
    "ProbeError",
    "Suggestion",
    "choose_evidence",
    "diff_rewrite",
    "evidence_counts",
    "measure_language",
    "probe_site",
    "render_yaml",
    "suggest_site",
]
