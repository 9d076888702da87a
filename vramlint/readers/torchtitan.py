"""torchtitan job configs → a :class:`Recipe` with its parallel :class:`Layout` (docs/recipes.md,
"torchtitan").

A torchtitan job is a TOML file (``--job.config_file``, torchtitan up to 0.2.2) whose sections
name the model (``[model] name / flavor``), the batch (``[training] local_batch_size, seq_len``),
the mesh (``[parallelism]``), activation checkpointing and compile; ``--section.key`` arguments on
the launch line win over the file ("CLI args > TOML file > JobConfig defaults",
torchtitan/config/manager.py:28-33), and reach this reader as dotted keys over the file's (one
job, two ways, one answer). What neither states is ``JobConfig``'s default at v0.2.2
(torchtitan/config/job_config.py, line numbers below). Older files spell a few keys the way
torchtitan did before its 2025 renames (``training.batch_size``, ``training.compile``, the data
and tensor parallel degrees under ``[training]``, ``experimental.pipeline_parallel_degree`` /
``context_parallel_degree``, ``[float8]``); they are read too.

torchtitan runs its own model code, not transformers': the llama3 flavors are its
``TransformerModelArgs`` (torchtitan/models/llama3/__init__.py:29-100), whose shapes equal the
Hugging Face Llama-3.1 configs; each is handed to the memory model as that config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, FsdpFacts, Keys, Recipe, nested, positive, truthy

VERSION = "torchtitan 0.2.2"
SECTIONS = ("job", "model", "training", "parallelism", "activation_checkpoint", "optimizer", "experimental")
SPELLING = {"micro_batch": "training.local_batch_size", "seq_len": "training.seq_len",
            "grad_accum": "training.global_batch_size", "grad_checkpointing": "activation_checkpoint.mode",
            "mixed_precision": "training.mixed_precision_param", "weights_dtype": "training.dtype",
            "optimizer": "optimizer.name", "model": "model.flavor",
            "tensor_parallel": "parallelism.tensor_parallel_degree",
            "sequence_split": "parallelism.context_parallel_degree"}

# llama3's flavors as torchtitan 0.2.2 defines them (torchtitan/models/llama3/__init__.py:29-100; the
# FFN width from model.py:307-340 ``int(2 * 4 * dim / 3)``, times ffn_dim_multiplier, rounded up to
# multiple_of), as the Hugging Face llama config of the same shapes (the 8B, 70B and 405B ones are
# meta-llama/Llama-3.1's); the variants differ only in their attention kernel.
_LLAMA = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 128256,
          "max_position_embeddings": 131072, "rope_theta": 500000.0, "rms_norm_eps": 1e-5,
          "tie_word_embeddings": False, "torch_dtype": "bfloat16", "hidden_act": "silu"}
FLAVORS = {
    "debugmodel": {**_LLAMA, "hidden_size": 256, "num_hidden_layers": 6, "num_attention_heads": 16,
                   "num_key_value_heads": 16, "intermediate_size": 768, "vocab_size": 2048},
    "8B": {**_LLAMA, "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336},
    "70B": {**_LLAMA, "hidden_size": 8192, "num_hidden_layers": 80, "num_attention_heads": 64,
            "num_key_value_heads": 8, "intermediate_size": 28672},
    "405B": {**_LLAMA, "hidden_size": 16384, "num_hidden_layers": 126, "num_attention_heads": 128,
             "num_key_value_heads": 8, "intermediate_size": 53248},
}
# qwen3's dense flavors as torchtitan 0.2.2 defines them (torchtitan/models/qwen3/__init__.py:33-120: head_dim
# 128, q / k RMSNorm, eps 1e-6, rope_theta 1e6, embeddings tied up to 4B), as the Hugging Face Qwen3 config of
# the same shapes; its mixture-of-experts flavors are not modelled for torchtitan.
_QWEN3 = {"model_type": "qwen3", "architectures": ["Qwen3ForCausalLM"], "vocab_size": 151936, "head_dim": 128,
          "max_position_embeddings": 40960, "rope_theta": 1000000.0, "rms_norm_eps": 1e-6, "torch_dtype": "bfloat16",
          "hidden_act": "silu", "tie_word_embeddings": False}
QWEN3 = {name: {**_QWEN3, "hidden_size": h, "num_hidden_layers": n, "num_attention_heads": a, "num_key_value_heads": 8,
                "intermediate_size": f, **({"tie_word_embeddings": True} if tied else {}),
                **({"vocab_size": 2048} if name == "debugmodel" else {})}
         for name, (h, n, a, f, tied) in {"debugmodel": (256, 8, 16, 3072, True), "0.6B": (1024, 28, 16, 3072, True),
                                          "1.7B": (2048, 28, 16, 6144, True), "4B": (2560, 36, 32, 9728, True),
                                          "8B": (4096, 36, 32, 12288, False), "14B": (5120, 40, 40, 17408, False),
                                          "32B": (5120, 64, 64, 25600, False)}.items()}
VARIANTS = {"debugmodel_flex_attn": "debugmodel", "debugmodel_varlen_attn": "debugmodel", "8B_flex": "8B",
            "8B_varlen": "8B", "8B_flex_attn": "8B"}

# The pipeline schedules torchtitan builds (torch.distributed.pipelining, through
# torchtitan/distributed/pipeline_parallel.py): one stage per rank, or several (looped: stage
# r, r + pp, ...; V-shaped: r and 2·pp − 1 − r).
SINGLE_STAGE = ("1F1B", "GPipe")
LOOPED = ("Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble")
V_SHAPED = ("ZBVZeroBubble", "DualPipeV")
SCHEDULES = SINGLE_STAGE + LOOPED + V_SHAPED
AC_MODES = ("selective", "full", "memory_budget", "none")
# JobConfig's boolean fields at v0.2.2 (job_config.py), which tyro takes as bare flags
# (``--compile.enable``): the word after one is the next argument, never its value; with the
# float8 options and the 2024 files' ``training.compile`` / ``float8.enable_float8_linear``.
BOOLEANS = frozenset({
    "print_config", "enable_profiling", "enable_memory_snapshot", "enable_tensorboard", "disable_color_printing",
    "save_for_all_ranks", "enable_wandb", "print_after_conversion", "early_step_in_backward", "persistent_workers",
    "pin_memory", "enable_cpu_offload", "gc_debug", "disable_loss_parallel", "enable_async_tensor_parallel",
    "pipeline_parallel_expert_parallel_overlap", "enable", "enable_ft_dataloader_checkpoints",
    "initial_load_model_only", "initial_load_in_hf", "initial_load_in_hf_quantized", "last_save_model_only",
    "last_save_in_hf", "enable_first_step_checkpoint", "create_seed_checkpoint", "load_only", "early_stop",
    "visualize_memory_budget_pareto", "preserve_rng_state", "debug", "emulate", "disable_fake_mode",
    "deterministic", "deterministic_warn_only", "moe_force_load_balance", "enable_fsdp_float8_all_gather",
    "precompute_float8_dynamic_scale_for_fsdp", "force_recompute_fp8_weight_in_bwd", "compile",
    "enable_float8_linear",
    # 0.3.0's (config/configs.py, trainer.py; tyro also takes ``--section.no-field`` for False)
    "disable_cuda_graphs", "enable_sequence_parallel", "enable_fsdp_symm_mem", "batch_invariant", "detect_anomaly",
    "spmd_typechecking", "enable_structured_logging", "infinite"})


@dataclass(frozen=True)
class Layout:
    """The parallel layout a torchtitan job states, each degree a fact: FSDP's shard and replicate
    degrees (``-1``: the ranks the others leave), tensor, pipeline and context parallel, the
    pipeline's schedule and micro-batch, activation checkpointing, compile and float8."""

    runtime: ClassVar[str] = "torchtitan"          # its module in vramlint/layouts

    dp_shard: Fact
    dp_replicate: Fact
    tensor: Fact
    pipeline: Fact
    context: Fact
    schedule: Fact
    pp_microbatch: Fact            # rows of a pipeline micro-batch (pipeline_parallel_microbatch_size)
    layers_per_stage: Fact         # pipeline_parallel_layers_per_stage (None: the schedule's default split)
    checkpointing: Fact            # selective, full, memory_budget, none
    selective_option: Fact         # "op", or every n-th block ("2")
    compile: Fact
    compiled_loss: Fact            # compile.components names "loss" (v0.2.2 default: model and loss)
    loss_parallel: Fact            # not disable_loss_parallel: under TP the loss over the vocabulary shards
    float8: Fact
    reshard: Fact                  # fsdp_reshard_after_forward: default, always, never
    local_batch: Fact
    global_batch: Fact
    release: str = VERSION         # whose rules the job runs under (0.3.0: readers/torchtitan_registry.py)
    loss_chunks: Fact = Fact(0)    # ChunkedLossWrapper's num_chunks, the output projection inside (0: the whole logits)
    cuda_graphs: Fact = Fact(False)    # 0.3.0 captures forward and backward unless training.disable_cuda_graphs

    @property
    def vocabulary(self) -> str:
        """How the job is spelled for hints (memory/fit_layout/torchtitan.py WORDS): a 0.2.2 TOML
        file's keys, a 0.3.0 launch line's flags."""
        return "torchtitan" if self.release == VERSION else "torchtitan-cli"


