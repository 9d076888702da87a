"""GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per finding.

Format (docs.github.com, "Workflow commands"): ``::error file=F,line=L,col=C,title=T::MESSAGE``;
``%``, CR and LF are escaped in the message, and ``,`` and ``:`` too in properties.
"""

from __future__ import annotations

from typing import TextIO

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    for result in results:
        for f in result.findings:
            message = f.message + (f"\nhint: {f.hint}" if f.hint else "")
            out.write(f"::{COMMAND[f.severity]} file={_prop(f.location.path)},line={f.location.line},"
                      f"col={f.location.column},title={_prop(f'{f.code} {f.name}')}::{_data(message)}\n")
