"""Every job in the repository checked, and none passes silently (issue 28).

Real files of each HfArgumentParser dialect (tests/data/recipes/SOURCES-dialects.tsv) are read as
the jobs their projects run; every real recipe the project keeps that holds training arguments is
a training job; a job the check cannot estimate fails it with its own rule; model names resolve as
the ecosystem writes them, offline; the framework release the repository vendors or pins decides
how LLaMA-Factory reads a file and what it refuses; each job is judged at its own size.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, EXAMPLES, ROOT
from vramlint.cli import main
from vramlint.documents import ParseError, parse
from vramlint.readers.registry import RECIPES, detect
from vramlint.readers.trl import TRAINING_ARGUMENTS

RECIPES_DIR = DATA / "recipes"
FIREFLY = RECIPES_DIR / "yangjianxin1__Firefly" / "train_args"
CHATGLM = RECIPES_DIR / "THUDM__ChatGLM3" / "finetune_demo" / "configs"


def check(capsys, *argv: str) -> tuple[int, dict]:
    code = main(["check", *argv, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def facts(entry: dict) -> dict:
    return {"model": entry["model"], "micro_batch": entry["plan"]["micro_batch"], "seq": entry["plan"]["seq_len"],
            "checkpointing": entry["plan"]["grad_checkpointing"], "runtime": entry["plan"]["zero_stage"],
            "precision": entry["plan"]["precision"]}


# The dialects, line by line ---------------------------------------------------------------------

def test_firefly_qlora_without_train_mode_is_firefly_s_default_qlora(capsys):
    """Firefly's CustomizedArguments: train_mode defaults to qlora (component/argument.py:19); the
    file says lora_rank 64, max_seq_length 1024, fp16 and micro-batch 1 x 16."""
    code, doc = check(capsys, str(FIREFLY / "sft" / "qlora" / "qwen2.5-7b-sft-qlora.json"), "--gpus", "1xA100-40GB")
    entry = doc["files"][0]
    assert entry["kind"] == "trl" and entry["status"] == "estimated" and code == 0
    assert facts(entry) == {"model": "Qwen/Qwen2.5-7B-Instruct", "micro_batch": 1, "seq": 1024, "checkpointing": True,
                            "runtime": 0, "precision": "fp16"}
    origins = entry["plan"]["origins"]
    assert origins["micro_batch"].endswith(":7:5") and origins["seq_len"].endswith(":10:5")
    names = [c["name"] for c in entry["estimate"]["components"]]
    assert "weights (NF4)" in names and "LoRA adapters" in names         # the default qlora: a 4-bit base
    assert any("Firefly recipe" in a for a in entry["estimate"]["assumptions"])


def test_firefly_full_and_lora_modes(capsys):
    """train_mode full: every weight trains, in the autocast dtype (fp16 here), under the DeepSpeed
    file the recipe names; train_mode lora: adapters on a 16-bit base."""
    _, doc = check(capsys, str(FIREFLY / "sft" / "full" / "minicpm3-4b-sft-full.json"), "--gpus", "8xA100-80GB",
                   "--model", "Qwen/Qwen2.5-3B")
    entry = doc["files"][0]
    assert entry["plan"]["zero_stage"] == 3 and entry["plan"]["precision"] == "fp16"
    assert not any(c["name"] == "LoRA adapters" for c in entry["estimate"]["components"])
    _, doc = check(capsys, str(FIREFLY / "sft" / "lora" / "qwen1.5-7b-sft-lora.json"), "--gpus", "1xA100-80GB",
                   "--model", "Qwen/Qwen2.5-7B")
    names = [c["name"] for c in doc["files"][0]["estimate"]["components"]]
    assert "LoRA adapters" in names and "weights (NF4)" not in names


def test_firefly_dpo_is_read_as_dpo(capsys):
    _, doc = check(capsys, str(FIREFLY / "dpo" / "qlora" / "qwen1.5-7b-dpo-qlora.json"), "--gpus", "1xA100-80GB",
                   "--model", "Qwen/Qwen2.5-7B")
    assert any("stage dpo" in a for a in doc["files"][0]["estimate"]["assumptions"])


def test_chatglm_finetune_demo_reads_its_nested_training_args(capsys):
    """finetune_hf.py: prompt + answer + 1 tokens (256 + 512 + 1), training_args nested, LoRA r 8
    from peft_config, gradient checkpointing always on; the model is the command line's."""
    code, doc = check(capsys, str(CHATGLM / "lora.yaml"), "--gpus", "1xA100-80GB")
    entry = doc["files"][0]
    assert entry["kind"] == "glm" and entry["status"] == "not estimated" and code == 1
    assert [f["code"] for f in entry["findings"]] == ["VL011"]          # no model in the file: said, and fails
    code, doc = check(capsys, str(CHATGLM / "lora.yaml"), "--gpus", "1xA100-80GB", "--model", "Qwen/Qwen2.5-7B")
    entry = doc["files"][0]
    assert facts(entry) == {"model": "Qwen/Qwen2.5-7B", "micro_batch": 4, "seq": 769, "checkpointing": True,
                            "runtime": 0, "precision": "fp32"}
    assert entry["plan"]["origins"]["micro_batch"].endswith(":15:3")


