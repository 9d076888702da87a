"""torchtitan 0.3.0 jobs: ``-m torchtitan.train --module M --config F [--section.field V ...]`` →
the values a torchtitan job file states, for readers/torchtitan.py to read as it reads a TOML job.

torchtitan 0.3.0 dropped its TOML files (pytorch/torchtitan#2386): ``--config F`` names a function of
``torchtitan.models.M.config_registry`` whose ``Trainer.Config`` is the job, and the line's
``--section.field`` arguments are laid over it (torchtitan/config/manager.py:48-159, "CLI over the
registry function"). vramlint runs no Python: each shipped function's result is recorded from the
wheel (dev/torchtitan_registry.py → data/torchtitan_0.3.0_registry.json) and laid under the line's
arguments here, named where it comes from (``llama3_8b`` at models/llama3/config_registry.py:184).

What 0.3.0 says differently from 0.2.2's files, translated into the job file's keys:
- activation checkpointing is a class (``FullAC`` / ``SelectiveAC`` / ``MemoryBudgetAC`` / none),
  picked on the line by tyro's subcommand ``activation-checkpoint:full``; ``SelectiveAC`` is per op
  only (distributed/activation_checkpoint.py:185-287);
- the loss is ``ChunkedLossWrapper`` (``loss.num_chunks``, 8) over the output projection, or a whole
  ``CrossEntropyLoss``; loss parallel is always on under TP;
- float8 / MX / NVFP4 training is the model's converted linears (a config function's choice);
- CUDA graphs capture forward and backward unless ``training.disable_cuda_graphs``.
A function that is not shipped (the user's own ``--module``), or a model vramlint has no runtime for
(mixture-of-experts, MLA, gpt-oss), is named as such: never priced as something else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from vramlint.documents import Document
from vramlint.packaged import data_json
from vramlint.readers.deepspeed import Fact
from vramlint.readers.recipe import MISSING, Keys, Refusal, walk

VERSION = "torchtitan 0.3.0"
REGISTRY = "torchtitan_0.3.0_registry.json"
MODELLED = ("llama3", "qwen3")          # dense decoders with grouped-query attention, over the torchtitan runtime
AC_CLASSES = {"FullAC.Config": "full", "SelectiveAC.Config": "selective", "MemoryBudgetAC.Config": "memory_budget",
              None: "none"}
QUANTIZED = ("Float8", "MXFP8", "NVFP4")


def is_registry_job(data: Any) -> bool:
    """A launch line's arguments that name a registry config (``--module`` / ``--config``)."""
    return isinstance(data, dict) and isinstance(data.get("config", data.get("module")), str)


def registry() -> dict:
    return data_json(REGISTRY)["configs"]


def unrecognized(document: Document, entry: dict) -> tuple[Refusal, ...]:
    """tyro's refusal of a line's field that 0.3.0's config has not, in the sections vramlint reads
    (training, parallelism, compile, the loss's and the checkpointing class's own; any ``--model.*``,
    which 0.2.2 took and 0.3.0 leaves to the config function, and ``--job.config_file``): the job
    would not start, or is a later torchtitan's, whose flag means what 0.3.0 cannot say."""
    fields = data_json(REGISTRY)["fields"]
    stated = document.data.get("activation_checkpoint")
    mode = (stated.get("mode") if isinstance(stated, dict) else None) or \
        AC_CLASSES.get(entry["activation_checkpoint"]["class"])
    known = {"training": fields["training"], "parallelism": fields["parallelism"], "compile": fields["compile"],
             "loss": fields["loss"].get(entry["loss"]["class"], []),
             "activation_checkpoint": [*fields["activation_checkpoint"].get(str(mode), []), "mode"],
             "model": [], "job": []}        # model_spec is tyro.conf.Suppress (trainer.py:75-77); no TOML file
    for section, names in known.items():
        for name in _dotted(document.data.get(section)):
            if name not in names:
                key = f"{section}.{name}"
                return (Refusal("always", key, f"Unrecognized options: --{key} (torchtitan 0.3.0's {section} has no "
                                               "such field: tyro exits 2; a later torchtitan's flag?)"),)
    return ()


def _dotted(node: Any, prefix: str = "") -> list[str]:
    """A nested mapping's leaf keys, dotted (``loss_fn.global_vocab_size``)."""
    if not isinstance(node, dict):
        return []
    out = []
    for key, value in node.items():
        out += _dotted(value, f"{prefix}{key}.") if isinstance(value, dict) else [f"{prefix}{key}"]
    return out


class LayeredKeys(Keys):
    """The line's values over the registry function's (``base``, in the job file's keys), over the
    framework's defaults. A value the function sets is stated by the line's ``--config`` word (where
    a user changes it: another function, or an argument over it)."""

    def __init__(self, document: Document, base: dict, anchor: Fact) -> None:
        super().__init__(document, f"{VERSION} default")
        self.base, self.anchor = base, anchor

    def _base(self, path: str) -> Any:
        value = walk(self.base, path)
        return None if value is MISSING else value

    def get(self, *paths: str, default: Any = None, convert=None, why: str = "") -> Fact:
        fact = super().get(*paths, default=default, convert=convert, why=why)
        if fact.from_file:
            return fact
        for path in paths:
            value = self._base(path)
            if value is not None:
                return Fact(convert(value) if convert else value, self.anchor.location)
        return fact

    def has(self, *paths: str) -> bool:
        return super().has(*paths) or any(self._base(p) is not None for p in paths)


