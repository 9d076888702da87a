"""The memory model: ZeRO sharding over the data-parallel degree, offload, worked examples,
activation accounting and the allocator replay."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from conftest import DATA

from vramlint.hardware import parse_gpus
from vramlint.memory import estimate
from vramlint.memory.parts.activations import layer_bytes_per_token
from vramlint.memory.parts.allocator import CachingAllocator
from vramlint.memory.fit import fitting_changes, largest_micro_batch
from vramlint.memory.parts.adapters import lora_params
from vramlint.memory.runtimes.deepspeed.states import deepspeed_states, zero3_kept, zero3_sub_groups
from vramlint.memory.training import model_states
from vramlint.memory.parts.weights import DTYPE_BYTES
from vramlint.models import read_model
from vramlint.models.hfconfig import shape_from_dict
from vramlint.plan import Plan

LLAMA_8B = read_model("meta-llama/Llama-3.1-8B")
P = LLAMA_8B.params


def plan(**kw) -> Plan:
    base = dict(model=LLAMA_8B, cluster=parse_gpus("8xH100"), precision="bf16", zero_stage=0,
                micro_batch=1, seq_len=2048)
    base.update(kw)
    return Plan(**base)


def resting(p: Plan) -> dict[str, int]:
    return {c.name: c.bytes for c in deepspeed_states(p).resting}


def test_full_finetune_is_16_bytes_per_parameter_before_activations():
    """Seed example: 2 (weights) + 2 (grads) + 12 (fp32 master, m, v); a nominal 70B needs 1,120 GB."""
    states = deepspeed_states(plan(zero_stage=0))
    weights = sum(c.bytes for c in states.resting)
    assert weights == 14 * P                     # 2 + 12 at rest
    sixteen_bit_grads = 2 * P
    assert (weights + sixteen_bit_grads) / P == 16
    assert 70e9 * 16 == 1120e9


@pytest.mark.parametrize("stage, expected", [
    (0, {"weights (16-bit)": 2 * P, "optimizer states": 12 * P}),
    (1, {"weights (16-bit)": 2 * P, "optimizer states": -(-12 * P // 8)}),
    (2, {"weights (16-bit)": 2 * P, "optimizer states": -(-12 * P // 8)}),
    (3, {"weights (16-bit)": -(-2 * P // 8), "optimizer states": -(-12 * P // 8)}),
])
def test_each_stage_shards_what_zero_says_over_dp(stage, expected):
    got = resting(plan(zero_stage=stage))
    for name, size in expected.items():
        assert got[name] == size


def test_sharding_is_over_data_parallel_not_world_size():
    p = plan(zero_stage=3, tensor_parallel=2)          # 8 GPUs, TP 2 -> DP 4
    assert p.data_parallel == 4
    assert resting(p)["optimizer states"] == -(-12 * P // 4)


def test_cpu_offload_moves_optimizer_states_to_host():
    p = plan(zero_stage=2, offload_optimizer="cpu")
    states = deepspeed_states(p)
    assert {c.name: c.bytes for c in states.resting}["optimizer states"] == 0
    assert states.host[0].bytes == int(P * max(4 * 8, 16) * 1.5)     # DeepSpeed's estimator


def test_llama_layer_keeps_what_autograd_saves():
    """bf16, SDPA: 2 RMSNorms x 8h + attention 2·(2q + 2kv) (new q and k, v, the output, which
    o_proj keeps as it is: token-major) + gated MLP 8·I bytes per token."""
    m = read_model("meta-llama/Llama-3.2-1B")
    h, q, kv, i = 2048, 2048, 512, 8192
    assert layer_bytes_per_token(m.layers[0], m, plan(model=m)) == 16 * h + 2 * (2 * q + 2 * kv) + 8 * i


def test_under_autocast_each_linear_keeps_its_own_cast_of_the_normed_input():
    """fp32 weights + autocast: norms keep 4h + 4h; q, k and v cast the fp32 norm output three
    times, gate and up twice (autocast caches casts of leaf tensors only)."""
    m = read_model("meta-llama/Llama-3.2-1B")
    h, q, kv, i = 2048, 2048, 512, 8192
    amp = plan(model=m, weights_dtype="float32", runtime="torch", zero_stage=0)
    assert amp.autocast
    assert layer_bytes_per_token(m.layers[0], m, amp) == 2 * 8 * h + 5 * 2 * h + 2 * (2 * q + 2 * kv) + 8 * i


def test_rope_through_torch_cat_makes_o_proj_keep_a_contiguous_copy():
    """Partial-rotary RoPE ends in torch.cat: q is head-major, SDPA's output too, and o_proj keeps
    the transpose's contiguous copy (pythia: 2h more per token than without the cat)."""
    pythia = read_model("EleutherAI/pythia-1b")
    assert pythia.block.rope_cat and pythia.block.parallel_residual
    h, i = 2048, 8192
    # input (once: both LayerNorms read it), two LayerNorm outputs, fused qkv 6h, new q and k,
    # SDPA's output and its copy, fc output and GELU output
    expected = 2 * h + 2 * 2 * h + 6 * h + 2 * 2 * h + 2 * 2 * h + 2 * 2 * i
    layer = pythia.layers[0]
    assert layer_bytes_per_token(layer, pythia, plan(model=pythia)) == expected
    plain = replace(pythia, block=replace(pythia.block, rope_cat=False))
    assert layer_bytes_per_token(layer, plain, plan(model=plain)) == expected - 2 * h


