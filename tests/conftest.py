"""Shared paths: the real files vramlint is tested on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
SHARED = ROOT.parent / "shared"
CORPUS = SHARED / "corpus"
EXAMPLES = ROOT / "examples"


def shared_or_skip(path: Path) -> Path:
    """The shared corpus sits beside the repo on developer machines and in CI."""
    if not path.exists():
        pytest.skip(f"{path} not present (../shared is laid beside the repo)")
    return path


@pytest.fixture(scope="session")
def expected_counts() -> dict:
    return json.loads((DATA / "param_counts.json").read_text())
