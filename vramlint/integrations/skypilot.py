"""A SkyPilot admin policy: a task whose job will not fit its GPUs is refused at ``sky launch``.

Enable it where the SkyPilot client or API server reads its config (``~/.sky/config.yaml``, or
the API server's), with vramlint installed beside SkyPilot (``pip install 'vramlint[skypilot]'``)::

    admin_policy: vramlint.integrations.skypilot.VramlintPolicy

The policy is a function of the request (SkyPilot 0.14 ``sky/admin_policy.py``: ``AdminPolicy.
validate_and_mutate(UserRequest) -> MutatedUserRequest``; an exception refuses the request, which
SkyPilot reports as ``UserRequestRejectedByPolicy``): the task's ``resources.accelerators``,
``num_nodes``, ``envs`` and ``run`` are written as the task YAML they came from and checked as
``vramlint check`` checks that file (``readers/cloud.py``), the files its run names resolved in
its ``workdir``, with the ``[tool.vramlint]`` settings found there. A job estimated not to fit (or
a launch that fails by its own arithmetic) is refused with the findings; a job vramlint cannot
judge is let through with a warning on standard error, unless ``VRAMLINT_POLICY_STRICT=1``
refuses those too. Controller tasks (SkyPilot's own jobs and serve controllers) and tasks that
ask for no accelerator (no GPU memory to run out of) are not checked.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import sky

from vramlint.errors import UsageError

# Findings that say the job was not judged, rather than judged not to fit.
UNJUDGED = frozenset({"VL005", "VL011", "VL012"})


def task_yaml(task) -> dict:
    """The task as the YAML it was written as: what the check reads."""
    accelerators = []
    for resources in (task.resources if isinstance(task.resources, (set, list, tuple)) else [task.resources]):
        for name, count in (getattr(resources, "accelerators", None) or {}).items():
            accelerators.append(f"{name}:{count}")
    data: dict = {"num_nodes": task.num_nodes or 1, "envs": {k: v for k, v in (task.envs or {}).items()},
                  "run": task.run if isinstance(task.run, str) else ""}
    if accelerators:
        data["resources"] = {"accelerators": accelerators[0] if len(accelerators) == 1 else accelerators}
    return data


def check_task(task) -> list:
    """``vramlint check`` of the task: the results, one per job its run starts."""
    import yaml

    from vramlint.checker import Context, check_file
    from vramlint.settings import load_settings, merge
    workdir = Path(task.workdir) if isinstance(task.workdir, str) and Path(task.workdir).is_dir() else Path.cwd()
    path = str(workdir / f"{task.name or 'task'}.sky.yaml")
    settings = load_settings(None, start=workdir)
    values = merge(settings.for_file(path), {})
    model = None
    if values.get("model"):
        from vramlint.models import read_model
        model = read_model(values["model"])
    ctx = Context(None, {**values, "gpus": None}, frozenset(), model, values.get("near_threshold") or 0.9)
    return check_file(path, ctx, text=yaml.safe_dump(task_yaml(task), sort_keys=False))


def verdict(results: list, strict: bool) -> tuple[list[str], list[str]]:
    """(the reasons to refuse, the warnings to print) from the results of ``check_task``."""
    refuse, warn = [], []
    for result in results:
        for finding in result.findings:
            line = f"{finding.code} {finding.message}" + (f" (hint: {finding.hint})" if finding.hint else "")
            if finding.severity == "error" and (strict or finding.code not in UNJUDGED):
                refuse.append(line)
            elif finding.severity in ("error", "warning"):
                warn.append(line)
    return refuse, warn


class VramlintPolicy(sky.AdminPolicy):
    """Refuses a task whose job vramlint estimates will not fit the GPUs it asks for."""

    @classmethod
    def validate_and_mutate(cls, user_request):
        task = user_request.task
        is_controller = getattr(task, "is_controller_task", None)
        if not (callable(is_controller) and is_controller()) and "resources" in task_yaml(task):
            try:
                results = check_task(task)
            except UsageError as exc:       # a task vramlint cannot read (a GPU it does not know): said, not refused
                results = []
                print(f"vramlint: warning: not checked: {exc}", file=sys.stderr)
            refuse, warn = verdict(results, os.environ.get("VRAMLINT_POLICY_STRICT") == "1")
            for line in warn:
                print(f"vramlint: warning: {line}", file=sys.stderr)
            if refuse:
                raise sky.exceptions.UserRequestRejectedByPolicy(
                    "vramlint: the job will not fit the GPUs the task asks for:\n  " + "\n  ".join(refuse))
        return sky.MutatedUserRequest(task=task, skypilot_config=user_request.skypilot_config)
