"""Frameworks whose source the repository holds (a fork, or a vendored copy): the version that
source states, and the argument names its dataclasses take. Read with ``ast``, never imported or
run: the repository's own copy is the code that runs, between releases included.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

# The file that states a framework's version, where a repository may hold it, and the assignment
# that does (LLaMA-Factory src/llamafactory/extras/env.py: VERSION = "0.9.2").
VERSIONS = {"llamafactory": (("src/llamafactory/extras/env.py", "llamafactory/extras/env.py"), "VERSION")}
# The argument dataclasses ``llamafactory-cli train`` parses a YAML into (hparams/ of 0.9.x).
LLAMAFACTORY_HPARAMS = ("model_args.py", "data_args.py", "finetuning_args.py", "generating_args.py",
                        "training_args.py", "evaluation_args.py")
LLAMAFACTORY_FOLDERS = ("src/llamafactory/hparams", "llamafactory/hparams")


def vendored_versions(root: Path) -> dict[str, tuple[str, str]]:
    """Each framework whose source the repository holds: (its version, the file that says so)."""
    found = {}
    for name, (paths, variable) in VERSIONS.items():
        for relative in paths:
            path = root / relative
            try:
                tree = ast.parse(path.read_text(encoding="utf-8", errors="replace")) if path.is_file() else None
            except (OSError, SyntaxError, ValueError):
                tree = None
            value = next((node.value.value for node in getattr(tree, "body", ()) if isinstance(node, ast.Assign)
                          and any(isinstance(t, ast.Name) and t.id == variable for t in node.targets)
                          and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)), None)
            if value:
                found[name] = (value, relative)
                break
    return found


def class_fields(text: str) -> dict[str, list[str]]:
    """Each class of a Python source and its annotated fields (a dataclass's arguments, in order);
    ``ClassVar`` annotations left out. The dev scripts read framework wheels with it too."""
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            names = [n.target.id for n in node.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
                     and "ClassVar" not in ast.unparse(n.annotation)]
            if names:
                out[node.name] = names
    return out


def argument_names(text: str) -> set[str]:
    """Every argument name the classes of a source take."""
    return {name for names in class_fields(text).values() for name in names}


def vendored_arguments(root: Path) -> frozenset[str] | None:
    """The argument names of the LLaMA-Factory copy the repository holds (its own hparams/), or
    None where it holds none (read once per set of those files as they stand)."""
    for folder in LLAMAFACTORY_FOLDERS:
        files = []
        for name in LLAMAFACTORY_HPARAMS:
            try:
                stat = (root / folder / name).stat()
            except OSError:
                continue
            files.append((root / folder / name, stat.st_mtime_ns, stat.st_size))
        if files:
            return _arguments_of(tuple(files))
    return None


@lru_cache(maxsize=8)
def _arguments_of(files: tuple[tuple[Path, int, int], ...]) -> frozenset[str] | None:
    try:
        return frozenset(set().union(*(argument_names(path.read_text(encoding="utf-8", errors="replace"))
                                       for path, _, _ in files)))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


# train_ppo_ray (0.11.x) defines its optimizer flags in a loop: ``for prefix in ("actor", "critic"):
# parser.add_argument(f"--{prefix}.adam.lr", ...)``
FLAG_PREFIXES = ("actor", "critic")


def _flag_names(argument: ast.expr) -> set[str]:
    """The flag names one ``add_argument`` positional spells: a string, or the loop's f-string."""
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return {argument.value[2:]} if argument.value.startswith("--") else set()
    if isinstance(argument, ast.JoinedStr):
        text = "".join(part.value if isinstance(part, ast.Constant) else "{prefix}" for part in argument.values)
        return {text[2:].format(prefix=prefix) for prefix in FLAG_PREFIXES} if text.startswith("--") else set()
    return set()


def argparse_flags(text: str) -> list[str]:
    """Every flag an argparse program's ``add_argument`` calls define (OpenRLHF's cli/ programs);
    the dev scripts read framework wheels with it too."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument":
            for argument in node.args:
                names |= _flag_names(argument)
    return sorted(names)


OPENRLHF_CLI = ("openrlhf/cli",)


def vendored_flags(root: Path, program: str) -> list[str] | None:
    """The flags of the OpenRLHF program the repository holds a copy of (``openrlhf/cli/NAME.py``:
    a fork such as LIMR's runs its own flags), or None where it holds none."""
    for folder in OPENRLHF_CLI:
        path = root / folder / f"{program}.py"
        try:
            stat = path.stat()
        except OSError:
            continue
        return _flags_of(path, stat.st_mtime_ns, stat.st_size)
    return None


@lru_cache(maxsize=8)
def _flags_of(path: Path, mtime: int, size: int) -> list[str] | None:
    try:
        return argparse_flags(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
