"""vramlint's cache folder: results that cost a hook seconds or tens of milliseconds and depend
only on what their key says, kept on disk between runs.

Two kinds live there, each in a folder of its own: ``shapes`` (what transformers builds for a
model config, ``models/shape_cache.py``) and ``replays`` (the allocator replay of a plan,
:class:`Replays`, which the command line hands to ``memory/reserve.py``). Where: ``VRAMLINT_CACHE_DIR`` if set, else the platform's user cache
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


class Replays:
    """The allocator replays of plans (``memory.reserve.STORE``), by a key of what a replay
    depends on: the plan's compared fields (what makes two plans equal: not where a value came
    from) and vramlint's own code."""

    KIND = "replays"
    FORMAT = 1                    # bumped when the stored form changes: older entries are not read

    def __init__(self) -> None:
        self._texts: dict[int, tuple[object, str]] = {}
        self._code: str | None = None

    def get(self, plan):
        from vramlint.memory.parts.allocator import Peaks
        stored = read(self.KIND, self.key(plan))
        if isinstance(stored, list) and len(stored) == 2 and all(type(v) is int and v >= 0 for v in stored):
            return Peaks(*stored)
        return None

    def put(self, plan, peaks) -> None:
        write(self.KIND, self.key(plan), [peaks.allocated, peaks.reserved])

    def key(self, plan) -> str:
        import hashlib
        from dataclasses import fields
        compared = [(f.name, self._text(getattr(plan, f.name)) if f.name == "model" else getattr(plan, f.name))
                    for f in fields(plan) if f.compare]
        return hashlib.sha256(f"{self.FORMAT}\n{self.code()}\n{compared!r}".encode()).hexdigest()

    def _text(self, model) -> str:
        """The model's repr, made once per model object: a 126-layer model's takes milliseconds, and
        a hint search keys a dozen plans of the same model (the object is held, so its id is not reused)."""
        held = self._texts.get(id(model))
        if held is None or held[0] is not model:
            if len(self._texts) > 16:
                self._texts.clear()
            held = self._texts[id(model)] = (model, repr(model))
        return held[1]

    def code(self) -> str:
        """vramlint's version and every module's path, size and modification time: an installed
        release never changes, and a memory model edited in a checkout is a new key."""
        if self._code is None:
            import vramlint
            package = os.path.dirname(vramlint.__file__)
            stamps = [getattr(vramlint, "__version__", "")]
            for where, folders, files in os.walk(package):
                folders[:] = sorted(f for f in folders if f != "__pycache__")
                for file in sorted(f for f in files if f.endswith(".py")):
                    stat = os.stat(os.path.join(where, file))
                    stamps.append(f"{os.path.relpath(os.path.join(where, file), package)}:{stat.st_size}:"
                                  f"{stat.st_mtime_ns}")
            self._code = "\n".join(stamps)
        return self._code
