"""Dev-only: verl's PPO trainer defaults, read from the wheel's own composed config
(``verl/trainer/config/_generated_ppo_trainer.yaml``: ``ppo_trainer.yaml`` with every worker config
its Hydra ``defaults`` list pulls in, flattened by verl's ``scripts/generate_trainer_config.sh``;
``_generated_ppo_megatron_trainer.yaml`` the same under ``model_engine=megatron``), with the
profiler sections (no memory in them) left out: vramlint/data/verl_ppo_trainer.json and
verl_ppo_megatron_trainer.json, which readers/verl.py lays a job's own config and overrides over.
Interpolations (``${oc.select:actor_rollout_ref.rollout.n,1}``) are kept as written; the reader
resolves them.

    pip download verl==0.9.1 --no-deps -d wheels
    python dev/verl_defaults.py wheels/verl-0.9.1-py3-none-any.whl > vramlint/data/verl_ppo_trainer.json
    python dev/verl_defaults.py wheels/verl-0.9.1-py3-none-any.whl megatron \
        > vramlint/data/verl_ppo_megatron_trainer.json
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile

import yaml

# model_engine -> the composed config verl generates for it
CONFIGS = {"dp": "verl/trainer/config/_generated_ppo_trainer.yaml",
           "megatron": "verl/trainer/config/_generated_ppo_megatron_trainer.yaml"}
DROPPED = ("profiler", "global_profiler", "trace", "prometheus", "checkpoint", "transfer_queue", "sandbox_fusion",
           "turbo_config", "qat", "val_kwargs", "custom_reward_function", "distillation")


def trimmed(node):
    if isinstance(node, dict):
        return {key: trimmed(value) for key, value in node.items() if key not in DROPPED}
    return node


def main(wheel_path: str, engine: str = "dp") -> None:
    release = re.search(r"verl-([0-9.]+(?:\.post\d+)?)-", wheel_path).group(1)
    config = CONFIGS[engine]
    with zipfile.ZipFile(wheel_path) as wheel:
        text = wheel.read(config).decode()
    out = {"source": f"verl {release} {config}, via dev/verl_defaults.py",
           "release": release, "wheel_sha256": hashlib.sha256(open(wheel_path, "rb").read()).hexdigest(),
           "config": trimmed(yaml.safe_load(text))}
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(*sys.argv[1:3])
