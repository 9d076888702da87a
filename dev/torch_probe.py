"""Dev-only: what the scripts that watch transformers run on the CPU share.

``StorageWatch`` sees every storage an aten op creates (the parameters excepted) and the moment
the last tensor holding it dies — the CPU's stand-in for the CUDA caching allocator's mallocs and
frees. ``run_ranks`` runs one recording as N gloo ranks. ``each_in_fresh_process`` runs one case
per spawned process: the CPU allocator keeps what a previous model freed, and a dozen
default-size models would not fit in one process.

    pip install torch==2.13.0 transformers    # CPU build from local disk; never a vramlint dependency
"""

from __future__ import annotations

import json
import multiprocessing
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from transformers import CONFIG_MAPPING, AutoModelForCausalLM

DROPOUT = ("attn_pdrop", "resid_pdrop", "embd_pdrop", "attention_dropout", "hidden_dropout", "residual_dropout",
           "embedding_dropout")


class StorageWatch(TorchDispatchMode):
    """Calls ``on_new(ptr, nbytes, op)`` for each storage an aten op creates and ``on_free(ptr)``
    when the storage itself dies (``detail(tensor)``, where given, is passed to ``on_new`` too). The finalizer hangs on the storage (PyTorch keeps one Python
    object per storage), not on the tensors: a ``param.data = ...`` swap — DeepSpeed's way of
    partitioning — frees the old storage while the tensor object lives on."""

    def __init__(self, exclude: set[int], on_new: Callable[..., None],
                 on_free: Callable[[int], None], detail: Callable[[torch.Tensor], list] | None = None) -> None:
        super().__init__()
        self.exclude, self.on_new, self.on_free, self.detail = exclude, on_new, on_free, detail
        self.alive: set[int] = set()

    def _release(self, ptr: int) -> None:
        self.alive.discard(ptr)
        self.on_free(ptr)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_flatten(out)[0]:
            if not isinstance(tensor, torch.Tensor):
                continue
            try:
                storage = tensor.untyped_storage()
                ptr = storage.data_ptr()
            except (RuntimeError, NotImplementedError):   # a tensor subclass or a freed storage: no memory
                continue
            if not ptr or ptr in self.exclude or ptr in self.alive:
                continue
            self.alive.add(ptr)
            self.on_new(ptr, storage.nbytes(), str(func), *([self.detail(tensor)] if self.detail else []))
            weakref.finalize(storage, self._release, ptr)
        return out


def shrunk_config(model_type: str, widths: dict | None = None):
    """The type's default config with two layers, at most 8 routed experts (2 per token) and
    dropout off (the CPU's SDPA has no fused kernel with dropout); ``widths`` overrides the sizes
    the default sets (grouped KV heads become 2, full ones 8; a pad id beyond the vocabulary goes)."""
    raw = CONFIG_MAPPING[model_type]().to_dict()
    raw.pop("layer_types", None)
    over = {k: 2 for k in ("num_hidden_layers", "n_layer") if k in raw}
    if widths:
        over |= {k: v for k, v in widths.items() if raw.get(k) is not None}
        heads, kv = raw.get("num_attention_heads"), raw.get("num_key_value_heads")
        if kv:
            over["num_key_value_heads"] = 8 if kv == heads else 2
        if (raw.get("pad_token_id") or 0) >= widths.get("vocab_size", raw["vocab_size"]):
            over["pad_token_id"] = None
    over |= {k: 8 for k in ("num_experts", "num_local_experts", "n_routed_experts") if raw.get(k)}
    if (raw.get("num_experts_per_tok") or 0) > 2:
        over["num_experts_per_tok"] = 2
    over |= {k: 0.0 for k in DROPOUT if raw.get(k)}
    if model_type.startswith("deepseek"):
        over |= {"first_k_dense_replace": 0, "n_group": 1, "topk_group": 1}
    return CONFIG_MAPPING[model_type](**{**raw, **over})


def training_model(config, attn: str = "sdpa"):
    """A bf16 model in training mode, no cache; the type's fallback where it has no SDPA (gpt-oss:
    transformers raises and uses eager)."""
    try:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation=attn)
    except ValueError:
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16, attn_implementation="eager")
    model.train()
    model.config.use_cache = False
    return model


def parameter_storages(model: torch.nn.Module) -> set[int]:
    return {p.untyped_storage().data_ptr() for p in model.parameters()}


def _one_rank(rank: int, record: Callable, args: tuple, world: int, folder: str) -> None:
    """One data-parallel rank (torch.multiprocessing.spawn's entry): what the frameworks print goes
    to stderr, so that stdout stays the JSON; the trace goes to ``folder/<rank>.json``."""
    import os
    import warnings
    from pathlib import Path

    os.dup2(2, 1)
    warnings.filterwarnings("ignore")
    Path(folder, f"{rank}.json").write_text(json.dumps(record(*args, rank=rank, world=world)))


def run_ranks(record: Callable, args: tuple, world: int) -> list[dict]:
    """``record(*args, rank=r, world=world)`` in ``world`` spawned processes (gloo ranks); each
    rank's result, in rank order."""
    import tempfile
    from pathlib import Path

    import torch.multiprocessing as mp

    with tempfile.TemporaryDirectory() as folder:
        mp.spawn(_one_rank, args=(record, args, world, folder), nprocs=world)
        return [json.loads(Path(folder, f"{rank}.json").read_text()) for rank in range(world)]


def each_in_fresh_process(fn: Callable, cases: Iterable) -> Iterator:
    with multiprocessing.get_context("spawn").Pool(1, maxtasksperchild=1) as pool:
        yield from pool.imap(fn, cases)


def dump_cases(fn: Callable, cases: Iterable, shown: str) -> None:
    """Run ``fn`` on each case (it returns ``(key, entry)``), say ``entry[shown]`` on stderr as it
    goes, and write ``{key: entry}`` to stdout as JSON."""
    out = {}
    for key, entry in each_in_fresh_process(fn, cases):
        out[key] = entry
        print(key, entry[shown], file=sys.stderr)
    json.dump(out, sys.stdout, indent=1, sort_keys=True, default=str)
    print()
