"""Rules about the file itself: it must parse."""

from __future__ import annotations

from vramlint.documents import Location, ParseError
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.rules.base import Rule

PARSE_ERROR = ("VL001", "parse-error", ERROR)
HJSON = ("VL002", "hjson-syntax", WARNING)
RULES = (
    Rule(*PARSE_ERROR, summary="The file is not valid JSON (or YAML); the framework would refuse it.",
         bad='{"train_batch_size": CONFIG_BATCH_SIZE}', good='{"train_batch_size": 64}'),
    Rule(*HJSON, summary="Comments or trailing commas: DeepSpeed's own hjson loader accepts them, but the HF "
                         "Trainer and Accelerate read the file with strict json.load and fail.",
         bad='{"zero_optimization": {"stage": 2,},  // ZeRO-2\n}', good='{"zero_optimization": {"stage": 2}}'),
)


def hjson_syntax(document) -> list[Finding]:
    """DeepSpeed JSON that only hjson reads (documents.parse_json records what it tolerated)."""
    if not document.lenient:
        return []
    return [Finding(*HJSON, Location(document.path), f"{' and '.join(document.lenient)}: fine for the deepspeed "
                    "launcher (hjson), but json.load in the HF Trainer / Accelerate rejects the file",
                    hint="remove them if the file is ever passed to TrainingArguments(deepspeed=...) or accelerate")]


def parse_error(path: str, error: ParseError) -> Finding:
    return Finding(*PARSE_ERROR, Location(path, "$", error.line, error.column), error.message)

