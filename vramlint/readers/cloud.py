"""Cloud task specs: the GPUs a SkyPilot or dstack task asks for, and the commands it runs.

A task YAML states what the shell scripts cannot: the GPU type with the count (``accelerators:
H100:8`` in SkyPilot, ``gpu: H100:8`` or ``gpu: 80GB:8`` in dstack) and the nodes (``num_nodes`` /
``nodes``). Its commands (SkyPilot's ``run`` block, dstack's ``commands``) are read as a shell
script (``readers/shell.py``) with the variables the platform sets before they run, taken from
the same file: ``$SKYPILOT_NUM_GPUS_PER_NODE`` / ``$SKYPILOT_NUM_NODES`` (SkyPilot 0.10 docs,
"Environment variables"), ``$DSTACK_GPUS_NUM`` (all GPUs of the task) / ``$DSTACK_GPUS_PER_NODE`` /
``$DSTACK_NODES_NUM`` (dstack 0.19 docs, "Tasks: distributed tasks"), and the task's own ``envs``
/ ``env``. Where a task accepts several GPU types (``{A100:8, H100:8}``), the first is the one
checked and the others are said.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from vramlint.documents import Document

if TYPE_CHECKING:                   # the shell reader (and its parser) is imported by the checks that read one
    from vramlint.readers.shell import Word

SKYPILOT_KEYS = frozenset({"run", "setup", "resources", "num_nodes", "envs", "file_mounts", "workdir", "secrets"})
DSTACK_TYPES = frozenset({"task", "service", "dev-environment"})


@dataclass(frozen=True)
class Script:
    """One block of commands a task runs, and the line before its first line in the YAML."""

    text: str
    line0: int


@dataclass
class CloudTask:
    platform: str                                       # SkyPilot or dstack
    gpu: Word | None = None                             # the GPU type (or size) as written, and where
    per_node: Word | None = None                        # GPUs per node
    nodes: Word | None = None
    alternatives: tuple[str, ...] = ()                  # other GPU types the task accepts
    scripts: list[Script] = field(default_factory=list)
    variables: dict[str, Word] = field(default_factory=dict)
    line: int = 1                                       # where the task (a manifest's object) begins
    unread: str = ""                                    # a job stated in a way vramlint does not read yet


def line0(line: int, text: str) -> int:
    """The line before a command block's first, from the line its YAML value is at: a block scalar
    (``run: |``) starts on the next line, a one-line value on that line."""
    return line if "\n" in text.rstrip("\n") else line - 1


def looks_like_skypilot(data: Any) -> bool:
    """A SkyPilot task: ``run`` / ``setup`` commands with ``resources``, ``num_nodes`` or ``envs``."""
    return isinstance(data, dict) and isinstance(data.get("run"), str) and bool(
        {"resources", "num_nodes", "envs", "setup", "file_mounts"} & data.keys()) and "commands" not in data


def looks_like_dstack(data: Any) -> bool:
    """A dstack run configuration: ``type: task|service`` with ``commands``."""
    return isinstance(data, dict) and data.get("type") in DSTACK_TYPES and isinstance(data.get("commands"), list)


def _word(document: Document, path: str, value: Any) -> Word:
    from vramlint.readers.shell import Word
    where = document.locate(path)
    return Word(None if value is None else str(value), where.line, where.column)


def _split_count(text: str) -> tuple[str, str | None]:
    """``H100:8`` -> (``H100``, ``8``); ``A100`` -> (``A100``, ``1``)."""
    name, _, count = text.strip().partition(":")
    return name.strip(), (count.strip() or None) if _ else "1"


def read_skypilot(document: Document) -> CloudTask:
    from vramlint.readers.shell import Word
    data = document.data
    task = CloudTask("SkyPilot")
    resources = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    accelerators = resources.get("accelerators")
    options: list[tuple[str, str | None]] = []
    if isinstance(accelerators, str):
        options = [_split_count(accelerators)]
    elif isinstance(accelerators, dict):            # {H100: 8} or the set {A100:8, H100:8} (keys "A100:8")
        for key, value in accelerators.items():
            options.append((str(key), str(value)) if value is not None else _split_count(str(key)))
    elif isinstance(accelerators, list):
        options = [_split_count(str(item)) for item in accelerators]
    if options:
        at = document.locate("$.resources.accelerators")
        name, count = options[0]
        task.gpu = Word(name, at.line, at.column)
        task.per_node = Word(count, at.line, at.column)
        task.alternatives = tuple(f"{n}:{c}" for n, c in options[1:])
    nodes = data.get("num_nodes", 1)
    task.nodes = _word(document, "$.num_nodes", nodes) if "num_nodes" in data else Word("1", 1, 1)
    envs = data.get("envs") if isinstance(data.get("envs"), dict) else {}
    task.variables = {str(k): _word(document, f"$.envs.{k}", v) for k, v in envs.items()}
    for name, word in (("SKYPILOT_NUM_GPUS_PER_NODE", task.per_node), ("SKYPILOT_NUM_NODES", task.nodes)):
        if word is not None:
            task.variables[name] = word
    run = data.get("run")
    if isinstance(run, str):
        task.scripts.append(Script(run, document.locate("$.run").line))
    return task


_DSTACK_GPU = re.compile(r"^(?:(?P<name>[A-Za-z][\w-]*)(?::|$))?(?:(?P<memory>\d+(?:\.\d+)?\s*GB)(?::|$))?"
                         r"(?P<count>\d+(?:\.\.\d*)?)?$", re.I)


def read_dstack(document: Document) -> CloudTask:
    from vramlint.readers.shell import Word
    data = document.data
    task = CloudTask("dstack")
    resources = data.get("resources") if isinstance(data.get("resources"), dict) else {}
    gpu = resources.get("gpu")
    at = document.locate("$.resources.gpu")
    if isinstance(gpu, dict):
        name, memory, count = gpu.get("name"), gpu.get("memory"), gpu.get("count", 1)
        name = name[0] if isinstance(name, list) and name else name
    elif gpu is not None:
        found = _DSTACK_GPU.match(str(gpu).replace(" ", ""))
        name, memory, count = (found.group("name"), found.group("memory"), found.group("count")) if found else (
            None, None, None)
        if found and name and not memory and not count and name.isdigit():
            name, count = None, name
    else:
        name = memory = count = None
    if name or memory:
        task.gpu = Word(str(name or memory), at.line, at.column)
    if gpu is not None:
        text = str(count if count is not None else "1")
        task.per_node = Word(text if text.isdigit() else None, at.line, at.column,
                             unknown="" if text.isdigit() else f"gpu count {text} (a range: what is provisioned)")
    nodes = data.get("nodes", 1)
    task.nodes = _word(document, "$.nodes", nodes) if "nodes" in data else Word("1", 1, 1)
    env = data.get("env")
    if isinstance(env, list):
        for index, item in enumerate(env):
            key, eq, value = str(item).partition("=")
            where = document.locate(f"$.env[{index}]")
            task.variables[key] = Word(value if eq else None, where.line, where.column,
                                       unknown="" if eq else f"${key} (set when the task is submitted)")
    elif isinstance(env, dict):
        task.variables = {str(k): _word(document, f"$.env.{k}", v) for k, v in env.items()}
    per, nodes_word = task.per_node, task.nodes
    if per is not None:
        task.variables["DSTACK_GPUS_PER_NODE"] = per
        if per.text is not None and nodes_word.text and nodes_word.text.isdigit():
            task.variables["DSTACK_GPUS_NUM"] = Word(str(int(per.text) * int(nodes_word.text)), per.line, per.column)
    task.variables["DSTACK_NODES_NUM"] = nodes_word
    for index, command in enumerate(data.get("commands") or []):
        if isinstance(command, str):
            task.scripts.append(Script(command, line0(document.locate(f"$.commands[{index}]").line, command)))
    return task


def read_tasks(kind: str, document: Document) -> list[CloudTask]:
    """The tasks a spec of ``kind`` holds: one SkyPilot or dstack task, a manifest's workloads, a
    workflow's jobs."""
    if kind == "kubernetes":
        from vramlint.readers.kubernetes import read_kubernetes
        return read_kubernetes(document)
    if kind == "github-actions":
        from vramlint.readers.github_actions import read_github_actions
        return read_github_actions(document)
    return [{"skypilot": read_skypilot, "dstack": read_dstack}[kind](document)]