def test_unknown_keys_of_a_dialect_are_named(tmp_path, capsys):
    path = tmp_path / "train_args.json"
    data = json.loads((FIREFLY / "sft" / "qlora" / "qwen2.5-7b-sft-qlora.json").read_text())
    path.write_text(json.dumps({**data, "lora_rnak": 8}))
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    said = [a for a in doc["files"][0]["estimate"]["assumptions"] if "not read" in a]
    assert said and said[0].endswith("not read: lora_rnak")


def test_open_instruct_qlora_is_not_llamafactory(tmp_path, capsys):
    """use_qlora + lora_rank + max_seq_length: open-instruct's finetune.py, not LLaMA-Factory's."""
    path = tmp_path / "finetune.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nuse_qlora: true\nuse_lora: true\nlora_rank: 64\n"
                    "max_seq_length: 4096\nper_device_train_batch_size: 1\nlearning_rate: 1e-4\n")
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    entry = doc["files"][0]
    assert entry["kind"] == "trl" and entry["status"] == "estimated"
    assert "weights (NF4)" in [c["name"] for c in entry["estimate"]["components"]]
    assert any("open-instruct recipe" in a for a in entry["estimate"]["assumptions"])


def _has_training_arguments(data) -> bool:
    if not isinstance(data, dict):
        return False
    nested = data.get("training_args") if isinstance(data.get("training_args"), dict) else {}
    return any(k in data or k in nested for k in TRAINING_ARGUMENTS)


def test_no_real_file_with_training_arguments_is_skipped():
    """Every real recipe the project keeps (and every corpus file) that holds a per-device batch
    is detected as a training job, whatever else it holds (LLaMA-Factory's export and inference
    files hold none)."""
    files = [p for p in RECIPES_DIR.rglob("*") if p.suffix in (".json", ".yaml", ".yml", ".conf")]
    files += [p for p in (ROOT.parent / "shared" / "corpus").rglob("*") if p.suffix in (".json", ".yaml", ".yml")]
    seen = 0
    for path in files:
        try:
            document = parse(path.read_text(encoding="utf-8"), str(path))
        except (ParseError, UnicodeDecodeError):
            continue
        if not _has_training_arguments(document.data):
            continue
        seen += 1
        kind = detect(document.data)
        assert kind in RECIPES, path
        assert RECIPES[kind].read(document).training, path
    assert seen >= 50


# No silent pass ---------------------------------------------------------------------------------

def test_unresolved_model_missing_file_and_unnamed_model_each_fail_with_their_rule(tmp_path, capsys):
    (tmp_path / "unresolved.yaml").write_text("model_name_or_path: my-org/never-published-7b\nstage: sft\n"
                                              "do_train: true\nper_device_train_batch_size: 2\n")
    (tmp_path / "missing.yaml").write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_train: true\n"
                                           "deepspeed: configs/not_here.json\nper_device_train_batch_size: 2\n")
    (tmp_path / "nomodel.json").write_text('{"per_device_train_batch_size": 2, "learning_rate": 1e-5}')
    for name, rule in (("unresolved.yaml", "VL005"), ("missing.yaml", "VL304"), ("nomodel.json", "VL011")):
        code, doc = check(capsys, str(tmp_path / name), "--gpus", "8xH100")
        entry = doc["files"][0]
        assert code == 1 and entry["status"] == "not estimated", name
        assert [(f["code"], f["severity"]) for f in entry["findings"]] == [(rule, "error")], name
        assert doc["summary"]["not_estimated"] == 1 and doc["summary"]["estimated"] == 0
        code, doc = check(capsys, str(tmp_path / name), "--gpus", "8xH100", "--warn", rule)
        assert code == 0 and doc["files"][0]["findings"][0]["severity"] == "warning", name


