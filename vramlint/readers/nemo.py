"""NeMo 1.x Megatron GPT jobs → the Megatron-LM :class:`Recipe` of the same arguments, with NeMo's
own optimizer states (docs/recipes.md, "NeMo 1.x").

A NeMo 1.x job is ``megatron_gpt_pretraining.py`` (or the launcher's ``conf/training/*.yaml``) over
a YAML of ``trainer`` (devices, num_nodes, precision) and ``model`` (Megatron's shapes and parallel
sizes under their MCore names, ``optim``, ``tokenizer``, ``data``). With ``mcore_gpt`` it builds
Megatron-core's GPT model and runs Megatron-core's pipeline schedules, so the job is Megatron's job
spelled in another place: this reader lays each key onto the Megatron-LM argument it is
(``ARGUMENTS``), each still located where the YAML writes it, and reads that mapping with
readers/megatron.py. What NeMo keeps that Megatron-LM does not is its optimizer and precision
wrapping (read at NeMo v2.4.0, 2381f42, the last release with these collections; Apex 810ffae and
MCore 0.13 as it pins them; NM = NeMo's tree):

- ``megatron_amp_O2`` true: 16-bit parameters. ``optim.name`` fused_adam wraps Apex's FusedAdam in
  ``MainParamsOptimizerWrapper``: fp32 main copies and an fp32 gradient buffer, whole (18 B a
  parameter, Megatron's own non-distributed layout: NM megatron_base_model.py:867-914);
  ``mcore_distributed_optim`` is Megatron-core's distributed optimizer (6 + 12/d, gradients
  reduced in fp32 unless ``optim.grad_sync_dtype`` says bf16: NM megatron_gpt_model.py:596-630);
  ``distributed_fused_adam`` is Apex's DistributedFusedAdam, which NeMo gives int16 remainders
  of the bf16 parameters for main copies (``store_param_remainders``) and an fp32 gradient buffer
  (``grad_sync_dtype`` defaults to its fp32 ``dtype``): 6 + 10/d, and the reduce-scattered shard
  apart at the step (NM megatron_base_model.py:826-856; memory/runtimes/megatron/states.py).
- ``megatron_amp_O2`` false: fp32 parameters under autocast (``params_dtype`` fp32, NM
  megatron_base_model.py:128-135), gradients fp32 in torch DDP's buckets (a second copy without
  ``gradient_as_bucket_view``), and each forward's 16-bit weight copies.
- ``trainer.precision`` (``model.precision`` first) as NeMo parses it (NM parts/utils_funcs.py:43-55).
- the vocabulary is the tokenizer's (GPT-2's BPE for library megatron; a Hub model's for library
  huggingface, where vramlint knows that model) padded to a multiple of 128 x TP, or
  ``model.override_vocab_size`` as stated.
- OmegaConf interpolations are followed (``${model.encoder_seq_length}``, ``${.x}``); a value only
  the run resolves (``${oc.env:TP,1}``) leaves the job not estimated, named where it is.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from vramlint.documents import Document
from vramlint.readers.deepspeed import Fact
from vramlint.readers.megatron import TOKENIZER_VOCAB, WAY_ON, Arguments, laid_out, read_megatron, spelled
from vramlint.readers.recipe import Feature, Keys, Recipe, Refusal, truthy

VERSION = "NeMo v2.4.0"

# Megatron-LM argument → the NeMo keys that state it, first set wins
ARGUMENTS: dict[str, tuple[str, ...]] = {
    **{name: (f"model.{name}",) for name in (
        "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
        "expert_model_parallel_size", "expert_tensor_parallel_size", "sequence_parallel", "num_layers",
        "hidden_size", "ffn_hidden_size", "num_attention_heads", "num_query_groups", "kv_channels",
        "position_embedding_type", "make_vocab_size_divisible_by", "hidden_dropout", "attention_dropout",
        "micro_batch_size", "global_batch_size", "moe_router_topk", "moe_token_dispatcher_type",
        "moe_expert_capacity_factor", "moe_aux_loss_coeff", "moe_ffn_hidden_size",
        "moe_shared_expert_intermediate_size", "moe_layer_freq", "qk_layernorm",
        "account_for_embedding_in_pipeline_split", "account_for_loss_in_pipeline_split")},
    "num_virtual_stages_per_pipeline_rank": ("model.virtual_pipeline_model_parallel_size",),
    "decoder_first_pipeline_num_layers": ("model.num_layers_in_first_pipeline_stage",),
    "decoder_last_pipeline_num_layers": ("model.num_layers_in_last_pipeline_stage",),
    "num_experts": ("model.num_moe_experts",),
    "seq_length": ("model.data.seq_length", "model.encoder_seq_length"),
    "max_position_embeddings": ("model.max_position_embeddings", "model.encoder_seq_length"),
    "recompute_granularity": ("model.activations_checkpoint_granularity",),
    "recompute_method": ("model.activations_checkpoint_method",),
    "recompute_num_layers": ("model.activations_checkpoint_num_layers",),
    "vocab_size": ("model.override_vocab_size",),
}
# The Megatron-LM flags NeMo states in keys of its own (``_derived``), for hints
FLAG_KEYS = {"use_distributed_optimizer": "model.optim.name", "swiglu": "model.activation",
             "bf16": "trainer.precision", "fp16": "trainer.precision", "transformer_impl": "model.transformer_engine",
             "vocab_size": "model.override_vocab_size", "optimizer": "model.optim.name"}
SPELLING = {"micro_batch": "model.micro_batch_size", "seq_len": "model.encoder_seq_length",
            "grad_accum": "model.global_batch_size", "grad_checkpointing": "model.activations_checkpoint_granularity",
            "tensor_parallel": "model.tensor_model_parallel_size", "sequence_split": "model.context_parallel_size",
            "optimizer": "model.optim.name", "model": "model.num_layers", "mixed_precision": "trainer.precision",
            "weights_dtype": "model.megatron_amp_O2", "gpus_per_node": "trainer.devices", "nodes": "trainer.num_nodes"}
# trainer.precision as torch_dtype_from_precision parses it (NM parts/utils_funcs.py:43-55)
PRECISIONS = {"bf16": "bf16", "bf16-mixed": "bf16", "16": "fp16", "16-mixed": "fp16", "32": "fp32", "32-true": "fp32"}
DISTRIBUTED = ("distributed_fused_adam", "mcore_distributed_optim")   # with_distributed_adam (base_model.py:151-153)
ADAM = ("fused_adam", "adam", "adamw", "megatron_fused_adam", *DISTRIBUTED)
# activation_to_func's supported_activations (NM parts/utils_funcs.py:182-196)
ACTIVATIONS = ("gelu", "geglu", "reglu", "swiglu", "squared-relu", "fast-geglu", "fast-swiglu", "fast-reglu",
               "approx-gelu")


@dataclass(frozen=True)
class Switches:
    """What decides NeMo's states, read once: ``megatron_amp_O2``, ``optim.name`` and the precision
    (None where NeMo cannot parse it) with the key that states it."""

    o2: bool
    optimizer: str
    dtype: str | None
    where: str


def _switches(keys: Keys) -> Switches:
    dtype, where = _precision(keys)
    return Switches(truthy(keys.raw("model.megatron_amp_O2")), str(keys.raw("model.optim.name") or "fused_adam"),
                    dtype, where)


def looks_like_nemo(data: Any) -> bool:
    """NeMo's megatron_gpt_config.yaml and its kin: ``trainer`` beside ``model.tensor_model_parallel_size``."""
    if not isinstance(data, dict):
        return False
    model = data.get("model")
    return isinstance(model, dict) and "tensor_model_parallel_size" in model and isinstance(data.get("trainer"), dict)


