"""The files a run checks: the command line's paths, a directory walked with the hook's own
patterns (``patterns.wanted``), ``-`` for standard input, each file once; and what a walk met that
may state jobs but that vramlint does not read (``patterns.unread``: launch scripts, Python
configs), so a run that found no job can say what it left unread."""

from __future__ import annotations

import os
from pathlib import Path

from vramlint.errors import UsageError
from vramlint.patterns import launches, script, unread, wanted
from vramlint.repository import SKIP_DIRS

STDIN = "-"
MOST_WALKED = 100_000          # entries a walk looks at: a repository's configs lie well inside it


def expand(paths: list[str], left: list[str] | None = None) -> list[str]:
    """Files in the order given, a directory's in sorted order, without repeats (by real path);
    ``left`` collects the walked files that may state jobs in a form vramlint does not read."""
    out, seen = [], set()
    for path in paths:
        if not path:
            raise UsageError("an empty file name: name a file, a folder or - for standard input")
        for found in _walk(path, left) if path != STDIN and _is_dir(path) else [path]:
            key = found if found == STDIN else os.path.realpath(found)
            if key not in seen:
                seen.add(key)
                out.append(found)
    return out


def _is_dir(path: str) -> bool:
    """A folder to walk; a name no filesystem takes (a component past 255 bytes) is read as a file,
    whose reading says what is wrong with it."""
    try:
        return Path(path).is_dir()
    except (OSError, ValueError):
        return False


def _launches(path: str) -> bool:
    """A walked shell script that names a launcher (its first 64 KiB: scripts are short); one that
    names none (setup.sh) is not walked into the run."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return launches(handle.read(1 << 16))
    except OSError:
        return False


def _walk(folder: str, left: list[str] | None = None) -> list[str]:
    """The files under ``folder`` the hook would take; what is named on the command line is
    checked whatever it is (a FIFO gets its VL004), what a walk meets only if it is a regular file.
    A walk past ``MOST_WALKED`` entries stops with a one-line usage error: ``vramlint check /``
    would otherwise read the whole machine."""
    found, walked = [], 0
    for root, dirs, names in os.walk(folder):
        walked += len(dirs) + len(names)
        if walked > MOST_WALKED:
            raise UsageError(f"{folder}: more than {MOST_WALKED:,} files and folders under it: not a repository's "
                             "configs (name the folders that hold them)")
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = Path(os.path.relpath(path, folder)).as_posix()
            if wanted(relative) and os.path.isfile(path) and (not script(relative) or _launches(path)):
                found.append(path)        # regular files only: a FIFO, a device, a dangling or looping link is no config
            elif left is not None and unread(relative):
                left.append(path)
    return found