def test_the_summary_counts_jobs_estimated_not_estimated_and_skipped(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text("model_name_or_path: my-org/never-published-7b\nper_device_train_batch_size: 2\n"
                                     "learning_rate: 1e-5\n")
    (tmp_path / "notes.json").write_text("{}")
    main(["check", str(tmp_path), str(EXAMPLES / "recipes" / "trl-sft-llama3.1-8b-zero3.yaml"), "--gpus", "8xH100"])
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == "3 file(s) checked: 1 job(s) estimated, 1 not estimated, 1 skipped; 1 error(s), 0 warning(s)"


def test_a_tree_of_launch_scripts_fails_and_says_what_it_did_not_read(tmp_path, capsys):
    """Jobs stated only in scripts that run a launcher, and in Python configs, are not passed over:
    the script is read (its job names no model: VL011 at its line), VL012 names the Python config
    it cannot read; a script that launches nothing (setup.sh) is not checked at all."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "train.sh").write_text("torchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4\n")
    (tmp_path / "scripts" / "setup.sh").write_text("pip install -r requirements.txt\n")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "sft_config.py").write_text("model = dict(type='llama')\n")
    assert main(["check", str(tmp_path), "--gpus", "8xH100"]) == 1
    out = capsys.readouterr().out
    assert "scripts/train.sh:1:1  VL011 error  not estimated: the TRL recipe names no model" in out
    assert "VL012 error  no job estimated from the files vramlint reads; 1 Python config(s) were not read" in out
    assert "configs/sft_config.py" in out and "setup.sh" not in out
    (tmp_path / "scripts" / "train.sh").unlink()
    (tmp_path / "configs" / "sft_config.py").unlink()
    assert main(["check", str(tmp_path), "--gpus", "8xH100"]) == 0       # nothing that launches a job


def test_unresolved_model_missing_file_and_unreadable_job_fail_through_pre_commit(tmp_path_factory):
    """The real pre-commit, a repository set up as the README says (only the GPUs in the settings)."""
    from test_precommit import _git_repo, try_repo
    repo, env = _git_repo(tmp_path_factory, "unestimated-repo")
    (repo / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\n')
    (repo / "unresolved.yaml").write_text("model_name_or_path: my-org/never-published-7b\nstage: sft\n"
                                          "do_train: true\nper_device_train_batch_size: 2\n")
    (repo / "missing.yaml").write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_train: true\n"
                                       "deepspeed: configs/not_here.json\nper_device_train_batch_size: 2\n")
    (repo / "glm_lora.yaml").write_bytes((CHATGLM / "lora.yaml").read_bytes())
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    proc = try_repo((repo, env), "unresolved.yaml", "missing.yaml", "glm_lora.yaml")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    for line in ("unresolved.yaml:1:1  VL005 error", "missing.yaml:4:1  VL304 error", "glm_lora.yaml:1:1  VL011 error",
                 "3 file(s) checked: 0 job(s) estimated, 3 not estimated, 0 skipped"):
        assert line in proc.stdout, line


# Model names --------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,catalog", [
    ("NousResearch/Llama-2-7b-chat-hf", "meta-llama/Llama-2-7b-chat-hf"),
    ("NousResearch/Meta-Llama-3-8B-Instruct", "meta-llama/Meta-Llama-3-8B-Instruct"),
    ("lmsys/vicuna-7b-v1.5", "meta-llama/Llama-2-7b-hf"),
    ("HuggingFaceH4/zephyr-7b-beta", "mistralai/Mistral-7B-v0.1"),
    ("meta-llama/Llama-2-13b-chat-hf", "meta-llama/Llama-2-13b-hf"),
    ("unsloth/llama-3-8b-Instruct-bnb-4bit", "meta-llama/Meta-Llama-3-8B-Instruct"),
])
def test_mirrors_and_variants_resolve_to_their_architecture_with_a_note(name, catalog, capsys):
    assert main(["model", name, "--format", "json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["name"] == name and info["notes"][-1].startswith(f"{name} read as the catalog's {catalog} (")
    assert (info["quantization"] is not None) == name.endswith("-bnb-4bit")


def test_suggestions_never_cross_a_family_and_dynamic_quants_are_not_guessed(capsys):
    assert main(["model", "Qwen/Qwen1.5-7B-Chat-GPTQ"]) == 2
    err = capsys.readouterr().err
    assert "qwen2.5" not in err.lower() and "hf download Qwen/Qwen1.5-7B-Chat-GPTQ config.json" in err
    assert main(["model", "unsloth/meta-llama-3.1-8b-instruct-unsloth-bnb-4bit"]) == 2
    assert main(["model", "Qwen/Qwen2-7B-Instruct"]) == 2          # its positions differ from Qwen2-7B's: not guessed
    assert "qwen2-7b" in capsys.readouterr().err


def test_a_local_output_path_is_never_asked_of_the_hub(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "stage2.yaml"
    path.write_text("model_name_or_path: models/llama3-8b-pro\nstage: sft\ndo_train: true\n"
                    "per_device_train_batch_size: 2\n")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    code, doc = check(capsys, str(path), "--gpus", "8xH100", "--download")
    finding = doc["files"][0]["findings"][0]
    assert code == 1 and finding["code"] == "VL005" and "local path" in finding["message"]
    assert "hf download" not in finding["message"] + finding["hint"] and "--model" in finding["hint"]


def test_download_without_a_network_fails_at_once_in_one_line(tmp_path):
    """The real huggingface_hub installed; the endpoint a closed loopback port."""
    pytest.importorskip("huggingface_hub")
    with socket.socket() as probe:                     # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "HF_ENDPOINT": f"http://127.0.0.1:{port}",
           "HF_HUB_CACHE": str(tmp_path / "hub")}
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "vramlint", "model", "some-org/some-model-7b", "--download"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert time.monotonic() - start < 5
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "no network to the Hugging Face Hub" in lines[0] and f"127.0.0.1:{port}" in lines[0]


# The framework the repository runs ----------------------------------------------------------------

QLORA_092 = RECIPES_DIR / "hiyouga__LLaMA-Factory" / "examples" / "train_qlora" / "llama3_lora_sft_otfq.yaml"


def _repo(tmp_path: Path, version: str | None) -> Path:
    (tmp_path / ".git").mkdir()
    if version:
        (tmp_path / "src" / "llamafactory" / "extras").mkdir(parents=True)
        (tmp_path / "src" / "llamafactory" / "extras" / "env.py").write_text(f'VERSION = "{version}"\n')
    path = tmp_path / "qlora.yaml"
    path.write_bytes(QLORA_092.read_bytes())
    return path


@pytest.mark.parametrize("version,quantized", [("0.9.2", True), ("0.9.3", False), (None, False)])
def test_llamafactory_quantization_method_is_read_as_the_vendored_release_reads_it(tmp_path, capsys, version,
                                                                                   quantized):
    """quantization_method: bitsandbytes quantizes in 0.9.1-0.9.2 and matches nothing from 0.9.3
    (where the spelling is bnb), so the base then loads in 16 bits."""
    path = _repo(tmp_path, version)
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    entry = doc["files"][0]
    names = [c["name"] for c in entry["estimate"]["components"]]
    assert ("weights (NF4)" in names) is quantized
    said = [a for a in entry["estimate"]["assumptions"] if "configure_quantization matches no branch" in a]
    assert bool(said) is not quantized


def test_llamafactory_refusals_in_its_words_and_no_hint_it_would_refuse(tmp_path, capsys):
    path = _repo(tmp_path, "0.9.2")
    text = path.read_text().replace("quantization_bit: 4\n", "") + "use_galore: true\ngalore_layerwise: true\n" \
        "global_batch_size: 64\n"
    path.write_text(text.replace("finetuning_type: lora", "finetuning_type: full"))
    code, doc = check(capsys, str(path), "--gpus", "8xA100-40GB")
    findings = {f["code"]: f for f in doc["files"][0]["findings"] if f["code"] in ("VL313", "VL201")}
    refused = [f["message"] for f in doc["files"][0]["findings"] if f["code"] == "VL313"]
    assert code == 1 and refused == [
        "LLaMA-Factory 0.9.2 refuses to start: Distributed training does not support layer-wise GaLore.",
        "LLaMA-Factory 0.9.2 refuses to start: Some keys are not used by the HfArgumentParser: ['global_batch_size']"]
    if "VL201" in findings:
        assert "fsdp" not in findings["VL201"]["hint"].lower() and "deepspeed" not in findings["VL201"]["hint"].lower()


@pytest.mark.parametrize("version,unknown,line", [("0.9.1", "trust_remote_code", 3), ("0.9.5", "train_mm_proj_only", 10)])
def test_llamafactory_refuses_keys_its_release_has_no_field_for(tmp_path, capsys, version, unknown, line):
    """LLaMA-Factory's own example, written between releases: 0.9.1's ModelArguments has no
    trust_remote_code (0.9.2 added it), 0.9.5's FinetuningArguments no train_mm_proj_only (0.9.1
    had it). HfArgumentParser.parse_dict refuses what the release has no field for, in its words
    (data/llamafactory_arguments.json, read from each release's wheel)."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "src" / "llamafactory" / "extras").mkdir(parents=True)
    (tmp_path / "src" / "llamafactory" / "extras" / "env.py").write_text(f'VERSION = "{version}"\n')
    path = tmp_path / "qwen2vl_full_sft.yaml"
    path.write_bytes((RECIPES_DIR / "hiyouga__LLaMA-Factory" / "examples" / "train_full" /
                      "qwen2vl_full_sft.yaml").read_bytes())
    _, doc = check(capsys, str(path), "--gpus", "8xH100")
    said = [f for f in doc["files"][0]["findings"] if f["code"] == "VL313"]
    assert [f["message"] for f in said] == [f"LLaMA-Factory {version} refuses to start: Some keys are not used by the "
                                            f"HfArgumentParser: [{unknown!r}]"]
    assert said[0]["line"] == line and ("ALLOW_EXTRA_ARGS=1" in said[0]["hint"]) is (version != "0.9.1")


def test_a_vendored_llamafactory_is_read_from_its_own_argument_dataclasses(tmp_path, capsys):
    """A fork between releases (0.9.2.dev0, as GAIR-NLP/LIMO vendors it): its hparams/ say which keys
    it takes; where they are not in the repository, no key is refused on a guess."""
    path = _repo(tmp_path, "0.9.2.dev0")
    path.write_text(path.read_text() + "image_resolution: 262144\nmy_fork_key: 1\n")
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    assert not [f for f in doc["files"][0]["findings"] if f["code"] == "VL313"]
    hparams = tmp_path / "src" / "llamafactory" / "hparams"
    hparams.mkdir()
    names = {"model_name_or_path", "quantization_bit", "quantization_method", "template", "trust_remote_code",
             "image_resolution", "stage", "finetuning_type", "lora_target", "dataset", "cutoff_len", "max_samples",
             "overwrite_cache", "preprocessing_num_workers", "dataloader_num_workers", "do_train", "plot_loss",
             "val_size"}
    (hparams / "model_args.py").write_text("from dataclasses import dataclass\n@dataclass\nclass ModelArguments:\n"
                                           + "".join(f"    {n}: object = None\n" for n in sorted(names)))
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    said = [f["message"] for f in doc["files"][0]["findings"] if f["code"] == "VL313"]
    assert said == ["LLaMA-Factory 0.9.2.dev0 refuses to start: Some keys are not used by the HfArgumentParser: "
                    "['my_fork_key']"]


def test_llamafactory_without_do_train_is_a_training_job_it_would_not_run(tmp_path, capsys):
    path = tmp_path / "sft.yaml"
    path.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nfinetuning_type: lora\n"
                    "per_device_train_batch_size: 2\ncutoff_len: 2048\nbf16: true\n")
    code, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    entry = doc["files"][0]
    assert entry["status"] == "estimated"
    assert [(f["code"], f["line"]) for f in entry["findings"]] == [("VL314", 4)]


