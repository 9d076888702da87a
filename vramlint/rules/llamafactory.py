"""LLaMA-Factory's own start-up refusals, in its words, at the release the repository runs.

A memory verdict on a job the framework refuses to start is no help: ``llamafactory-cli train``
checks its arguments in ``hparams/parser.py`` (``get_train_args``) before it loads anything. The
conditions and messages are read from the 0.9.1-0.9.5 wheels (line numbers given for 0.9.5,
parser.py) into ``readers.llamafactory.refusals``; ``distributed`` is HF's
``ParallelMode.DISTRIBUTED``: more than one process.
"""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.findings import ERROR, WARNING, Finding
from vramlint.plan import LAUNCH_LIMITS, Plan
from vramlint.readers.llamafactory import no_do_train
from vramlint.readers.recipe import Keys, Recipe
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


def check_llamafactory(recipe: Recipe, plan: Plan) -> Iterator[Finding]:
    """The refusals of ``get_train_args`` this launch meets (the recipe's ``refusals`` at the
    release it is read as, tested against the plan), and a training job it would not run."""
    words = recipe.release
    for refusal in recipe.refusals:
        if LAUNCH_LIMITS[refusal.limit](plan):
            yield Finding(*REFUSED, recipe.document.locate(f"$.{refusal.key}"), f"{words} refuses to start: "
                          f"{refusal.message}", hint=refusal.hint)
    unrun = no_do_train(Keys(recipe.document, words))
    if unrun is not None:
        yield Finding(*NOT_RUN, unrun.location, f"do_train is not true: {words} loads the model and the data and "
                      "trains nothing (trainer.train runs only under do_train); estimated as the training job the "
                      "file states", hint="do_train: true")
