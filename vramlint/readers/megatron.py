"""Megatron-LM jobs → a :class:`Recipe` with its parallel :class:`Layout` (docs/recipes.md,
"Megatron-LM").

A Megatron job is the argument list of ``pretrain_gpt.py`` (``torchrun ... pretrain_gpt.py
--tensor-model-parallel-size 8 ...``), read from the launch line by readers/launch.py and reaching
this reader as a mapping of its keys (dashes as underscores, a bare flag True). The model is not
named but stated (``--num-layers``, ``--hidden-size``, ``--num-attention-heads``, ``--ffn-hidden-size``,
``--swiglu``, ``--group-query-attention`` / ``--num-query-groups``, the vocabulary from
``--vocab-size`` or the tokenizer), so it is handed to the memory model as the Hugging Face config of
the same shapes. What the line leaves out is Megatron-LM's own default at core_v0.19.0 (commit
5be9626, read with its argument parser and ``validate_args``; the line numbers below are that
commit's: A = megatron/training/arguments.py, TC = megatron/core/transformer/transformer_config.py,
MPC = megatron/core/model_parallel_config.py). Older spellings are read too
(``--checkpoint-activations``, ``--activations-checkpoint-method / -num-layers``, Megatron-DeepSpeed's
``--num-key-value-heads``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vramlint.documents import Document, Location
from vramlint.models.architectures import HYBRID_SYMBOLS
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, Keys, Recipe, positive, truthy

VERSION = "Megatron-LM core_v0.19.0"
# The training scripts whose arguments this reader reads (Megatron-LM's GPT pretraining entry point,
# which its Llama, Mixtral and GPT-3 examples launch).
PROGRAMS = ("pretrain_gpt.py", "pretrain_hybrid.py", "pretrain_mamba.py")   # the last two: the hybrid stack
SPELLING = {"micro_batch": "--micro-batch-size", "seq_len": "--seq-length", "grad_accum": "--global-batch-size",
            "grad_checkpointing": "--recompute-granularity", "tensor_parallel": "--tensor-model-parallel-size",
            "sequence_split": "--context-parallel-size", "optimizer": "--optimizer", "model": "--num-layers",
            "mixed_precision": "--bf16", "weights_dtype": "--bf16"}
# Megatron's store_true flags that a launch line writes bare (A and the generated TC / MPC booleans
# whose default is False): the word after one is the next argument, never its value.
BOOLEANS = frozenset({
    "sequence_parallel", "use_distributed_optimizer", "bf16", "fp16", "swiglu", "group_query_attention",
    "untie_embeddings_and_output_weights", "disable_bias_linear", "use_flash_attn", "use_mcore_models",
    "overlap_grad_reduce", "overlap_param_gather", "recompute_activations", "checkpoint_activations",
    "mock_data", "cross_entropy_loss_fusion", "accumulate_allreduce_grads_in_fp32", "grad_reduce_in_bf16",
    "use_rotary_position_embeddings", "apply_layernorm_1p", "fp8_param_gather", "manual_gc", "log_throughput",
    "profile", "no_masked_softmax_fusion", "no_bias_gelu_fusion", "no_bias_dropout_fusion",
    "no_gradient_accumulation_fusion",
    "no_async_tensor_model_parallel_allreduce", "distribute_saved_activations", "add_qkv_bias",
    "use_precision_aware_optimizer", "moe_grouped_gemm", "tp_comm_overlap", "no_load_optim", "no_load_rng",
    "no_save_optim", "no_save_rng", "use_checkpoint_args", "log_timers_to_tensorboard", "log_memory_to_tensorboard",
    "log_validation_ppl_to_tensorboard", "log_params_norm", "log_num_zeros_in_grad", "no_rope_fusion",
    "no_persist_layer_norm", "use_legacy_models", "deepspeed", "deepspeed_activation_checkpointing",
    "fp16_lm_cross_entropy",
    "no_query_key_layer_scaling", "attention_softmax_in_fp32", "calculate_per_token_loss", "no_mmap_bin_files",
    "no_create_attention_mask_in_dataloader", "qk_layernorm", "moe_router_pre_softmax", "decrease_batch_size_if_needed",
    "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split", "optimizer_cpu_offload",
    "no_pad_vocab_size", "log_device_memory_used", "record_memory_history", "use_megatron_fsdp", "use_custom_fsdp",
    "use_torch_fsdp2", "fsdp_double_buffer", "use_nccl_ub", "megatron_fsdp_max_pool_double_buffer",
    "init_model_with_meta_device", "fsdp_manual_registration", "defer_embedding_wgrad_compute",
    "moe_router_force_load_balancing", "no_bias_swiglu_fusion", "squared_relu", "use_fused_weighted_squared_relu",
    "moe_permute_fusion", "moe_router_enable_expert_bias", "moe_shared_expert_overlap"})
# Megatron's options that take several words (A: nargs '+' / '*', and TC's list fields the generated
# parser gives nargs: --recompute-modules core_attn moe_act): each takes every word up to the next option
LISTS = frozenset({
    "recompute_modules", "moe_aux_loss_coeff", "moe_router_load_balancing_type", "data_path", "train_data_path",
    "valid_data_path", "test_data_path", "cp_comm_type", "cuda_graph_scope", "cuda_graph_modules", "offload_modules",
    "spec", "ddp_param_name_patterns_for_fp32_local_accumulation"})
RECOMPUTE = ("full", "selective")
METHODS = ("uniform", "block")
MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts", "gdn_norm_out")
# The vocabulary a tokenizer type brings without --vocab-size: GPT-2's BPE (vocab.json's 50,257
# entries; a --vocab-file with a --merge-file and no type is that tokenizer, Megatron's examples'
# way), Llama 2's and Mixtral's SentencePiece model (32,000 pieces), Llama 3's (128,000 + 256 special)
TOKENIZER_VOCAB = {"GPT2BPETokenizer": 50257, "Llama2Tokenizer": 32000, "Llama3Tokenizer": 128256}


@dataclass(frozen=True)
class Layout:
    """The parallel layout a Megatron job states, each setting a fact (A, TC and MPC defaults)."""

    runtime: ClassVar[str] = "megatron"            # its module in vramlint/layouts

    tensor: Fact
    pipeline: Fact
    context: Fact
    expert: Fact
    virtual_layers: Fact           # --num-layers-per-virtual-pipeline-stage
    virtual_stages: Fact           # --num-virtual-stages-per-pipeline-rank
    first_layers: Fact             # --decoder-first-pipeline-num-layers
    last_layers: Fact              # --decoder-last-pipeline-num-layers
    embedding_slot: Fact           # --account-for-embedding-in-pipeline-split: the embedding takes a layer's place
    loss_slot: Fact                # --account-for-loss-in-pipeline-split: the loss takes one on the last stage
    sequence_parallel: Fact
    distributed_optimizer: Fact
    granularity: Fact              # --recompute-granularity full / selective / None
    method: Fact                   # --recompute-method uniform / block
    recompute_layers: Fact         # --recompute-num-layers
    modules: Fact                  # --recompute-modules (selective)
    micro_batch: Fact
    global_batch: Fact
    grad_bytes: Fact               # bytes a gradient in the DDP buffer (4: fp32 accumulation)
    dropout: Fact                  # --hidden-dropout > 0: a 1-byte mask kept after attention and MLP
    num_experts: Fact
    instances: Fact                # --num-distributed-optimizer-instances
    scores: Fact                   # bytes a score an unfused attention keeps (0: TE's fused / flash attention)
    expert_tensor: Fact            # --expert-tensor-parallel-size (None: the TP size, A:569-570)
    dispatcher: Fact               # --moe-token-dispatcher-type allgather / alltoall / flex
    capacity: Fact                 # --moe-expert-capacity-factor (None: dropless)
    aux_loss: Fact                 # --moe-aux-loss-coeff > 0: the router keeps its full softmax for the loss
    # NeMo 1.x's own states over Megatron-core (readers/nemo.py; Plan's Parallelism): Megatron-LM has none of them
    apex_adam: Fact = field(default_factory=lambda: Fact(False))     # optim.name distributed_fused_adam
    bucket_copy: Fact = field(default_factory=lambda: Fact(False))   # torch DDP without gradient_as_bucket_view
    autocast: Fact = field(default_factory=lambda: Fact("none"))     # fp32 weights cast each forward: cache / saved
    # Megatron-core's optimizer_cpu_offload as verl sets it (readers/verl_megatron.py): the share on the host,
    # and whether the precision-aware optimizer keeps the fp32 main copies with it
    host_fraction: Fact = field(default_factory=lambda: Fact(0.0))
    host_main: Fact = field(default_factory=lambda: Fact(False))
    stage_layout: Fact = field(default_factory=lambda: Fact(None))   # --pipeline-model-parallel-layout
    hybrid: Fact = field(default_factory=lambda: Fact(None))         # --hybrid-layer-pattern ("|": its segments)
    mtp: Fact = field(default_factory=lambda: Fact(0))               # multi-token prediction depths
    positions: Fact = field(default_factory=lambda: Fact("learned_absolute"))   # --position-embedding-type
    # --use-megatron-fsdp's sharding strategy ("" off), its double buffers, its main parameters' bytes (0: none
    # apart, the compute weights are the optimizer's)
    # Megatron-LM's own arguments (pretrain_gpt.py's line, its validate_args run on them), not another
    # file's keys read as them (Megatron-Bridge's ConfigContainer, NeMo's model config: ``Arguments``)
    launched: bool = True
    # --cross-entropy-loss-fusion and its --cross-entropy-fusion-impl (native, TC:325; te)
    # --defer-embedding-wgrad-compute and --wgrad-deferral-limit (MPC:415: 0, every micro-batch)
    deferred_wgrad: Fact = field(default_factory=lambda: Fact(False))
    deferral_limit: Fact = field(default_factory=lambda: Fact(0))
    loss_fusion: Fact = field(default_factory=lambda: Fact(False))
    loss_fusion_impl: Fact = field(default_factory=lambda: Fact("native"))
    # --no-bias-swiglu-fusion (the experts' weighted SwiGLU unfused) and --use-fused-weighted-squared-relu;
    # bias_gelu_fusion (on unless --no-bias-gelu-fusion or --disable-bias-linear: A:1550-1551), --moe-grouped-gemm
    glu_fusion: Fact = field(default_factory=lambda: Fact(True))
    srelu_fusion: Fact = field(default_factory=lambda: Fact(False))
    gelu_fusion: Fact = field(default_factory=lambda: Fact(False))
    grouped_gemm: Fact = field(default_factory=lambda: Fact(False))
    fsdp: Fact = field(default_factory=lambda: Fact(""))
    fsdp_double_buffer: Fact = field(default_factory=lambda: Fact(False))
    fsdp_main_bytes: Fact = field(default_factory=lambda: Fact(4))


def spelled(text: str, key_of: dict[str, str]) -> str:
    """A hint written in Megatron-LM's flags with each ``--flag`` the key another file states it by
    (``key_of``: argument name -> key; Megatron-Bridge's ConfigContainer, NeMo's model config)."""
    words = []
    for word in text.split(" "):
        core = word.rstrip(".,;:)")
        key = key_of.get(core[2:].replace("-", "_")) if core.startswith("--") else None
        words.append(word.replace(core, key, 1) if key else word)
    return " ".join(words)


@dataclass
class Arguments(Document):
    """A job's Megatron arguments as another file states them (Megatron-Bridge's ConfigContainer,
    NeMo's model config), each located at the key that states it (``paths``)."""

    paths: dict[str, str] = field(default_factory=dict)

    def locate(self, json_path: str) -> Location:
        name = json_path[2:] if json_path.startswith("$.") else ""
        return super().locate(f"$.{self.paths[name]}" if name in self.paths else json_path)


