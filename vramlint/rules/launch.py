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
)


def missing_reference(where: Location, referenced: str) -> Finding:
    return Finding(*MISSING_FILE, where, f"deepspeed_config_file {referenced!r} does not exist next to this "
                                         "config or in the working directory", hint="fix the path")


def check_launch(acc: AccelerateConfig, cluster: Cluster, path: str) -> Iterator[Finding]:
    processes, machines = acc.num_processes.value, acc.num_machines.value
    where = acc.num_processes.location or Location(path)
    if not isinstance(processes, int) or isinstance(processes, bool) or processes < 1:
        return      # -1 or absent: given at launch time (accelerate launch --num_processes)
    if isinstance(machines, int) and machines > 0 and processes % machines:
        yield Finding(*NOT_DIVISIBLE, where, f"num_processes {processes} is not a multiple of num_machines "
                                             f"{machines}", hint=f"num_processes {machines * (processes // machines + 1)}")
    if processes != cluster.world_size:
        yield Finding(*WORLD_MISMATCH, where, f"num_processes {processes} (total over machines) but the check "
                                              f"assumes {cluster.world_size} GPUs ({cluster.describe()})",
                      hint=f"num_processes: {cluster.world_size}, or --gpus {processes}x{cluster.gpu.name}")
