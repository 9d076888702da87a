"""Which files a run looks at: the pre-commit hook's ``files`` / ``exclude`` patterns, which the
command line also walks directories with.

Every YAML, JSON and TOML file (torchtitan's job files) may be a training recipe, a DeepSpeed or Accelerate config or a vLLM
config, and content detection decides which (``readers.registry``): a file of none of these kinds is
skipped. Every shell and sbatch script may launch a job (``readers/launch.py`` says which); one that
launches none is skipped. What the patterns leave out are the files that are certainly something else and may be
large: tokenizer files, CI and editor settings, package manifests. ``config.yaml`` / ``config.json``
are walked: a recipe is often named so (alignment-handbook, SPIN), and a model's own config.json is
recognised by its keys and skipped (``readers.registry.skipped_because``).
"""

from __future__ import annotations

import re

FILES = r"(?i)\.(ya?ml|json|conf|toml|sh|bash|sbatch|slurm)$"
EXCLUDE = (r"(?i)((^|/)(\.github|\.gitlab|\.circleci|\.vscode|\.idea|node_modules|\.venv|venv|\.git)/"
           r"|(^|/)(tokenizer|tokenizer_config|generation_config|special_tokens_map|preprocessor_config"
           r"|adapter_config|hf_quant_config|quantize_config|package|package-lock|tsconfig|renovate|\.pre-commit-config"
           r"|\.pre-commit-hooks|docker-compose|compose|mkdocs|environment|\.readthedocs|codecov|dependabot|\.yamllint)"
           r"\.(ya?ml|json)$|\.index\.json$"
           r"|(^|/)(pyproject|Cargo|ruff|\.ruff|rustfmt|\.rustfmt|taplo|\.taplo|typos|_typos|\.typos|pixi|uv|poetry"
           r"|netlify|\.cargo/config|config)\.toml$)")
_FILES, _EXCLUDE = re.compile(FILES), re.compile(EXCLUDE)


def wanted(path: str) -> bool:
    """Whether the hook (and a directory walk) takes this path: posix, relative to the walk."""
    return bool(_FILES.search(path)) and not _EXCLUDE.search(path)


# What may state a job in a form vramlint does not read yet: Python configs (mmengine / xtuner
# style, ``configs/*.py``). Launch scripts (shell, sbatch) are read (``readers/shell.py``).
UNREAD = r"(?i)((^|/)configs?/.*\.py$|(^|/)[^/]*config[^/]*\.py$)"
_UNREAD = re.compile(UNREAD)


def unread(path: str) -> bool:
    """Whether a walked path may state jobs vramlint does not read (said when a run found none)."""
    return bool(_UNREAD.search(path)) and not _EXCLUDE.search(path) and "__init__" not in path


# The commands that start a training or serving job (the launchers readers/launch.py reads):
# a shell script that names none of them launches no job vramlint would check.
LAUNCHERS = frozenset({"torchrun", "deepspeed", "accelerate", "llamafactory-cli", "axolotl", "tune", "trl", "vllm",
                       "python", "python3", "torch.distributed.run", "torch.distributed.launch", "srun", "sbatch",
                       "sky", "dstack"})
_WORD = re.compile(r"[\w.\-]+")


def launches(text: str) -> bool:
    """Whether a script's text names a launcher as a word (a mention, not a parse: which job it
    launches is the launch reader's to say)."""
    return not LAUNCHERS.isdisjoint(_WORD.findall(text))


SCRIPTS = r"(?i)\.(sh|bash|sbatch|slurm)$"
_SCRIPTS = re.compile(SCRIPTS)


def script(path: str, text: str | None = None) -> bool:
    """Whether a path is a shell or sbatch script: by its name, or by its ``#!`` line where the
    text is at hand (a script read from standard input, or named without a suffix)."""
    return bool(_SCRIPTS.search(path)) or (text is not None and text.lstrip().startswith(_SHEBANG))


_SHEBANG = ("#!/bin/bash", "#!/usr/bin/env bash", "#!/bin/sh", "#!/usr/bin/bash", "#!/usr/bin/env sh")
