"""The memory model: pure functions from a Plan to an Estimate. No I/O, no printing, no torch."""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from vramlint.memory import rl
from vramlint.memory.parts.components import ALLOCATOR, CONTEXT, Component, Estimate
from vramlint.memory.parts.fixed import fixed_costs, workspaces
from vramlint.memory.inference import inference_components
from vramlint.memory.reserve import headroom, wanted
from vramlint.memory.parts.adapters import refused_targets
from vramlint.models.shape import LINEAR
from vramlint.models.tp_plans import autotp_refusal, hf_refusal
from vramlint.memory.runtimes import runtime
from vramlint.memory.training import training_peak
from vramlint.models.vision import LOADED_BY, TEXT_ONLY
from vramlint.plan import Plan


# Relative half-width of the low/high band: the calibration set's spread, widened where a regime
# has no measurement behind it or a known miss (benchmarks/accuracy.py, docs/memory-model.md §7).
BAND = 0.05
WIDER = (
    (lambda p: p.runtime == "deepspeed" and p.zero_stage == 3, 0.05,
     "ZeRO-3: gradient blocks freed with record_stream wait for the reduce stream (timing-dependent reserve; "
     "measured -2.1 and -4.1 %)"),
    (lambda p: p.runtime == "deepspeed" and p.offload_param != "none", 0.05,
     "ZeRO-3 parameter offload: the measured reserve still grows from step to step"),
    (lambda p: p.runtime == "fsdp", 0.10, "FSDP: its op order recorded on the CPU (FSDP1 and FSDP2), its "
     "streams' timing not measured on a GPU"),
    (lambda p: p.runtime == "deepspeed" and p.zero_stage == 3 and p.data_parallel > 1, 0.05,
     "ZeRO-3 gathering over several GPUs: not measured"),
    (lambda p: p.lora_rank > 0 and p.data_parallel > 1 and (p.runtime == "fsdp" or p.zero_stage == 3), 0.30,
     "LoRA / QLoRA sharded over several GPUs: published runs (benchmarks/published.py) measure up to 44 % above "
     "the estimate, the missing memory all in the step's transient and only with 2+ GPUs; not traced on a GPU"),
    (lambda p: p.model.is_moe, 0.05, "mixture-of-experts: routing-dependent buffers"),
    (lambda p: p.runtime == "torchtitan", 0.10, "torchtitan: published runs (benchmarks/torchtitan_published.py) "
     "reserve a median 6.0 % above the estimate (5.7 % of their measure below it), not traced on a GPU"),
    (lambda p: p.runtime == "megatron", 0.07, "Megatron-LM: the caching allocator's reserve is not replayed; "
     "published runs (benchmarks/megatron_published.py) reserve a median 11.2 % above the estimate"),
    (lambda p: p.runtime == "torch" and p.mode == "train" and not p.empty_cache_each_step, 0.03,
     "a loop that keeps PyTorch's cache: not measured on a GPU; recorded real orders are replayed within "
     "0.2 GB but one, 1.2 GB (8 %) short"),
)


