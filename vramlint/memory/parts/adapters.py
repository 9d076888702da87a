"""What trains and what a quantized base holds, the same under every runtime: the LoRA adapters
PEFT puts on each linear (``lora_targets``, ``lora_params``, ``trainable``; a vision tower's too,
``tower_adapters``), their bytes (``adapter_bytes``), and the frozen base bitsandbytes quantizes
(``base_quantization``: NF4 or LLM.int8; its ``quant_states``)."""

from __future__ import annotations

from dataclasses import replace

from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.models.quantization import four_bit, int8
from vramlint.models.shape import Layer, ModelShape, Quantization
from vramlint.plan import Plan

FUSED = {"qkv": {"q", "k", "v"}, "gate_up": {"gate", "up"}}
LATENT = {"q_a", "q_b", "kv_a_proj_with_mqa", "kv_b", "in_proj_qkvz", "in_proj_ba", "out"}   # MLA, Gated DeltaNet
SHORT_TARGETS = {"q", "k", "v", "o", "gate", "up", "down"}     # --lora-targets q,k,v,o: the *_proj linears
PER_LAYER = {"per_layer_input_gate", "per_layer_projection", "per_layer_model_projection"}    # gemma4's PLE
MLP_NAMES = {"gate", "up", "down", "gate_up"}


def lora_targets(targets: tuple[str, ...], model: ModelShape | None = None) -> set[str]:
    """PEFT ``target_modules`` as the short names of ``Layer.linears``; "all-linear" is every
    linear of the decoder (and, through PEFT's MoE conversion, the router). A fused projection
    counts as targeted when any of its parts is; a shared expert's linears answer to the same leaf
    names as dense ones. Where PEFT converts the targets onto transformers 5's fused experts
    (``model.peft_converted``), the MLP names go to the routed experts — gate and up to the fused
    gate_up, down to down — and no dense or shared MLP linear keeps an adapter (PEFT 0.21)."""
    if "all-linear" in targets:
        names = {"q", "k", "v", "o", "gate", "up", "down", "router", "shared_expert_gate", *FUSED, *LATENT, *PER_LAYER}
        if model is not None:      # a shape read from the module tree names its own linears
            names |= model.linear_names
    else:
        names = {t.removesuffix("_proj") for t in targets}
        names |= {fused for fused, parts in FUSED.items() if names & parts}
    names |= {f"shared_{n}" for n in names & MLP_NAMES}
    if model is None or not model.peft_converted:
        return names
    experts = {"experts_gate_up"} if names & {"gate", "up"} else set()
    experts |= {"experts_down"} if "down" in names else set()
    return names - MLP_NAMES - {f"shared_{n}" for n in MLP_NAMES} | experts


def lora_params(model: ModelShape, rank: int, targets: tuple[str, ...] = ("all-linear",), dora: bool = False) -> int:
    """Trainable LoRA parameters: r x (d_in + d_out) per adapted matrix (PEFT), lm_head excluded;
    DoRA adds a magnitude vector of d_out per adapted matrix."""
    return (sum(size for layer in model.layers for _, size in _adapters(layer, model, rank, targets, dora))
            + sum(size for _, size in _model_adapters(model, rank, targets)))


def trainable(plan: Plan) -> int:
    return (lora_params(plan.model, plan.lora_rank, plan.lora_targets, plan.dora) if plan.lora_rank
            else plan.model.params)


ADAPTER_GROUPS = {"router": "router", "shared_expert_gate": "router", "experts_gate_up": "experts",
                  "experts_down": "experts"}


def _adapters(layer: Layer, model: ModelShape, rank: int, targets: tuple[str, ...],
              dora: bool = False) -> list[tuple[str, int]]:
    """One layer's adapter tensors in module order, as (parameter group, elements): lora_A
    (r x d_in) and lora_B (d_out x r) of every targeted linear, each copy of a fused expert's
    folded into one, and under DoRA its magnitude vector (d_out; peft 0.21.2 tuners/lora/dora.py:
    101-130); the group says which sublayer's backward produces the gradient."""
    wanted = lora_targets(targets, model)
    out = []
    for name, (d_in, d_out, copies) in layer.linears(model.hidden_size, model.block).items():
        if name in wanted:
            group = ADAPTER_GROUPS.get(name, "mlp" if name in MLP_NAMES or name.startswith("shared_") else "attention")
            out += [(group, rank * copies * d_in), (group, rank * copies * d_out)]
            out += [(group, copies * d_out)] if dora else []
    return out


def _model_adapters(model: ModelShape, rank: int, targets: tuple[str, ...]) -> list[tuple[str, int]]:
    """Adapters on model-level linears (gemma4's per_layer_model_projection, registered after the
    layers)."""
    wanted = lora_targets(targets, model)
    return [("embedding", rank * d) for name, d_in, d_out in model.model_linears if name in wanted
            for d in (d_in, d_out)]


