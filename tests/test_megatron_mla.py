"""Megatron-core's multi-latent attention (readers/megatron.py ``_latent``; memory/runtimes/megatron
activations.py and states.py ``duplicated``): a launch line with --multi-latent-attention priced as
the DeepSeek-V3 layers it builds, its states checked byte for byte against Megatron's own
theoretical_memory_usage.py (core_v0.19.0) on the same arguments, with the one difference
explained (the duplicated down-projections under TP); its layer's kept tensors term by term."""

from __future__ import annotations

from argparse import Namespace

import pytest

from test_megatron import ARGS, _megatron_estimator, _plan
from test_megatron_moe import _check, _parts
from vramlint.memory.runtimes.megatron.activations import layer, widths
from vramlint.memory.runtimes.megatron.layout import ranks
from vramlint.memory.runtimes.megatron.states import duplicated, megatron_states

LINE = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --ffn-hidden-size 2816 "
        "--num-attention-heads 16 --multi-latent-attention --q-lora-rank 384 --kv-lora-rank 256 --qk-head-dim 64 "
        "--qk-pos-emb-head-dim 32 --v-head-dim 64 --qk-layernorm --swiglu --disable-bias-linear "
        "--normalization RMSNorm --position-embedding-type rope --untie-embeddings-and-output-weights "
        "--num-experts 16 --moe-router-topk 4 --moe-ffn-hidden-size 256 --moe-shared-expert-intermediate-size 512 "
        "--moe-layer-freq '[0]*1+[1]*3' --expert-model-parallel-size 4 --expert-tensor-parallel-size 1 "
        "--tensor-model-parallel-size {tp} --sequence-parallel --use-distributed-optimizer --bf16 "
        "--vocab-size 32000 --seq-length 2048 --micro-batch-size 1 --global-batch-size 16 "
        "--moe-token-dispatcher-type alltoall --hidden-dropout 0 {extra}\n")
MLA_ARGS = dict(ARGS, num_layers=4, hidden_size=1024, ffn_hidden_size=2816, num_attention_heads=16, swiglu=True,
                normalization="RMSNorm", multi_latent_attention=True, q_lora_rank=384, kv_lora_rank=256,
                qk_head_dim=64, qk_pos_emb_head_dim=32, v_head_dim=64, num_experts=16, moe_ffn_hidden_size=256,
                moe_router_topk=4, moe_shared_expert_intermediate_size=512, moe_layer_freq=[0, 1, 1, 1],
                padded_vocab_size=32000, untie_embeddings_and_output_weights=True, expert_model_parallel_size=4,
                expert_tensor_parallel_size=1)


def _states(tmp_path, tp: int) -> tuple[int, object]:
    plan = _plan(tmp_path, LINE.format(tp=tp, extra=""), "8x80GB")
    local = plan.with_changes(model=plan.model.tp_local(tp, plan.tp_split))
    states = megatron_states(local, ranks(local)[0])
    return sum(c.bytes for c in states.resting + states.gradients), plan


