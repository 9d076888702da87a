"""What would fit an online-RL step (``Plan.rollout``): changes to the RL layout, each with the
largest value it allows, found by running the memory model on the changed plan (memory/rl.py):
the rollout engine's share of the GPU, the actor's optimizer states and shards on the host between
phases, the update's token budget under ``use_dynamic_bsz``, and the log-prob micro-batch."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.search import Change, _bisect, _largest_from, fits, peak
from vramlint.memory.inference import kv_cache
from vramlint.plan import Plan
from vramlint.vocabulary import say, speaks


def _with(plan: Plan, **changes) -> Plan:
    return plan.with_changes(rollout=replace(plan.rollout, **changes))


def engine_floor(plan: Plan) -> float:
    """The least share the engine starts with: its weights (2 B x P / TP) and the KV cache of one
    sequence of the longest length, as a share of the GPU (vLLM refuses a budget that holds less:
    "To serve at least one request with the models's max seq len ...")."""
    r = plan.rollout
    weights = 2 * plan.model.params // max(1, r.tensor_parallel)
    one = kv_cache(plan.with_changes(mode="infer", micro_batch=1, weights_dtype="bfloat16", rollout=None)).bytes
    return (weights + one // max(1, r.tensor_parallel)) / plan.cluster.gpu.memory_bytes


def _share(plan: Plan, budget: int) -> list[Change]:
    """The largest rollout share (in hundredths) below the job's that fits, above the engine's floor."""
    r = plan.rollout
    if not r.engine_here:                   # the engine's GPUs are its own: its share is not the peak's
        return []
    top, floor = int(round(r.share * 100)) - 1, int(engine_floor(plan) * 100) + 1
    ok = lambda k: fits(_with(plan, share=k / 100), budget)  # noqa: E731
    if top < floor or not ok(floor):
        return []
    best = top if ok(top) else _bisect(ok, floor, top)
    changed = _with(plan, share=best / 100)
    return [Change(say(plan.vocabulary, plan.source, "rollout_share", best / 100), peak(changed))]


def offloaded(plan: Plan) -> tuple[Plan, list[str]] | None:
    """The job with the actor's optimizer states and shards on the host between phases (and a
    resident model whose offload follows the actor's: verl's Megatron reference), and the words that
    say it; None where its shards are there already or the job's keys cannot say it."""
    r = plan.rollout
    if r.params_offloaded or not speaks(plan.vocabulary, plan.source, "params_offloaded"):
        return None
    residents = tuple(replace(one, offloaded=True) if one.follows_actor else one for one in r.residents)
    changed = _with(plan, optimizer_offloaded=True, params_offloaded=True, residents=residents)
    words = [say(plan.vocabulary, plan.source, name) for name in ("optimizer_offloaded", "params_offloaded")
             if not getattr(r, name)]
    return changed, words


def _offloads(plan: Plan, budget: int) -> list[Change]:
    """The actor's optimizer states, then its shards too, on the host between phases."""
    r = plan.rollout
    if not r.optimizer_offloaded:
        changed = _with(plan, optimizer_offloaded=True, critic_optimizer_offloaded=r.critic_optimizer_offloaded
                        or r.one_switch)
        if fits(changed, budget):
            return [Change(say(plan.vocabulary, plan.source, "optimizer_offloaded"), peak(changed))]
    both = offloaded(plan)
    return [Change(" + ".join(both[1]), peak(both[0]))] if both is not None and fits(both[0], budget) else []


def _logprob(plan: Plan, budget: int) -> list[Change]:
    """The largest log-prob micro-batch that fits: rows of prompt + response, or a token budget."""
    r = plan.rollout
    unit = r.logprob_row or 1
    count = r.logprob_tokens // unit
    if count <= 1:
        return []
    best = _largest_from(lambda k: fits(_with(plan, logprob_tokens=k * unit), budget), count - 1)
    if not best:
        return []
    return [Change(say(plan.vocabulary, plan.source, r.logprob_setting, best),
                   peak(_with(plan, logprob_tokens=best * unit)))]


