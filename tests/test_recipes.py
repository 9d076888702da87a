"""Training recipes: real files of TRL/HF, axolotl, LLaMA-Factory and torchtune (tests/data/recipes,
sources in SOURCES-*.tsv), read into the facts their frameworks run with, told apart from the
DeepSpeed, Accelerate and vLLM files they sit beside, and checked as one job with the files they
name."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest

from conftest import CORPUS, DATA, ROOT, shared_or_skip
from vramlint.cli import main
from vramlint.documents import ParseError, parse_json, parse_yaml
from vramlint.readers.registry import RECIPES, detect

sys.path.insert(0, str(ROOT / "dev"))
from golden_recipes import facts  # noqa: E402

RECIPE_DATA = DATA / "recipes"
GOLDEN = json.loads((DATA / "golden" / "recipe_facts.json").read_text())
LAUNCHER_KINDS = {"ds-config": "deepspeed", "accelerate-config": "accelerate", "fsdp-config": "accelerate"}


def sources() -> dict[str, str]:
    """Every collected file (relative to tests/data/recipes) -> its kind in the SOURCES files."""
    out = {}
    for tsv in sorted(RECIPE_DATA.glob("SOURCES-*.tsv")):
        for line in tsv.read_text().splitlines()[1:]:
            cols = line.split("\t")
            out.setdefault(cols[0], cols[5])
    return out


SOURCES = sources()
TRAINING = sorted(p for p, kind in SOURCES.items() if kind.startswith("train-"))


def parsed(path: Path):
    text = path.read_text(encoding="utf-8")
    return (parse_json if path.suffix in (".json", ".conf") else parse_yaml)(text, str(path))


def check(capsys, *args) -> tuple[int, dict]:
    code = main(["check", *map(str, args), "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_the_collection_is_large_and_sourced():
    """Each file named with its repository, path and commit (or the PyPI wheel it was read from)."""
    frameworks = {tsv.stem.split("-", 1)[1] for tsv in RECIPE_DATA.glob("SOURCES-*.tsv")}
    assert frameworks == {"trl", "axolotl", "llamafactory", "torchtune", "dialects"}   # dialects: HfArgumentParser
    for tsv in RECIPE_DATA.glob("SOURCES-*.tsv"):                                          # projects' own files
        rows = [line.split("\t") for line in tsv.read_text().splitlines()[1:]]
        assert sum(1 for r in rows if r[5].startswith("train-")) >= (6 if "dialects" in tsv.name else 15), tsv.name
        for local, repo, path, commit, how, *_ in rows:
            assert (RECIPE_DATA / local).is_file() and "/" in repo and path
            assert len(commit) == 40 or (how.startswith("pypi") and commit.endswith(".whl")), local


@pytest.mark.parametrize("rel", sorted(GOLDEN))
def test_recipe_facts_and_the_lines_they_come_from(rel):
    assert facts(RECIPE_DATA / rel) == GOLDEN[rel]


def test_every_framework_has_fifteen_training_recipes_in_the_golden_facts():
    counts: dict[str, int] = {}
    for entry in GOLDEN.values():
        if entry["task"] == "train":
            counts[entry["framework"]] = counts.get(entry["framework"], 0) + 1
    assert all(counts[name] >= 15 for name in ("trl", "axolotl", "llamafactory", "torchtune")), counts


@pytest.mark.parametrize("rel", sorted(SOURCES))
def test_no_recipe_is_read_as_a_deepspeed_accelerate_or_vllm_file(rel):
    try:
        kind = detect(parsed(RECIPE_DATA / rel).data)
    except ParseError:
        assert rel.startswith("Azure__"), rel          # Jinja templates: not YAML until rendered
        return
    wanted = LAUNCHER_KINDS.get(SOURCES[rel])
    if wanted:
        assert kind == wanted
    else:
        assert kind not in ("deepspeed", "accelerate", "vllm")
    if SOURCES[rel].startswith("train-"):
        assert kind in RECIPES


@pytest.mark.parametrize("folder", ["deepspeed", "accelerate", "vllm"])
def test_no_corpus_file_is_read_as_a_recipe(folder):
    for path in sorted(shared_or_skip(CORPUS / folder).iterdir()):
        if path.suffix in (".json", ".conf", ".yaml", ".yml"):
            try:
                kind = detect(parsed(path).data)
            except ParseError:
                continue
            assert kind not in RECIPES, path.name


@pytest.mark.parametrize("rel", TRAINING)
def test_a_training_recipe_is_checked_with_only_gpus(rel, capsys, monkeypatch):
    """No --model, --seq-len or --micro-batch: an estimate wherever the model resolves (or is
    named at all: a finetune_demo config leaves it to the command line), and never exit 2."""
    monkeypatch.chdir(RECIPE_DATA)
    if rel.startswith("Azure__"):
        return
    code, out = check(capsys, rel, "--gpus", "8x80GB")
    assert code in (0, 1)
    codes = {f["code"] for entry in out["files"] for f in entry["findings"]}
    unread = {"VL005", "VL304", "VL011"} & codes   # the model cannot be resolved or is not named, a file is missing
    assert all(entry.get("estimate") for entry in out["files"]) or unread, (rel, codes)


@pytest.mark.parametrize("rel", sorted(p for p, kind in SOURCES.items() if kind in
                                       ("infer", "eval", "export", "generate", "quantize")))
def test_recipes_that_do_not_train_are_skipped_with_a_note(rel, capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA)
    if rel.startswith("Azure__"):
        return
    code, out = check(capsys, rel, "--gpus", "8x80GB")
    assert code == 0 and out["files"][0]["notes"] and not out["files"][0]["findings"]


LF = "hiyouga__LLaMA-Factory/examples"


def test_a_deepspeed_value_that_contradicts_the_recipe_is_the_trainers_refusal(tmp_path, capsys, monkeypatch):
    repo = tmp_path / "repo"
    shutil.copytree(RECIPE_DATA / "hiyouga__LLaMA-Factory", repo)
    ds = repo / "examples" / "deepspeed" / "ds_z3_config.json"
    ds.write_text(ds.read_text().replace('"train_micro_batch_size_per_gpu": "auto"',
                                         '"train_micro_batch_size_per_gpu": 4'))
    monkeypatch.chdir(repo)
    code, out = check(capsys, "examples/train_lora/llama3_lora_sft_ds3.yaml", "--gpus", "8x80GB")
    mismatch = [f for f in out["files"][0]["findings"] if f["code"] == "VL310"]
    line = next(i for i, text in enumerate(ds.read_text().splitlines(), 1) if "train_micro_batch_size_per_gpu" in text)
    assert code == 1 and len(mismatch) == 1
    assert mismatch[0]["path"].endswith("ds_z3_config.json") and mismatch[0]["line"] == line
    assert ("Please correct the following DeepSpeed config values that mismatch TrainingArguments values: "
            "- ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=1") in mismatch[0]["message"]


def test_a_deepspeed_file_alone_is_checked_once_per_recipe_that_runs_it(capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA / "hiyouga__LLaMA-Factory")
    code, out = check(capsys, "examples/deepspeed/ds_z3_config.json", "--gpus", "8x80GB")
    runs = {entry["via"] for entry in out["files"]}
    assert runs == {"examples/train_lora/llama3_lora_sft_ds3.yaml", "examples/train_full/llama3_full_sft.yaml",
                    "examples/train_full/qwen2vl_full_sft.yaml", "examples/train_lora/qwen3_lora_sft_ds3.yaml"}
    assert all(entry["path"] == "examples/deepspeed/ds_z3_config.json" for entry in out["files"])
    alone = {entry["via"]: entry.get("estimate", {}).get("per_gpu_peak_bytes") for entry in out["files"]}
    _, recipe = check(capsys, "examples/train_full/llama3_full_sft.yaml", "--gpus", "8x80GB")
    assert alone["examples/train_full/llama3_full_sft.yaml"] == recipe["files"][0]["estimate"]["per_gpu_peak_bytes"]


def test_a_command_line_value_that_contradicts_the_recipe_wins_with_a_finding(capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA)
    path = "axolotl-ai-cloud__axolotl/examples/llama-3/qlora-1b-kto.yaml"
    code, out = check(capsys, path, "--gpus", "8x80GB", "--micro-batch", "8")
    entry = out["files"][0]
    overridden = [f for f in entry["findings"] if f["code"] == "VL007"]
    assert len(overridden) == 1 and overridden[0]["line"] == 44
    assert "--micro-batch 8 overrides micro_batch_size: 2" in overridden[0]["message"]
    assert entry["plan"]["micro_batch"] == 8


def test_hints_speak_the_recipes_own_keys(capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA)
    cases = {"huggingface__trl/examples/cli_configs/example_config.yaml": ("1x16GB", "per_device_train_batch_size: "),
             "pytorch__torchtune/recipes/configs/llama3_1/8B_lora.yaml": ("2x24GB", "enable_activation_checkpointing: True"),
             "nicogreeco__shakespeare-axolotl-workshop/axolotl.yaml": ("1x24GB", "micro_batch_size: 1")}
    for path, (gpus, words) in cases.items():
        code, out = check(capsys, path, "--gpus", gpus)
        hints = " ".join(f["hint"] for f in out["files"][0]["findings"] if f["code"] == "VL201")
        assert code == 1 and words in hints, (path, hints)


def test_plan_lists_the_edits_to_a_recipe_that_fit(capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA)
    assert main(["plan", "axolotl-ai-cloud__axolotl/examples/llama-3/fft-8b.yaml", "--gpus", "4x80GB"]) == 0
    text = capsys.readouterr().out
    assert "deepspeed: deepspeed_configs/zero3.json" in text and "fsdp_version: 2" in text
    assert "micro_batch_size: 2" in text


def test_a_recipe_is_checked_with_the_accelerate_config_it_is_launched_with(capsys, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA / "huggingface__alignment-handbook")
    recipe = "recipes/zephyr-7b-beta/sft/config_full.yaml"
    code, alone = check(capsys, recipe, "--gpus", "8xH100")
    assert code == 1                                     # DDP: every GPU holds the whole model's states
    code, launched = check(capsys, recipe, "--gpus", "8xH100", "--launch-config",
                           "recipes/accelerate_configs/deepspeed_zero3.yaml")
    plan = launched["files"][0]["plan"]
    assert code == 0 and plan["zero_stage"] == 3 and plan["offload_optimizer"] == "cpu"


# One job described two equivalent ways gives one answer --------------------------------------

MODEL = "meta-llama/Llama-3.1-8B"


def peak(capsys, *args) -> int:
    assert main([*map(str, args), "--format", "json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    return out["per_gpu_peak_bytes"] if "per_gpu_peak_bytes" in out else out["files"][0]["estimate"]["per_gpu_peak_bytes"]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


TRAIN = ["estimate", "--train", "--model", MODEL, "--seq-len", "2048", "--micro-batch", "2", "--grad-checkpointing"]
TRL = ("model_name_or_path: meta-llama/Llama-3.1-8B\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n"
       "max_length: 2048\nbf16: true\ndtype: bfloat16\ngradient_checkpointing: true\nlearning_rate: 2.0e-5\n"
       "optim: adamw_torch\n")
AXOLOTL = ("base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\nsequence_len: 2048\n"
           "bf16: true\ngradient_checkpointing: true\nlearning_rate: 2.0e-5\noptimizer: adamw_torch\n"
           "datasets:\n  - path: tatsu-lab/alpaca\n    type: alpaca\n")
LF_LORA = ("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_train: true\nfinetuning_type: lora\nlora_rank: 16\n"
           "lora_target: all\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\ncutoff_len: 2048\n"
           "bf16: true\nlearning_rate: 1.0e-4\n")
TRL_LORA = ("model_name_or_path: meta-llama/Llama-3.1-8B\nuse_peft: true\nlora_r: 16\nlora_target_modules: all-linear\n"
            "lora_dropout: 0.0\ndtype: auto\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n"
            "max_length: 2048\nbf16: true\ngradient_checkpointing: true\nlearning_rate: 1.0e-4\n")


def test_pure_bf16_is_bf16_training_however_it_is_said(capsys):
    pure = peak(capsys, *TRAIN, "--gpus", "1xH100", "--weights-dtype", "bfloat16", "--mixed-precision", "no")
    autocast = peak(capsys, *TRAIN, "--gpus", "1xH100", "--weights-dtype", "bfloat16", "--mixed-precision", "bf16")
    fp32 = peak(capsys, *TRAIN, "--gpus", "1xH100", "--weights-dtype", "float32", "--mixed-precision", "no")
    assert pure == autocast < fp32


def test_a_card_by_size_or_by_name(capsys):
    example = ROOT / "examples" / "llama8b-zero3-8xh100.json"
    args = ["check", example, "--model", MODEL, "--seq-len", "4096"]
    assert peak(capsys, *args, "--gpus", "8x80GB") == peak(capsys, *args, "--gpus", "8xH100")


def test_an_hf_id_or_its_config_json(capsys, tmp_path):
    from vramlint.models.catalog import _index
    entry, _ = _index()[MODEL.lower()]
    config = write(tmp_path / "llama" / "config.json", json.dumps(entry["config"]))
    args = ["estimate", "--train", "--gpus", "1xH100", "--seq-len", "2048"]
    assert peak(capsys, *args, "--model", MODEL) == peak(capsys, *args, "--model", config)


def test_a_trl_recipe_or_the_same_job_as_flags(capsys, tmp_path):
    recipe = write(tmp_path / "sft.yaml", TRL)
    flags = [*TRAIN, "--gpus", "1xH100", "--grad-accum", "4", "--weights-dtype", "bfloat16", "--mixed-precision", "bf16"]
    assert peak(capsys, "check", recipe, "--gpus", "1xH100") == peak(capsys, *flags)


def test_an_axolotl_recipe_or_the_same_trl_recipe(capsys, tmp_path):
    trl, axolotl = write(tmp_path / "trl.yaml", TRL), write(tmp_path / "axolotl.yml", AXOLOTL)
    assert peak(capsys, "check", trl, "--gpus", "2xH100") == peak(capsys, "check", axolotl, "--gpus", "2xH100")


def test_a_llamafactory_lora_recipe_or_the_same_trl_recipe(capsys, tmp_path):
    lf, trl = write(tmp_path / "lf.yaml", LF_LORA), write(tmp_path / "trl.yaml", TRL_LORA)
    assert peak(capsys, "check", lf, "--gpus", "8xH100") == peak(capsys, "check", trl, "--gpus", "8xH100")


def test_a_recipe_with_its_deepspeed_file_or_the_file_with_flags(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(RECIPE_DATA / "hiyouga__LLaMA-Factory")
    recipe = peak(capsys, "check", "examples/train_lora/llama3_lora_sft_ds3.yaml", "--gpus", "8xH100")
    flags = peak(capsys, "check", "examples/deepspeed/ds_z3_config.json", "--gpus", "8xH100", "--model",
                 "meta-llama/Meta-Llama-3-8B-Instruct", "--micro-batch", "1", "--grad-accum", "2", "--seq-len", "2048",
                 "--mixed-precision", "bf16", "--grad-checkpointing", "--lora-rank", "8", "--optimizer", "adamw")
    assert recipe == flags


def test_an_inline_deepspeed_section_or_the_same_file(capsys, tmp_path):
    section = '{"zero_optimization": {"stage": 3}, "bf16": {"enabled": "auto"}, "train_micro_batch_size_per_gpu": "auto"}'
    write(tmp_path / "ds.json", section)
    inline = write(tmp_path / "inline.yaml", TRL + f"deepspeed: {section}\n")
    named = write(tmp_path / "named.yaml", TRL + f"deepspeed: {tmp_path / 'ds.json'}\n")
    assert peak(capsys, "check", inline, "--gpus", "8xH100") == peak(capsys, "check", named, "--gpus", "8xH100")


def test_a_recipe_under_an_fsdp_launch_config_or_the_config_with_flags(capsys, tmp_path):
    launcher = shared_or_skip(CORPUS / "accelerate" / "huggingface__trl__examples__accelerate_configs__fsdp2.yaml")
    recipe = write(tmp_path / "sft.yaml", TRL)
    launched = peak(capsys, "check", recipe, "--gpus", "8xH100", "--launch-config", launcher)
    flags = peak(capsys, "check", launcher, "--gpus", "8xH100", "--model", MODEL, "--micro-batch", "2",
                 "--grad-accum", "4", "--seq-len", "2048", "--grad-checkpointing", "--weights-dtype", "bfloat16")
    assert launched == flags


def test_a_torchtune_recipe_or_the_same_job_as_flags(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(RECIPE_DATA)
    recipe = peak(capsys, "check", "pytorch__torchtune/recipes/configs/llama3_1/8B_lora_single_device.yaml",
                  "--gpus", "8xH100")
    flags = peak(capsys, "estimate", "--train", "--model", MODEL, "--gpus", "1xH100", "--lora-rank", "8",
                 "--lora-targets", "q_proj,v_proj,o_proj,gate_proj,up_proj,down_proj", "--micro-batch", "2",
                 "--grad-accum", "8", "--seq-len", "2048", "--weights-dtype", "bfloat16", "--mixed-precision", "no",
                 "--grad-checkpointing", "--attn", "sdpa", "--adapter-dtype", "bfloat16", "--loss", "chunked",
                 "--optimizer-impl", "fused")
    assert recipe == flags


def test_a_recipe_and_model_the_same_as_the_one_it_names(capsys, tmp_path):
    recipe = write(tmp_path / "sft.yaml", TRL)
    code = main(["check", str(recipe), "--gpus", "1xH200", "--model", MODEL, "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and not out["files"][0]["findings"]          # no override: the same model
    assert out["files"][0]["estimate"]["per_gpu_peak_bytes"] == peak(capsys, "check", recipe, "--gpus", "1xH200")


def test_pure_bf16_under_fsdp_keeps_no_second_16_bit_copy(capsys):
    """FSDP NO_SHARD over bf16 weights without mixed precision: the shards are the bf16 weights; a
    16-bit copy to gather from exists only where Accelerate upcast them to fp32 (mixed precision)."""
    args = [*TRAIN, "--gpus", "2xH100", "--runtime", "fsdp", "--fsdp-strategy", "NO_SHARD"]
    assert main([*args, "--weights-dtype", "bfloat16", "--mixed-precision", "no", "--format", "json"]) == 0
    pure = {c["name"]: c["bytes"] for c in json.loads(capsys.readouterr().out)["components"]}
    assert main([*args, "--mixed-precision", "bf16", "--format", "json"]) == 0
    mixed = {c["name"]: c["bytes"] for c in json.loads(capsys.readouterr().out)["components"]}
    assert "unsharded parameters" not in pure and mixed["unsharded parameters"] == 2 * 8_030_261_248
    assert pure["parameter shards"] * 2 == mixed["parameter shards"]       # bf16 shards, not fp32


TRL_STAGES = json.loads((DATA / "trl_stages.json").read_text())
STAGE_CASES = {   # recorded case -> the TRL recipe fields that describe it
    "dpo_full_ft": "beta: 0.1\n", "dpo_peft": "beta: 0.1\nuse_peft: true\n",
    "dpo_full_ft_precompute": "beta: 0.1\nprecompute_ref_log_probs: true\n",
    "grpo_beta0.0": "num_generations: 2\n", "grpo_beta0.04": "num_generations: 2\nbeta: 0.04\n"}


@pytest.mark.parametrize("case", sorted(STAGE_CASES))
def test_a_stage_keeps_what_trl_runs(case, tmp_path, capsys):
    """dev/trl_stages.py ran TRL 1.16.0's DPOTrainer and GRPOTrainer: the rows of the policy's
    forward with grad (DPO: chosen + rejected, 2 x per_device_train_batch_size) and whether a
    second model was created are what the recipe's estimate holds."""
    record = TRL_STAGES[case]
    recipe = write(tmp_path / "recipe.yaml", "model_name_or_path: meta-llama/Llama-3.2-1B\n"
                   "per_device_train_batch_size: 2\nlearning_rate: 1.0e-6\n" + STAGE_CASES[case])
    code, out = check(capsys, recipe, "--gpus", "1x80GB")
    entry = out["files"][0]
    names = [c["name"] for c in entry["estimate"]["components"]]
    assert ("reference model (frozen copy)" in names) == (record["models_created"] == 2), names
    if case.startswith("dpo"):
        trained = [f["shape"][0] for f in record["forwards"] if f["grad"]]
        assert any(f"{trained[0]} rows" in note for note in entry["estimate"]["assumptions"])


