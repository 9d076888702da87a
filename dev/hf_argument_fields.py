"""Dev-only: the argument names HfArgumentParser knows in a TRL / HF ``TrainingArguments`` recipe,
written to ``vramlint/data/hf_arguments.json`` so the HF reader can name the keys a file sets that
no dataclass of transformers or TRL has (a project's own keys, or typos) without importing either.

transformers' ``TrainingArguments`` is read from the installed package (the test extra pins
5.24.0); TRL's config classes from its wheel's source, without importing it (its field names are
the annotated assignments of each ``@dataclass`` class body)::

    pip download trl==1.16.0 --no-deps -d /tmp/trl && unzip -q /tmp/trl/trl-1.16.0-*.whl -d /tmp/trl/src
    python dev/hf_argument_fields.py /tmp/trl/src > vramlint/data/hf_arguments.json
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from vramlint.vendored import class_fields

TRL_FILES = ("trainer/base_config.py", "trainer/sft_config.py", "trainer/dpo_config.py", "trainer/grpo_config.py",
             "trainer/kto_config.py", "trainer/reward_config.py", "trainer/rloo_config.py",
             "trainer/distillation_config.py", "trainer/model_config.py", "scripts/utils.py")


def main(trl_src: str) -> None:
    import transformers
    from transformers import Seq2SeqTrainingArguments, TrainingArguments
    trl_root = Path(trl_src) / "trl"
    metadata = next(Path(trl_src).glob("trl-*.dist-info/METADATA"))
    version = next(line.split(":", 1)[1].strip() for line in metadata.read_text().splitlines()
                   if line.startswith("Version:"))
    trl: dict[str, list[str]] = {}
    for name in TRL_FILES:
        for cls, names in class_fields((trl_root / name).read_text(encoding="utf-8")).items():
            trl[cls] = names
    doc = {
        "_about": "argument names of transformers' TrainingArguments and TRL's config dataclasses; built by "
                  "dev/hf_argument_fields.py",
        "transformers": transformers.__version__,
        "trl": version,
        "TrainingArguments": sorted(f.name for f in dataclasses.fields(TrainingArguments)),
        "Seq2SeqTrainingArguments": sorted({f.name for f in dataclasses.fields(Seq2SeqTrainingArguments)}
                                           - {f.name for f in dataclasses.fields(TrainingArguments)}),
        "trl_fields": {cls: sorted(names) for cls, names in sorted(trl.items())},
    }
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1])