# What the model does not cover for a plan, said beside the estimate rather than guessed at.
LIMITS = (
    (lambda p: p.lora_rank > 0 and p.runtime == "fsdp" and not p.load_in_4bit,
     "LoRA under FSDP as transformers' Trainer and PEFT's examples wrap it (PEFT's fsdp_auto_wrap_policy): every "
     "LoRA linear an FSDP unit of its own, so the frozen base stays in its load dtype and gradients and Adam states "
     "are the adapters' alone (a loop that keeps Accelerate's transformer_based_wrap puts the adapters into the "
     "layers' FSDP1 flat parameters, which are then upcast to fp32 and get a gradient whole)"),
    (lambda p: p.model.tensor_parallel > 1,
     lambda p: f"tensor parallel {p.model.tensor_parallel}: P is one rank's share, {p.model.params:,} parameters "
               f"({_tp_words(p)}; norms whole on every rank)"),
    (lambda p: p.tensor_parallel > 1 and p.runtime != "deepspeed" and hf_refusal(p.model, p.tensor_parallel),
     lambda p: f"transformers refuses tensor parallelism for {p.model.model_type}: "
               f"{hf_refusal(p.model, p.tensor_parallel)}"),
    (lambda p: p.tensor_parallel > 1 and p.runtime == "deepspeed" and autotp_refusal(p.model)
     and _tp_origin(p) != "file",                     # a file's autotp_size gets VL309 autotp-refused
     lambda p: f"DeepSpeed AutoTP would refuse this model at deepspeed.initialize: {autotp_refusal(p.model)}"),
    (lambda p: p.lora_rank > 0 and p.tensor_parallel > 1,
     "LoRA under tensor parallelism: the adapters are counted whole on every GPU"),
    (lambda p: p.model.vision_params > 0 and p.mode == "train",
     lambda p: f"{p.model.model_type}: {LOADED_BY}, so its vision tower ({p.model.vision_params:,} parameters) "
               "is loaded and, in text-only training, gets no gradient (counted as 'vision tower (no gradient)'; "
               "a text-only class such as Gemma3ForCausalLM leaves it out)"),
    (refused_targets,
     lambda p: f"{p.model.model_type}: PEFT refuses target_modules {', '.join(refused_targets(p))}: the vision "
               "tower's modules of that name wrap their nn.Linear (\"Target module ... is not supported\"); a "
               f"regex such as '.*language_model.*\\.({'|'.join(refused_targets(p))})' reaches the decoder's alone "
               "(counted as that)"),
    (lambda p: p.load_in_4bit and p.runtime == "deepspeed",
     lambda p: "QLoRA under DeepSpeed: the 4-bit base as bitsandbytes stores it, half a byte a value "
               + ("(bnb_4bit_quant_storage bfloat16, which ZeRO-3 needs to partition it)" if p.zero_stage == 3
                  else "(whole on every GPU)") + ", the adapters cast to 16 bit, the quant states whole on every GPU"),
    (lambda p: p.runtime == "fsdp" and p.grad_accum > 1 and p.mode == "train",
     lambda p: ("gradient accumulation under FSDP: every micro-batch reduce-scatters and the gradient shards add up "
                "(torchtune's loop; the HF Trainer's accelerator_config.sync_each_batch: true)") if p.sync_each_batch
     else ("gradient accumulation under FSDP as the HF Trainer and Accelerate run it: no_sync keeps each unit's "
           "unsharded gradients until the last micro-batch (transformers 5.24 trainer.py:1904-1915; "
           "--sync-each-batch / accelerator_config.sync_each_batch: true reduces every micro-batch)")),
    (lambda p: p.load_in_4bit and p.runtime == "fsdp",
     "QLoRA under FSDP as transformers' Trainer sets it up (bnb_4bit_quant_storage in the load dtype, as "
     "FSDP needs): the base shards hold the 4-bit values packed, each LoRA linear is an FSDP unit of its own, "
     "so gradients and Adam states are the adapters' alone; the quant states stay whole on every rank"),
    (lambda p: p.mode == "infer" and p.model.quantization is not None and p.model.quantization.method == "mxfp4",
     lambda p: "MXFP4 experts counted as stored: transformers keeps them so only with the `kernels` package "
               "(which gpt-oss's model card installs) on a GPU of compute capability 7.5 or newer; without it, it "
               f"dequantizes them to bf16 as it loads, {_dequantized_extra(p) / 2**30:.1f} GiB more"),
    (lambda p: p.runtime != "megatron" and p.model.shape_by == "transformers" and _mixers(p.model),
     lambda p: f"{p.model.model_type}: {_mixers(p.model)} of its {p.model.num_layers} layers have no attention of "
               "their own (Mamba / SSM / linear-attention mixers, or MLP-only layers); their activations are priced "
               "as a decoder layer's of the config's heads and widths, not from their kernels' saved tensors "
               "(modelled for Megatron's hybrid stack alone)"),
    (lambda p: (p.model.max_position_embeddings or p.seq_len) < p.seq_len,
     lambda p: f"sequences of {p.seq_len:,} tokens, past the model's {p.model.max_position_embeddings:,} positions "
               "(max_position_embeddings): " + ("its learned position embeddings have no rows past them, so the "
                                                "forward fails" if p.model.block.learned_positions else
                                                "RoPE runs past them, but the model was not trained that long")),
)


