"""Activations saved for the backward pass, and the language-model head's logits.

First-order model (Korthikanti et al., "Reducing Activation Recomputation in Large Transformer
Models", 2022, Table 2; REFERENCE.md section 3): a transformer layer saves 34·s·b·h bytes in
16-bit precision with a fused attention kernel (SDPA / FlashAttention: no s² score matrix). With
gradient checkpointing each layer keeps only its 16-bit input (2·s·b·h) and one layer at a time is
re-materialised in the backward pass. fp32 training doubles every saved tensor.

The logits are often the largest single activation: b·s·V values that HF upcasts to fp32 for the
loss; at the loss the 16-bit logits, their fp32 copy, the log-softmax output and its gradient are
alive together, about 14 bytes per logit (REFERENCE.md section 3, vramcalc's calibration).
"""

from __future__ import annotations

from vramlint.memory.components import Component
from vramlint.plan import Plan

KORTHIKANTI = "Korthikanti et al. 2022 Table 2 (fused attention), REFERENCE.md §3"
LOGIT_BYTES = 14


def activations(plan: Plan) -> list[Component]:
    m = plan.model
    s, b, h, layers = plan.seq_len, plan.micro_batch, m.hidden_size, m.num_layers
    scale = 2 if plan.precision == "fp32" else 1
    tokens = s * b
    per_layer = 34 * tokens * h * scale // plan.tensor_parallel
    if plan.grad_checkpointing:
        kept = 2 * tokens * h * scale * layers
        total = kept + per_layer
        formula = (f"checkpointed: 2·s·b·h x L + 34·s·b·h (one layer recomputed) = "
                   f"2·{s}·{b}·{h}·{layers} + 34·{s}·{b}·{h}")
    else:
        total = per_layer * layers
        formula = f"34·s·b·h x L = 34·{s}·{b}·{h} x {layers}"
    if scale == 2:
        formula += " x 2 (fp32)"
    logits = LOGIT_BYTES * tokens * m.vocab_size
    return [Component("activations", total, formula, KORTHIKANTI),
            Component("logits + loss", logits, f"{LOGIT_BYTES} B x b·s·V = {LOGIT_BYTES}·{b}·{s}·{m.vocab_size}",
                      "fp32 loss upcast (transformers ForCausalLMLoss), REFERENCE.md §3")]
