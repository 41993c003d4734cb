"""Where the shared specification material (golden encodings, conformance programs) lives."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("VTA_SHARED", REPO.parent / "shared"))
GOLDEN = SHARED / "spec" / "golden"
CONFORMANCE = SHARED / "conformance"


def require(path: Path) -> Path:
    """Skip the test when the shared specification material is not checked out beside the repo."""
    if not path.exists():
        pytest.skip(f"{path} not found (set VTA_SHARED)")
    return path
