"""CLEAN stage: aligned sentence pairs -> positives that are really translations.

Hard rules (:mod:`.rules`, after bicleaner-hardrules), line-level language identification
(:mod:`.langid`, heliport) and deduplication with page-furniture flags. The stage function:
:mod:`parasim.clean.stage`.
"""

from parasim.clean.stage import DEFAULTS, clean_positives, settings

__all__ = ["DEFAULTS", "clean_positives", "settings"]
