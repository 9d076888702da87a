"""What would fit: the smallest change to a plan that brings its peak under a GPU's memory.

Computed by running the memory model on changed plans, never guessed: the lowest ZeRO stage or FSDP
strategy, gradient checkpointing, ZeRO-3 keeping no layer gathered for backward
(``stage3_max_reuse_distance 0`` with ``stage3_max_live_parameters`` down to the prefetch bucket:
the prefetcher keeps what it passes while fewer are live), the largest micro-batch, offload, or
the number of GPUs, in the config's own vocabulary. Each answer carries its own predicted peak.
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.errors import UnplannableError
from vramlint.memory import estimate
from vramlint.memory.search import Change, _bisect, _largest, _largest_from, fits, fitting_peak, peak
from vramlint.plan import Plan
from vramlint.vocabulary import fused_loss, runtimes, say


def _change(plan: Plan, budget: int, words: str, **changes) -> list[Change]:
    """The change, with its peak, if it makes the plan fit (never a setup the job cannot run in:
    one the plan refuses, such as an 8-bit base under full sharding, is no hint)."""
    changed = _changed(plan, **changes)
    value = None if changed is None else fitting_peak(changed, budget)
    return [] if value is None else [Change(words, value)]


def _changed(plan: Plan, **changes) -> Plan | None:
    """``plan`` with the changes, or None where the job cannot run that way: the memory model
    refuses it (``UnplannableError``), or the framework would not start it (``Plan.refused``)."""
    try:
        changed = plan.with_changes(**changes)
    except UnplannableError:
        return None
    return None if changed.refused() else changed


def largest_micro_batch(plan: Plan, budget: int, most: int = 1 << 16) -> int:
    """The largest micro-batch up to ``most`` whose peak fits ``budget`` (0 if not even 1 fits).
    The peak grows with the micro-batch, and the tensors alone (no allocator replay) are a lower
    bound of it: the bound's answer is searched first, cheaply, and the replayed one walked down
    from it. A hint never raises the job's micro-batch, so its searches stop there: each probe
    is an allocator replay, a tenth of a second for a 100-layer model."""
    at = lambda mb: plan.with_changes(micro_batch=mb)  # noqa: E731
    bound = _largest(lambda mb: estimate(at(mb), replay=False).per_gpu_peak <= budget, max(1, plan.micro_batch),
                     most)
    return _starts_with(plan, _largest_from(lambda mb: fits(at(mb), budget), bound))


def _starts_with(plan: Plan, micro_batch: int) -> int:
    """The largest micro-batch up to ``micro_batch`` DeepSpeed accepts: one that divides the file's
    train_batch_size over the batch world (``Plan.global_batch``); any where the file states none,
    or where its own micro-batch does not divide it either (that refusal is its own finding,
    rules/batch.py). A smaller micro-batch fits where a larger one does."""
    if not plan.global_batch or plan.global_batch % (plan.micro_batch * plan.batch_world):
        return micro_batch
    while micro_batch > 0 and plan.global_batch % (micro_batch * plan.batch_world):
        micro_batch -= 1
    return micro_batch


def _say(plan: Plan, setting: str, value: object = None) -> str:
    """A change in the words of the file that holds the setting (``vocabulary.WORDS``): a ZeRO
    stage for a job without DeepSpeed is a switch to DeepSpeed; DeepSpeed's micro-batch is its
    file's ``train_micro_batch_size_per_gpu`` unless a recipe sets it."""
    if setting == "stage" and plan.runtime == "torch":
        setting = "to_deepspeed"
    default = plan.source
    if setting == "micro_batch" and plan.runtime == "deepspeed" and plan.source in ("deepspeed", "accelerate"):
        default = "deepspeed"
    return say(plan.vocabulary, default, setting, value)


