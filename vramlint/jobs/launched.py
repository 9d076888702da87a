"""A file that launch scripts of its repository run (a recipe, a DeepSpeed or Accelerate config) is
the job they start, with their GPUs and launch config, not the file alone under plain DDP on
``--gpus``."""

from __future__ import annotations

from pathlib import Path

from vramlint.documents import Document, read_text
from vramlint.jobs.result import Context, FileResult
from vramlint.repository import real, scripts_launching, shown

# A file that many scripts run (a shared recipe of a sweep) is checked through the first few, in
# path order, and says how many it left: each is a full check of a script.
MOST_SCRIPTS = 4


def launched_by(path: str, result: FileResult, ctx: Context, own: list | tuple = ()) -> list[FileResult] | None:
    """The jobs the repository's launch scripts start with ``path``: checked there when a script
    is in this run, else through the scripts here. None where the command line says how to run it
    (a GPU count or ``--launch-config``), where no script runs it, or where a launch's own check
    reads it (``Context.from_launch``)."""
    if ctx.from_launch or ctx.cluster is None or (ctx.cluster.counted and "gpus" in ctx.stated) \
            or ctx.values.get("launch_config") or "model" in ctx.stated or not Path(path).is_file():
        return None
    from vramlint.jobs.script import check       # the shell reader: imported where a script runs the file
    scripts = scripts_launching(path)
    if not scripts:
        return None
    named = ", ".join(shown(launcher) for launcher in scripts)
    if any(str(real(launcher)) in ctx.run_paths for launcher in scripts):
        result.job = False
        result.skip(f"not a job of its own: {named} launch(es) it, checked there")
        result.findings.extend(own)            # the file's own syntax and schema findings stay its own
        return [result]
    out = []
    for launcher in scripts[:MOST_SCRIPTS]:
        name = shown(launcher)
        for one in check(Document(name, read_text(launcher), None), FileResult(name, cluster=ctx.cluster), ctx):
            if any(real(read) == real(path) for read in one.reads):
                one.via, one.path = f"{name}, {one.via}", path
                out.append(one)
    if out and len(scripts) > MOST_SCRIPTS:
        out[0].notes.append(f"{len(scripts)} scripts launch it: checked through the first {MOST_SCRIPTS}; "
                            f"{', '.join(shown(s) for s in scripts[MOST_SCRIPTS:])} not (check them by name)")
    return out or None
