"""What a preference or RL training stage keeps beside the trained model (``Plan.reference``,
``Plan.colocated_share``); the paired rows are ``Plan.rows`` (memory/training.py counts them).

Read from TRL 1.16.0, LLaMA-Factory 0.9.5 and torchtune 0.6.1 (research notes: the readers cite the
lines):
- DPO, IPO, KTO, RLOO and GRPO with beta > 0 keep a reference model unless PEFT gives it for free
  (the same model with its adapter disabled) or ``precompute_ref_log_probs`` computed the
  reference log-probs before training. The reference is a frozen copy of the policy in its load
  dtype (TRL ``create_model_from_path`` with the policy's ``model_init_kwargs``), prepared like the
  policy: partitioned under ZeRO-3 and FSDP, whole on every GPU otherwise (DeepSpeed ZeRO-0/1/2
  casts it to the engine's 16 bits). It runs under ``no_grad`` after the policy's forward (TRL
  1.16 dpo_trainer.py:1299-1347), while the policy's graph and logits are alive
  (``reference_forward``).
- GRPO / RLOO with ``use_vllm`` and ``vllm_mode: colocate`` start a vLLM engine in the training
  process that takes ``vllm_gpu_memory_utilization`` of every GPU for the whole run (unless
  ``vllm_enable_sleep_mode`` frees it between generations).
"""

from __future__ import annotations

from vramlint.memory.parts.components import Component
from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.memory.runtimes import runtime
from vramlint.plan import Plan

SOURCE = ("TRL 1.16.0 dpo_trainer.py:907-929 / grpo_trainer.py (reference), LLaMA-Factory 0.9.5 "
          "train/trainer_utils.py:123-146, torchtune 0.6.1 DPO recipes")
VLLM_SOURCE = "TRL 1.16.0 GRPOConfig.vllm_gpu_memory_utilization, vllm_mode colocate (grpo_trainer.py)"


def _partitions(plan: Plan) -> int:
    """Ranks a frozen model beside the policy is split over, as its runtime splits it
    (``frozen_shards``: ZeRO-3 partitions it, FSDP shards it like the policy; whole otherwise)."""
    return runtime(plan.runtime).frozen_shards(plan)


def reference_copy(plan: Plan) -> list[Component]:
    """The reference model's weights on one GPU: the policy's parameters in the bytes the
    runtime holds them frozen (DeepSpeed: its width; otherwise the load dtype; QLoRA's base
    counted 16-bit: TRL loads the reference without the policy's quantization unless told),
    divided where the runtime partitions them."""
    if plan.reference != "copy":
        return []
    p = plan.model.params
    if plan.runtime == "deepspeed":
        b = 4 if plan.precision == "fp32" else 2
    else:
        b = DTYPE_BYTES.get(plan.weights_dtype or "bfloat16", 2)
    n = _partitions(plan)
    over = f" / {n}" if n > 1 else ""
    return [Component("reference model (frozen copy)", b * -(-p // n), f"{b} B x P{over}", SOURCE)]


def colocated_vllm(plan: Plan) -> list[Component]:
    """vLLM's share of the GPU when it generates inside the training process."""
    if not plan.colocated_share:
        return []
    total = plan.cluster.gpu.memory_bytes
    return [Component("vLLM engine (colocated)", int(total * plan.colocated_share),
                      f"vllm_gpu_memory_utilization: {plan.colocated_share} x 1 B x {total:,} (the GPU's memory)",
                      VLLM_SOURCE)]


GENERATE_SOURCE = ("TRL 1.16.0 GRPO / RLOO without vLLM: model.generate over per_device_train_batch_size x "
                   "steps_per_generation completions after the optimizer step (grpo_trainer.py:1258-1316, 1522-1551); "
                   "ZeRO-3 gathers the whole policy for it (ds3_gather_for_generation), FSDP summons its full parameters")


def generation(plan: Plan) -> list[Component]:
    """What generating completions with transformers between steps adds to the model states:
    the KV cache of every row over the prompt and completion, the last position's logits (16-bit
    and fp32), and the whole weights where ZeRO-3 or FSDP shard them."""
    if not plan.generation_rows:
        return []
    from vramlint.memory.inference import kv_cache
    compute = {"fp32": "float32", "fp16": "float16"}.get(plan.precision, "bfloat16")
    cache = kv_cache(plan.with_changes(mode="infer", micro_batch=plan.generation_rows, weights_dtype=compute))
    rows, v = plan.generation_rows, plan.model.vocab_size
    tokens = rows * plan.seq_len
    parts = [Component("generation KV cache", cache.bytes, f"{cache.bytes // tokens:,} B/token x {tokens:,} tokens "
                       f"({rows} completions of {plan.seq_len:,})", GENERATE_SOURCE),
             Component("generation logits", 6 * rows * v, f"6 B x rows x V ({rows * v:,}): 16-bit and fp32",
                       GENERATE_SOURCE)]
    if _partitions(plan) > 1:
        b = 4 if plan.precision == "fp32" else 2
        parts.append(Component("gathered weights for generation", b * plan.model.params, f"{b} B x P",
                               GENERATE_SOURCE))
    return parts


TEACHER_SOURCE = ("torchtune 0.6.1 knowledge_distillation recipes: the teacher built in the recipe dtype, frozen, "
                  "its forward under no_grad; its logit chunks alive through the student's KD loss "
                  "(ForwardKLWithChunkedOutputLoss)")


def teacher(plan: Plan) -> list[Component]:
    """A distillation teacher: its weights in the compute dtype (FSDP shards it like the student),
    and its 16-bit logits over the micro-batch, which the KD loss reads with the student's."""
    if not plan.teacher_params:
        return []
    b = 4 if plan.precision == "fp32" else 2
    n = _partitions(plan)
    over = f" / {n}" if n > 1 else ""
    logits = plan.rows * plan.seq_len * plan.model.vocab_size
    return [Component("teacher model (frozen)", b * -(-plan.teacher_params // n),
                      f"{b} B x {plan.teacher_params:,}{over}", TEACHER_SOURCE),
            Component("teacher logits", 2 * logits, f"2 B x logits ({logits:,})", TEACHER_SOURCE)]


REF_FORWARD_SOURCE = ("TRL 1.16.0 dpo_trainer.py:1299-1347 (the policy's forward, then the reference's under "
                      "no_grad; KTO alike), LLaMA-Factory 0.9.5 dpo/trainer.py:230-270: the policy's logits are kept "
                      "for the metrics while the reference makes its own and their log-softmax")


def reference_forward(plan: Plan) -> list[Component]:
    """The moment the reference forward makes its logits: the policy's loss keeps its fp32
    log-softmax (4 B a logit) and the trainer its logits (the compute width), while the reference
    makes logits (the compute width) and an fp32 log-softmax of them."""
    if not plan.reference_forward:
        return []
    width = 4 if plan.precision == "fp32" else 2
    count = plan.rows * plan.seq_len * plan.model.vocab_size
    per = 4 + width + width + 4
    return [Component("logits + loss (reference forward)", per * count, f"{per} B x logits ({count:,}): the policy's "
                      "log-softmax and logits, the reference's logits and log-softmax", REF_FORWARD_SOURCE)]


def stage_components(plan: Plan) -> list[Component]:
    from vramlint.memory import rl
    return reference_copy(plan) + colocated_vllm(plan) + teacher(plan) + rl.resting(plan)
