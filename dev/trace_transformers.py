"""Dev-only: one training step's storages under whichever transformers is installed, to tell what
one release keeps alive that another does not (tests/data/tf*_*.json, tests/test_transformers_versions.py).

The event stream of dev/trace_allocations.py (``["alloc", id, bytes, op, shape, dtype, site]`` /
``["free", id]``, replayable with ``trace_allocations.py --replay``), each allocation with its
shape, dtype and the innermost transformers or torch.nn frame that ran the op ("<backward>" for
autograd's), and marks at the end of forward, backward and the optimizer step. Two AdamW steps,
as a plain loop runs them: ``model(input_ids=ids, labels=ids)``, the output dropped before
backward, ``zero_grad(set_to_none=True)``.

    python -m venv /tmp/tf457 && /tmp/tf457/bin/pip install torch==2.13.0 transformers==4.57.6
    /tmp/tf457/bin/python dev/trace_transformers.py llama bf16_adamw 2 512 > tf457_llama_bf16_adamw_b2s512.json
      MODEL: llama | qwen2 | mistral (hidden 256, 4 layers, 8 heads, 2 KV heads, FFN 688, vocab 32000)
             llama1b (Llama-3.2-1B's widths; lN for N of its layers)
      KIND:  bf16_adamw | amp_adamw;  gc: checkpointing (non-reentrant)
      mask:  pass attention_mask (all ones, as a collator does);  cache: leave use_cache at True
"""

from __future__ import annotations

import itertools
import json
import sys
import traceback
import warnings

import torch
from torch_probe import StorageWatch

TINY = dict(hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
            num_key_value_heads=2, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False)
MODELS = {"llama": ("llama", TINY), "qwen2": ("qwen2", TINY), "mistral": ("mistral", {**TINY, "sliding_window": None}),
          "llama1b": ("llama", dict(hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                                    num_attention_heads=32, num_key_value_heads=8, head_dim=64, vocab_size=128256,
                                    max_position_embeddings=131072, rope_theta=500000.0, tie_word_embeddings=True))}


def site() -> str:
    """The innermost transformers (else torch.nn / checkpoint / optim) frame that ran the op."""
    frames = traceback.extract_stack()[:-4]
    for inside in (lambda f: "/transformers/" in f,
                   lambda f: "/torch/" in f and any(k in f for k in ("/nn/", "checkpoint", "/optim/"))):
        for frame in reversed(frames):
            if inside(frame.filename):
                root = "transformers" if "/transformers/" in frame.filename else "torch"
                return f"{root}/{frame.filename.split(f'/{root}/', 1)[1]}:{frame.lineno}:{frame.name}"
    return "<backward>" if torch._C._current_graph_task_id() != -1 else "<script>"


def describe(tensor: torch.Tensor) -> list:
    return [list(tensor.shape), str(tensor.dtype).replace("torch.", ""), site()]


def record(name: str, kind: str, batch: int, seq: int, opts: set[str], layers: int | None) -> dict:
    import transformers
    from transformers import AutoConfig, AutoModelForCausalLM

    model_type, widths = MODELS[name]
    widths = {**widths, **({"num_hidden_layers": layers} if layers else {})}
    config = AutoConfig.for_model(model_type, **widths, attention_dropout=0.0)
    dtype = torch.float32 if kind == "amp_adamw" else torch.bfloat16
    release = tuple(int(part) for part in transformers.__version__.split(".")[:2])
    keyword = "dtype" if release >= (4, 56) else "torch_dtype"
    model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa", **{keyword: dtype})
    model.config.use_cache = "cache" in opts
    if "gc" in opts:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    exclude = {p.untyped_storage().data_ptr() for p in model.parameters()}
    torch.manual_seed(0)
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    mask = torch.ones_like(ids) if "mask" in opts else None
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "setup": dict(model=name, model_type=model_type, kind=kind, batch=batch, seq=seq, checkpointing="gc" in opts,
                         attention_mask="mask" in opts, use_cache_default="cache" in opts, config=widths),
           "params": [p.untyped_storage().nbytes() for p in model.parameters()], "steps": [], "marks": []}
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, foreach=True)
    for _ in range(2):
        events, ids_of, marks, count = [], {}, {}, itertools.count()

        def on_new(ptr, nbytes, op, detail, events=events, ids_of=ids_of, count=count):   # this step's lists:
            ids_of[ptr] = next(count)                                  # a storage may die in the next step
            events.append(["alloc", ids_of[ptr], nbytes, op, *detail])

        def on_free(ptr, events=events, ids_of=ids_of):
            events.append(["free", ids_of.pop(ptr)])

        with StorageWatch(exclude, on_new, on_free, describe):
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=kind == "amp_adamw"):
                loss = model(input_ids=ids, attention_mask=mask, labels=ids).loss
            marks["forward_end"] = len(events)
            loss.backward()
            del loss
            marks["backward_end"] = len(events)
            optimizer.step()
            marks["step_end"] = len(events)
            optimizer.zero_grad(set_to_none=True)
        out["steps"].append(list(events))   # a copy: Adam's states die with the optimizer, after the steps
        out["marks"].append(marks)
    return out


def main() -> None:
    warnings.filterwarnings("ignore")
    name, kind, batch, seq, *rest = sys.argv[1:]
    torch.set_num_threads(2)
    layers = next((int(o[1:]) for o in rest if o[0] == "l" and o[1:].isdigit()), None)
    json.dump(record(name, kind, int(batch), int(seq), set(rest), layers), sys.stdout)
    print()


if __name__ == "__main__":
    main()
