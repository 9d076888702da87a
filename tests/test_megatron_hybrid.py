"""Megatron-core's hybrid stack (--hybrid-layer-pattern: Mamba-2, attention, MLP and MoE layers;
models/architectures.megatron_hybrid, memory/runtimes/megatron/activations.py): Megatron-LM's own
CI runs of pretrain_hybrid.py (tests/data/megatron/ci, byte-exact with SOURCES.tsv), the mixer's
parameters and kept tensors from mamba_mixer.py's shapes, and the layouts validate_args refuses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from test_megatron import _plan as _megatron_plan
from test_megatron_moe import _check
from vramlint.memory.runtimes.megatron.activations import layer, widths

ROOT = Path(__file__).resolve().parent.parent
CI = ROOT / "tests" / "data" / "megatron" / "ci"
HYBRID_CASES = sorted(p.name for p in CI.iterdir() if p.name.startswith("hybrid_"))
# Megatron's CI model (hybrid_mr_mcore_te_*): hidden 1024, 16 heads in 8 query groups, GELU FFN 4096,
# Mamba defaults (TC:1179-1190: state 128, head 64, 8 groups; d_inner 2 x 1024 = 32 heads x 64)
LINE = ("torchrun --nproc_per_node 8 pretrain_hybrid.py --hybrid-layer-pattern '{pattern}' --hidden-size 1024 "
        "--num-attention-heads 16 --group-query-attention --num-query-groups 8 --seq-length 1024 "
        "--max-position-embeddings 1024 --micro-batch-size 4 --global-batch-size 32 --vocab-size 50304 "
        "--bf16 --use-distributed-optimizer {extra}\n")


def _plan(tmp_path, line: str, gpus: str = "8xH100"):
    return _megatron_plan(tmp_path, line, gpus)


def _ci():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import megatron_ci
    return megatron_ci


def test_megatrons_hybrid_ci_runs_are_priced_within_three_percent():
    """The five H100 runs of Megatron's mamba.yaml recipe (pretrain_hybrid.py, 44 layers
    ``M-M-M-M*-...``: TP 1 and 2, PP 2 interleaved and PP 4 by the pattern's ``|`` segments, CP 4):
    estimated with no finding that sets them apart, each within 3 % of its last rank's max allocated
    (10.15, 7.74, 4.48, 5.91 and 2.74 GB). Before the mixer was priced every one was VL011."""
    ci = _ci()
    assert len(HYBRID_CASES) == 5
    recipes = ci.recipes()
    errors = {}
    for case in HYBRID_CASES:
        nodes, per_node, program = recipes[case]
        assert (nodes, per_node, program) == (1, 8, "pretrain_hybrid.py")
        text = ci.line(case, per_node, program)
        entry = ci.first_estimate("train.sh", text, "8xH100")
        assert entry is not None and not [f for f in entry["findings"] if f["code"] in ("VL011", "VL210", "VL211")]
        errors[case] = (ci.last_rank(text, "8xH100", entry) - ci.measured(case)) / ci.measured(case)
    assert {case: round(e, 3) for case, e in errors.items() if abs(e) > 0.03} == {}


def test_a_mamba_layers_parameters_are_the_mixers_shapes(tmp_path):
    """mamba_mixer.py's parameters (core_v0.19.0 :275-420): in_proj h x (2 d_inner + 2 g n + heads), no
    bias; conv1d (d_inner + 2 g n) x 4 taps and its bias; dt_bias, A_log and D a head; the gated norm's
    d_inner weight; out_proj d_inner x h; the LayerNorm fused into in_proj (weight and bias). One
    Mamba layer more is exactly that many parameters more."""
    h, inner, g, n, heads = 1024, 2048, 8, 128, 32
    mixer = h * (2 * inner + 2 * g * n + heads) + (inner + 2 * g * n) * 5 + 3 * heads + inner + inner * h + 2 * h
    one = _plan(tmp_path, LINE.format(pattern="M*-", extra=""))
    two = _plan(tmp_path, LINE.format(pattern="MM*-", extra=""))
    assert two.model.params - one.model.params == mixer
    attention = h * (16 + 2 * 8) * 64 + (16 + 2 * 8) * 64 + 16 * 64 * h + h + 2 * h      # qkv, proj, biases, norm
    mlp = 2 * h * 4096 + 4096 + h + 2 * h
    assert one.model.params - 50304 * h - 1024 * h - 2 * h == mixer + attention + mlp    # embeddings, final norm


def test_a_mamba_layer_keeps_its_kernels_input_out_x_and_the_norms_and_projections_inputs(tmp_path):
    """Per token, bf16: the sequence part (norm input and output, 2 x 2h, and the dropout mask, h)
    and the mixer's c(P + 3 d_inner) + 4g, P = in_proj's output; under TP 2 without sequence
    parallelism the mixer's part alone halves. An MLP layer is one sub-block (its norm and mask once)."""
    h, inner, g, n, heads = 1024, 2048, 8, 128, 32
    mixer = 2 * ((2 * inner + 2 * g * n + heads) + 3 * inner) + 4 * g
    plan = _plan(tmp_path, LINE.format(pattern="M*-", extra=""))
    assert layer(widths(plan, 0)) == 4 * h + h + mixer
    assert layer(widths(plan, 2)) == 4 * h + h + 2 * 2 * 4096               # FC1's output and GELU's
    tp2 = _plan(tmp_path, LINE.format(pattern="M*-", extra="--tensor-model-parallel-size 2"))
    assert layer(widths(tp2, 0)) == 4 * h + h + mixer // 2