def _job_keys(entry: dict) -> dict:
    """A registry entry in the job file's keys (readers/torchtitan.py reads those)."""
    model = entry["model"]
    converters = [name for name in QUANTIZED if any(linear.startswith(name) for linear in model["linears"])]
    ac = entry["activation_checkpoint"]
    loss = entry["loss"]
    return {
        "model": {"name": model["name"], "flavor": model["flavor"], "converters": [c.lower() for c in converters]},
        "training": dict(entry["training"]),
        "parallelism": {**entry["parallelism"], "disable_loss_parallel": False},
        "activation_checkpoint": {"mode": AC_CLASSES.get(ac["class"], str(ac["class"])), "selective_ac_option": "op"},
        "compile": dict(entry["compile"]),
        "loss": {"num_chunks": loss["num_chunks"] if loss["class"].startswith("Chunked") else 0},
        "optimizer": {"name": entry["optimizer"]["name"], "implementation": entry["optimizer"]["implementation"]},
    }


def model_config(entry: dict) -> dict | None:
    """The registry model as the Hugging Face config of the same shapes (llama3: LlamaForCausalLM;
    qwen3: Qwen3ForCausalLM, q/k norms over head_dim, its own head_dim), or None where vramlint has
    no runtime for it (``unpriced`` says why)."""
    m = entry["model"]
    if unpriced(entry):
        return None
    qwen = m["name"] == "qwen3"
    return {"model_type": "qwen3" if qwen else "llama",
            "architectures": ["Qwen3ForCausalLM" if qwen else "LlamaForCausalLM"],
            "hidden_size": m["dim"], "num_hidden_layers": m["layers"], "num_attention_heads": m["heads"],
            "num_key_value_heads": m["kv_heads"], "head_dim": m["head_dim"], "intermediate_size": m["ffn"],
            "vocab_size": m["vocab_size"], "tie_word_embeddings": m["tied"], "rms_norm_eps": m["norm_eps"],
            "rope_theta": m["rope_theta"], "max_position_embeddings": m["max_seq_len"], "torch_dtype": "bfloat16",
            "hidden_act": "silu"}


def unpriced(entry: dict) -> str:
    """Why a shipped config's model has no runtime here ("" where it has one)."""
    m = entry["model"]
    if m["name"] not in MODELLED:
        return f"{m['name']} is not modelled for torchtitan yet (its dense llama3 and qwen3 models are)"
    if m["moe_layers"]:
        return (f"a mixture-of-experts model ({m['moe_layers']} of {m['layers']} layers): torchtitan's experts and "
                "their expert parallelism are not modelled yet")
    if m["attention"] != "GQAttention" or any(name.startswith(("_get_lora", "Frozen")) for name in m["linears"]):
        return f"{m['attention']} with {', '.join(m['linears'])}: not modelled yet"
    return ""


@dataclass(frozen=True)
class StatedJob:
    """What a torchtitan job states (a 0.2.2 file, or a 0.3.0 line over its config function): its
    keys, the model, its Hugging Face config (None: not priced, ``unpriced`` says why), a note
    naming the config function, and tyro's refusals of the line's fields."""

    keys: Keys
    model: Fact
    config: dict | None = None
    unpriced: str = ""
    note: str = ""
    refusals: tuple = ()


def read_keys(document: Document) -> StatedJob:
    """The job a ``--module`` / ``--config`` line names, or why none can be priced."""
    keys = Keys(document, VERSION)
    module, config = keys.get("module"), keys.get("config")
    unnamed = Fact(f"{VERSION} {module.value or '?'}.{config.value or '?'}",
                   (config if config.from_file else module).location)
    if module.value is None or config.value is None:
        missing = "module" if module.value is None else "config"
        if missing in document.unknown:       # the line names it through what only the run knows ($CONFIG)
            return StatedJob(keys, unnamed, unpriced=f"--{missing} is known only when the script runs: the config "
                                                       "function, and so the job, is the run's to know")
        return StatedJob(keys, unnamed, unpriced=f"--{missing} is required (torchtitan/config/manager.py:85-92)")
    modules = sorted({one["module"] for one in registry().values()})
    short = str(module.value).removeprefix("torchtitan.models.")
    if short not in modules:
        return StatedJob(keys, unnamed, unpriced=(
            f"--module {module.value}: vramlint reads torchtitan 0.3.0's own model registries ({', '.join(modules)}), "
            "not this module's configs (an experiment's trainer, torchtitan_recipes or a module of your own: "
            "known only when it runs)"))
    entry = registry().get(str(config.value))
    if entry is None or entry["module"] != short:
        return StatedJob(keys, unnamed, unpriced=(
            f"{config.value} is not a config function torchtitan 0.3.0 ships in torchtitan.models.{short}; "
            "vramlint reads no Python (a config of your own is known only when it runs)"))
    m = entry["model"]
    return StatedJob(LayeredKeys(document, _job_keys(entry), config),
                       Fact(f"torchtitan {m['name']} {m['flavor']}", unnamed.location), model_config(entry),
                       unpriced(entry), f"{VERSION}: the job is {config.value} ({entry['source']}) with the line's "
                                        "arguments over it", unrecognized(document, entry))


__all__ = ["VERSION", "LayeredKeys", "StatedJob", "is_registry_job", "model_config", "read_keys", "registry",
           "unpriced"]
