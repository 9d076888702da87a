"""What every kind of job reads beside its own keys: the file's text and document (a read error is
a usage error, a parse error the file's VL001 / VL004 finding), the model a file names or the one
the command line gives, and the installed releases vramlint does not model."""

from __future__ import annotations

from pathlib import Path

from vramlint.documents import Document, Location, ParseError, parse, read_text
from vramlint.errors import ModelNotFound, UsageError
from vramlint.findings import Finding
from vramlint.jobs.result import Context, FileResult
from vramlint.models import read_model
from vramlint.models.shape import ModelShape
from vramlint.readers.deepspeed import Fact
from vramlint.rules.inputs import model_not_resolved, not_estimated, substituted_model, version_not_modelled
from vramlint.rules.syntax import parse_error
from vramlint.stack import Stack, unmodelled


def load(path: str, result: FileResult, text: str | None = None, as_script: bool = False) -> Document | None:
    """The file as a document (``text``: its content, read from standard input); a script's is its
    text alone (``data`` None: the shell reader parses it). None where it cannot be read as text
    or parsed, with its finding."""
    if text is None:
        try:
            text = read_text(Path(path))
        except OSError as exc:
            raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
        except ParseError as exc:
            result.findings.append(parse_error(path, exc))
            return None
    if as_script:
        return Document(path, text, None)
    try:
        return parse(text, path)
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None


def named_model(fact: Fact, where: Location, result: FileResult, ctx: Context,
                revision: str | None = None) -> ModelShape | None:
    """The model a file names (a recipe's, a vLLM config's): ``--model`` instead where the command
    line names another (VL006 says so), else the file's own, resolved; where it cannot be, a VL005
    finding and no estimate — never a default model standing in for it."""
    if "model" in ctx.stated and ctx.model is not None:
        if str(fact.value) != str(ctx.values.get("model")):
            result.findings.append(substituted_model(fact, ctx.values.get("model"), "--model"))
        return ctx.model
    try:
        return read_model(str(fact.value), revision, bool(ctx.values.get("download")))
    except UsageError as exc:
        hint = ("give --model with the model it was trained from (per file: an overrides entry with files and "
                "model)" if isinstance(exc, ModelNotFound) and exc.local else "")
        result.findings.append(model_not_resolved(fact.location or where, str(fact.value), str(exc), hint))
        return None


def served_model(fact: Fact, document: Document, result: FileResult, ctx: Context, what: str) -> ModelShape | None:
    """The model a serving config names (vLLM's ``model``, SGLang's ``model-path``), else the
    command line's (``needs_model``), with where the file names it."""
    result.model_at = fact.location
    if fact.value:
        return named_model(fact, document.locate("$"), result, ctx)
    return needs_model(ctx, result, document, what)


def needs_model(ctx: Context, result: FileResult, document: Document, what: str) -> ModelShape | None:
    """The model a launcher file is checked with: ``--model`` or the settings'; without one the
    job is not estimated, and says so (VL011)."""
    if ctx.model is None:
        result.findings.append(not_estimated(document.locate("$"), f"{what} names no model, and no --model or "
                                             "[tool.vramlint] model says which to check it with",
                                             "give --model, or model in [tool.vramlint] (per file: an overrides "
                                             "entry with files and model)"))
    return ctx.model


def versions(stack: Stack, packages: tuple[str, ...], result: FileResult) -> list[Finding]:
    """A finding for each of ``packages`` installed (or pinned) at a release vramlint does not model."""
    return [version_not_modelled(Location(result.path), why) for package in packages
            if (why := unmodelled(stack, package)) is not None]