def looks_like_torchtitan(data: Any) -> bool:
    """A torchtitan job file: its ``[model]`` names a torchtitan model by ``name`` and ``flavor``
    beside a ``[training]`` or ``[parallelism]`` section (no other format has that pair)."""
    if not isinstance(data, dict):
        return False
    model = data.get("model")
    return (isinstance(model, dict) and "flavor" in model and
            (isinstance(data.get("training"), dict) or isinstance(data.get("parallelism"), dict)))


def _model(keys: Keys) -> tuple[Fact, dict | None]:
    name = keys.get("model.name", default="llama3", why=f"{VERSION}: JobConfig.model.name (job_config.py:101)")
    flavor = keys.get("model.flavor", default="debugmodel",
                      why=f"{VERSION}: JobConfig.model.flavor (job_config.py:104)")
    shape = VARIANTS.get(str(flavor.value), str(flavor.value))
    config = {"llama3": FLAVORS, "qwen3": QWEN3}.get(str(name.value), {}).get(shape)
    where = flavor if flavor.from_file else name
    return Fact(f"torchtitan {name.value} {flavor.value}", where.location, where.default), config


def _converters(keys: Keys) -> Fact:
    """float8 training: ``[model] converters`` naming float8 (``"float8"``, later
    ``"quantize.linear.float8"``), or the 2024 files' ``[float8] enable_float8_linear``."""
    converters = keys.get("model.converters", default=[])
    named = converters.value if isinstance(converters.value, list) else [converters.value]
    if any(word in str(c).lower() for c in named for word in ("float8", "mx", "fp4")):
        return converters
    old = keys.get("float8.enable_float8_linear", default=False, convert=truthy)
    return old if old.value else Fact(False, None, f"{VERSION}: no model converter")


