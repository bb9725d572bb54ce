"""Shared test fixtures (keep small)."""

from __future__ import annotations

from pathlib import Path

import pytest

#: ../shared/data relative to the repository root; absent in a user's fresh clone.
SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared real-data folder; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"shared data not found at {SHARED_DATA}")
    return SHARED_DATA
