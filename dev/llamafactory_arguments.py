"""Dev-only: the argument names ``llamafactory-cli train`` accepts, per LLaMA-Factory release, for
``readers/llamafactory.py``'s unknown-key refusal ("Some keys are not used by the
HfArgumentParser"), written to ``vramlint/data/llamafactory_arguments.json``.

Each release's own dataclasses (hparams/model_args.py, data_args.py, finetuning_args.py,
generating_args.py, training_args.py, evaluation_args.py: every annotated field of every class) are
read from its wheel with ``ast``; the HF ``Seq2SeqTrainingArguments`` fields from the transformers
wheels of the range the releases pin (4.41.2 to 4.57.1, and 5.24.0 from data/hf_arguments.json):
a key any of them takes is not flagged, so a field a pinned transformers has is never refused.

    pip download llamafactory==0.9.X --no-deps -d DL; unzip each into SRC/0.9.X/whl
    pip download transformers==4.41.2 (4.46.1, 4.49.0, 4.52.4, 4.57.1) --no-deps -d TF
    python dev/llamafactory_arguments.py SRC TF > vramlint/data/llamafactory_arguments.json
"""

from __future__ import annotations

import json
import sys
import zipfile
from pathlib import Path

from vramlint.vendored import LLAMAFACTORY_HPARAMS as HPARAMS
from vramlint.vendored import argument_names as fields


def main(src: str, tf: str) -> None:
    releases = {}
    for folder in sorted(Path(src).iterdir()):
        hparams = folder / "whl" / "llamafactory" / "hparams"
        releases[folder.name] = sorted(set().union(*(fields((hparams / name).read_text()) for name in HPARAMS
                                                     if (hparams / name).is_file())))
    hf: set[str] = set()
    versions = []
    for wheel in sorted(Path(tf).glob("transformers-*.whl")):
        with zipfile.ZipFile(wheel) as z:
            hf |= fields(z.read("transformers/training_args.py").decode())
            hf |= fields(z.read("transformers/training_args_seq2seq.py").decode())
        versions.append(wheel.name.split("-")[1])
    current = json.loads((Path(__file__).resolve().parent.parent / "vramlint" / "data" / "hf_arguments.json").read_text())
    hf |= set(current["TrainingArguments"]) | set(current["Seq2SeqTrainingArguments"])
    versions.append(current["transformers"])
    doc = {"_about": "argument names llamafactory-cli train accepts, per release; built by dev/llamafactory_arguments.py",
           "transformers": versions, "hf_training_arguments": sorted(hf), "releases": releases}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
