"""Settings: ``[tool.vramlint]`` in pyproject.toml (or ``--config PATH``), so a hook needs no flags.

One merge order, as flake8 does it: built-in defaults ← the settings table (and the first
``[[tool.vramlint.overrides]]`` entry whose ``files`` pattern matches the file being checked) ← the
command line. ``files`` is a gitignore-style pattern (``pathspec``, as black and other linters
match), matched against the file's path relative to the folder of the settings file, whatever the
working directory: ``*70b*`` matches at any depth, ``configs/70b/*.json`` from that folder down, and
``*`` never crosses a ``/``. The table is validated against ``schemas/settings.schema.json``; an
unknown key is rejected by name with the closest known key, never silently ignored.
"""

from __future__ import annotations

import difflib
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any


from vramlint.errors import UsageError, clipped
from vramlint.repository import real
from vramlint.schemas import conforms, load_schema

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

DEFAULTS: dict[str, Any] = {"near_threshold": 0.90, "strict": False, "optimizer": "adamw", "attn": "auto",
                            "lora_targets": "all-linear", "tp": 1, "ignore": [], "format": "auto"}


@dataclass(frozen=True)
class Settings:
    values: dict[str, Any] = field(default_factory=dict)
    overrides: tuple[dict[str, Any], ...] = ()
    source: str = "defaults"
    root: Path | None = None       # the settings file's folder: override patterns are relative to it

    def for_file(self, path: str | None = None) -> dict[str, Any]:
        """Defaults, then the table, then the first override whose glob matches ``path``."""
        return {**DEFAULTS, **self.values, **self.override_for(path)}

    def override_for(self, path: str | None) -> dict[str, Any]:
        """The first ``[[tool.vramlint.overrides]]`` entry whose glob matches ``path``, without
        its ``files``: values stated for that file, which win over what the file says."""
        if path is None or not self.overrides:
            return {}
        relative = self.relative(path)
        for override in self.overrides:
            patterns = override["files"] if isinstance(override["files"], list) else [override["files"]]
            import pathspec                  # only for a settings file with overrides
            if pathspec.GitIgnoreSpec.from_lines(patterns).match_file(relative):
                return {k: v for k, v in override.items() if k != "files"}
        return {}

    def relative(self, path: str) -> str:
        """A file's path as the override patterns see it: relative to the settings' folder (the
        path as given where the file lies outside it)."""
        if self.root is None:
            return PurePath(path).as_posix()
        resolved = real(path)
        try:
            return resolved.relative_to(real(self.root)).as_posix()
        except ValueError:
            return PurePath(path).as_posix()


def _validate(table: dict, where: str) -> None:
    schema = load_schema("settings")
    if conforms(table, schema):         # a valid table (most) never imports jsonschema
        return
    import jsonschema
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(table))
    if error is None:
        return
    if error.validator == "additionalProperties":
        known = set(error.schema.get("properties", {}))
        unknown = sorted(set(error.instance) - known)
        close = difflib.get_close_matches(unknown[0], sorted(known), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise UsageError(f"{where}: unknown setting {unknown[0]!r}{hint}")
    location = ".".join(str(p) for p in error.absolute_path) or "table"
    raise UsageError(f"{where}: {location}: {error.message}")


def _read(path: Path) -> dict:
    """A settings file, read as configs are (``documents.read_text``: a regular file under the
    size cap, UTF-8), then parsed as TOML."""
    from vramlint.documents import ParseError, read_text
    try:
        return tomllib.loads(read_text(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        raise UsageError(f"{path}: {exc.message}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:
        raise UsageError(f"{path}: nested too deep to be settings") from None


def _vramlint_table(data: dict, path: Path) -> object:
    """``[tool.vramlint]`` of a pyproject.toml (None where it has none); a ``tool`` that is not a
    table is the file's error, said in one line."""
    tool = data.get("tool", {})
    if not isinstance(tool, dict):
        raise UsageError(f"{path}: tool is a {type(tool).__name__}, not a table")
    return tool.get("vramlint")


# An overrides pattern no path needs: runs of '*' and many wildcards make the glob's regular
# expression backtrack for minutes (pathspec compiles gitignore patterns to regular expressions).
MOST_WILDCARDS = 16
MOST_PATTERN = 1024


def _check_patterns(table: dict, where: str) -> None:
    for override in table.get("overrides", []):
        patterns = override["files"] if isinstance(override["files"], list) else [override["files"]]
        for pattern in patterns:
            wild = sum(pattern.count(c) for c in "*?[")
            if len(pattern) > MOST_PATTERN or wild > MOST_WILDCARDS or "***" in pattern:
                raise UsageError(f"{where}: overrides files {clipped(pattern)!r} is too complex ({wild} wildcards, "
                                 f"{len(pattern)} characters; at most {MOST_WILDCARDS} and {MOST_PATTERN})")


def load_settings(config: str | None = None, start: Path | None = None) -> Settings:
    """``--config PATH`` (its ``[tool.vramlint]``, or the whole file for a vramlint.toml), else the
    nearest pyproject.toml at or above ``start`` (the working directory) that has the table."""
    if config:
        path = Path(config)
        data = _read(path)
        if "tool" in data:                      # a pyproject.toml: its [tool.vramlint] table
            table, where = _vramlint_table(data, path), f"{path} [tool.vramlint]"
            if table is None:
                raise UsageError(f"{path}: no [tool.vramlint] table")
        else:                                   # a vramlint.toml: the whole file
            table, where = data, str(path)
    else:
        for folder in [start or Path.cwd(), *real(start or Path.cwd()).parents]:
            candidate = folder / "pyproject.toml"
            if candidate.is_file():
                table = _vramlint_table(_read(candidate), candidate)
                if table is not None:
                    path, where = candidate, f"{candidate} [tool.vramlint]"
                    break
        else:
            return Settings()
    _validate(table, where)
    _check_patterns(table, where)
    values = {k: v for k, v in table.items() if k != "overrides"}
    return Settings(values, tuple(table.get("overrides", [])), where, real(path).parent)


def merge(settings: dict[str, Any], cli: dict[str, Any]) -> dict[str, Any]:
    """Command-line values that were given (not None, not False for flags) win over settings."""
    return {**settings, **{k: v for k, v in cli.items() if v is not None and v is not False}}
