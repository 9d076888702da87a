"""vramlint's cache folder: results that cost a hook seconds or tens of milliseconds and depend
only on what their key says, kept on disk between runs.

Two kinds live there, each in a folder of its own: ``shapes`` (what transformers builds for a
model config, ``models/shape_cache.py``) and ``replays`` (the allocator replay of a plan,
``memory/reserve.py``). Where: ``VRAMLINT_CACHE_DIR`` if set, else the platform's user cache
folder (``XDG_CACHE_HOME`` or ``~/.cache`` on Linux, ``~/Library/Caches`` on macOS,
``LOCALAPPDATA`` on Windows) under ``vramlint``; nowhere else. Each entry is JSON (never pickle: a
cache file is data, not code), written to a temporary file in the same folder and renamed over
the entry, so concurrent hook processes never read half a file; an entry that cannot be read or
written is computed again, silently.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def folder(kind: str) -> Path:
    """The folder of one kind of entry, as the platform keeps a user's caches (``VRAMLINT_CACHE_DIR`` wins)."""
    env = os.environ
    if env.get("VRAMLINT_CACHE_DIR"):
        return Path(env["VRAMLINT_CACHE_DIR"]).expanduser() / kind
    if sys.platform == "win32":
        return Path(env.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local") / "vramlint" / "Cache" / kind
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "vramlint" / kind
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache").expanduser() / "vramlint" / kind


def read(kind: str, name: str) -> Any:
    """The stored JSON value, or None where there is none or it cannot be read."""
    try:
        return json.loads((folder(kind) / f"{name}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None


def write(kind: str, name: str, value: Any) -> None:
    """Written whole or not at all: a temporary file in the folder, renamed over the entry."""
    import tempfile
    temporary = None
    try:
        where = folder(kind)
        where.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=where, prefix=".", suffix=".tmp")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(value, out)
        os.replace(temporary, where / f"{name}.json")
    except (OSError, TypeError, ValueError):
        if temporary is not None:
            Path(temporary).unlink(missing_ok=True)
