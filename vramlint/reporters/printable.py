"""Text from a config file shown to a person or a log: a control character in a value (an ANSI
escape, a carriage return) is shown as its escape, never passed to the terminal or the CI log,
where it would recolour, hide or forge output. One place for every reporter that prints text."""

from __future__ import annotations

import re

CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def shown(text: str) -> str:
    """``text`` with each control character but tab and newline written as its Python escape."""
    return CONTROL.sub(lambda m: repr(m.group())[1:-1], text)