def in_keys(text: str) -> str:
    """A hint written in Megatron-LM's flags with each ``--flag`` NeMo's key for it."""
    return spelled(text, {**{name: paths[0] for name, paths in ARGUMENTS.items()}, **FLAG_KEYS})


# The resolvers NeMo registers (NM core/config/hydra_runner.py:48-51): the rest only the run resolves
RESOLVERS = {"multiply": lambda x, y: x * y, "sum": lambda x, y: x + y}


def _split(text: str) -> list[str]:
    """A resolver's arguments, split at the commas outside nested ``${...}``."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "{") - (ch == "}")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    return parts + [text[start:]]


def _resolve(data: dict) -> tuple[dict, dict[str, str]]:
    """The config with its interpolations followed as OmegaConf resolves them (``${a.b}``, ``${.b}``,
    ``${..b}``, NeMo's ``${multiply:4, ${.hidden_size}}``), and the keys whose value only the run
    resolves (``${oc.env:TP,1}``, a node the file lacks), each with its text."""
    unresolved: dict[str, str] = {}

    def node(path: str) -> Any:
        value: Any = data
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return value

    def literal(text: str) -> Any:
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return None

    def value_at(where: str, text: str, depth: int) -> Any:
        text = text.strip()
        if not (text.startswith("${") and text.endswith("}")) or depth > 8:
            return literal(text) if depth else (text if "${" not in text else None)
        inner = text[2:-1].strip()
        name, colon, rest = inner.partition(":")
        if colon:                       # a resolver: NeMo's own over values that resolve, else the run's
            args = [value_at(where, arg, depth + 1) for arg in _split(rest)]
            if name.strip() not in RESOLVERS or len(args) != 2 or any(not isinstance(a, (int, float)) for a in args):
                return None
            return RESOLVERS[name.strip()](*args)
        target = inner
        if target.startswith("."):
            dots = len(target) - len(target.lstrip("."))
            target = ".".join(where.split(".")[:-dots] + [target.lstrip(".")])
        found = node(target)
        return value_at(target, found, depth + 1) if isinstance(found, str) and "${" in found else found

    def walk(value: Any, where: str) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, f"{where}.{k}" if where else str(k)) for k, v in value.items()}
        if value == "???":                     # OmegaConf's MISSING: the run's command line must give it
            unresolved[where] = value
            return None
        if isinstance(value, str) and "${" in value:
            out = value_at(where, value, 0)
            if out is None:
                unresolved[where] = value
            return out
        return value
    return walk(data, ""), unresolved


def _vocabulary(keys: Keys) -> tuple[dict[str, tuple[Any, str]], str]:
    """The tokenizer's vocabulary as Megatron arguments (NM megatron_base_model.py:442-469, 623-645),
    or why it is not known from the file."""
    if keys.raw("model.override_vocab_size") is not None:
        return {"no_pad_vocab_size": (True, "model.override_vocab_size")}, ""
    library = str(keys.raw("model.tokenizer.library") or "")
    kind = str(keys.raw("model.tokenizer.type") or "")
    if not library:                 # NeMo reads cfg.tokenizer.library: no tokenizer, no model
        return {}, "no model.tokenizer.library: the vocabulary is not stated"
    if library == "megatron" and kind in TOKENIZER_VOCAB:          # the Megatron reader's own table
        return {"tokenizer_type": (kind, "model.tokenizer.type")}, ""
    if library == "huggingface" and kind:
        from vramlint.models.catalog import find
        shape = find(kind)
        if shape is not None:
            return {"vocab_size": (shape.vocab_size, "model.tokenizer.type")}, ""
    named = kind or keys.raw("model.tokenizer.model")
    return {}, f"the vocabulary is the {library} tokenizer{f' {named}' if named else ''}'s, known only from its files"


def _precision(keys: Keys) -> tuple[str | None, str]:
    path = "model.precision" if keys.raw("model.precision") is not None else "trainer.precision"
    written = keys.raw(path)
    return PRECISIONS.get(str(written if written is not None else "32-true")), path


def _derived(keys: Keys) -> dict[str, tuple[Any, str]]:
    """The Megatron flags NeMo states in other words: value and the key that says it."""
    out: dict[str, tuple[Any, str]] = {}
    model = keys.raw("model")
    switches = _switches(keys)
    dtype, o2, name = switches.dtype, switches.o2, switches.optimizer
    if dtype in ("bf16", "fp16"):
        out[dtype] = (True, switches.where)
    if name in DISTRIBUTED:
        out["use_distributed_optimizer"] = (True, "model.optim.name")
    out["optimizer"] = ("adam" if name in ADAM else name, "model.optim.name")
    sync = str(keys.raw("model.optim.grad_sync_dtype") or "fp32")
    if dtype == "bf16" and o2 and name in DISTRIBUTED and sync in ("bf16", "bfloat16"):
        out["grad_reduce_in_bf16"] = (True, "model.optim.grad_sync_dtype")
    else:                  # fp32 parameters, FusedAdam's fp32_grad_accum, or the optimizers' fp32 grad_sync_dtype
        out["accumulate_allreduce_grads_in_fp32"] = (True, "model.optim.name" if o2 else "model.megatron_amp_O2")
    if str(model.get("activation", "gelu")).endswith("glu"):       # gated_linear_unit (base_model.py:513-516)
        out["swiglu"] = (True, "model.activation")
    if model.get("num_query_groups") not in (None, model.get("num_attention_heads")):
        out["group_query_attention"] = (True, "model.num_query_groups")
    if not truthy(model.get("share_embeddings_and_output_weights", True)):
        out["untie_embeddings_and_output_weights"] = (True, "model.share_embeddings_and_output_weights")
    if not truthy(model.get("bias", True)):
        out["disable_bias_linear"] = (True, "model.bias")
    if truthy(model.get("qkv_bias", False)):
        out["add_qkv_bias"] = (True, "model.qkv_bias")
    if not truthy(model.get("transformer_engine", False)):
        out["transformer_impl"] = ("local", "model.transformer_engine")
        if not truthy(model.get("mcore_gpt", False)) and truthy(model.get("use_flash_attention", False)):
            out["use_flash_attn"] = (True, "model.use_flash_attention")
    if truthy(model.get("fp8", False)):
        out["fp8_format"] = ("e4m3" if truthy(model.get("fp8_e4m3")) else "hybrid", "model.fp8")
    if truthy(model.get("ub_tp_comm_overlap", False)):
        out["tp_comm_overlap"] = (True, "model.ub_tp_comm_overlap")
    if truthy(model.get("cpu_offloading", False)):
        layers = keys.get("model.cpu_offloading_num_layers").count or \
            max(1, (keys.get("model.num_layers").count or 2) - 1)        # num_layers - 1 (yaml:250)
        out["cpu_offloading_num_layers"] = (layers, "model.cpu_offloading")
    vocabulary, _ = _vocabulary(keys)
    out.update(vocabulary)
    return out


def arguments(document: Document) -> Arguments:
    """The NeMo config (its interpolations resolved) as the Megatron-LM argument mapping it is, each
    located at its key."""
    keys = Keys(document, f"{VERSION} default")
    args = laid_out(document, keys, ARGUMENTS, _derived(keys))
    values = args.data
    if values.get("num_virtual_stages_per_pipeline_rank") == 1:     # VPP 1 is none (base_model.py:1058-1060)
        del values["num_virtual_stages_per_pipeline_rank"]
    if "recompute_granularity" not in values:       # method and layers are read only beside a granularity
        for name in ("recompute_method", "recompute_num_layers"):
            values.pop(name, None)
    return args


def _refusals(keys: Keys, switches: Switches) -> tuple[Refusal, ...]:
    """NeMo's own start-up checks, verbatim (NM megatron_gpt_model.py:361-388, megatron_base_model.py:
    874-881, parts/utils_funcs.py:55); Megatron's layout checks are layouts/megatron.py's."""
    model = keys.raw("model")
    o2, name, dtype, where = switches.o2, switches.optimizer, switches.dtype, switches.where
    vpp, ep = model.get("virtual_pipeline_model_parallel_size"), model.get("expert_model_parallel_size") or 1
    out = []
    if dtype is None:
        out.append(Refusal("always", where, f"Could not parse the precision of `{keys.raw(where)}` to a valid "
                                            "torch.dtype"))
    activation = model.get("activation", "gelu")
    if activation not in ACTIVATIONS:
        out.append(Refusal("always", "model.activation", f"Unsupported activation {activation}. Supported "
                                                         f"activations: {list(ACTIVATIONS)} "))
    if not o2 and vpp:
        out.append(Refusal("always", "model.virtual_pipeline_model_parallel_size",
                           "Virtual pipeline model parallel is only supported when using megatron_amp_O2"))
    if isinstance(ep, int) and ep > 1 and not o2:
        out.append(Refusal("always", "model.expert_model_parallel_size",
                           "Expert parallelism is only supported when using megatron_amp_O2"))
    if isinstance(ep, int) and ep > 1 and name == "distributed_fused_adam":
        out.append(Refusal("always", "model.optim.name", "Expert parallelism is currently not supporting Apex "
                                                         "distributed optimizer,use Mcore distributed optimizer instead"))
    if o2 and dtype == "fp16" and name not in DISTRIBUTED:
        out.append(Refusal("always", "model.megatron_amp_O2", "fp16 training is not yet supported with O2.Please set "
                                                              "megatron_amp_O2 to False in the model config."))
    if truthy(keys.raw("model.optim.overlap_param_sync")) and not truthy(keys.raw("model.optim.overlap_grad_sync")):
        out.append(Refusal("always", "model.optim.overlap_param_sync",
                           "Must use overlap_param_sync together with overlap_grad_sync"))
    return tuple(out)


def _layout(recipe: Recipe, keys: Keys, args: Arguments, switches: Switches) -> Fact:
    """Megatron's layout with NeMo's states: Apex's distributed Adam, torch DDP's buckets and the
    autocast copies of fp32 weights (memory/runtimes/megatron)."""
    model = keys.raw("model")
    o2, name = switches.o2, switches.optimizer
    where = args.locate("$.optimizer")
    autocast = "none"
    if not o2 and recipe.mixed_precision.value in ("bf16", "fp16"):
        autocast = "saved" if truthy(model.get("transformer_engine", False)) else "cache"
    layout = replace(recipe.layout.value,
                     apex_adam=Fact(name == "distributed_fused_adam", where),
                     bucket_copy=Fact(not o2 and name not in DISTRIBUTED and
                                      not truthy(model.get("gradient_as_bucket_view", True)),
                                      keys.document.locate("$.model.gradient_as_bucket_view")),
                     autocast=Fact(autocast, keys.document.locate("$.model.megatron_amp_O2")))
    return Fact(layout, recipe.layout.location, recipe.layout.default)


def _features(keys: Keys, recipe: Recipe, args: Arguments) -> tuple[Feature, ...]:
    """What NeMo turns on that the Megatron runtime does not price, beside readers/megatron.py's (said
    in NeMo's keys)."""
    out = [replace(feature, what=in_keys(feature.what)) for feature in recipe.features]
    peft = keys.raw("model.peft.peft_scheme")
    if peft and str(peft).lower() != "none":
        out.append(Feature(keys.get("model.peft.peft_scheme"), f"{peft} (model.peft): priced as full training; the "
                           "frozen base keeps no gradients or optimizer states", "high"))
    if not truthy(keys.raw("model.mcore_gpt")):
        out.append(Feature(keys.get("model.mcore_gpt", default=False), "NeMo's legacy GPT modules (mcore_gpt false): "
                           "priced as Megatron-core's local layers", "low"))
    spec = keys.raw("model.name")
    if spec:
        out.append(Feature(keys.get("model.name"), f"the layer spec {spec}: priced as Megatron-core's GPT layer"))
    activation = str(keys.raw("model.activation") or "gelu")
    if activation.endswith("glu") and "swiglu" not in activation:
        out.append(Feature(keys.get("model.activation"), f"gated {activation} MLP: priced as SwiGLU (the same "
                           "tensors)", "low"))
    return tuple(out)


