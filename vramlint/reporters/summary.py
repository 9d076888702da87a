"""The run in numbers, one place for every reporter: files checked, jobs estimated, jobs not
estimated, files skipped, errors and warnings. A run that estimated nothing must not read like a
run that passed: the count of jobs not estimated stands beside the count of errors."""

from __future__ import annotations

from collections import Counter

def counts(results) -> dict[str, int]:
    """``{"files", "estimated", "not_estimated", "skipped", "errors", "warnings"}``."""
    status = Counter(r.status for r in results)
    severity = Counter(f.severity for r in results for f in r.findings)
    return {"files": len({r.path for r in results}), "estimated": status["estimated"],
            "not_estimated": status["not estimated"], "skipped": status["skipped"],
            "errors": severity["error"], "warnings": severity["warning"]}


def line(results) -> str:
    """``3 file(s) checked: 1 job(s) estimated, 1 not estimated, 1 skipped; 2 error(s), 0 warning(s)``."""
    c = counts(results)
    return (f"{c['files']} file(s) checked: {c['estimated']} job(s) estimated, {c['not_estimated']} not estimated, "
            f"{c['skipped']} skipped; {c['errors']} error(s), {c['warnings']} warning(s)")