def lora_tensors(layer: Layer, plan: Plan) -> list[tuple[str, int]]:
    """The plan's adapter tensors of one layer (``_adapters``)."""
    return _adapters(layer, plan.model, plan.lora_rank, plan.lora_targets, plan.dora)


def trainable_tensors(plan: Plan) -> list[int]:
    """The sizes of the tensors the optimizer holds, in parameter order: every parameter, or with
    LoRA the adapters alone (what HF Trainer hands the optimizer: parameters that need grads)."""
    if not plan.lora_rank:
        return list(plan.model.tensor_sizes)
    model = plan.model
    return ([size for layer in model.layers for _, size in lora_tensors(layer, plan)]
            + [size for _, size in _model_adapters(model, plan.lora_rank, plan.lora_targets)])


def adapter_bytes(plan: Plan) -> int:
    """Bytes of a LoRA adapter element, its gradient and each Adam moment: ``Plan.adapter_dtype``.
    PEFT's ``get_peft_model`` creates the adapters in the base layer's dtype and, by default
    (``autocast_adapter_dtype=True``), upcasts 16-bit ones to fp32 (peft 0.21.2
    tuners/tuners_utils.py ``cast_adapter_dtype``): the HF Trainer, TRL, axolotl and LLaMA-Factory
    keep fp32 adapters; torchtune builds its model, adapters included, in the recipe's dtype."""
    return DTYPE_BYTES[plan.adapter_dtype]


def trained_bytes(plan: Plan) -> int:
    """Bytes of a trained element under plain PyTorch: the adapters', or the weights' own."""
    return adapter_bytes(plan) if plan.lora_rank else DTYPE_BYTES[plan.weights_dtype or "bfloat16"]


def base_quantization(plan: Plan) -> Quantization | None:
    """What bitsandbytes makes of the frozen base's linears in training: NF4 (QLoRA) or LLM.int8 —
    on the routed experts too where transformers keeps them as one nn.Linear each (before 5.0;
    ``Plan.quantized_experts``), not on 5.x's fused 3-D expert parameters."""
    quant = four_bit(plan.bnb_4bit) if plan.load_in_4bit else int8() if plan.load_in_8bit else None
    if quant is not None and plan.quantized_experts:
        quant = replace(quant, groups=quant.groups | {"experts"})
    return quant


def nf4_groups(plan: Plan) -> frozenset[str]:
    quant = base_quantization(plan)
    return quant.groups if quant is not None and plan.load_in_4bit else frozenset()


def quant_states(plan: Plan) -> int:
    """bitsandbytes' ``QuantState`` of every 4-bit linear (absmax per 64 values, double-quantized:
    a byte each and an fp32 per 256 of them): not a parameter, so neither FSDP nor ZeRO-3
    partitions it — whole on every rank."""
    quantized = sum(getattr(plan.model.layer_params, g) for g in nf4_groups(plan))
    return int(quantized * (four_bit(plan.bnb_4bit).bits - 4) / 8)


def peft_target(target: str) -> str:
    """A ``--lora-targets`` entry as the module name PEFT matches: the short forms (q, ..., down)
    stand for the decoder's ``*_proj``."""
    return f"{target}_proj" if target in SHORT_TARGETS else target


def tower_adapters(model: ModelShape, rank: int, targets: tuple[str, ...]) -> int:
    """Elements of the LoRA adapters PEFT puts on a vision tower's linears: "all-linear" reaches
    every nn.Linear but lm_head, the tower's included; a target list reaches each module whose
    name ends in one of its entries (PEFT ``check_target_module_exists``). Checked against
    get_peft_model for every tower (tests/data/lora_counts.json)."""
    if not rank or model.vision is None:
        return 0
    names = {peft_target(t) for t in targets}
    return sum(rank * copies * (d_in + d_out) for name, d_in, d_out, copies in model.vision.linears
               if "all-linear" in targets or any(name == n or name.endswith(f".{n}") for n in names))


def refused_targets(plan: Plan) -> list[str]:
    """Target names that reach a module wrapping an nn.Linear in the vision tower (Gemma 4's
    ``Gemma4ClippableLinear``), which PEFT 0.21 refuses: "Target module ... is not supported"."""
    tower = plan.model.vision
    if not plan.lora_rank or tower is None or "all-linear" in plan.lora_targets:
        return []
    return sorted({peft_target(t) for t in plan.lora_targets} & tower.wrapped)


def quantized_bytes(plan: Plan, group: str, size: int) -> int | None:
    """Bytes one frozen base tensor of ``group`` takes where bitsandbytes quantizes it: half a byte
    a 4-bit value, a byte an int8 one; None where it keeps its own dtype."""
    quant = base_quantization(plan)
    if quant is not None and group in quant.groups:
        return -(-size * (4 if plan.load_in_4bit else 8) // 8)
    return None
