"""One check, in the order of the design: file → document → reader → plan → estimate → findings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vramlint.documents import ParseError, parse_json, read_text
from vramlint.errors import UsageError
from vramlint.findings import Finding
from vramlint.hardware import Cluster
from vramlint.memory import Estimate, estimate
from vramlint.models.shape import ModelShape
from vramlint.plan import Flags, Plan, plan_from_deepspeed
from vramlint.readers.deepspeed import looks_like_deepspeed, read_deepspeed
from vramlint.rules.batch import check_batch
from vramlint.rules.fit import NEAR_THRESHOLD, check_fit
from vramlint.rules.syntax import parse_error


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    estimate: Estimate | None = None


def check_file(path: str, model: ModelShape, cluster: Cluster, flags: Flags,
               near: float = NEAR_THRESHOLD, ignore: frozenset[str] = frozenset()) -> FileResult:
    """Check one file; findings whose code or name is in ``ignore`` are dropped."""
    result = _check(path, model, cluster, flags, near)
    result.findings = [f for f in result.findings if f.code not in ignore and f.name not in ignore]
    return result


def _check(path: str, model: ModelShape, cluster: Cluster, flags: Flags, near: float) -> FileResult:
    result = FileResult(path)
    try:
        text = read_text(Path(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return result
    try:
        document = parse_json(text, path)
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return result
    if not looks_like_deepspeed(document.data):
        raise UsageError(f"{path}: not a DeepSpeed config (no zero_optimization, batch or precision keys)")
    ds = read_deepspeed(document)
    result.plan = plan_from_deepspeed(ds, model, cluster, flags)
    result.findings.extend(check_batch(ds, result.plan.data_parallel, path))
    result.estimate = estimate(result.plan)
    result.findings.extend(check_fit(result.plan, result.estimate, path, near))
    return result
