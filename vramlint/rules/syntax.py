"""Rules about the file itself: it must parse."""

from __future__ import annotations

from vramlint.documents import Location, ParseError
from vramlint.findings import ERROR, Finding
from vramlint.rules.base import Rule

PARSE_ERROR = ("VL001", "parse-error", ERROR)


def _rule() -> Rule:
    return Rule(*PARSE_ERROR, summary="The file is not valid JSON (or YAML); the framework would refuse it.",
                bad='{"train_batch_size": CONFIG_BATCH_SIZE}',
                good='{"train_batch_size": 64}')


def parse_error(path: str, error: ParseError) -> Finding:
    code, name, severity = PARSE_ERROR
    return Finding(code, name, severity, Location(path, "$", error.line, error.column), error.message)


RULES = (_rule(),)