def test_mla_states_equal_megatrons_own_estimator_but_the_duplicated_down_projections(tmp_path):
    """At TP 1 Megatron's weight-and-optimizer bytes equal vramlint's to the byte. At TP 2 the ranks
    hold the q and kv down-projections and the latent norms whole (duplicated TELinears; norms are
    not split), where Megatron's estimator divides them by TP with the rest of the attention: the
    difference is exactly their other half, at the distributed optimizer's 6 + 12/dp B a parameter."""
    estimator = _megatron_estimator()["compute_weight_and_optimizer_memory"]
    ours, plan = _states(tmp_path, 1)
    assert plan.model.layers[0].attention.kind == "mla"
    assert ours == estimator(Namespace(**{**MLA_ARGS, "tensor_model_parallel_size": 1, "data_parallel_size": 8}))
    ours, plan = _states(tmp_path, 2)
    theirs = estimator(Namespace(**{**MLA_ARGS, "tensor_model_parallel_size": 2, "data_parallel_size": 4}))
    downs = 1024 * 384 + 1024 * (256 + 32)
    assert duplicated(plan.model.layers[0].attention, 1024, 2) == downs // 2
    per_param = 6 + 12 / 4
    assert ours - theirs == pytest.approx(4 * (downs // 2 + (384 + 256) // 2) * per_param)


def test_an_mla_layer_keeps_its_latents_query_key_value_and_output_and_mla_up_proj_drops_them(tmp_path):
    """Per token of an MLA layer on a TP 2 rank with sequence parallelism (c = 2): the sequence part
    (norm inputs and outputs 4ch, the q latent and its normed copy 2c·r_q, the kv latent with its rope
    key c·(r_kv + d_r) and its normed copy c·r_kv) over 2; the query and key n·(d_nope + d_r) each,
    the value and output n·d_v each and the log-sum-exp over 2. mla_up_proj keeps the latents alone
    in place of the query, key and value, and the rope key gathered whole."""
    plan = _plan(tmp_path, LINE.format(tp=2, extra=""), "8x80GB")
    w = widths(plan, 0)                                  # the dense first layer
    c, h, n = 2, 1024, 16
    sequence = 4 * c * h + c * (2 * 384 + 2 * 256 + 32)
    heads = c * (2 * n * 96 + 2 * n * 64) + 3 * c * 2816 + 4 * n
    assert layer(w) == sequence // 2 + heads // 2
    up = layer(w, ("mla_up_proj",))
    assert up == (4 * c * h + c * (384 + 256 + 32)) // 2 + (c * n * 64 + 3 * c * 2816 + 4 * n) // 2 + c * 32


def test_a_launch_line_with_mla_is_estimated_as_deepseeks_layers(tmp_path):
    """The line's job is estimated (it was priced as 16 heads of GQA attention, silently), its model
    said as multi-latent attention, and its selective mla_up_proj lowers the activations."""
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(tp=2, extra="--recompute-granularity selective --recompute-modules core_attn"))
    base = _check(script, "--gpus", "8x80GB")
    assert "multi-latent attention (q latent 384, kv latent 256" in base["model"]
    script.write_text(LINE.format(tp=2, extra="--recompute-granularity selective --recompute-modules core_attn "
                                              "mla_up_proj"))
    up = _check(script, "--gpus", "8x80GB")
    assert _parts(up)["activations"]["bytes"] < _parts(base)["activations"]["bytes"]


@pytest.mark.parametrize("extra, words", [
    ("--moe-layer-freq '[0]+[1]+[0]+[1]'", "not the first dense ones then every n-th"),
    ("--moe-layer-freq '[0]*1+[1]*3' --moe-shared-expert-intermediate-size 384",
     "shared experts of width 384 are not whole experts of 256"),
])
def test_mla_layer_patterns_deepseek_cannot_state_are_not_estimated(tmp_path, extra, words):
    script = tmp_path / "train.sh"
    line = LINE.format(tp=1, extra="").replace("--moe-shared-expert-intermediate-size 512 ", "")
    script.write_text(line.replace("--moe-layer-freq '[0]*1+[1]*3' ", extra + " "))
    entry = _check(script, "--gpus", "8x80GB")
    found = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert found and words in found[0]["message"]


LAYOUT = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 6 --hidden-size 1024 --ffn-hidden-size 2816 "
          "--num-attention-heads 16 --swiglu --disable-bias-linear --normalization RMSNorm "
          "--position-embedding-type rope --untie-embeddings-and-output-weights --tensor-model-parallel-size 2 "
          "--sequence-parallel --pipeline-model-parallel-size 2 --pipeline-model-parallel-layout '{layout}' "
          "--use-distributed-optimizer --bf16 --vocab-size 32000 --seq-length 2048 --micro-batch-size 1 "
          "--global-batch-size 16 --hidden-dropout 0\n")


def test_a_pipeline_layout_places_each_stages_layers_and_sets_the_virtual_stages(tmp_path):
    """--pipeline-model-parallel-layout 'Et|(tt|)*2tL' (Megatron's own grammar: ``(...)*n`` unrolled,
    ``|`` between stages) on PP 2 is four stages, two a rank: rank 0 holds stages 0 and 2 (layers 0
    and 3-4), rank 1 stages 1 and 3 (1-2 and 5). 6 layers over PP 4 would be refused (A:963); with
    the layout Megatron builds it."""
    plan = _plan(tmp_path, LAYOUT.format(layout="Et|(tt|)*2tL"), "8x80GB")
    assert plan.parallelism.stage_layers == (1, 2, 2, 1)
    assert plan.parallelism.stages_per_rank == 2
    held = [[stage.layers for stage in rank.stages] for rank in ranks(plan)]
    assert held == [[(0,), (3, 4)], [(1, 2), (5,)]]