def test_grpo_puts_vllm_where_the_recipe_says(capsys, monkeypatch, tmp_path):
    """open-r1's GRPO demo (TRL before vllm_mode) gives vLLM a GPU of its own (vllm_device): nothing
    of it on the training GPUs; TRL 1.16's vllm_mode colocate takes vllm_gpu_memory_utilization of
    each; without vLLM, model.generate's KV cache for batch x steps_per_generation completions."""
    monkeypatch.chdir(RECIPE_DATA)
    demo = "huggingface__open-r1/recipes/Qwen2.5-1.5B-Instruct/grpo/config_demo.yaml"
    code, out = check(capsys, demo, "--gpus", "8x80GB")
    assert not any(c["name"] == "vLLM engine (colocated)" for c in out["files"][0]["estimate"]["components"])
    text = (RECIPE_DATA / demo).read_text().replace("vllm_device: auto\n", "vllm_mode: colocate\n")
    code, out = check(capsys, write(tmp_path / "colocate.yaml", text), "--gpus", "8x80GB")
    entry = out["files"][0]
    vllm = next(c for c in entry["estimate"]["components"] if c["name"] == "vLLM engine (colocated)")
    assert vllm["bytes"] == int(0.7 * entry["gpus"]["memory_bytes"])
    bare = write(tmp_path / "generate.yaml", "model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\n"
                 "per_device_train_batch_size: 8\ngradient_accumulation_steps: 4\nlearning_rate: 1.0e-6\n"
                 "num_generations: 8\nmax_completion_length: 1024\n")
    from vramlint.memory.stages import generation
    from vramlint.models import read_model
    from vramlint.plan import Plan
    from vramlint.hardware import parse_gpus
    code, out = check(capsys, bare, "--gpus", "1x80GB")
    assert any("32 completions" in note for note in out["files"][0]["estimate"]["assumptions"])
    plan = Plan(model=read_model("Qwen/Qwen2.5-1.5B-Instruct"), cluster=parse_gpus("1x80GB"), precision="bf16",
                seq_len=1536, generation_rows=32)
    kv = next(c for c in generation(plan) if c.name == "generation KV cache")
    assert kv.bytes == 32 * 1536 * 28 * 2 * 2 * 128 * 2      # rows x tokens x layers x (k, v) x kv heads x head_dim x 2 B


