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
  copy of them (``vocab_parallel_log_probs_from_logits``), 6 B a logit as the update's loss.
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
LOGPROB_SOURCE = ("verl 0.9.1 utils/megatron/tensor_parallel.py vocab_parallel_log_probs_from_logits: Megatron-core's "
                  "vocab_parallel_cross_entropy (.float() copy of the bf16 logits)")
LOGIT_BYTES = 6
# The actor's states each switch moves to the host outside the update, by component name (before
# any "(...)"), and whether the log-prob forward (eval mode: the model alone) brings it back
MOVED = {"parameters": ("params_offloaded", True), "gradient buffer": ("params_offloaded", False),
         "optimizer states": ("optimizer_offloaded", False)}
SWITCHES = {"params_offloaded": "actor.megatron.param_offload", "optimizer_offloaded": "actor.megatron.optimizer_offload",
            "critic_params_offloaded": "critic.megatron.param_offload",
            "critic_optimizer_offloaded": "critic.megatron.optimizer_offload"}


def _moved(parts: list[Component], plan: Plan, logprob: bool, critic: bool = False) -> list[Component]:
    """The states outside the update: what a switch put on the host counts nothing."""
    out = []
    for c in parts:
        switch, returns = MOVED.get(c.name.removeprefix("critic ").split(" (")[0], (None, False))
        switch = f"critic_{switch}" if critic and switch else switch
        if switch and getattr(plan.rollout, switch) and not (logprob and returns and not critic):
            c = replace(c, bytes=0, formula=f"on the host outside the update ({SWITCHES[switch]})", source=SOURCE)
        out.append(c)
    return out


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
    """The critic's states on this rank: the actor's layout with a one-output head."""
    if not plan.rollout.critic_params:
        return []
    value = plan.with_changes(model=plan.model.as_value_model(), rollout=None)
    states = megatron_states(value, rank)
    return [replace(c, name=f"critic {c.name}") for c in list(states.resting) + list(states.gradients)]


def beside(plan: Plan, rank: Rank) -> list[Component]:
    """What rests beside the actor through its update: the reference's weights, the critic's
    states (as its switches leave them), and the engine where it never sleeps."""
    r = plan.rollout
    awake = [rl.engine(plan)] if r.engine_here and not r.frees_between else []
    return _reference(plan, rank) + _moved(_critic(plan, rank), plan, logprob=False, critic=True) + awake


def _logits(plan: Plan, rank: Rank) -> list[Component]:
    if not any(stage.head for stage in rank.stages):
        return []
    tokens, vocab = plan.rollout.logprob_tokens, -(-plan.model.vocab_size // plan.tensor_parallel)
    return [Component("log-prob logits", LOGIT_BYTES * tokens * vocab, f"{LOGIT_BYTES} B x {tokens:,} tokens x "
                      f"{vocab:,} (vocabulary shard: bf16 logits and their fp32 copy)", LOGPROB_SOURCE)]


def phases(plan: Plan, rank: Rank, actor: list[Component]) -> list[tuple[str, list[Component]]]:
    """The rollout (the engine awake) and the log-prob forward on this rank, from the actor's
    resting states and gradient buffer (``actor``)."""
    r = plan.rollout
    if not (r.engine_here or r.logprob_tokens):
        return []
    others = beside(plan, rank)
    rollout = _moved(actor, plan, logprob=False) + others
    if r.frees_between and r.engine_here:
        rollout.append(rl.engine(plan))
    logprob = _moved(actor, plan, logprob=True) + others + _logits(plan, rank)
    return [(rl.ROLLOUT_PHASE, rollout), (rl.LOGPROB_PHASE, logprob)]


__all__ = ["beside", "phases"]
