"""Model states under ZeRO: weights, gradients and optimizer states, sharded as the stage says.

One rule serves DeepSpeed ZeRO and (later) FSDP: stage 1 shards optimizer states, stage 2 also
gradients, stage 3 also the weights, each over the data-parallel degree N_d — never over TP or
PP ranks (Rajbhandari et al., "ZeRO", 2020; REFERENCE.md section 2). FSDP SHARD_GRAD_OP is
stage 2 and FULL_SHARD stage 3.

Bytes per parameter, mixed-precision AdamW (16-bit training): 2 (16-bit weights) + 2 (16-bit
gradients) + 12 (fp32 master copy 4, Adam m 4, Adam v 4) = 16 (REFERENCE.md section 1). In fp32
training the weights are the master copy: 4 + 4 + 8.

Offload follows DeepSpeed's own estimators (``estimate_zero2_model_states_mem_needs``,
``estimate_zero3_model_states_mem_needs``): optimizer offload moves the fp32 states and the
gradient partitions to the host (ZeRO-2: GPU keeps 2P), parameter offload (ZeRO-3) the 16-bit
weights; ZeRO-3 keeps the largest module gathered with its gradient on the GPU (4 x largest layer);
host RAM is DeepSpeed's formula including its 1.5 buffer factor.
"""

from __future__ import annotations

from vramlint.memory.components import HOST, Component
from vramlint.plan import Plan

SHARDED = {0: frozenset(), 1: frozenset({"optimizer"}), 2: frozenset({"optimizer", "gradients"}),
           3: frozenset({"optimizer", "gradients", "weights"})}
# bytes per parameter: (weights, gradients, optimizer states)
BYTES = {"bf16": (2, 2, 12), "fp16": (2, 2, 12), "fp32": (4, 4, 8)}
ZERO_PAPER = "ZeRO (Rajbhandari et al. 2020), REFERENCE.md §1-2"
DS_ESTIMATOR = "DeepSpeed estimate_zero{2,3}_model_states_mem_needs, REFERENCE.md §2"


def _share(plan: Plan, state: str, total: int, per_param: int) -> tuple[int, str]:
    n = plan.data_parallel
    if state in SHARDED[plan.zero_stage]:
        return -(-total // n), f"{per_param} B x P / N_d = {per_param} x {plan.model.params:,} / {n}"
    return total, f"{per_param} B x P = {per_param} x {plan.model.params:,}"


def model_states(plan: Plan) -> list[Component]:
    p = plan.model.params
    w_b, g_b, o_b = BYTES[plan.precision]
    out: list[Component] = []
    on_host = plan.offload_param != "none" and plan.zero_stage == 3
    size, formula = _share(plan, "weights", w_b * p, w_b)
    out.append(Component("weights", 0 if on_host else size,
                         "offloaded to host (offload_param)" if on_host else formula, ZERO_PAPER))
    opt_off = plan.offload_optimizer != "none"
    size, formula = _share(plan, "gradients", g_b * p, g_b)
    out.append(Component("gradients", 0 if opt_off else size,
                         "partitions kept on host with the optimizer (offload_optimizer)" if opt_off else formula,
                         DS_ESTIMATOR if opt_off else ZERO_PAPER))
    size, formula = _share(plan, "optimizer", o_b * p, o_b)
    label = "fp32 master + Adam m, v" if o_b == 12 else "Adam m, v"
    out.append(Component("optimizer states", 0 if opt_off else size,
                         f"offloaded to {plan.offload_optimizer}" if opt_off else f"{formula} ({label})",
                         ZERO_PAPER))
    if plan.zero_stage == 3:
        largest = plan.model.largest_layer_params
        out.append(Component("gathered parameters", 4 * largest,
                             f"4 B x largest layer = 4 x {largest:,} (16-bit weights + gradient in flight)",
                             DS_ESTIMATOR))
    out += host_states(plan)
    return out


def host_states(plan: Plan) -> list[Component]:
    """Host RAM per node for offloaded states (DeepSpeed estimators, additional_buffer_factor 1.5)."""
    p, nodes, gpus = plan.model.params, plan.cluster.nodes, plan.cluster.world_size
    if plan.offload_optimizer != "cpu":
        return []
    if plan.zero_stage == 3:
        per_param = 18 if plan.offload_param == "cpu" else 16
        return [Component("offloaded states (host)", int(per_param * p / nodes * 1.5),
                          f"{per_param} B x P / nodes x 1.5", DS_ESTIMATOR, HOST)]
    return [Component("offloaded states (host)", int(p * max(4 * gpus, 16) * 1.5),
                      "P x max(4 x GPUs, 16) x 1.5", DS_ESTIMATOR, HOST)]