def _micro_words(plan: Plan, best: int) -> str:
    """A smaller micro-batch in the file's words; where the file fixes train_batch_size and states
    gradient_accumulation_steps too, the accumulation that keeps DeepSpeed's batch arithmetic whole."""
    origin = plan.origins.get("grad_accum")
    stated = origin is not None and origin.location is not None and origin.location.json_path.endswith(
        "gradient_accumulation_steps")              # not DeepSpeed's own derivation from train_batch_size
    if plan.global_batch and stated:
        return (_say(plan, "micro_batch_exact", best) + " + "
                + _say(plan, "grad_accum", plan.global_batch // (best * plan.batch_world)))
    return _say(plan, "micro_batch", best)


def _fsdp_only(plan: Plan) -> bool:
    """FSDP is the only sharding the job's framework has (torchtune runs no DeepSpeed), or the one
    it runs already."""
    return plan.runtime == "fsdp" or "deepspeed" not in runtimes(plan.source)


def _sharded(plan: Plan) -> dict:
    """Full sharding in the job's own runtime: FSDP FULL_SHARD, else ZeRO-3."""
    return {"runtime": "fsdp", "fsdp_strategy": "FULL_SHARD"} if _fsdp_only(plan) else {"runtime": "deepspeed",
                                                                                         "zero_stage": 3}


def _full_sharding_words(plan: Plan) -> str:
    """Full sharding (``_sharded``) in the job's words: FULL_SHARD for an FSDP job, a switch to FSDP
    where FSDP is the framework's only sharding, else ZeRO-3."""
    if plan.runtime == "fsdp":
        return _say(plan, "fsdp_strategy", "FULL_SHARD")
    return _say(plan, "to_fsdp") if _fsdp_only(plan) else _say(plan, "stage", 3)


def _sharding(plan: Plan) -> list[tuple[dict, str]]:
    """The next sharding steps in the runtime's own vocabulary, least communication first."""
    if plan.runtime == "deepspeed":
        return [({"zero_stage": stage}, _say(plan, "stage", stage)) for stage in range(plan.zero_stage + 1, 4)]
    if plan.runtime == "fsdp":
        order = ["NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD"]
        start = order.index(plan.fsdp_strategy) + 1 if plan.fsdp_strategy in order else len(order)
        return [({"fsdp_strategy": name}, _say(plan, "fsdp_strategy", name)) for name in order[start:]]
    steps = [({"runtime": "fsdp", "fsdp_strategy": "FULL_SHARD"}, _say(plan, "to_fsdp"))]
    return steps if _fsdp_only(plan) else steps + [({"runtime": "deepspeed", "zero_stage": 3}, _say(plan, "stage", 3))]


def _gathers(plan: Plan) -> bool:
    """ZeRO-3 gathering parameters (over several GPUs, or from the host), set up in a DeepSpeed
    file (Accelerate's inline deepspeed_config has no stage3_max_reuse_distance)."""
    return (plan.runtime == "deepspeed" and plan.zero_stage == 3 and plan.source != "accelerate"
            and (plan.data_parallel > 1 or plan.offload_param != "none"))


def _offload(plan: Plan) -> tuple[dict, str] | None:
    if plan.runtime == "deepspeed" and plan.offload_optimizer == "none" and plan.zero_stage >= 1:
        return {"offload_optimizer": "cpu"}, _say(plan, "offload_optimizer")
    if plan.runtime == "fsdp" and plan.offload_param == "none":
        return {"offload_param": "cpu"}, _say(plan, "fsdp_offload")
    return None


def fitting_changes(plan: Plan, budget: int) -> list[Change]:
    """Single changes that fit, cheapest first: a sharding step, checkpointing, ZeRO-3's reuse
    distance, a smaller micro-batch, offload; failing those, combinations; failing those, more GPUs."""
    if plan.refused():                  # the framework starts no launch of it: its refusal is the finding
        return []
    out: list[Change] = []
    if plan.parallelism is not None:    # a pretraining framework's job: its layout's changes, in its keys
        from vramlint.memory.fit_layout import layout_changes
        from vramlint.memory.fit_rl import rl_changes
        found = (rl_changes(plan, budget) if plan.rollout is not None else []) + layout_changes(plan, budget)
        return found or (_offloaded_and(plan, budget) if plan.rollout is not None else [])
    if plan.frozen:                     # a group that trains nothing: its eval engine's changes alone
        from vramlint.memory.fit_rl import frozen_changes
        return frozen_changes(plan, budget)
    if plan.rollout is not None:        # an RL step: its layout's own changes first (memory/fit_rl.py)
        from vramlint.memory.fit_rl import rl_changes
        out += rl_changes(plan, budget)
    for changes, words in _sharding(plan):
        sharded = _change(plan, budget, words, **changes)
        if sharded:
            out += sharded
            break
    if not plan.grad_checkpointing:
        out += _change(plan, budget, _say(plan, "grad_checkpointing"), grad_checkpointing=True)
    live = plan.prefetch_bucket_size        # ZeRO-3 keeps no layer gathered for backward: both bounds down
    if _gathers(plan) and (plan.max_reuse_distance > 0 or plan.max_live_parameters > live):
        out += _change(plan, budget, f"zero_optimization.stage3_max_reuse_distance 0 + stage3_max_live_parameters "
                       f"{live}", max_reuse_distance=0, max_live_parameters=live)
    best = largest_micro_batch(plan, budget, most=plan.micro_batch)
    if 0 < best < plan.micro_batch:
        out.append(Change(_micro_words(plan, best), peak(plan.with_changes(micro_batch=best))))
    offload = _offload(plan)
    if offload:
        out += _change(plan, budget, offload[1], **offload[0])
    loss = fused_loss_change(plan)
    if loss:
        out += _change(plan, budget, loss[1], **loss[0])
    if plan.rollout is not None:        # a shorter response changes what the run learns from: last
        from vramlint.memory.fit_rl import response_change
        out += response_change(plan, budget)
    return out or _combined(plan, budget) + _more_gpus(plan, budget)


def fused_loss_change(plan: Plan) -> tuple[dict, str] | None:
    """The framework's fused or chunked loss, where the job computes the full logits and a
    single-model stage lets the framework switch it on."""
    found = fused_loss(plan.source)
    if found is None or plan.loss != "full" or plan.rows_per_example != 1 or plan.reference != "none":
        return None
    return {"loss": found[0]}, found[1]


def _offloaded_and(plan: Plan, budget: int) -> list[Change]:
    """Where no single change fits an RL job on a layout (verl's Megatron engine): its offload
    between phases, and on top of it each change of the RL step or the layout that then fits."""
    from vramlint.memory.fit_layout import layout_changes
    from vramlint.memory.fit_rl import offloaded, rl_changes
    step = offloaded(plan)
    if step is None:
        return []
    changed, words = step
    return [Change(" + ".join([*words, change.text]), change.peak)
            for change in rl_changes(changed, budget) + layout_changes(changed, budget)]


def _combined(plan: Plan, budget: int) -> list[Change]:
    """When no single change fits: full sharding with checkpointing, then with CPU offload of the
    optimizer, then of the parameters too; the first that fits, at the largest micro-batch it allows."""
    fsdp = _fsdp_only(plan)
    full = _sharded(plan)
    opt, par = _say(plan, "offload_optimizer"), _say(plan, "offload_param")
    ladder = [({}, []), ({"offload_param": "cpu"}, [_say(plan, "fsdp_offload")])] if fsdp else [
        ({}, []), ({"offload_optimizer": "cpu"}, [opt]), ({"offload_optimizer": "cpu", "offload_param": "cpu"}, [opt, par])]
    loss = fused_loss_change(plan)
    if loss:                             # the fused loss before offload: it costs no step time
        ladder.insert(1, (loss[0], [loss[1]]))
        ladder[2:] = [({**extra, **loss[0]}, [loss[1], *words]) for extra, words in ladder[2:]]
    for extra, words in ladder:
        strongest = _changed(plan, grad_checkpointing=True, **full, **extra)
        best = largest_micro_batch(strongest, budget, most=plan.micro_batch) if strongest is not None else 0
        if not best:
            continue
        steps = [] if _is_full(plan) else [_full_sharding_words(plan)]
        steps += ([] if plan.grad_checkpointing else [_say(plan, "grad_checkpointing")]) + words
        if best < plan.micro_batch:
            steps.append(_micro_words(strongest, best))
        if steps:
            return [Change(" + ".join(steps), peak(strongest.with_changes(micro_batch=min(best, plan.micro_batch))))]
    return []


def _is_full(plan: Plan) -> bool:
    return (plan.runtime == "deepspeed" and plan.zero_stage == 3) or (plan.runtime == "fsdp" and plan.fsdp_strategy == "FULL_SHARD")


def _more_gpus(plan: Plan, budget: int, most: int = 64) -> list[Change]:
    """The fewest whole nodes of the same GPUs on which the plan, fully sharded with checkpointing
    and without offload, fits at micro-batch 1 (binary search up to ``most`` nodes)."""
    from dataclasses import replace
    loss = fused_loss_change(plan)
    sharded = _changed(plan, grad_checkpointing=True, micro_batch=1, offload_optimizer="none", offload_param="none",
                       **_sharded(plan), **(loss[0] if loss else {}))
    if sharded is None:
        return []
    if sharded.with_changes(cluster=replace(plan.cluster, nodes=most)).refused():
        return []
    on = lambda nodes: sharded.with_changes(cluster=replace(plan.cluster, nodes=nodes))  # noqa: E731
    # fewer nodes need more memory each; the tensors alone bound the answer from below
    tensors = lambda nodes: estimate(on(nodes), replay=False).per_gpu_peak <= budget  # noqa: E731
    if not tensors(most):
        return []
    lo = plan.cluster.nodes
    hi = _bisect(tensors, most, lo)
    step = 1
    while not fits(on(hi), budget):                     # gallop up from the bound, then bisect
        if hi == most:
            return []
        lo, hi = hi, min(most, hi + step)
        step *= 2
    hi = _bisect(lambda nodes: fits(on(nodes), budget), hi, lo)
    bigger = on(hi)
    fused = f", {loss[1]}" if loss else ""
    return [Change(f"{hi} nodes x {plan.cluster.per_node} GPUs ({bigger.cluster.world_size} GPUs), fully sharded "
                   f"with checkpointing at micro-batch 1{fused}, no offload", peak(bigger))]


@dataclass(frozen=True)
class Setup:
    """One way to run the training job, with the largest micro-batch that fits and its peak."""

    runtime: str
    strategy: str          # Plan.setup_name: "ZeRO-2", "FSDP1 FULL_SHARD", ...
    offload: str           # "none", "optimizer", "optimizer + parameters"
    grad_checkpointing: bool
    micro_batch: int
    peak: int
    plan: Plan | None = None     # the plan it is (at its micro-batch)

    @property
    def cost(self) -> tuple:
        """Best first: no offload (PCIe-bound), no recomputation, less communication, bigger batches."""
        return (["none", "optimizer", "optimizer + parameters"].index(self.offload), self.grad_checkpointing,
                self.strategy.endswith("3") or "FULL" in self.strategy, -self.micro_batch)


CANDIDATES = [("deepspeed", 0, "none", "none"), ("deepspeed", 1, "none", "none"), ("deepspeed", 2, "none", "none"),
              ("deepspeed", 3, "none", "none"), ("deepspeed", 2, "cpu", "none"), ("deepspeed", 3, "cpu", "none"),
              ("deepspeed", 3, "cpu", "cpu"), ("fsdp", "SHARD_GRAD_OP", "none", "none"),
              ("fsdp", "FULL_SHARD", "none", "none"),
              ("fsdp", "FULL_SHARD", "cpu", "cpu")]       # fsdp_offload_params: shards, gradients and the step


def training_setups(plan: Plan, budget: int) -> list[Setup]:
    """Every DeepSpeed stage / offload and FSDP strategy, with and without checkpointing, that fits
    ``budget`` at micro-batch 1 or more; best first. A pretraining framework's job is weighed in its
    own layouts (``fit_layout.layout_candidates``), never as a DeepSpeed or Accelerate one."""
    if plan.parallelism is not None:
        return _layout_setups(plan, budget)
    out = []
    for runtime, strategy, opt, par in CANDIDATES:
        if runtime not in runtimes(plan.source):
            continue
        for checkpointing in (False, True):
            base = plan.with_changes(runtime=runtime, offload_optimizer=opt, offload_param=par,
                                     grad_checkpointing=checkpointing, micro_batch=1,
                                     zero_stage=strategy if runtime == "deepspeed" else 0,
                                     fsdp_strategy=strategy if runtime == "fsdp" else plan.fsdp_strategy)
            best = min(largest_micro_batch(base.with_changes(micro_batch=64), budget), 64)
            if best:
                offload = {"none": "none", "cpu": "optimizer"}[opt] if par == "none" else "optimizer + parameters"
                fitted = base.with_changes(micro_batch=best)
                out.append(Setup(runtime, base.setup_name, offload, checkpointing, best, peak(fitted), fitted))
    return sorted(out, key=lambda s: s.cost)


def _layout_setups(plan: Plan, budget: int) -> list[Setup]:
    """A pretraining framework's layouts that fit, each at the largest micro-batch up to 64 (under
    pipeline parallelism at its own micro-batch, whose count the batch sets)."""
    from vramlint.memory.fit_layout import layout_candidates
    out = []
    for layout in layout_candidates(plan):
        if plan.parallelism.pipeline > 1:
            best = layout.micro_batch if fits(layout, budget) else 0
        else:
            best = min(largest_micro_batch(layout.with_changes(micro_batch=64), budget), 64)
        if best:
            fitted = layout.with_changes(micro_batch=best)
            offload = "none" if layout.offload_param == "none" else "optimizer + parameters"
            out.append(Setup(plan.runtime, f"{layout.setup_name}, AC {layout.parallelism.checkpointing}", offload,
                             layout.parallelism.checkpointing in ("full", "uniform:1"), best, peak(fitted), fitted))
    return sorted(out, key=lambda s: s.cost)


def setup_edits(plan: Plan, setup: Setup) -> list[str]:
    """The edits that turn ``plan``'s files into ``setup``, each in the words of the file that
    holds the setting (``vocabulary``): a runtime or sharding step, offload, checkpointing, the
    micro-batch."""
    if plan.parallelism is not None:
        from vramlint.memory.fit_layout import layout_edits
        return layout_edits(plan, setup.plan)
    to = setup.plan
    edits = []
    if to.runtime == "deepspeed" and (plan.runtime != "deepspeed" or to.zero_stage != plan.zero_stage):
        edits.append(_say(plan, "stage", to.zero_stage))
    elif to.runtime == "fsdp" and plan.runtime != "fsdp":
        edits.append(_say(plan, "to_fsdp"))
        edits += [] if to.fsdp_strategy == "FULL_SHARD" else [_say(plan, "fsdp_strategy", to.fsdp_strategy)]
    elif to.runtime == "fsdp" and to.fsdp_strategy != plan.fsdp_strategy:
        edits.append(_say(plan, "fsdp_strategy", to.fsdp_strategy))
    if to.offload_optimizer != "none" and plan.offload_optimizer == "none" and to.runtime == "deepspeed":
        edits.append(_say(plan, "offload_optimizer"))
    if to.offload_param != "none" and plan.offload_param == "none":
        edits.append(_say(plan, "offload_param" if to.runtime == "deepspeed" else "fsdp_offload"))
    if to.grad_checkpointing != plan.grad_checkpointing:
        edits.append(_say(plan, "grad_checkpointing" if to.grad_checkpointing else "no_grad_checkpointing"))
    if to.micro_batch != plan.micro_batch:
        edits.append(_say(plan, "micro_batch", to.micro_batch))
    return edits
