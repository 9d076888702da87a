"""What tensor parallelism splits, as each runtime reads a family's transformers tp_plan.

transformers (``tp_plan="auto"``: Accelerate's ``parallelism_config_tp_size``, a plain script,
``--infer``) splits what the family's ``base_model_tp_plan`` names, plus lm_head (the class's
``colwise_gather_output``) and the input embeddings (``init_parallel_plans`` adds
``embedding_rowwise`` when the plan is not empty): every projection and expert for most families,
less for the ones in ``HF_SPLIT`` (transformers 5.24's plans).

DeepSpeed 0.19's AutoTP (``tensor_parallel.autotp_size``) reads the same plan
(``engine._apply_autotp_partitioning``, ``TPPlanConverter``) — but keeps ``embedding_rowwise``
whole unless the embedding is tied to lm_head (then both are split over the vocabulary), refuses
a plan with a style it does not know (``AUTOTP_REFUSED``: every transformers-5 MoE plan, phi3's
and olmo2's ``rowwise_split_input``), and without a plan splits every linear of the layers by
name, embeddings and lm_head left whole (falcon, gpt_bigcode) — or asserts, for models it has a
kernel-injection policy for (gpt2). transformers itself refuses a model with no plan
(``hf_refusal``). Run on DeepSpeed's CPU accelerator with two ranks
(``dev/tp_split.py``: llama untied and tied, qwen3, gemma3_text, starcoder2, falcon tied and
untied, gpt_bigcode, gpt_oss split as said; qwen3_moe, mixtral, phi3, olmo2 and gpt2 refused),
and transformers' ``from_pretrained(tp_plan="auto")`` on two gloo ranks (llama, qwen3_moe: every
projection, expert, embedding and lm_head split; gpt_oss: embedding and lm_head alone; falcon
refused).

Groups are ``shape.Params``' (attention, mlp, experts, router) and the model-level embedding,
head and extra (gemma4's per-layer tables); routers are in no plan.
"""

from __future__ import annotations

from vramlint.models.shape import ModelShape

DEFAULT = frozenset({"attention", "mlp", "experts", "embedding", "head"})
HF_SPLIT = {
    "qwen3_vl_text": frozenset({"embedding", "head"}),        # the plan names embed_tokens alone
    "gpt_oss": frozenset({"embedding", "head"}),
    "deepseek_v3": frozenset({"mlp", "experts", "embedding", "head"}),   # MLA's projections stay whole
    "gpt2": frozenset(), "gpt_bigcode": frozenset(), "falcon": frozenset(),   # no plan
}
AUTOTP_BY_NAME = frozenset({"attention", "mlp"})     # no plan: AutoTP's name patterns over the layers
MOE_STYLES = ("moe_tp_experts", "packed_colwise")
AUTOTP_REFUSED = {
    **{family: MOE_STYLES for family in ("mixtral", "qwen2_moe", "qwen3_moe", "qwen3_next", "qwen3_vl_moe_text",
                                         "gemma4_text", "deepseek_v3")},
    "deepseek_v2": ("mla_kv_a_proj",) + MOE_STYLES,
    "llama4_text": ("moe_tp_experts", "packed_rowwise"),
    "phi3": ("rowwise_split_input",), "olmo2": ("rowwise_split_input",),
}
AUTOTP_ASSERTS = {"gpt2"}     # DeepSpeed has a kernel-injection container policy for it


def hf_split(model: ModelShape) -> frozenset[str]:
    """The groups transformers' tp_plan for the model's family splits."""
    return HF_SPLIT.get(model.family, DEFAULT)


def autotp_split(model: ModelShape) -> frozenset[str]:
    """The groups DeepSpeed AutoTP splits: the plan's, the embedding only when tied to lm_head."""
    split = hf_split(model)
    if not split:
        return AUTOTP_BY_NAME
    tied = not model.head_params
    return split - {"embedding"} | ({"embedding"} if tied and "head" in split else set())


def hf_refusal(model: ModelShape, tp: int) -> str | None:
    """transformers' own words where ``tp_plan="auto"`` refuses the model: it has no plan at all
    (gpt2, gpt_bigcode, falcon; falcon run on two CPU ranks)."""
    if hf_split(model):
        return None
    return (f"`tp_size={tp}` was requested, but `{model.architecture or model.family}` has no `tp_plan`. Pass "
            "`tp_plan` in `DistributedConfig`, add `base_model_tp_plan` to the model's config, or set `tp_size=1`.")


def autotp_refusal(model: ModelShape) -> str | None:
    """DeepSpeed's own words where AutoTP refuses the model (None where it runs)."""
    if model.family in AUTOTP_ASSERTS:
        return "AutoTP not supported for model. Please use kernel injection since container policy for model exists."
    styles = AUTOTP_REFUSED.get(model.family)
    if styles is None:
        return None
    return (f"HuggingFace tp_plan contains unsupported partition style(s): {sorted(styles)}. Applying only the "
            "supported entries could shard one half of a column/row pair, so the plan is rejected as a whole. "
            "Provide an explicit 'tensor_parallel.partition_config' for this model instead.")
