"""The software stack a job runs on (vramlint/stack.py), read from the repository's own pins, and
what the versions change: vLLM's defaults, transformers' loss and prefill logits, a finding for a
release vramlint does not model."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pytest

from conftest import DATA, EXAMPLES
from vramlint.cli import main
from vramlint.hardware import parse_gpus
from vramlint.memory import estimate
from vramlint.memory.parts.loss import loss_head
from vramlint.models import read_model
from vramlint.plan import plan_from_flags
from vramlint.stack import Stack, Pinned, plan_for_stack, repository_pins, requirement, resolve_stack, unmodelled

PINS = DATA / "pins"


def test_llamafactorys_requirements_name_the_newest_release_each_range_allows():
    """hiyouga/LLaMA-Factory requirements.txt (tests/data/pins/SOURCES.tsv): transformers>=4.41.2,<=4.45.2
    installs 4.45.2, the newest it allows; a range is no exact pin."""
    pins = repository_pins(PINS / "llamafactory")
    assert (pins["transformers"].version, pins["transformers"].origin, pins["transformers"].exact) == (
        "4.45.2", "requirements.txt:1", False)
    assert pins["peft"].version == "0.12.0" and pins["trl"].version == "0.9.6"


def test_open_instructs_pyproject_pins_vllm_torch_and_deepspeed():
    pins = repository_pins(PINS / "open-instruct")
    assert {name: (p.version, p.exact) for name, p in pins.items() if name in ("vllm", "torch", "deepspeed")} == {
        "vllm": ("0.9.1", True), "torch": ("2.7.0", True), "deepspeed": ("0.15.4", True)}
    assert pins["vllm"].origin == "pyproject.toml:27"


@pytest.mark.parametrize("line, expected", [
    ("transformers==4.46.3", ("transformers", "4.46.3", True)),
    ("vllm[audio]>=0.8.5 ; sys_platform == 'linux'", ("vllm", "0.8.5", False)),
    ("torch~=2.5.0", ("torch", "2.5.0", False)), ("peft<0.14", None), ("trl", None)])
def test_a_requirement_line(line, expected):
    assert requirement(line) == expected


def test_a_flag_wins_over_the_pins_and_a_lock_over_a_range(tmp_path):
    (tmp_path / ".git").mkdir()
    shutil.copy(PINS / "llamafactory" / "requirements.txt", tmp_path / "requirements.txt")
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "transformers"\nversion = "4.44.2"\n')
    (tmp_path / "Dockerfile").write_text("FROM python:3.11\nRUN pip install vllm==0.6.4.post1 torch==2.5.1\n")
    stack = resolve_stack({}, tmp_path)
    assert stack.version("transformers") == "4.44.2" and "uv.lock" in stack.origin("transformers")
    assert stack.versions["vllm"] == Pinned("0.6.4.post1", "Dockerfile:2")
    assert resolve_stack({"transformers_version": "5.0.0"}, tmp_path).version("transformers") == "5.0.0"


def test_older_transformers_keep_the_shifted_logits_and_every_prompt_logit():
    """transformers up to 4.48 make a shifted fp32 copy of the logits in the loss (14 B a logit in
    forward, traced with 4.48.3); up to 4.44 a prefill computes every prompt position's logits."""
    model, cluster = read_model("meta-llama/Llama-3.1-8B"), parse_gpus("1xH100")
    old = Stack({"transformers": Pinned("4.46.3", "test")})
    train = plan_from_flags(model, cluster, {"seq_len": 2048, "lora_rank": 16})
    assert plan_for_stack(train, old).loss == "full-4.48" and plan_for_stack(train, Stack()).loss == "full"
    logits = 2048 * model.vocab_size
    for plan, per_logit in ((train, 10), (plan_for_stack(train, old), 14)):
        head = loss_head(plan)
        assert (head.kept[0] + head.forward[0]) == per_logit * logits
    infer = plan_from_flags(model, cluster, {"seq_len": 2048, "infer": True})
    old_infer = plan_for_stack(infer, Stack({"transformers": Pinned("4.44.2", "test")}))
    logits = {name: next(c.bytes for c in estimate(p).components if c.name.startswith("logits"))
              for name, p in (("new", infer), ("old", old_infer))}
    assert logits["old"] == 2048 * logits["new"]


