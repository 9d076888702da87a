"""Online RL's other phases on the GPUs that train (``Plan.rollout``): the rollout, when the
generation engine is awake beside what the trainer keeps, and the log-prob forward; the update is
the Plan's own training step, with the critic's states and a never-sleeping engine beside it.

Read from verl 0.9.1 (wheel sha256 db6e6f2a…), whose hybrid engine puts the actor, the rollout
engine, the reference and the critic on every GPU of one pool (trainer/ppo/v1/trainer_base.py:
788-830, ``global_pool``):

- **rollout**: ``update_weights`` (workers/engine_workers.py:729-826) resumes the engine's weights,
  syncs them from the actor, moves the actor's shards to the host where ``param_offload`` is on,
  then resumes the KV cache: the engine holds its ``gpu_memory_utilization`` share of the GPU
  (vLLM from 0.11 budgets that share of the total memory for weights, activations and KV cache)
  while the actor's shards (unless offloaded) and AdamW states (unless ``optimizer_offload``)
  stay, and the critic's likewise. Gradients are gone: the train-mode context zeroes them on exit
  (workers/engine/fsdp/transformer_impl.py ``EngineTrainModeCtx``, ``zero_grad`` sets None).
- **log-prob**: the actor's (and the reference's) no-grad forward over a log-prob micro-batch:
  the shards gathered as the step's forward gathers them, and the micro-batch's 16-bit logits
  (``prepare_model_outputs``: flash-attn's cross-entropy makes the log-probs without another
  vocabulary-wide tensor; the entropy is a compiled reduction, ``use_torch_compile`` true). The
  optimizer states are on the host here where ``optimizer_offload`` is on.
- The reference policy is built ``forward_only``: FSDP ``CPUOffload(offload_params=True)``
  (transformer_impl.py:423-435; FSDP2 ``CPUOffloadPolicy``), so its shards live on the host and
  only the unit computing is on the GPU: nothing of it rests on the GPU.
- The critic (GAE) is a value model trained like the actor: fp32 shards (``model_dtype`` fp32) and
  AdamW states over the same ranks, offloaded between its phases as its own ``fsdp`` switches say.
"""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.parts.components import Component
from vramlint.plan import Plan

SOURCE = "verl 0.9.1 workers/engine_workers.py:729-826, workers/engine/fsdp/transformer_impl.py:200-231, 405-470"
ENGINE_SOURCE = ("verl 0.9.1 rollout.gpu_memory_utilization (vLLM >= 0.11: that share of the GPU's total memory "
                 "for the engine's weights, activations and KV cache; SGLang: mem_fraction_static)")
ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}
# verl empties PyTorch's cache before the engine wakes and between phases (update_weights
# ``empty_cache`` / ``aggressive_empty_cache``): a phase's peak is its tensors, no replayed reserve
EMPTIED = "verl 0.9.1 update_weights empty_cache, aggressive_empty_cache between phases"
ROLLOUT_PHASE, LOGPROB_PHASE = "rollout", "log-prob forward"


