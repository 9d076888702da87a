"""Reporters: how findings and estimates reach people (text) and machines (json).

``REPORTERS`` is the registry the command line's ``--format`` choices come from. Only the text
reporter imports rich, and only when it is used.
"""

from __future__ import annotations

from collections.abc import Callable

from vramlint.reporters import json_report, text


REPORTERS: dict[str, Callable] = {"text": text.report, "json": json_report.report}
MODEL_REPORTERS: dict[str, Callable] = {"text": text.model_report, "json": json_report.model_report}
ESTIMATE_REPORTERS: dict[str, Callable] = {"text": text.estimate_report, "json": json_report.estimate_report}
