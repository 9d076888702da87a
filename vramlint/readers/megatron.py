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

from dataclasses import dataclass
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import TRAIN, Feature, Keys, Recipe, positive, truthy

VERSION = "Megatron-LM core_v0.19.0"
# The training scripts whose arguments this reader reads (Megatron-LM's GPT pretraining entry point,
# which its Llama, Mixtral and GPT-3 examples launch).
PROGRAMS = ("pretrain_gpt.py",)
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
    "no_pad_vocab_size", "log_device_memory_used", "record_memory_history"})
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

    tensor: Fact
    pipeline: Fact
    context: Fact
    expert: Fact
    virtual_layers: Fact           # --num-layers-per-virtual-pipeline-stage
    virtual_stages: Fact           # --num-virtual-stages-per-pipeline-rank
    first_layers: Fact             # --decoder-first-pipeline-num-layers
    last_layers: Fact              # --decoder-last-pipeline-num-layers
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


def looks_like_megatron(data: Any) -> bool:
    """A Megatron argument mapping: the model stated by its layer count, width and heads beside a
    Megatron parallel size (no other format spells ``tensor_model_parallel_size`` with ``num_layers``).
    Launch lines reach the reader by their program (``pretrain_gpt.py``), not by this test."""
    return isinstance(data, dict) and {"num_layers", "hidden_size", "num_attention_heads"} <= set(data) and \
        any(k in data for k in ("tensor_model_parallel_size", "micro_batch_size", "pipeline_model_parallel_size"))


def _flag(keys: Keys, *names: str) -> Fact:
    return keys.get(*names, default=False, convert=truthy, why=f"{VERSION}: off (store_true)")


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


def _grad_bytes(keys: Keys) -> Fact:
    """The DDP gradient buffer's element: fp32 under --bf16 unless --grad-reduce-in-bf16 (A:1181-1194),
    the parameters' own dtype otherwise (fp16 gets no fp32 accumulation unless asked)."""
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
    the values are multiplied by (2 B): Korthikanti et al.'s 5as per token; --use-flash-attn (legacy
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
    return Fact(5 if masked else 4, where.location, where.default)


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
        sequence_parallel=_flag(keys, "sequence_parallel"),
        distributed_optimizer=_flag(keys, "use_distributed_optimizer"),
        granularity=granularity, method=method, recompute_layers=layers,
        modules=keys.get("recompute_modules", default=("core_attn",),
                         convert=lambda v: tuple(str(v).split()) if not isinstance(v, (list, tuple)) else tuple(v),
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
    )


def _count(fact: Fact) -> int | None:
    value = fact.value
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _vocabulary(keys: Keys, tp: int) -> tuple[int | None, str]:
    """The padded vocabulary (``vocab_size_with_padding``: a multiple of 128 x TP, build_tokenizer.py:124-137),
    and what states it; None where only the tokenizer's file knows it."""
    stated = _count(keys.get("vocab_size", convert=positive))
    merges = keys.raw("merge_file") or "merge_file" in keys.document.unknown     # stated, its path the run's
    tokenizer = str(keys.raw("tokenizer_type") or ("GPT2BPETokenizer" if merges else ""))
    if stated is None:
        stated = TOKENIZER_VOCAB.get(tokenizer)
    if stated is None:
        return None, (f"the vocabulary is {tokenizer or 'the tokenizer'}'s, known only from its files: "
                      "give --vocab-size")
    if truthy(keys.raw("no_pad_vocab_size")):
        return stated, f"{stated:,}, unpadded"
    multiple = (_count(keys.get("make_vocab_size_divisible_by", convert=positive)) or 128) * tp
    padded = -(-stated // multiple) * multiple
    return padded, f"{stated:,} padded to {padded:,} (a multiple of {multiple}: vocab_size_with_padding)"


def _ffn(keys: Keys, hidden: int, swiglu: bool) -> int:
    """--ffn-hidden-size, else 4h, or with --swiglu int(8h/3/64)*64 (A:1280-1289)."""
    stated = _count(keys.get("ffn_hidden_size", convert=positive))
    if stated:
        return stated
    return int((4 * hidden * 2 / 3) / 64) * 64 if swiglu else 4 * hidden


def model_config(keys: Keys, tp: int) -> tuple[dict | None, str]:
    """The model the arguments state, as the Hugging Face config of the same shapes (llama for
    SwiGLU, starcoder2 for a plain GELU MLP with grouped or rotary attention, gpt2 for Megatron's
    GPT-3 layout with learned positions), and its description; None and why where a shape is missing."""
    shape = {name: _count(keys.get(name, convert=positive)) for name in ("num_layers", "hidden_size",
                                                                          "num_attention_heads")}
    missing = [f"--{name.replace('_', '-')}" for name, value in shape.items() if value is None]
    if missing:
        return None, f"the model's {', '.join(missing)} not stated"
    layers, hidden, heads = shape["num_layers"], shape["hidden_size"], shape["num_attention_heads"]
    experts = _count(keys.get("num_experts", convert=positive))
    if experts:                  # the MoE layer, its router and token dispatcher are not modelled yet
        return None, (f"{experts} experts (--num-experts): Megatron's MoE layers (expert parallel, the "
                      "token dispatcher's buffers) are not priced yet")
    vocab, vocab_words = _vocabulary(keys, tp)
    if vocab is None:
        return None, vocab_words
    swiglu = truthy(keys.raw("swiglu"))
    ffn = _ffn(keys, hidden, swiglu)
    grouped = truthy(keys.raw("group_query_attention"))
    groups = (_count(keys.get("num_query_groups", convert=positive)) or 1) if grouped else \
        (_count(keys.get("num_key_value_heads", convert=positive)) or heads)
    head_dim = _count(keys.get("kv_channels", convert=positive)) or hidden // heads
    tied = not truthy(keys.raw("untie_embeddings_and_output_weights"))
    bias = not truthy(keys.raw("disable_bias_linear"))
    rope = str(keys.raw("position_embedding_type") or "learned_absolute") in ("rope", "yarn", "mrope") or \
        truthy(keys.raw("use_rotary_position_embeddings"))
    positions = _count(keys.get("max_position_embeddings", convert=positive)) or \
        _count(keys.get("seq_length", convert=positive)) or 2048
    common = {"vocab_size": vocab, "tie_word_embeddings": tied, "torch_dtype": "bfloat16"}
    if swiglu:
        config = {**common, "model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": hidden,
                  "num_hidden_layers": layers, "num_attention_heads": heads, "num_key_value_heads": groups,
                  "head_dim": head_dim, "intermediate_size": ffn, "hidden_act": "silu", "attention_bias": bias,
                  "mlp_bias": bias, "max_position_embeddings": positions}
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
             if groups != heads else "") + f", FFN {ffn}{' SwiGLU' if swiglu else ''}, vocabulary {vocab_words}"
             + ("" if tied else ", untied output layer"))
    return config, words


