"""Megatron-core's MoE layers (readers/megatron.py ``_moe``, layouts/megatron.py ``_experts``,
memory/runtimes/megatron): the routed experts over the expert grid (EP x ETP) with their optimizer
states over the expert data-parallel group, checked byte for byte against Megatron's own
theoretical_memory_usage.py (core_v0.19.0) on the same arguments; the routed tokens' activations;
the expert grid's refusals in Megatron's words; Megatron's Mixtral example (tests/data/megatron/scripts)
and a Megatron-Bridge Qwen3-235B-A22B dry-run dump (tests/data/megatron_bridge), byte-exact."""

from __future__ import annotations

import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from test_megatron import ARGS, _megatron_estimator, _plan
from vramlint.memory.runtimes.megatron.activations import layer, widths
from vramlint.memory.runtimes.megatron.layout import counts, ranks
from vramlint.memory.runtimes.megatron.states import megatron_states
from vramlint.readers.megatron import moe_layers

ROOT = Path(__file__).resolve().parent.parent
MIXTRAL = ROOT / "tests/data/megatron/scripts/NVIDIA__Megatron-LM/examples/mixtral/train_mixtral_8x7b_distributed.sh"
QWEN3 = ROOT / "tests/data/megatron_bridge/qwen3_235b_a22b_pretrain_gb200_nvfp4_v1.yaml"
LINE = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 1024 --ffn-hidden-size 4096 "
        "--moe-ffn-hidden-size 512 --num-attention-heads 16 --group-query-attention --num-query-groups 4 --swiglu "
        "--disable-bias-linear --normalization RMSNorm --position-embedding-type rope "
        "--untie-embeddings-and-output-weights --num-experts 16 --moe-router-topk 4 "
        "--moe-shared-expert-intermediate-size 1024 --moe-shared-expert-gate --moe-layer-freq '([0]+[1]*7)' "
        "--expert-model-parallel-size 4 --tensor-model-parallel-size 2 --sequence-parallel "
        "--use-distributed-optimizer --bf16 --vocab-size 32000 --seq-length 2048 --micro-batch-size 1 "
        "--global-batch-size 16 --moe-token-dispatcher-type alltoall --hidden-dropout 0 {extra}\n")


