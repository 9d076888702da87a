"""Rules about the file itself: it must parse."""

from __future__ import annotations

from vramlint.documents import MOST_BYTES, MOST_DEPTH, MOST_NODES, Location, ParseError, TooLarge
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.rules.base import Rule

PARSE_ERROR = ("VL001", "parse-error", ERROR)
HJSON = ("VL002", "hjson-syntax", WARNING)
INTERNAL = ("VL003", "internal-error", ERROR)
LIMIT = ("VL004", "input-limit", ERROR)
RULES = (
    Rule(*PARSE_ERROR, summary="The file is not valid JSON (or YAML); the framework would refuse it.",
         bad='{"train_batch_size": CONFIG_BATCH_SIZE}', good='{"train_batch_size": 64}'),
    Rule(*HJSON, summary="Comments or trailing commas: DeepSpeed's own hjson loader accepts them, but the HF "
                         "Trainer and Accelerate read the file with strict json.load and fail.",
         bad='{"zero_optimization": {"stage": 2,},  // ZeRO-2\n}', good='{"zero_optimization": {"stage": 2}}'),
    Rule(*INTERNAL, summary="vramlint itself failed while checking this file (a bug: please report it with the "
                            "file). The other files of the run are still checked, and the run fails, since this "
                            "file's verdict is unknown.",
         bad="(any file that makes vramlint crash)", good="(the same file, once the bug is fixed)"),
    Rule(*LIMIT, summary=f"The file is past what any config is: not a regular file (a pipe, a device), larger than "
                         f"{MOST_BYTES >> 20} MiB, nested more than {MOST_DEPTH} deep, more than {MOST_NODES:,} values "
                         "with its YAML aliases expanded (documents.py). It is not read, so nothing else is said about "
                         "it; a check never hangs on it.",
         bad="base: &a [1, 1, 1, 1]\nb: &b [*a, *a, *a, *a]\n...   # an alias bomb: billions of values",
         good="base_model: meta-llama/Llama-3.1-8B"),
)


def hjson_syntax(document) -> list[Finding]:
    """DeepSpeed JSON that only hjson reads (documents.parse_json records what it tolerated)."""
    if not document.lenient:
        return []
    return [Finding(*HJSON, Location(document.path), f"{' and '.join(document.lenient)}: fine for the deepspeed "
                    "launcher (hjson), but json.load in the HF Trainer / Accelerate rejects the file",
                    hint="remove them if the file is ever passed to TrainingArguments(deepspeed=...) or accelerate")]


def parse_error(path: str, error: ParseError) -> Finding:
    """A file that does not parse (VL001), or one past the limits of a config (VL004)."""
    rule = LIMIT if isinstance(error, TooLarge) else PARSE_ERROR
    return Finding(*rule, Location(path, "$", error.line, error.column), error.message)


def internal_error(path: str, error: BaseException) -> Finding:
    """A crash while checking one file, as that file's finding: the run goes on with the others."""
    return Finding(*INTERNAL, Location(path), f"vramlint failed on this file: {type(error).__name__}: {error}",
                   hint="VRAMLINT_DEBUG=1 shows where; please report it with the file")
