"""The data files vramlint ships: ``vramlint/data`` and the JSON Schemas (``schemas_data`` in the
wheel, ``schemas/`` in a source checkout).

Read by path, beside this module, rather than through ``importlib.resources``: pip installs a
wheel's package data as plain files (pyproject.toml ``package-data``), and importing
``importlib.resources`` (zipfile, tempfile, shutil) would cost every hook run a fifth of a bare
interpreter's start-up.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SCHEMAS = (HERE / "schemas_data", HERE.parent / "schemas")    # installed wheel, source checkout


def data_path(relative: str) -> Path:
    """``data_path("shipped/llamafactory/examples/ds_z3.json")`` -> the file under vramlint/data."""
    return DATA / relative


@lru_cache(maxsize=None)
def data_json(relative: str):
    """A JSON file of vramlint/data, parsed once per process."""
    return json.loads(data_path(relative).read_text(encoding="utf-8"))


def schema_path(filename: str) -> Path:
    """A schema file: the wheel's copy, else the checkout's ``schemas/``."""
    return next((folder / filename for folder in SCHEMAS if (folder / filename).is_file()), SCHEMAS[-1] / filename)