def _check(path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(path), "--format", "json", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["files"][0]


def _parts(entry: dict) -> dict[str, dict]:
    return {c["name"]: c for c in entry["estimate"]["components"]}


def _line_args(swiglu: bool) -> Namespace:
    """LINE's arguments as Megatron's theoretical_memory_usage reads them."""
    return Namespace(**{**ARGS, "num_layers": 8, "hidden_size": 1024, "ffn_hidden_size": 4096, "kv_channels": 64,
                        "group_query_attention": True, "num_query_groups": 4, "swiglu": swiglu,
                        "normalization": "RMSNorm", "num_experts": 16, "moe_ffn_hidden_size": 512,
                        "moe_router_topk": 4, "moe_shared_expert_intermediate_size": 1024,
                        "moe_shared_expert_gate": True, "moe_layer_freq": [0] + [1] * 7, "padded_vocab_size": 32000,
                        "untie_embeddings_and_output_weights": True, "expert_model_parallel_size": 4,
                        "expert_tensor_parallel_size": 2, "data_parallel_size": 4})


def test_moe_states_equal_megatrons_own_estimator(tmp_path):
    """A dense first layer, 16 experts over EP 4 x ETP 2 (the TP size), shared experts with their
    gate, untied embeddings: Megatron's weight-and-optimizer bytes (dense states over dp 4, the
    experts' over world / (ETP x EP x PP) = 1) equal vramlint's states to the byte."""
    plan = _plan(tmp_path, LINE.format(extra=""), "8x80GB")
    par = plan.parallelism
    assert (par.expert, par.expert_tensor or plan.tensor_parallel, par.expert_shard) == (4, 2, 1)
    args = _line_args(swiglu=True)
    weights = _megatron_estimator()["compute_weight_and_optimizer_memory"](args)
    local = plan.with_changes(model=plan.model.tp_local(2, plan.tp_split))
    states = megatron_states(local, ranks(local)[0])
    assert sum(c.bytes for c in states.resting + states.gradients) == weights
    experts = next(c for c in states.resting if c.name == "parameters (routed experts)")
    assert experts.formula == f"2 B x {7 * 16 * 3 * 1024 * 512 // 8:,}"     # 7 MoE layers, 16 experts / (4 x 2)


def test_plain_gelu_experts_equal_megatrons_own_estimator(tmp_path):
    """Without --swiglu the experts, the shared experts and the dense layer are plain up / down GELU
    MLPs (Megatron's CI runs its 4- and 8-expert tests so; they were VL011): Megatron's
    weight-and-optimizer bytes (its gated_linear_multiplier 1) equal vramlint's to the byte. A routed
    token keeps three expert widths either way (experts.py bias_act_func): GELU's input and output and
    the weighted cast FC2 reads, or the fused weighted SwiGLU's input (2) and output; unfused
    (--no-bias-swiglu-fusion) SwiGLU keeps SiLU's output and the product too, 5. The shared experts, a
    dense MLP, keep 2 x 1024 against SwiGLU's 3."""
    line = LINE.format(extra="").replace("--swiglu ", "")
    assert line != LINE.format(extra="")
    plan = _plan(tmp_path, line, "8x80GB")
    args = _line_args(swiglu=False)
    weights = _megatron_estimator()["compute_weight_and_optimizer_memory"](args)
    local = plan.with_changes(model=plan.model.tp_local(2, plan.tp_split))
    states = megatron_states(local, ranks(local)[0])
    assert sum(c.bytes for c in states.resting + states.gradients) == weights
    experts = next(c for c in states.resting if c.name == "parameters (routed experts)")
    assert experts.formula == f"2 B x {7 * 16 * 2 * 1024 * 512 // 8:,}"
    gated = widths(_plan(tmp_path, LINE.format(extra=""), "8x80GB"), 1)
    plain = widths(plan, 1)
    assert (gated.experts.gated, plain.experts.gated) == (True, False)
    received = 4 * 2                  # top-4 x ETP 2 tokens a token of the rank, each one expert's inner tensors
    routed = received * 2 * 512 // 2 // 2          # c x w / ETP each, sequence-split over TP 2
    shared = 2 * 1024 // 2                         # c x the shared width, over TP 2 (head part)
    assert layer(gated) - layer(plain) == shared
    unfused = widths(_plan(tmp_path, LINE.format(extra="--no-bias-swiglu-fusion"), "8x80GB"), 1)
    assert (gated.experts.kept, plain.experts.kept, unfused.experts.kept) == (3, 3, 5)
    assert layer(unfused) - layer(gated) == 2 * routed


def test_an_moe_layer_keeps_its_routed_tokens_and_recompute_drops_them(tmp_path):
    """Per token of the micro-batch, an MoE layer keeps what a dense one keeps but the MLP's inner
    tensors, plus the routed side: k x ETP received tokens (balanced) each with its FC1 input, FC1's
    and the activation's outputs over ETP and its fp32 probability, the router's indices and map, and
    the shared experts' TP-split inner tensors; all sequence-split under SP. moe_act drops the
    activation's output, moe the whole layer but its input; mlp does not touch an MoE layer."""
    plan = _plan(tmp_path, LINE.format(extra=""), "8x80GB")
    dense, moe = widths(plan, 0), widths(plan, 1)
    assert dense.experts is None and moe.experts is not None
    c, h, t = 2, 1024, 2
    routed = 4 * 2 * (c * h + 3 * c * 512 // 2 + 4)          # k 4 x ETP 2 tokens, FFN 512 over ETP 2
    router = 20 * 4 + 16                                     # int64 top-k and sorted indices, fp32 top-k softmax, map
    shared = 3 * c * 1024 // t
    attention = 2 * c * 1024 + 2 * c * 256 + 4 * 16          # q, k, v, output, log-sum-exp
    norms = 4 * c * h // t
    assert layer(moe) == norms + attention // t + shared + (routed + router) // t
    assert layer(moe) - layer(moe, ("moe_act",)) == 4 * 2 * c * 512 // 2 // t
    assert layer(moe, ("moe",)) == norms + attention // t
    assert layer(moe, ("mlp",)) == layer(moe)
    assert layer(dense) - layer(dense, ("mlp",)) == 3 * c * 4096 // t


def test_nargs_options_and_layer_patterns_are_read_as_megatron_parses_them(tmp_path):
    """--recompute-modules takes every word up to the next option (argparse nargs); --moe-layer-freq
    is an every-N count or a list expression (moe_freq_type); a capacity factor caps the received tokens."""
    plan = _plan(tmp_path, LINE.format(extra="--recompute-granularity selective --recompute-modules core_attn "
                                             "moe_act --moe-expert-capacity-factor 1.5"), "8x80GB")
    assert plan.parallelism.checkpointing == "selective:core_attn,moe_act"
    assert plan.parallelism.capacity == 1.5
    assert [layer_.mlp.kind for layer_ in plan.model.layers] == ["gated"] + ["moe"] * 7
    assert moe_layers(2, 4) == [1, 0, 1, 0] and moe_layers("([1]*3+[0]*1)*2", 8) == [1, 1, 1, 0] * 2
    assert moe_layers("[1]*3", 4) is None and moe_layers("__import__('os')", 1) is None


@pytest.mark.parametrize("extra, words", [
    ("--expert-model-parallel-size 3", "Number of experts should be a multiple of expert model parallel_size"),
    ("--expert-model-parallel-size 4 --expert-tensor-parallel-size 4",
     "world_size (8) is not divisible by expert_tensor_model_pipeline_parallel size (16)"),
])
def test_the_expert_grid_megatron_refuses_is_said_in_its_words(tmp_path, extra, words):
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(extra="").replace("--expert-model-parallel-size 4 ", "").replace("\n", f" {extra}\n"))
    codes = [(f["code"], f["message"]) for f in _check(script, "--gpus", "8x80GB")["findings"]]
    assert any(code == "VL313" and words in message for code, message in codes), codes


def test_moe_under_tensor_parallelism_needs_sequence_parallelism(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(extra="").replace("--sequence-parallel ", ""))
    finding = next(f for f in _check(script, "--gpus", "8x80GB")["findings"] if f["code"] == "VL313")
    assert "MoE and tensor parallelismare enabled without also enabling sequence parallelism" in finding["message"]
    assert finding["hint"] == "add --sequence-parallel"


def test_megatrons_mixtral_example_is_priced_on_its_expert_grid():
    """examples/mixtral/train_mixtral_8x7b_distributed.sh: PP 4 x EP 8 needs 32 GPUs (Megatron
    refuses 8, at the line that states EP); on 4 x 8 GPUs each rank holds one of the 8 experts of
    its 8 layers, their states whole (expert data-parallel 32 / (1 x 8 x 4) = 1), and the peak is
    rank 0's backward through an MoE layer with 4 micro-batches in flight. Its routing is dropless:
    priced balanced, and said so (VL210)."""
    refused = _check(MIXTRAL, "--gpus", "8x80GB")
    finding = next(f for f in refused["findings"] if f["code"] == "VL313")
    assert "is not divisible by expert_tensor_model_pipeline_parallel size (32)" in finding["message"]
    assert finding["line"] == 85
    entry = _check(MIXTRAL, "--gpus", "4x8x80GB")
    parts = _parts(entry)
    expert_params = 8 * 3 * 4096 * 14336                     # 8 layers x one expert of FFN 14336
    assert parts["parameters (routed experts)"]["formula"] == f"2 B x {expert_params:,}"
    assert parts["optimizer states (routed experts)"]["formula"] == \
        f"12 B (fp32 main + Adam m, v (fp32)) x {expert_params:,}"
    assert parts["activations"]["formula"].startswith("241,880 B/token x 8 layers (none) x 4,096 tokens x 4 ")
    assert parts["token dispatch buffers"]["formula"].startswith("32,768 B x 4,096 tokens (alltoall dispatcher")
    assert entry["estimate"]["peak_moment"] == "backward through an MoE layer (pipeline rank 0)"
    assert any(f["code"] == "VL210" and f["message"].startswith("dropless MoE routing") for f in entry["findings"])


@pytest.mark.parametrize("extra, said", [("", True), ("--moe-router-force-load-balancing", False),
                                         ("--moe-expert-capacity-factor 1.0", False)])
def test_dropless_routing_is_said_unless_the_router_is_balanced_by_design(tmp_path, extra, said):
    """A dropless router may send a rank's experts more than their share (VL210); one forced to balance
    (--moe-router-force-load-balancing: random logits, TC:812, NVIDIA's DeepSeek-V3 FSDP example) or
    capped by a capacity factor is what the estimate prices, and nothing is said."""
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(extra=extra))
    entry = _check(script, "--gpus", "8x80GB")
    assert any(f["code"] == "VL210" and f["message"].startswith("dropless MoE routing")
               for f in entry["findings"]) == said


