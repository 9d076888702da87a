"""GitHub Actions workflows: the jobs whose ``run:`` steps launch training or serving.

A workflow states no GPU (``runs-on`` labels are the site's own names for its runners: ``gpu``,
``a100``, ``linux-gpu-t4``), so the type comes from ``--gpus`` and the count from the launch line,
as in a shell script. Each job of the workflow is a task whose ``run:`` steps are read as one
script, in order, with the ``env`` the workflow, the job and each step set (GitHub Actions docs,
"Workflow syntax": a step's ``env`` over its job's over the workflow's). An expression
``${{ matrix.gpus }}`` is substituted by GitHub before the shell runs: it is a value only the run
knows, named in the finding as written. A job that calls a reusable workflow (``uses:``) states its
steps elsewhere and is left to that file.
"""

from __future__ import annotations

import re
from typing import Any

from vramlint.documents import Document
from vramlint.readers.cloud import CloudTask, Script, line0

PLATFORM = "GitHub Actions"
_EXPRESSION = re.compile(r"\$\{\{.*?\}\}", re.S)


def looks_like_github_actions(data: Any) -> bool:
    """A workflow: ``jobs`` whose entries have ``steps`` or ``runs-on`` (``on:`` itself reads as
    the boolean true in YAML 1.1, so it is not relied on)."""
    jobs = data.get("jobs") if isinstance(data, dict) else None
    return isinstance(jobs, dict) and bool(jobs) and all(
        isinstance(job, dict) and ("steps" in job or "runs-on" in job or "uses" in job) for job in jobs.values())


def read_github_actions(document: Document) -> list[CloudTask]:
    """One task per job that runs steps, with its ``run:`` blocks and the variables they see."""
    from vramlint.readers.shell import Word
    data = document.data
    workflow_env = _env(document, "$.env", data.get("env"))
    tasks = []
    for name, job in data["jobs"].items():
        steps = job.get("steps") if isinstance(job.get("steps"), list) else []
        at = document.locate(f"$.jobs.{name}")
        task = CloudTask(PLATFORM, nodes=Word("1", at.line, at.column), line=at.line)
        task.variables = {**workflow_env, **_env(document, f"$.jobs.{name}.env", job.get("env"))}
        for index, step in enumerate(steps):
            if not isinstance(step, dict) or not isinstance(step.get("run"), str):
                continue
            where = f"$.jobs.{name}.steps[{index}]"
            task.variables.update(_env(document, f"{where}.env", step.get("env")))
            first = line0(document.locate(f"{where}.run").line, step["run"])
            text, expressions = _substituted(step["run"], first, document.text.splitlines())
            task.variables.update(expressions)
            task.scripts.append(Script(text, first))
        if task.scripts:
            tasks.append(task)
    return tasks


def _env(document: Document, path: str, env: Any) -> dict:
    from vramlint.readers.shell import Word
    if not isinstance(env, dict):
        return {}
    out = {}
    for key, value in env.items():
        where = document.locate(f"{path}.{key}")
        text = None if value is None else str(value)
        unknown = f"{text} (a GitHub Actions expression, known when the workflow runs)" if text and \
            _EXPRESSION.search(text) else ""
        out[str(key)] = Word(None if unknown else text, where.line, where.column, unknown=unknown)
    return out


def _substituted(text: str, line0: int, lines: list[str]) -> tuple[str, dict]:
    """The step's text with each ``${{ ... }}`` replaced by a shell variable of the same length (the
    columns of what follows stay where they are), and those variables, each unknown as written and
    placed where it is written in the workflow (``lines``: the workflow's)."""
    from vramlint.readers.shell import Word
    variables = {}

    def variable(found: re.Match) -> str:
        written = found.group(0)
        if "\n" in written or len(written) < 8:
            return written
        line = line0 + 1 + text.count("\n", 0, found.start())
        column = lines[line - 1].find(written) + 1 if 0 < line <= len(lines) else 0
        name = f"GHA{len(variables)}".ljust(len(written) - 1, "_")
        variables[name] = Word(None, line, max(column, 1), unknown=f"{written} (a GitHub Actions expression, known "
                                                                 "when the workflow runs)")
        return "$" + name
    return _EXPRESSION.sub(variable, text), variables