def _token_budget(plan: Plan, budget: int) -> list[Change]:
    """Under ``use_dynamic_bsz`` the update's micro-batch is a token budget (one packed row):
    the largest that fits."""
    if not plan.rollout.dynamic:
        return []
    best = _largest_from(lambda n: fits(plan.with_changes(seq_len=n), budget), plan.seq_len - 1)
    if not best:
        return []
    return [Change(say(plan.vocabulary, plan.source, "token_budget", best), peak(plan.with_changes(seq_len=best)))]


def response_change(plan: Plan, budget: int) -> list[Change]:
    """The largest response length that fits, where each sequence is a row of the prompt and
    response caps (not a token budget, ``use_dynamic_bsz``): the update's rows and the log-prob
    micro-batch's shorten with it, each Ulysses rank keeping its share. It changes what the run
    learns from, so it comes after every other change (memory/fit.py)."""
    r = plan.rollout
    if r.dynamic or not (r.prompt_tokens and r.response_tokens and r.logprob_row) \
            or not speaks(plan.vocabulary, plan.source, "response_length"):
        return []
    rows = r.logprob_tokens // r.logprob_row

    def shorter(k: int) -> Plan:
        row = -(-(r.prompt_tokens + k) // r.seq_split)
        return plan.with_changes(seq_len=row, rollout=replace(r, logprob_row=row, logprob_tokens=rows * row))

    best = _largest_from(lambda k: fits(shorter(k), budget), r.response_tokens - 1)
    if not best:
        return []
    return [Change(say(plan.vocabulary, plan.source, "response_length", best), peak(shorter(best)))]


def rl_changes(plan: Plan, budget: int) -> list[Change]:
    """The RL layout's own changes that fit, the cheapest first: the engine's share (a smaller KV
    cache), the log-prob micro-batch, the token budget, then offload between phases (a shorter
    response, ``response_change``, after every other change). The rollout's TP and ``rollout.n``
    move no per-GPU peak priced here (the engine's share is its ``gpu_memory_utilization``
    whatever its TP; ``n`` multiplies the batch, not a micro-batch): TP counts in the share's floor."""
    return _share(plan, budget) + _logprob(plan, budget) + _token_budget(plan, budget) + _offloads(plan, budget)


def frozen_changes(plan: Plan, budget: int) -> list[Change]:
    """A group that trains nothing (``Plan.frozen``): ZeRO-3 for its eval engine (OpenRLHF's eval
    config follows the actor's stage), a smaller experience micro-batch, its model on the host
    under ZeRO-3 (``offload_setting``); failing those, the fewest GPUs for it under ZeRO-3."""
    out: list[Change] = []
    stage3 = plan.with_changes(zero_stage=3)
    if plan.zero_stage != 3 and fits(stage3, budget):
        out.append(Change(say(plan.vocabulary, plan.source, "stage", 3), peak(stage3)))
    out += _logprob(plan, budget)
    setting = plan.rollout.offload_setting
    offloaded = _with(stage3, offloaded=True)
    if setting and not plan.rollout.offloaded and speaks(plan.vocabulary, plan.source, setting) \
            and fits(offloaded, budget):
        words = ([] if plan.zero_stage == 3 else [say(plan.vocabulary, plan.source, "stage", 3)])
        out.append(Change(" + ".join(words + [say(plan.vocabulary, plan.source, setting)]), peak(offloaded)))
    return out or _frozen_gpus(stage3, budget)


def _frozen_gpus(plan: Plan, budget: int, most: int = 64) -> list[Change]:
    """The fewest whole nodes of the group's GPUs on which its ZeRO-3 eval engine fits."""
    on = lambda nodes: plan.with_changes(cluster=replace(plan.cluster, nodes=nodes))  # noqa: E731
    if not fits(on(most), budget):
        return []
    nodes = _bisect(lambda n: fits(on(n), budget), most, plan.cluster.nodes)
    bigger = on(nodes)
    return [Change(f"{nodes} nodes x {plan.cluster.per_node} GPUs ({bigger.cluster.world_size} GPUs) for it, "
                   + say(plan.vocabulary, plan.source, "stage", 3), peak(bigger))]
