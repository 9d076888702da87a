"""Consistency between a launcher config and the GPUs it is checked against."""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.documents import Location
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.hardware import Cluster
from vramlint.readers.accelerate import AccelerateConfig
from vramlint.rules.base import Rule

WORLD_MISMATCH = ("VL302", "world-size-mismatch", WARNING)
NOT_DIVISIBLE = ("VL303", "world-size-not-divisible", ERROR)
MISSING_FILE = ("VL304", "missing-deepspeed-config-file", ERROR)
REFUSED = ("VL308", "accelerate-launch-refused", ERROR)
IGNORED_WITH_FILE = ("gradient_accumulation_steps", "gradient_clipping", "zero_stage", "offload_optimizer_device",
                     "offload_param_device", "zero3_save_16bit_model", "mixed_precision")
RULES = (
    Rule(*WORLD_MISMATCH, summary="Accelerate's num_processes (the total over all machines) disagrees with the "
                                  "GPUs the check assumes, so the memory verdict is for a different job.",
         bad="num_processes: 8      # checked with --gpus 2x8xH100 (16 GPUs)",
         good="num_processes: 16     # num_machines: 2"),
    Rule(*NOT_DIVISIBLE, summary="num_processes is not a multiple of num_machines: Accelerate's per-node "
                                 "process count (num_processes // num_machines) drops GPUs.",
         bad="num_machines: 2\nnum_processes: 13",
         good="num_machines: 2\nnum_processes: 16"),
    Rule(*MISSING_FILE, summary="The Accelerate config names a deepspeed_config_file that does not exist "
                                "(relative to the config or the working directory): the launch fails.",
         bad="deepspeed_config:\n  deepspeed_config_file: ds_zero3.json   # no such file",
         good="deepspeed_config:\n  deepspeed_config_file: configs/ds_zero3.json"),
    Rule(*REFUSED, summary="accelerate launch refuses the file, with the ValueError quoted in the finding (missing "
                           "distributed_type, settings next to deepspeed_config_file that it would ignore, FSDP1/FSDP2 "
                           "reshard spelling mismatches).",
         bad="distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n  zero_stage: 3",
         good="distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json"),
)


def missing_reference(where: Location, referenced: str, key: str = "deepspeed_config_file") -> Finding:
    return Finding(*MISSING_FILE, where, f"{key} {referenced!r} does not exist in the working directory, next to "
                                         "this file or in a folder above it: the launch fails", hint="fix the path")


def check_launch(acc: AccelerateConfig, cluster: Cluster, path: str) -> Iterator[Finding]:
    processes, machines = acc.num_processes.count, acc.num_machines.count
    where = acc.num_processes.location or Location(path)
    if not processes:
        return      # -1 or absent: given at launch time (accelerate launch --num_processes)
    if machines and processes % machines:
        yield Finding(*NOT_DIVISIBLE, where, f"num_processes {processes} is not a multiple of num_machines "
                                             f"{machines}", hint=f"num_processes {machines * (processes // machines + 1)}")
    if processes != cluster.world_size:
        yield Finding(*WORLD_MISMATCH, where, f"num_processes {processes} (total over machines) but the check "
                                              f"assumes {cluster.world_size} GPUs ({cluster.describe()})",
                      hint=f"num_processes: {cluster.world_size}, or --gpus {processes}x{cluster.gpu.name}")


def check_refusals(acc: AccelerateConfig, path: str) -> Iterator[Finding]:
    """The ValueErrors of accelerate's config loading and ``_validate_launch_command``."""
    doc, data = acc.document, acc.document.data if isinstance(acc.document.data, dict) else {}
    if "distributed_type" not in data:
        yield Finding(*REFUSED, Location(path), "A `distributed_type` must be specified in the config file.",
                      hint="distributed_type: MULTI_GPU, DEEPSPEED, FSDP or 'NO'")
    ds = data.get("deepspeed_config") if isinstance(data.get("deepspeed_config"), dict) else {}
    ignored = [key for key in IGNORED_WITH_FILE if key in ds]
    if ds.get("deepspeed_config_file") and ignored:
        yield Finding(*REFUSED, doc.locate(f"$.deepspeed_config.{ignored[0]}"),
                      "When using `deepspeed_config_file`, the following accelerate config variables will be ignored: "
                      f"{ignored}. Please specify them appropriately in the DeepSpeed config file.",
                      hint="move them into the DeepSpeed JSON (or drop deepspeed_config_file)")
    fsdp = data.get("fsdp_config") if isinstance(data.get("fsdp_config"), dict) else {}
    reshard = fsdp.get("fsdp_reshard_after_forward")
    version = fsdp.get("fsdp_version", 1)
    if reshard is not None and (version == 2) != isinstance(reshard, bool):
        want = "a bool (true/false)" if version == 2 else "a sharding strategy name"
        yield Finding(*REFUSED, doc.locate("$.fsdp_config.fsdp_reshard_after_forward"),
                      f"fsdp_reshard_after_forward must be {want} with fsdp_version {version}",
                      hint="FSDP2: true (FULL_SHARD) or false (SHARD_GRAD_OP); FSDP1: FULL_SHARD, SHARD_GRAD_OP, ...")


def no_zero_section(path: str) -> Finding:
    """Accelerate's DeepSpeed plugin insists on a zero_optimization section in the named file."""
    return Finding(*REFUSED, Location(path), "Please specify the ZeRO optimization config in the DeepSpeed config.",
                   hint='add "zero_optimization": {"stage": 2} (or the stage you want)')