def test_a_release_outside_the_modelled_ones_is_said():
    assert unmodelled(Stack({"vllm": Pinned("0.5.4", "requirements.txt:3")}), "vllm").endswith("modelled as 0.6")
    assert unmodelled(Stack({"vllm": Pinned("0.11.0", "x")}), "vllm") is None
    assert "can read" in unmodelled(Stack({"transformers": Pinned("main", "x")}), "transformers")


def test_a_vllm_config_takes_its_releases_defaults_and_names_it(tmp_path, capsys):
    """gpu_memory_utilization left out: 0.9 up to vLLM 0.19, 0.92 from 0.20 (each release's
    config/cache.py); the JSON names the release and where it was read."""
    source = (EXAMPLES / "vllm-llama8b-l4.yaml").read_text()
    lines = [line for line in source.splitlines() if not line.startswith("gpu_memory_utilization")]
    config = tmp_path / "serve.yaml"
    config.write_text("\n".join(lines) + "\n")
    (tmp_path / ".git").mkdir()
    budgets = {}
    for version in ("0.11.0", "0.22.0"):
        (tmp_path / "requirements.txt").write_text(f"vllm=={version}\n")
        main(["check", str(config), "--gpus", "1xL4", "--format", "json"])
        entry = json.loads(capsys.readouterr().out)["files"][0]
        assert entry["vllm_version"] == version
        budgets[version] = (entry["serving"]["gpu_memory_utilization"], {f["code"] for f in entry["findings"]})
    assert budgets["0.11.0"] == (0.9, set()) and budgets["0.22.0"][0] == 0.92 and "VL009" in budgets["0.22.0"][1]


LOGS = {json.loads(line)["id"]: json.loads(line)
        for line in (DATA / "vllm_logs" / "releases.jsonl").read_text().splitlines()}


def _serving(record: dict):
    import sys
    sys.path.insert(0, str(DATA.parent.parent / "benchmarks"))
    from vllm_accuracy import serving_for
    return serving_for(record)


def test_vllm_06s_v0_engine_profiles_a_whole_prompt_below_32k():
    """vllm-project/vllm#10517 (vLLM 0.6.4, RTX 3090, Llama-3.1-8B-Instruct; the log lines under
    tests/data/vllm_logs/excerpts): chunked prefill is off up to a 32K context, so the profile run
    is one 20,000-token prompt and the KV cache is what is left (3.81 GiB); at 29,000 tokens the
    cache cannot hold one request and vLLM refuses — both as the V0 defaults say (0.19's would not)."""
    from vramlint.memory.serving.vllm import serving_estimate, starts
    fits = LOGS["gh10517-v064-llama31-8b-3090-20k"]
    est = serving_estimate(_serving(fits))
    assert est.kv_budget / 2**30 == pytest.approx(fits["measured"]["kv_cache_gib"], rel=0.05)
    refused = LOGS["gh10517-v064-llama31-8b-3090-29k-refusal"]
    assert refused["measured"]["error_text"] and not starts(_serving(refused))


def test_vllm_08_falls_back_to_v0_below_compute_capability_8():
    """vLLM 0.8.4 on an RTX 2060 (compute capability 7.5; Q07K/langgraph-mcp-example): V1 needs
    8.0, so the V0 engine runs, with V0's defaults (a whole 10,000-token prompt in the profile run)
    and V0's count outside PyTorch (0.04 GiB printed). With V1's assumptions the KV cache was
    13 % too large; now it is within 2 % of the 3.06 GiB printed."""
    from vramlint.memory.serving.vllm import serving_estimate, v0_engine
    record = LOGS["v0-q07k-v084-qwen3-4b-fp16-rtx2060-12g"]
    serving = _serving(record)
    assert v0_engine((0, 8, 4), serving.sm) and not v0_engine((0, 8, 4), 80) and not v0_engine((0, 10, 2), 75)
    est = serving_estimate(serving)
    assert est.kv_budget / 2**30 == pytest.approx(record["measured"]["kv_cache_gib"], rel=0.02)
    activation = next(c for c in est.components if c.name.startswith("activation"))
    assert activation.bytes / 2**30 == pytest.approx(record["measured"]["activation_peak_gib"], rel=0.1)