def laid_out(document: Document, keys: Keys, table: dict[str, tuple[str, ...]], derived: dict[str, tuple[Any, str]],
             read: Callable[[Any], Any] = lambda value: value) -> Arguments:
    """The file as the Megatron-LM argument mapping it is: each argument the first of its keys
    (``table``) the file sets, ``read`` as the file writes it, then the flags the file states in
    words of its own (``derived``: argument -> value and the key that says it)."""
    values: dict[str, Any] = {}
    paths: dict[str, str] = {}
    for name, sources in table.items():
        for path in sources:
            value = read(keys.raw(path))
            if value is not None:
                values[name], paths[name] = value, path
                break
    for name, (value, path) in derived.items():
        values[name], paths[name] = value, path
    return Arguments(document.path, document.text, values, positions=document.positions, lenient=document.lenient,
                     elsewhere=document.elsewhere, unknown=document.unknown, paths=paths)


def looks_like_megatron(data: Any) -> bool:
    """A Megatron argument mapping: the model stated by its layer count, width and heads beside a
    Megatron parallel size (no other format spells ``tensor_model_parallel_size`` with ``num_layers``).
    Launch lines reach the reader by their program (``pretrain_gpt.py``), not by this test."""
    return isinstance(data, dict) and {"num_layers", "hidden_size", "num_attention_heads"} <= set(data) and \
        any(k in data for k in ("tensor_model_parallel_size", "micro_batch_size", "pipeline_model_parallel_size"))


