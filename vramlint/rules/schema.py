"""Schema rules: unknown keys (with a did-you-mean) and wrong types, via the JSON Schemas in schemas/.

Severity follows what the framework itself does with the key, so the linter never fails a file
the framework accepts and never passes one it rejects:

- DeepSpeed validates ``zero_optimization``, ``offload_*``, ``fp16`` and ``bf16`` with pydantic
  ``extra="forbid"`` (an unknown key is a launch error) but reads ``activation_checkpointing``
  and the top level key by key, ignoring the rest (a warning: the setting has no effect).
- Accelerate rejects unknown top-level keys ("had unknown keys") but copies nested
  ``deepspeed_config`` / ``fsdp_config`` keys unchecked (a warning: silently ignored).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator


from vramlint.documents import Document
from vramlint.findings import ERROR, WARNING, Finding
from vramlint.rules.base import Rule
from vramlint.schemas import conforms, load_schema

UNKNOWN = ("VL101", "unknown-key", ERROR)
WRONG_TYPE = ("VL102", "wrong-type", ERROR)
REMOVED = ("VL103", "removed-by-deepspeed", WARNING)
RULES = (
    Rule(*UNKNOWN, summary="A key the framework does not know: a typo DeepSpeed rejects inside its sections, or "
                           "a setting that is silently ignored.",
         bad='{"zero_optimization": {"stage": 3, "stage3_param_persitence_threshold": 1e6}}',
         good='{"zero_optimization": {"stage": 3, "stage3_param_persistence_threshold": 1e6}}'),
    Rule(*WRONG_TYPE, summary="A value of the wrong type or outside the allowed values: the framework fails "
                              "validation at launch.",
         bad='{"zero_optimization": {"stage": 4}}',
         good='{"zero_optimization": {"stage": 3}}'),
    Rule(*REMOVED, summary="A section DeepSpeed 0.19.7 removed (Sparse Attention, elasticity, MoQ, MiCS, ...): "
                           "from that release on DeepSpeed refuses the file with the DeepSpeedConfigError quoted; "
                           "earlier releases accept it.",
         bad='{"train_batch_size": 64, "elasticity": {"enabled": true, "max_train_batch_size": 2000}}',
         good='{"train_batch_size": 64}'),
)
# DeepSpeed 0.19.7 runtime/config.py ``_REMOVED_TOP_LEVEL_CONFIG_KEYS`` and ``_REMOVED_ZERO_CONFIG_KEYS``
# (``_reject_removed_config_keys`` raises their text; https://github.com/deepspeedai/DeepSpeed/issues/8489)
DEEPSPEED_REMOVED = {
    "$": {
        "nebula": "Nebula checkpointing has been removed. A leftover 'nebula' block would be ignored and checkpoints "
                  "would silently fall back to local torch.save.",
        "compression_training": "The DeepSpeed compression library has been removed. A leftover "
                                "'compression_training' block would be ignored and the model would train unquantized.",
        "amp": "NVIDIA Apex AMP integration has been removed. Use DeepSpeed 'fp16', 'bf16', or 'torch_autocast' "
               "instead.",
        "quantize_training": "Mixture-of-Quantization (MoQ) / 'quantize_training' has been removed.",
        "sparse_gradients": "Sparse compression of dense torch.nn.Embedding gradients has been removed.",
        "eigenvalue": "Eigenvalue-based Mixture-of-Quantization (MoQ) has been removed; the standalone 'eigenvalue' "
                      "configuration block is no longer supported.",
        "sparse_attention": "DeepSpeed Sparse Attention has been removed; the 'sparse_attention' configuration "
                            "block is no longer supported.",
        "elasticity": "Elastic training has been removed; the 'elasticity' configuration block is no longer "
                      "supported. Set train_batch_size / train_micro_batch_size_per_gpu / "
                      "gradient_accumulation_steps directly.",
        "graph_harvesting": "Graph harvesting has been removed; the 'graph_harvesting' configuration option is no "
                            "longer supported.",
        "curriculum_learning": "Legacy top-level 'curriculum_learning' has been removed. Use "
                               "'data_efficiency.data_sampling.curriculum_learning' instead.",
        "progressive_layer_drop": "Progressive Layer Dropping has been removed; the 'progressive_layer_drop' "
                                  "configuration block is no longer supported.",
    },
    "$.zero_optimization": {
        "mics_shard_size": "MiCS ZeRO-3 sharding has been removed; 'zero_optimization.mics_shard_size' is no "
                           "longer supported.",
        "mics_hierarchical_params_gather": "MiCS ZeRO-3 sharding has been removed; "
                                           "'zero_optimization.mics_hierarchical_params_gather' is no longer "
                                           "supported.",
        "zeropp_loco_param": "LoCo-Zero++ has been removed; 'zero_optimization.zeropp_loco_param' is no longer "
                             "supported. Remove this key to use standard ZeRO++ quantized gradients without LoCo "
                             "error feedback.",
    },
}
# DeepSpeed's sections validated by pydantic models with extra="forbid" (DeepSpeedConfigModel):
# zero_optimization and its offload sections, fp16, bf16. activation_checkpointing is read key by
# key (DeepSpeedActivationCheckpointingConfig) and the top level too: there an unknown key is ignored.
DEEPSPEED_PYDANTIC = ("$.zero_optimization", "$.fp16", "$.bf16", "$.bfloat16")
REJECTS_UNKNOWN = {  # (format) -> predicate on the JSON path of the object holding the unknown key
    "deepspeed": lambda path: path.startswith(DEEPSPEED_PYDANTIC),
    "accelerate": lambda path: path == "$",
    "vllm": lambda path: path == "$",
}
WHAT_HAPPENS = {
    ("deepspeed", True): "DeepSpeed rejects it (pydantic extra=forbid: Extra inputs are not permitted)",
    ("deepspeed", False): "DeepSpeed reads only the keys it knows here: it has no effect",
    ("accelerate", True): "Accelerate refuses the file (ValueError: the config file had unknown keys)",
    ("accelerate", False): "Accelerate passes nested keys on unchecked: it is silently ignored",
    ("vllm", True): "vllm serve refuses it (error: unrecognized arguments)",
    ("vllm", False): "passed on as JSON to the nested config",
}


def _path(parts) -> str:
    out = "$"
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _suggest(key: str, known: list[str]) -> str | None:
    """The known key this one is a typo of: close spelling, or the same words reordered
    (``comm_overlap`` for ``overlap_comm``)."""
    key = str(key)                 # YAML keys may be booleans or numbers
    words = sorted(key.lower().split("_"))
    for candidate in known:
        if sorted(candidate.split("_")) == words:
            return candidate
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.8)
    return close[0] if close else None


def check_schema(document: Document, fmt: str) -> Iterator[Finding]:
    schema = load_schema(fmt)
    if not conforms(document.data, schema):     # a valid file (most) never imports jsonschema
        import jsonschema
        validator = jsonschema.Draft202012Validator(schema)
        for error in sorted(validator.iter_errors(document.data), key=lambda e: list(map(str, e.absolute_path))):
            yield from _findings(error, document, fmt)
    if fmt == "deepspeed":
        yield from _removed(document)


def _removed(document: Document) -> Iterator[Finding]:
    """The sections DeepSpeed 0.19.7 removed, with the error it raises for each."""
    data = document.data if isinstance(document.data, dict) else {}
    for holder, removed in DEEPSPEED_REMOVED.items():
        section = data if holder == "$" else data.get(holder.split(".", 1)[1])
        if not isinstance(section, dict):
            continue
        for key in sorted(set(section) & set(removed)):
            yield Finding(*REMOVED, document.locate(f"{holder}.{key}"),
                          f"DeepSpeed 0.19.7 and later refuse the file: DeepSpeedConfigError: {removed[key]}",
                          hint=f"remove {key!r}, or pin deepspeed<0.19.7, whose releases still support it")


def _findings(error, document: Document, fmt: str) -> Iterator[Finding]:
    holder = _path(error.absolute_path)
    if error.validator == "anyOf":
        # the alternative of the value's own type says what is wrong (an object with a typo, not
        # "is not a boolean"); fall back to the summary when every alternative is a type mismatch
        specific = [e for e in error.context if e.validator not in ("type", "const", "enum")]
        if specific:
            for sub in specific:
                yield from _findings(sub, document, fmt)
            return
    if error.validator == "additionalProperties":
        known = sorted(error.schema.get("properties", {}))
        rejected = REJECTS_UNKNOWN[fmt](holder)
        for key in sorted(set(error.instance) - set(known)):
            close = _suggest(key, known)
            hint = f"did you mean {close!r}?" if close else ""
            code, name, _ = UNKNOWN
            yield Finding(code, name, ERROR if rejected else WARNING, document.locate(f"{holder}.{key}"),
                          f"unknown key {key!r} in {holder}: {WHAT_HAPPENS[(fmt, rejected)]}", hint=hint)
        return
    where = document.locate(holder)
    yield Finding(*WRONG_TYPE, where, f"{holder}: {error.message}")