def test_fsdp_accumulation_follows_the_loop(capsys, monkeypatch):
    """torchtune's distributed recipes reduce-scatter every micro-batch; the HF Trainer keeps
    no_sync's unsharded gradients: the accumulated gradients differ by the shard count."""
    monkeypatch.chdir(RECIPE_DATA)
    code, out = check(capsys, "pytorch__torchtune/recipes/configs/llama3_1/8B_lora.yaml", "--gpus", "8x80GB",
                      "--grad-accum", "4")
    carried = next(c for c in out["files"][0]["estimate"]["components"] if c["name"] == "accumulated gradients")
    assert "every micro-batch reduce-scatters" in carried["formula"]


def test_a_distillation_recipe_keeps_its_teacher(capsys, monkeypatch):
    """torchtune's 8B -> 1B KD recipe: the teacher_model builder (llama3_1_8b) is a frozen 8B
    model beside the 1B student, in the recipe's bf16, with its logits alive through the KD loss."""
    monkeypatch.chdir(RECIPE_DATA)
    code, out = check(capsys, "pytorch__torchtune/recipes/configs/llama3_2/8B_to_1B_KD_lora_single_device.yaml",
                      "--gpus", "1x80GB")
    entry = out["files"][0]
    teacher = next(c for c in entry["estimate"]["components"] if c["name"] == "teacher model (frozen)")
    assert teacher["bytes"] == 2 * 8_030_261_248
    assert "VL210" not in {f["code"] for f in entry["findings"]}
