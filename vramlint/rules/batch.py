"""DeepSpeed's batch arithmetic, with its integer division (runtime/config.py
``_set_batch_related_parameters`` and ``_batch_assertion``): the file is rejected at launch when
train_batch_size != micro_batch x gradient_accumulation x data-parallel world size."""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.documents import Location
from vramlint.findings import ERROR, Finding
from vramlint.readers.deepspeed import DeepSpeedConfig
from vramlint.rules.base import Rule

MISMATCH = ("VL301", "batch-size-mismatch", ERROR)
RULES = (Rule(*MISMATCH, summary="DeepSpeed would refuse to start: train_batch_size is not micro-batch x "
                                 "gradient accumulation x data-parallel GPUs (integer division included).",
              bad='{"train_batch_size": 100, "train_micro_batch_size_per_gpu": 8}   # on 4 GPUs',
              good='{"train_batch_size": 96, "train_micro_batch_size_per_gpu": 8}    # GA = 3'),)


def _number(value) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def resolve(tb: int | None, mb: int | None, ga: int | None, world: int) -> tuple[int, int, int] | str:
    """DeepSpeed's own inference of the missing values, or its error text. A value given as 0 or
    less is refused before the inference divides by it (DeepSpeed itself would divide by zero)."""
    for name, value in (("Micro batch size per gpu", mb), ("Gradient accumulation steps", ga)):
        if value is not None and value <= 0:
            return f"{name}: {value} has to be greater than 0"
    if tb is not None and mb is not None and ga is not None:
        pass
    elif tb is not None and mb is not None:
        ga = tb // mb // world
    elif tb is not None and ga is not None:
        mb = tb // world // ga
    elif tb is not None:
        ga, mb = 1, tb // world
    elif mb is not None:
        ga = ga or 1
        tb = mb * ga * world
    else:
        return "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
    for name, value in (("Train batch size", tb), ("Micro batch size per gpu", mb),
                        ("Gradient accumulation steps", ga)):
        if value <= 0:
            return f"{name}: {value} has to be greater than 0"
    if tb != mb * ga * world:
        return ("Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
                f"gradient_acc_step * world_size {tb} != {mb} * {ga} * {world}")
    return tb, mb, ga


def check_batch(ds: DeepSpeedConfig, world: int, path: str) -> Iterator[Finding]:
    values = [ds.train_batch.value, ds.micro_batch.value, ds.grad_accum.value]
    if "auto" in values or (ds.document.data or {}).get("elasticity", {}).get("enabled"):
        return      # filled by the HF Trainer / Accelerate, or elasticity decides
    if values[0] is None and values[1] is None:
        return      # no batch keys at all: the integrations add them (unresolved-auto says so)
    verdict = resolve(*(_number(v) for v in values), world)
    if isinstance(verdict, str):
        where = next((f.location for f in (ds.train_batch, ds.micro_batch) if f.location), Location(path))
        yield Finding(*MISMATCH, where, f"DeepSpeed would refuse to start on {world} data-parallel GPUs: {verdict}",
                      hint=_hint(ds, world))


def _hint(ds: DeepSpeedConfig, world: int) -> str:
    """The nearest train_batch_size DeepSpeed accepts, keeping the micro-batch."""
    tb, mb, ga = (_number(f.value) for f in (ds.train_batch, ds.micro_batch, ds.grad_accum))
    if mb:
        ga = ga or max(1, (tb or 0) // (mb * world))
        return f"train_batch_size {mb * ga * world} (= {mb} x {ga} x {world}), or leave train_batch_size out"
    return "set train_micro_batch_size_per_gpu, or a train_batch_size divisible by the GPU count"
