"""vLLM serve configs: flag spellings, the KV budget against published start-up logs, and the
start-up refusals vLLM would print."""

from __future__ import annotations

import json
from dataclasses import replace
import statistics
import sys

import pytest

from conftest import CORPUS, ROOT, SHARED, shared_or_skip
from vramlint.cli import main
from vramlint.documents import parse_yaml
from vramlint.readers.vllm import human_int, looks_like_vllm, read_vllm

sys.path.insert(0, str(ROOT / "benchmarks"))


def check(capsys, tmp_path, text: str, gpus: str = "1xH100") -> tuple[int, dict]:
    path = tmp_path / "vllm.yaml"
    path.write_text(text)
    code = main(["check", str(path), "--gpus", gpus, "--format", "json"])      # the file names its model
    return code, json.loads(capsys.readouterr().out)["files"][0]


def test_mixed_dash_and_underscore_spellings():
    path = shared_or_skip(CORPUS / "vllm" / "defnlnotme__models__vllm.yaml")
    cfg = read_vllm(parse_yaml(path.read_text(), str(path)))
    assert cfg.tensor_parallel.value == 2 and cfg.pipeline_parallel.value == 1
    assert cfg.gpu_memory_utilization.value == 0.7
    assert cfg.tensor_parallel.location.line == path.read_text().splitlines().index("tensor-parallel-size: 2") + 1


@pytest.mark.parametrize("text, value", [(8192, 8192), ("8k", 8000), ("8K", 8192), ("1.5g", 1_500_000_000), ("x", None)])
def test_human_readable_integers(text, value):
    assert human_int(text) == value


def test_client_settings_and_other_harnesses_are_not_vllm_configs():
    for name in ["GogoRit__llm-inference-lab__configs__vllm.yaml", "LMCache__lmcache-tests__configs__vllm.yaml"]:
        path = shared_or_skip(CORPUS / "vllm" / name)
        assert not looks_like_vllm(parse_yaml(path.read_text()).data), name


def test_kv_budget_matches_published_logs():
    from vllm_accuracy import serving_for
    from vramlint.memory.serving.vllm import serving_estimate
    logs = shared_or_skip(SHARED / "groundtruth" / "vllm-startup-logs.jsonl")
    errors = []
    for line in logs.read_text().splitlines():
        record = json.loads(line)
        serving = serving_for(record)
        if serving is None or "kv_cache_gib" not in record["measured"]:
            continue
        est = serving_estimate(serving)
        if serving.pp == 1:         # a PP log's GiB lines are its first stage's (see the PP test)
            errors.append(abs(est.kv_budget / 2**30 - record["measured"]["kv_cache_gib"])
                          / record["measured"]["kv_cache_gib"])
    assert len(errors) >= 16 and statistics.median(errors) <= 0.005 and max(errors) <= 0.03


def log_estimate(log_id: str):
    """A published log and vramlint's estimate of the same setup."""
    from vllm_accuracy import serving_for
    from vramlint.memory.serving.vllm import serving_estimate
    logs = shared_or_skip(SHARED / "groundtruth" / "vllm-startup-logs.jsonl")
    record = next(r for r in map(json.loads, logs.read_text().splitlines()) if r["id"] == log_id)
    return record, serving_estimate(serving_for(record))


def activation_gib(est) -> float:
    return next(c.bytes for c in est.components if c.name == "activation peak (profile run)") / 2**30


@pytest.mark.parametrize("log_id", [
    "planner-v019-llama-3-1-8b-instruct-tp1-8192",        # the sampler's logits decide: V 128256
    "planner-v019-llama-3-1-8b-instruct-tp4-8192",        # ... whole on every TP rank: the same 1.89
    "planner-v019-llama-3-3-70b-fp8dyn-tp4-8192",
    "planner-v019-qwen2-5-72b-instruct-tp2-8192",
    "planner-v019-gemma-2-27b-it-tp1-8192",               # V 256000
    "planner-v019-codellama-7b-hf-tp1-8192",              # V 32016: the forward's MLP decides
    "planner-v019-mixtral-8x7b-instruct-v0-1-tp2-8192",   # + the fused-MoE workspace vLLM keeps
    "planner-v019-qwen3-30b-a3b-tp1-8192",
    "planner-v019-deepseek-v2-lite-chat-tp1-8192",
    "planner-v019-gpt-oss-20b-tp1-8192-sampler-oom",      # MXFP4 experts: no TritonExperts workspace
])
def test_the_profile_runs_activation_peak_is_vllms(log_id):
    """vLLM's logged activation peak (torch's peak during the profile run): the larger of the
    forward's widest MLP and the sampler's warm-up, plus the fused-MoE workspace and cuBLAS's.
    A model that divided the sampler by TP missed the TP 4 log by 0.31 GiB."""
    record, est = log_estimate(log_id)
    assert activation_gib(est) == pytest.approx(record["measured"]["activation_peak_gib"], abs=0.02)


def test_under_pipeline_parallelism_the_last_stage_decides_the_blocks():
    """vLLM gives every stage the smallest stage's block count: the last, which runs the sampler.
    The log's GiB lines are the first stage's (activation 1.10); its tokens the last stage's."""
    record, est = log_estimate("planner-v019-llama-3-1-8b-instruct-tp1-pp2-8192")
    assert est.kv_tokens == pytest.approx(record["measured"]["kv_cache_tokens"], rel=0.002)
    assert activation_gib(est) > record["measured"]["activation_peak_gib"] + 0.5


@pytest.mark.parametrize("log_id", ["planner-v019-llama-3-1-8b-w4a16-gptq-tp1-8192",
                                    "planner-v019-llama-3-3-70b-fp8dyn-tp2-8192",
                                    "planner-v019-llama-3-3-70b-fp8dyn-tp4-8192",
                                    "planner-v019-gpt-oss-20b-tp1-8192-sampler-oom"])
def test_quantized_re_uploads_load_what_their_logs_say(log_id):
    """RedHatAI's w4a16 (int4, one fp16 scale per 128, symmetric: no zero point) and FP8-dynamic
    releases, as the catalog builds them from the base config and llm-compressor's scheme; and
    gpt-oss's MXFP4 experts as vLLM's Triton kernels lay them out on an H100 (13.64 GiB: the
    4.25-bit count alone is 12.82)."""
    record, est = log_estimate(log_id)
    assert est.loaded / 2**30 == pytest.approx(record["measured"]["weights_gib"], abs=0.05)
    assert est.kv_budget / 2**30 == pytest.approx(record["measured"]["kv_cache_gib"], rel=0.005)


def test_max_model_len_beyond_the_kv_cache_is_refused_with_vllms_words(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\n"
                                        "max-model-len: 131072\ngpu-memory-utilization: 0.9\n")
    finding = next(f for f in out["findings"] if f["code"] == "VL402")
    assert code == 1 and finding["line"] == 3
    assert finding["message"].startswith("To serve at least one request with the models's max seq len (131072)")
    assert finding["message"].endswith("docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details.")
    fits = out["serving"]["max_model_len_that_fits"]
    assert 0 < fits < 131072
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\n"
                                        f"max-model-len: {fits}\ngpu-memory-utilization: 0.9\n")
    assert code == 0


