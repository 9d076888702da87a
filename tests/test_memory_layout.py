"""The memory model's layout (issue 32): shared pieces in ``memory/parts`` that import no runtime,
one package per training runtime in ``memory/runtimes`` named in one registry, and no import circle
among the modules of ``memory/`` or of ``models/``, counting the imports inside functions too (a
circle put off to call time is still one)."""

from __future__ import annotations

import ast

from conftest import ROOT
from vramlint.memory import runtimes

MEMORY = ROOT / "vramlint" / "memory"
MODELS = ROOT / "vramlint" / "models"


def _module(path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(folder=MEMORY) -> dict[str, set[str]]:
    """Each module of the package -> the package's modules it imports, anywhere in it."""
    modules = {_module(p): p for p in folder.rglob("*.py")}
    package = _module(folder / "__init__.py")
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(package):
                submodules = {f"{node.module}.{a.name}" for a in node.names} & set(modules)
                found |= submodules or {node.module}       # ``from package import module``: the module
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_the_shared_parts_import_no_runtime_and_nothing_outside_parts():
    for name, targets in _imports().items():
        if name.startswith("vramlint.memory.parts"):
            assert all(t.startswith("vramlint.memory.parts") for t in targets), (name, targets)


def test_no_import_circle_in_memory_or_models():
    for folder in (MEMORY, MODELS):
        _acyclic(_imports(folder))


def _acyclic(graph: dict[str, set[str]]) -> None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            assert state.get(target) != 1, " -> ".join(path + [node, target])
            if target not in state:
                visit(target, path + [node])
        state[node] = 2
    for node in sorted(graph):
        if node not in state:
            visit(node, [])


def test_each_runtime_package_is_in_the_registry_with_the_same_interface():
    packages = {p.name for p in (MEMORY / "runtimes").iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(runtimes.NAMES)
    for name in runtimes.NAMES:
        module = runtimes.runtime(name)
        assert all(callable(getattr(module, f)) for f in ("states", "replay", "vision_tower", "frozen_shards")), name


def test_every_package_ships():
    """pyproject's explicit package list names every package of the source tree: a sub-package left
    out is missing from the wheel though an editable install (and so this suite) still finds it."""
    import tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {_module(p) for p in (ROOT / "vramlint").rglob("__init__.py")}
    assert found - listed == set()