def _flag(keys: Keys, *names: str) -> Fact:
    return keys.get(*names, default=False, convert=truthy, why=f"{VERSION}: off (store_true)")


def _mtp_depths(keys: Keys) -> Fact:
    """Multi-token prediction depths: a hybrid pattern's ``/`` repeats (A:839-852: inferred from the unified
    pattern, over --mtp-num-layers where both say), else --mtp-num-layers."""
    stated = keys.get("mtp_num_layers", default=0, convert=positive, why=f"{VERSION}: none (TC:68)")
    pattern = hybrid_pattern(keys)
    depths = [part for part in str(pattern.value).split("/")[1:] if part] if pattern.value is not None else []
    if not depths:
        return Fact(stated.count or 0, stated.location, stated.default)
    return Fact(len(depths), pattern.location)      # the pattern's count wins over a stated one (A:843-852)


def _glu_fusion(keys: Keys) -> Fact:
    """bias_swiglu_fusion: on unless --no-bias-swiglu-fusion (store_false, A:2758-2761), or a file's
    own ``bias_activation_fusion`` key says it (Megatron-Bridge / NeMo: TransformerConfig's)."""
    off = keys.get("no_bias_swiglu_fusion", default=None, convert=truthy)
    if off.value is not None:
        return Fact(not off.value, off.location)
    return keys.get("bias_activation_fusion", default=True, convert=truthy, why=f"{VERSION}: on (A:2758-2761)")


def position_type(keys: Keys) -> Fact:
    """--position-embedding-type, rope where the legacy --use-rotary-position-embeddings says so
    (A:1571-1572); learned_absolute by default."""
    if truthy(keys.raw("use_rotary_position_embeddings")):
        return keys.fact("use_rotary_position_embeddings", "rope")
    return keys.get("position_embedding_type", default="learned_absolute", why=f"{VERSION}: learned_absolute")


def _gelu_fusion(keys: Keys) -> Fact:
    """bias_gelu_fusion, what a plain (GELU, ReLU²) MLP's bias_activation_fusion is (argument_utils.py:
    319): on unless --no-bias-gelu-fusion (A:2757), or --disable-bias-linear turns it off (A:1550-1551)."""
    for name in ("no_bias_gelu_fusion", "disable_bias_linear"):
        if truthy(keys.raw(name)):
            return Fact(False, keys.fact(name, True).location)
    return Fact(True, None, f"{VERSION}: bias_gelu_fusion on (A:2755-2757)")


def _recompute(keys: Keys) -> tuple[Fact, Fact, Fact]:
    """Granularity, method and layers; ``--recompute-activations`` is selective (A:589-591) and the
    older ``--checkpoint-activations`` full, uniform over each layer (Megatron before 2022)."""
    granularity = keys.get("recompute_granularity", default=None, why=f"{VERSION}: no recompute (TC:518)")
    method = keys.get("recompute_method", "activations_checkpoint_method", default=None,
                      why=f"{VERSION}: none (TC:529)")
    layers = keys.get("recompute_num_layers", "activations_checkpoint_num_layers", default=None, convert=positive,
                      why=f"{VERSION}: none (TC:537)")
    if granularity.value is None:
        if truthy(keys.raw("recompute_activations")):
            granularity = keys.fact("recompute_activations", "selective")
        elif truthy(keys.raw("checkpoint_activations")):
            granularity = keys.fact("checkpoint_activations", "full")
            method = method if method.value else Fact("uniform", method.location, "--checkpoint-activations: uniform")
            layers = layers if layers.value else Fact(1, layers.location, "--checkpoint-activations: every layer")
    return granularity, method, layers


FSDP_DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}


def _fsdp(keys: Keys) -> dict:
    """Megatron-FSDP's layout (``--use-megatron-fsdp``, the older ``--use-custom-fsdp``): the
    sharding strategy (optim_grads_params by default, A:3023), double buffers (--fsdp-double-buffer;
    --use-nccl-ub and --megatron-fsdp-max-pool-double-buffer turn them on, A:1148-1157), and the main
    parameters' dtype (--megatron-fsdp-main-params-dtype, fp32 by default, A:3520; ``auto``: none apart,
    param_and_grad_buffer.py:2680-2684). Off: no fields (the Layout's defaults)."""
    on = next((name for name in ("use_megatron_fsdp", "use_custom_fsdp") if truthy(keys.raw(name))), None)
    if on is None:
        return {}
    strategy = keys.get("data_parallel_sharding_strategy", default="optim_grads_params",
                        why=f"{VERSION}: optim_grads_params (A:3023)")
    double = next((keys.fact(name, True) for name in ("fsdp_double_buffer", "use_nccl_ub", "nccl_ub",
                                                      "megatron_fsdp_max_pool_double_buffer")
                   if truthy(keys.raw(name))), Fact(False, None, f"{VERSION}: off (A:3035)"))
    main = keys.get("megatron_fsdp_main_params_dtype", default="fp32", why=f"{VERSION}: fp32 (A:3520)")
    return {"fsdp": Fact(str(strategy.value), keys.fact(on, True).location, strategy.default),
            "fsdp_double_buffer": double,
            "fsdp_main_bytes": Fact(FSDP_DTYPE_BYTES.get(str(main.value), 0), main.location, main.default)}


def _grad_bytes(keys: Keys) -> Fact:
    """The DDP gradient buffer's element: fp32 under --bf16 unless --grad-reduce-in-bf16 (A:1181-1194),
    the parameters' own dtype otherwise (fp16 gets no fp32 accumulation unless asked). Megatron-FSDP's
    main gradients are --megatron-fsdp-main-grads-dtype's, by default (``auto``) the parameters' own:
    bf16 under --bf16, bf16 for fp8 parameters (A:3524; param_and_grad_buffer.py:2306-2315)."""
    if truthy(keys.raw("use_megatron_fsdp")) or truthy(keys.raw("use_custom_fsdp")):
        dtype = keys.get("megatron_fsdp_main_grads_dtype", default="auto", why=f"{VERSION}: auto (A:3524)")
        if str(dtype.value) in FSDP_DTYPE_BYTES:
            return Fact(FSDP_DTYPE_BYTES[str(dtype.value)], dtype.location, dtype.default)
        sixteen = truthy(keys.raw("bf16")) or truthy(keys.raw("fp16"))
        return Fact(2 if sixteen else 4, dtype.location, f"{VERSION}: Megatron-FSDP's main gradients in the "
                                                         "parameters' dtype (auto, A:3524)")
    if truthy(keys.raw("grad_reduce_in_bf16")):
        return keys.fact("grad_reduce_in_bf16", 2)
    if truthy(keys.raw("accumulate_allreduce_grads_in_fp32")):
        return keys.fact("accumulate_allreduce_grads_in_fp32", 4)
    if truthy(keys.raw("bf16")):
        return Fact(4, None, f"{VERSION}: --bf16 accumulates and all-reduces gradients in fp32 (A:1190-1194)")
    if truthy(keys.raw("fp16")):
        return Fact(2, None, f"{VERSION}: --fp16 keeps fp16 gradients")
    return Fact(4, None, f"{VERSION}: fp32 parameters and gradients")