@pytest.mark.parametrize("length", [131072, 16384])
def test_each_change_the_hint_names_lets_vllm_start(capsys, tmp_path, length):
    """Llama-3.1-70B on two H100s leaves 1.47 GiB for the KV cache: 131072 tokens need 20 GiB, which
    only a larger TP or fp8 weights (33 GiB freed) give; 16384 need 2.5 GiB, which an fp8 KV cache
    or a higher gpu-memory-utilization give too. Every change the hint names, written into the
    file, passes."""
    base = f"model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\nmax-model-len: {length}\n"
    code, out = check(capsys, tmp_path, base + "gpu-memory-utilization: 0.9\n")
    hint = next(f for f in out["findings"] if f["code"] == "VL402")["hint"]
    changes = [part.split(" (")[0] for part in hint.replace(" or ", ", ").split(", ")]
    assert code == 1 and {"tensor-parallel-size: 4", "quantization: fp8"} <= set(changes)
    assert ("kv-cache-dtype: fp8" in changes) == (length == 16384)
    for change in changes:
        key = change.split(":")[0]
        text = "\n".join(line for line in (base + "gpu-memory-utilization: 0.9\n").splitlines()
                         if not line.startswith(key + ":")) + f"\n{change}\n"
        code, out = check(capsys, tmp_path, text, gpus="4xH100")
        assert code == 0, (change, out["findings"])


def test_fewer_sequences_shrink_the_samplers_warm_up_enough_to_start(capsys, tmp_path):
    """gemma-3-27b's 262,208-entry vocabulary makes the sampler's warm-up over 1024 dummy requests
    3.7 GiB of the profile run's peak: at 0.83 of an H100 one 131072-token request misses the KV
    budget by 0.08 GiB, and 512 sequences give it back. Written into the file, the hint passes."""
    base = "model: google/gemma-3-27b-it\nmax-model-len: 131072\ngpu-memory-utilization: 0.83\n"
    code, out = check(capsys, tmp_path, base)
    assert code == 1 and "max-num-seqs: 512" in next(f for f in out["findings"] if f["code"] == "VL402")["hint"]
    code, out = check(capsys, tmp_path, base + "max-num-seqs: 512\n")
    assert code == 0, out["findings"]


def test_serving_a_multimodal_checkpoint_for_text_alone_is_offered_where_it_starts(capsys, tmp_path):
    """gemma-3-27b at 0.83 of an H100 misses by 0.08 GiB; language-model-only drops the SigLIP
    tower's weights and the dummy images' embeddings from the profile run, and vLLM starts. A
    text-only checkpoint is never offered it."""
    base = "model: google/gemma-3-27b-it\nmax-model-len: 131072\ngpu-memory-utilization: 0.83\n"
    code, out = check(capsys, tmp_path, base)
    assert code == 1 and "language-model-only: true" in next(f for f in out["findings"] if f["code"] == "VL402")["hint"]
    code, out = check(capsys, tmp_path, base + "language-model-only: true\n")
    assert code == 0, out["findings"]
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\nmax-model-len: 131072\n")
    assert code == 1 and "language-model-only" not in next(f for f in out["findings"] if f["code"] == "VL402")["hint"]


def test_a_kv_cache_size_set_in_bytes_is_checked_against_the_gpu(capsys, tmp_path):
    """kv_cache_memory_bytes replaces vLLM's budget: the weights and that cache must still fit the
    GPU (Llama-3.1-405B on one H100 does not), and the cache must hold one request of
    max_model_len; each hint, written into the file, passes."""
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-405B\nmax-model-len: 8192\n"
                                        "kv-cache-memory-bytes: 10G\n", gpus="16xH100")
    finding = next(f for f in out["findings"] if f["code"] == "VL201")
    assert code == 1 and finding["line"] == 3 and "kv_cache_memory_bytes" in finding["message"]
    assert "tensor-parallel-size: 16" in finding["hint"]
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-405B\nmax-model-len: 8192\n"
                                        "kv-cache-memory-bytes: 10G\ntensor-parallel-size: 16\n", gpus="16xH100")
    assert code == 0, out["findings"]
    text = "model: meta-llama/Llama-3.1-8B\nmax-model-len: 131072\nkv-cache-memory-bytes: 2G\n"
    code, out = check(capsys, tmp_path, text)
    hint = next(f for f in out["findings"] if f["code"] == "VL402")["hint"]
    setting = next(part for part in hint.replace(" or ", ", ").split(", ") if part.startswith("kv-cache-memory-bytes"))
    code, out = check(capsys, tmp_path, text.replace("kv-cache-memory-bytes: 2G", setting))
    assert code == 0, out["findings"]


