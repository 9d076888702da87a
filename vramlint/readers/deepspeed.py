"""DeepSpeed config JSON → the facts that shape memory (docs/config-formats.md §A).

Knows the legacy forms DeepSpeed still accepts: ``"zero_optimization": true`` (stage 1),
``cpu_offload`` / ``cpu_offload_param`` inside ``zero_optimization``, the ``bfloat16`` section
name, and the string ``"auto"`` that the HF Trainer / Accelerate integrations fill in.
Readers never compute memory; they only say what the file asks for and where.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vramlint.documents import Document, Location

AUTO = "auto"


@dataclass(frozen=True)
class Fact:
    """A value the file sets, or the framework default when it does not (``location`` None;
    ``default`` then says whose default it is, e.g. "axolotl 0.19.0 default")."""

    value: Any
    location: Location | None = None
    default: str = ""

    @property
    def from_file(self) -> bool:
        return self.location is not None

    @property
    def count(self) -> int | None:
        """The value as a positive whole number (a micro-batch, a degree, a number of steps), or
        None: "auto", a string, a float, a bool (YAML's and JSON's booleans are ints to Python)."""
        value = self.value
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


@dataclass(frozen=True)
class DeepSpeedConfig:
    document: Document
    zero_stage: Fact
    offload_optimizer: Fact        # "none", "cpu" or "nvme"
    offload_param: Fact
    precision: Fact                # "bf16", "fp16", "fp32" or "auto"
    micro_batch: Fact              # int, "auto" or None
    train_batch: Fact
    grad_accum: Fact
    notes: tuple[str, ...] = field(default=())
    buffers: dict[str, Fact] = field(default_factory=dict)    # Plan field -> the ZeRO size that sets it
    overlap_comm: Fact = field(default_factory=lambda: Fact(None, None))   # None: DeepSpeed's default (stage 3 only)
    tensor_parallel: Fact = field(default_factory=lambda: Fact(1, None))    # tensor_parallel.autotp_size (AutoTP)
    sequence_parallel: Fact = field(default_factory=lambda: Fact(1, None))  # sequence_parallel_size (Ulysses)
    sections: dict[str, Fact] = field(default_factory=dict)   # "fp16"/"bf16" -> its enabled (True, False, "auto")
    optimizer: Fact = field(default_factory=lambda: Fact(None, None))   # the optimizer section's type ("" untyped)

    def batch_world(self, world_size: int, tensor_parallel: int) -> int:
        """The world DeepSpeed's batch arithmetic divides by (runtime/config.py): the ranks that are
        not tensor-parallel ones, over Ulysses' sequence-parallel ones (``world /
        sequence_parallel_size``)."""
        return max(1, world_size // tensor_parallel // self.sequence_parallel.value)


# ZeRO sizes (in elements) that size GPU buffers: Plan field -> the zero_optimization keys DeepSpeed
# accepts for it (docs/config-formats.md §A: the stage3_ name and the pydantic field name)
BUFFER_KEYS = {
    "reduce_bucket_size": ("reduce_bucket_size",),
    "sub_group_size": ("sub_group_size",),
    "max_live_parameters": ("stage3_max_live_parameters", "max_live_parameters"),
    "max_reuse_distance": ("stage3_max_reuse_distance", "max_reuse_distance"),
    "prefetch_bucket_size": ("stage3_prefetch_bucket_size", "prefetch_bucket_size"),
    "param_persistence_threshold": ("stage3_param_persistence_threshold", "param_persistence_threshold"),
}


def _fact(doc: Document, path: str, value: Any) -> Fact:
    return Fact(value, doc.locate(path) if doc.has(path) else None)


def _section(data: dict, *names: str) -> tuple[str | None, dict]:
    for name in names:
        if isinstance(data.get(name), dict):
            return name, data[name]
    return None, {}


def _precision(doc: Document, data: dict) -> Fact:
    """bf16 wins when enabled; fp16 when enabled; both ``"auto"`` stays auto; else fp32.
    (DeepSpeed asserts when both are true: that is a consistency rule, not the reader's call.)"""
    bf16_name, bf16 = _section(data, "bf16", "bfloat16")
    _, fp16 = _section(data, "fp16")
    if bf16.get("enabled") is True:
        return _fact(doc, f"$.{bf16_name}.enabled", "bf16")
    if fp16.get("enabled") is True:
        return _fact(doc, "$.fp16.enabled", "fp16")
    if AUTO in (bf16.get("enabled"), fp16.get("enabled")):
        path = f"$.{bf16_name}.enabled" if bf16.get("enabled") == AUTO else "$.fp16.enabled"
        return _fact(doc, path, AUTO)
    return Fact("fp32", doc.locate("$.fp16") if doc.has("$.fp16") else None)


def _sections(doc: Document, data: dict) -> dict[str, Fact]:
    """The precision sections the file has, each with its ``enabled`` as written: a section the
    file lacks is absent here, and stays off whatever the Trainer's flags say."""
    out = {}
    for name, aliases in (("bf16", ("bf16", "bfloat16")), ("fp16", ("fp16",))):
        section_name, section = _section(data, *aliases)
        if section_name is not None:
            out[name] = _fact(doc, f"$.{section_name}.enabled", section.get("enabled", False))
    return out


def _offload(doc: Document, zero: dict, key: str, legacy: str) -> Fact:
    section = zero.get(key)
    if isinstance(section, dict):
        device = str(section.get("device", "none")).lower()
        return _fact(doc, f"$.zero_optimization.{key}.device" if "device" in section
                     else f"$.zero_optimization.{key}", device)
    if zero.get(legacy) is True:
        return _fact(doc, f"$.zero_optimization.{legacy}", "cpu")
    return Fact("none")


BUFFER_LIMIT = 10**15     # elements: beyond any GPU, and small enough for the byte arithmetic to stay finite


def _buffers(doc: Document, zero: dict) -> dict[str, Fact]:
    """The ZeRO buffer sizes the file sets: numbers (JSON writes 5e8 as a float) or ``"auto"``;
    anything else is left to the schema's VL102 and the default applies."""
    out = {}
    for name, keys in BUFFER_KEYS.items():
        for key in keys:
            value = zero.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                value = min(int(value), BUFFER_LIMIT)
            elif value != AUTO:
                continue
            out[name] = _fact(doc, f"$.zero_optimization.{key}", value)
            break
    return out


def _degree(doc: Document, path: str, value: Any) -> Fact:
    """A parallel degree: a positive int, else 1 (a wrong type is the schema rule's finding)."""
    return _fact(doc, path, Fact(value).count or 1)


def _optimizer(doc: Document, data: dict) -> Fact:
    """The ``optimizer`` section's ``type``, where the file has the section: DeepSpeed builds it
    and the HF Trainer's ``optim`` goes unused (plan._ds_optimizer)."""
    section = data.get("optimizer")
    if not isinstance(section, dict):
        return Fact(None, None)
    typed = "type" in section
    return _fact(doc, "$.optimizer.type" if typed else "$.optimizer", "" if section.get("type") is None else section["type"])


def read_deepspeed(doc: Document) -> DeepSpeedConfig:
    data = doc.data if isinstance(doc.data, dict) else {}
    notes: list[str] = []
    zero_raw = data.get("zero_optimization")
    if isinstance(zero_raw, bool):
        notes.append("legacy boolean zero_optimization: DeepSpeed reads true as stage 1")
        stage = _fact(doc, "$.zero_optimization", 1 if zero_raw else 0)
        zero: dict = {}
    else:
        zero = zero_raw if isinstance(zero_raw, dict) else {}
        stage = _fact(doc, "$.zero_optimization.stage", zero.get("stage", 0))
    return DeepSpeedConfig(
        document=doc,
        zero_stage=stage,
        offload_optimizer=_offload(doc, zero, "offload_optimizer", "cpu_offload"),
        offload_param=_offload(doc, zero, "offload_param", "cpu_offload_param"),
        precision=_precision(doc, data),
        sections=_sections(doc, data),
        micro_batch=_fact(doc, "$.train_micro_batch_size_per_gpu", data.get("train_micro_batch_size_per_gpu")),
        train_batch=_fact(doc, "$.train_batch_size", data.get("train_batch_size")),
        grad_accum=_fact(doc, "$.gradient_accumulation_steps", data.get("gradient_accumulation_steps")),
        notes=tuple(notes),
        buffers=_buffers(doc, zero),
        overlap_comm=_fact(doc, "$.zero_optimization.overlap_comm", zero.get("overlap_comm")),
        tensor_parallel=_degree(doc, "$.tensor_parallel.autotp_size",
                                (data.get("tensor_parallel") or {}).get("autotp_size", 1)
                                if isinstance(data.get("tensor_parallel"), dict) else 1),
        sequence_parallel=_degree(doc, "$.sequence_parallel_size", data.get("sequence_parallel_size", 1)),
        optimizer=_optimizer(doc, data),
    )


# Top-level keys only DeepSpeed has (DeepSpeedConfig, runtime/config.py); ``bf16``, ``fp16``,
# ``optimizer``, ``scheduler`` are DeepSpeed's only as sections (recipes write ``bf16: true``),
# and ``gradient_accumulation_steps`` is every trainer's.
OWN_KEYS = {"zero_optimization", "train_micro_batch_size_per_gpu", "train_batch_size", "zero_allow_untested_optimizer",
            "steps_per_print", "wall_clock_breakdown", "zero_force_ds_cpu_optimizer", "gradient_clipping",
            "flops_profiler", "comms_logger", "aio", "prescale_gradients", "gradient_predivide_factor",
            "sparse_gradients", "amp", "tensor_parallel", "sequence_parallel_size", "data_efficiency",
            "curriculum_learning", "compression_training", "elasticity", "autotuning", "checkpoint",
            "memory_breakdown", "dump_state", "communication_data_type", "bfloat16"}
SECTIONS = ("fp16", "bf16", "optimizer", "scheduler", "activation_checkpointing")


def looks_like_deepspeed(data: Any) -> bool:
    """Content sniffing: DeepSpeed's own top-level keys, or its sections written as sections,
    whatever the file is called."""
    if not isinstance(data, dict):
        return False
    return bool(OWN_KEYS & data.keys()) or any(isinstance(data.get(key), dict) for key in SECTIONS)
