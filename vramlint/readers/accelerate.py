"""Accelerate config YAML → the facts that shape memory (docs/config-formats.md §B).

Knows Accelerate's quirks: ``num_processes`` is the total over all machines; PyYAML reads an
unquoted ``NO`` / ``no`` as false (``distributed_type: NO``, ``mixed_precision: no``); the FSDP
sharding strategy may be a name or a number 1-5; FSDP2 says ``fsdp_reshard_after_forward`` instead;
the DeepSpeed plugin defaults to ZeRO-2 and may point at a DeepSpeed JSON file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact

FSDP_NUMBERS = {1: "FULL_SHARD", 2: "SHARD_GRAD_OP", 3: "NO_SHARD", 4: "HYBRID_SHARD", 5: "HYBRID_SHARD_ZERO2"}
PRECISION = {"no": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8": "bf16"}


@dataclass(frozen=True)
class AccelerateConfig:
    document: Document
    distributed_type: Fact          # "NO", "MULTI_GPU", "DEEPSPEED", "FSDP", ...
    mixed_precision: Fact           # "no", "fp16", "bf16", "fp8"
    num_processes: Fact             # total over machines
    num_machines: Fact
    zero_stage: Fact
    offload_optimizer: Fact
    offload_param: Fact
    deepspeed_config_file: Fact
    fsdp_strategy: Fact
    fsdp_version: Fact
    fsdp_offload: Fact
    activation_checkpointing: Fact
    parallelism: dict[str, Fact] = field(default_factory=dict)   # tp, cp, sp, dp_shard, dp_replicate sizes
    grad_accum: Fact = field(default_factory=lambda: Fact(None))  # deepspeed_config.gradient_accumulation_steps
    notes: tuple[str, ...] = field(default=())
    use_cpu: bool = False           # ``use_cpu: true``: accelerate launch --cpu, no GPU


def _fact(doc: Document, path: str, value: Any) -> Fact:
    return Fact(value, doc.locate(path) if doc.has(path) else None)


def _yaml_no(value: Any, notes: list[str], key: str) -> Any:
    """PyYAML 1.1 turns an unquoted NO/no into False; Accelerate writes them quoted for that reason."""
    if value is False:
        notes.append(f"{key}: unquoted NO/no is read by YAML as false (Accelerate quotes it: 'NO')")
        return "NO" if key == "distributed_type" else "no"
    return value


def _fsdp2(fsdp: dict) -> bool:
    """``fsdp_version: 2`` (Accelerate's default is 1); a bare ``fsdp_reshard_after_forward``
    (FSDP2's name for the strategy) says the same."""
    return fsdp.get("fsdp_version") == 2 or "fsdp_reshard_after_forward" in fsdp


def _fsdp_strategy(doc: Document, fsdp: dict, notes: list[str]) -> Fact:
    path = "$.fsdp_config.fsdp_sharding_strategy"
    if _fsdp2(fsdp):
        reshard = fsdp.get("fsdp_reshard_after_forward", True)
        if isinstance(reshard, bool):
            return _fact(doc, "$.fsdp_config.fsdp_reshard_after_forward", "FULL_SHARD" if reshard else "SHARD_GRAD_OP")
        path = "$.fsdp_config.fsdp_reshard_after_forward"
        value = reshard
    else:
        value = fsdp.get("fsdp_sharding_strategy", "FULL_SHARD")
    if isinstance(value, int) and not isinstance(value, bool):
        notes.append(f"fsdp sharding strategy {value} is {FSDP_NUMBERS.get(value, 'unknown')}")
        value = FSDP_NUMBERS.get(value, "FULL_SHARD")
    return _fact(doc, path, str(value).upper())


PARALLELISM = ("tp", "cp", "sp", "dp_shard", "dp_replicate")   # parallelism_config_<name>_size


def _parallelism(doc: Document, data: dict) -> dict[str, Fact]:
    """The degrees ``parallelism_config`` sets (Accelerate's ParallelismConfig), the ones it
    gives as positive ints; a wrong type is the schema rule's finding."""
    section = data.get("parallelism_config") if isinstance(data.get("parallelism_config"), dict) else {}
    out = {}
    for name in PARALLELISM:
        key = f"parallelism_config_{name}_size"
        if Fact(section.get(key)).count:
            out[name] = _fact(doc, f"$.parallelism_config.{key}", section[key])
    return out


def read_accelerate(doc: Document) -> AccelerateConfig:
    data = doc.data if isinstance(doc.data, dict) else {}
    notes: list[str] = []
    ds = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    fsdp = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
    kind = _yaml_no(data.get("distributed_type", "NO"), notes, "distributed_type")
    precision = _yaml_no(data.get("mixed_precision", "no"), notes, "mixed_precision")
    return AccelerateConfig(
        document=doc,
        distributed_type=_fact(doc, "$.distributed_type", str(kind).upper()),
        mixed_precision=_fact(doc, "$.mixed_precision", str(precision).lower()),
        num_processes=_fact(doc, "$.num_processes", data.get("num_processes", 1 if str(kind).upper() == "NO" else None)),
        num_machines=_fact(doc, "$.num_machines", data.get("num_machines", 1)),
        zero_stage=_fact(doc, "$.deepspeed_config.zero_stage", ds.get("zero_stage", 2)),
        offload_optimizer=_fact(doc, "$.deepspeed_config.offload_optimizer_device",
                                str(ds.get("offload_optimizer_device", "none")).lower()),
        offload_param=_fact(doc, "$.deepspeed_config.offload_param_device",
                            str(ds.get("offload_param_device", "none")).lower()),
        deepspeed_config_file=_fact(doc, "$.deepspeed_config.deepspeed_config_file", ds.get("deepspeed_config_file")),
        fsdp_strategy=_fsdp_strategy(doc, fsdp, notes),
        fsdp_version=_fact(doc, "$.fsdp_config.fsdp_version", 2 if _fsdp2(fsdp) else 1),
        fsdp_offload=_fact(doc, "$.fsdp_config.fsdp_offload_params", bool(fsdp.get("fsdp_offload_params"))),
        activation_checkpointing=_fact(doc, "$.fsdp_config.fsdp_activation_checkpointing",
                                       bool(fsdp.get("fsdp_activation_checkpointing"))),
        notes=tuple(notes),
        parallelism=_parallelism(doc, data),
        grad_accum=_fact(doc, "$.deepspeed_config.gradient_accumulation_steps", ds.get("gradient_accumulation_steps")),
        use_cpu=data.get("use_cpu") is True,
    )


def looks_like_accelerate(data: Any) -> bool:
    """Accelerate writes ``compute_environment`` and ``distributed_type`` into every config."""
    return isinstance(data, dict) and bool({"compute_environment", "distributed_type"} & data.keys())