def test_llamafactory_0_9_1_tokenizes_and_exits_where_tokenized_path_is_empty(tmp_path, capsys):
    """0.9.1 saves the tokenized set into an absent tokenized_path and exits (data/loader.py:290-296);
    0.9.2 on trains in the same run; a folder that holds the set is trained on in every release."""
    path = _repo(tmp_path, "0.9.1")
    path.write_text(path.read_text() + "tokenized_path: saves/tokenized\n")
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    entry = doc["files"][0]
    assert entry["status"] == "skipped" and "tokenizes into tokenized_path saves/tokenized and exits" in entry["notes"][0]
    (tmp_path / "saves" / "tokenized").mkdir(parents=True)
    (tmp_path / "saves" / "tokenized" / "dataset_dict.json").write_text("{}")
    _, doc = check(capsys, str(path), "--gpus", "1xA100-80GB")
    assert doc["files"][0]["status"] == "estimated"


def test_pins_honour_environment_markers(tmp_path):
    from vramlint.stack import repository_pins
    (tmp_path / "requirements.txt").write_text("transformers>=4.41.2,<=4.45.2; python_version<'3.10'\n"
                                               "transformers>=4.41.2,<=4.49.0; python_version>='3.10'\n")
    assert repository_pins(tmp_path)["transformers"].version == "4.49.0"
    assert repository_pins(tmp_path)["transformers"].origin == "requirements.txt:2"


