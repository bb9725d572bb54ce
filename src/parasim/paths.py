"""Where the project's real data lies: ``../shared/data`` beside the checkout.

The benchmarks, the real-data tests and a few defaults of the workflow read public data written by
others (``../shared/data/README.md`` gives sources and formats). It is never copied into the
project; every reader finds it here, and skips cleanly (or says what is missing) when it is absent.
``PARASIM_SHARED_DATA`` points elsewhere (another checkout's data, a cluster's shared disk).
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ROOT", "SHARED_DATA", "shared_data"]

#: The checkout: the folder holding ``src/``, ``Snakefile`` and ``pyproject.toml``.
ROOT = Path(__file__).resolve().parents[2]
#: ``../shared/data`` beside the checkout (it may not exist).
SHARED_DATA = Path(os.environ.get("PARASIM_SHARED_DATA") or ROOT.parent / "shared" / "data")


def shared_data(*parts: str) -> Path:
    """A path under the shared data folder (``shared_data("parallel", "flores200-devtest")``)."""
    return SHARED_DATA.joinpath(*parts)