def test_nccl_without_nvlink_sharp_takes_a_fraction_of_what_it_takes_on_h100():
    """Two L40S (PCIe, no NVLink SHARP) at TP 2, vLLM 0.7.1 (vllm#15815): 0.30 GiB outside PyTorch
    printed, where H100's NVLS buffers take 2.1 GiB at TP 2 in 0.19. With H100's term the KV cache
    was 20 % short of the 7.71 GiB printed; now within 5 %."""
    from vramlint.memory.serving.vllm import serving_estimate
    record = LOGS["v0-gh15815-v071-qwen25-32b-tp2-l40s"]
    est = serving_estimate(_serving(record))
    non_torch = next(c for c in est.components if c.name == "non-torch memory")
    assert non_torch.bytes / 2**30 == pytest.approx(record["measured"]["non_torch_gib"], abs=0.01)
    assert est.kv_budget / 2**30 == pytest.approx(record["measured"]["kv_cache_gib"], rel=0.05)
    h100 = serving_estimate(dataclasses.replace(_serving(record), gpu_name="NVIDIA H100 80GB HBM3"))
    assert next(c for c in h100.components if c.name == "non-torch memory").bytes == int(2.1 * 2**30)


def test_transformers_before_454_hand_sdpa_the_repeated_kv_heads():
    """Up to transformers 4.53, ``sdpa_attention_forward`` expanded grouped k and v to every head
    (``repeat_kv``) before SDPA, which keeps its inputs: per layer and token 2 x 2 B x (q − kv)
    more for a GQA model (traced against 4.57 / 5.24 on the CPU, research tf4vs5)."""
    from vramlint.memory.parts.activations import layer_bytes_per_token
    model = read_model("meta-llama/Llama-3.1-8B")
    plan = plan_from_flags(model, parse_gpus("1xH100"), {"seq_len": 2048, "weights_dtype": "bfloat16",
                                                           "mixed_precision": "no", "attn": "sdpa"})
    old = plan_for_stack(plan, Stack({"transformers": Pinned("4.53.3", "test")}))
    att = model.layers[0].attention
    extra = layer_bytes_per_token(model.layers[0], model, old) - layer_bytes_per_token(model.layers[0], model, plan)
    assert old.sdpa_repeat_kv and extra == 2 * 2 * (att.num_heads - att.num_kv_heads) * att.head_dim


def test_bitsandbytes_before_0432_keeps_each_4bit_linears_input():
    from vramlint.memory.parts.activations import layer_bytes_per_token
    model = read_model("meta-llama/Llama-3.1-8B")
    plan = plan_from_flags(model, parse_gpus("1xH100"), {"seq_len": 2048, "load_in_4bit": True})
    for version, keeps in (("0.43.1", True), ("0.43.2", False)):
        stacked = plan_for_stack(plan, Stack({"bitsandbytes": Pinned(version, "test")}))
        more = layer_bytes_per_token(model.layers[0], model, stacked) - layer_bytes_per_token(model.layers[0], model, plan)
        assert stacked.bnb_keeps_input is keeps and (more > 0) is keeps


def test_transformers_4_quantizes_each_routed_expert():
    """Before transformers 5 a MoE's experts are nn.Linear modules, which bitsandbytes replaces
    (half a byte a value); transformers 5 fuses them into 3-D parameters it leaves in bf16
    (dev/qlora_moe_storage.py recorded that)."""
    from vramlint.memory.training import model_states
    model = read_model("mistralai/Mixtral-8x7B-Instruct-v0.1")
    plan = plan_from_flags(model, parse_gpus("1xH200"), {"seq_len": 1024, "load_in_4bit": True,
                                                           "weights_dtype": "bfloat16"})
    weights = {}
    for version in ("5.24.0", "4.48.3"):
        stacked = plan_for_stack(plan, Stack({"transformers": Pinned(version, "test")}))
        weights[version] = next(c.bytes for c in model_states(stacked).resting if c.name.startswith("weights"))
    experts = model.layer_params.experts
    assert weights["5.24.0"] - weights["4.48.3"] == pytest.approx(experts * (2 - 4.127 / 8), rel=0.01)


