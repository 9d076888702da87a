"""--gpus parsing and the GPU catalog."""

from __future__ import annotations

import pytest

from vramlint.errors import UsageError
from vramlint.hardware import GPUS, architecture, parse_gpus
from vramlint.units import GB, GiB, MiB


@pytest.mark.parametrize("spec, nodes, per_node, name", [
    ("8x80GB", 1, 8, "80GB"), ("1x24GB", 1, 1, "24GB"), ("8xH100", 1, 8, "H100-80GB"),
    ("2x8xA100-80GB", 2, 8, "A100-80GB"), ("4xH200", 1, 4, "H200"), ("1xL4", 1, 1, "L4"),
    ("8xMI300X", 1, 8, "MI300X"), ("H100", 1, 1, "H100-80GB"), ("8x h100", 1, 8, "H100-80GB"),
    ("16x4xGB200", 16, 4, "GB200"), ("8xB300", 1, 8, "B300"), ("18x4xGB300", 18, 4, "GB300"),
])
def test_specs_from_the_issue(spec, nodes, per_node, name):
    cluster = parse_gpus(spec)
    assert (cluster.nodes, cluster.per_node, cluster.gpu.name) == (nodes, per_node, name)
    assert cluster.world_size == nodes * per_node


def test_explicit_sizes_are_literal():
    assert parse_gpus("2x79.19GiB").gpu.memory_bytes == round(79.19 * GiB)
    assert parse_gpus("1x81559MiB").gpu.memory_bytes == 81559 * MiB


def test_nominal_gb_resolves_to_what_drivers_report_for_that_class():
    """An "80GB" card shows 79.19 GiB (H100) or 79.25 GiB (A100) to PyTorch: take the smaller."""
    eighty = parse_gpus("8x80GB").gpu
    assert eighty.memory_bytes == parse_gpus("1xH100").gpu.memory_bytes
    assert 79 * GiB < eighty.memory_bytes < 80 * GiB
    assert parse_gpus("1x50GB").gpu.memory_bytes == 50 * GB      # nobody sells 50 GB: decimal


def test_blackwell_cards_are_what_their_logs_report():
    """Each total as torch's OOM message or vLLM's start-up log prints it on that card (sources in
    hardware.py); GB200 and B200 are also nvidia-smi's total less the driver's reserve."""
    assert abs(parse_gpus("1xGB200").gpu.memory_bytes - (189471 - 742) * MiB) < 0.01 * GiB
    assert abs(parse_gpus("1xB200").gpu.memory_bytes - (183359 - 728) * MiB) < 0.01 * GiB
    sold = parse_gpus("1x288GB").gpu                     # two cards are sold at 288 GB: the smaller total
    assert sold.memory_bytes == parse_gpus("1xB300").gpu.memory_bytes < parse_gpus("1xGB300").gpu.memory_bytes


def test_h200_is_the_measured_total():
    assert parse_gpus("1xH200").gpu.memory_bytes == 150_109_880_320


def test_catalog_entries_are_below_their_nominal_size():
    for gpu in GPUS:
        assert gpu.source
        assert gpu.memory_bytes < gpu.nominal_gb * GiB, gpu.name


@pytest.mark.parametrize("spec", ["", "8x", "8xfoo", "0xH100", "2x0xH100", "8x-80GB"])
def test_bad_specs_are_usage_errors(spec):
    with pytest.raises(UsageError):
        parse_gpus(spec)


@pytest.mark.parametrize("name, sm", [
    ("H100", 90), ("NVIDIA H100 80GB HBM3", 90), ("NVIDIA A100-SXM4-80GB", 80), ("NVIDIA GeForce RTX 4090", 89),
    ("NVIDIA L4", 89), ("NVIDIA B200", 100), ("Tesla T4", 75), ("NVIDIA A10G", 86), ("80GB", None),
    ("AMD Instinct MI300X", None), ("NVIDIA H100 80GB (k8s pod)", 90), ("NVIDIA GB200", 100),
    ("NVIDIA B300 SXM6 AC", 103), ("NVIDIA GB300", 103),
])
def test_the_architecture_is_read_from_a_name_as_logs_write_it(name, sm):
    """torch.cuda.get_device_name() and vLLM's logs name the card in words around the catalog's
    name; a size names no architecture, nor does a ROCm card."""
    assert architecture(name) == sm


def test_every_nvidia_card_has_its_compute_capability():
    for gpu in GPUS:
        assert (gpu.sm is None) == gpu.name.startswith("MI"), gpu.name
