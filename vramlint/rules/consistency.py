"""DeepSpeed settings that contradict each other or cannot run as written."""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.findings import ERROR, INFO, WARNING, Finding
from vramlint.models.shape import ModelShape
from vramlint.models.tp_plans import autotp_refusal
from vramlint.readers.deepspeed import AUTO, DeepSpeedConfig
from vramlint.rules.base import Rule

UNRESOLVED_AUTO = ("VL305", "unresolved-auto", INFO)
CONFLICTING_PRECISION = ("VL306", "conflicting-precision", ERROR)
OFFLOAD_PARAM = ("VL307", "offload-param-requires-zero3", WARNING)
AUTOTP_REFUSED = ("VL309", "autotp-refused", ERROR)
FP32_BY_AUTO = ("VL311", "auto-precision-is-fp32", WARNING)
RULES = (
    Rule(*UNRESOLVED_AUTO, summary='"auto" is filled in by the HF Trainer or Accelerate; the plain deepspeed '
                                   'launcher keeps the string and fails on it (TypeError comparing "auto" > 0).',
         bad='{"train_micro_batch_size_per_gpu": "auto"}   # launched with `deepspeed train.py`',
         good='{"train_micro_batch_size_per_gpu": 4}'),
    Rule(*CONFLICTING_PRECISION, summary="fp16 and bf16 both enabled: DeepSpeed asserts 'bfloat16 and fp16 modes "
                                         "cannot be simultaneously enabled'.",
         bad='{"fp16": {"enabled": true}, "bf16": {"enabled": true}}',
         good='{"bf16": {"enabled": true}}'),
    Rule(*OFFLOAD_PARAM, summary="offload_param only works with ZeRO stage 3; below it the parameters stay on the "
                                 "GPU (and partial optimizer offload, ratio < 1, is refused outright).",
         bad='{"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}',
         good='{"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}}'),
    Rule(*AUTOTP_REFUSED, summary="DeepSpeed AutoTP refuses the model at deepspeed.initialize: its transformers "
                                  "tp_plan holds partition styles DeepSpeed 0.19 cannot apply (every transformers-5 "
                                  "MoE model's experts, phi3's and olmo2's rowwise_split_input), or DeepSpeed keeps "
                                  "a kernel-injection policy for it (gpt2). Its ValueError is quoted in the finding.",
         bad='{"tensor_parallel": {"autotp_size": 2}}   # --model Qwen/Qwen3-30B-A3B',
         good='{"tensor_parallel": {"autotp_size": 2, "partition_config": {"layer_specs": [...]}}}'),
    Rule(*FP32_BY_AUTO, summary='The file leaves its precision "auto" and what launches it fills that with fp32: '
                                "Accelerate's mixed_precision: 'no' (what `accelerate config` writes by default), "
                                "a Trainer without --bf16 / --fp16, or a Trainer precision whose section the file "
                                "writes enabled: false. DeepSpeed then keeps fp32 weights, gradients and "
                                "activations; the estimate counts them.",
         bad="mixed_precision: 'no'   # accelerate.yaml naming a ds.json with bf16: {enabled: auto}",
         good="mixed_precision: bf16"),
)
AUTO_KEYS = ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps",
             "gradient_clipping")


