"""The JSON Schemas of ``schemas/``, from the installed wheel or from a source checkout.

The schemas live at the top of the repository, where editors and people find them, and are
packaged as ``vramlint.schemas_data`` in the wheel (see pyproject.toml ``package-dir``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path

SOURCE_TREE = Path(__file__).resolve().parent.parent / "schemas"


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """``load_schema("settings")`` -> the parsed ``settings.schema.json``."""
    filename = f"{name}.schema.json"
    local = SOURCE_TREE / filename
    if local.is_file():
        return json.loads(local.read_text(encoding="utf-8"))
    return json.loads(resources.files("vramlint.schemas_data").joinpath(filename).read_text(encoding="utf-8"))