def test_max_model_len_beyond_the_model(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-2-7b-hf\nmax_model_len: 8192\n")
    assert code == 1 and out["findings"][0]["code"] == "VL401" and "max_position_embeddings=4096" in out["findings"][0]["message"]


def test_tensor_parallel_must_divide_heads(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: Qwen/Qwen2.5-7B\ntensor_parallel_size: 8\n", gpus="8xH100")
    assert code == 1 and out["findings"][0]["code"] == "VL403"
    assert out["findings"][0]["message"] == "Total number of attention heads (28) must be divisible by tensor parallel size (8)."


def test_weights_that_do_not_fit_leave_no_cache(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-70B\n")
    assert code == 1 and out["findings"][0]["code"] == "VL201"
    assert "No available memory for the cache blocks" in out["findings"][0]["message"]


def test_unknown_flag_is_refused(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nmax_seq_len: 4096\n")
    assert code == 1 and out["findings"][0]["code"] == "VL101" and "unrecognized arguments" in out["findings"][0]["message"]


def test_an_instruct_model_is_checked_as_the_release_it_is(capsys, tmp_path):
    """vLLM configs name instruction-tuned repos. Llama-3.1-8B-Instruct is the base architecture
    under its own name; Qwen2.5-7B-Instruct states max_position_embeddings 32768 where the base
    states 131072, so 65536 tokens are beyond the Instruct model (vLLM's refusal) and not the base."""
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n")
    assert code == 0 and out["findings"] == []
    assert out["serving"]["model"] == "meta-llama/Llama-3.1-8B-Instruct" and out["serving"]["kv_cache_tokens"] > 400_000
    code, out = check(capsys, tmp_path, "model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 65536\n")
    assert code == 1 and out["findings"][0]["code"] == "VL401"
    assert "max_position_embeddings=32768" in out["findings"][0]["message"]
    code, out = check(capsys, tmp_path, "model: Qwen/Qwen2.5-7B\nmax-model-len: 65536\n")
    assert "VL401" not in {f["code"] for f in out["findings"]}


@pytest.mark.parametrize(("model", "tables"), [
    ("meta-llama/Llama-3.1-8B", ((131072, 128),)),                 # llama3 scaling keeps the positions
    ("google/gemma-3-12b-it", ((131072, 256), (131072 * 8, 256))),  # sliding: local base; global: linear x8
    ("google/gemma-3-1b-it", ((32768, 256), (32768, 256))),         # two thetas: two tables of one size
    ("deepseek-ai/DeepSeek-V2-Lite", ((4096 * 40, 64),)),           # deepseek_yarn: original x factor, rope dim
    ("openai/gpt-oss-20b", ((4096 * 32, 64),)),                      # yarn
    ("microsoft/Phi-3-mini-128k-instruct", ((4096 + 131072, 96),)),  # longrope: short and long in one
    ("EleutherAI/pythia-1b", ((2048, 64),)),                         # rotary_pct 0.25 of head 256
    ("gpt2", ()),                                                    # learned positions
])
def test_rope_tables_are_vllms(model, tables):
    """The cos/sin caches vLLM's get_rope builds, one per distinct rotary embedding, by each
    scaling class's own positions (vllm/model_executor/layers/rotary_embedding, 0.19)."""
    from vramlint.models import read_model
    assert read_model(model).rope_tables == tables


@pytest.mark.parametrize("log_id", ["planner-v019-llama-3-1-8b-instruct-tp1-8192",
                                    "planner-v019-llama-3-1-8b-instruct-tp4-8192",
                                    "planner-v019-llama-3-1-8b-instruct-tp1-pp2-8192",
                                    "planner-v019-gemma-2-27b-it-tp1-8192"])
def test_weights_and_rope_tables_are_what_vllm_says_loading_took(log_id):
    """vLLM's "Model loading took" is the memory allocated while loading: the rank's weights and
    the RoPE tables every rank holds whole (32 MiB for Llama-3.1: TP 4 loads 3.77 GiB, not 3.74)."""
    predicted, measured = loaded_gib(log_id)
    assert round(predicted, 2) == measured


def loaded_gib(log_id: str) -> tuple[float, float]:
    """What vramlint and a published log say vLLM's model loading took, GiB."""
    record, est = log_estimate(log_id)
    return est.loaded / 2**30, record["measured"]["weights_gib"]


def test_a_multimodal_checkpoint_loads_its_vision_tower():
    """vLLM builds Gemma 3's SigLIP tower and projector beside the language model: 416,866,032 +
    4,424,832 parameters (transformers' own count of Gemma3ForConditionalGeneration on the meta
    device, less its language model), which with the RoPE tables bring the predicted load of
    gemma-3-12b to the log's 23.31 GiB (22.48 without the tower)."""
    from vramlint.models import read_model
    assert read_model("google/gemma-3-12b-it").vision_params == 416_866_032 + 4_424_832
    assert read_model("google/gemma-3-1b-it").vision_params == 0          # text-only
    from vramlint.models.hfconfig import shape_from_dict
    llava_like = shape_from_dict({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                  "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100,
                                  "vision_config": {"model_type": "clip_vision_model"}})
    assert "vision tower (clip_vision_model) not counted" in " ".join(llava_like.notes)
    predicted, measured = loaded_gib("planner-v019-gemma-3-12b-it-tp1-8192")
    assert abs(predicted - measured) < 0.06


def test_moe_layers_spread_the_experts_over_every_data_parallel_rank(capsys, tmp_path):
    """vLLM's MoE layers flatten TP across DP (FusedMoEParallelConfig.make): Qwen3-30B-A3B at TP 2 x
    DP 4 holds its 1.54 B non-expert parameters / 2 and its 28.99 B expert parameters / 8 — split
    8 ways, or with enable_expert_parallel 8 groups of whole experts; the same bytes either way.
    A dense model's replicas hold all of it / TP."""
    from vramlint.models import read_model
    m = read_model("Qwen/Qwen3-30B-A3B")
    experts = m.layer_params.experts
    base = "model: Qwen/Qwen3-30B-A3B\ntensor-parallel-size: 2\ndata-parallel-size: 4\n"
    for flag in ("enable-expert-parallel: true\n", "no-enable-expert-parallel: true\n", ""):
        code, out = check(capsys, tmp_path, base + flag, gpus="8xH100")
        weights = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
        assert code == 0 and out["serving"]["expert_parallel"] == bool(flag.startswith("enable"))
        assert weights == (m.params - experts) * 2 // 2 + experts * 2 // 8
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\ntensor-parallel-size: 2\n"
                                        "data-parallel-size: 4\n", gpus="8xH100")
    llama = read_model("meta-llama/Llama-3.1-8B")
    assert next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights") == llama.params * 2 // 2


def test_the_moe_workspace_follows_the_experts_width_and_the_gathered_tokens():
    """TritonExperts sizes its workspace by the local experts' width — I/TP split, I whole under
    expert parallelism (Mixtral: I 14336 > h 4096, so it doubles) — and by the tokens the layer
    computes: with DP the naive dispatch all-gathers every replica's."""
    from vramlint.memory.serving.vllm import Serving, _moe_workspace
    from vramlint.models import read_model
    s = Serving(read_model("mistralai/Mixtral-8x7B-v0.1"), 80 * 2**30, tp=2)
    tokens, k = s.batched_tokens, 2
    assert _moe_workspace(s) == tokens * k * (7168 + 14336) * 2
    assert _moe_workspace(replace(s, expert_parallel=True)) == tokens * k * (14336 + 28672) * 2
    assert _moe_workspace(replace(s, expert_parallel=True, dp=2)) == 2 * tokens * k * (14336 + 28672) * 2


@pytest.mark.parametrize("line", ["tensor-parallel-size: x", "data-parallel-size: [2]", "gpu-memory-utilization: abc",
                                  "gpu-memory-utilization: .inf", "gpu-memory-utilization: 1e308",
                                  "cpu-offload-gb: lots", "max-num-seqs: -3"])
def test_a_flag_of_the_wrong_kind_is_a_finding_not_an_internal_error(capsys, tmp_path, line):
    code, out = check(capsys, tmp_path, f"model: meta-llama/Llama-3.1-8B\n{line}\n")
    assert code == 1 and [f["code"] for f in out["findings"]] == ["VL102"] and out["findings"][0]["line"] == 2


def test_a_multimodal_profile_keeps_its_dummy_images_embeddings():
    """vLLM profiles Gemma 3's vision tower first, on as many dummy images as the encoder budget
    (8192 tokens) holds, and keeps their embeddings (3840 wide, bf16) through the language model's
    profile: 60 MiB more, 3.80 GiB against the log's 3.94 (3.74 without them)."""
    record, est = log_estimate("planner-v019-gemma-3-12b-it-tp1-8192")
    from vllm_accuracy import serving_for
    from vramlint.memory.serving.vllm import serving_estimate
    serving = serving_for(record)
    text_only = serving_estimate(replace(serving, model=replace(serving.model, vision=None)))
    assert (activation_gib(est) - activation_gib(text_only)) * 2**30 == 8192 * 3840 * 2
    assert abs(activation_gib(est) - record["measured"]["activation_peak_gib"]) < 0.15


def test_online_fp8_loads_what_the_fp8_checkpoint_loads(capsys, tmp_path):
    """``quantization: fp8`` on a 16-bit checkpoint makes vLLM cast every linear to fp8 as it loads
    (Fp8OnlineLinearMethod): Llama-3.3-70B so served holds the bytes RedHatAI's FP8-dynamic
    re-upload loads, whose log says 33.88 GiB at TP 2."""
    base = "model: meta-llama/Llama-3.3-70B-Instruct\ntensor-parallel-size: 2\nmax-model-len: 16384\n"
    weights = {}
    for model, flag in (("meta-llama/Llama-3.3-70B-Instruct", "quantization: fp8\n"),
                        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", ""),
                        ("meta-llama/Llama-3.3-70B-Instruct", "")):
        code, out = check(capsys, tmp_path, base.replace("meta-llama/Llama-3.3-70B-Instruct", model) + flag,
                          gpus="2xH100")
        weights[(model, flag)] = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
    online, serialized, plain = weights.values()
    assert online == serialized and round(online / 2**30, 1) == 33.8 and plain > 1.9 * online


def test_a_quantization_the_checkpoint_was_not_made_with_is_noted(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nquantization: awq\n")
    assert "quantization 'awq' needs a checkpoint quantized with it" in " ".join(out["notes"])


def test_flags_vllm_0_19_declares_are_not_unknown_keys(capsys, tmp_path):
    """The schema holds every flag of vLLM 0.19's EngineArgs and OpenAI frontend (dev/vllm_flags.py
    reads them from vLLM's source): these were refused as unknown keys before."""
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nmax-model-len: 8192\n"
                                        "language-model-only: true\ncudagraph-capture-sizes: [1, 2, 4, 8]\n"
                                        "optimization-level: 3\nall2all-backend: allgather_reducescatter\n"
                                        "attention-config: {backend: FLASH_ATTN}\nno-enable-dbo: true\n"
                                        "mm-processor-kwargs: '{\"do_pan_and_scan\": false}'\n")
    assert code == 0 and out["findings"] == []
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nmax-seq-len: 5000\n")
    assert [f["code"] for f in out["findings"]] == ["VL101"]         # not a vLLM flag


@pytest.mark.parametrize("line", ["language-model-only: true", "limit-mm-per-prompt: '{\"image\": 0}'",
                                  "limit-mm-per-prompt: {image: {count: 0}}"])
def test_no_images_per_prompt_builds_no_vision_tower(capsys, tmp_path, line):
    """vLLM 0.19 builds a tower only for modalities whose limit_mm_per_prompt is not 0
    (``_mark_tower_model``), and profiles no dummy images without one: gemma-3-12b then loads
    its language model alone (21.92 GiB, not 22.70) and profiles 3.74 GiB, not 3.80."""
    base = "model: google/gemma-3-12b-it\nmax-model-len: 32768\n"
    parts = {}
    for text in (base, base + line + "\n"):
        code, out = check(capsys, tmp_path, text)
        parts[text] = {c["name"]: c["bytes"] for c in out["serving"]["components"]}
    full, text_only = parts.values()
    assert full["weights"] - text_only["weights"] == (416_866_032 + 4_424_832) * 2
    assert full["activation peak (profile run)"] - text_only["activation peak (profile run)"] == 8192 * 3840 * 2


def test_gemma_4_counts_its_vision_tower_and_projector():
    """Gemma 4's tower: patch projection, two position tables, 27 layers with q/k norms and a gated
    MLP, and the projector into the text width: 572,792,112 for gemma-4-26B-A4B, transformers' own
    count on the meta device (Gemma4ForConditionalGeneration)."""
    from vramlint.models import read_model
    m = read_model("google/gemma-4-26B-A4B")
    assert (m.vision_params, m.vision.token_width, m.vision.tp_sharded, m.notes) == (572_792_112, 2816, False, ())


def test_qwen3_vl_counts_its_vision_tower_and_deepstack_mergers():
    """Qwen3-VL's tower: a 3-D patch embedding, learned positions, 27 blocks, the merger and one
    more merger per deepstack layer (transformers' Qwen3VLVisionModel): 576,388,336 parameters for
    Qwen3-VL-8B, transformers' own count on the meta device. Each image token reaches the language
    model as the merger's 4096 and three deepstack features: 16,384 wide."""
    from vramlint.models import read_model
    m = read_model("Qwen/Qwen3-VL-8B-Instruct")
    assert (m.vision_params, m.vision.token_width) == (576_388_336, 4096 * 4)


@pytest.mark.parametrize("name, text, tower", [
    ("Qwen/Qwen2.5-VL-3B-Instruct", 3_085_938_688, 668_684_288),
    ("Qwen/Qwen2.5-VL-7B-Instruct", 7_615_616_512, 676_550_144),
    ("Qwen/Qwen2.5-VL-72B-Instruct", 72_706_203_648, 704_573_696),
])
def test_qwen2_5_vl_reads_its_flat_config_and_counts_its_tower(name, text, tower):
    """Qwen2.5-VL's published configs keep the language model's keys at the top level (transformers
    pops them into text_config); its tower is a gated-MLP ViT with RMSNorms and a merger into the
    text width. Both parts equal transformers' meta-device count (AutoModelForImageTextToText), and
    their sums are the checkpoints' published sizes (3.75 B, 8.29 B, 73.4 B)."""
    from vramlint.models import read_model
    m = read_model(name)
    assert (m.params, m.vision_params, m.vision.token_width) == (text, tower, m.hidden_size)
    assert m.layers[0].attention.num_kv_heads == {"3B": 2, "7B": 4, "72B": 8}[name.split("-")[2]]
    assert m.architecture == "Qwen2_5_VLForConditionalGeneration"      # the checkpoint's class, not None


def test_llama_4_counts_its_tower_for_vllm_but_autocausallm_leaves_it_out():
    """Llama 4's tower and projector: 871,932,416 parameters for Scout and Maverick (transformers'
    meta-device count; with the text model, 108,641,793,536 and 401,583,781,376, the checkpoints'
    sizes). vLLM builds Llama4ForConditionalGeneration, tower split over TP; AutoModelForCausalLM
    builds Llama4ForCausalLM, text only, so training and --infer say so and leave it out."""
    from vramlint.hardware import parse_gpus
    from vramlint.memory import estimate
    from vramlint.models import read_model
    from vramlint.plan import Plan
    for name, total in (("meta-llama/Llama-4-Scout-17B-16E-Instruct", 108_641_793_536),
                        ("meta-llama/Llama-4-Maverick-17B-128E-Instruct", 401_583_781_376)):
        m = read_model(name)
        assert (m.vision_params, m.params + m.vision_params, m.vision.tp_sharded) == (871_932_416, total, True)
    p = Plan(model=m, cluster=parse_gpus("8xH200"), precision="bf16", zero_stage=3, seq_len=1024)
    e = estimate(p, replay=False)
    assert not any(c.name.startswith("vision tower") for c in e.components)
    assert any("Llama4ForCausalLM" in note for note in e.assumptions)


@pytest.mark.parametrize("model, whole", [("Qwen/Qwen2.5-VL-7B-Instruct", True), ("google/gemma-3-12b-it", False)])
def test_mm_encoder_tp_mode_data_keeps_the_tower_whole_where_vllm_supports_it(capsys, tmp_path, model, whole):
    """``mm-encoder-tp-mode: data`` replicates the tower on every TP rank for the models vLLM 0.19
    marks supports_encoder_tp_data (Qwen2.5-VL); Gemma 3 falls back to splitting it, with vLLM's
    warning as a note."""
    base = f"model: {model}\ntensor-parallel-size: 2\nmax-model-len: 8192\n"
    weights = {}
    for mode in ("weights", "data"):
        code, out = check(capsys, tmp_path, base + f"mm-encoder-tp-mode: {mode}\n", gpus="2xH100")
        weights[mode] = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
        notes = " ".join(out.get("notes", []))
    from vramlint.models import read_model
    tower = read_model(model).vision_params
    assert weights["data"] - weights["weights"] == (tower * 2 - tower * 2 // 2 if whole else 0)
    assert ("Falling back to `--mm-encoder-tp-mode weights`" in notes) == (not whole)


def test_llava_counts_the_clip_tower_vllm_builds_up_to_its_feature_layer(capsys, tmp_path):
    """LLaVA-1.5's CLIP tower and projector: 324,487,168 parameters in transformers (with the
    language model, 7,063,427,072, the checkpoint's size), but vLLM builds the tower only up to
    vision_feature_layer -2 and without its post-LayerNorm (``init_vision_tower_for_llava``,
    ``require_post_norm=False``): one 12,596,224-parameter block and 2,048 fewer."""
    from vramlint.models import read_model
    m = read_model("llava-hf/llava-1.5-7b-hf")
    assert (m.vision_params, m.params + m.vision_params) == (324_487_168, 7_063_427_072)
    assert m.vision.vllm_params == 324_487_168 - 12_596_224 - 2_048
    weights = {}
    for line in ("", "limit-mm-per-prompt: {image: 0}\n"):
        code, out = check(capsys, tmp_path, "model: llava-hf/llava-1.5-7b-hf\nmax-model-len: 4096\n" + line)
        weights[line] = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
    assert weights[""] - weights["limit-mm-per-prompt: {image: 0}\n"] == 2 * m.vision.vllm_params
    main(["model", "llava-hf/llava-1.5-7b-hf", "--format", "json"])
    info = json.loads(capsys.readouterr().out)
    assert (info["vision_params"], info["vision_params_vllm"]) == (324_487_168, m.vision.vllm_params)


def test_a_vision_config_naming_another_type_is_read_as_transformers_reads_it():
    """Qwen3-VL-30B-A3B's published config names its vision_config's type qwen3_vl_moe (the
    checkpoint's own); transformers builds Qwen3VLMoeVisionConfig from the dict regardless, so the
    tower is counted: 538,631,408, transformers' count on the meta device (it was left out)."""
    from vramlint.models import read_model
    path = shared_or_skip(CORPUS / "hf_models" / ("ai-dynamo__aiconfigurator__aic-core__src__aiconfigurator_core__"
                                                  "model_configs__Qwen--Qwen3-VL-30B-A3B-Instruct_config.json"))
    m = read_model(str(path))
    assert (m.vision_params, m.vision.token_width, m.notes) == (538_631_408, 2048 * 4, ())



def test_a_tower_stays_while_any_of_its_modalities_is_allowed(capsys, tmp_path):
    """Qwen3-VL's tower serves images and video: vLLM leaves it out only when both limits are 0."""
    base = "model: Qwen/Qwen3-VL-8B-Instruct\nmax-model-len: 32768\n"
    weights = {}
    for line in ("", "limit-mm-per-prompt: {image: 0}\n", "limit-mm-per-prompt: {image: 0, video: 0}\n"):
        code, out = check(capsys, tmp_path, base + line)
        weights[line] = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
    full, images_off, both_off = weights.values()
    assert full == images_off == both_off + 576_388_336 * 2


def test_gemma_4s_tower_is_whole_on_every_tensor_parallel_rank(capsys, tmp_path):
    """vLLM builds Gemma 4's tower as transformers' own module and its projector as a
    ReplicatedLinear (gemma4_mm.py), where SigLIP and Qwen3-VL's use parallel linears split by TP."""
    split = {}
    for model in ("google/gemma-4-26B-A4B", "google/gemma-3-27b-it"):
        towers = []
        for tp in (1, 2):
            code, out = check(capsys, tmp_path, f"model: {model}\ntensor-parallel-size: {tp}\nmax-model-len: 8192\n")
            with_tower = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights")
            code, out = check(capsys, tmp_path, f"model: {model}\ntensor-parallel-size: {tp}\nmax-model-len: 8192\n"
                                                "language-model-only: true\n")
            towers.append(with_tower - next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "weights"))
        split[model] = towers
    assert split["google/gemma-4-26B-A4B"] == [572_792_112 * 2] * 2
    assert split["google/gemma-3-27b-it"][1] == split["google/gemma-3-27b-it"][0] // 2


def test_an_auto_max_model_len_is_fitted_not_refused(capsys, tmp_path):
    """vLLM 0.19 reads max_model_len -1 or "auto" as the longest that fits, up to the model's
    (``_auto_fit_max_model_len``): Llama-3.1-70B at TP 2 runs with the 9606 tokens its cache holds,
    where 131072 written out is refused; a cache too small for one token is refused in vLLM's words."""
    base = "model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\n"
    for value in ("auto", "-1"):
        code, out = check(capsys, tmp_path, base + f"max-model-len: {value}\n")
        assert code == 0 and out["serving"]["max_model_len"] == out["serving"]["max_model_len_that_fits"] == 9606
        assert "vLLM fits 9,606 of the model's 131,072 tokens" in " ".join(out["notes"])
    code, out = check(capsys, tmp_path, base + "max-model-len: 131072\n")
    assert code == 1 and [f["code"] for f in out["findings"]] == ["VL402"]
    code, out = check(capsys, tmp_path, base + "max-model-len: auto\nkv-cache-memory-bytes: 100000\n")
    assert code == 1 and out["findings"][0]["message"].startswith("Cannot auto-fit max_model_len")


@pytest.mark.parametrize("gpus, lines, seqs, tokens", [
    ("1xH100", "", 1024, 8192),
    ("1xA100-80GB", "", 256, 2048),                   # vLLM keeps an A100's defaults small (PR #17885)
    ("1xH100", "performance-mode: throughput\n", 2048, 16384),
    ("1xH100", "no-enable-chunked-prefill: true\n", 1024, 32768),   # one whole prompt per batch
    ("1xH100", "max-num-seqs: 2\n", 2, 8192),
])
def test_the_profile_run_batches_what_vllm_0_19_defaults_to(capsys, tmp_path, gpus, lines, seqs, tokens):
    """vLLM's batch defaults (get_batch_defaults, _set_default_max_num_seqs_and_batched_tokens_args)
    decide the profile run: 8192 tokens and 1024 sequences on an H100, 2048 and 256 on an A100
    of the same memory, doubled in throughput mode, a whole max_model_len without chunked prefill."""
    from vramlint.memory.serving.vllm import Serving
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nmax-model-len: 32768\n" + lines, gpus=gpus)
    formula = next(c["formula"] for c in out["serving"]["components"] if c["name"] == "activation peak (profile run)")
    assert f"sampler {seqs} seqs" in formula or f"forward {tokens} tokens" in formula
    from vramlint.models import read_model
    from vramlint.hardware import parse_gpus
    gpu = parse_gpus(gpus).gpu
    serving = Serving(read_model("meta-llama/Llama-3.1-8B"), gpu.memory_bytes, max_model_len=32768,
                      max_num_seqs=2 if "max-num-seqs" in lines else None, gpu_name=gpu.name,
                      performance_mode="throughput" if "throughput" in lines else None,
                      chunked_prefill="chunked" not in lines)
    assert (serving.seqs, serving.batched_tokens) == (seqs, tokens)


def test_a_draft_model_is_named_as_not_counted(capsys, tmp_path):
    """Speculative decoding with a draft model or head loads its weights and KV cache too; n-gram
    lookup loads nothing (the EAGLE3 recipe in the corpus writes the config as JSON text)."""
    base = "model: meta-llama/Llama-3.1-8B\n"
    eagle = '{"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "method": "eagle3", "num_speculative_tokens": 3}'
    code, out = check(capsys, tmp_path, base + f"speculative-config: '{eagle}'\n")
    assert "speculative decoding loads 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B'" in " ".join(out["notes"])
    code, out = check(capsys, tmp_path, base + "speculative_config:\n  method: ngram\n  num_speculative_tokens: 5\n")
    assert not any("speculative" in note for note in out["notes"])


def test_a_draft_model_vramlint_can_read_is_counted(capsys, tmp_path):
    """speculative_config.model read like the target: Llama-3.2-1B drafting for Llama-3.1-70B at
    TP 2 with draft_tensor_parallel_size 1 adds its 1,235,814,400 parameters whole, its own RoPE
    table (head 64), and 32,768 B per token of KV cache (16 layers x 8 KV heads x 64 x 2 x 2 B)
    from the same pool."""
    base = "model: meta-llama/Llama-3.1-70B\ntensor-parallel-size: 2\nmax-model-len: 8192\n"
    code, plain = check(capsys, tmp_path, base)
    code, drafted = check(capsys, tmp_path, base + "speculative-config: {model: meta-llama/Llama-3.2-1B, "
                                                   "num_speculative_tokens: 5, draft_tensor_parallel_size: 1}\n")
    parts = [{c["name"]: c["bytes"] for c in out["serving"]["components"]} for out in (plain, drafted)]
    assert parts[1]["weights"] - parts[0]["weights"] == 1_235_814_400 * 2
    assert parts[1]["RoPE cos/sin tables"] - parts[0]["RoPE cos/sin tables"] == 131072 * 64 * 2
    assert drafted["serving"]["kv_bytes_per_token"] - plain["serving"]["kv_bytes_per_token"] == 16 * 8 * 64 * 2 * 2


def test_a_quantized_checkpoint_is_not_told_to_be_quantized(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic\nmax-model-len: 4096\n"
                                        "gpu-memory-utilization: 0.8\n")
    hint = next(f for f in out["findings"] if f["code"] == "VL201")["hint"]
    assert hint.startswith("a checkpoint in fewer bits than compressed-tensors fp8") and "quantization: fp8" not in hint


def test_enable_lora_takes_its_slots_out_of_the_kv_budget(capsys, tmp_path):
    """vLLM 0.19 allocates every LoRA buffer while the model loads (``create_lora_weights``), for
    max_loras slots of max_lora_rank, adapters loaded or not. Llama-3.1-8B, rank 64, 4 slots, per
    layer and slot: q 64 x (4096 + 4096), k and v 64 x (4096 + 1024), o 64 x (4096 + 4096), gate
    and up 64 x (4096 + 14336), down 64 x (14336 + 4096) = 5,242,880; x 32 layers, + the embedding
    and lm_head 2 x 64 x (128,256 + 4096), x 4 slots = 738,852,864 elements in bf16, every byte of
    them out of the KV cache."""
    base = "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
    parts = {}
    for text in ("", "enable-lora: true\nmax-loras: 4\nmax-lora-rank: 64\n"):
        code, out = check(capsys, tmp_path, base + text)
        parts[text] = {c["name"]: c["bytes"] for c in out["serving"]["components"]}
    plain, lora = parts.values()
    slots = (5_242_880 * 32 + 2 * 64 * (128_256 + 4096)) * 4 * 2
    assert lora["LoRA slots (enable_lora)"] == slots and "LoRA slots (enable_lora)" not in plain
    assert plain["KV cache"] - lora["KV cache"] == slots


def test_lora_slots_of_a_moe_model_hold_every_local_experts_adapters():
    """FusedMoEWithLoRA keeps, per slot and local expert, w1 and w3 (r x h, I x r) and w2 (r x I,
    h x r): Qwen3-30B-A3B's 128 experts of width 768 at rank 16 are 17.3 M elements a layer, most of
    the total; expert parallelism over 4 ranks keeps 32 of them whole."""
    from vramlint.memory.parts.lora_slots import LoraSlots, lora_slot_elements
    from vramlint.models import read_model
    m = read_model("Qwen/Qwen3-30B-A3B")
    one = LoraSlots(max_loras=1, rank=16)
    experts = 128 * (2 * (16 * 2048 + 768 * 16) + 16 * 768 + 2048 * 16)
    attention = 16 * ((2048 + 4096) + 2 * (2048 + 512) + (4096 + 2048))
    router = 16 * (2048 + 128)                    # the gate, a ReplicatedLinear: LoRA'd like any linear
    vocab = 2 * 16 * (151_936 + 2048)
    assert lora_slot_elements(m, one, tp=1, pp=1) == 48 * (experts + attention + router) + vocab
    attention4 = 16 * ((2048 + 1024) + 2 * (2048 + 128) + (1024 + 2048))      # columns' d_out, rows' d_in / 4
    spread = 32 * (2 * (16 * 2048 + 768 * 16) + 16 * 768 + 2048 * 16)       # 32 whole experts on each rank
    assert lora_slot_elements(m, one, tp=4, pp=1, spread=4) == 48 * (spread + attention4 + router) + vocab


def test_lora_on_a_vocabulary_over_258048_is_refused_with_vllms_words(capsys, tmp_path):
    code, out = check(capsys, tmp_path, "model: google/gemma-3-27b-it\nmax-model-len: 8192\nenable-lora: true\n")
    finding = next(f for f in out["findings"] if f["code"] == "VL404")
    assert code == 1 and finding["line"] == 3 and "vocab size must be <= 258048" in finding["message"]
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nmax-model-len: 8192\nenable-lora: true\n")
    assert not any(f["code"] == "VL404" for f in out["findings"])


def test_a_lora_rank_vllm_does_not_offer_is_a_wrong_value(capsys, tmp_path):
    """LoRAConfig's max_lora_rank is one of vLLM 0.19's MaxLoRARanks: 48 fails its validation."""
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nenable-lora: true\nmax-lora-rank: 48\n")
    assert code == 1 and any(f["code"] == "VL102" and f["line"] == 3 for f in out["findings"])
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B\nenable-lora: true\nmax-lora-rank: 64\n")
    assert not any(f["code"] == "VL102" for f in out["findings"])


def test_mxfp4_experts_take_what_vllms_hopper_layout_makes_of_them():
    """Per expert, what the triton_kernels layouts vLLM vendors make of w13 and w2 on a Hopper GPU,
    run on the CPU by dev/mxfp4_layout.py: values padded to 64-byte rows, scales swizzled with rows
    padded to 256 and kept besides the loaded ones (gpt-oss's widths at TP 1 to 8, two others)."""
    from vramlint.memory.parts.mxfp4 import TRITON, expert_layout_bytes
    recorded = json.loads((ROOT / "tests" / "data" / "mxfp4_layout.json").read_text())
    assert len(recorded) >= 6
    for shape in recorded:
        assert expert_layout_bytes(TRITON, shape["hidden"], shape["intermediate"]) == shape["bytes"], shape


@pytest.mark.parametrize("gpus, kernel", [("1xH100", "Triton (Hopper)"), ("1xH200", "Triton (Hopper)"),
                                          ("1xA100-80GB", "Marlin"), ("1xL40S", "Marlin"),
                                          ("1xB200", "FlashInfer TRT-LLM (Blackwell)"),
                                          ("1x80GB", "Triton (Hopper)")])
def test_the_gpus_architecture_picks_the_mxfp4_kernel_and_its_padding(capsys, tmp_path, gpus, kernel):
    """vLLM 0.19 picks gpt-oss's MoE kernel by compute capability, and each pads the experts its
    own way: Marlin (8.x) rounds the width 2880 to 2944 and the hidden size to 3072, TRT-LLM (10.x)
    both to 3072, Hopper's Triton kernels pad the packed rows to 64 bytes; a size alone assumes
    Hopper and says so. All hold more than the checkpoint's 4.25 bits a weight."""
    path = tmp_path / "vllm.yaml"
    path.write_text("model: openai/gpt-oss-20b\nmax-model-len: 8192\n")
    main(["check", str(path), "--gpus", gpus, "--format", "json"])
    weights = next(c for c in json.loads(capsys.readouterr().out)["files"][0]["serving"]["components"]
                   if c["name"] == "weights")
    assert f"laid out for vLLM's {kernel} kernel" in weights["formula"]
    assert ("not known" in weights["formula"]) == (gpus == "1x80GB")
    from vramlint.memory.parts.mxfp4 import kernel_for
    from vramlint.hardware import architecture, parse_gpus
    rounded = kernel_for(architecture(parse_gpus(gpus).gpu.name))
    width, hidden = -(-2880 // rounded.round_i) * rounded.round_i, -(-2880 // rounded.round_h) * rounded.round_h
    assert (width, hidden) == {"Marlin": (2944, 3072), "FlashInfer TRT-LLM (Blackwell)": (3072, 3072)}.get(
        kernel, (2880, 2880))
    four_bit = 24 * 32 * 3 * 2880 * 2880 * 4.25 / 8
    assert weights["bytes"] > four_bit + 3.5e9       # + attention, embeddings and lm_head in bf16


@pytest.mark.parametrize("model, gpus, refused", [
    ("openai/gpt-oss-20b", "1xT4", "mxfp4 is not supported for the current GPU. Minimum capability: 80. "
                                   "Current capability: 75."),
    ("openai/gpt-oss-20b", "1xV100-32GB", "Minimum capability: 80. Current capability: 70."),
    ("openai/gpt-oss-20b", "1xL4", None), ("openai/gpt-oss-20b", "1x24GB", None),
    ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "1xT4", None),   # compressed-tensors: refused per scheme
])
def test_a_gpu_older_than_the_quantization_allows_is_refused_with_vllms_words(capsys, tmp_path, model, gpus, refused):
    """vLLM holds the GPU's compute capability to the method's get_min_capability() before it
    loads anything (VllmConfig._get_quantization_config): gpt-oss's MXFP4 needs 8.0, so a T4 (7.5)
    or a V100 (7.0) refuses it; a size names no card, so nothing is said."""
    path = tmp_path / "vllm.yaml"
    path.write_text(f"model: {model}\nmax-model-len: 4096\n")
    main(["check", str(path), "--gpus", gpus, "--format", "json"])
    found = [f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL405"]
    assert bool(found) == bool(refused)
    if refused:
        assert refused in found[0]["message"] and found[0]["line"] == 1
        assert "8.0 or newer (A100, L4, H100)" in found[0]["hint"]


def test_quantization_fp8_on_a_volta_gpu_is_refused_where_the_flag_is(capsys, tmp_path):
    path = tmp_path / "vllm.yaml"
    path.write_text("model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 4096\nquantization: fp8\n")
    main(["check", str(path), "--gpus", "1xV100-32GB", "--format", "json"])
    found = next(f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL405")
    assert found["line"] == 3 and "method fp8 is not supported" in found["message"]
    assert "7.5 or newer (T4, A100, L4, H100)" in found["hint"]


def test_under_pipeline_parallelism_the_last_stage_holds_the_lm_heads_lora_buffers_not_the_embeddings(
        capsys, tmp_path):
    """The stage vramlint budgets is the last (it runs the sampler): half of Llama-3.1-8B's 32 layers
    at 5,242,880 elements a slot of rank 64 each, and the lm_head's 64 x (128,256 + 4096); the
    embedding's buffers sit on the first stage."""
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 8192\n"
                      "pipeline-parallel-size: 2\nenable-lora: true\nmax-loras: 4\nmax-lora-rank: 64\n")
    slots = next(c["bytes"] for c in out["serving"]["components"] if c["name"] == "LoRA slots (enable_lora)")
    assert slots == (5_242_880 * 16 + 64 * (128_256 + 4096)) * 4 * 2


@pytest.mark.parametrize("dtype, gpus, refused", [("bfloat16", "1xT4", True), ("bfloat16", "1xV100-32GB", True),
                                                  ("bfloat16", "1xL4", False), ("half", "1xT4", False),
                                                  ("auto", "1xT4", False), ("bfloat16", "1x16GB", False)])
def test_an_explicit_bfloat16_below_compute_capability_8_is_refused_with_vllms_words(capsys, tmp_path, dtype, gpus,
                                                                                      refused):
    """vLLM's CUDA platform refuses dtype bfloat16 on a GPU below 8.0 (check_if_supports_dtype),
    while dtype auto falls back to float16 there with a warning; a bare size names no card."""
    path = tmp_path / "vllm.yaml"
    path.write_text(f"model: Qwen/Qwen2.5-0.5B-Instruct\nmax-model-len: 4096\ndtype: {dtype}\n")
    main(["check", str(path), "--gpus", gpus, "--format", "json"])
    found = [f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL405"]
    assert bool(found) == refused
    if refused:
        assert found[0]["line"] == 3 and found[0]["message"].startswith(
            "Bfloat16 is only supported on GPUs with compute capability of at least 8.0.")
        assert "compute capability 7." in found[0]["message"] and found[0]["hint"].startswith("dtype: half")


def test_the_hint_offers_online_fp8_only_where_the_gpu_allows_it(capsys, tmp_path):
    """quantization: fp8 needs compute capability 7.5 in vLLM: offered on a T4; on a V100 the
    in-flight bitsandbytes NF4 (7.0) is offered instead."""
    hints = {}
    for gpus in ("1xT4", "1xV100-16GB"):
        path = tmp_path / "vllm.yaml"
        path.write_text("model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 4096\n")
        main(["check", str(path), "--gpus", gpus, "--format", "json"])
        hints[gpus] = next(f["hint"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]
                           if f["code"] == "VL201")
    assert "quantization: fp8" in hints["1xT4"] and "quantization: fp8" not in hints["1xV100-16GB"]
    assert "quantization: bitsandbytes" in hints["1xV100-16GB"] and "bitsandbytes" not in hints["1xT4"]


def test_gpt_oss_gets_a_moe_workspace_only_where_vllm_runs_it_with_a_modular_kernel(capsys, tmp_path):
    """On Hopper vLLM runs gpt-oss's experts with the monolithic OAI Triton kernel (no MoE
    workspace: its H100 log's peak has none); on an A100 it runs them with Marlin, whose
    workspace_shapes are TritonExperts': M x k x (max(I, h) + max(2I, h)) in bf16, M = 2048 tokens,
    over the sizes Marlin pads gpt-oss's to (I 2880 -> 2944, h 2880 -> 3072)."""
    path = tmp_path / "vllm.yaml"
    path.write_text("model: openai/gpt-oss-20b\nmax-model-len: 8192\n")
    formulas = {}
    for gpus in ("1xH100", "1xA100-80GB"):
        main(["check", str(path), "--gpus", gpus, "--format", "json"])
        formulas[gpus] = next(c["formula"] for c in json.loads(capsys.readouterr().out)["files"][0]["serving"][
            "components"] if c["name"] == "activation peak (profile run)")
    assert "fused-MoE workspace" not in formulas["1xH100"]
    workspace = 2048 * 4 * (3072 + 2 * 2944) * 2
    assert f"fused-MoE workspace {workspace / 2**30:.2f} GiB" in formulas["1xA100-80GB"]


def test_a_bitsandbytes_checkpoint_split_over_tensor_parallel_ranks_is_refused(capsys, tmp_path):
    """vLLM's BitsAndBytes loader refuses a pre-quantized checkpoint under TP (its quant states
    belong to whole weights) and points at pipeline parallelism; quantizing a 16-bit checkpoint as
    it loads (quantization: bitsandbytes) has no such limit. The checkpoint is a real bnb-4bit
    upload's config from the corpus."""
    config = shared_or_skip(CORPUS / "hf_models" / "DocWobble__Orpheus_3B_Quantized__config.json")
    found = {}
    for name, text in (("tp", f"model: {config}\ntensor-parallel-size: 2\n"),
                       ("pp", f"model: {config}\npipeline-parallel-size: 2\n"),
                       ("in-flight", "model: meta-llama/Llama-3.1-8B-Instruct\nquantization: bitsandbytes\n"
                                     "tensor-parallel-size: 2\n")):
        path = tmp_path / f"{name}.yaml"
        path.write_text(text + "max-model-len: 4096\n")
        main(["check", str(path), "--gpus", "2xL4", "--format", "json"])
        found[name] = [f for f in json.loads(capsys.readouterr().out)["files"][0]["findings"] if f["code"] == "VL406"]
    assert [f["line"] for f in found["tp"]] == [2] and not found["pp"] and not found["in-flight"]
    assert found["tp"][0]["message"].startswith("Prequant BitsAndBytes models with tensor parallelism is not supported")
    assert found["tp"][0]["hint"].startswith("pipeline-parallel-size: 2")


def test_in_flight_bitsandbytes_quantizes_every_linear_to_nf4_as_it_loads(capsys, tmp_path):
    """quantization: bitsandbytes on a 16-bit checkpoint: vLLM's loader runs quantize_4bit(nf4,
    compress_statistics) on each linear as it reads it — 4 bits + a uint8 absmax per 64 + an fp32
    per 256 of those — while embeddings, lm_head and norms stay bf16."""
    from vramlint.models import read_model
    m = read_model("meta-llama/Llama-3.1-8B-Instruct")
    code, out = check(capsys, tmp_path, "model: meta-llama/Llama-3.1-8B-Instruct\nmax-model-len: 4096\n"
                                        "quantization: bitsandbytes\n", gpus="1xT4")
    weights = next(c for c in out["serving"]["components"] if c["name"] == "weights")
    linears = m.layer_params.attention + m.layer_params.mlp
    bits = 4 + 8 / 64 + 32 / (64 * 256)
    assert weights["bytes"] == pytest.approx(linears * bits / 8 + 2 * (m.params - linears), rel=1e-6)
    assert "in-flight" in weights["formula"]


def test_an_awq_checkpoint_on_a_volta_gpu_is_refused(capsys, tmp_path):
    """AWQ needs compute capability 7.5 in vLLM, as awq or as awq_marlin: a V100 (7.0) refuses it,
    a T4 (7.5) takes it."""
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 2048, "intermediate_size": 5632,
                                  "num_hidden_layers": 22, "num_attention_heads": 32, "num_key_value_heads": 4,
                                  "vocab_size": 32000, "max_position_embeddings": 2048, "torch_dtype": "float16",
                                  "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 128}}))
    path = tmp_path / "vllm.yaml"
    path.write_text(f"model: {config}\nmax-model-len: 2048\n")
    found = {}
    for gpus in ("1xV100-16GB", "1xT4"):
        main(["check", str(path), "--gpus", gpus, "--format", "json"])
        found[gpus] = [f["message"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]
                       if f["code"] == "VL405"]
    assert found["1xV100-16GB"] == ["The quantization method awq is not supported for the current GPU. Minimum "
                                    "capability: 75. Current capability: 70."]
    assert found["1xT4"] == []