def check_consistency(ds: DeepSpeedConfig, trainer: bool = False) -> Iterator[Finding]:
    """``trainer``: the file is checked with the recipe the HF Trainer runs it with, which fills
    its "auto" values, so they are no finding."""
    doc, data = ds.document, ds.document.data if isinstance(ds.document.data, dict) else {}
    autos = [key for key in AUTO_KEYS if data.get(key) == AUTO]
    if ds.precision.value == AUTO and ds.precision.location is not None:
        autos.append(ds.precision.location.json_path.removeprefix("$."))
    if trainer:
        pass
    elif "train_batch_size" not in data and "train_micro_batch_size_per_gpu" not in data:
        yield Finding(*UNRESOLVED_AUTO, doc.locate("$"),
                      "no train_batch_size or train_micro_batch_size_per_gpu: the HF Trainer and Accelerate add "
                      "them; the plain deepspeed launcher asserts 'Either train_batch_size or "
                      "train_micro_batch_size_per_gpu needs to be provided'",
                      hint="vramlint used --micro-batch / [tool.vramlint] micro_batch for the estimate")
    elif autos:
        yield Finding(*UNRESOLVED_AUTO, doc.locate(f"$.{autos[0]}"),
                      f"{', '.join(autos)} {'is' if len(autos) == 1 else 'are'} \"auto\": fine under the HF Trainer or "
                      "Accelerate, which fill them in; the plain deepspeed launcher would fail on the string",
                      hint="the estimate fills them from the command line or [tool.vramlint] (--micro-batch, "
                           "--grad-accum, --mixed-precision), else as its assumptions say (micro-batch 1, a bf16 "
                           "Trainer)")
    fp16, bf16 = data.get("fp16") or {}, data.get("bf16") or data.get("bfloat16") or {}
    if isinstance(fp16, dict) and isinstance(bf16, dict) and fp16.get("enabled") is True and bf16.get("enabled") is True:
        yield Finding(*CONFLICTING_PRECISION, doc.locate("$.fp16.enabled"),
                      "fp16 and bf16 are both enabled: DeepSpeed asserts 'bfloat16 and fp16 modes cannot be "
                      "simultaneously enabled'", hint="keep bf16 on Ampere or newer GPUs, fp16 before")
    stage = ds.zero_stage.value
    if isinstance(stage, int) and stage < 3 and ds.offload_param.value not in ("none", None):
        yield Finding(*OFFLOAD_PARAM, ds.offload_param.location or doc.locate("$.zero_optimization"),
                      f"offload_param needs ZeRO stage 3; at stage {stage} the parameters stay on the GPU",
                      hint="zero_optimization.stage 3, or remove offload_param")
    ratio = ((data.get("zero_optimization") or {}).get("offload_optimizer") or {}) if isinstance(
        data.get("zero_optimization"), dict) else {}
    if isinstance(ratio, dict) and isinstance(ratio.get("ratio"), (int, float)) and ratio["ratio"] < 1 and stage != 3:
        yield Finding(OFFLOAD_PARAM[0], OFFLOAD_PARAM[1], ERROR,
                      doc.locate("$.zero_optimization.offload_optimizer.ratio"),
                      "DeepSpeed refuses this: 'Partial offloading only supported for ZeRO Stage 3.'",
                      hint="zero_optimization.stage 3, or offload_optimizer.ratio 1.0")


def fp32_by_auto(ds: DeepSpeedConfig, plan) -> Iterator[Finding]:
    """A file that says "auto" for precision, planned in fp32: where the launcher's precision
    that filled it was read (``plan.origins``)."""
    if ds.precision.value != AUTO or plan.precision != "fp32":
        return
    yield Finding(*FP32_BY_AUTO, ds.precision.location,
                  f"precision \"auto\" is filled from {plan.origins.get('precision', 'the launcher')}: DeepSpeed trains this job in fp32 (4-byte weights, "
                  "gradients and activations)",
                  hint="set bf16 in the launcher (mixed_precision: bf16, or the Trainer's --bf16), or "
                       "bf16.enabled: true here")


def check_autotp(ds: DeepSpeedConfig, model: ModelShape) -> Iterator[Finding]:
    """AutoTP (``tensor_parallel.autotp_size`` > 1) on a model whose tp_plan DeepSpeed refuses,
    unless the file gives its own ``partition_config`` or a ``preset_model``, which DeepSpeed uses
    instead of the plan (``models/tp_plans.py``)."""
    section = ds.document.data.get("tensor_parallel") if isinstance(ds.document.data, dict) else None
    own = isinstance(section, dict) and (section.get("partition_config") or section.get("preset_model"))
    refusal = autotp_refusal(model)
    if ds.tensor_parallel.value <= 1 or refusal is None or own:
        return
    yield Finding(*AUTOTP_REFUSED, ds.tensor_parallel.location or ds.document.locate("$.tensor_parallel"),
                  f"DeepSpeed AutoTP on {model.name or model.model_type}: {refusal}",
                  hint="give tensor_parallel.partition_config (or a preset_model that fits it: mixtral, "
                       "deepseek_v2, phi3, ...), or shard with ZeRO-3 instead (autotp_size 1)")