def test_activations_grow_with_micro_batch_and_checkpointing_caps_them():
    one = estimate(plan(zero_stage=3, micro_batch=1), replay=False).allocated_peak
    four = estimate(plan(zero_stage=3, micro_batch=4), replay=False).allocated_peak
    checkpointed = estimate(plan(zero_stage=3, micro_batch=4, grad_checkpointing=True), replay=False).allocated_peak
    assert four > one and checkpointed < four


def test_lora_counts_all_linear_adapters():
    m = read_model("meta-llama/Llama-3.2-1B")
    per_layer = (2048 + 2048) + 2 * (2048 + 512) + (2048 + 2048) + 3 * (2048 + 8192)
    assert lora_params(m, 16) == 16 * per_layer * 16 == 11_272_192       # PEFT's count, measured


def test_lora_on_moe_follows_peft_transformers5_conversion():
    """PEFT 0.21 maps all-linear onto transformers 5's fused experts where transformers converted
    them from v4 linears (qwen3_moe): the router, gate_up at rank 2r (w1 + w3 fused), down at r,
    each with one adapter per expert. gpt-oss's experts never were nn.Linear: untouched.
    (Checked with get_peft_model on CPU: qwen3_moe, qwen2_moe, gpt_oss, and the measured Mixtral.)"""
    qwen = read_model("Qwen/Qwen3-30B-A3B")
    h, q, kv, e, i = 2048, 4096, 512, 128, 768
    per_layer = (h + q) + 2 * (h + kv) + (q + h) + (h + e) + 2 * e * (h + 2 * i) + e * (i + h)
    assert lora_params(qwen, 16) == 16 * per_layer * 48
    oss = read_model("openai/gpt-oss-20b")
    att = oss.layers[0].attention
    q, kv = att.num_heads * att.head_dim, att.num_kv_heads * att.head_dim
    h = oss.hidden_size
    assert lora_params(oss, 16) == 16 * ((h + q) + 2 * (h + kv) + (q + h)) * oss.num_layers