def _features(keys: Keys, layout: Layout) -> tuple[Feature, ...]:
    """What the job turns on that the runtime does not price, said beside the estimate (VL210)."""
    out = []
    fp8 = keys.get("fp8_format", "fp8", default=None)
    if fp8.value:
        out.append(Feature(fp8, "fp8 (Transformer Engine): estimated as bf16 training; its fp8 weight copies, "
                                "transposes and scaling state"))
    for name, what in (("use_precision_aware_optimizer", "the precision-aware optimizer's state dtypes: estimated as "
                                                         "fp32 Adam states"),
                       ("optimizer_cpu_offload", "optimizer CPU offload: estimated on the GPU"),
                       ("tp_comm_overlap", "TP communication overlap's userbuffers are not counted")):
        if truthy(keys.raw(name)):
            out.append(Feature(keys.fact(name, True), what, "high" if name == "optimizer_cpu_offload" else "low"))
    optimizer = keys.get("optimizer", default="adam")
    if optimizer.value not in ("adam", "sgd"):
        one_state = optimizer.value in ("muon", "dist_muon", "adaptive_muon", "lion")     # one momentum a parameter
        out.append(Feature(optimizer, f"--optimizer {optimizer.value}: its states priced as Adam's two fp32 moments",
                           "high" if one_state else "low"))
    offloaded = keys.get("cpu_offloading_num_layers", default=0, convert=positive)
    if isinstance(offloaded.value, int) and offloaded.value > 0:
        out.append(Feature(offloaded, "activation CPU offloading: estimated on the GPU", "high"))
    return tuple(out)


def read_megatron(document: Document) -> Recipe:
    keys = Keys(document, f"{VERSION} default")
    layout = read_layout(keys)
    tp = _count(layout.tensor) or 1
    config, words = model_config(keys, tp)
    where = keys.get("num_layers")
    bf16, fp16 = truthy(keys.raw("bf16")), truthy(keys.raw("fp16"))
    precision = keys.fact("bf16", "bf16") if bf16 else keys.fact("fp16", "fp16") if fp16 else \
        Fact("no", None, f"{VERSION}: fp32 parameters without --bf16 / --fp16 (A:1171-1183)")
    optimizer = keys.get("optimizer", default="adam", why=f"{VERSION}: adam (A:2776)")
    granularity = layout.granularity
    return Recipe(
        document=document, framework="megatron", title="Megatron-LM", task=TRAIN,
        stage=Fact("pt", None, "Megatron-LM pretrains"),
        model=Fact(words if config is not None else f"Megatron GPT ({words})", where.location or
                   document.locate("$"), where.default),
        revision=Fact("main"), micro_batch=layout.micro_batch,
        grad_accum=Fact(1, None, "--global-batch-size's (layouts/megatron.py)"),
        seq_len=keys.get("seq_length", "encoder_seq_length", default=None, convert=positive,
                         why=f"{VERSION}: none (pretrain_gpt.py needs --seq-length)"),
        packing=Fact(True, None, "Megatron's GPT dataset fills every sample to --seq-length"),
        grad_checkpointing=Fact(granularity.value is not None, granularity.location, granularity.default),
        mixed_precision=Fact(precision.value, precision.location, precision.default),
        weights_dtype=Fact({"bf16": "bfloat16", "fp16": "float16"}.get(precision.value, "float32"),
                           precision.location, precision.default),
        optimizer=Fact("sgd" if optimizer.value == "sgd" else "adamw", optimizer.location, optimizer.default),
        lora_rank=Fact(0), lora_targets=Fact(("all-linear",)), lora_dropout=Fact(0.0),
        load_in_4bit=Fact(False), load_in_8bit=Fact(False),
        attn=Fact("sdpa", None, f"{VERSION}: Transformer Engine's fused / flash attention (--attention-backend auto)"),
        deepspeed=Fact(None), fsdp=None, tensor_parallel=layout.tensor, sequence_split=layout.context,
        hf_trainer=False, keys=SPELLING, model_config=config, release=VERSION, layout=Fact(layout),
        features=_features(keys, layout),
    )


__all__ = ["BOOLEANS", "Layout", "PROGRAMS", "looks_like_megatron", "read_megatron"]