def _not_estimated(recipe: Recipe, keys: Keys, args: Arguments, unresolved: dict[str, str], vocabulary: str) -> dict:
    """A job whose settings only the run resolves, or whose vocabulary only the tokenizer's files
    know: no model stands behind it, named where the file says so."""
    read = {path for paths in ARGUMENTS.values() for path in paths} | {
        "trainer.precision", "trainer.devices", "trainer.num_nodes", "model.precision", "model.megatron_amp_O2",
        "model.optim.name", "model.activation", "model.tokenizer.library", "model.tokenizer.type"}
    path = next((p for p in unresolved if p in read), None)
    checkpoint = args.data.get("num_layers") is None and recipe.model_config is None and \
        (keys.raw("model.restore_from_path") or unresolved.get("model.restore_from_path"))
    if checkpoint and not path:
        named = "which the run's command line gives" if checkpoint == "???" else checkpoint
        return {"model": Fact(f"NeMo Megatron GPT (the model is model.restore_from_path's .nemo checkpoint, "
                              f"{named}: its shapes are in that checkpoint's model_config.yaml)",
                              args.locate("$.model.restore_from_path")),
                "model_hint": "state model.num_layers, model.hidden_size, model.num_attention_heads (and the rest of "
                              "the checkpoint's model_config.yaml) in the file"}
    if path:
        return {"model_config": None, "model_hint": f"state {path} in the file, or check the file the run resolves",
                "model": Fact(f"NeMo Megatron GPT ({path} is {unresolved[path]}: known only when the run resolves it)",
                              args.locate(f"$.{path}"))}
    if vocabulary and recipe.model_config is None and "vocabulary" in str(recipe.model.value):
        return {"model": Fact(f"NeMo Megatron GPT ({vocabulary})", args.locate("$.model.tokenizer")),
                "model_hint": "add model.override_vocab_size with the model's vocabulary (NeMo uses it unpadded)"}
    if recipe.model_config is None:
        return {"model": replace(recipe.model, value=in_keys(str(recipe.model.value)))}
    return {}