def test_estimate_takes_a_stage_as_a_recipe_does(capsys):
    """``estimate --stage dpo``: chosen + rejected rows and a reference copy (none with LoRA), the
    same rule a recipe's stage goes through (plan.stage_settings)."""
    base = ["estimate", "--train", "--model", "meta-llama/Llama-3.1-8B", "--gpus", "1x80GB", "--seq-len", "1024",
            "--format", "json"]
    for extra, copy in (([], True), (["--lora-rank", "16"], False)):
        main(base + ["--stage", "dpo"] + extra)
        out = json.loads(capsys.readouterr().out)
        names = {c["name"] for c in out["components"]}
        assert ("reference model (frozen copy)" in names) is copy
        assert any("2 rows of 1,024 tokens" in note for note in out["assumptions"])


def test_the_reference_forward_runs_while_the_policys_logits_are_alive():
    """TRL's DPOTrainer runs the policy, then the reference under no_grad (dpo_trainer.py:1299-1347
    in 1.16): at that moment the policy's log-softmax and logits and the reference's logits and
    log-softmax are alive together; with precomputed log-probs there is no such moment."""
    from vramlint.memory.training import training_peak
    model = read_model("Qwen/Qwen2.5-0.5B-Instruct")
    flags = {"seq_len": 1024, "micro_batch": 8, "weights_dtype": "float32", "mixed_precision": "no", "stage": "dpo"}
    plan = plan_from_flags(model, parse_gpus("1xA100-80GB"), flags)
    _, moments, _ = training_peak(plan)
    ref = next(m for m in moments if m.name == "reference forward")
    logits = next(c for c in ref.components if c.name == "logits + loss (reference forward)")
    assert plan.rows == 16 and logits.bytes == 16 * 16 * 1024 * model.vocab_size