def test_a_bridge_qwen3_moe_dump_counts_the_embedding_and_loss_as_layers():
    """Bridge's Qwen3-235B-A22B dump (94 layers, PP 8, account_for_embedding / loss_in_pipeline_split):
    Megatron refused it as 94 layers over 8 stages; it is 96 slots, 11 layers on the first and the
    last stage and 12 on the others (transformer_block.py), with 128 experts over EP 8, flex dispatch."""
    assert counts(94, 8, slots=(True, True)) == [11] + [12] * 6 + [11]
    entry = _check(QWEN3, "--gpus", "16x4xGB200")
    parts = _parts(entry)
    assert parts["activations"]["formula"].startswith("207,936 B/token x 11 layers (none) x 4,096 tokens x 8 ")
    assert parts["parameters (routed experts)"]["formula"] == f"2 B x {11 * 16 * 3 * 4096 * 1536:,}"
    assert "flex dispatcher" in parts["token dispatch buffers"]["formula"]
    assert any(f["code"] == "VL210" and "fp4" in f["message"] for f in entry["findings"])
    refused = next(f for f in _check(QWEN3, "--gpus", "8xH100")["findings"] if f["code"] == "VL313")
    assert "expert_tensor_model_pipeline_parallel size (64)" in refused["message"]
    assert refused["hint"].endswith("or a smaller model.expert_model_parallel_size")     # the file's own key


