"""From a document to the jobs it states: one module per kind of file, one path for all.

The checker reads a file (``inputs.load``), and ``check_document`` hands it to the module its
format registers (``readers.registry.Format.job``; a shell or sbatch script to ``script``). That
module reads the job's facts, with their origins, from the file and the files it names, and plans
it (``FileResult.plan``, or ``serving`` for a vLLM server), with the findings of its reading. The
estimate and the fit findings are then the checker's, the same for every kind (``checker._finish``).
A launch line's job is handed back to ``check_document`` as the kind its arguments are, so one
job stated two ways takes one path. A new format registers its reader and its job module, and
needs no branch here: the modules are imported when a file of their kind is checked, so a
DeepSpeed file never loads the shell reader or the serving model.
"""

from __future__ import annotations

from importlib import import_module

from vramlint.documents import Document
from vramlint.errors import UsageError
from vramlint.jobs.result import NO_GPUS, Context, FileResult
from vramlint.readers import SCRIPT_KIND
from vramlint.readers.registry import BY_NAME, CLOUD, detect, skipped_because, unread_because


def check_document(document: Document, result: FileResult, ctx: Context) -> list[FileResult]:
    """The jobs a document states, each a result (a file run by several recipes or scripts gives
    one per job); a document of no format vramlint reads is skipped, with what it is."""
    unread = "" if ctx.kind else unread_because(document.data)
    if unread:                         # a job in a format not read yet (before detection: no other format's)
        result.job = True
        result.unplanned(unread)
        return [result]
    kind = result.kind = ctx.kind or detect(document.data)
    result.job = kind is not None
    if kind is None:
        result.skip(skipped_because(document.data))
        return [result]
    if ctx.cluster is None and kind not in CLOUD:      # a task spec states its own GPUs
        raise UsageError(NO_GPUS)
    module = "script" if kind == SCRIPT_KIND else BY_NAME[kind].job
    return import_module(f"vramlint.jobs.{module}").check(document, result, ctx)