def _dequantized_extra(plan: Plan) -> int:
    """What transformers' MXFP4 fallback adds: the experts in bf16 (``Mxfp4Config(dequantize=True)``)
    instead of their stored 4.25 bits (``quantizer_mxfp4.validate_environment``)."""
    experts = plan.model.layer_params.experts
    return int(experts * (2 - plan.model.quantization.bits / 8))


def _tp_origin(plan: Plan) -> str:
    """Where the plan's TP degree came from: "file", "flag" or "default"."""
    origin = plan.origins.get("tensor_parallel")
    return origin.kind if origin else "flag"


TP_GROUP_WORDS = {"attention": "attention", "mlp": "MLPs", "experts": "experts", "embedding": "embeddings",
                  "head": "lm_head"}


def _tp_words(plan: Plan) -> str:
    """What the plan's tensor parallelism splits and what it leaves whole, in words."""
    m = plan.model
    present = {"experts": m.is_moe, "mlp": any(l.mlp.kind != "moe" or l.mlp.shared_intermediate for l in m.layers),
               "head": bool(m.head_params)}
    groups = [(group, words) for group, words in TP_GROUP_WORDS.items() if present.get(group, True)]
    split = [words for group, words in groups if group in plan.tp_split]
    whole = [words for group, words in groups if group not in plan.tp_split]
    who = "DeepSpeed AutoTP reading" if plan.runtime == "deepspeed" else "transformers'"
    return (f"{who} tp_plan for {m.family or m.model_type}: "
            + (", ".join(split) + " split" if split else "nothing split")
            + (f"; {', '.join(whole)} whole on every rank" if whole else ""))


def _mixers(model) -> int:
    """Layers of a transformers-built model with no attention of their own (``models/meta.py`` reads
    them as linear attention)."""
    return sum(layer.attention.kind == LINEAR for layer in model.layers)


def band(plan: Plan) -> tuple[float, list[str]]:
    width, reasons = BAND, []
    for applies, extra, reason in WIDER:
        if applies(plan):
            width += extra
            reasons.append(f"band ±{width:.0%}: {reason}")
    return width, reasons


@lru_cache(maxsize=4096)
def estimate(plan: Plan, replay: bool = True) -> Estimate:
    """Per-GPU peak: the tensors alive at the step's peak moment, the caching allocator's reserve
    above them (replayed; ``replay=False`` skips it for quick searches), and the context every
    process pays. A pure function of the plan, kept per plan: the searches for what would fit ask
    about the same changed plans again and again, and so do files of one run that describe one job."""
    plan, text_only = _text_only(plan)
    if plan.tensor_parallel > 1:           # the weights (and states) of one TP rank's share
        plan = plan.with_changes(model=plan.model.tp_local(plan.tensor_parallel, plan.tp_split))
    phase = None
    if plan.mode == "infer":
        tensors, moment, host = inference_components(plan), "prefill", []
    elif plan.rollout is not None and not plan.rollout.trains:
        return _frozen(plan)
    else:
        peak, all_moments, states = training_peak(plan)
        if plan.rollout is not None:       # the update's peak, or an RL phase's if that is the larger
            peak, phase = _update_peak(all_moments), peak if peak.name in rl.PHASES else None
        tensors, moment, host = list(peak.components), peak.name, states.host
    tensors = [c for c in tensors if c.bytes] + [workspaces(plan)]
    context = replace(fixed_costs(plan), kind=CONTEXT)
    tensors, cached = _cached_capped(plan, tensors, context.bytes)
    allocated = sum(c.bytes for c in tensors)
    full = 0
    if replay:
        reserve = headroom(plan, allocated, context.bytes)
        full = wanted(plan) if reserve.bytes < wanted(plan) else 0    # capped: the uncapped reserve, for VL204
        full = full or (cached + reserve.bytes if cached else 0)
    else:
        reserve = Component("allocator reserve", 0, "not replayed", "memory/reserve.py", kind=ALLOCATOR)
    phases: tuple[str, ...] = ()
    if plan.rollout is not None:
        update = allocated + reserve.bytes
        others = {m.name: m.bytes + workspaces(plan).bytes for m in all_moments if m.name in rl.PHASES}
        phases = (rl.summary(update, moment, others, context.bytes),)
        if phase is not None and phase.bytes + workspaces(plan).bytes > update:
            tensors, moment, full = [c for c in phase.components if c.bytes] + [workspaces(plan)], phase.name, 0
            framework = plan.rollout.framework
            reserve = Component("allocator reserve", 0, f"the cache emptied before the phase ({rl.EMPTIED[framework]})",
                                rl.SOURCES[framework], kind=ALLOCATOR)
    width, reasons = band(plan)
    limits = tuple(text(plan) if callable(text) else text for applies, text in LIMITS if applies(plan))
    return Estimate(tuple(tensors + [reserve, context] + host), plan.assumptions + text_only + phases + limits
                    + tuple(reasons), moment, width, reserve_wanted=full)