def test_a_refusal_speaks_its_releases_words(tmp_path, capsys):
    """vllm-project/vllm#10517's refusal (0.6.4, V0): 'The model's max seq len (29000) is larger
    than the maximum number of tokens that can be stored in KV cache (...)' — V0 counts tokens."""
    record = LOGS["gh10517-v064-llama31-8b-3090-29k-refusal"]
    config = tmp_path / "serve.yaml"
    config.write_text(f"model: {record['model']}\nmax-model-len: {record['max_model_len']}\n"
                      f"gpu-memory-utilization: {record['gpu_memory_utilization']}\n")
    main(["check", str(config), "--gpus", "1xRTX3090", "--vllm-version", "0.6.4", "--format", "json"])
    finding = next(f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL402")
    said = record["measured"]["error_text"]
    assert finding["message"].split("(")[0] == said.split("(")[0].split(": ")[-1]


def test_estimate_applies_the_stated_transformers_version(capsys):
    """``estimate --transformers-version`` runs the plan through the same stack ``check`` does (it
    used to be read and ignored): 4.46's loss keeps the shifted fp32 logits."""
    base = ["estimate", "--train", "--model", "meta-llama/Llama-3.1-8B", "--gpus", "1x80GB", "--seq-len", "1024",
            "--lora-rank", "16", "--format", "json"]
    peaks = {}
    for version in ("5.24.0", "4.46.3"):
        main(base + ["--transformers-version", version])
        out = json.loads(capsys.readouterr().out)
        peaks[version] = out["per_gpu_peak_bytes"]
        assert any(f"transformers {version}" in note for note in out["assumptions"])
    assert peaks["4.46.3"] > peaks["5.24.0"]


def test_a_loop_without_attention_mask_pays_4_57s_built_mask(capsys):
    """``--no-attention-mask`` on transformers 4.57: every layer keeps a b × s × s mask and full-head
    k and v (tests/test_transformers_versions.py traces it); the same flag on 5.24 changes nothing."""
    base = ["estimate", "--train", "--model", "meta-llama/Llama-3.2-1B", "--gpus", "1x80GB", "--seq-len", "2048",
            "--micro-batch", "2", "--format", "json"]
    peaks = {}
    for version in ("4.57.6", "5.24.0"):
        for flag in ([], ["--no-attention-mask"]):
            main(base + ["--transformers-version", version] + flag)
            out = json.loads(capsys.readouterr().out)
            peaks[version, bool(flag)] = out["per_gpu_peak_bytes"]
            assert any("causal mask" in note for note in out["assumptions"]) is (version == "4.57.6" and bool(flag))
    layers, b, s, d, heads, kv = 16, 2, 2048, 64, 32, 8
    mask_and_repeats = layers * (2 * b * s * s + 4 * b * s * d * (heads - kv))
    assert peaks["4.57.6", True] - peaks["4.57.6", False] == pytest.approx(mask_and_repeats, rel=0.05)
    assert peaks["5.24.0", True] == peaks["5.24.0", False] == peaks["4.57.6", False]


def test_a_share_above_what_is_free_at_startup_is_refused_in_the_releases_words(tmp_path, capsys):
    """From 0.9 the worker refuses a requested share above the free memory of its first snapshot:
    78.68 of 79.19 GiB on an idle H100 (the 0.19 logs: the CUDA context). 0.995 x 79.19 = 78.79 GiB
    is refused, in 0.19's words (the device named) or 0.11's; 0.8 has no such check."""
    config = tmp_path / "serve.yaml"
    config.write_text("model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\ngpu-memory-utilization: 0.995\n")
    said = {}
    for version in ("0.19.0", "0.11.0", "0.8.5"):
        main(["check", str(config), "--gpus", "1xH100", "--vllm-version", version, "--format", "json"])
        said[version] = next(f["message"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]
                             if f["code"] == "VL407")
    assert said["0.19.0"].startswith("Free memory on device cuda:0 (78.68/79.19 GiB) on startup is less than desired "
                                     "GPU memory utilization (0.995, 78.79 GiB). Decrease GPU memory utilization")
    assert said["0.11.0"].startswith("Free memory on device (78.68/79.19 GiB) on startup")
    assert said["0.8.5"].startswith("gpu_memory_utilization 0.995 gives vLLM the whole GPU")


def test_no_cache_blocks_in_the_releases_words():
    """'No available memory for the cache blocks.' as each wheel raises it: the same from 0.6.4 to
    0.11, a docs link from 0.19, a CPU-backend note in 0.33."""
    import dataclasses as dc

    from vramlint.rules.serving import _no_blocks
    serving = _serving(LOGS["gh10517-v064-llama31-8b-3090-20k"])
    words = {v: _no_blocks(dc.replace(serving, release=v)) for v in ("0.6.4", "0.11.0", "0.19.0", "0.33.0")}
    assert words["0.6.4"] == words["0.11.0"] == ("No available memory for the cache blocks. Try increasing "
                                                 "`gpu_memory_utilization` when initializing the engine.")
    assert words["0.19.0"].endswith("the engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
                                    "for more details.")
    assert "despite its name). See https://" in words["0.33.0"]


def test_installed_versions_are_importlib_metadatas():
    """What ``installed`` reads from the dist-info folders is what importlib.metadata says, for
    every modelled package installed here (torch, transformers and deepspeed in CI)."""
    from importlib import metadata

    from vramlint.stack import PACKAGES, installed
    expected = {}
    for name in PACKAGES:
        try:
            expected[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    assert {"torch", "transformers", "deepspeed"} <= set(expected)
    assert {name: pinned.version for name, pinned in installed().items()} == expected


def test_installed_reads_the_first_distribution_on_the_path(tmp_path, monkeypatch):
    """An egg-info file and a dist-info folder, names spelled as installers spell them: the first
    on ``sys.path`` wins, as in importlib.metadata."""
    import sys
    from importlib import metadata

    from vramlint.stack import installed
    first, second = tmp_path / "first", tmp_path / "second"
    (first / "Flash_Attn-2.8.3.dist-info").mkdir(parents=True)   # not modelled: ignored
    (first / "DeepSpeed-0.16.4.dist-info").mkdir()
    (first / "DeepSpeed-0.16.4.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: deepspeed\n"
                                                                   "Version: 0.16.4\n\nVersion: 9\n")
    second.mkdir()
    (second / "deepspeed-0.19.8.dist-info").mkdir()
    (second / "deepspeed-0.19.8.dist-info" / "METADATA").write_text("Name: deepspeed\nVersion: 0.19.8\n")
    (second / "vllm.egg-info").write_text("Metadata-Version: 1.0\nName: vllm\nVersion: 0.8.5.post1\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    installed.cache_clear()
    try:
        found = {name: pinned.version for name, pinned in installed().items()}
        assert found == {"deepspeed": "0.16.4", "vllm": "0.8.5.post1"}
        assert found == {name: metadata.version(name) for name in found}
    finally:
        installed.cache_clear()
