"""verl's Megatron workers around the update (``Plan.rollout`` on the Megatron runtime): what rests
beside the actor's states on each pipeline rank, and the rollout and log-prob phases, each as the
rank holds it (memory/rl.py has FSDP's and DeepSpeed's).

Read from verl 0.9.1 (workers/engine/megatron/transformer_impl.py, workers/engine/base.py
``BaseEngineCtx``, utils/megatron_utils.py ``offload_megatron_model_to_cpu``):

- The actor's bf16 parameters and its DDP gradient buffer are Megatron's contiguous buffers, made
  once and kept: leaving the update zeroes the gradient buffer (``optimizer_zero_grad``), it does
  not free it. ``param_offload`` moves both to the host outside the update (``grad=param_offload``)
  and the log-prob forward (eval mode) brings back the parameters alone; ``optimizer_offload`` moves
  the fp32 main parameters and Adam's states outside the update.
- The reference is built ``forward_only``: Megatron-core modules without DDP or optimizer, its bf16
  weights (the rank's TP and pipeline share) resting on the GPU unless its own ``param_offload``
  (which follows the actor's) moves them to the host.
- A critic (GAE) is a value model trained by the same engine under the actor's layout: its
  parameters, gradient buffer and optimizer states as the actor's, offloaded by ``critic.megatron``.
- The log-prob forward runs the pipeline forward-only: on the rank with the output layer a
  micro-batch's logits over its vocabulary shard and Megatron's vocab-parallel cross-entropy's fp32
  copy of them (utils/megatron/tensor_parallel.py ``vocab_parallel_log_probs_from_logits`` calls
  Megatron-core's ``vocab_parallel_cross_entropy``), the update's loss going forward (step.py).
"""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory import rl
from vramlint.memory.parts.components import Component
from vramlint.memory.parts.pipeline import Rank
from vramlint.memory.runtimes.megatron.states import megatron_states, rank_params
from vramlint.plan import Plan

SOURCE = ("verl 0.9.1 workers/engine/megatron/transformer_impl.py (to, EngineTrainModeCtx), workers/engine/base.py "
          "BaseEngineCtx, utils/megatron_utils.py offload_megatron_model_to_cpu")


def _reference(plan: Plan, rank: Rank) -> list[Component]:
    """The reference's bf16 weights on this rank (the actor's share of its stage), unless offloaded."""
    out = []
    for m in plan.rollout.residents:
        dense, experts = rank_params(plan, rank)
        p = dense + experts
        out.append(Component(f"{m.name} weights", 0 if m.offloaded else 2 * p,
                             "on the host (ref.megatron.param_offload)" if m.offloaded else
                             f"2 B x {p:,} (bf16, forward_only: the rank's share)", SOURCE))
    return out


def _critic(plan: Plan, rank: Rank) -> list[Component]:
    """The critic's states on this rank outside its own update: the actor's layout with a one-output
    head, what its own switches (``critic.megatron``) put on the host counting nothing."""
    r = plan.rollout
    if not r.critic_params:
        return []
    states = megatron_states(plan.with_changes(model=plan.model.as_value_model()), rank)
    own = plan.with_changes(rollout=replace(r, params_offloaded=r.critic_params_offloaded,
                                            optimizer_offloaded=r.critic_optimizer_offloaded))
    return [replace(c, name=f"critic {c.name}")
            for c in rl.between(list(states.resting) + list(states.gradients), own, keep_params=False)]


def beside(plan: Plan, rank: Rank) -> list[Component]:
    """What rests beside the actor through its update: the reference's weights, the critic's
    states (as its switches leave them), and the engine where it never sleeps."""
    r = plan.rollout
    awake = [rl.engine(plan)] if r.engine_here and not r.frees_between else []
    return _reference(plan, rank) + _critic(plan, rank) + awake


def phases(plan: Plan, rank: Rank, actor: list[Component],
           logits: list[Component]) -> list[tuple[str, list[Component]]]:
    """The rollout (the engine awake) and the log-prob forward on this rank, from the actor's
    resting states and gradient buffer (``actor``) and, on the rank with the output layer, the
    log-prob micro-batch's logits and loss as the step's loss makes them (``logits``)."""
    r = plan.rollout
    if not (r.engine_here or r.logprob_tokens):
        return []
    others = beside(plan, rank)
    rollout = rl.between(actor, plan, keep_params=False) + others
    if r.frees_between and r.engine_here:
        rollout.append(rl.engine(plan))
    logprob = rl.between(actor, plan, keep_params=True) + others + logits
    return [(rl.ROLLOUT_PHASE, rollout), (rl.LOGPROB_PHASE, logprob)]


__all__ = ["beside", "phases"]
