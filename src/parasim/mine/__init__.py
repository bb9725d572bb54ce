"""Natural divergences mined from a site's positives (:mod:`parasim.mine.stage`)."""

from .stage import MineSettings, mine_divergences

__all__ = ["MineSettings", "mine_divergences"]
