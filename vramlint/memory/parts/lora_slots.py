"""vLLM's LoRA slots (``enable_lora``): the buffers every LoRA-able layer allocates while the
model loads, for ``max_loras`` adapters of up to ``max_lora_rank``, whether any adapter is ever
loaded or not — inside "Model loading took", so out of the KV cache's budget.

vLLM 0.19 ``vllm/lora/layers`` (``create_lora_weights``), per GPU, in ``lora_dtype`` (the model's
by default), for every linear of the language model (``get_supported_lora_modules``: all of
them) and its embedding and lm_head:

- column-parallel (q, k, v, gate, up, ...): lora_a max_loras x r x d_in per output slice (qkv
  has three, gate_up two), lora_b max_loras x d_out/TP x r;
- a router (a ReplicatedLinear, whole on every rank) where the layout lists it as a linear
  (``Layer.linears``: the converted MoE families, llama4);
- row-parallel (o, down): lora_a max_loras x r x d_in/TP, lora_b max_loras x d_out x r;
- ``fully_sharded_loras`` splits column-parallel lora_a's r and row-parallel lora_b's d_out over TP;
- routed experts (``FusedMoEWithLoRA``), per local expert: w1 and w3 lora_a r x h and lora_b
  I/TP x r, w2 lora_a r x I/TP and lora_b h x r;
- the embedding lora_a max_loras x V x r and lora_b h x r; lm_head lora_a r x h and lora_b V x r.

The warm-up LoRAs vLLM adds for its profile run are built on the CPU (``create_dummy_lora``), so
the buffers are the whole GPU cost. vLLM refuses LoRA for a vocabulary over 258,048
(``LogitsProcessorWithLoRA``).
"""

from __future__ import annotations

from dataclasses import dataclass

from vramlint.models.shape import Layer, ModelShape

MOST_VOCAB = 258_048       # LogitsProcessorWithLoRA: "When using LoRA, vocab size must be <= 258048"
ROW_PARALLEL = frozenset({"o", "down", "shared_down", "out"})    # RowParallelLinear in vLLM (Layer.linears names)
SOURCE = "vLLM 0.19 vllm/lora/layers create_lora_weights (memory/lora_slots.py)"


@dataclass(frozen=True)
class LoraSlots:
    """``enable_lora`` with ``max_loras`` slots of rank ``rank`` (``max_lora_rank``)."""

    max_loras: int = 1
    rank: int = 16
    fully_sharded: bool = False


SLICES = {"qkv": 3, "gate_up": 2}     # a fused projection's output slices, each with a lora_a of its own
REPLICATED = frozenset({"router", "shared_expert_gate"})      # ReplicatedLinear: whole on every rank


def _linear(name: str, d_in: int, d_out: int, slots: LoraSlots, tp: int) -> int:
    """Elements of one slot's buffers for one linear of one GPU."""
    r = slots.rank
    if name in REPLICATED:
        return r * d_in + d_out * r
    if name in ROW_PARALLEL:
        return r * (d_in // tp) + (d_out // tp if slots.fully_sharded else d_out) * r
    return SLICES.get(name, 1) * (r // tp if slots.fully_sharded else r) * d_in + (d_out // tp) * r


def _experts(model: ModelShape, layer: Layer, slots: LoraSlots, split: int, spread: int) -> int:
    """One MoE layer's ``FusedMoEWithLoRA`` buffers per slot, per local expert: w1 and w3, w2 —
    each expert's width ``split`` ways and the experts ``spread`` over ranks whole
    (``Serving.expert_split`` / ``expert_spread``: one or the other is 1)."""
    mlp, h, r = layer.mlp, model.hidden_size, slots.rank
    if mlp.kind != "moe":
        return 0
    width = mlp.intermediate // split
    rank_a = r // split if slots.fully_sharded else r
    out = h // split if slots.fully_sharded else h
    return -(-mlp.experts // spread) * (2 * (rank_a * h + width * r) + r * width + out * r)


def lora_slot_elements(model: ModelShape, slots: LoraSlots, tp: int, pp: int, split: int = 1,
                       spread: int = 1) -> int:
    """Elements of every LoRA buffer one GPU of a TP x PP group holds (routed experts split and
    spread as ``_experts`` says). Under pipeline parallelism the stage modelled is the last
    (``memory/serving/vllm.py``): it holds the lm_head's buffers, the first stage the embedding's."""
    stage = model.layers[: -(-model.num_layers // pp)]
    per_slot = 0
    for layer in stage:
        for name, (d_in, d_out, copies) in layer.linears(model.hidden_size, model.block).items():
            if not name.startswith("experts_"):
                per_slot += copies * _linear(name, d_in, d_out, slots, tp)
        per_slot += _experts(model, layer, slots, split, spread)
    heads = 2 if pp == 1 else 1                                               # embedding and lm_head
    per_slot += heads * (model.vocab_size + model.hidden_size) * slots.rank
    return slots.max_loras * per_slot
