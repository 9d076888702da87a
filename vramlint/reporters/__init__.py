"""Reporters: how findings and estimates reach people (text) and machines (json, sarif, github).

``REPORTERS`` is the registry the command line's ``--format`` choices come from (plus ``auto``:
github inside GitHub Actions, else text). Only the text reporter imports rich, and only when used.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from vramlint.reporters import github, json_report, sarif, summary, text  # noqa: F401 - summary: shared

REPORTERS: dict[str, Callable] = {"text": text.report, "json": json_report.report, "sarif": sarif.report,
                                  "github": github.report}
MODEL_REPORTERS: dict[str, Callable] = {"text": text.model_report, "json": json_report.model_report}
ESTIMATE_REPORTERS: dict[str, Callable] = {"text": text.estimate_report, "json": json_report.estimate_report}


def resolve_format(name: str) -> str:
    """``auto``: GitHub annotations inside GitHub Actions (GITHUB_ACTIONS=true), text elsewhere."""
    if name == "auto":
        return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"
    return name