def _scores(keys: Keys) -> Fact:
    """Bytes a score of the s x s attention the layer keeps: none under Transformer Engine's fused or
    flash attention (--transformer-impl transformer_engine, TC:1220; --attention-backend auto); the
    local implementation (and --attention-backend unfused / local) keeps the softmax output (2 B), its
    dropout mask (1 B, --attention-dropout > 0, 0.1 by default: TC:184) and the dropped-out softmax
    the values are multiplied by (2 B): Korthikanti et al.'s 5as per token. Without attention dropout
    the softmax output alone (2 B): torch's dropout at p = 0 returns its input itself, no mask and no
    copy (aten/src/ATen/native/Dropout.cpp ``_dropout_impl``: ``if (p == 0 || !train ...) return
    input``), so the values' matmul saves the softmax's own output. --use-flash-attn (legacy
    Megatron's local layer) keeps none."""
    backend = keys.get("attention_backend", default="auto", why=f"{VERSION}: auto (TC:144)")
    impl = keys.get("transformer_impl", default="transformer_engine", why=f"{VERSION}: transformer_engine (TC:1220)")
    unfused = str(backend.value) in ("unfused", "local") or (impl.value == "local" and
                                                             not truthy(keys.raw("use_flash_attn")))
    if not unfused:
        return Fact(0, backend.location or impl.location, backend.default)
    dropout = keys.get("attention_dropout", default=0.1)
    masked = isinstance(dropout.value, (int, float)) and dropout.value > 0
    where = backend if str(backend.value) in ("unfused", "local") else impl
    return Fact(5 if masked else 2, where.location, where.default)


def as_words(value: Any) -> tuple[str, ...]:
    """A list argument as its words: a YAML list, or the words a launch line gives it."""
    return tuple(value) if isinstance(value, (list, tuple)) else tuple(str(value).split())


def read_layout(keys: Keys) -> Layout:
    granularity, method, layers = _recompute(keys)
    dropout = keys.get("hidden_dropout", default=0.1, why=f"{VERSION}: 0.1 (TC:181)")
    return Layout(
        tensor=keys.get("tensor_model_parallel_size", default=1, convert=positive, why=f"{VERSION}: 1 (MPC:55)"),
        pipeline=keys.get("pipeline_model_parallel_size", default=1, convert=positive, why=f"{VERSION}: 1 (MPC:83)"),
        context=keys.get("context_parallel_size", default=1, convert=positive, why=f"{VERSION}: 1 (MPC:100)"),
        expert=keys.get("expert_model_parallel_size", default=1, convert=positive, why=f"{VERSION}: 1 (MPC:127)"),
        virtual_layers=keys.get("num_layers_per_virtual_pipeline_stage", default=None, convert=positive),
        virtual_stages=keys.get("num_virtual_stages_per_pipeline_rank", default=None, convert=positive),
        first_layers=keys.get("decoder_first_pipeline_num_layers", default=None, convert=positive),
        last_layers=keys.get("decoder_last_pipeline_num_layers", default=None, convert=positive),
        embedding_slot=_flag(keys, "account_for_embedding_in_pipeline_split"),
        loss_slot=_flag(keys, "account_for_loss_in_pipeline_split"),
        sequence_parallel=_flag(keys, "sequence_parallel"),
        distributed_optimizer=_flag(keys, "use_distributed_optimizer"),
        granularity=granularity, method=method, recompute_layers=layers,
        modules=keys.get("recompute_modules", default=("core_attn",), convert=as_words,
                         why=f"{VERSION}: core_attn (TC:1763-1764)"),
        micro_batch=keys.get("micro_batch_size", default=None, convert=positive,
                             why=f"{VERSION}: none (A:675 asserts it is set)"),
        global_batch=keys.get("global_batch_size", default=None, convert=positive,
                              why=f"{VERSION}: micro-batch x data-parallel size (A:684-686)"),
        grad_bytes=_grad_bytes(keys),
        dropout=Fact(isinstance(dropout.value, (int, float)) and dropout.value > 0, dropout.location, dropout.default),
        num_experts=keys.get("num_experts", default=None, convert=positive, why=f"{VERSION}: dense (A:3351)"),
        instances=keys.get("num_distributed_optimizer_instances", default=1, convert=positive,
                           why=f"{VERSION}: 1 (A:3049)"),
        scores=_scores(keys),
        expert_tensor=keys.get("expert_tensor_parallel_size", default=None, convert=positive,
                               why=f"{VERSION}: the TP size (A:569-570)"),
        dispatcher=keys.get("moe_token_dispatcher_type", default="allgather", why=f"{VERSION}: allgather (TC:862)"),
        capacity=keys.get("moe_expert_capacity_factor", default=None, why=f"{VERSION}: none, dropless (TC:888)"),
        aux_loss=_aux_loss(keys),
        stage_layout=keys.get("pipeline_model_parallel_layout", default=None, why=f"{VERSION}: none (A:2950)"),
        hybrid=hybrid_pattern(keys), mtp=_mtp_depths(keys), positions=position_type(keys),
        launched=not isinstance(keys.document, Arguments),
        loss_fusion=_flag(keys, "cross_entropy_loss_fusion"),
        glu_fusion=_glu_fusion(keys),
        srelu_fusion=_flag(keys, "use_fused_weighted_squared_relu"),
        gelu_fusion=_gelu_fusion(keys), grouped_gemm=_flag(keys, "moe_grouped_gemm"),
        deferred_wgrad=_flag(keys, "defer_embedding_wgrad_compute"),
        deferral_limit=keys.get("wgrad_deferral_limit", default=0, why=f"{VERSION}: 0, every micro-batch (MPC:415)"),
        loss_fusion_impl=keys.get("cross_entropy_fusion_impl", default="native", why=f"{VERSION}: native (TC:325)"),
        **_host_optimizer(keys), **_fsdp(keys),
    )


