"""A Megatron-LM job's layout → the Plan its runtime reads (memory/runtimes/megatron), and the
layouts Megatron refuses before its first step, in its words (Megatron-LM core_v0.19.0: A =
megatron/training/arguments.py ``validate_args``, TC = transformer_config.py ``__post_init__``,
num_microbatches_calculator.py, schedules.py).

The degrees are ``validate_args``': data-parallel = world / (tp x pp x cp) (A:422-446), the
distributed optimizer shards over dp x cp / ``--num-distributed-optimizer-instances``
(parallel_state.py:927-929); micro-batches a step = global batch / (micro-batch x dp).
"""

from __future__ import annotations

from dataclasses import replace
from importlib import import_module

from vramlint.errors import UnplannableError
from vramlint.hardware import Cluster
from vramlint.layouts import Refusal, own_model, whole
from vramlint.models.architectures import mtp_depth
from vramlint.models.shape import LINEAR, NONE, ModelShape
from vramlint.plan import Flags, Origin, Parallelism, Plan
from vramlint.readers.megatron import METHODS, MODULES, RECOMPUTE, VERSION, WAY_ON, Layout
from vramlint.readers.recipe import Recipe


def degrees(layout: Layout, world: int) -> dict[str, int]:
    """The dense grid's degrees and the expert grid's (parallel_state.py:870-884): the routed
    experts over EP x ETP (ETP the TP size unless stated), their data-parallel group world / (ETP x
    EP x PP)."""
    tp, pp, cp = whole(layout.tensor), whole(layout.pipeline), whole(layout.context)
    ep, etp = whole(layout.expert), whole(layout.expert_tensor, tp)
    return {"tensor": tp, "pipeline": pp, "context": cp, "data": max(1, world // (tp * pp * cp)),
            "expert": ep, "expert_tensor": etp, "expert_data": max(1, world // (etp * ep * pp))}


def virtual_stages(layout: Layout, num_layers: int, pp: int) -> int:
    """Model chunks per pipeline rank: --num-virtual-stages-per-pipeline-rank, or the layers per
    rank over --num-layers-per-virtual-pipeline-stage (A:940-945); 1 without either."""
    if whole(layout.virtual_stages, 0):
        return whole(layout.virtual_stages)
    per = whole(layout.virtual_layers, 0)
    return max(1, (num_layers // pp) // per) if per else 1


# --pipeline-model-parallel-layout's characters (pipeline_parallel_layer_layout.py:303-308): the
# embedding, the loss, a decoder ("transformer") layer, a multi-token-prediction layer
STAGE_CHARACTERS = "ELtm"
LAYOUT_LIMIT = 100_000          # characters unrolled: far past any model's layers, short of exhausting memory


def stage_layout(text: str) -> list[str]:
    """A --pipeline-model-parallel-layout as its stages, first to last (each its characters), as
    Megatron parses it (pipeline_parallel_layer_layout.py:282-321 ``parse_str_to_list``: commas are
    cosmetic, ``(...)*n`` and ``x*n`` unrolled, ``|`` between stages); the two unroll patterns are
    Megatron's own."""
    import re

    def unrolled(match: re.Match) -> str:
        if len(match.group(1)) * int(match.group(2)) > LAYOUT_LIMIT:
            raise ValueError(match.group(0))
        return match.group(1) * int(match.group(2))
    text = text.replace(",", "")
    for pattern in (r"\(([^)]+)\)\*(\d+)", r"(.)\*(\d+)"):
        text = re.sub(pattern, unrolled, text)
        if len(text) > LAYOUT_LIMIT:
            raise ValueError(text[:40])
    return text.split("|")


def _stage_layout_refused(layout: Layout, model: ModelShape, pp: int) -> list[Refusal]:
    """What Megatron asserts of a --pipeline-model-parallel-layout (A:907-914; TransformerConfig's
    ``validate_layer_layout``, pipeline_parallel_layer_layout.py:85-110). A virtual size beside it
    is let pass where it is the layout's own (Megatron-Bridge's provider states both)."""
    where = layout.stage_layout
    try:
        stages = stage_layout(str(where.value))
    except ValueError as error:
        return [Refusal(where, f"Number of decoder layers (more than {LAYOUT_LIMIT:,} at '{error}') must match "
                               f"num_layers {model.num_layers} (pipeline_parallel_layer_layout.py:106-109)",
                        f"E first, L last, {model.num_layers} t's between")]
    if layout.virtual_layers.value is not None or layout.virtual_stages.value not in (None, len(stages) // pp):
        return [Refusal(where, "No more than one of the following arguments can be set at the same time: "
                        "--num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank,"
                        "--pipeline-model-parallel-layout (A:894-905)", "keep the layout alone")]
    flat = "".join(stages)
    wrong = sorted(set(flat) - set(STAGE_CHARACTERS))
    if wrong:
        return [Refusal(where, f"Invalid layer character: {wrong[0]} (pipeline_parallel_layer_layout.py:315), known "
                               f"layer characters: {list(STAGE_CHARACTERS)}", "E, L, t and m, with | between stages")]
    if len(stages) % pp:
        return [Refusal(where, "The length of pipeline_model_parallel_layout must be divisible by "
                               f"pipeline_model_parallel_size (num_stages={len(stages)}, "
                               f"pipeline_model_parallel_size={pp}) (A:911-914)", f"a multiple of {pp} stages")]
    names = {"E": "embedding", "L": "loss", "t": "decoder", "m": "mtp"}
    for wrong, message in ((not flat or flat[0] != "E", f"The first layer must be embedding, but got "
                                                          f"{names.get(flat[:1], 'nothing')} (:94-96)"),
                           (flat[-1:] != "L", f"The last layer must be loss, but got {names.get(flat[-1:], 'nothing')} "
                                              "(:97-99)"),
                           (flat.count("E") != 1, "Embedding must be specified exactly once (:102-104)"),
                           (flat.count("L") != 1, "Loss must be specified exactly once (:105)"),
                           (flat.count("t") != model.num_layers, f"Number of decoder layers {flat.count('t')} must "
                                                                  f"match num_layers {model.num_layers} (:106-109)")):
        if wrong:
            return [Refusal(where, message.replace("(:", "(pipeline_parallel_layer_layout.py:"),
                            f"E first, L last, {model.num_layers} t's between")]
    return []


def stage_layers(layout: Layout) -> tuple[int, ...]:
    """Decoder layers of each stage a --pipeline-model-parallel-layout states, or a hybrid pattern's
    ``|`` segments (hybrid_layer_allocation.py select_pipeline_segment: segment vp x pp + rank on
    pipeline rank ``rank``, the interleaved order); none without either."""
    if segments(layout):
        return tuple(len(segment) for segment in segments(layout))
    if layout.stage_layout.value is None:
        return ()
    return tuple(stage.count("t") for stage in stage_layout(str(layout.stage_layout.value)))


def segments(layout: Layout) -> list[str]:
    """A hybrid pattern's pipeline segments where it has ``|`` (none where it has no pipes)."""
    main = str(layout.hybrid.value).split("/")[0] if layout.hybrid.value is not None else ""
    return main.split("|") if "|" in main else []


# What validate_args asserts beside a hybrid pattern (A:772-811), each in its words: (the layout's
# field, whether only a pattern with pipes is refused, the message)
HYBRID_ASSERTS = (
    ("first_layers", True, "If --hybrid-layer-pattern contains pipe separators, --decoder-first-pipeline-num-layers "
                           "should not be specified as the pipeline layout is explicitly defined. (A:778)"),
    ("last_layers", True, "If --hybrid-layer-pattern contains pipe separators, --decoder-last-pipeline-num-layers "
                          "should not be specified as the pipeline layout is explicitly defined. (A:783)"),
    ("virtual_layers", False, "--num-layers-per-virtual-pipeline-stage should not be used with --hybrid-layer-pattern. "
                              "To specify virtual pipelining, describe a number of pipeline segments in "
                              "--hybrid-layer-pattern that is a multiple of --pipeline-model-parallel-size greater "
                              "than 1 (A:788)"),
    ("virtual_stages", False, "--num-virtual-stages-per-pipeline-rank should not be used with --hybrid-layer-pattern. "
                              "Virtual pipeline stages are derived from the number of | segments in the pattern. "
                              "(A:794)"),
    ("stage_layout", False, "--pipeline-model-parallel-layout should not be used with --hybrid-layer-pattern. "
                            "Pipeline stage layout is defined by | separators in the pattern. (A:799)"),
    ("embedding_slot", False, "--account-for-embedding-in-pipeline-split should not be used with "
                              "--hybrid-layer-pattern. Pipeline stage layout is defined by | separators in the "
                              "pattern. (A:803)"),
    ("loss_slot", False, "--account-for-loss-in-pipeline-split should not be used with --hybrid-layer-pattern. "
                         "Pipeline stage layout is defined by | separators in the pattern. (A:808)"),
)


def _hybrid_refused(layout: Layout, pp: int, dp: int) -> list[Refusal] | None:
    """validate_args' asserts on a hybrid pattern's pipeline (A:772-829); None where the job has no
    pattern with pipes (its layers then split as --num-layers' would be: select_pipeline_segment)."""
    piped = segments(layout)
    for name, with_pipes, message in HYBRID_ASSERTS:
        fact = getattr(layout, name)
        if fact.value not in (None, False) and (piped or not with_pipes):
            return [Refusal(fact, message, "state the pipeline stages with | in --hybrid-layer-pattern")]
    if not piped:
        return None
    if len(piped) % pp:
        return [Refusal(layout.hybrid, "The number of hybrid pipeline segments described by --hybrid-layer-pattern "
                        f"must be evenly divisible by --pipeline-model-parallel-size. Got {len(piped)} segments and "
                        f"{pp} pipeline parallel size. (A:823)", f"a multiple of {pp} segments")]
    return _interleaved(layout, len(piped) // pp, pp, dp)


def slots(layout: Layout) -> tuple[bool, bool]:
    """The embedding and the loss each counted as a layer of the pipeline split
    (--account-for-embedding / loss-in-pipeline-split: A:928-933, 957-961)."""
    return bool(layout.embedding_slot.value), bool(layout.loss_slot.value)


def _deferred(layout: Layout, microbatches: int) -> int:
    """Micro-batches of a step whose output-layer weight gradient --defer-embedding-wgrad-compute
    defers to the pipeline flush: --wgrad-deferral-limit of them (0: all, MPC:415), the step's at most."""
    if not layout.deferred_wgrad.value:
        return 0
    limit = layout.deferral_limit.value
    limit = limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else microbatches
    return min(limit, microbatches)


def microbatches(layout: Layout, dp: int) -> int:
    micro = whole(layout.micro_batch)
    wanted = whole(layout.global_batch, micro * dp)
    return max(1, wanted // (micro * dp))


# The counts a layout states, each at least 1, that Megatron's parser types int
COUNTS = ("tensor", "pipeline", "context", "expert", "expert_tensor", "virtual_layers", "virtual_stages",
          "first_layers", "last_layers", "recompute_layers", "micro_batch", "global_batch", "instances")


def _wrong_types(layout: Layout) -> list[Refusal]:
    out = []
    for name in COUNTS:
        fact = getattr(layout, name)
        value = fact.value
        if value is None and name not in ("micro_batch",):
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            path = fact.location.json_path.removeprefix("$.") if fact.location else name
            said = path if "." in path else "--" + path.replace("_", "-")      # a file's key, or a flag
            out.append(Refusal(fact, f"{said}: {value!r} is not a whole number of 1 or more"
                               if value is not None else "--micro-batch-size is not set (A:675: "
                               "assert args.micro_batch_size is not None)", "set --micro-batch-size" if value is None
                               else "a whole number of 1 or more", True))
    return out


def _mesh(layout: Layout, recipe: Recipe, model: ModelShape, world: int) -> list[Refusal]:
    d = degrees(layout, world)
    size = d["tensor"] * d["pipeline"] * d["context"]
    if world % size:
        return [Refusal(layout.tensor if layout.tensor.from_file else layout.pipeline,
                        f"world size ({world}) is not divisible by total_model_size (total_model_size={size}) "
                        "(A:428)", f"a GPU count that is a multiple of {size}, or smaller model-parallel sizes")]
    tp = d["tensor"]
    refused = tp_refused(model, tp)
    out = [Refusal(getattr(layout, refused[2]), *refused[:2])] if refused else []
    seq, cp = whole(recipe.seq_len, 0), d["context"]
    if cp > 1 and seq % (2 * cp):
        out.append(Refusal(recipe.seq_len, "seq-length should be a multiple of 2 * context-parallel-size if "
                                           "context-parallel-size > 1. (A:1295)", f"a multiple of {2 * cp}"))
    micro, dp = whole(layout.micro_batch), d["data"]
    wanted = whole(layout.global_batch, 0) if own_model(recipe) else 0   # validate_args' (verl runs none)
    if wanted and wanted % (micro * dp):
        out.append(Refusal(layout.global_batch, f"eval_global_batch_size ({wanted}) must be divisible by "
                                                f"eval_micro_batch_size ({micro}) * data_parallel_size ({dp}) "
                                                "(A:689-696)", f"a multiple of {micro * dp}"))
    if layout.launched and layout.loss_fusion.value and layout.loss_fusion_impl.value == "te":
        out.append(Refusal(layout.loss_fusion_impl, "Transformer Engine cross entropy loss fusion is disabled due to "
                                                    "stability issues. Use --cross-entropy-fusion-impl native, or omit "
                                                    "--cross-entropy-loss-fusion. (A:1642-1647)",
                           "--cross-entropy-fusion-impl native"))
    if layout.launched and whole(layout.mtp, 0) and layout.positions.value not in ("rope", "none"):
        out.append(Refusal(layout.mtp, f"Multi-Token Prediction (MTP) is not supported with {layout.positions.value} "
                                       "position embedding type.The supported position embedding types are rope and "
                                       "none. (A:855-859)", "--position-embedding-type rope"))
    if own_model(recipe) and layout.host_fraction.value and not layout.host_main.value:
        out.append(Refusal(layout.host_fraction, "The optimizer cpu offload must be used in conjunction with "
                                                 "`--use-precision-aware-optimizer`, as the hybrid device optimizer "
                                                 "reuses the code path of this flag. (A:1803-1806)",
                           "--use-precision-aware-optimizer"))
    return out + _experts(layout, d, world, model)


def tp_refused(model: ModelShape, tp: int) -> tuple[str, str, str] | None:
    """What Megatron asserts of the TP size against the model, the way on, and the layout's fact it
    is about; None where it holds: the attention heads (TC:1323) and query groups (TC:1338) of its
    first attention layer, and a hybrid stack's Mamba heads and groups (mamba_mixer.py:260-272)."""
    att = next((layer.attention for layer in model.layers if layer.attention.kind not in (LINEAR, NONE)), None)
    ssm = next((layer.ssm for layer in model.layers if layer.ssm is not None), None)
    if att is not None and att.num_heads % tp:
        return (f"num_attention_heads ({att.num_heads}) must be a multiple of tensor_model_parallel_size ({tp}). "
                "(TC:1323)", "a --tensor-model-parallel-size that divides the heads", "tensor")
    if att is not None and att.num_kv_heads % tp and tp % att.num_kv_heads:
        return (f"num_query_groups ({att.num_kv_heads}) must be a multiple or divisor of tensor_model_parallel_size "
                f"({tp}). (TC:1338)", "a --tensor-model-parallel-size that divides the query groups", "tensor")
    checks = () if ssm is None else ((ssm.heads % tp, "nheads must be evenly divisble by tp_size", "tensor"),
                                     (ssm.groups % tp, "ngroups must be evenly divisible by tp_size", "tensor"),
                                     (ssm.heads % ssm.groups, "nheads must be evenly divisible by ngroups", "hybrid"))
    for broken, what, fact in checks:
        if broken:
            return (f"{what} (Mamba: {ssm.heads} heads, {ssm.groups} groups; mamba_mixer.py:260-272)",
                    "a --tensor-model-parallel-size that divides --mamba-num-heads and --mamba-num-groups", fact)
    return None


def _experts(layout: Layout, d: dict[str, int], world: int, model: ModelShape) -> list[Refusal]:
    """The expert grid's checks: EP divides the experts (A:1600-1603), ETP x EP x PP divides the
    world (parallel_state.py:881-884), and MoE under TP trains only with sequence parallelism
    (moe_layer.py:626-633 raises). The experts are the arguments' own, else the model's (a Hugging
    Face config Megatron-Bridge converts)."""
    experts = whole(layout.num_experts, 0) or max((layer.mlp.experts for layer in model.layers), default=0)
    if d["expert"] > 1 and (not experts or experts % d["expert"]):
        return [Refusal(layout.expert, "Number of experts should be a multiple of expert model parallel_size. "
                                       "(A:1602)" if experts else "num_experts must be non None to use expert "
                                                                  "model parallelism (A:1600)",
                        "an --expert-model-parallel-size that divides --num-experts")]
    if not experts:
        return []
    size = d["expert_tensor"] * d["expert"] * d["pipeline"]
    if world % size:
        return [Refusal(layout.expert, f"world_size ({world}) is not divisible by expert_tensor_model_pipeline_parallel"
                                       f" size ({size}) (parallel_state.py:883)",
                        f"a GPU count that is a multiple of {size}, or a smaller --expert-model-parallel-size")]
    if d["tensor"] > 1 and not layout.sequence_parallel.value:
        return [Refusal(layout.sequence_parallel, "During training, performance may degrade if MoE and tensor "
                        "parallelismare enabled without also enabling sequence parallelism. (moe_layer.py:631)",
                        "add --sequence-parallel")]
    plain = not next((layer.mlp.gated_experts for layer in model.layers if layer.mlp.kind == "moe"), True)
    if layout.launched and plain and layout.grouped_gemm.value and layout.gelu_fusion.value:
        return [Refusal(layout.grouped_gemm, "Only support fusion of swiglu and quick_gelu in TEGroupedMLP. "
                        "(experts.py:847: GELU experts with bias_gelu_fusion, at the first forward)",
                        "add --no-bias-gelu-fusion (or --swiglu)")]
    return []


def _pipeline(layout: Layout, model: ModelShape, pp: int, dp: int) -> list[Refusal]:
    """The layers' split over the stages and the interleaved schedule's needs (A:894-975, schedules.py)."""
    if layout.hybrid.value is not None:
        hybrid = _hybrid_refused(layout, pp, dp)
        if hybrid is not None:
            return hybrid
    if layout.stage_layout.value is not None:
        return _stage_layout_refused(layout, model, pp) or _interleaved(layout, len(stage_layers(layout)) // pp,
                                                                       pp, dp)
    layers = model.num_layers
    first, last = whole(layout.first_layers, 0), whole(layout.last_layers, 0)
    counted = sum(slots(layout))
    if counted and (first or last):
        return [Refusal(layout.embedding_slot if layout.embedding_slot.value else layout.loss_slot,
                        "Does not support standalone embedding stage and standalone loss stage with uneven pp "
                        "(transformer_block.py:101-105)", "keep the uneven first / last stage or the accounting")]
    layers += counted
    if layout.virtual_layers.value is not None and layout.virtual_stages.value is not None:
        return [Refusal(layout.virtual_stages, "No more than one of the following arguments can be set at the same "
                        "time: --num-layers-per-virtual-pipeline-stage, --num-virtual-stages-per-pipeline-rank "
                        "(A:894-905)", "keep one")]
    if first or last:
        middle, stages = layers - first - last, pp - bool(first) - bool(last)
        if middle < 0 or (stages and middle % stages) or (not stages and middle):
            return [Refusal(layout.first_layers if first else layout.last_layers,
                            "With uneven pipelineing the left over layers must be divisible by left over stages "
                            "(transformer_block.py:125)", "first + last + the rest evenly over the other stages")]
    elif layers % pp:
        return [Refusal(layout.pipeline, "Number of layers should be divisible by the pipeline-model-parallel size "
                                         "(A:963)", "a --pipeline-model-parallel-size that divides --num-layers")]
    per = whole(layout.virtual_layers, 0)
    if per and (layers // pp) % per:
        return [Refusal(layout.virtual_layers, "number of layers per pipeline stage must be divisible number of "
                                               "layers per virtual pipeline stage (A:938)",
                        f"a divisor of {layers // pp}")]
    return _interleaved(layout, virtual_stages(layout, layers, pp), pp, dp)


def _interleaved(layout: Layout, v: int, pp: int, dp: int) -> list[Refusal]:
    """An interleaved schedule's needs (v model chunks a rank): a pipeline, and enough micro-batches."""
    if v > 1:
        if pp == 1:
            return [Refusal(layout.pipeline, "When interleaved schedule is used, pipeline-model-parallel size should "
                                             "be greater than 1 (A:969)", "--pipeline-model-parallel-size 2 or more")]
        m = microbatches(layout, dp)
        if m < pp:
            return [Refusal(layout.global_batch, f"The number of contiguous micro-batches in a virtual pipeline stage"
                                                 f"should range in [PP={pp} , M={m}] (schedules.py:1133)",
                            f"a --global-batch-size of {pp * whole(layout.micro_batch) * dp} or more")]
    return []


def _recompute_refused(layout: Layout, model: ModelShape, pp: int) -> list[Refusal]:
    """TC:1724-1777's checks of --recompute-granularity / -method / -num-layers / -modules."""
    granularity = layout.granularity.value
    if granularity is None:
        return []
    if granularity not in RECOMPUTE:
        return [Refusal(layout.granularity, f"argument --recompute-granularity: invalid choice: '{granularity}' "
                                            "(choose from 'full', 'selective')", "full or selective")]
    method, n = layout.method.value, layout.recompute_layers.value
    if granularity == "full":
        if method not in METHODS:
            return [Refusal(layout.method if layout.method.from_file else layout.granularity,
                            'Using recompute_granularity: full so recompute_method must be "block" or "uniform" '
                            "(TC:1736)", "--recompute-method uniform --recompute-num-layers 1")]
        if not isinstance(n, int) or not 1 <= n <= model.num_layers // pp:
            return [Refusal(layout.recompute_layers if layout.recompute_layers.from_file else layout.granularity,
                            "When using recompute_granularity: full recompute_num_layers must be between 1 and "
                            f"num_layers_per_pipeline_rank: {model.num_layers // pp} (TC:1742)",
                            "--recompute-num-layers 1")]
        return []
    if method is not None:
        return [Refusal(layout.method, "recompute method is not yet supported for selective recomputing "
                                       "granularity (A:1385)", "drop --recompute-method")]
    unknown = [m for m in layout.modules.value if m not in MODULES]
    if unknown:
        return [Refusal(layout.modules, f"--recompute-modules: {', '.join(unknown)} is not one of "
                                        f"{', '.join(MODULES)} (TC:1768)", "core_attn, mlp or layernorm")]
    return []


# The readers of files that spell Megatron's flags in keys of their own (``Recipe.vocabulary``), each
# with its ``in_keys(hint)``
SPELLERS = {"megatron-bridge": "vramlint.readers.megatron_bridge", "nemo": "vramlint.readers.nemo"}


def refusals(layout: Layout, recipe: Recipe, model: ModelShape, world: int) -> list[Refusal]:
    """What Megatron-LM refuses before its first step, each with the message it raises and a hint
    in the keys of the file that states the job (Megatron-Bridge's where it is a ConfigContainer)."""
    found = _refused(layout, recipe, model, world)
    if recipe.vocabulary not in SPELLERS:
        return found
    in_keys = import_module(SPELLERS[recipe.vocabulary]).in_keys
    return [replace(refusal, hint=in_keys(refusal.hint)) for refusal in found]


def _refused(layout: Layout, recipe: Recipe, model: ModelShape, world: int) -> list[Refusal]:
    wrong = _wrong_types(layout)
    if wrong:
        return wrong
    if not whole(recipe.seq_len, 0):
        return [Refusal(recipe.seq_len, "--seq-length is not set: pretrain_gpt.py needs it", "set --seq-length",
                        True)]
    out = _mesh(layout, recipe, model, world)
    if out:
        return out
    d = degrees(layout, world)
    return _pipeline(layout, model, d["pipeline"], d["data"]) + _recompute_refused(layout, model, d["pipeline"])


def checkpointing(layout: Layout) -> str:
    """The recompute policy in the runtime's words (``refusals`` has turned away any other)."""
    granularity = layout.granularity.value
    if granularity == "full":
        return f"{layout.method.value}:{layout.recompute_layers.value}"
    if granularity == "selective":
        return "selective:" + ",".join(layout.modules.value)
    return "none"


def unmodelled(recipe: Recipe) -> tuple[str, str]:
    """Why no model stands behind the arguments, and the way on, both as the reader says them."""
    return str(recipe.model.value), recipe.model_hint or WAY_ON["shape"]


def _expert_grid(layout: Layout, model: ModelShape, d: dict[str, int], distributed: bool,
                 notes: list[str]) -> dict:
    """The Parallelism fields of the MoE layers: their grid, the expert optimizer's group, and what
    sizes the tokens the experts receive."""
    if not model.is_moe:
        return {}
    capacity = layout.capacity.value
    factor = float(capacity) if isinstance(capacity, (int, float)) and not isinstance(capacity, bool) \
        and capacity > 0 else 1.0
    shard = max(1, d["expert_data"] // whole(layout.instances)) if distributed else 1
    notes.append(f"MoE: routed experts over EP {d['expert']} x ETP {d['expert_tensor']}; "
                 + (f"their optimizer states over the expert data-parallel group ({shard})" if distributed else
                    "their optimizer states whole")
                 + f"; {layout.dispatcher.value} token dispatcher; each rank's experts receive "
                 + (f"at most {factor:g} x the balanced share of routed tokens (the capacity factor)"
                    if factor != 1.0 else "the balanced share of routed tokens"))
    etp = d["expert_tensor"] if layout.expert_tensor.value is not None else 0
    gated = next(layer.mlp.gated_experts for layer in model.layers if layer.mlp.kind == "moe")
    return {"expert": d["expert"], "expert_tensor": etp, "expert_shard": shard,
            "dispatcher": str(layout.dispatcher.value), "capacity": factor, "aux_loss": bool(layout.aux_loss.value),
            "expert_act": expert_activation(layout, gated)}


def expert_activation(layout: Layout, gated: bool) -> int:
    """Widths of one expert's FFN (its TP share) a routed token keeps through TEGroupedMLP's weighted
    activation (experts.py:807-885 ``bias_act_func``): fused SwiGLU (weighted_bias_swiglu_impl, the
    default) FC1's output and its output, 2 + 1; unfused SwiGLU (--no-bias-swiglu-fusion) FC1's output,
    SiLU's, the product's and the weighted cast fc2 reads, 2 + 1 + 1 + 1; a plain activation (GELU;
    Megatron refuses its fusion) FC1's output or ReLU's, the activation's and the weighted cast, 3; the
    fused weighted squared ReLU (--use-fused-weighted-squared-relu) FC1's output and its output, 2."""
    if gated:
        return 3 if layout.glu_fusion.value else 5
    return 2 if layout.srelu_fusion.value else 3


def _with_mtp(model: ModelShape, depths: int, notes: list[str]) -> ModelShape:
    """The model with its multi-token prediction depths: GPT's a copy of the decoder's last layer each
    (gpt_layer_specs.py get_gpt_mtp_block_spec: the decoder's layer spec, its last layer's for a MoE
    pattern), a hybrid pattern's its ``/`` layers (the builder's); on the last pipeline stage."""
    if not depths:
        return model
    if not model.mtp:
        h = model.hidden_size
        model = replace(model, mtp=mtp_depth((model.layers[-1],), h, model.final_norm_params == 2 * h),
                        mtp_depths=depths)
    notes.append(f"multi-token prediction: {depths} depth(s) of {len(model.mtp)} layer(s) on the last pipeline "
                 "stage, each with its loss over the vocabulary")
    return model


def plan(recipe: Recipe, job: dict, flags: Flags, model: ModelShape, cluster: Cluster, origins: dict,
         notes: list[str]) -> Plan:
    """The Plan of a Megatron job: bf16 parameters and the DDP gradient buffer whole on every rank of
    its TP share of its pipeline stage, the optimizer's fp32 main parameters and Adam states
    sharded over dp x cp under the distributed optimizer. ``job["seq_len"]`` is already each CP
    rank's share (recipe_plan._split)."""
    layout: Layout = recipe.layout.value
    if whole(recipe.lora_rank, 0):
        raise UnplannableError(f"{recipe.title}: LoRA on Megatron ({recipe.lora_rank.location or 'the job'}) is not "
                               "modelled yet (vramlint prices full training on this layout)")
    d = degrees(layout, cluster.world_size)
    pp, tp, cp, dp = d["pipeline"], d["tensor"], d["context"], d["data"]
    model = _with_mtp(model, whole(layout.mtp, 0), notes)
    stated = stage_layers(layout)
    v = len(stated) // pp if stated else virtual_stages(layout, model.num_layers + sum(slots(layout)), pp)
    m = microbatches(layout, dp)
    sp = bool(layout.sequence_parallel.value) and tp > 1      # off with a warning at TP 1 (A:1390-1399)
    fsdp = str(layout.fsdp.value or "")
    distributed = bool(layout.distributed_optimizer.value) or bool(fsdp)      # Megatron-FSDP forces it (A:1106-1111)
    shard = max(1, dp * cp // whole(layout.instances)) if distributed else 1
    mode = checkpointing(layout)
    par = Parallelism(shard=shard, context=cp, pipeline=pp, schedule="Interleaved1F1B" if v > 1 else "1F1B",
                      microbatches=m, stages_per_rank=v, checkpointing=mode, reshard_after_forward=False,
                      sequence_parallel=sp, distributed_optimizer=distributed, grad_bytes=layout.grad_bytes.value,
                      first_layers=whole(layout.first_layers, 0), last_layers=whole(layout.last_layers, 0),
                      slots=slots(layout), stage_layers=stated,
                      dropout=bool(layout.dropout.value), scores=layout.scores.value,
                      apex_adam=bool(layout.apex_adam.value), bucket_copy=bool(layout.bucket_copy.value),
                      autocast=str(layout.autocast.value), host_fraction=float(layout.host_fraction.value),
                      host_main=bool(layout.host_main.value), fsdp=fsdp,
                      fsdp_double_buffer=bool(layout.fsdp_double_buffer.value),
                      fsdp_main_bytes=int(layout.fsdp_main_bytes.value),
                      fused_loss=bool(layout.loss_fusion.value) and layout.loss_fusion_impl.value == "native",
                      deferred_wgrad=_deferred(layout, m),
                      **_expert_grid(layout, model, d, distributed, notes))
    for name, fact in (("tensor_parallel", layout.tensor), ("pipeline_parallel", layout.pipeline),
                       ("shard_degree", layout.distributed_optimizer), ("grad_accum", layout.global_batch)):
        origins[name] = Origin("file", fact.location) if fact.from_file else Origin("default", text=fact.default)
    optimizer = "Apex's distributed Adam shards int16 remainders" if layout.apex_adam.value else \
        f"Megatron FSDP ({fsdp}) shards the parameters, gradients, main parameters" if fsdp == "optim_grads_params" \
        else "the distributed optimizer shards fp32 main parameters"
    notes.append(f"{VERSION}: data-parallel {dp} = {cluster.world_size} GPUs / (TP {tp} x PP {pp} x CP {cp}); "
                 + (f"{optimizer} and Adam's states over dp x cp = {shard}"
                    if distributed else "every rank holds fp32 main parameters and Adam's states whole "
                                        "(no --use-distributed-optimizer)")
                 + (f"; {layout.grad_bytes.value}-byte gradients" if fsdp == "optim_grads_params" else
                    f"; gradients in a {layout.grad_bytes.value}-byte DDP buffer"))
    if par.host_fraction:
        notes.append(f"optimizer_cpu_offload: {par.host_fraction:g} of the optimizer's shard on the host (Adam's "
                     "moments" + (" and the fp32 main copies: the precision-aware optimizer)" if par.host_main else
                                  "; the fp32 main copies stay on the GPU)"))
    if pp > 1:
        notes.append(f"pipeline: {pp} ranks x {v} model chunk(s), {'interleaved ' if v > 1 else ''}1F1B, {m} "
                     f"micro-batches of {job['micro_batch']} a step")
    if tp > 1:
        notes.append(f"tensor parallel {tp}" + (" with sequence parallel" if sp else ", no sequence parallel: "
                                                "layer norms, dropout masks and linear inputs whole on every rank"))
    notes.append(f"recompute: {mode}")
    workload = {k: v for k, v in flags.workload.items()
                if k not in ("weights_dtype", "tensor_parallel", "sync_each_batch")}
    precision = {"bf16": "bf16", "fp16": "fp16"}.get(str(recipe.mixed_precision.value), "fp32")
    weights = recipe.weights_dtype.value if recipe.weights_dtype.value in ("bfloat16", "float16") else "float32"
    return Plan(model=model, cluster=cluster, precision=precision, runtime="megatron", weights_dtype=weights,
                micro_batch=job["micro_batch"], seq_len=job["seq_len"], grad_accum=m,
                origins=dict(origins), grad_checkpointing=mode != "none", shard_degree=shard,
                tensor_parallel=tp, pipeline_parallel=pp, parallelism=par, **workload)


__all__ = ["degrees", "plan", "refusals", "unmodelled"]