@pytest.mark.parametrize("layout, words", [
    ("Et|tt|tt", "must be divisible by pipeline_model_parallel_size (num_stages=3"),
    ("Et|tt|tt|t", "The last layer must be loss, but got decoder"),
    ("tE|tt|tt|tL", "The first layer must be embedding, but got decoder"),
    ("Et|tt|tL|tL", "Loss must be specified exactly once"),
    ("Et|tt|tt|tttL", "Number of decoder layers 8 must match num_layers 6"),
    ("Ex|tt|tt|tL", "Invalid layer character: x"),
    ("E(t|)*999999999L", "Number of decoder layers (more than 100,000"),
    ("|||", "The first layer must be embedding, but got nothing"),
])
def test_a_pipeline_layout_megatron_refuses_is_said_in_its_words(tmp_path, layout, words):
    script = tmp_path / "train.sh"
    script.write_text(LAYOUT.format(layout=layout))
    found = [f for f in _check(script, "--gpus", "8x80GB")["findings"] if f["code"] == "VL313"]
    assert found and words in found[0]["message"]


def test_a_pipeline_layout_of_virtual_stages_needs_a_pipeline(tmp_path):
    """Four stages on PP 1 are four virtual stages on one rank: Megatron's interleaved schedule
    refuses it (A:969), as it does for --num-virtual-stages-per-pipeline-rank."""
    script = tmp_path / "train.sh"
    script.write_text(LAYOUT.format(layout="Et|tt|tt|tL").replace("--pipeline-model-parallel-size 2",
                                                                   "--pipeline-model-parallel-size 1"))
    found = [f for f in _check(script, "--gpus", "8x80GB")["findings"] if f["code"] == "VL313"]
    assert found and "pipeline-model-parallel size should be greater than 1" in found[0]["message"]


@pytest.mark.parametrize("extra, said", [("--use-megatron-fsdp", False),
                                         ("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads", True),
                                         ("--use-megatron-fsdp --data-parallel-sharding-strategy optim", False),
                                         ("--mtp-num-layers 1", False)])
def test_megatron_fsdp_that_shards_gradients_and_mtp_layers_are_said(tmp_path, extra, said):
    """Megatron FSDP's default optim_grads_params is priced (tests/test_megatron_fsdp.py); optim_grads
    shards gradients the distributed optimizer keeps whole (VL211, the job needs less); ``optim`` is the
    distributed optimizer's own layout, so nothing is said. An MTP layer is priced (it was VL210)."""
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(tp=1, extra=extra))
    notes = [f["message"] for f in _check(script, "--gpus", "8x80GB")["findings"] if f["code"] in ("VL210", "VL211")]
    assert any("Megatron FSDP" in m or "multi-token prediction" in m for m in notes) == said


def test_megatrons_fsdp_deepseek_v3_sbatch_script_is_read_not_skipped():
    """Megatron-LM's examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh (core_v0.19.0, byte-exact)
    builds its command in a string (``TRAINING_CMD="... ${PROFILE_CMD} python pretrain_gpt.py
    ${PRETRAIN_ARGS[@]}"``) that an sbatch heredoc runs as ``srun ... bash -x -c "${TRAINING_CMD}"``,
    with no profiler: ``PROFILE=${PROFILE:-0}`` leaves ``[ "${PROFILE}" = 1 ]``'s nsys branch untaken
    (it was taken as the first branch to fill PROFILE_CMD). It was "starts no training job: skipped"
    (exit 0); now its job is read at line 187 with the array's arguments a word each (the model's
    61 layers and latent attention among them). Its vocabulary is the HuggingFaceTokenizer of
    deepseek-ai/DeepSeek-V3, which the bundled catalog's config sizes (129,280 rows, at least the
    tokenizer's length; it was VL011); priced under Megatron-FSDP, it does not fit 80 GB cards at
    micro-batch 4 (the script's HybridEP dispatcher is GB200's), its MTP layer priced (it was VL210)."""
    from test_megatron import SCRIPTS
    from vramlint.readers.shell import read_script
    path = SCRIPTS / "NVIDIA__Megatron-LM/examples/megatron_fsdp/sbatch_mfsdp_deepseek_v3.sh"
    (command,) = [c for c in read_script(path.read_text(), str(path)).commands
                  if any((w.text or "").endswith("pretrain_gpt.py") for w in c.words)]
    words = [w.text for w in command.words]
    assert words[0] == "python" and words[words.index("--num-layers") + 1] == "61"
    assert "--multi-latent-attention" in words
    entry = _check(path, "--gpus", "32x8x80GB")
    assert entry["via"].startswith("python, line 187") and entry["status"] == "estimated"
    assert "vocabulary 129,280 (the deepseek-ai/DeepSeek-V3 config's vocab_size" in entry["model"]
    assert "Megatron FSDP (optim_grads_params)" in str(entry["estimate"]["assumptions"])
    codes = {f["code"] for f in entry["findings"]}
    assert "VL011" not in codes and "VL201" in codes and "VL210" not in codes
