"""Reporters: how findings and estimates reach people (text) and machines (json, sarif, github).

``REPORTERS`` is the registry the command line's ``--format`` choices come from (plus ``auto``:
github inside GitHub Actions, else text). Only the text reporter imports rich, and only when used.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from importlib import import_module


class Registry(dict):
    """format -> the reporter function, named ``"module:function"`` and imported when first used:
    a run imports the one reporter it prints with (json's pulls in the memory model's weight
    tables, text's rich only when it lays out colour or tables)."""

    def __getitem__(self, name: str) -> Callable:
        module, function = super().__getitem__(name).split(":")
        return getattr(import_module(f"vramlint.reporters.{module}"), function)


REPORTERS = Registry(text="text:report", json="json_report:report", sarif="sarif:report", github="github:report")
MODEL_REPORTERS = Registry(text="text:model_report", json="json_report:model_report")
ESTIMATE_REPORTERS = Registry(text="text:estimate_report", json="json_report:estimate_report")


def resolve_format(name: str) -> str:
    """``auto``: GitHub annotations inside GitHub Actions (GITHUB_ACTIONS=true), text elsewhere."""
    if name == "auto":
        return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"
    return name
