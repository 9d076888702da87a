"""GitHub Actions workflow commands: one ``::error``/``::warning`` annotation per finding.

Format (docs.github.com, "Workflow commands"): ``::error file=F,line=L,col=C,title=T::MESSAGE``;
``%``, CR and LF are escaped in the message, and ``,`` and ``:`` too in properties.
"""

from __future__ import annotations

from typing import TextIO

from vramlint.reporters import summary
from vramlint.reporters.printable import shown

COMMAND = {"error": "error", "warning": "warning", "info": "notice"}


def _data(text: str) -> str:
    return shown(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def _prop(text: str) -> str:
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def report(results, out: TextIO, verbosity: str = "normal") -> None:
    """One annotation per finding, each naming what its file was checked as; then each file's
    verdict as a plain log line."""
    from vramlint.reporters.text import checked_as, verdict
    for result in results:
        context = f" (checked as {checked_as(result)})" if result.model is not None else ""
        for f in result.findings:
            message = f.message + context + (f"\nhint: {f.hint}" if f.hint else "")
            out.write(f"::{COMMAND[f.severity]} file={_prop(f.location.path)},line={f.location.line},"
                      f"col={f.location.column},title={_prop(f'{f.code} {f.name}')}::{_data(message)}\n")
    if verbosity != "quiet":
        for result in results:
            out.write(shown(verdict(result).replace("\r", " ").replace("\n", " ")) + "\n")     # a log line, no command
        out.write(summary.line(results) + "\n")
