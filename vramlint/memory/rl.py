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

OpenRLHF 0.11.2 (``Rollout.framework`` openrlhf, wheel sha256 c969d70d…; readers/openrlhf_ppo.py)
runs each model as a Ray actor of its own, a DeepSpeed engine: under ``colocate_all`` every GPU
holds a process of the actor, the reference, the critic and the reward model, and a vLLM worker,
each with its CUDA context (``_contexts``). ``--ds.enable_sleep`` moves a trained model's
optimizer states, fp32 master, gradient partition and reduce buckets to the host outside its
``fit`` but keeps its 16-bit parameters (``offload_deepspeed_states``: no ``lp_params``,
utils/deepspeed/deepspeed_utils.py:151-190); the reference and the reward model rest as 16-bit
eval engines (``Resident``). Its log-prob forward casts the logits to fp32 (models/actor.py:267):
bf16 and fp32 copies at once, 6 B a logit.
"""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.parts.components import CONTEXT, Component
from vramlint.memory.parts.fixed import CONTEXT as CONTEXTS, fixed_costs
from vramlint.memory.runtimes.deepspeed.states import zero3_forward_gathered
from vramlint.plan import Plan
from vramlint.units import GiB

SOURCE = "verl 0.9.1 workers/engine_workers.py:729-826, workers/engine/fsdp/transformer_impl.py:200-231, 405-470"
ENGINE_SOURCE = ("verl 0.9.1 rollout.gpu_memory_utilization (vLLM >= 0.11: that share of the GPU's total memory "
                 "for the engine's weights, activations and KV cache; SGLang: mem_fraction_static)")
ENGINE_SOURCES = {"verl": ENGINE_SOURCE,
                  "openrlhf": "OpenRLHF 0.11.2 --vllm.gpu_memory_utilization (its vllm extra pins 0.29.0: that share of "
                              "the GPU's total memory for the engine's weights, activations and KV cache)"}
ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}
# verl empties PyTorch's cache before the engine wakes and between phases (update_weights
# ``empty_cache`` / ``aggressive_empty_cache``): a phase's peak is its tensors, no replayed reserve
EMPTIED = {"verl": "verl 0.9.1 update_weights empty_cache, aggressive_empty_cache between phases",
           "openrlhf": "OpenRLHF 0.11.2 offload_deepspeed_states and make_experience's empty_cache between forwards"}
ROLLOUT_PHASE, LOGPROB_PHASE = "rollout", "log-prob forward"
OPENRLHF = ("OpenRLHF 0.11.2 trainer/ray/ppo_actor.py, ppo_critic.py, launcher.py (DeepSpeed engines), "
            "utils/deepspeed/deepspeed_utils.py:151-190 offload_deepspeed_states")
EVAL_SOURCE = "OpenRLHF 0.11.2 utils/deepspeed/deepspeed.py:489-501 get_ds_eval_config, trainer/ray/launcher.py:104-180"
SOURCES = {"verl": SOURCE, "openrlhf": OPENRLHF}
LOGIT_WORDS = {6: " (bf16 and their fp32 copy)"}
LOGIT_SOURCES = {"verl": "verl 0.9.1 transformer_impl.py prepare_model_outputs, utils/torch_functional.py:73-107",
                 "openrlhf": "OpenRLHF 0.11.2 models/actor.py:266-289 (logits .to(torch.float32), div_ in place)"}


def _critic(plan: Plan) -> list[Component]:
    """The critic's resting states over the data-parallel ranks, as the actor's runtime keeps a
    model's: FSDP's fp32 shards and AdamW m, v (verl), or ZeRO's 16-bit weights, fp32 master with
    m, v and ZeRO-3's gradient partition and reduce bucket (OpenRLHF), each on the host where the
    critic's own offload switch says."""
    r = plan.rollout
    if r is None or not r.critic_params:
        return []
    if plan.runtime == "deepspeed":
        return _zero_critic(plan)
    n = plan.data_parallel
    share = -(-r.critic_params // n)
    over = f"{r.critic_params:,} / {n}"
    return [Component("critic parameter shards", 0 if r.critic_params_offloaded else 4 * share,
                      "offloaded to host (critic.fsdp.param_offload)" if r.critic_params_offloaded
                      else f"4 B x P_critic ({over}, fp32)", SOURCE),
            Component("critic optimizer states", 0 if r.critic_optimizer_offloaded else 8 * share,
                      "offloaded to host (critic.fsdp.optimizer_offload)" if r.critic_optimizer_offloaded
                      else f"8 B x P_critic ({over}, AdamW m and v)", SOURCE)]


def _zero_critic(plan: Plan) -> list[Component]:
    """A critic trained by DeepSpeed under the actor's ZeRO stage (OpenRLHF's ``CriticModelActor``),
    kept as the actor's ZeRO states are (runtimes/deepspeed/states.py): its 16-bit weights
    (partitioned under ZeRO-3), the fp32 master and AdamW m, v (12 B over the ranks; on the host
    under ``--ds.adam_offload``), and under ZeRO-3 its 16-bit gradient partition (none with the
    optimizer offloaded) and reduce bucket. Between its fits ``--ds.enable_sleep`` moves all but
    the weights to the host (``critic_optimizer_offloaded``)."""
    r, n, stage = plan.rollout, plan.data_parallel, plan.zero_stage
    p, slept, adam = r.critic_params, r.critic_optimizer_offloaded, plan.offload_optimizer != "none"
    asleep = "on the host between its fits (--ds.enable_sleep)"
    over = f" / {n}" if stage else ""
    out = [Component("critic 16-bit weights", 2 * -(-p // n) if stage == 3 else 2 * p,
                     f"2 B x P_critic ({p:,}{over if stage == 3 else ''})", OPENRLHF),
           Component("critic optimizer states", 0 if slept or adam else 12 * -(-p // (n if stage else 1)),
                     asleep if slept else "on the host (--ds.adam_offload)" if adam else
                     f"12 B x P_critic ({p:,}{over}: fp32 master, AdamW m, v)", OPENRLHF)]
    if stage == 3:
        out += [Component("critic gradient partition", 0 if slept or adam else 2 * -(-p // n),
                          asleep if slept else "none: the optimizer is offloaded" if adam else
                          f"2 B x P_critic ({p:,}{over})", OPENRLHF),
                Component("critic reduce bucket", 0 if slept else 2 * plan.reduce_bucket_size,
                          asleep if slept else f"2 B x reduce_bucket_size ({plan.reduce_bucket_size:,})", OPENRLHF)]
    return out


def _residents(plan: Plan) -> list[Component]:
    """The frozen models beside the actor (``Rollout.residents``), each an eval engine's weights."""
    return [eval_weights(plan, f"{m.name} weights", m.params, m.offloaded) for m in plan.rollout.residents]


def eval_weights(plan: Plan, name: str, params: int, offloaded: bool) -> Component:
    """A frozen model's DeepSpeed eval engine (OpenRLHF's reference and reward model): 16-bit
    weights, ZeRO-3's partition of them where the actor trains under ZeRO-3 (``get_ds_eval_config``:
    stage 3, else 0), else the whole model; none where its ZeRO-3 offload holds them on the host."""
    if offloaded:
        return Component(name, 0, "ZeRO-3 offload_param: on the host", EVAL_SOURCE)
    n, sharded = plan.data_parallel, plan.zero_stage == 3
    return Component(name, 2 * -(-params // n) if sharded else 2 * params,
                     f"2 B x {params:,}" + (f" / {n} (ZeRO-3 eval engine)" if sharded
                                            else " (a ZeRO-0 eval engine: whole on each GPU)"), EVAL_SOURCE)


def _contexts(plan: Plan) -> list[Component]:
    """The CUDA contexts (and NCCL buffers) of the other processes on each GPU: OpenRLHF's Ray
    actors of the colocated models, each a DeepSpeed process like the actor's, and a vLLM worker."""
    r = plan.rollout
    others = r.processes - 1
    if others <= 0 and not r.engine_process:
        return []
    each = fixed_costs(plan).bytes
    size = others * each + (CONTEXTS["infer"] if r.engine_process else 0)
    words = " + ".join(([f"{others} x {each:,} B (DeepSpeed processes)"] if others > 0 else [])
                       + ([f"{CONTEXTS['infer']:,} B (the vLLM worker)"] if r.engine_process else []))
    return [Component("other processes' CUDA contexts", size, words,
                      "measured contexts (memory/parts/fixed.py); " + OPENRLHF, kind=CONTEXT)]


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
    return Component(name, int(total * r.share), f"{r.share} x {total:,} B (the GPU's memory)",
                     ENGINE_SOURCES[r.framework])


def resting(plan: Plan) -> list[Component]:
    """What the RL job keeps beside the actor through its update: the critic's states, the frozen
    models, the other processes' contexts, and the engine where it shares the GPUs and never
    sleeps (verl's ``free_cache_engine`` off, OpenRLHF without ``--vllm.enable_sleep``)."""
    r = plan.rollout
    if r is None:
        return []
    awake = [engine(plan)] if r.engine_here and not r.frees_between else []
    return _critic(plan) + _residents(plan) + _contexts(plan) + awake


# The actor's resting components each framework moves to the host between its phases, by the
# name before any "(...)", and the switch that moves them: verl's FSDP shards and optimizer states;
# verl's Megatron engine its parameters with their gradient buffer (``Rollout.grads_offloaded``) and
# its optimizer states; DeepSpeed's offload_states (OpenRLHF) the optimizer states with the fp32
# master, the gradient partition and the reduce bucket, never the 16-bit parameters.
OFFLOADED = {"fsdp": {"parameter shards": "params_offloaded", "optimizer states": "optimizer_offloaded"},
             "megatron": {"parameters": "params_offloaded", "gradient buffer": "grads_offloaded",
                          "optimizer states": "optimizer_offloaded"},
             "deepspeed": {"optimizer states": "optimizer_offloaded", "gradient partition": "optimizer_offloaded",
                           "IPG reduce bucket": "optimizer_offloaded"}}
SWITCHES = {("verl", "params_offloaded"): "param_offload", ("verl", "grads_offloaded"): "param_offload",
            ("verl", "optimizer_offloaded"): "optimizer_offload", ("openrlhf", "optimizer_offloaded"): "--ds.enable_sleep"}
# Where a runtime's offload between phases is read, where it is not the framework's FSDP / DeepSpeed one
OFFLOAD_SOURCES = {"megatron": "verl 0.9.1 workers/engine/base.py BaseEngineCtx, workers/engine/megatron/"
                               "transformer_impl.py to, utils/megatron_utils.py offload_megatron_model_to_cpu"}


def between(components: list[Component], plan: Plan, keep_params: bool) -> list[Component]:
    """A trained model's resting states outside its update: a shard or state the framework moved to
    the host counts nothing (``keep_params``: the log-prob forward loads the parameters back)."""
    r, out = plan.rollout, []
    moved = OFFLOADED.get(plan.runtime, {})
    for c in components:
        switch = moved.get(c.name.split(" (")[0])
        if switch and getattr(r, switch) and not (keep_params and switch == "params_offloaded"):
            c = replace(c, bytes=0, formula=f"on the host between updates ({SWITCHES[r.framework, switch]})",
                        source=OFFLOAD_SOURCES.get(plan.runtime, SOURCES[r.framework]))
        out.append(c)
    return out


def logprob_logits(plan: Plan) -> Component:
    """The log-prob micro-batch's logits at their peak: verl's 16-bit ones (a second copy where a
    temperature divides them), OpenRLHF's bf16 and fp32 copies (``logit_bytes`` 6)."""
    r = plan.rollout
    count = r.logprob_tokens * plan.model.vocab_size
    per = r.logit_bytes * (2 if r.scaled_logits else 1)
    what = LOGIT_WORDS.get(r.logit_bytes, "")
    return Component("log-prob logits", per * count, f"{per} B x logits ({r.logprob_tokens:,} tokens x "
                     f"{plan.model.vocab_size:,}){what}" + (" and their temperature-scaled copy" if r.scaled_logits
                                                          else ""), LOGIT_SOURCES[r.framework])


def phases(plan: Plan, resting_components: list[Component], gathered: list[Component]) -> list[tuple[str, list]]:
    """The rollout and log-prob moments, as (name, components): what rests on the GPU in each."""
    r = plan.rollout
    if r is None or not (r.engine_here or r.logprob_tokens):
        return []                   # a group that neither hosts the engine nor makes log-probs: its update alone
    rollout = between(resting_components, plan, keep_params=False)
    if r.frees_between and r.engine_here:
        rollout.append(engine(plan))
    logprob = between(resting_components, plan, keep_params=True) + list(gathered) + [logprob_logits(plan)]
    return [(ROLLOUT_PHASE, rollout), (LOGPROB_PHASE, logprob)]


PHASES = (ROLLOUT_PHASE, LOGPROB_PHASE)
FROZEN_PHASE = "forward (no grad)"


def frozen(plan: Plan) -> list[Component]:
    """A GPU group that trains nothing (``Rollout.trains`` off: OpenRLHF's reference or reward model
    on GPUs of its own, ``ReferenceModelActor`` / ``RewardModelActor``, trainer/ray/launcher.py:
    105-200 at 0.11.2) at its forward's peak: its 16-bit eval engine's weights (ZeRO-3 partitioned
    over the group's ranks where the actor trains under ZeRO-3, else whole: ``get_ds_eval_config``;
    on the host under its ``offload``), and the larger of two moments: a layer computing with what
    ZeRO-3 gathers for it, or the head with the micro-batch's logits (the reference's log-probs:
    bf16 and fp32, ``logit_bytes``; a reward model's value head makes one number a token,
    ``logit_bytes`` 0). ``use_cache`` is off (models/actor.py:210, models/model.py:159): no KV
    cache; a layer's working set is gone by the logits."""
    r, n, sharded = plan.rollout, plan.data_parallel, plan.zero_stage == 3
    weights = eval_weights(plan, "weights (16-bit eval engine)", plan.model.params, r.offloaded)
    layer, head = zero3_forward_gathered(plan) if sharded and (n > 1 or r.offloaded) else (None, None)
    at_head = [weights] + ([head] if head else []) + ([logprob_logits(plan)] if r.logit_bytes else [])
    in_layer = [weights] + ([layer] if layer else [])
    return max(at_head, in_layer, key=lambda parts: sum(c.bytes for c in parts))


def summary(update: int, moment: str, others: dict[str, int], context: int) -> str:
    """Each phase's per-GPU total in one line: the update (at its own peak moment, with the
    replayed reserve) and the rollout and log-prob phases (from an emptied cache)."""
    parts = [f"update {(update + context) / GiB:.1f} GiB (at {moment})"]
    parts += [f"{name} {(size + context) / GiB:.1f} GiB" for name, size in others.items()]
    return "RL step phases per GPU: " + ", ".join(parts)
