"""GPUs and clusters: ``--gpus 8xH100``, ``2x8xA100-80GB``, ``1x24GB``, ``2x79.19GiB``.

The memory that decides an OOM is the total the driver reports (``cudaMemGetInfo`` /
``torch.cuda.get_device_properties().total_memory``), which is less than the marketed size:
an "80GB" H100 shows 79.19 GiB to PyTorch and vLLM because ECC and the driver keep the rest.
The catalog records that reported total for each accelerator, with where the number was seen.

A size in GB (``8x80GB``) names the class of card a vendor sells as that many GB, so it resolves
to the smallest reported total among catalog cards of that nominal size; a size nobody sells is
read as decimal gigabytes. GiB and MiB sizes are taken literally, as reported by a driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from vramlint.errors import UsageError, clipped
from vramlint.units import GB, GiB, parse_size


@dataclass(frozen=True)
class Gpu:
    """One accelerator model: the memory its driver reports, and where that number comes from."""

    name: str
    memory_bytes: int
    nominal_gb: int | None = None
    source: str = ""
    aliases: tuple[str, ...] = ()
    sm: int | None = None           # CUDA compute capability x 10 (90: Hopper); None: not CUDA, or not known


@dataclass(frozen=True)
class Cluster:
    """``nodes`` machines with ``per_node`` identical GPUs each."""

    gpu: Gpu
    per_node: int
    nodes: int = 1
    counted: bool = True            # the count was stated (``8xH100``); False for a type alone (``H100``),
                                    # which a file's own process count completes (``sized``)

    @property
    def world_size(self) -> int:
        return self.per_node * self.nodes

    def describe(self) -> str:
        count = f"{self.nodes}x{self.per_node}" if self.nodes > 1 else f"{self.per_node}"
        return f"{count}x{self.gpu.name} ({self.gpu.memory_bytes / GiB:.2f} GiB each)"


def _gib(value: float) -> int:
    return round(value * GiB)


_OOM = "torch's OOM message 'total capacity' as published in user reports"
# name, reported total, nominal GB, source, aliases, compute capability x 10 (NVIDIA's CUDA GPUs table):
# frameworks pick their kernels, and with them how weights are laid out, by the capability.
GPUS: tuple[Gpu, ...] = (
    Gpu("H200", 150_109_880_320, 141, "cudaMemGetInfo total measured on an H200 (shared/groundtruth)",
        ("H200-141GB", "H200-SXM"), 90),
    Gpu("H100-80GB", 85_029_158_912, 80, "vLLM start-up logs on H100 80GB HBM3: 79.19 GiB",
        ("H100", "H100-SXM", "H100-SXM5", "H100-PCIE", "H800", "H800-80GB"), 90),
    Gpu("H100-NVL", _gib(93.10), 94, "nvidia-smi 95,830 MiB less driver reserve (approx.)", ("H100-94GB",), 90),
    Gpu("GH200", _gib(94.50), 96, "GH200 96GB HBM3 as reported by torch (approx.)", ("GH200-96GB",), 90),
    Gpu("H20", _gib(95.00), 96, "H20 96GB HBM3 as reported by torch (approx.)", ("H20-96GB",), 90),
    Gpu("B200", _gib(178.35), 180, "torch's OOM on a B200: 'a total capacity of 178.35 GiB' (stas00/ml-engineering "
        "debug/pytorch.md @744d01e); nvidia-smi 183,359 MiB less 728 MiB reserved", ("B200-180GB", "B200-192GB"), 100),
    Gpu("GB200", _gib(184.31), 186, "torch's OOM on a GB200: 'a total capacity of 184.31 GiB'; nvidia-smi 189,471 MiB "
        "less 742 MiB reserved (NVIDIA/k8s-test-infra@3b2b865 qx testdata)", ("GB200-186GB", "GB200-NVL72"), 100),
    Gpu("B300", _gib(267.69), 288, "vLLM start-up log on a B300: 'Free memory on device (267.08/267.69 GiB)' "
        "(johnpfeiffer.github.io ai/b300-deepseek-0731.md)", ("B300-288GB", "HGX-B300"), 103),
    Gpu("GB300", _gib(276.50), 288, "torch's OOM on a GB300: 'a total capacity of 276.50 GiB' (stas00/ml-engineering "
        "debug/pytorch.md @744d01e)", ("GB300-288GB", "GB300-NVL72"), 103),
    Gpu("A100-80GB", _gib(79.25), 80, _OOM, ("A100-SXM4-80GB", "A100-PCIE-80GB"), 80),
    Gpu("A800-80GB", _gib(79.33), 80, _OOM, ("A800",), 80),
    Gpu("A100-40GB", _gib(39.39), 40, _OOM, ("A100", "A100-SXM4-40GB", "A100-PCIE-40GB"), 80),
    Gpu("L40S", _gib(44.53), 48, _OOM, ("L40S-48GB",), 89),
    Gpu("L40", _gib(44.40), 48, _OOM, ("L40-48GB",), 89),
    Gpu("RTX-A6000", _gib(47.54), 48, _OOM, ("A6000",), 86),
    Gpu("RTX-6000-Ada", _gib(47.50), 48, _OOM, ("RTX6000ADA", "RTX-6000"), 89),
    Gpu("A40", _gib(44.35), 48, _OOM, ("A40-48GB",), 86),
    Gpu("L4", _gib(22.05), 24, _OOM, ("L4-24GB",), 89),
    Gpu("A10G", _gib(22.19), 24, _OOM, ("A10G-24GB",), 86),
    Gpu("A10", _gib(22.20), 24, _OOM, ("A10-24GB",), 86),
    Gpu("RTX-5090", _gib(31.36), 32, "vLLM start-up logs on RTX 5090: 'Free memory on device (30.86/31.36 GiB)'",
        ("5090", "RTX5090"), 120),
    Gpu("RTX-4090", _gib(23.64), 24, _OOM, ("4090", "RTX4090"), 89),
    Gpu("RTX-3090", _gib(23.69), 24, _OOM, ("3090", "RTX3090"), 86),
    Gpu("A30", _gib(23.53), 24, _OOM, ("A30-24GB",), 80),
    Gpu("V100-32GB", _gib(31.74), 32, _OOM, ("V100-SXM2-32GB",), 70),
    Gpu("V100-16GB", _gib(15.77), 16, _OOM, ("V100",), 70),
    Gpu("RTX-A4000", _gib(15.61), 16, _OOM, ("A4000",), 86),
    Gpu("T4", _gib(14.75), 16, _OOM, ("T4-16GB",), 75),
    Gpu("RTX-2060-12GB", _gib(11.995), 12, "vLLM 0.8.4 start-up log: 'total_gpu_memory (12.00GiB)', the least "
        "that rounds so", ("RTX2060-12GB",), 75),
    Gpu("MI300X", 205_822_885_888, 192, "ROCm reported total for MI300X (191.69 GiB)", ("MI300X-192GB",)),
    Gpu("MI325X", _gib(255.98), 256, "ROCm reported total for MI325X (approx.)", ("MI325X-256GB",)),
    Gpu("MI250X", _gib(63.98), 64, "ROCm reported total per MI250X GCD (approx.)", ("MI250",)),
)


def _key(name: str) -> str:
    return re.sub(r"[\s_]+", "-", name.strip()).upper()


GPU_BY_NAME: dict[str, Gpu] = {_key(alias): gpu for gpu in GPUS for alias in (gpu.name, *gpu.aliases)}

_SPEC = re.compile(r"^\s*(?:(\d+)\s*[xX*]\s*)?(?:(\d+)\s*[xX*]\s*)?(.+?)\s*$")


def gpu_from_text(text: str) -> Gpu:
    """A catalog name (``H100``), a nominal size (``80GB``) or a reported size (``79.19GiB``)."""
    found = GPU_BY_NAME.get(_key(text))
    if found:
        return found
    size = parse_size(text)
    if size is None:
        known = ", ".join(gpu.name for gpu in GPUS)
        raise UsageError(
            f"unknown GPU {clipped(text)!r}: give a size (24GB, 79.19GiB, 81559MiB) or one of: {known}"
        )
    if text.strip().upper().endswith("GB") and size % GB == 0:
        same_class = [gpu for gpu in GPUS if gpu.nominal_gb == size // GB]
        if same_class:
            smallest = min(same_class, key=lambda gpu: gpu.memory_bytes)
            return Gpu(f"{size // GB}GB", smallest.memory_bytes, size // GB,
                       f"smallest reported total of cards sold as {size // GB}GB ({smallest.name})")
        return Gpu(f"{size // GB}GB", size, size // GB, "decimal gigabytes: no catalog card is sold at this size")
    return Gpu(text.strip(), size, None, "size given on the command line")


def architecture(name: str) -> int | None:
    """The compute capability (x 10) of a GPU named as the command line or a framework's log names
    it (``H100``, ``NVIDIA H100 80GB HBM3``, ``NVIDIA A100-SXM4-80GB``): the catalog card whose name
    or alias is the longest word run of it; None for a size or an unknown card."""
    key = _key(name)
    if key in GPU_BY_NAME:
        return GPU_BY_NAME[key].sm
    words = f"-{key}-"
    named = [alias for alias in GPU_BY_NAME if f"-{alias}-" in words]
    return GPU_BY_NAME[max(named, key=len)].sm if named else None


# Bounds past any real machine (the estimate's arithmetic and the hint search stay fast inside
# them): NVL72 racks put 72 GPUs in one NVLink domain; the largest training clusters ~100,000.
MOST_PER_NODE = 1024
MOST_GPUS = 1 << 20
MIN_GPU_BYTES = 1 << 30


def parse_gpus(spec: str) -> Cluster:
    """``8x80GB``, ``8xH100``, ``2x8xA100-80GB`` (nodes x GPUs per node), ``1xL4``, ``4xH200``."""
    match = _SPEC.match(spec or "")
    if not match or not match.group(3):
        raise UsageError(f"cannot read --gpus {spec!r}: expected COUNTxGPU or NODESxCOUNTxGPU, e.g. 8xH100")
    first, second, gpu_text = match.groups()
    what = f"--gpus {clipped(spec)!r}"
    if any(len(n) > 7 for n in (first, second) if n):      # int() of thousands of digits is refused anyway
        raise UsageError(_too_many(what))
    if second is not None:
        nodes, per_node = int(first), int(second)
    else:
        nodes, per_node = 1, int(first) if first else 1
    gpu = gpu_from_text(gpu_text)
    if gpu.memory_bytes < MIN_GPU_BYTES:
        raise UsageError(f"{what}: {gpu.memory_bytes:,} bytes is no GPU's memory (at least 1 GiB)")
    return bounded(gpu, per_node, nodes, what, counted=first is not None)


def bounded(gpu: Gpu, per_node: int, nodes: int, what: str, counted: bool = True) -> Cluster:
    """A cluster inside the bounds of any real machine; past them a one-line usage error that
    names ``what`` stated it (``--gpus '8x0GB'``, a task's ``accelerators``): never clamped."""
    if nodes < 1 or per_node < 1:
        raise UsageError(f"{what}: GPU and node counts must be at least 1")
    if per_node > MOST_PER_NODE or nodes * per_node > MOST_GPUS:
        raise UsageError(_too_many(what))
    return Cluster(gpu, per_node, nodes, counted=counted)


def _too_many(what: str) -> str:
    return (f"{what}: at most {MOST_PER_NODE} GPUs a node and {MOST_GPUS:,} in all (the largest clusters built hold "
            "about 100,000)")


def sized(cluster: Cluster, processes: object, machines: object = 1) -> Cluster | None:
    """``cluster`` with the process count a launch file states (Accelerate's ``num_processes``,
    the total over ``num_machines``), where ``--gpus`` gave only the type; None where the count
    was stated or the file's is no usable count (its own rules say so)."""
    whole = all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in (processes, machines))
    if cluster.counted or not whole or processes % machines:
        return None
    return Cluster(cluster.gpu, processes // machines, machines)


__all__ = ["Cluster", "GPUS", "Gpu", "architecture", "bounded", "gpu_from_text", "parse_gpus", "sized"]