def test_explicit_lora_targets_on_a_converted_moe_follow_peft():
    """PEFT 0.21 on qwen3_moe (layer 0 dense through ``mlp_only_layers``), r=8: gate/up/down_proj
    name the routed experts only — the dense layer's MLP keeps no adapter (get_peft_model: 14336,
    90112 and 32768 trainable parameters for the three target lists)."""
    from vramlint.models.hfconfig import shape_from_dict
    config = {"model_type": "qwen3_moe", "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 128,
              "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
              "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 1000, "mlp_only_layers": [0]}
    model = shape_from_dict(config)
    h, q, kv, e, i, r = 256, 256, 128, 8, 128, 8
    experts = 2 * r * e * (h + 2 * i) + r * e * (i + h)       # gate_up at rank 2r, down at r, per expert
    assert lora_params(model, r, ("q_proj", "v_proj")) == 2 * r * ((h + q) + (h + kv)) == 14336
    assert lora_params(model, r, ("gate_proj", "up_proj", "down_proj")) == experts == 90112
    assert lora_params(model, r, ("q_proj", "down_proj")) == 2 * r * (h + q) + r * e * (i + h) == 32768


def test_qwen3_moe_reads_the_expert_count_transformers5_writes():
    """Qwen3MoeConfig's attribute_map saves ``num_experts`` as ``num_local_experts``: a config.json
    written by transformers 5 has only that key (the class default of 128 would hide a change)."""
    from vramlint.models.catalog import entries
    from vramlint.models.hfconfig import shape_from_dict
    config = dict(next(e for e in entries() if e["id"] == "Qwen/Qwen3-30B-A3B")["config"])
    config["num_local_experts"] = 64
    config.pop("num_experts")
    layer = shape_from_dict(config).layers[0]
    assert layer.mlp.experts == 64


def test_allocator_reuses_freed_blocks_and_reserves_new_segments():
    a = CachingAllocator()
    big = a.malloc(100 << 20)
    a.free(big)
    small = a.malloc(40 << 20)                        # fits in the cached 100 MiB block: split
    assert a.reserved == 100 << 20
    larger = a.malloc(200 << 20)                      # nothing cached fits: a new segment
    assert a.reserved == 300 << 20 and a.allocated == (240 << 20)
    a.free(small)
    a.free(larger)
    a.empty_cache()
    assert a.reserved == 0 and a.peak_reserved == 300 << 20


def test_a_block_cached_by_one_stream_is_not_reused_by_another():
    a = CachingAllocator()
    a.free(a.malloc(100 << 20, stream=1))             # e.g. DeepSpeed's all-gather stream
    a.malloc(40 << 20)                                # the compute stream cannot take it
    assert a.reserved == 140 << 20
    a.malloc(40 << 20, stream=1)                      # the same stream can
    assert a.reserved == 140 << 20


def test_zero3_sub_groups_close_at_sub_group_size_and_zero_means_one_per_parameter():
    sizes = LLAMA_8B.tensor_sizes
    one = plan(zero_stage=3, sub_group_size=0, cluster=parse_gpus("1xH100"))
    assert zero3_sub_groups(one) == list(sizes)
    parts = zero3_sub_groups(plan(zero_stage=3, sub_group_size=300_000_000))
    assert sum(parts) == sum(-(-size // 8) for size in sizes)
    largest = -(-max(sizes) // 8)                  # a group closes within one parameter of the size
    assert len(parts) == 4 and all(300_000_000 <= part < 300_000_000 + largest for part in parts[:-1])
    # 1e9 < 8B / 8, so the group closes only with the last parameter: still one group
    assert zero3_sub_groups(plan(zero_stage=3)) == [sum(parts)]


def test_zero3_keeps_the_last_layers_gathered_within_the_reuse_distance():
    layer = LLAMA_8B.layers[0].params.total
    kept = zero3_kept(LLAMA_8B, 1_000_000_000)
    # from the end: lm_head (525M) + the later layers (218M each) stay under 1e9 for three layers
    assert sorted(kept.layers) == [29, 30, 31] and LLAMA_8B.head_params + 3 * layer >= 1e9 > LLAMA_8B.head_params + 2 * layer
    assert kept.embedding == 0                        # untied: lm_head is its own module
    assert zero3_kept(LLAMA_8B, 0).layers == frozenset()


def test_per_gpu_peak_adds_reserve_and_context_to_allocated():
    est = estimate(plan(zero_stage=3, micro_batch=2))
    reserve = next(c for c in est.components if c.kind == "allocator")
    context = next(c for c in est.components if c.kind == "context")
    assert est.per_gpu_peak == est.allocated_peak + reserve.bytes + context.bytes
    assert est.low < est.per_gpu_peak < est.high


def test_largest_micro_batch_is_the_boundary():
    p = plan(zero_stage=3)
    budget = p.cluster.gpu.memory_bytes
    best = largest_micro_batch(p, budget)
    assert best >= 1
    assert estimate(p.with_changes(micro_batch=best)).per_gpu_peak <= budget
    assert estimate(p.with_changes(micro_batch=best + 1)).per_gpu_peak > budget


@pytest.mark.parametrize("gib", [31, 40, 47, 60])
def test_largest_micro_batch_is_the_boundary_where_the_reserve_decides(gib):
    """The search bounds the answer by the tensors alone, then walks down with the allocator
    replay: at these budgets the two answers differ, and the replayed boundary is the one returned."""
    p = Plan(model=read_model("meta-llama/Llama-3.2-1B"), cluster=parse_gpus("1xH100"), precision="bf16",
             zero_stage=2, micro_batch=1, seq_len=4096, grad_checkpointing=True)
    budget = gib << 30
    best = largest_micro_batch(p, budget)
    if best:
        assert estimate(p.with_changes(micro_batch=best)).per_gpu_peak <= budget
    assert estimate(p.with_changes(micro_batch=best + 1)).per_gpu_peak > budget
    assert estimate(p.with_changes(micro_batch=best + 1), replay=False).per_gpu_peak <= budget  # the reserve decides


def test_every_suggested_change_really_fits():
    p = plan(zero_stage=0, micro_batch=8)
    budget = p.cluster.gpu.memory_bytes
    assert estimate(p).per_gpu_peak > budget
    changes = fitting_changes(p, budget)
    assert changes and all(change.peak <= budget for change in changes)


def test_hints_speak_each_runtimes_vocabulary():
    fsdp = plan(runtime="fsdp", fsdp_strategy="NO_SHARD", micro_batch=1, grad_checkpointing=True)
    words = " ".join(c.text for c in fitting_changes(fsdp, fsdp.cluster.gpu.memory_bytes))
    assert "fsdp_sharding_strategy" in words and "zero_optimization" not in words
    torch = plan(runtime="torch", weights_dtype="bfloat16", micro_batch=1, grad_checkpointing=True)
    words = " ".join(c.text for c in fitting_changes(torch, torch.cluster.gpu.memory_bytes))
    assert "distributed_type" in words


def test_more_gpus_is_offered_beside_offload():
    big = Plan(model=read_model("meta-llama/Llama-3.1-70B"), cluster=parse_gpus("1x8xH100"), precision="bf16",
               zero_stage=1, micro_batch=1, seq_len=4096)
    budget = big.cluster.gpu.memory_bytes
    changes = fitting_changes(big, budget)
    more = [c for c in changes if "nodes x 8 GPUs" in c.text]
    assert any("offload" in c.text for c in changes) and more and more[0].peak <= budget
    nodes = int(more[0].text.split()[0])
    from dataclasses import replace
    fewer = big.with_changes(zero_stage=3, grad_checkpointing=True, cluster=replace(big.cluster, nodes=nodes - 1))
    assert estimate(fewer).per_gpu_peak > budget                           # the fewest nodes that fit


def test_band_widens_where_nothing_was_measured():
    measured = estimate(plan(zero_stage=2))
    fsdp = estimate(plan(runtime="fsdp", grad_checkpointing=True))
    assert measured.band == 0.05 and fsdp.band > measured.band
    assert any("FSDP" in note for note in fsdp.assumptions)


def test_lora_targets_decide_both_trainable_params_and_kept_inputs():
    m = read_model("meta-llama/Llama-3.2-1B")
    qv = plan(model=m, lora_rank=16, lora_targets=("q_proj", "v_proj"))
    every = plan(model=m, lora_rank=16)
    assert lora_params(m, 16, ("q_proj", "v_proj")) == 16 * 16 * ((2048 + 2048) + (2048 + 512))
    assert layer_bytes_per_token(m.layers[0], m, qv) < layer_bytes_per_token(m.layers[0], m, every)


def test_grouped_mm_experts_run_in_the_weights_dtype_under_autocast():
    mixtral = read_model("mistralai/Mixtral-8x7B-v0.1")
    layer = mixtral.layers[0]
    base = dict(model=mixtral, cluster=parse_gpus("8xH100"), precision="bf16", runtime="torch", micro_batch=1)
    pure = layer_bytes_per_token(layer, mixtral, Plan(**base, weights_dtype="bfloat16"))
    amp = layer_bytes_per_token(layer, mixtral, Plan(**base, weights_dtype="float32"))
    k, i, h = layer.mlp.experts_per_token, layer.mlp.intermediate, mixtral.hidden_size
    routed = k * (2 * h + 4 * i)                 # gathered input, gate_up, act, product, output
    assert amp - pure >= 2 * routed              # 4 B instead of 2 B each
    # and autocast copies no expert weight: the cast copies cover attention, router and lm_head only
    from vramlint.memory.training import training_peak
    _, moments, _ = training_peak(Plan(**base, weights_dtype="float32"))
    forward = next(m for m in moments if m.name == "forward at the loss")
    casts = {c.name: c.bytes for c in forward.components if "autocast" in c.name}
    g = mixtral.layer_params
    assert casts == {"autocast weight copies": 2 * (g.attention + g.mlp + g.router),
                     "lm_head autocast copy": 2 * mixtral.vocab_size * h}


def test_transformers_prefill_keeps_the_whole_prompt_in_sliding_layers():
    from vramlint.memory.inference import kv_cache
    gemma = read_model("google/gemma-2-2b")
    assert any(layer.attention.window for layer in gemma.layers)
    cache = kv_cache(Plan(model=gemma, cluster=parse_gpus("1xH100"), precision="bf16", mode="infer",
                          runtime="torch", micro_batch=1, seq_len=8192)).bytes
    per_token = sum(layer.attention.kv_elements_per_token("transformers") for layer in gemma.layers) * 2
    assert cache == per_token * 8192


def test_phi3_fused_gate_up_output_stays_whole_in_a_prefill():
    from vramlint.memory.inference import working_set
    phi3 = read_model("microsoft/Phi-3-mini-4k-instruct")
    plan = Plan(model=phi3, cluster=parse_gpus("1xH100"), precision="bf16", mode="infer", runtime="torch",
                micro_batch=1, seq_len=1000)
    i, h = phi3.layers[0].mlp.intermediate, phi3.hidden_size
    assert working_set(plan).bytes == 2 * (4 * i + 4 * h) * 1000


def test_zero3_hint_can_release_the_layers_kept_for_backward():
    """A reuse distance of 0 alone releases nothing (DeepSpeed's prefetcher keeps what it passes
    while fewer than stage3_max_live_parameters are gathered: tests/test_allocation_trace.py);
    with the live bound down to the prefetch bucket the layers go."""
    p = plan(zero_stage=3, micro_batch=2, seq_len=4096, grad_checkpointing=True)
    assert estimate(p.with_changes(max_reuse_distance=0)).allocated_peak == estimate(p).allocated_peak
    released = p.with_changes(max_reuse_distance=0, max_live_parameters=p.prefetch_bucket_size)
    assert estimate(released).allocated_peak < estimate(p).allocated_peak
    budget = estimate(released).per_gpu_peak
    texts = {c.text for c in fitting_changes(p, budget)}
    assert "zero_optimization.stage3_max_reuse_distance 0 + stage3_max_live_parameters 50000000" in texts


def test_attention_masks_follow_transformers_masking_utils():
    from vramlint.memory.parts.activations import attention_masks
    gemma = read_model("google/gemma-2-2b")          # full and sliding (4096) layers
    def masks(attn, seq, batch=2):
        return attention_masks(Plan(model=gemma, cluster=parse_gpus("1xH100"), precision="bf16", attn=attn,
                                    micro_batch=batch, seq_len=seq), 2)
    assert masks("sdpa", 2048) == 0                   # is_causal, and the window covers the sequence
    assert masks("sdpa", 8192) == 8192 * 8192         # one boolean s x s view for the sliding layers
    assert masks("eager", 2048) == 2 * 2 * 2048 * 2048 * 2     # additive b x s x s per mask kind
    assert masks("flash_attention_2", 8192) == 0


ADAM_8BIT = json.loads((DATA / "adam8bit_states.json").read_text())


@pytest.mark.parametrize("model_type", sorted(ADAM_8BIT))
def test_8bit_adam_states_equal_bitsandbytes(model_type):
    """tests/data/adam8bit_states.json: dev/adam8bit_states.py ran one bitsandbytes AdamW8bit step
    on each shrunk model and added up its state storages (uint8 m, v; fp32 absmax per 256; fp32
    m, v for tensors under 4096 elements: the biases and norms)."""
    entry = ADAM_8BIT[model_type]
    p = Plan(model=shape_from_dict(dict(entry["config"])), cluster=parse_gpus("1xH100"), precision="bf16",
             runtime="torch", weights_dtype="bfloat16", optimizer="adamw-8bit")
    states = sum(c.bytes for c in model_states(p).resting if c.name == "optimizer states")
    assert states == entry["state_bytes"]


GEMMA3 = read_model("google/gemma-3-12b-it")
TOWER = 416_866_032 + 4_424_832       # SigLIP + projector, transformers' count (tests/test_vllm.py)
ADAPTERS = 27 * 16 * (4 * (1152 + 1152) + (1152 + 4304) + (4304 + 1152))   # r 16 on SigLIP's linears (PEFT)


@pytest.mark.parametrize("setup, expected", [
    (dict(runtime="torch", weights_dtype="bfloat16", cluster=parse_gpus("1xH200")), 2 * TOWER),
    (dict(runtime="torch", weights_dtype="float32", cluster=parse_gpus("1xH200")), 4 * TOWER),
    (dict(runtime="torch", weights_dtype="bfloat16"), 2 * TOWER + 2 * TOWER),     # DDP over 8: bucket slots too
    (dict(runtime="torch", weights_dtype="bfloat16", lora_rank=16), 2 * TOWER + 4 * ADAPTERS + 4 * ADAPTERS),
    (dict(runtime="torch", weights_dtype="bfloat16", lora_rank=16, cluster=parse_gpus("1xH200")),
     2 * TOWER + 4 * ADAPTERS),
    (dict(runtime="torch", weights_dtype="float32", lora_rank=16, load_in_4bit=True),
     int(TOWER * (4 + 8 / 64 + 32 / 64 / 256) / 8) + 8 * ADAPTERS),
    (dict(runtime="deepspeed", zero_stage=2), 2 * TOWER + -(-12 * TOWER // 8)),
    (dict(runtime="deepspeed", zero_stage=3), -(-2 * TOWER // 8) + -(-12 * TOWER // 8)),
    (dict(runtime="deepspeed", zero_stage=2, offload_optimizer="cpu"), 2 * TOWER),
    (dict(runtime="deepspeed", zero_stage=2, lora_rank=16), 2 * (TOWER + ADAPTERS) + -(-12 * ADAPTERS // 8)),
    (dict(runtime="fsdp", fsdp_strategy="FULL_SHARD", fsdp_version=2, lora_rank=16),
     -(-(2 * TOWER + 4 * ADAPTERS) // 8)),
    (dict(runtime="fsdp", fsdp_strategy="FULL_SHARD"), -(-4 * TOWER // 8)),
    (dict(runtime="fsdp", fsdp_strategy="NO_SHARD"), 4 * TOWER),
])
def test_a_multimodal_checkpoint_trains_with_its_vision_tower_loaded(setup, expected):
    """AutoModelForCausalLM builds gemma-3 as Gemma3ForConditionalGeneration: the SigLIP tower is
    loaded but a text-only step never runs it, so it gets no gradient and torch's AdamW no state
    (checked with transformers on the CPU: 0 of its 50 tensors get a grad or a state); DeepSpeed
    partitions every parameter handed to the optimizer, so ZeRO keeps its fp32 master and moments.
    With LoRA the tower is frozen, but PEFT's "all-linear" puts fp32 adapters on its linears, which
    require grad: DDP buckets them, DeepSpeed keeps their states (tests/data/lora_counts.json)."""
    states = model_states(plan(model=GEMMA3, **setup))
    tower = [c.bytes for c in states.resting if c.name == "vision tower (no gradient)"]
    assert tower == [expected]
    if setup["runtime"] == "torch" and not setup.get("lora_rank"):
        optimizer = next(c.bytes for c in states.resting if c.name == "optimizer states")
        assert optimizer == 2 * DTYPE_BYTES[setup["weights_dtype"]] * GEMMA3.params      # the language model's


def test_a_text_only_checkpoint_has_no_tower_and_inference_loads_it_too():
    text_only = model_states(plan(model=read_model("google/gemma-3-1b-it")))
    assert not any(c.name.startswith("vision tower") for c in text_only.resting)
    infer = estimate(plan(model=GEMMA3, mode="infer", runtime="torch", cluster=parse_gpus("1xH200")))
    assert next(c.bytes for c in infer.components if c.name == "vision tower") == 2 * TOWER


def test_inference_under_tensor_parallelism_splits_a_tower_only_where_transformers_plan_does():
    """transformers' tp_plan="auto" shards what ``base_model_tp_plan`` names: gemma4_vision's plan
    splits its encoder's projections (27 layers x (4 x 1152² + 3 x 1152 x 4304)), leaving the patch
    embedder, position tables and projector whole; SigLIP (Gemma 3) has no plan: whole on every rank."""
    def tower(model, tp):
        p = plan(model=model, mode="infer", runtime="torch", tensor_parallel=tp, cluster=parse_gpus(f"{tp}xH200"))
        return next(c.bytes for c in estimate(p, replay=False).components if c.name == "vision tower")
    gemma4 = read_model("google/gemma-4-26B-A4B")
    split = 27 * (4 * 1152 * 1152 + 3 * 1152 * 4304)
    assert tower(gemma4, 2) == 2 * (gemma4.vision_params - split + split // 2)
    assert tower(GEMMA3, 2) == tower(GEMMA3, 1) == 2 * TOWER


@pytest.mark.parametrize("name", ["meta-llama/Llama-3.1-8B", "openai/gpt-oss-20b", "Qwen/Qwen3-30B-A3B",
                                  "deepseek-ai/DeepSeek-V2-Lite"])
def test_inference_under_tensor_parallelism_replays_one_ranks_share(name):
    """transformers' tp_plan="auto" inference: the op-by-op replay (nograd.py) and the counted
    components describe the same rank — its weights, its heads' KV cache, its share of the MLP's
    width — so their allocated peaks agree within 1 % at TP 1 and TP 2 (the replay loaded every
    rank's whole model before, and the quantized experts of gpt-oss in bf16)."""
    from vramlint.memory.reserve import replay
    for tp in (1, 2):
        p = plan(model=read_model(name), mode="infer", runtime="torch", tensor_parallel=tp, micro_batch=2,
                 seq_len=2048, attn="sdpa", cluster=parse_gpus(f"{tp}xH200"))
        counted = estimate(p).allocated_peak
        replayed = replay(p.with_changes(model=p.model.tp_local(tp, p.tp_split))).allocated
        assert abs(replayed - counted) < 0.01 * counted


def test_transformers_tensor_parallelism_splits_what_the_familys_plan_names():
    """transformers 5's base_model_tp_plan for gpt_oss names only embed_tokens (and the class
    lm_head): attention and experts stay whole on every rank; llama's plan splits every
    projection. The KV cache follows the attention."""
    oss = read_model("openai/gpt-oss-20b")
    def kv(model, tp):
        p = plan(model=model, mode="infer", runtime="torch", tensor_parallel=tp, cluster=parse_gpus(f"{tp}xH200"))
        return next(c.bytes for c in estimate(p, replay=False).components if c.name == "KV cache")
    local = oss.tp_local(2, plan(model=oss, runtime="torch").tp_split)
    assert local.layer_params.attention == oss.layer_params.attention
    assert local.layer_params.experts == oss.layer_params.experts
    assert local.embedding_params == oss.embedding_params // 2 and local.head_params == oss.head_params // 2
    assert kv(oss, 2) == kv(oss, 1)
    llama = read_model("meta-llama/Llama-3.1-8B")
    assert kv(llama, 2) * 2 == kv(llama, 1)


@pytest.mark.parametrize("name, halved, whole", [
    ("meta-llama/Llama-3.1-8B", {"attention", "mlp", "head_params"}, {"embedding_params"}),
    ("meta-llama/Llama-3.2-1B", {"attention", "mlp", "embedding_params"}, set()),      # tied: vocab-parallel
    ("openai/gpt-oss-20b", {"head_params"}, {"attention", "experts", "embedding_params"}),
    ("tiiuae/falcon-7b", {"attention", "mlp"}, {"embedding_params", "head_params"}),
])
def test_deepspeed_autotp_splits_what_it_did_on_two_cpu_ranks(name, halved, whole):
    """DeepSpeed 0.19.8's AutoTP, run with autotp_size 2 on its CPU accelerator (two ranks, tiny
    configs of each family): it follows transformers' tp_plan but keeps an untied embedding whole
    (its embedding_rowwise is a SKIP spec), splits a tied one with lm_head over the vocabulary, and
    without a plan (falcon, tied or not) splits the layers' linears by name, the embedding whole."""
    model = read_model(name)
    local = model.tp_local(2, plan(model=model, runtime="deepspeed").tp_split)
    def size(m, what):
        return getattr(m.layer_params, what) if hasattr(m.layer_params, what) else getattr(m, what)
    for what in halved:
        assert size(local, what) * 2 == pytest.approx(size(model, what), rel=1e-4), what
    for what in whole:
        assert size(local, what) == size(model, what), what
