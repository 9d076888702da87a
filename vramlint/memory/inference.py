"""Inference with transformers (``model.generate`` / a prefill forward): weights, KV cache, and the
largest working set of one layer.

Under ``torch.no_grad`` nothing is kept for backward: each layer's intermediates die as the
forward moves on (docs/reference.md section 3, "the inference peak is KV cache + logits"). The peak is
weights + the full KV cache + the widest moment inside one layer: the residual stream and its
normed copy plus, in a gated MLP, act(gate), up and their product (3·I; phi3's fused gate_up
output stays whole, 4·I), or eager attention's b·heads·s² scores (16-bit and fp32 softmax side
by side); plus two more hidden-sized tensors the model's forward still holds —
``inputs_embeds`` (a local for the whole forward) and the current layer's input (the caller's
``hidden_states`` while the layer runs); plus the logits of the positions kept
(``logits_to_keep=1`` in generate: b·V, 16-bit and fp32).
"""

from __future__ import annotations

from vramlint.memory.parts.activations import attention_masks, rank_local
from vramlint.memory.parts.components import Component
from vramlint.memory.parts.weights import DTYPE_BYTES, weight_bytes
from vramlint.models.vision import LOADED_BY
from vramlint.plan import Plan

SOURCE = "no_grad prefill working set, checked on H200 (shared/groundtruth infer_prefill)"


def kv_cache(plan: Plan) -> Component:
    """Per layer: 2 x kv_heads x head_dim x bytes per token, for every prompt token. A sliding
    layer's ``DynamicSlidingWindowLayer`` keeps only a view of the last window − 1 tokens of the
    prefill's concatenation, so the storage of the whole prompt stays alive until the next step."""
    m = plan.model
    dtype_bytes = DTYPE_BYTES[plan.weights_dtype or m.dtype]
    per_token = dtype_bytes * sum(rank_local(layer, plan).attention.kv_elements_per_token("transformers")
                                  for layer in m.layers)        # one TP rank's heads
    return Component("KV cache", int(per_token * plan.seq_len * plan.micro_batch),
                     f"{int(per_token):,} B/token x {plan.seq_len:,} tokens x batch {plan.micro_batch} (sliding "
                     "layers too: the prefill's storage stays behind the window view)",
                     "2 x layers x kv_heads x head_dim x bytes, docs/reference.md §5; transformers cache_utils.py")


def working_set(plan: Plan) -> Component:
    m = plan.model
    a = DTYPE_BYTES[plan.weights_dtype or m.dtype]
    tokens = plan.micro_batch * plan.seq_len
    widest = 0
    for layer in (rank_local(layer, plan) for layer in m.layers):     # heads and widths one TP rank computes
        mlp = layer.mlp
        if mlp.kind == "moe":     # grouped experts (nograd._experts): every routed copy at once
            mlp_bytes = a * (_experts_width(mlp, m.hidden_size) + 3 * mlp.shared_intermediate) + _router_bytes(mlp)
        elif mlp.kind == "gated":  # act(gate), up, product; a fused gate_up output stays whole (phi3)
            mlp_bytes = a * (4 if m.block.fused_gate_up else 3) * mlp.intermediate
        else:                     # fc output + GELU; GPT-2's python tanh-GELU keeps 0.5·x and two temporaries
            mlp_bytes = a * (4 if m.block.act == "gelu_new" else 2) * mlp.intermediate
        att = layer.attention
        attention = a * (2 * att.num_heads * att.head_dim + 2 * att.num_kv_heads * att.head_dim)
        if plan.attn == "eager":   # every score of the prompt: fp32 softmax beside its 16-bit input
            attention += (4 + a) * att.num_heads * plan.seq_len
        widest = max(widest, mlp_bytes, attention)
    # + residual, normed input, the layer's input, inputs_embeds (and, with learned positions added
    # to it, their sum: gpt2, gpt_bigcode): whole on every TP rank
    per = int(widest + a * (5 if m.block.learned_positions else 4) * m.hidden_size)
    return Component("activations (one layer)", per * tokens, f"{per:,} B/token x {tokens:,} tokens", SOURCE)


def _experts_width(mlp, h: int) -> int:
    """Elements per token at the widest moment of transformers' grouped_mm experts forward, for k
    routed copies: the gathered input beside gate_up and its ``masked_fill`` copy, k(h + 4I) — or,
    later, the gathered input, the masked down output, and the weighted output with its
    re-ordered copy, 4kh, the larger where h is wide against I (qwen3_moe: 2048 against 768,
    recorded with 2 of Qwen3-30B-A3B's layers: the first alone was 0.41 GB short of the real
    order at 8k tokens)."""
    k, i = mlp.experts_per_token, mlp.intermediate
    return max(k * (h + 4 * i), 4 * k * h)


def _router_bytes(mlp) -> int:
    """Bytes per token alive through the experts' forward: the router's fp32 logits and the
    sort's two int64 index tensors over the k routed copies."""
    return 4 * mlp.experts + 2 * 8 * mlp.experts_per_token


def tower_weights(plan: Plan, dtype_bytes: int) -> Component:
    """A multimodal checkpoint's tower, loaded whole beside the language model — under tensor
    parallelism too, but for the linears transformers' ``base_model_tp_plan`` for the tower splits
    (Gemma 4's encoder projections; SigLIP's and the Qwens' towers have no plan: replicated)."""
    tower, tp = plan.model.vision, plan.tensor_parallel
    if tower is None:
        return Component("vision tower", 0, "none", LOADED_BY)
    split = sum(d_in * d_out * copies for name, d_in, d_out, copies in tower.linears if name in tower.hf_tp_split)
    params = tower.params - split + -(-split // tp) if tp > 1 else tower.params
    formula = f"{dtype_bytes} B x {tower.params:,} params" + (
        f", {split:,} of them in linears split over TP {tp}" if split and tp > 1 else
        ", whole on every rank (no tp_plan)" if tp > 1 else "")
    return Component("vision tower", dtype_bytes * params, formula, f"{LOADED_BY} (models/vision.py)")


PROMPT_SOURCE = ("transformers 4.44 and earlier: generate's prefill computes the logits of every prompt position and "
                 "upcasts them (num_logits_to_keep arrived in 4.45.0, PR #31292)")


def inference_components(plan: Plan) -> list[Component]:
    m = plan.model
    dtype = plan.weights_dtype or m.dtype
    weights = weight_bytes(m, DTYPE_BYTES[dtype]) // plan.pipeline_parallel     # m: one TP rank's (estimate)
    positions = plan.seq_len if plan.prompt_logits else 1
    logits = plan.micro_batch * positions * m.vocab_size * 6
    masks = attention_masks(plan, DTYPE_BYTES[dtype])
    return [Component("weights", weights, f"{m.params:,} params as stored ({dtype}"
                      f"{', ' + m.quantization.method if m.quantization else ''})", "memory/parts/weights.py"),
            tower_weights(plan, DTYPE_BYTES[dtype]),
            kv_cache(plan), working_set(plan),
            Component("attention masks", masks, f"s x s per mask kind ({plan.attn})",
                      "transformers masking_utils.py (memory/parts/activations.py attention_masks)"),
            Component("logits (every prompt position)" if plan.prompt_logits else "logits (last position)", logits,
                      f"6 B x b·s·V ({plan.micro_batch * positions * m.vocab_size:,}): 16-bit and fp32"
                      if plan.prompt_logits else "b x V x (2 + 4) B", PROMPT_SOURCE if plan.prompt_logits else SOURCE)]
