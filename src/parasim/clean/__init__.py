"""CLEAN stage: aligned sentence pairs -> positives that are really translations.

Hard rules (:mod:`.rules`, after bicleaner-hardrules), line-level language identification
(:mod:`.langid`, heliport) and deduplication with page-furniture flags. The stage function:
:mod:`parasim.clean.stage`.
"""

from parasim.clean.stage import CleanSettings, LangidSettings, clean_positives

__all__ = ["CleanSettings", "LangidSettings", "clean_positives"]