# A config of NeMo's Mamba model (megatron_mamba_model.py: its hybrid pattern or ratios, the Mamba
# groups) states layers the GPT config's keys do not: not estimated, never the dense GPT's
MAMBA_KEYS = ("model.hybrid_override_pattern", "model.hybrid_attention_ratio", "model.hybrid_mlp_ratio",
              "model.mamba_ssm_ngroups")


def _mamba(keys: Keys, args: Arguments) -> dict:
    path = next((p for p in MAMBA_KEYS if keys.raw(p) not in (None, "", 0, 0.0, False)), None)
    if path is None:
        return {}
    return {"model_config": None, "model_hint": WAY_ON["unpriced"],
            "model": Fact(f"NeMo Mamba (hybrid) model ({path}): NeMo's megatron_mamba_model.py configs are not read "
                          "yet", args.locate(f"$.{path}"))}


def _gpus(keys: Keys) -> tuple[Fact, Fact] | None:
    """trainer.devices x trainer.num_nodes (Lightning's defaults: 1 node; "auto" / -1: every GPU the
    run sees, the count --gpus gives)."""
    devices = keys.get("trainer.devices", default=None)
    nodes = keys.get("trainer.num_nodes", default=1, why=f"{VERSION}: Lightning's num_nodes 1")
    if devices.count is None or nodes.count is None:
        return None
    return devices, nodes