def _critic(plan: Plan) -> list[Component]:
    """The critic's fp32 shards (4 B) and AdamW m, v (8 B) per parameter over the data-parallel
    ranks, each on the host where the critic's own offload switch says."""
    r = plan.rollout
    if r is None or not r.critic_params:
        return []
    n = plan.data_parallel
    share = -(-r.critic_params // n)
    over = f"{r.critic_params:,} / {n}"
    return [Component("critic parameter shards", 0 if r.critic_params_offloaded else 4 * share,
                      "offloaded to host (critic.fsdp.param_offload)" if r.critic_params_offloaded
                      else f"4 B x P_critic ({over}, fp32)", SOURCE),
            Component("critic optimizer states", 0 if r.critic_optimizer_offloaded else 8 * share,
                      "offloaded to host (critic.fsdp.optimizer_offload)" if r.critic_optimizer_offloaded
                      else f"8 B x P_critic ({over}, AdamW m and v)", SOURCE)]


def _at_start(plan: Plan) -> int:
    """What the trainer holds when the engine starts (after ``init_model``, before any step): the
    actor's shards (fp32; a LoRA model's frozen base in 16 bits) and the critic's, unless offloaded;
    no optimizer states yet (torch creates them at the first step)."""
    r, n = plan.rollout, plan.data_parallel
    actor = 0 if r.params_offloaded else (2 if plan.lora_rank else 4) * -(-plan.model.params // n)
    critic = 0 if r.critic_params_offloaded else 4 * -(-r.critic_params // n)
    return actor + critic


def engine(plan: Plan) -> Component:
    """The rollout engine awake. vLLM takes its share of the GPU's total memory; SGLang's
    ``mem_fraction_static`` is a share of the memory free when it starts (verl 0.9.1 docs/perf/
    perf_tuning.rst:33-41; SGLang's own budget, memory/serving/sglang.py), beside the trainer's
    shards and the process's context."""
    r = plan.rollout
    total = plan.cluster.gpu.memory_bytes
    name = f"rollout engine ({ENGINES.get(r.engine, r.engine)}, awake)"
    if r.engine == "sglang":
        from vramlint.memory.parts.fixed import fixed_costs
        free = total - _at_start(plan) - fixed_costs(plan).bytes
        return Component(name, int(free * r.share), f"{r.share} x {free:,} B (free when it starts: the GPU's "
                         f"{total:,} less the trainer's shards and the context)", ENGINE_SOURCE)
    return Component(name, int(total * r.share), f"{r.share} x {total:,} B (the GPU's memory)", ENGINE_SOURCE)


def resting(plan: Plan) -> list[Component]:
    """What the RL job keeps beside the actor through its update: the critic's states, and the
    engine where it never sleeps (``free_cache_engine`` off)."""
    r = plan.rollout
    if r is None:
        return []
    return _critic(plan) + ([] if r.frees_between else [engine(plan)])


OFFLOADED = {"parameter shards": "params_offloaded", "optimizer states": "optimizer_offloaded"}


def _between(components: list[Component], plan: Plan, keep_params: bool) -> list[Component]:
    """The actor's resting states outside its update: a shard or state the framework moved to the
    host counts nothing (``keep_params``: the log-prob forward loads the shards back)."""
    r, out = plan.rollout, []
    for c in components:
        switch = OFFLOADED.get(c.name)
        if switch and getattr(r, switch) and not (keep_params and switch == "params_offloaded"):
            c = replace(c, bytes=0, formula="on the host between updates (" + (
                "param_offload" if switch == "params_offloaded" else "optimizer_offload") + ")", source=SOURCE)
        out.append(c)
    return out


def logprob_logits(plan: Plan) -> Component:
    """The log-prob micro-batch's 16-bit logits (a second copy where a temperature divides them)."""
    r = plan.rollout
    count = r.logprob_tokens * plan.model.vocab_size
    per = 4 if r.scaled_logits else 2
    return Component("log-prob logits", per * count, f"{per} B x logits ({r.logprob_tokens:,} tokens x "
                     f"{plan.model.vocab_size:,})" + (" and their temperature-scaled copy" if r.scaled_logits else ""),
                     "verl 0.9.1 transformer_impl.py prepare_model_outputs, utils/torch_functional.py:73-107")


def phases(plan: Plan, resting_components: list[Component], gathered: list[Component]) -> list[tuple[str, list]]:
    """The rollout and log-prob moments, as (name, components): what rests on the GPU in each."""
    r = plan.rollout
    if r is None:
        return []
    rollout = _between(resting_components, plan, keep_params=False)
    if r.frees_between:
        rollout.append(engine(plan))
    logprob = _between(resting_components, plan, keep_params=True) + list(gathered) + [logprob_logits(plan)]
    return [(ROLLOUT_PHASE, rollout), (LOGPROB_PHASE, logprob)]


PHASES = (ROLLOUT_PHASE, LOGPROB_PHASE)


def summary(update: int, moment: str, others: dict[str, int], context: int) -> str:
    """Each phase's per-GPU total in one line: the update (at its own peak moment, with the
    replayed reserve) and the rollout and log-prob phases (from an emptied cache)."""
    gib = 2 ** 30
    parts = [f"update {(update + context) / gib:.1f} GiB (at {moment})"]
    parts += [f"{name} {(size + context) / gib:.1f} GiB" for name, size in others.items()]
    return "RL step phases per GPU: " + ", ".join(parts)
