"""One check, in the order of the design: file → document → reader → plan → estimate → findings.

The format is detected from the content, not the file name (open-instruct ships DeepSpeed JSON
as ``*.conf``): JSON with DeepSpeed's keys is a DeepSpeed config, YAML with Accelerate's keys an
Accelerate config. An Accelerate config that names a ``deepspeed_config_file`` is checked with
that file.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from vramlint.documents import Document, ParseError, parse_json, parse_yaml, read_text
from vramlint.errors import UnplannableError, UsageError
from vramlint.findings import Finding
from vramlint.hardware import Cluster
from vramlint.memory import Estimate, estimate
from vramlint.models.shape import ModelShape
from vramlint.plan import RUNTIMES, Flags, Plan, plan_from_accelerate, plan_from_deepspeed
from vramlint.readers.accelerate import PRECISION, looks_like_accelerate, read_accelerate
from vramlint.readers.deepspeed import looks_like_deepspeed, read_deepspeed
from vramlint.memory.serving import serving_estimate
from vramlint.models import read_model
from vramlint.readers.vllm import looks_like_vllm, normalised_document, read_vllm
from vramlint.rules.serving import check_serving
from vramlint.rules.batch import check_batch
from vramlint.rules.consistency import check_autotp, check_consistency
from vramlint.rules.fit import NEAR_THRESHOLD, check_fit, check_host_ram
from vramlint.suppress import Suppressions, suppressions
from vramlint.rules.launch import check_launch, check_refusals, missing_reference, no_zero_section
from vramlint.rules.schema import check_schema
from vramlint.rules.syntax import hjson_syntax, parse_error
from vramlint.serving_plan import serving_from_vllm


@dataclass
class FileResult:
    path: str
    findings: list[Finding] = field(default_factory=list)
    plan: Plan | None = None
    estimate: Estimate | None = None
    notes: list[str] = field(default_factory=list)    # why no memory estimate was made
    serving: tuple | None = None                      # (Serving, ServingEstimate) of a vLLM config


def check_file(path: str, model: ModelShape | None, cluster: Cluster, flags: Flags, near: float = NEAR_THRESHOLD,
               ignore: frozenset[str] = frozenset(), host_ram: int | None = None, kind: str | None = None) -> FileResult:
    """Check one file. Findings whose code or name is in ``ignore`` are dropped, and so are those
    an inline ``# vramlint: disable=CODE`` comment switches off (see ``suppressions``)."""
    result = FileResult(path)
    document = _load(path, result)
    if document is not None:
        try:
            _check(document, result, model, cluster, flags, kind)
        except UnplannableError as exc:
            result.notes.append(str(exc))
        if result.plan is not None:
            result.estimate = estimate(result.plan)
            result.findings.extend(check_fit(result.plan, result.estimate, path, near))
            result.findings.extend(check_host_ram(result.plan, result.estimate, path, host_ram))
    disabled = suppressions(document.text) if document is not None else Suppressions()
    result.findings = [f for f in result.findings if f.code not in ignore and f.name not in ignore
                       and not disabled.covers(f)]
    return result


def _load(path: str, result: FileResult) -> Document | None:
    try:
        text = read_text(Path(path))
    except OSError as exc:
        raise UsageError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None
    parse = parse_json if text.lstrip().startswith(("{", "[")) or path.endswith((".json", ".conf")) else parse_yaml
    try:
        return parse(text, path)
    except ParseError as exc:
        result.findings.append(parse_error(path, exc))
        return None


def _kind(document: Document) -> str | None:
    """The format, from the content: DeepSpeed's keys, Accelerate's, or mostly vLLM flags."""
    if looks_like_deepspeed(document.data):
        return "deepspeed"
    if looks_like_accelerate(document.data):
        return "accelerate"
    if looks_like_vllm(document.data):
        return "vllm"
    return None


