"""LLaMA-Factory's own start-up refusals, in its words, at the release the repository runs.

A memory verdict on a job the framework refuses to start is no help: ``llamafactory-cli train``
checks its arguments in ``hparams/parser.py`` (``get_train_args``) before it loads anything. The
conditions and messages are read from the 0.9.1-0.9.5 wheels (line numbers given for 0.9.5,
parser.py); ``distributed`` is HF's ``ParallelMode.DISTRIBUTED``: more than one process.
"""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.findings import ERROR, WARNING, Finding
from vramlint.plan import Plan
from vramlint.readers.llamafactory import no_do_train
from vramlint.readers.recipe import Keys, Recipe, truthy
from vramlint.rules.base import Rule

REFUSED = ("VL313", "framework-refuses-launch", ERROR)
NOT_RUN = ("VL314", "training-not-run", WARNING)
RULES = (
    Rule(*REFUSED, summary="The training framework refuses to start this job before it loads anything (LLaMA-Factory's "
                           "argument checks, quoted in the finding, at the release the repository runs): the memory "
                           "estimate is for a job that never starts.",
         bad="use_galore: true\ngalore_layerwise: true   # torchrun --nproc_per_node 8",
         good="use_galore: true\ngalore_layerwise: false"),
    Rule(*NOT_RUN, summary="The file states a training job, but the framework will not train it as written: "
                           "LLaMA-Factory runs trainer.train only with do_train: true (its default is false; only "
                           "the Web UI sets it), so `llamafactory-cli train` loads the model and exits 0 without "
                           "training. The estimate is for the job the file states.",
         bad="stage: sft\nper_device_train_batch_size: 2", good="stage: sft\ndo_train: true\nper_device_train_batch_size: 2"),
)


def _on(keys: Keys, *names: str) -> bool:
    return all(keys.has(n) and truthy(keys.raw(n)) for n in names)


def _refusals(keys: Keys, plan: Plan, release: tuple[int, ...]) -> Iterator[tuple[str, str]]:
    """(key, LLaMA-Factory's message) for each check of get_train_args the job fails."""
    distributed = plan.cluster.world_size > 1
    zero3 = plan.runtime == "deepspeed" and plan.zero_stage == 3
    if distributed and _on(keys, "use_galore", "galore_layerwise"):
        yield "galore_layerwise", "Distributed training does not support layer-wise GaLore."       # parser.py:389
    if distributed and release >= (0, 9, 2) and _on(keys, "use_apollo", "apollo_layerwise"):
        yield "apollo_layerwise", "Distributed training does not support layer-wise APOLLO."       # parser.py:392
    if distributed and _on(keys, "use_badam"):
        if str(keys.raw("badam_mode") or "layer") == "ratio":
            yield "badam_mode", "Radio-based BAdam does not yet support distributed training, use layer-wise BAdam."
        elif not zero3:
            yield "use_badam", "Layer-wise BAdam only supports DeepSpeed ZeRO-3 training."        # parser.py:398
    if plan.runtime == "deepspeed" and (_on(keys, "use_galore") or _on(keys, "use_apollo")):
        yield ("use_galore" if _on(keys, "use_galore") else "use_apollo",
               "GaLore and APOLLO are incompatible with DeepSpeed yet." if release >= (0, 9, 2)
               else "GaLore is incompatible with DeepSpeed yet.")
    if zero3 and _on(keys, "pure_bf16"):
        yield "pure_bf16", "`pure_bf16` is incompatible with DeepSpeed ZeRO-3."                     # parser.py:385
    if keys.has("global_batch_size"):
        yield "global_batch_size", "Some keys are not used by the HfArgumentParser: ['global_batch_size']"


def check_llamafactory(recipe: Recipe, plan: Plan, release: tuple[int, ...], words: str) -> Iterator[Finding]:
    """The refusals of ``get_train_args`` this job meets, and a training job it would not run."""
    keys = Keys(recipe.document, words)
    for key, message in _refusals(keys, plan, release):
        yield Finding(*REFUSED, recipe.document.locate(f"$.{key}"), f"{words} refuses to start: {message}",
                      hint="no launch of this file starts until this changes; its memory estimate is moot")
    unrun = no_do_train(keys)
    if unrun is not None:
        yield Finding(*NOT_RUN, unrun.location, f"do_train is not true: {words} loads the model and the data and "
                      "trains nothing (trainer.train runs only under do_train); estimated as the training job the "
                      "file states", hint="do_train: true")
