"""Dev-only: torchtitan 0.3.0's config registry as data (vramlint/data/torchtitan_0.3.0_registry.json).

torchtitan 0.3.0 states a job as a Python function, not a TOML file: ``-m torchtitan.train --module
llama3 --config llama3_8b`` calls ``torchtitan.models.llama3.config_registry.llama3_8b()``, which returns
a ``Trainer.Config``; the command line's ``--section.field`` arguments are laid over it
(torchtitan/config/manager.py). vramlint reads no Python, so each registry function's result is
recorded here, from the wheel itself: what the memory model reads of it (the batch, the mesh,
activation checkpointing, compile, the loss, the optimizer) and the model's shapes, with the line the
function starts at. Modules that need more than torch to import (kimi_k2_7: torchvision, qwen3_5:
fla, flux: transformers) are left out; their configs stay unread (VL011).

    python3 -m venv /tmp/tt3 && /tmp/tt3/bin/pip install torch==2.13.0 torchtitan==0.3.0 triton
    /tmp/tt3/bin/python dev/torchtitan_registry.py > vramlint/data/torchtitan_0.3.0_registry.json
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import json
import os

MODULES = ("llama3", "qwen3", "deepseek_v3", "gpt_oss")
TRAINING = ("local_batch_size", "global_batch_size", "seq_len", "dtype", "mixed_precision_param",
            "mixed_precision_reduce", "enable_cpu_offload", "disable_cuda_graphs")
COMPILE = ("enable", "components", "enable_async_tensor_parallel")


def _fields(config: object, names: tuple[str, ...] | None = None) -> dict:
    """A config dataclass's plain fields (numbers, strings, lists of them), by name."""
    out = {}
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if names is not None and field.name not in names:
            continue
        if isinstance(value, (int, float, str, bool, type(None))) or (
                isinstance(value, list) and all(isinstance(v, (int, float, str)) for v in value)):
            out[field.name] = value
    return out


def _linears(config: object, seen: list[str]) -> None:
    """The class names of every linear config under the model's (a converter replaces ``Linear``'s)."""
    if dataclasses.is_dataclass(config):
        name = type(config).__qualname__
        if "Linear" in name and name not in seen:
            seen.append(name)
        for field in dataclasses.fields(config):
            _linears(getattr(config, field.name), seen)
    elif isinstance(config, list):
        for item in config:
            _linears(item, seen)


def _model(spec) -> dict:
    model = spec.model
    layer = model.layers[0]
    attention = layer.attention
    dense = [one for one in model.layers if getattr(one, "moe", None) is None]
    ffn = dense[0].feed_forward.w1.out_features if dense else None
    linears: list[str] = []
    _linears(model, linears)
    qkv = getattr(attention, "qkv_linear", None)
    heads = attention.n_heads                         # MLA (deepseek_v3) has no key/value heads of its own
    return {
        "name": spec.name, "flavor": spec.flavor, "class": type(model).__qualname__,
        "dim": model.dim, "layers": len(model.layers), "vocab_size": model.vocab_size,
        "heads": heads, "kv_heads": getattr(attention, "n_kv_heads", None) or heads,
        "head_dim": getattr(attention, "head_dim", None) or model.dim // heads, "ffn": ffn,
        "moe_layers": len(model.layers) - len(dense),
        "attention": type(attention).__qualname__.split(".")[0],
        "inner_attention": type(attention.inner_attention).__qualname__.split(".")[0],
        "fused_qkv": qkv is not None and "Fused" in type(qkv).__qualname__,
        "qk_norm": getattr(attention, "qk_norm", None) is not None,
        "norm_eps": getattr(layer.attention_norm, "eps", None),
        "rope_theta": attention.rope.theta if getattr(attention, "rope", None) is not None else None,
        "max_seq_len": getattr(getattr(attention, "rope", None), "max_seq_len", None),
        "tied": bool(getattr(model, "enable_weight_tying", False)),
        "linears": sorted(linears),
    }


