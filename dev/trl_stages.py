"""Dev-only: what TRL 1.16.0's trainers run, recorded on the CPU with a tiny llama (tests/data/trl_stages.json).

Verify on CPU with real TRL 1.16.0 + tiny llama:
 (a) DPO forward batch is 2xB (chosen+rejected concatenated), ref forward also 2xB under no_grad
 (b) DPO with PEFT and no ref_model creates no second model
 plus: full-FT DPO ref dtype, precompute_ref_log_probs, KTO layout, Reward 2xB, GRPO batch/generation shapes, beta=0.
"""
import gc, json, os, sys, warnings
os.environ.setdefault("HF_HUB_OFFLINE", "1"); os.environ.setdefault("TQDM_DISABLE", "1")
warnings.filterwarnings("ignore")
import torch
from datasets import Dataset
from transformers import AutoTokenizer, LlamaForCausalLM, LlamaForSequenceClassification, LlamaModel
from peft import LoraConfig
import trl
from trl import DPOConfig, DPOTrainer, KTOConfig, KTOTrainer, RewardConfig, RewardTrainer, GRPOConfig, GRPOTrainer

P = "/tmp/stages_tiny"
tok = AutoTokenizer.from_pretrained(P)
OUT = "/tmp/stages_out"
results = {"trl": trl.__version__, "torch": torch.__version__}
calls = []

def hook_all():
    """Record every LlamaModel forward: id, batch shape, grad enabled."""
    handles = []
    for obj in gc.get_objects():
        if isinstance(obj, LlamaModel):
            def pre(mod, args, kwargs):
                ids = kwargs.get("input_ids", args[0] if args else None)
                shape = list(ids.shape) if ids is not None else list(kwargs["inputs_embeds"].shape[:2])
                calls.append({"module": id(mod), "shape": shape, "grad": torch.is_grad_enabled()})
            handles.append(obj.register_forward_pre_hook(pre, with_kwargs=True))
    return handles

def n_models():
    return sum(isinstance(o, (LlamaForCausalLM, LlamaForSequenceClassification)) for o in gc.get_objects())

def pref_ds(n=8):
    return Dataset.from_list([{"prompt": "w1 w2 w3" + " w4" * (i % 3), "chosen": " w5 w6" + " w7" * i,
                               "rejected": " w8" + " w9" * (2 * i % 5)} for i in range(n)])

common = dict(output_dir=OUT, max_steps=1, report_to=[], use_cpu=True, bf16=False, logging_steps=1,
              save_strategy="no", gradient_checkpointing=False, dataloader_num_workers=0)

def run_dpo(tag, peft=False, **kw):
    global calls
    gc.collect(); before = n_models(); calls = []
    args = DPOConfig(per_device_train_batch_size=2, **common, **kw)
    tr = DPOTrainer(model=P, args=args, processing_class=tok, train_dataset=pref_ds(),
                    peft_config=LoraConfig(r=4, target_modules=["q_proj", "v_proj"]) if peft else None)
    gc.collect(); after = n_models()
    pol = tr.model.get_base_model() if peft else tr.model
    info = {"models_created": after - before, "ref_model_is_None": tr.ref_model is None,
            "policy_dtype": str(pol.dtype),
            "ref_dtype": None if tr.ref_model is None else str(next(tr.ref_model.parameters()).dtype)}
    calls = []; hs = hook_all(); tr.train(); [h.remove() for h in hs]
    pol_id = id(pol.model)
    info["forwards"] = [{"who": "policy" if c["module"] == pol_id else "ref_model", "shape": c["shape"],
                         "grad": c["grad"]} for c in calls]
    results[tag] = info; del tr; gc.collect()

run_dpo("dpo_full_ft")                                   # default: separate ref copy
run_dpo("dpo_peft", peft=True)                           # (b) no second model
run_dpo("dpo_full_ft_precompute", precompute_ref_log_probs=True)
run_dpo("dpo_full_ft_bf16_init", model_init_kwargs={"dtype": "bfloat16"})

# KTO
gc.collect(); before = n_models(); calls = []
kds = Dataset.from_list([{"prompt": "w1 w2 w3", "completion": " w5" * (1 + i % 3), "label": bool(i % 2)} for i in range(8)])
tr = KTOTrainer(model=P, args=KTOConfig(per_device_train_batch_size=2, **common), processing_class=tok, train_dataset=kds)
gc.collect(); info = {"models_created": n_models() - before, "ref_model_is_None": tr.ref_model is None}
hs = hook_all(); tr.train(); [h.remove() for h in hs]
pid = id(tr.model.model)
info["forwards"] = [{"who": "policy" if c["module"] == pid else "ref_model", "shape": c["shape"], "grad": c["grad"]} for c in calls]
results["kto_full_ft"] = info; del tr; gc.collect()

# Reward
calls = []
tr = RewardTrainer(model=P, args=RewardConfig(per_device_train_batch_size=2, **common), processing_class=tok,
                   train_dataset=Dataset.from_list([{"chosen": "w1 w2 w3" + " w4" * i, "rejected": "w1 w5"} for i in range(8)]))
hs = hook_all(); tr.train(); [h.remove() for h in hs]
results["reward"] = {"score_head": list(tr.model.score.weight.shape), "dtype": str(tr.model.dtype),
                     "forwards": [{"shape": c["shape"], "grad": c["grad"]} for c in calls]}
del tr; gc.collect()

# GRPO: pdtbs=4 completions, num_generations=2, GA=2 -> generation batch 8 per device
def reward_len(completions, **kw):
    return [float(len(c)) for c in completions]
for beta in (0.0, 0.04):
    gc.collect(); before = n_models(); calls = []
    args = GRPOConfig(per_device_train_batch_size=4, gradient_accumulation_steps=2, num_generations=2,
                      max_completion_length=6, beta=beta, **common)
    tr = GRPOTrainer(model=P, reward_funcs=reward_len, args=args, processing_class=tok,
                     train_dataset=Dataset.from_list([{"prompt": "w1 w2" + " w3" * i} for i in range(16)]))
    gc.collect(); info = {"models_created": n_models() - before, "ref_model_is_None": tr.ref_model is None,
                          "generation_batch_size": args.generation_batch_size, "steps_per_generation": args.steps_per_generation}
    hs = hook_all(); tr.train(); [h.remove() for h in hs]
    pid = id(tr.model.model)
    info["forwards"] = [{"who": "policy" if c["module"] == pid else "ref_model", "shape": c["shape"], "grad": c["grad"]} for c in calls]
    results[f"grpo_beta{beta}"] = info; del tr; gc.collect()

json.dump(results, open(sys.argv[1] if len(sys.argv) > 1 else "/tmp/stages_verify.json", "w"), indent=1)
print(json.dumps(results, indent=1)[:6000])
