"""Copy Megatron-LM's own CI memory measurements into tests/data/megatron/ci (byte-exact, with
SOURCES.tsv): for each test case its H100 recipe lists on dgx_h100 (tests/test_utils/recipes/h100/
gpt.yaml, moe.yaml and mamba.yaml: the nodes and GPUs it runs on, the program: TRAINING_SCRIPT_PATH),
the case's model_config.yaml (its program's arguments) and golden_values_dev_dgx_h100.json
(``mem-max-allocated-bytes`` a step, torch's max allocated on the last rank: Megatron's tensorboard
writer is rank world_size - 1, global_vars.py:217). Inference, RL and quantization-aware distillation
cases, and the long "release" runs, are left out.

    python dev/collect_megatron_ci.py /path/to/Megatron-LM.git [COMMIT]
"""

from __future__ import annotations

import os
import subprocess
import sys

import yaml

COMMIT = "5be9626709af2722333bf54797c954c09edeada3"     # core_v0.19.0
OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "megatron", "ci")
RECIPES = ("tests/test_utils/recipes/h100/gpt.yaml", "tests/test_utils/recipes/h100/moe.yaml",
           "tests/test_utils/recipes/h100/mamba.yaml")     # the hybrid stack's cases (pretrain_hybrid.py)
LEFT_OUT = ("inference", "grpo", "release", "rl_", "_rl", "_QAD")    # QAD: NVFP4 distillation, student + teacher


def git(repo: str, *args: str) -> bytes:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True).stdout


def cases(repo: str, commit: str) -> dict[str, tuple[str, int, int]]:
    """Each H100 dev case: its model folder, nodes and GPUs a node."""
    out = {}
    for recipe in RECIPES:
        data = yaml.safe_load(git(repo, "show", f"{commit}:{recipe}"))
        spec = data["spec"]
        for product in data.get("products", []):
            for case in product.get("test_case", []):
                for run in product.get("products", [{}]):
                    platforms = run.get("platforms", spec.get("platforms"))
                    environments = run.get("environment", ["dev"])
                    if "dgx_h100" in str(platforms) and "dev" in str(environments) and \
                            not any(word in case for word in LEFT_OUT):
                        out[case] = (spec["model"], run.get("nodes", spec["nodes"]), run.get("gpus", spec["gpus"]))
    return out


def main(repo: str, commit: str = COMMIT) -> None:
    rows = ["file\trepo\tpath\tcommit\tblob\turl"]

    def copy(path: str, name: str) -> bool:
        try:
            data = git(repo, "show", f"{commit}:{path}")
        except subprocess.CalledProcessError:
            return False
        os.makedirs(os.path.dirname(os.path.join(OUT, name)), exist_ok=True)
        with open(os.path.join(OUT, name), "wb") as handle:
            handle.write(data)
        blob = git(repo, "rev-parse", f"{commit}:{path}").decode().strip()
        rows.append(f"{name}\tNVIDIA/Megatron-LM\t{path}\t{commit}\t{blob}\t"
                    f"https://github.com/NVIDIA/Megatron-LM/blob/{commit}/{path}")
        return True

    for recipe in RECIPES:
        copy(recipe, "recipes/" + os.path.basename(recipe))
    for case, (model, _, _) in sorted(cases(repo, commit).items()):
        folder = f"tests/functional_tests/test_cases/{model}/{case}"
        if copy(f"{folder}/golden_values_dev_dgx_h100.json", f"{case}/golden_values_dev_dgx_h100.json"):
            copy(f"{folder}/model_config.yaml", f"{case}/model_config.yaml")
    with open(os.path.join(OUT, "SOURCES.tsv"), "w") as handle:
        handle.write("\n".join(rows) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