def expandable(plan: Plan) -> bool:
    """Whether the job's launcher already sets expandable segments (a training runtime's
    ``EXPANDABLE_SEGMENTS``: torchtitan's run_train.sh)."""
    return plan.mode == "train" and getattr(runtime(plan.runtime), "EXPANDABLE_SEGMENTS", False)


def _cached_capped(plan: Plan, parts: list[Component], context: int) -> tuple[list[Component], int]:
    """A moment's cached blocks (its ALLOCATOR parts: a runtime's side streams' pools, a freed hole)
    capped at what the card leaves beside its tensors: a request that finds no free memory makes
    PyTorch release every cached block and retry (CUDACachingAllocator ``release_cached_blocks``)
    before it fails. Returns the parts and, where a cap was needed, the uncapped cache (for VL204)."""
    cached = sum(c.bytes for c in parts if c.kind == ALLOCATOR)
    room = plan.cluster.gpu.memory_bytes - context - sum(c.bytes for c in parts if c.kind != ALLOCATOR)
    if not cached or cached <= room:
        return parts, 0
    left = max(0, room)
    cap = f"; capped: the card leaves {left / 1e9:.2f} GB for the cache (the allocator frees it before it fails)"
    room, out = left, []
    for part in parts:
        if part.kind == ALLOCATOR:
            keep = min(part.bytes, room)
            room -= keep
            if keep < part.bytes:
                part = replace(part, bytes=keep, formula=part.formula + cap)
        out.append(part)
    return out, cached


FROZEN_BAND = (0.15, "band ±15%: an eval engine's forward on GPUs of its own: not measured")


def _frozen(plan: Plan) -> Estimate:
    """A group that trains nothing: its forward's tensors from an emptied cache (OpenRLHF's
    make_experience empties it between forwards), the process's context."""
    tensors = [c for c in rl.frozen(plan) if c.bytes] + [workspaces(plan)]
    framework = plan.rollout.framework
    reserve = Component("allocator reserve", 0, f"the cache emptied before the forward ({rl.EMPTIED[framework]})",
                        rl.SOURCES[framework], kind=ALLOCATOR)
    context = replace(fixed_costs(plan), kind=CONTEXT)
    return Estimate(tuple(tensors + [reserve, context]), plan.assumptions + (FROZEN_BAND[1],), rl.FROZEN_PHASE,
                    FROZEN_BAND[0])


def _update_peak(moments: list):
    """The update's own peak moment among an RL step's moments (the rest are ``rl.PHASES``)."""
    return max((m for m in moments if m.name not in rl.PHASES), key=lambda m: m.bytes)


def _text_only(plan: Plan) -> tuple[Plan, tuple[str, ...]]:
    """The plan without a vision tower that the class transformers builds for training and
    ``--infer`` (``AutoModelForCausalLM``) leaves out — Llama 4's Llama4ForCausalLM — and a note."""
    tower = plan.model.vision
    if tower is None or not tower.text_class:
        return plan, ()
    note = TEXT_ONLY.format(model_type=plan.model.model_type, architecture=tower.text_class, params=tower.params)
    return plan.with_changes(model=replace(plan.model, vision=None)), (note,)


__all__ = ["Component", "Estimate", "estimate", "expandable"]
