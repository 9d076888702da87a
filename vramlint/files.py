"""The files a run checks: the command line's paths, a directory walked with the hook's own
patterns (``patterns.wanted``), ``-`` for standard input, each file once."""

from __future__ import annotations

import os
from pathlib import Path

from vramlint.patterns import wanted
from vramlint.repository import SKIP_DIRS

STDIN = "-"


def expand(paths: list[str]) -> list[str]:
    """Files in the order given, a directory's in sorted order, without repeats (by real path)."""
    out, seen = [], set()
    for path in paths:
        for found in _walk(path) if path != STDIN and Path(path).is_dir() else [path]:
            key = found if found == STDIN else os.path.realpath(found)
            if key not in seen:
                seen.add(key)
                out.append(found)
    return out


def _walk(folder: str) -> list[str]:
    """The files under ``folder`` the hook would take; what is named on the command line is
    checked whatever it is (a FIFO gets its VL004), what a walk meets only if it is a regular file."""
    found = []
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = os.path.join(root, name)
            if wanted(Path(os.path.relpath(path, folder)).as_posix()) and os.path.isfile(path):
                found.append(path)        # regular files only: a FIFO, a device, a dangling or looping link is no config
    return found
