"""Megatron-FSDP's model states on one pipeline rank under ``--use-megatron-fsdp`` with the
``optim_grads_params`` strategy (Megatron-LM core_v0.19.0 megatron/core/distributed/fsdp/: the
adapter mcore_fsdp_adapter.py, and megatron_fsdp/param_and_grad_buffer.py, megatron_fsdp.py).

Each parameter group gets its buffers sharded over the FSDP group, dp x cp
(param_and_grad_buffer.py:2324-2338, 2646-2717): the compute weights (bf16), the main weights
(``--megatron-fsdp-main-params-dtype``, fp32; none under ``auto``), the main gradients
(``--megatron-fsdp-main-grads-dtype``, by default the parameters' dtype) and the optimizer's
Adam moments over the main weights. A decoder layer is an FSDP unit (TransformerLayer,
MoETransformerLayer, MambaLayer: mcore_fsdp_adapter.py:158-164); its weights are gathered whole
into a temporary bucket before its forward and its backward, and its gradients made whole there
before they are reduce-scattered into the shard. How many units are whole at once:

- weights: the unit computed and those prefetched after it while the prefetched size stays under
  the suggested all-gather size, half the communication unit of max(1e9, 2 x the mean unit)
  elements (megatron_fsdp.py:419-444; all_gather_params, param_and_grad_buffer.py:4483-4507);
- gradients: the unit computed, and the reduce-scatter queue of up to the communication unit's
  elements plus the bucket just issued (wait_for_previous_grad_reduce, :3915-3935);
- under ``--fsdp-double-buffer`` (``--use-nccl-ub``) two units each, the persistent pair
  (FixedPoolAllocator, :2517-2569; "no more than 2 FSDP units", :4412-4422).

Modules outside the units (the embedding, the output layer, the final norm) gather only their own
weights, before their forward, and release them with no forward hook (megatron_fsdp.py:1060-1085):
whole from their forward through backward; their gradients are whole until the root post-backward
hook reduces them (:853-880), counted from the loss's backward on (the output layer's comes first).
The layers' gradients come one layer at a time as backward frees that layer's activations: they
are counted at the end of backward, beside the states and the gathered weights.

The ``optim`` strategy shards what the distributed optimizer shards and is priced as it
(states.py); ``optim_grads`` is said (readers/megatron.py, VL211) and priced so too.
"""

from __future__ import annotations

from vramlint.memory.parts.components import Component
from vramlint.memory.parts.states import States
from vramlint.plan import Plan

SOURCE = ("Megatron-LM core_v0.19.0 megatron/core/distributed/fsdp/mcore_fsdp_adapter.py, "
          "src/megatron_fsdp/param_and_grad_buffer.py (sharded buffers, temporary buckets, double buffer), "
          "megatron_fsdp.py (units, prefetch and reduce-scatter sizes)")
UNIT_ELEMENTS = 1_000_000_000      # the communication unit's floor (megatron_fsdp.py:438-441: max(1e9, ...))


def in_flight(units: list[int], double_buffer: bool) -> tuple[int, int, str, str]:
    """Units whole at once, weights and gradients, for the largest unit, with how each is counted."""
    if not units:
        return 0, 0, "", ""
    u, n = max(units), len(units)
    if double_buffer:
        both = min(2, n)
        return both, both, "the double buffer's pair", "the double buffer's pair"
    communication = max(UNIT_ELEMENTS, 2 * (sum(units) // n))
    prefetch = communication // 2
    weights = min(n, 1 + -(-prefetch // u))
    grads = min(n, communication // u + 2)
    return (weights, grads, f"1 + {weights - 1} prefetched (all-gather size {prefetch:,} elements)",
            f"1 computed + {grads - 1} in the reduce-scatter queue ({communication:,} elements + the bucket issued)")


def fsdp_states(plan: Plan, parts: list[tuple[int, int]], dense: int, experts: int, c: int) -> States:
    """A rank's states: ``parts`` its FSDP units (each decoder layer's parameters but the routed
    experts, and its share of those: states.decoder_params), ``dense`` / ``experts`` all its
    parameters (states.rank_params), ``c`` bytes a compute weight. The optimizer's a parameter: the
    main weight buffer (made whatever the compute dtype, unless ``auto``) and the moments."""
    par = plan.parallelism
    g = par.grad_bytes
    main = par.fsdp_main_bytes
    sgd = plan.optimizer == "sgd"
    per = main + (4 if sgd else 8)
    words = {4: "fp32 main + ", 2: "16-bit main + ", 0: ""}[main] + ("SGD momentum" if sgd else "Adam m, v (fp32)")
    d, de = plan.shard_degree, par.expert_shard
    shard = -(-dense // d) + -(-experts // de)
    over = f"{dense:,} / {d}" + (f" + {experts:,} / {de} (routed experts)" if experts else "") + \
        " (Megatron FSDP over dp x cp)"
    units = [own + routed for own, routed in parts]
    outside = max(0, dense - sum(own for own, _ in parts))       # the embedding, the output layer, the final norm
    resting = [Component("parameters (shard)", c * shard, f"{c} B x {over}", SOURCE),
               Component("optimizer states", int(per * shard), f"{per:g} B ({words}) x {over}", SOURCE)]
    gradients = [Component("gradient shard", g * shard, f"{g} B x {over}", SOURCE)]
    weights, grads, w_how, g_how = in_flight(units, par.fsdp_double_buffer)
    u = max(units) if units else 0
    gathered, backward, ending = [], [], []
    if d > 1 and u:
        gathered.append(Component("layers' weights gathered", c * u * weights,
                                  f"{c} B x {u:,} (a layer) x {w_how}", SOURCE))
        ending.append(Component("layers' gradients before reduce-scatter", g * u * grads,
                                f"{g} B x {u:,} (a layer) x {g_how}", SOURCE))
    if d > 1 and outside:
        gathered.append(Component("embedding / output layer weights gathered", c * outside,
                                  f"{c} B x {outside:,} (outside the units: whole from their forward through "
                                  "backward)", SOURCE))
        backward.append(Component("embedding / output layer gradients", g * outside,
                                  f"{g} B x {outside:,} (whole until the root post-backward reduce-scatter)", SOURCE))
    return States(resting, gradients, [], [], backward=backward, gathered=gathered, ending=ending)