@pytest.mark.parametrize("pattern, extra, words", [
    ("M-M-|M-M-|M*M-", "--pipeline-model-parallel-size 2",
     "must be evenly divisible by --pipeline-model-parallel-size"),
    ("M-M-|M*M-", "--pipeline-model-parallel-size 2 --decoder-first-pipeline-num-layers 2",
     "--decoder-first-pipeline-num-layers should not be specified"),
    ("M-M-M*M-", "--pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 2",
     "--num-layers-per-virtual-pipeline-stage should not be used with --hybrid-layer-pattern"),
    ("M-M-M*M-", "--mamba-num-groups 3", "nheads must be evenly divisible by ngroups"),
    ("M-M-M*M-", "--mamba-head-dim 48", "d_inner must be evenly divisible by headdim"),
    ("M-M-M*M-", "--tensor-model-parallel-size 8 --mamba-num-groups 4", "ngroups must be evenly divisible by tp_size"),
])
def test_layouts_validate_args_and_the_mixer_refuse_are_refused_in_their_words(tmp_path, pattern, extra, words):
    script = tmp_path / "train.sh"
    script.write_text(LINE.format(pattern=pattern, extra=extra))
    entry = _check(script, "--gpus", "8xH100")
    assert entry["status"] == "not estimated"
    assert any(f["code"] in ("VL313", "VL011") and words in f["message"] for f in entry["findings"]), entry["findings"]


def test_the_patterns_segments_are_the_pipeline_stages(tmp_path):
    """``|`` splits the layers into segments, segment vp x pp + r on pipeline rank r
    (select_pipeline_segment): 2 ranks x 2 chunks; without pipes the layers split evenly."""
    from vramlint.memory.runtimes.megatron.layout import ranks
    plan = _plan(tmp_path, LINE.format(pattern="MMM-|M*|--|M-", extra="--pipeline-model-parallel-size 2"))
    assert [[stage.layers for stage in rank.stages] for rank in ranks(plan)] == \
        [[(0, 1, 2, 3), (6, 7)], [(4, 5), (8, 9)]]
    even = _plan(tmp_path, LINE.format(pattern="MMM-M*--", extra="--pipeline-model-parallel-size 2"))
    assert [[stage.layers for stage in rank.stages] for rank in ranks(even)] == [[(0, 1, 2, 3)], [(4, 5, 6, 7)]]


def test_multi_token_prediction_in_the_pattern_is_priced_and_a_hybrid_program_without_one_is_not_read(tmp_path):
    """``/*-/*-``: two depths of an attention and an MLP layer each (A:839-860), on the last stage with
    their losses, the pattern's count over a stated --mtp-num-layers (A:843-852); with the default learned
    positions Megatron refuses MTP (A:855-859); a pretrain_mamba.py line stating no pattern is VL011."""
    script = tmp_path / "train.sh"
    rope = "--position-embedding-type rope --mtp-num-layers 3"
    script.write_text(LINE.format(pattern="M-M*-/*-/*-", extra=rope))
    entry = _check(script, "--gpus", "8xH100")
    assert entry["status"] == "estimated" and not [f for f in entry["findings"] if f["code"] == "VL210"]
    parts = {c["name"]: c for c in entry["estimate"]["components"]}
    assert parts["multi-token prediction layers"]["formula"].startswith("2 depth(s)")
    plan = _plan(tmp_path, LINE.format(pattern="M-M*-/*-/*-", extra=rope))
    assert (plan.model.mtp_depths, [one.attention.kind for one in plan.model.mtp]) == (2, ["full", "none"])
    script.write_text(LINE.format(pattern="M-M*-/*-/*-", extra=""))
    refused = [f["message"] for f in _check(script, "--gpus", "8xH100")["findings"] if f["code"] == "VL313"]
    assert any("not supported with learned_absolute position embedding type" in m for m in refused)
    script.write_text(LINE.format(pattern="x", extra="").replace("--hybrid-layer-pattern 'x' ", "--num-layers 8 ")
                      .replace("pretrain_hybrid.py", "pretrain_mamba.py"))
    entry = _check(script, "--gpus", "8xH100")
    assert entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and "pretrain_mamba.py without --hybrid-layer-pattern" in f["message"]
               for f in entry["findings"])


def test_more_pipeline_stages_are_offered_only_where_the_patterns_segments_divide(tmp_path):
    """Under ``|`` segments Megatron takes segments / pp chunks a rank (A:829-833): from PP 2 over 4
    segments the next pipeline size is 4 (3 does not divide them), one chunk a rank, the stages the
    segments still; the TP degrees offered divide the Mamba heads and groups as well as the attention's."""
    from vramlint.memory.fit_layout.megatron import _pipeline, _tp_degrees
    from vramlint.memory.runtimes.megatron.layout import ranks
    plan = _plan(tmp_path, LINE.format(pattern="M-M-|M*M-|M-M-|M*M-", extra="--pipeline-model-parallel-size 2"))
    (change,) = _pipeline(plan, 10 ** 12)
    assert change.text == "--pipeline-model-parallel-size 4"
    groups = _plan(tmp_path, LINE.format(pattern="M-M*", extra="--mamba-num-groups 2"))
    assert _tp_degrees(groups) == [1, 2]          # attention's 16 heads / 8 groups allow 8; Mamba's 2 groups do not
    assert [len(rank.stages) for rank in ranks(plan)] == [2, 2]
