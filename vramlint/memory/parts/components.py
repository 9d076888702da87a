"""The Estimate: named components, each with bytes per GPU (or host), a formula and a source."""

from __future__ import annotations

from dataclasses import dataclass

GPU, HOST = "gpu", "host"
ALLOCATOR, CONTEXT = "allocator", "context"    # components not counted by max_memory_allocated


@dataclass(frozen=True)
class Component:
    name: str
    bytes: int
    formula: str                   # one line a person can check by hand
    source: str                    # where the formula comes from
    where: str = GPU               # "gpu" (per GPU) or "host" (per node)
    kind: str = "tensor"           # "tensor", "allocator" or "context"

    def as_dict(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "formula": self.formula,
                "source": self.source, "where": self.where}


@dataclass(frozen=True)
class Estimate:
    components: tuple[Component, ...]
    assumptions: tuple[str, ...] = ()
    moment: str = ""               # when the peak happens ("optimizer step", ...)
    band: float = 0.05             # relative half-width of the low/high band
    reserve_wanted: int = 0        # the replayed reserve where it was capped at what is left of the card

    @property
    def gpu(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.where == GPU)

    @property
    def per_gpu_peak(self) -> int:
        """What nvidia-smi would show on one GPU at the step's peak."""
        return sum(c.bytes for c in self.gpu)

    @property
    def allocated_peak(self) -> int:
        """What torch.cuda.max_memory_allocated() would report: tensors only."""
        return sum(c.bytes for c in self.gpu if c.kind == "tensor")

    @property
    def uncapped_peak(self) -> int:
        """The peak with the allocator's whole replayed reserve: above the card, the step fits only if
        PyTorch frees its cache in time (``memory/reserve.py``)."""
        reserve = sum(c.bytes for c in self.gpu if c.kind == "allocator")
        return self.per_gpu_peak + max(0, self.reserve_wanted - reserve)

    @property
    def low(self) -> int:
        return int(self.per_gpu_peak * (1 - self.band))

    @property
    def high(self) -> int:
        return int(self.per_gpu_peak * (1 + self.band))

    @property
    def host_ram(self) -> int:
        """Host memory per node that offload needs."""
        return sum(c.bytes for c in self.components if c.where == HOST)