def _check(document: Document, result: FileResult, model: ModelShape, cluster: Cluster, flags: Flags,
           kind: str | None = None) -> None:
    path = document.path
    kind = kind or _kind(document)
    if model is None and kind in ("deepspeed", "accelerate"):
        raise UsageError("--model not given and no model in [tool.vramlint] of pyproject.toml "
                         f"(a {kind} config does not name its model)")
    if kind == "deepspeed":
        result.findings.extend(hjson_syntax(document))
        result.findings.extend(check_schema(document, "deepspeed"))
        _plan_deepspeed(result, read_deepspeed(document), model, cluster, flags, path)
    elif kind == "accelerate":
        result.findings.extend(check_schema(document, "accelerate"))
        acc = read_accelerate(document)
        result.findings.extend(check_refusals(acc, path))
        result.findings.extend(check_launch(acc, cluster, path))
        referenced = acc.deepspeed_config_file.value
        if acc.distributed_type.value not in RUNTIMES:
            result.notes.append(f"distributed_type {acc.distributed_type.value}: no GPU memory model "
                                "(vramlint models NO, MULTI_GPU, DEEPSPEED and FSDP)")
        elif acc.distributed_type.value == "DEEPSPEED" and referenced:
            _check_referenced(path, str(referenced), acc, result, model, cluster, flags)
        else:
            result.plan = plan_from_accelerate(acc, model, cluster, flags)
    elif kind == "vllm":
        _check_vllm(document, result, model, cluster)
    else:
        result.notes.append("not a DeepSpeed, Accelerate or vLLM config (none of their keys): skipped")


def _check_referenced(path: str, referenced: str, acc, result: FileResult, model: ModelShape,
                      cluster: Cluster, flags: Flags) -> None:
    """Accelerate's ``deepspeed_config_file``, relative to the YAML's folder or the working
    directory as accelerate resolves it at launch; its ``"auto"`` precision is Accelerate's."""
    candidates = [Path(path).parent / referenced, Path(referenced)]
    target = next((c for c in candidates if c.is_file()), None)
    if target is None:
        result.findings.append(missing_reference(acc.deepspeed_config_file.location, referenced))
        return
    sub = FileResult(str(target))
    document = _load(str(target), sub)
    result.findings.extend(sub.findings)
    if document is None:
        return
    precision = flags.precision or PRECISION.get(acc.mixed_precision.value)
    result.findings.extend(check_schema(document, "deepspeed"))
    ds = read_deepspeed(document)
    if "zero_optimization" not in (document.data or {}):
        result.findings.append(no_zero_section(str(target)))
    _plan_deepspeed(result, ds, model, cluster, replace(flags, precision=precision), str(target))


def _plan_deepspeed(result: FileResult, ds, model: ModelShape, cluster: Cluster, flags, path: str) -> None:
    """A DeepSpeed file's consistency and batch-arithmetic checks and its plan — a file of its own
    or the one an Accelerate config names (``path``: where the batch findings point)."""
    result.findings.extend(check_consistency(ds))
    result.findings.extend(check_autotp(ds, model))
    result.plan = plan_from_deepspeed(ds, model, cluster, flags)
    result.findings.extend(check_batch(ds, ds.batch_world(cluster.world_size, result.plan.tensor_parallel), path))


def _check_vllm(document: Document, result: FileResult, model: ModelShape, cluster: Cluster) -> None:
    """A ``vllm serve --config`` file: its own ``model`` when vramlint can read it, else --model."""
    result.findings.extend(check_schema(normalised_document(document), "vllm"))
    cfg = read_vllm(document)
    if cfg.model.value:
        try:
            model = read_model(str(cfg.model.value))
        except UsageError:
            if model is None:
                raise UsageError(f"{cfg.model.location or document.path}: model {cfg.model.value!r} is neither a local config nor in the "
                                 "offline catalog; pass --model (a catalog name or a config.json)") from None
            result.notes.append(f"model {cfg.model.value!r} is not readable here: checked as {model.name}")
    if model is None:
        raise UsageError("--model not given and the vLLM config names no model")
    serving = serving_from_vllm(cfg, model, cluster, result.notes)
    result.serving = (serving, serving_estimate(serving))
    fitted = result.serving[1].max_model_len
    if serving.auto_max_model_len and 0 < fitted < serving.context_len:
        result.notes.append(f"max_model_len auto: vLLM fits {fitted:,} of the model's {serving.context_len:,} tokens "
                            "in the KV cache and runs with that")
    result.findings.extend(check_serving(serving, result.serving[1], cfg.location_of, document.path))
