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


@pytest.fixture(autouse=True, scope="session")
def _shape_cache_in_a_scratch_folder(tmp_path_factory):
    """The tests never write to the user's cache folder: the shape cache lives in a scratch one
    (subprocesses the tests start inherit it)."""
    import os
    os.environ["VRAMLINT_CACHE_DIR"] = str(tmp_path_factory.mktemp("vramlint-cache"))
    yield