def _host_optimizer(keys: Keys) -> dict[str, Fact]:
    """``--optimizer-cpu-offload`` (store_true, A:2781): the hybrid device optimizer keeps
    ``--optimizer-offload-fraction`` (1.0, A:2785) of the optimizer's shard on the host. validate_args
    requires ``--use-precision-aware-optimizer`` with it (A:1803-1807), whose path moves the fp32 main
    copies there too (layouts/megatron.py refuses the line without it)."""
    on = _flag(keys, "optimizer_cpu_offload")
    fraction = keys.get("optimizer_offload_fraction", default=1.0, why=f"{VERSION}: 1.0 (A:2785)")
    value = fraction.value
    share = float(value) if on.value and isinstance(value, (int, float)) and not isinstance(value, bool) \
        and 0 <= value <= 1 else 0.0
    aware = _flag(keys, "use_precision_aware_optimizer")
    return {"host_fraction": Fact(share, fraction.location or on.location, fraction.default),
            "host_main": Fact(bool(aware.value), aware.location, aware.default)}


def _aux_loss(keys: Keys) -> Fact:
    """--moe-aux-loss-coeff > 0 (a list: any of them): the router computes the load-balancing loss
    from its full softmax over the experts (router.py ``_apply_aux_loss``); 0.0 by default (TC:846)."""
    coeff = keys.get("moe_aux_loss_coeff", default=0.0, why=f"{VERSION}: 0.0, no aux loss (TC:846)")
    values = coeff.value if isinstance(coeff.value, (list, tuple)) else str(coeff.value).split()
    try:
        on = any(float(v) > 0 for v in values)
    except ValueError:
        on = False
    return Fact(on, coeff.location, coeff.default)