def test_multi_token_prediction_depths_are_the_last_layers_kind_on_the_last_stage(tmp_path):
    """--mtp-num-layers 2 over LINE (its last layer MoE): each depth is an MoE layer on the last stage
    (gpt_layer_specs.py's MTP spec: the decoder's last layer's). Megatron's theoretical_memory_usage
    counts each as that layer's parameters, its estimator's weight-and-optimizer bytes grow by exactly
    vramlint's but for what it leaves out: each depth's eh_proj (2h x h, split over TP) and its three
    RMSNorms (enorm, hnorm, final_layernorm). On the last stage each depth keeps its embedding, the
    concatenation and its layer, and its loss's fp32 softmax over the vocabulary shard (4 B a logit)."""
    h, depths = 1024, 2
    base, mtp = (_plan(tmp_path, LINE.format(extra=extra), "8x80GB")
                 for extra in ("", f"--mtp-num-layers {depths}"))
    estimator = _megatron_estimator()["compute_weight_and_optimizer_memory"]
    grown = estimator(Namespace(**{**vars(_line_args(swiglu=True)), "mtp_num_layers": depths})) - \
        estimator(_line_args(swiglu=True))

    def states(plan):
        local = plan.with_changes(model=plan.model.tp_local(2, plan.tp_split))
        return megatron_states(local, ranks(local)[0])
    ours = sum(c.bytes for c in states(mtp).resting + states(mtp).gradients) - \
        sum(c.bytes for c in states(base).resting + states(base).gradients)
    left_out = depths * (2 * h * h // 2 + 3 * h)          # eh_proj over TP 2, three RMSNorm weights
    assert ours - grown == left_out * (2 + 4 + 12 / 4)      # bf16 weight, fp32 gradient, optimizer over dp 4
    from vramlint.memory.runtimes.megatron.step import moments
    peak = {c.name: c for name, parts in moments(mtp) if name == "forward at the loss" for c in parts}
    softmax = peak["multi-token prediction losses (fp32 softmax)"]
    assert softmax.bytes == 4 * depths * 2048 * 32000 // 2
    assert peak["multi-token prediction layers"].bytes > depths * layer(widths(mtp, 7)) * 2048


@pytest.mark.parametrize("extra, refused", [("", True), ("--no-bias-gelu-fusion", False),
                                            ("--disable-bias-linear", False), ("--swiglu", False)])
def test_gelu_experts_with_their_bias_fused_are_refused_as_te_grouped_mlp_raises(tmp_path, extra, refused):
    """TEGroupedMLP fuses the weighted activation of SwiGLU and quick-GELU experts only: GELU experts
    under --moe-grouped-gemm with bias_gelu_fusion on (Megatron's default where linears have biases)
    raise at the first forward (experts.py:847); Megatron's own CI runs every GELU MoE case with
    --no-bias-gelu-fusion. Off, or under --disable-bias-linear, or SwiGLU: estimated."""
    line = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 512 --num-attention-heads 8 "
            "--num-experts 8 --moe-router-topk 2 --moe-grouped-gemm --expert-model-parallel-size 2 "
            f"--seq-length 1024 --micro-batch-size 1 --vocab-size 32000 --bf16 {extra}\n")
    script = tmp_path / "train.sh"
    script.write_text(line)
    entry = _check(script, "--gpus", "8xH100")
    said = [f for f in entry["findings"] if f["code"] == "VL313"]
    assert bool(said) == refused
    if refused:
        assert "Only support fusion of swiglu and quick_gelu in TEGroupedMLP" in said[0]["message"]
        assert said[0]["hint"].startswith("add --no-bias-gelu-fusion")
