"""The Estimate: named components, each with bytes per GPU (or host), a formula and a source."""

from __future__ import annotations

from dataclasses import dataclass

GPU, HOST = "gpu", "host"


@dataclass(frozen=True)
class Component:
    name: str
    bytes: int
    formula: str                   # one line a person can check by hand
    source: str                    # where the formula comes from
    where: str = GPU               # "gpu" (per GPU) or "host" (per node)

    def as_dict(self) -> dict:
        return {"name": self.name, "bytes": self.bytes, "formula": self.formula,
                "source": self.source, "where": self.where}


@dataclass(frozen=True)
class Estimate:
    components: tuple[Component, ...]
    assumptions: tuple[str, ...] = ()

    @property
    def gpu(self) -> tuple[Component, ...]:
        return tuple(c for c in self.components if c.where == GPU)

    @property
    def per_gpu_peak(self) -> int:
        """What nvidia-smi would show on one GPU at the step's peak."""
        return sum(c.bytes for c in self.gpu)

    @property
    def host_ram(self) -> int:
        """Host memory per node that offload needs."""
        return sum(c.bytes for c in self.components if c.where == HOST)
