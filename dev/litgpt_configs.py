"""Dev-only: LitGPT's model configs, as vramlint reads them (vramlint/data/litgpt_configs.json).

LitGPT names a model by its own config (``litgpt/config.py`` ``configs``; a checkpoint directory
``checkpoints/<org>/<name>`` loads ``Config.from_name(<name>)``'s ``model_config.yaml``), and runs
its own model code on it. This writes, for each config of litgpt 0.5.13, the fields that decide
its shapes and what its code keeps (models/litgpt.py turns them into a config.json of the same
shapes), the Hugging Face repository it converts from, and its parameter count as LitGPT's
``GPT`` builds it (on the meta device).

    python3 -m venv /tmp/lgv && /tmp/lgv/bin/pip install torch==2.13.0 litgpt==0.5.13
    /tmp/lgv/bin/python dev/litgpt_configs.py > vramlint/data/litgpt_configs.json
"""

from __future__ import annotations

import json
import sys

import torch
from litgpt.config import Config, configs
from litgpt.model import GPT

FIELDS = ("block_size", "n_layer", "n_embd", "n_head", "head_size", "n_query_groups", "intermediate_size",
          "padded_vocab_size", "vocab_size", "mlp_class_name", "norm_class_name", "parallel_residual",
          "shared_attention_norm", "bias", "attn_bias", "lm_head_bias", "rotary_percentage", "norm_qk",
          "post_attention_norm", "post_mlp_norm", "attention_logit_softcapping", "final_logit_softcapping",
          "sliding_window_size", "n_expert", "n_expert_per_token", "moe_intermediate_size", "n_shared_expert",
          "latent_attention", "gelu_approximate", "scale_embeddings")


def main() -> None:
    from importlib.metadata import version
    out = {}
    for entry in configs:
        c = Config.from_name(entry["name"])
        hf = c.hf_config or {}
        fields = {k: getattr(c, k) for k in FIELDS if getattr(c, k) not in (None, False)}
        if isinstance(fields.get("latent_attention"), dict):
            fields["latent_attention"] = True
        with torch.device("meta"):
            params = sum(p.numel() for p in GPT(c).parameters())
        out[c.name] = {"hf": f"{hf['org']}/{hf['name']}" if hf else None, "params": params, **fields}
    json.dump({"source": f"litgpt {version('litgpt')} litgpt/config.py", "configs": out}, sys.stdout, indent=0,
              sort_keys=True)
    print()


if __name__ == "__main__":
    main()
