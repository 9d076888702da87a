"""LLaMA-Factory's own checks beyond its start-up refusals (those, read from the 0.9.1-0.9.5 wheels
into ``readers.llamafactory.refusals``, are reported with every framework's by
``rules.recipe.framework_refusals``): a recipe it loads but does not train.
"""

from __future__ import annotations

from collections.abc import Iterator

from vramlint.findings import WARNING, Finding
from vramlint.readers.llamafactory import no_do_train
from vramlint.readers.recipe import Keys, Recipe
from vramlint.rules.base import Rule

NOT_RUN = ("VL314", "training-not-run", WARNING)
RULES = (
    Rule(*NOT_RUN, summary="The file states a training job, but the framework will not train it as written: "
                           "LLaMA-Factory runs trainer.train only with do_train: true (its default is false; only "
                           "the Web UI sets it), so `llamafactory-cli train` loads the model and exits 0 without "
                           "training. The estimate is for the job the file states.",
         bad="stage: sft\nper_device_train_batch_size: 2", good="stage: sft\ndo_train: true\nper_device_train_batch_size: 2"),
)


def check_llamafactory(recipe: Recipe) -> Iterator[Finding]:
    """A training job LLaMA-Factory would not run (its refusals are ``rules.recipe.framework_refusals``)."""
    words = recipe.release
    unrun = no_do_train(Keys(recipe.document, words))
    if unrun is not None:
        yield Finding(*NOT_RUN, unrun.location, f"do_train is not true: {words} loads the model and the data and "
                      "trains nothing (trainer.train runs only under do_train); estimated as the training job the "
                      "file states", hint="do_train: true")