# Each job at its own size -------------------------------------------------------------------------

def test_an_accelerate_file_sets_its_gpu_count_where_gpus_gives_the_type(tmp_path, capsys):
    path = tmp_path / "fsdp.yaml"
    path.write_text("compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_machines: 1\nnum_processes: 2\n"
                    "mixed_precision: bf16\nfsdp_config:\n  fsdp_sharding_strategy: FULL_SHARD\n")
    code, doc = check(capsys, str(path), "--gpus", "H100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "2048")
    entry = doc["files"][0]
    assert entry["gpus"]["per_node"] == 2 and not any(f["code"] == "VL302" for f in entry["findings"])
    code, doc = check(capsys, str(path), "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "2048")
    assert [f["code"] for f in doc["files"][0]["findings"]][:1] == ["VL302"]        # a stated count stays


def test_a_gpu_type_without_a_count_is_one_gpu_and_said(capsys):
    """--gpus H100 with a recipe that states no count: checked on one GPU, with VL013 at the model's
    line; a torchtune single-device recipe states its one GPU itself."""
    _, doc = check(capsys, str(EXAMPLES / "recipes" / "trl-sft-llama3.1-8b-zero3.yaml"), "--gpus", "H100")
    entry = doc["files"][0]
    assert entry["gpus"]["per_node"] == 1 and ("VL013", 2) in [(f["code"], f["line"]) for f in entry["findings"]]
    _, doc = check(capsys, str(EXAMPLES / "recipes" / "torchtune-llama3.1-8b-lora-single-device.yaml"), "--gpus", "H100")
    assert not [f for f in doc["files"][0]["findings"] if f["code"] == "VL013"]


def test_launch_config_stands_in_for_a_missing_deepspeed_file_and_shipped_copies_are_read(tmp_path, capsys,
                                                                                        monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".git").mkdir()
    recipe = tmp_path / "sft.yaml"
    recipe.write_text("model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\ndo_train: true\nfinetuning_type: full\n"
                      "deepspeed: examples/deepspeed/ds_z3_config.json\nper_device_train_batch_size: 1\nbf16: true\n")
    _, doc = check(capsys, str(recipe), "--gpus", "8xH100")
    entry = doc["files"][0]
    assert entry["plan"]["zero_stage"] == 3 and entry["status"] == "estimated"
    assert entry["notes"][0].startswith("deepspeed 'examples/deepspeed/ds_z3_config.json' is not in this repository: "
                                        "read as the framework's own copy (llamafactory:")
    recipe.write_text(recipe.read_text().replace("examples/deepspeed/ds_z3_config.json", "configs/mine.json"))
    code, doc = check(capsys, str(recipe), "--gpus", "8xH100")
    assert code == 1 and doc["files"][0]["findings"][0]["code"] == "VL304"
    shutil_copy = (ROOT.parent / "shared" / "corpus" / "deepspeed" / "hiyouga__LLaMA-Factory__examples__deepspeed__"
                   "ds_z2_config.json")
    stand_in = tmp_path / "z2.json"
    stand_in.write_bytes((ROOT / "vramlint" / "data" / "shipped" / "llamafactory" / "examples" / "deepspeed" /
                          "ds_z2_config.json").read_bytes())
    if shutil_copy.exists():
        assert stand_in.read_bytes() == shutil_copy.read_bytes()       # the shipped copy is byte-exact
    code, doc = check(capsys, str(recipe), "--gpus", "8xH100", "--launch-config", str(stand_in))
    entry = doc["files"][0]
    assert entry["plan"]["zero_stage"] == 2 and not any(f["code"] == "VL304" for f in entry["findings"])
    assert any("--launch-config" in n for n in entry["notes"])


def test_overrides_give_each_glob_its_gpus(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\n[[tool.vramlint.overrides]]\n'
                                             'files = "single/*"\ngpus = "1xH100"\n')
    (tmp_path / "single").mkdir()
    text = "model_name_or_path: meta-llama/Llama-3.2-1B\nper_device_train_batch_size: 1\nlearning_rate: 1e-5\n"
    (tmp_path / "single" / "a.yaml").write_text(text)
    (tmp_path / "b.yaml").write_text(text)
    _, doc = check(capsys, "single/a.yaml", "b.yaml")
    assert [f["gpus"]["per_node"] for f in doc["files"]] == [1, 8]
