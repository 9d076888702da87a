"""``vramlint estimate``: the documented JSON, and the regimes behaving as their mechanisms say."""

from __future__ import annotations

import json

import pytest

from vramlint.cli import main


def run(capsys, *args) -> dict:
    assert main(["estimate", *args, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def peak(capsys, *args) -> int:
    return run(capsys, *args)["per_gpu_peak_bytes"]


BASE = ["--model", "meta-llama/Llama-3.2-1B", "--gpus", "1xH200", "--seq-len", "2048"]


def test_json_has_the_documented_keys(capsys):
    doc = run(capsys, *BASE, "--train", "--micro-batch", "2")
    assert {"per_gpu_peak_bytes", "per_gpu_low_bytes", "per_gpu_high_bytes", "allocated_peak_bytes",
            "components", "host_ram_bytes", "assumptions", "peak_moment"} <= doc.keys()
    assert doc["per_gpu_low_bytes"] < doc["per_gpu_peak_bytes"] < doc["per_gpu_high_bytes"]
    tensors = [c for c in doc["components"] if c["name"] not in ("allocator reserve",) and "context" not in c["name"]]
    assert doc["allocated_peak_bytes"] == sum(c["bytes"] for c in tensors if c["where"] == "gpu")
    assert all(c["formula"] and c["source"] for c in doc["components"])


def test_matches_a_measured_h200_run(capsys):
    """llama-3.2-1b, bf16 weights, AdamW, micro-batch 8 x 2048, measured device_used 66.93 GB by
    measure.py, which empties the cache before each step. A loop that keeps its cache (the
    default) keeps what the first step reserved too: more, never less."""
    doc = run(capsys, *BASE, "--train", "--micro-batch", "8", "--empty-cache-each-step")
    assert doc["per_gpu_peak_bytes"] == pytest.approx(66.93e9, rel=0.03)
    assert doc["allocated_peak_bytes"] == pytest.approx(61.46e9, rel=0.03)
    loop = run(capsys, *BASE, "--train", "--micro-batch", "8")
    assert loop["allocated_peak_bytes"] == doc["allocated_peak_bytes"]
    assert loop["per_gpu_peak_bytes"] > doc["per_gpu_peak_bytes"]


def test_autocast_over_fp32_weights_costs_more_than_pure_bf16(capsys):
    amp = peak(capsys, *BASE, "--train", "--weights-dtype", "float32", "--mixed-precision", "bf16")
    bf16 = peak(capsys, *BASE, "--train")
    assert amp > bf16 * 1.5


def test_lora_and_qlora_shrink_training_memory(capsys):
    full = peak(capsys, *BASE, "--train", "--micro-batch", "4", "--grad-checkpointing")
    lora = peak(capsys, *BASE, "--train", "--micro-batch", "4", "--grad-checkpointing", "--lora-rank", "16")
    qlora = peak(capsys, *BASE, "--train", "--micro-batch", "4", "--grad-checkpointing", "--load-in-4bit",
                 "--weights-dtype", "bfloat16")      # the same 16-bit unquantized parameters as the LoRA run
    assert qlora < lora < full


def test_eager_attention_adds_the_score_matrix(capsys):
    sdpa = peak(capsys, *BASE, "--train", "--micro-batch", "2", "--attn", "sdpa")
    eager = peak(capsys, *BASE, "--train", "--micro-batch", "2", "--attn", "eager")
    scores = 2 * 32 * 2048 * 2048 * 6 * 16          # b·heads·s² x (fp32 softmax + 16-bit cast) x layers
    assert eager - sdpa == pytest.approx(scores, rel=0.15)


def test_inference_is_weights_plus_kv_plus_one_layer(capsys):
    doc = run(capsys, "--model", "meta-llama/Llama-2-70b-hf", "--gpus", "4x80GB", "--infer", "--batch", "16",
              "--seq-len", "4096")
    parts = {c["name"]: c["bytes"] for c in doc["components"]}
    assert parts["weights"] == 68_976_648_192 * 2
    assert parts["KV cache"] == 327_680 * 16 * 4096                 # the seed's 21.47 GB
    assert not doc["fits"]                                           # one 80 GB GPU cannot hold 138 GB


def test_fsdp_full_shard_fits_where_no_shard_does_not(capsys):
    args = ["--model", "mistralai/Mixtral-8x7B-v0.1", "--gpus", "2x8xH100", "--train", "--seq-len", "4096",
            "--grad-checkpointing", "--runtime", "fsdp"]
    assert run(capsys, *args, "--fsdp-strategy", "FULL_SHARD")["fits"]
    assert not run(capsys, *args, "--fsdp-strategy", "NO_SHARD")["fits"]
    hybrid = peak(capsys, *args, "--fsdp-strategy", "HYBRID_SHARD")
    assert hybrid > peak(capsys, *args, "--fsdp-strategy", "FULL_SHARD")   # shards over 8, not 16


def test_lora_under_fsdp_keeps_the_base_as_loaded_and_gradients_for_the_adapters_alone(capsys):
    """As the Trainer wraps a PEFT model (PEFT's fsdp_auto_wrap_policy, dev/qlora_fsdp_units.py:
    frozen bf16 decoder units, fp32 LoRA units), under FSDP1 as under FSDP2: the shards are the
    bf16 base and the fp32 adapters over the GPUs, the gradients and Adam states the adapters'."""
    args = ["--model", "mistralai/Mixtral-8x7B-v0.1", "--gpus", "2x8xH100", "--train", "--seq-len", "4096",
            "--grad-checkpointing", "--lora-rank", "16"]
    for version in ("1", "2"):
        doc = run(capsys, *args, "--fsdp-version", version)
        shards = next(c for c in doc["components"] if c["name"] == "parameter shards")
        assert shards["formula"] == "2 B x P / 16 (frozen, as loaded) + 4 B x T / 16"
        assert any("every LoRA linear an FSDP unit of its own" in note for note in doc["assumptions"])


def test_deepspeed_offload_needs_host_ram(capsys):
    doc = run(capsys, "--model", "llama-3.1-70b", "--gpus", "8xH100", "--train", "--seq-len", "4096",
              "--grad-checkpointing", "--runtime", "deepspeed", "--zero-stage", "3", "--offload-optimizer", "cpu")
    assert doc["host_ram_bytes"] == int(16 * 70_553_706_496 * 1.5)


def test_plan_lists_setups_that_fit_best_first(capsys):
    assert main(["plan", "--model", "meta-llama/Llama-3.1-70B", "--gpus", "8xH100", "--seq-len", "4096",
                 "--format", "json"]) == 0
    setups = json.loads(capsys.readouterr().out)
    assert setups, "ZeRO-3 with offload fits a 70B model on 8 x H100"
    assert all(s["per_gpu_peak_bytes"] <= 0.9 * 85_029_158_912 for s in setups)
    assert all(s["offload"] != "none" for s in setups)          # 16 B/param / 8 GPUs = 141 GB without it
    offload_rank = ["none", "optimizer", "optimizer + parameters"]
    ranks = [offload_rank.index(s["offload"]) for s in setups]
    assert ranks == sorted(ranks)


def test_a_zero_stage_means_deepspeed_and_a_strategy_fsdp(capsys):
    doc = run(capsys, *BASE, "--train", "--zero-stage", "3")
    assert "IPG reduce bucket" in {c["name"] for c in doc["components"]}
    doc = run(capsys, *BASE, "--train", "--fsdp-strategy", "SHARD_GRAD_OP")
    assert "parameter shards" in {c["name"] for c in doc["components"]}


@pytest.mark.parametrize("flags, words", [
    (["--runtime", "torch", "--zero-stage", "3"], "--zero-stage is a deepspeed setting"),
    (["--runtime", "fsdp", "--offload-optimizer", "cpu"], "--offload-optimizer is a deepspeed setting"),
    (["--runtime", "torch", "--offload-param", "cpu"], "--offload-param is a deepspeed or fsdp setting"),
])
def test_a_flag_of_another_runtime_is_a_usage_error(capsys, flags, words):
    assert main(["estimate", *BASE, "--train", *flags]) == 2
    assert words in capsys.readouterr().err


def test_qlora_defaults_to_fp32_unquantized_parameters_under_autocast(capsys):
    """peft's prepare_model_for_kbit_training and TRL's SFTTrainer leave embeddings, norms and
    lm_head in fp32; --weights-dtype bfloat16 models a script that keeps them 16-bit."""
    args = [*BASE, "--train", "--micro-batch", "4", "--grad-checkpointing", "--load-in-4bit"]
    default = run(capsys, *args)
    assert any("prepare_model_for_kbit_training" in a for a in default["assumptions"])
    bf16 = run(capsys, *args, "--weights-dtype", "bfloat16")
    weights = {doc["per_gpu_peak_bytes"]: next(c["bytes"] for c in doc["components"] if c["name"] == "weights (NF4)")
               for doc in (default, bf16)}
    embedding = 128256 * 2048                       # Llama-3.2-1B's tied embedding, the bulk of what stays unquantized
    assert weights[default["per_gpu_peak_bytes"]] - weights[bf16["per_gpu_peak_bytes"]] == pytest.approx(
        2 * embedding, rel=0.01)
    assert default["per_gpu_peak_bytes"] > bf16["per_gpu_peak_bytes"]


def test_lora_dropout_keeps_a_mask_per_adapted_input(capsys):
    """PEFT gives each adapted linear a dropout of its own; on CUDA ``native_dropout`` keeps a
    bool mask of the linear's input (1 B per element) beside the fp32 output lora_A keeps in
    place of PEFT's fp32 cast. Llama-3.2-1B: q, k, v, o, gate, up read 2048 wide (o: 32 x 64),
    down 8192, over 16 layers."""
    args = [*BASE, "--train", "--micro-batch", "2", "--lora-rank", "16"]
    plain = {c["name"]: c["bytes"] for c in run(capsys, *args)["components"]}
    dropped = {c["name"]: c["bytes"] for c in run(capsys, *args, "--lora-dropout", "0.05")["components"]}
    inputs = 6 * 2048 + 8192
    assert dropped["activations"] - plain["activations"] == 1 * inputs * 2 * 2048 * 16


def test_lora_under_deepspeed_and_fsdp_keeps_states_for_the_adapters_alone(capsys):
    """The optimizer gets the parameters that need grads: fp32 master, Adam's m and v and the
    gradients are the adapters' (T), while every base parameter stays (sharded by ZeRO-3 and
    FSDP). How the adapters become FSDP units of their own is said in the assumptions."""
    args = [*BASE, "--gpus", "8xH100", "--train", "--grad-checkpointing"]
    for runtime in (["--runtime", "deepspeed", "--zero-stage", "3"], ["--runtime", "fsdp"]):
        lora = run(capsys, *args, *runtime, "--lora-rank", "16")
        full = run(capsys, *args, *runtime)
        states = {doc_id: sum(c["bytes"] for c in doc["components"] if c["name"] == "optimizer states")
                  for doc_id, doc in (("lora", lora), ("full", full))}
        assert states["lora"] * 100 < states["full"]
        assert lora["per_gpu_peak_bytes"] < full["per_gpu_peak_bytes"]
    said = [any("LoRA under FSDP" in a for a in doc["assumptions"]) for doc in (lora, full)]
    assert said == [True, False]


def test_a_sequence_past_the_models_positions_is_said(capsys):
    """GPT-2's learned position embeddings have 1024 rows: a longer sequence fails in its forward;
    a RoPE model runs past its max_position_embeddings. Within them, nothing is said."""
    learned = run(capsys, "--model", "gpt2", "--gpus", "1xH200", "--seq-len", "4096", "--train")["assumptions"]
    rope = run(capsys, "--model", "meta-llama/Llama-3.2-1B", "--gpus", "1xH200", "--seq-len", "200000",
               "--infer")["assumptions"]
    within = run(capsys, *BASE, "--train")["assumptions"]
    assert any("1,024 positions" in a and "forward fails" in a for a in learned)
    assert any("131,072 positions" in a and "RoPE" in a for a in rope)
    assert not any("positions (max_position_embeddings)" in a for a in within)


def test_plan_offers_fsdp_with_its_parameters_offloaded_where_nothing_else_fits(capsys):
    """QLoRA of a 70B model on two 24 GB cards fits only with the shards on the host: FSDP's
    fsdp_offload_params is listed beside ZeRO-3's offload, each with the batch it allows."""
    assert main(["plan", "--model", "meta-llama/Llama-2-70b-hf", "--gpus", "2x24GB", "--seq-len", "512",
                 "--load-in-4bit", "--lora-rank", "64", "--format", "json"]) == 0
    setups = json.loads(capsys.readouterr().out)
    assert {s["offload"] for s in setups} == {"optimizer + parameters"}
    assert {s["strategy"] for s in setups} >= {"FSDP1 FULL_SHARD", "ZeRO-3"}


def test_inference_with_mxfp4_experts_says_what_transformers_dequantizing_them_would_add(capsys):
    """transformers keeps gpt-oss's MXFP4 experts only with the `kernels` package on a GPU of
    capability 7.5+; otherwise it loads them dequantized to bf16: 2 B instead of 4.25 bits each."""
    from vramlint.models import read_model
    doc = run(capsys, "--model", "openai/gpt-oss-20b", "--gpus", "1xH100", "--infer", "--batch", "1",
              "--seq-len", "4096")
    experts = read_model("openai/gpt-oss-20b").layer_params.experts
    note = next(a for a in doc["assumptions"] if a.startswith("MXFP4 experts counted as stored"))
    assert f"{experts * (2 - 4.25 / 8) / 2**30:.1f} GiB more" in note and "`kernels` package" in note
    assert not any("MXFP4" in a for a in run(capsys, *BASE, "--infer", "--batch", "1")["assumptions"])