def _devices_note(keys: Keys) -> tuple[str, ...]:
    devices = keys.raw("trainer.devices")
    if devices is None or keys.get("trainer.devices").count is not None:
        return ()
    return (f"trainer.devices {devices} (Lightning: every GPU the run sees): the GPU count --gpus gives",)


def read_nemo(document: Document) -> Recipe:
    data, unresolved = _resolve(document.data)
    resolved = replace(document, data=data, unknown=document.unknown | frozenset(unresolved))
    keys = Keys(resolved, f"{VERSION} default")
    args = arguments(resolved)
    recipe = read_megatron(args)
    switches = _switches(keys)
    weights = recipe.weights_dtype if switches.o2 or switches.dtype not in ("bf16", "fp16") else Fact(
        "float32", args.locate("$.model.megatron_amp_O2"), f"{VERSION}: fp32 parameters under autocast")
    _, vocabulary = _vocabulary(keys)
    changes = {"model_hint": in_keys(recipe.model_hint), **_not_estimated(recipe, keys, args, unresolved, vocabulary),
               **_mamba(keys, args)}
    return replace(recipe, document=document, title="NeMo", keys=SPELLING, vocabulary="nemo",
                   release=f"{VERSION} (Megatron-core's runtime: {recipe.release})",
                   weights_dtype=weights, layout=_layout(recipe, keys, args, switches), gpus=_gpus(keys),
                   notes=recipe.notes + _devices_note(keys), refusals=_refusals(keys, switches),
                   features=_features(keys, recipe, args), **changes)


__all__ = ["ARGUMENTS", "in_keys", "looks_like_nemo", "read_nemo"]