def _compiled_loss(keys: Keys) -> Fact:
    """Whether compile reaches the loss: ``compile.components`` (v0.2.2: ``["model", "loss"]``,
    job_config.py:725); the older ``training.compile`` compiled the loss too from 2025-02-20
    (torchtitan d1f62be, ``build_loss_fn``), only the blocks before."""
    components = keys.get("compile.components", default=["model", "loss"],
                          why=f"{VERSION}: compile.components model and loss (job_config.py:725)")
    named = components.value if isinstance(components.value, list) else str(components.value).split(",")
    return Fact("loss" in [str(name).strip() for name in named], components.location, components.default)


def _loss_parallel(keys: Keys) -> Fact:
    """``disable_loss_parallel`` (v0.2.2 ``parallelism.``, job_config.py:354; the 2024 files'
    ``training.``) turned the other way: on by default, it keeps the TP ranks' logits sharded over
    the vocabulary (parallelize.py apply_tp: ``output_layouts=Shard(-1) if loss_parallel``)."""
    off = keys.get("parallelism.disable_loss_parallel", "training.disable_loss_parallel", default=False,
                   convert=truthy, why=f"{VERSION}: loss parallel on under TP (job_config.py:354)")
    return Fact(not off.value, off.location, off.default)


def _pp_microbatch(keys: Keys, local: Fact) -> Fact:
    """Rows of a pipeline micro-batch: ``pipeline_parallel_microbatch_size`` (v0.2.2: 1 row,
    job_config.py:412). torchtitan's 2024 files (``[experimental]``) counted micro-batches instead,
    ``pipeline_parallel_microbatches``, by default the pipeline degree (9dec370
    parallelisms/pipelining_utils.py:79-81): their rows are the local batch over that count."""
    rows = keys.get("parallelism.pipeline_parallel_microbatch_size", "experimental.pipeline_parallel_microbatch_size",
                    default=1, convert=positive, why=f"{VERSION}: 1 row (job_config.py:412)")
    if rows.from_file or not keys.has("experimental.pipeline_parallel_degree"):
        return rows
    count = keys.get("experimental.pipeline_parallel_microbatches", "experimental.pipeline_parallel_degree",
                     convert=positive)
    if not (local.count and count.count) or local.count % count.count:
        return rows
    return Fact(local.count // count.count, count.location, count.default)


def read_layout(keys: Keys, release: str = VERSION) -> Layout:
    why = f"{VERSION} default"
    par = "parallelism."
    local = keys.get("training.local_batch_size", "training.batch_size", default=8, convert=positive,
                     why=f"{VERSION}: 8 (job_config.py:253)")
    return Layout(
        dp_shard=keys.get(par + "data_parallel_shard_degree", "training.data_parallel_shard_degree", default=-1,
                          convert=positive,
                          why=f"{VERSION}: -1, the ranks the other degrees leave (job_config.py:324)"),
        dp_replicate=keys.get(par + "data_parallel_replicate_degree", "training.data_parallel_replicate_degree",
                              default=1, convert=positive, why=why),
        tensor=keys.get(par + "tensor_parallel_degree", "training.tensor_parallel_degree", default=1,
                        convert=positive, why=why),
        pipeline=keys.get(par + "pipeline_parallel_degree", "experimental.pipeline_parallel_degree", default=1,
                          convert=positive, why=why),
        context=keys.get(par + "context_parallel_degree", "experimental.context_parallel_degree", default=1,
                         convert=positive, why=why),
        schedule=keys.get(par + "pipeline_parallel_schedule", "experimental.pipeline_parallel_schedule",
                          default="1F1B", why=f"{VERSION}: 1F1B (job_config.py:396)"),
        pp_microbatch=_pp_microbatch(keys, local),
        layers_per_stage=keys.get(par + "pipeline_parallel_layers_per_stage", default=None, convert=positive),
        checkpointing=keys.get("activation_checkpoint.mode", default="selective",
                               why=f"{VERSION}: selective (job_config.py:652)"),
        selective_option=keys.get("activation_checkpoint.selective_ac_option", default="2", convert=str,
                                  why=f"{VERSION}: every 2nd block (job_config.py:655)"),
        compile=keys.get("compile.enable", "training.compile", default=False, convert=truthy, why=why),
        compiled_loss=_compiled_loss(keys),
        loss_parallel=_loss_parallel(keys),
        float8=_converters(keys),
        reshard=keys.get(par + "fsdp_reshard_after_forward", default="default", why=why),
        local_batch=local,
        global_batch=keys.get("training.global_batch_size", default=-1, convert=positive,
                              why=f"{VERSION}: -1, local_batch_size x the data-parallel degree"),
        release=release,
        loss_chunks=keys.get("loss.num_chunks", default=0, convert=positive,
                             why=f"{VERSION}: the output's whole logits (components/loss.py)"),
        cuda_graphs=_cuda_graphs(keys),
    )


def _cuda_graphs(keys: Keys) -> Fact:
    """torchtitan 0.3.0 captures forward and backward in CUDA graphs unless
    ``training.disable_cuda_graphs`` (trainer.py:612-614); 0.2.2 has none (its files never set it)."""
    off = keys.get("training.disable_cuda_graphs", default=True, convert=truthy, why=f"{VERSION}: no CUDA graphs")
    return Fact(not off.value, off.location, off.default)


def _features(keys: Keys, layout: Layout) -> tuple[Feature, ...]:
    """What the job turns on that the runtime does not price, said beside the estimate (VL210)."""
    out = []
    if layout.float8.value:
        out.append(Feature(layout.float8, "float8 linears (model.converters): estimated as bf16 training; their fp8 "
                                          "weight casts and scales are not counted"))
    asynch = keys.get("parallelism.enable_async_tensor_parallel", "compile.enable_async_tensor_parallel",
                      default=False, convert=truthy)
    if asynch.value:
        out.append(Feature(asynch, "async tensor parallel: its symmetric-memory buffers are not counted"))
    sequence = keys.get("parallelism.enable_sequence_parallel", default=True, convert=truthy)
    if not sequence.value and isinstance(layout.tensor.value, int) and layout.tensor.value > 1:
        out.append(Feature(sequence, "sequence parallel off (0.3.0 parallelism.enable_sequence_parallel): the blocks' "
                                     "inputs and norms whole on every TP rank, estimated as split over it"))
    moments = keys.get("optimizer.implementation", default="fused")
    if moments.value == "fused_opt_states_bf16":
        out.append(Feature(moments, "AdamW's moments in bf16 (0.3.0 optimizer.implementation fused_opt_states_bf16, "
                                    "components/optimizer/optimizer.py:109-121): estimated as the parameters' dtype"))
    if layout.checkpointing.value == "memory_budget":
        out.append(Feature(layout.checkpointing, "activation_checkpoint.mode memory_budget: the compiler's choice of "
                                                 "what to save is not modelled; estimated as per-op selective"))
    return tuple(out)


def read_torchtitan(document: Document) -> Recipe:
    """A TOML job file (0.2.2), or a launch line's ``--module`` / ``--config`` over the registry
    function it names (0.3.0), read by the same keys."""
    from vramlint.readers.torchtitan_registry import VERSION as REGISTRY, StatedJob, is_registry_job, read_keys
    document = nested(document)
    if is_registry_job(document.data):
        job, release = read_keys(document), REGISTRY
    else:
        keys = Keys(document, f"{VERSION} default")
        job, release = StatedJob(keys, *_model(keys)), VERSION
    keys, model, config = job.keys, job.model, job.config
    layout = read_layout(keys, release)
    pipelined = isinstance(layout.pipeline.value, int) and layout.pipeline.value > 1
    micro = layout.pp_microbatch if pipelined else layout.local_batch
    mode = layout.checkpointing
    dtype = keys.get("training.dtype", default="float32", why=f"{VERSION}: fp32 parameters (job_config.py:275)")
    param = keys.get("training.mixed_precision_param", default="bfloat16",
                     why=f"{VERSION}: FSDP2 MixedPrecisionPolicy(param_dtype=bfloat16) (job_config.py:282)")
    return Recipe(
        document=document, framework="torchtitan", title="torchtitan", task=TRAIN,
        stage=Fact("pt", None, "torchtitan pretrains"), model=model, revision=Fact("main"),
        micro_batch=micro, grad_accum=Fact(1, None, "global_batch_size's (layouts/torchtitan.py)"),
        seq_len=keys.get("training.seq_len", default=2048, convert=positive,
                         why=f"{VERSION}: 2048 (job_config.py:261)"),
        packing=Fact(True, None, "torchtitan's dataloader packs every row to seq_len"),
        grad_checkpointing=Fact(mode.value != "none", mode.location, mode.default),
        mixed_precision=Fact("bf16" if param.value == "bfloat16" else "no", param.location, param.default),
        weights_dtype=dtype,
        optimizer=keys.get("optimizer.name", default="adamw", convert=lambda v: "adamw" if v in ("AdamW", "Adam")
                           else str(v), why=f"{VERSION}: AdamW, fused (job_config.py:135, 151)"),
        lora_rank=Fact(0), lora_targets=Fact(("all-linear",)), lora_dropout=Fact(0.0),
        load_in_4bit=Fact(False), load_in_8bit=Fact(False),
        attn=Fact("sdpa", None, f"{release}: " + ("F.scaled_dot_product_attention" if release == VERSION
                                                    else "FlexAttention, block-causal (models/common/attention.py)")),
        deepspeed=Fact(None),
        fsdp=FsdpFacts(strategy=Fact("FULL_SHARD", layout.reshard.location, layout.reshard.default),
                       version=Fact(2, None, f"{VERSION}: fully_shard"),
                       offload=keys.get("training.enable_cpu_offload", default=False, convert=truthy),
                       checkpointing=Fact(False), upcast=False),
        tensor_parallel=layout.tensor, sequence_split=layout.context,
        hf_trainer=False, keys=SPELLING, model_config=config, release=release, layout=Fact(layout),
        features=_features(keys, layout), model_hint=job.unpriced, notes=(job.note,) if job.note else (),
        refusals=job.refusals,
    )


__all__ = ["Layout", "looks_like_torchtitan", "read_torchtitan"]