def _vocabulary(keys: Keys, tp: int) -> tuple[int | None, str]:
    """The padded vocabulary (``vocab_size_with_padding``: a multiple of 128 x TP, build_tokenizer.py:124-137),
    and what states it; None where only the tokenizer's file knows it."""
    stated = keys.get("vocab_size", convert=positive).count
    merges = keys.raw("merge_file") or "merge_file" in keys.document.unknown     # stated, its path the run's
    tokenizer = str(keys.raw("tokenizer_type") or ("GPT2BPETokenizer" if merges else ""))
    if stated is None:
        stated = TOKENIZER_VOCAB.get(tokenizer)
    source = ""
    if stated is None and tokenizer == "HuggingFaceTokenizer":
        stated, source = _hub_vocabulary(keys.raw("tokenizer_model"))
    if stated is None:
        return None, (f"the vocabulary is {tokenizer or 'the tokenizer'}'s, known only from its files: "
                      "give --vocab-size")
    if truthy(keys.raw("no_pad_vocab_size")):
        return stated, f"{stated:,}, unpadded"
    multiple = (keys.get("make_vocab_size_divisible_by", convert=positive).count or 128) * tp
    padded = -(-stated // multiple) * multiple
    return padded, f"{stated:,}{source} padded to {padded:,} (a multiple of {multiple}: vocab_size_with_padding)"


def _hub_vocabulary(model: Any) -> tuple[int | None, str]:
    """A HuggingFaceTokenizer named by its Hub id (``--tokenizer-model deepseek-ai/DeepSeek-V3``) whose
    model the bundled catalog holds: its config's vocab_size, the embedding rows the model has, which
    every token id of its tokenizer indexes, so at least the tokenizer's length that Megatron pads
    (build_tokenizer.py:124-137); as much or a few hundred rows more (Qwen2.5: 152,064 for 151,665)."""
    name = str(model or "")
    if name.count("/") != 1 or name.startswith((".", "/", "~", "$")):
        return None, ""
    from vramlint.models import catalog
    shape = catalog.find(name)
    if shape is None or not shape.vocab_size:
        return None, ""
    return shape.vocab_size, f" (the {name} config's vocab_size: at least its tokenizer's length)"


def _ffn(keys: Keys, hidden: int, swiglu: bool) -> int:
    """--ffn-hidden-size, else 4h, or with --swiglu int(8h/3/64)*64 (A:1280-1289)."""
    stated = keys.get("ffn_hidden_size", convert=positive).count
    if stated:
        return stated
    return int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden


# The way on where no model stands behind the arguments, by why (``model_config``): in Megatron-LM's
# flags, which a reader of another file spells in its own keys
WAY_ON = {"shape": "state the model's --num-layers, --hidden-size and --num-attention-heads",
          "vocabulary": "add --vocab-size with the tokenizer's vocabulary to the arguments",
          "unpriced": "no estimate until these layers are priced; --warn VL011 reports this as a warning"}


# Layers the arguments build other than the GPT layer they otherwise state (A:3462-3495): per-layer
# shapes from a Hugging Face heterogeneous config. (A hybrid pattern's layers: ``_hybrid``.)
UNPRICED_LAYERS = (
    ("heterogeneous_layers_config_path", "heterogeneous layers (--heterogeneous-layers-config-path: a shape per "
                                         "layer) are not priced yet"),
    ("heterogeneous_layers_config_encoded_json", "heterogeneous layers (a shape per layer) are not priced yet"),
)


HYBRID = ("hybrid_layer_pattern", "hybrid_override_pattern")     # the second deprecated, forwarded (A:719-731)


def hybrid_pattern(keys: Keys) -> Fact:
    """--hybrid-layer-pattern (or the deprecated --hybrid-override-pattern): the hybrid stack's layers."""
    return keys.get(*HYBRID, default=None, why=f"{VERSION}: none, a GPT model (A:3485)")


def model_config(keys: Keys, tp: int) -> tuple[dict | None, str, str]:
    """The model the arguments state, as the Hugging Face config of the same shapes (llama for
    SwiGLU, starcoder2 for a plain GELU MLP with grouped or rotary attention, gpt2 for Megatron's
    GPT-3 layout with learned positions; the hybrid stack as ``megatron_hybrid``, ours), and its
    description; None, why and the way on (``WAY_ON``) where a shape or the vocabulary is missing or
    the layers are not priced."""
    pattern = hybrid_pattern(keys).value
    shape = {name: keys.get(name, convert=positive).count for name in ("num_layers", "hidden_size",
                                                                          "num_attention_heads")}
    if pattern is not None:             # the layer count is the pattern's, --num-layers ignored (A:761-770)
        shape["num_layers"] = len(str(pattern).split("/")[0].replace("|", "")) or None
    missing = [f"--{name.replace('_', '-')}" for name, value in shape.items() if value is None]
    if missing:
        return None, f"the model's {', '.join(missing)} not stated", WAY_ON["shape"]
    layers, hidden, heads = shape["num_layers"], shape["hidden_size"], shape["num_attention_heads"]
    unpriced = next((what for name, what in UNPRICED_LAYERS if keys.raw(name) not in (None, "", False)), None)
    if unpriced:
        return None, unpriced, WAY_ON["unpriced"]
    vocab, vocab_words = _vocabulary(keys, tp)
    if vocab is None:
        return None, vocab_words, WAY_ON["vocabulary"]
    swiglu = truthy(keys.raw("swiglu"))
    ffn = _ffn(keys, hidden, swiglu)
    grouped = truthy(keys.raw("group_query_attention"))
    groups = (keys.get("num_query_groups", convert=positive).count or 1) if grouped else \
        (keys.get("num_key_value_heads", convert=positive).count or heads)
    head_dim = keys.get("kv_channels", convert=positive).count or hidden // heads
    tied = not truthy(keys.raw("untie_embeddings_and_output_weights"))
    bias = not truthy(keys.raw("disable_bias_linear"))
    rope = str(position_type(keys).value) in ("rope", "yarn", "mrope")
    positions = keys.get("max_position_embeddings", convert=positive).count or \
        keys.get("seq_length", convert=positive).count or 2048
    common = {"vocab_size": vocab, "tie_word_embeddings": tied, "torch_dtype": "bfloat16"}
    gated = {**common, "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
             "num_key_value_heads": groups, "head_dim": head_dim, "intermediate_size": ffn, "hidden_act": "silu",
             "attention_bias": bias, "mlp_bias": bias, "max_position_embeddings": positions}
    mlp_words = f"FFN {ffn}{' SwiGLU' if swiglu else ''}"
    if pattern is not None:
        config, hybrid_words = _hybrid(keys, str(pattern), ffn, swiglu)
        if config is None:
            return None, hybrid_words, WAY_ON["unpriced"]
        config = {**gated, "learned_positions": 0 if rope else positions, **config}
        return config, (f"Megatron hybrid: {hybrid_words}, hidden {hidden}, {heads} heads" + (
            f" ({groups} query groups)" if groups != heads else "") + f", {mlp_words}, vocabulary {vocab_words}"
            + ("" if tied else ", untied output layer")), ""
    if truthy(keys.raw("multi_latent_attention")):
        config, attention_words = _latent(keys, layers, ffn, swiglu)
        if config is None:
            return None, attention_words, WAY_ON["unpriced"]
        config = {**gated, "attention_bias": False, **config}
        words = (f"Megatron GPT: {layers} layers, hidden {hidden}, {heads} heads, {attention_words}, vocabulary "
                 f"{vocab_words}" + ("" if tied else ", untied output layer"))
        return config, words, ""
    if keys.get("num_experts", convert=positive).count:
        moe, mlp_words = _moe(keys, layers, ffn, swiglu)
        if moe is None:
            return None, mlp_words, WAY_ON["unpriced"]
        config = {**gated, "qkv_bias": bias, **moe}          # Qwen2-MoE spells the attention's bias qkv_bias
    elif swiglu:
        config = {**gated, "model_type": "llama", "architectures": ["LlamaForCausalLM"]}
    elif grouped or rope or head_dim * heads != hidden:
        config = {**common, "model_type": "starcoder2", "architectures": ["Starcoder2ForCausalLM"],
                  "hidden_size": hidden, "num_hidden_layers": layers, "num_attention_heads": heads,
                  "num_key_value_heads": groups, "intermediate_size": ffn, "use_bias": bias,
                  "hidden_act": "gelu_pytorch_tanh", "max_position_embeddings": positions, "residual_dropout": 0.0}
    else:
        config = {**common, "model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "n_embd": hidden,
                  "n_layer": layers, "n_head": heads, "n_inner": ffn, "n_positions": positions,
                  "activation_function": "gelu", "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0}
    words = (f"Megatron GPT: {layers} layers, hidden {hidden}, {heads} heads" + (f" ({groups} query groups)"
             if groups != heads else "") + f", {mlp_words}, vocabulary {vocab_words}"
             + ("" if tied else ", untied output layer"))
    return config, words, ""


# The hybrid stack's symbols (core_v0.19.0 hybrid_layer_allocation.py Symbols): priced, and the others'
HYBRID_NAMES = {"M": "Mamba", "*": "attention", "-": "MLP", "E": "MoE", "G": "Gated DeltaNet",
                "D": "DeepSeek sparse attention", "+": "multi-latent attention"}


def _hybrid(keys: Keys, pattern: str, ffn: int, swiglu: bool) -> tuple[dict | None, str]:
    """The hybrid stack's keys (``architectures.megatron_hybrid``) and its layers in words: the main
    pattern (``|`` separates pipeline segments, ``layouts/megatron.py``'s) and after each ``/`` a
    multi-token prediction depth's layers (all alike: hybrid_layer_allocation.py parse_hybrid_pattern,
    which raises otherwise), the Mamba mixer's widths (TC:1179-1190:
    state 128, head 64, 8 groups, heads d_inner / head_dim with d_inner = 2 x hidden: MambaMixer's
    expand 2) and the MoE layers' experts (``_moe``). None and why for a symbol not priced."""
    main, *depths = pattern.split("/")
    main = main.replace("|", "")
    if len(set(depths)) > 1:
        return None, (f"All MTP patterns must be identical. Pattern 1 is '{depths[0]}', but pattern "
                      f"{next(i for i, d in enumerate(depths, 1) if d != depths[0])} is '"
                      f"{next(d for d in depths if d != depths[0])}' (hybrid_layer_allocation.py parse_hybrid_pattern)")
    unknown = sorted(set(main + "".join(depths)) - set(HYBRID_SYMBOLS))
    if unknown:
        named = ", ".join(f"{HYBRID_NAMES[s]} ({s})" if s in HYBRID_NAMES else f"{s!r}, not a layer symbol"
                          for s in unknown)
        return None, f"hybrid layers {named} in the layer pattern are not priced yet"
    hidden = keys.get("hidden_size", convert=positive).count
    head_dim = keys.get("mamba_head_dim", convert=positive).count or 64
    if not keys.get("mamba_num_heads", convert=positive).count and (2 * hidden) % head_dim:
        return None, (f"d_inner must be evenly divisible by headdim (d_inner 2 x {hidden}, --mamba-head-dim "
                      f"{head_dim}: mamba_mixer.py:248)")
    out = {"model_type": "megatron_hybrid", "architectures": ["HybridModel"], "hybrid_layer_pattern": main,
           "mtp_pattern": depths[0] if depths else "", "mtp_depths": len([d for d in depths if d]),
           "mamba_head_dim": head_dim, "mamba_num_heads": keys.get("mamba_num_heads", convert=positive).count or
           2 * hidden // head_dim, "mamba_num_groups": keys.get("mamba_num_groups", convert=positive).count or 8,
           "mamba_state_dim": keys.get("mamba_state_dim", convert=positive).count or 128,
           "norm_bias": str(keys.raw("normalization") or "LayerNorm") == "LayerNorm"}
    if not swiglu:
        out["gated_linear_unit"] = False
    counts = {symbol: main.count(symbol) for symbol in HYBRID_SYMBOLS if symbol in main}
    words = ", ".join(f"{n} {HYBRID_NAMES[s]}" for s, n in counts.items())
    if "E" in main + "".join(depths):
        if not keys.get("num_experts", convert=positive).count:
            return None, "MoE layers (E) in the layer pattern without --num-experts (the MoE spec needs it)"
        moe, moe_words = _moe(keys, len(main), ffn, swiglu)
        if moe is None:
            return None, moe_words
        out.update({key: moe[key] for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size")},
                   shared_expert_intermediate_size=moe.get("shared_expert_intermediate_size", 0))
        words += f" ({moe_words.split(', ')[0]}, top-{moe['num_experts_per_tok']})"
    return out, f"{len(main)} layers ({words}; Mamba {out['mamba_num_heads']} heads x {head_dim}, " \
                f"{out['mamba_num_groups']} groups, state {out['mamba_state_dim']})"


def moe_layers(freq: Any, layers: int) -> list[int] | None:
    """Which layers are MoE (1) or dense (0): --moe-layer-freq N puts one every N-th layer from the
    first (``i % N == 0``), a list expression (``"([0]*3+[1]*45)"``) states each (A:326-349
    ``moe_freq_type``, read here as the list arithmetic it is); None where it is neither."""
    if isinstance(freq, int) and not isinstance(freq, bool) and freq > 0:
        return [1 if i % freq == 0 else 0 for i in range(layers)]
    if isinstance(freq, (list, tuple)):
        pattern = list(freq)
    elif isinstance(freq, str) and freq.strip().isdigit():
        return moe_layers(int(freq), layers)
    elif isinstance(freq, str):
        pattern = _list_expression(freq)
    else:
        return None
    return pattern if pattern is not None and len(pattern) == layers and set(pattern) <= {0, 1} else None


def _list_expression(text: str) -> list[int] | None:
    """A list of ints built with ``+`` and ``*`` (``[1]*3+[0]``), evaluated over its syntax tree."""
    import ast

    def value(node: ast.AST) -> Any:
        if isinstance(node, ast.List):
            return [value(item) for item in node.elts]
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mult)):
            left, right = value(node.left), value(node.right)
            return left + right if isinstance(node.op, ast.Add) else left * right
        raise ValueError(text)
    try:
        out = value(ast.parse(text.strip(), mode="eval").body)
    except (SyntaxError, ValueError, TypeError, RecursionError):
        return None
    return out if isinstance(out, list) and all(isinstance(v, int) for v in out) else None


def _moe(keys: Keys, layers: int, ffn: int, swiglu: bool) -> tuple[dict | None, str]:
    """The MoE keys of the Hugging Face config of the same shapes: Qwen2-MoE's with shared experts
    (their gate counted, h weights a layer, where --moe-shared-expert-gate is off), Qwen3-MoE's
    without (its q / k norms counted, 2 x kv_channels weights a layer, where --qk-layernorm is off);
    without --swiglu Megatron's ``gated_linear_unit`` false (architectures.gated_linear_unit: plain GELU
    experts, shared experts and dense layers);
    dense layers at --moe-layer-freq's zeros with --ffn-hidden-size, the experts' width
    --moe-ffn-hidden-size (that of the dense FFN where unset: A:1595-1597), --moe-router-topk 2 by
    default (TC:739). None and why for the MoE kinds not priced."""
    experts = keys.get("num_experts", convert=positive).count
    latent = keys.get("moe_latent_size", convert=positive).count
    if latent:
        return None, (f"{experts} experts with a latent projection (--moe-latent-size {latent}): latent MoE layers "
                      "are not priced yet")
    freq = keys.get("moe_layer_freq", default=1)
    pattern = moe_layers(freq.value, layers)
    if pattern is None:
        return None, (f"--moe-layer-freq {freq.value!r}: not a layer count or a list of 0 / 1 for each of the "
                      f"{layers} layers")
    width = keys.get("moe_ffn_hidden_size", convert=positive).count or ffn
    top_k = keys.get("moe_router_topk", convert=positive).count or 2
    shared = keys.get("moe_shared_expert_intermediate_size", convert=positive).count or 0
    dense = [i for i, moe in enumerate(pattern) if not moe]
    family = ("qwen2_moe", "Qwen2MoeForCausalLM") if shared else ("qwen3_moe", "Qwen3MoeForCausalLM")
    out = {"model_type": family[0], "architectures": [family[1]], "num_experts": experts,
           "num_experts_per_tok": top_k, "moe_intermediate_size": width, "decoder_sparse_step": 1,
           "mlp_only_layers": dense, "norm_topk_prob": True}
    if not swiglu:              # GELU experts, shared experts and dense layers: up and down only
        out["gated_linear_unit"] = False
    if shared:
        out["shared_expert_intermediate_size"] = shared
    words = (f"{experts} experts of FFN {width}{' SwiGLU' if swiglu else ''}, top-{top_k}"
             + (f", shared experts {shared}" if shared else "") + (f", {len(dense)} dense layer(s) of FFN {ffn}"
                                                                      if dense else ""))
    return out, words


def _latent(keys: Keys, layers: int, ffn: int, swiglu: bool) -> tuple[dict | None, str]:
    """``--multi-latent-attention`` as DeepSeek-V3's Hugging Face config of the same shapes: the
    latent widths (A:3381-3389: --q-lora-rank none, the query projected from the hidden states;
    --kv-lora-rank 32, --qk-head-dim 128, --qk-pos-emb-head-dim 64, --v-head-dim 128 by default),
    and the MoE layers as DeepSeek places them (the first ``first_k_dense_replace`` layers dense,
    then every ``moe_layer_freq``-th) with its shared experts in whole experts of the routed width.
    Megatron builds MLA's projections without biases (multi_latent_attention.py's build_module calls).
    None and why for the layer patterns and shared widths DeepSeek's config cannot state."""
    def width(name: str, default: int | None) -> int | None:
        return keys.get(name, convert=positive).count or default

    q_lora = width("q_lora_rank", None)
    out = {"model_type": "deepseek_v3", "architectures": ["DeepseekV3ForCausalLM"], "q_lora_rank": q_lora,
           "kv_lora_rank": width("kv_lora_rank", 32), "qk_nope_head_dim": width("qk_head_dim", 128),
           "qk_rope_head_dim": width("qk_pos_emb_head_dim", 64), "v_head_dim": width("v_head_dim", 128),
           "n_routed_experts": None, "first_k_dense_replace": layers}
    words = (f"multi-latent attention (q latent {q_lora or 'none'}, kv latent {out['kv_lora_rank']}, heads "
             f"{out['qk_nope_head_dim']} + {out['qk_rope_head_dim']} rope, values {out['v_head_dim']})")
    experts = keys.get("num_experts", convert=positive).count
    if not swiglu:
        out["gated_linear_unit"] = False        # plain GELU MLPs and experts (architectures.gated_linear_unit)
    if not experts:
        return out, f"{words}, FFN {ffn}{' SwiGLU' if swiglu else ''}"
    moe, moe_words = _moe(keys, layers, ffn, swiglu)
    if moe is None:
        return None, moe_words
    pattern = [0 if i in moe["mlp_only_layers"] else 1 for i in range(layers)]
    first = pattern.index(1) if 1 in pattern else layers
    every = next((n for n in range(1, layers + 1)
                  if pattern == [1 if i >= first and i % n == 0 else 0 for i in range(layers)]), None)
    shared = moe.get("shared_expert_intermediate_size", 0)
    if every is None or shared % moe["moe_intermediate_size"]:
        why = ("its MoE layers are not the first dense ones then every n-th" if every is None else
               f"shared experts of width {shared} are not whole experts of {moe['moe_intermediate_size']}")
        return None, f"{words} with {experts} experts: {why}, as DeepSeek's layers are"
    out.update(n_routed_experts=experts, num_experts_per_tok=moe["num_experts_per_tok"],
               moe_intermediate_size=moe["moe_intermediate_size"], first_k_dense_replace=first,
               moe_layer_freq=every, n_shared_experts=shared // moe["moe_intermediate_size"])
    return out, f"{words}, {moe_words}"


def _features(keys: Keys, layout: Layout) -> tuple[Feature, ...]:
    """What the job turns on that the runtime does not price, said beside the estimate (VL210)."""
    out = []
    fp8 = keys.get("fp8_format", "fp8", default=None)
    if fp8.value:
        out.append(Feature(fp8, "fp8 (Transformer Engine): estimated as bf16 training; its fp8 weight copies, "
                                "transposes and scaling state"))
    for name, what in (("use_precision_aware_optimizer", "the precision-aware optimizer's state dtypes: estimated as "
                                                         "fp32 Adam states"),
                       ("tp_comm_overlap", "TP communication overlap's userbuffers are not counted")):
        if truthy(keys.raw(name)):
            out.append(Feature(keys.fact(name, True), what, "low"))
    optimizer = keys.get("optimizer", default="adam")
    if optimizer.value not in ("adam", "sgd"):
        one_state = optimizer.value in ("muon", "dist_muon", "adaptive_muon", "lion")     # one momentum a parameter
        out.append(Feature(optimizer, f"--optimizer {optimizer.value}: its states priced as Adam's two fp32 moments",
                           "high" if one_state else "low"))
    forced = truthy(keys.raw("moe_router_force_load_balancing"))    # random logits, balanced by design (TC:812)
    if layout.num_experts.count and layout.capacity.value is None and not forced:
        out.append(Feature(layout.num_experts, "dropless MoE routing (no expert capacity factor): priced at balanced "
                                               "load; a skewed router sends a rank's experts more tokens than their "
                                               "share"))
    if layout.fsdp.value == "optim_grads":          # optim_grads_params is priced (fsdp.py), optim is as priced
        out.append(Feature(layout.fsdp, "Megatron FSDP (optim_grads): its sharded gradients are priced as the "
                                        "distributed optimizer's whole ones", "high"))
    if truthy(keys.raw("use_torch_fsdp2")):
        out.append(Feature(keys.fact("use_torch_fsdp2", True), "PyTorch FSDP2 (--use-torch-fsdp2): its sharded "
                           "parameters and gradients are priced as the distributed optimizer's whole ones", "high"))
    offloaded = keys.get("cpu_offloading_num_layers", default=0, convert=positive)
    if isinstance(offloaded.value, int) and offloaded.value > 0:
        out.append(Feature(offloaded, "activation CPU offloading: estimated on the GPU", "high"))
    return tuple(out)


def read_megatron(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    layout = read_layout(keys)
    tp = layout.tensor.count or 1
    config, words, way_on = model_config(keys, tp)
    where = layout.hybrid if layout.hybrid.value is not None else keys.get("num_layers")
    bf16, fp16 = truthy(keys.raw("bf16")), truthy(keys.raw("fp16"))
    precision = keys.fact("bf16", "bf16") if bf16 else keys.fact("fp16", "fp16") if fp16 else \
        Fact("no", None, f"{VERSION}: fp32 parameters without --bf16 / --fp16 (A:1171-1183)")
    optimizer = keys.get("optimizer", default="adam", why=f"{VERSION}: adam (A:2776)")
    granularity = layout.granularity
    return Recipe(
        document=document, framework="megatron", title="Megatron-LM", task=TRAIN,
        stage=Fact("pt", None, "Megatron-LM pretrains"),
        model=Fact(words if config is not None else f"Megatron {'hybrid' if layout.hybrid.value else 'GPT'} ({words})",
                   where.location or
                   document.locate("$"), where.default),
        revision=Fact("main"), micro_batch=layout.micro_batch,
        grad_accum=Fact(1, None, "--global-batch-size's (layouts/megatron.py)"),
        seq_len=keys.get("seq_length", "encoder_seq_length", default=None, convert=positive,
                         why=f"{VERSION}: none (pretrain_gpt.py needs --seq-length)"),
        packing=Fact(True, None, "Megatron's GPT dataset fills every sample to --seq-length"),
        grad_checkpointing=Fact(granularity.value is not None, granularity.location, granularity.default),
        mixed_precision=precision,
        weights_dtype=Fact({"bf16": "bfloat16", "fp16": "float16"}.get(precision.value, "float32"),
                           precision.location, precision.default),
        optimizer=Fact("sgd" if optimizer.value == "sgd" else "adamw", optimizer.location, optimizer.default),
        lora_rank=Fact(0), lora_targets=Fact(("all-linear",)), lora_dropout=Fact(0.0),
        load_in_4bit=Fact(False), load_in_8bit=Fact(False),
        attn=Fact("sdpa", None, f"{VERSION}: Transformer Engine's fused / flash attention (--attention-backend auto)"),
        deepspeed=Fact(None), fsdp=None, tensor_parallel=layout.tensor, sequence_split=layout.context,
        hf_trainer=False, keys=SPELLING, model_config=config, release=VERSION, layout=Fact(layout),
        features=_features(keys, layout), model_hint=way_on,
    )


__all__ = ["BOOLEANS", "LISTS", "Layout", "PROGRAMS", "looks_like_megatron", "read_megatron"]