def record(function) -> dict:
    config = function()
    ac = config.activation_checkpoint
    loss = config.loss
    inner = getattr(loss, "loss_fn", None)
    group = config.optimizer.param_groups[0] if config.optimizer.param_groups else None
    source = inspect.getsourcefile(function)
    return {
        "source": f"{source[source.index('torchtitan/'):]}:{inspect.getsourcelines(function)[1]}",
        "model": _model(config.model_spec),
        "training": _fields(config.training, TRAINING),
        "parallelism": _fields(config.parallelism),
        "activation_checkpoint": {"class": type(ac).__qualname__ if ac is not None else None,
                                  **(_fields(ac) if ac is not None else {})},
        "compile": _fields(config.compile, COMPILE),
        "loss": {"class": type(loss).__qualname__, "num_chunks": getattr(loss, "num_chunks", 1),
                 "loss_fn": type(inner).__qualname__ if inner is not None else None},
        "optimizer": {"name": group.optimizer_name if group else None,
                      "implementation": config.optimizer.implementation},
    }


def _as_on_a_gpu() -> None:
    """The quantization converters refuse to build without an SM 8.9 / 10.0 GPU
    (components/quantization/float8.py:85-96, mx.py:70, nvfp4.py:287), FlexAttention's flash backend
    without a Hopper one (models/common/config_utils.py:85-90); the registry's configs are recorded as
    a GPU run builds them, so their capability checks answer yes."""
    from torchtitan.components.quantization import float8, mx, nvfp4
    from torchtitan.tools import utils
    for module in (float8, mx, nvfp4, utils):
        module.has_cuda_capability = lambda major, minor: True


def _names(config: object, prefix: str = "") -> list[str]:
    """A config's fields as tyro spells them on the line (a nested config's as ``outer.inner``)."""
    out = []
    for field in dataclasses.fields(config):
        value = getattr(config, field.name)
        if dataclasses.is_dataclass(value):
            out += _names(value, f"{prefix}{field.name}.")
        else:
            out.append(prefix + field.name)
    return out


def fields() -> dict:
    """The fields the line may set in the sections vramlint reads (tyro refuses any other)."""
    from torchtitan.components.loss import ChunkedLossWrapper, CrossEntropyLoss
    from torchtitan.config import CompileConfig, ParallelismConfig, TrainingConfig
    from torchtitan.distributed.activation_checkpoint import FullAC, MemoryBudgetAC, SelectiveAC
    return {"training": _names(TrainingConfig()), "parallelism": _names(ParallelismConfig()),
            "compile": _names(CompileConfig()),
            "loss": {"ChunkedLossWrapper.Config": _names(ChunkedLossWrapper.Config()),
                     "CrossEntropyLoss.Config": _names(CrossEntropyLoss.Config())},
            "activation_checkpoint": {"full": _names(FullAC.Config()), "selective": _names(SelectiveAC.Config()),
                                      "memory_budget": _names(MemoryBudgetAC.Config()), "none": []}}


def main() -> None:
    import torch
    import torchtitan
    _as_on_a_gpu()
    version = importlib.metadata.version("torchtitan")
    out = {"torchtitan": version, "torch": torch.__version__, "fields": fields(), "configs": {}}
    for module in MODULES:
        registry = importlib.import_module(f"torchtitan.models.{module}.config_registry")
        for name, function in sorted(inspect.getmembers(registry, inspect.isfunction)):
            if function.__module__ != registry.__name__ or name.startswith("_"):
                continue
            if inspect.signature(function).parameters:      # a helper that edits a config, not a config
                continue
            out["configs"][name] = {"module": module, **record(function)}
    assert os.path.basename(os.path.dirname(torchtitan.__file__)) == "torchtitan"
    print(json.dumps(out, indent=1, sort_keys=True))


if __name__ == "__main__":
    import importlib.metadata
    main()
