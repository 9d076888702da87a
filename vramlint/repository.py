"""The repository around a file: where a path a recipe names points, and which recipes name a file.

The frameworks open a path a recipe names (``deepspeed: examples/deepspeed/ds_z3_config.json``)
relative to the working directory of the launch, which is the repository root in their docs and
in a pre-commit hook. vramlint may run from elsewhere, so it also tries the recipe's own folder and
the folders above it, up to the repository root.

A DeepSpeed file is one half of a job whose other half is the recipe that names it; a hook that is
handed only the DeepSpeed file finds those recipes by walking the repository once per run: YAML
and JSON files under a size cap whose text mentions the file's name, that read as a recipe and
whose reference resolves to the same file.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from vramlint.patterns import script

SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".nox",
                       "site-packages", "build", "dist", ".mypy_cache", ".pytest_cache", ".ruff_cache", "wandb",
                       "outputs", "checkpoints"})
RECIPE_SUFFIXES = (".yaml", ".yml", ".json")
SCAN_LIMIT = 1 << 20          # bytes: recipes are small; larger files are data, not recipes
MARKERS = (".git", "pyproject.toml", ".pre-commit-config.yaml")


def real(path: str | Path) -> Path:
    """The absolute path with symlinks followed, as far as they lead: ``Path.resolve`` raises on a
    symlink loop (RuntimeError in Python 3.11), ``os.path.realpath`` stops at it."""
    return Path(os.path.realpath(path))


def root_of(path: str | Path) -> Path:
    """The repository root above ``path``: the nearest folder with .git, pyproject.toml or a
    pre-commit config, else the working directory."""
    folder = real(path).parent
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in MARKERS):
            return candidate
    return real(Path.cwd())


def find_referenced(name: str, from_path: str, folder_wanted: bool = False) -> Path | None:
    """The file (or, ``folder_wanted``, the non-empty folder) a recipe or launcher config names:
    relative to the working directory, the naming file's folder, or a folder above it (up to the
    repository root); absolute as given."""
    referenced = Path(name).expanduser()
    found = _non_empty_folder if folder_wanted else Path.is_file
    if referenced.is_absolute():
        return referenced if found(referenced) else None
    folder = real(from_path).parent
    root = root_of(from_path)
    candidates = [Path.cwd() / referenced, folder / referenced]
    for parent in folder.parents:
        candidates.append(parent / referenced)
        if parent == root:
            break
    return next((c for c in candidates if found(c)), None)


def _non_empty_folder(path: Path) -> bool:
    try:
        return path.is_dir() and any(path.iterdir())
    except OSError:
        return False


def _files(root: Path) -> list[Path]:
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        out += [Path(folder) / n for n in names if n.endswith(RECIPE_SUFFIXES)]
    return out


@lru_cache(maxsize=8)
def _repository_files(root: Path) -> tuple[Path, ...]:
    return tuple(sorted(_files(root)))


def scan_root(path: str | Path) -> Path:
    """Where to look for the recipes that name ``path``: the working directory when the file lies
    below it (a hook runs at the repository root), else the repository root above the file."""
    here, target = real(Path.cwd()), real(path)
    return here if here in target.parents else root_of(path)


def recipes_using(path: str) -> list:
    """The training recipes of the repository whose DeepSpeed reference is ``path``."""
    from vramlint.documents import ParseError, parse, read_text
    from vramlint.readers.registry import RECIPES, detect
    target = real(path)
    out = []
    for candidate in _repository_files(scan_root(path)):
        try:
            if candidate.stat().st_size > SCAN_LIMIT or real(candidate) == target:
                continue
            text = read_text(candidate)          # a regular file only: a FIFO would block the scan
            document = parse(text, shown(candidate)) if target.name in text else None
        except (OSError, ParseError):
            continue
        kind = detect(document.data) if document is not None else None
        if kind not in RECIPES:
            continue
        recipe = RECIPES[kind].read(document)
        named = recipe.deepspeed.value
        if recipe.training and isinstance(named, str):
            found = find_referenced(named, str(candidate))
            if found is not None and real(found) == target:
                out.append(recipe)
    return out


def shown(path: Path) -> str:
    """A path as a finding shows it: relative to the working directory when it lies below it."""
    try:
        return str(real(path).relative_to(real(Path.cwd())))
    except ValueError:
        return str(path)


@lru_cache(maxsize=8)
def _repository_scripts(root: Path) -> tuple[Path, ...]:
    out = []
    for folder, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".")]
        out += [Path(folder) / n for n in names if script(n)]
    return tuple(sorted(out))


def scripts_launching(path: str) -> list[Path]:
    """The launch scripts of the repository that run the file at ``path``: a recipe (``torchrun
    src/train.py recipe.yaml``, ``llamafactory-cli train recipe.yaml``, ``tune run ... --config``),
    an Accelerate config (``--config_file``) or a DeepSpeed JSON (``--deepspeed``): the job is
    the one they start, with the GPUs and the files they give it."""
    target = real(path)
    out = []
    for candidate in _repository_scripts(scan_root(path)):
        try:
            stat = candidate.stat()
        except OSError:
            continue
        if stat.st_size <= SCAN_LIMIT and target in _launched_by_script(candidate, stat.st_mtime_ns, stat.st_size):
            out.append(candidate)
    return out


@lru_cache(maxsize=4096)
def _launched_by_script(script: Path, mtime_ns: int, size: int) -> frozenset[Path]:
    """Every file a script's launches name, resolved: each script read and parsed once a run
    (keyed by its modification time and size), however many recipes ask."""
    from vramlint.documents import ParseError, read_text
    from vramlint.readers.launch import launches
    from vramlint.readers.shell import read_script
    try:
        text = read_text(script)
    except (OSError, ParseError):
        return frozenset()
    found = set()
    for launch in launches(read_script(text, str(script)).commands):
        for named in launched_files(launch):
            target = find_referenced(named, str(script))
            if target is not None:
                found.add(real(target))
    return frozenset(found)


def launched_files(launch) -> list[str]:
    """The files a launch names as its job's: the recipe, the Accelerate config, the DeepSpeed JSON."""
    words = [launch.recipe, launch.options.get("config_file"), launch.options.get("deepspeed_config_file")]
    words += [value for key, value, _ in launch.arguments if key in ("deepspeed", "config_file")]
    return [w.text for w in words if w is not None and w.text]
