"""Megatron-LM (readers/megatron.py, layouts/megatron.py, memory/runtimes/megatron,
memory/fit_layout/megatron.py): real launch scripts (tests/data/megatron/scripts, byte-exact with
their sources), Megatron's own theoretical_memory_usage.py at core_v0.19.0 run on the same
arguments, and the published rows of benchmarks/megatron_published.py."""

from __future__ import annotations

import csv
import hashlib
import json
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from vramlint.memory.parts.pipeline import in_flight
from vramlint.memory.runtimes.megatron.activations import layer, widths
from vramlint.memory.runtimes.megatron.states import megatron_states
from vramlint.memory.runtimes.megatron.layout import ranks

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "megatron"
SCRIPTS = DATA / "scripts"


def _check(path, *args: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(path), "--format", "json", *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _codes(report: dict) -> list[tuple[str, str]]:
    return [(f["code"], f["message"]) for entry in report["files"] for f in entry["findings"]]


def _plan(tmp_path, line: str, gpus: str):
    """The plan vramlint makes of one launch line (through the CLI's own path)."""
    from vramlint.checker import check_file
    from vramlint.hardware import parse_gpus
    from vramlint.jobs.result import Context
    script = tmp_path / "train.sh"
    script.write_text(line)
    return check_file(str(script), Context(parse_gpus(gpus)))[0].plan


def test_the_files_are_the_sources_bytes():
    for sources, folder in ((SCRIPTS / "SOURCES.tsv", SCRIPTS), (DATA / "SOURCES.tsv", DATA)):
        for row in csv.DictReader(sources.open(), delimiter="\t"):
            data = (folder / row["file"]).read_bytes()
            assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == row["blob"], row["file"]


def test_nvidias_llama3_8b_script_is_read_priced_and_hinted_in_megatrons_flags():
    """examples/llama/train_llama3_8b_h100_fp8.sh: its arrays, appends in branches and quoted
    two-word elements are the arguments; --grad-reduce-in-bf16 makes a 2-byte gradient buffer; fp8
    is said not to be priced; at seq 8192 without recompute the bf16 job is over an H100."""
    report = _check(SCRIPTS / "NVIDIA__Megatron-LM/examples/llama/train_llama3_8b_h100_fp8.sh", "--gpus", "8xH100")
    entry = report["files"][0]
    parts = {c["name"]: c for c in entry["estimate"]["components"]}
    assert parts["gradient buffer"]["formula"] == "2 B x 8,030,261,248 (DDP buffer, whole)"
    assert parts["optimizer states"]["formula"].startswith("12 B (fp32 main + Adam m, v (fp32)) x 8,030,261,248 / 8")
    assert parts["activations"]["formula"].startswith("139,392 B/token x 32 layers (none) x 8,192 tokens")
    codes = _codes(report)
    assert any(code == "VL210" and "fp8" in message for code, message in codes)
    fit = next(f for f in entry["findings"] if f["code"] == "VL201")
    assert fit["hint"].startswith("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 "
                                  "fits at")


def test_a_layout_megatron_refuses_is_said_in_its_words():
    gpt3 = SCRIPTS / "NVIDIA__Megatron-LM/examples/gpt3/train_gpt3_175b_distributed.sh"
    codes = _codes(_check(gpt3, "--gpus", "8x80GB"))
    assert ("VL313", "Megatron-LM core_v0.19.0 refuses to start: world size (8) is not divisible by "
                     "total_model_size (total_model_size=128) (A:428)") in codes
    entry = _check(gpt3, "--gpus", "16x8x80GB")["files"][0]
    assert entry["estimate"] is not None and "pipeline rank 0" in entry["estimate"]["peak_moment"]


def test_one_job_written_inline_or_through_arrays_gives_one_answer(tmp_path):
    flags = ("--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 4096 "
             "--max-position-embeddings 4096 --vocab-size 50257 --micro-batch-size 2 --global-batch-size 64 "
             "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --bf16")
    inline = tmp_path / "inline.sh"
    inline.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {flags}\n")
    arrays = tmp_path / "arrays.sh"
    half = flags.split(" --micro")
    arrays.write_text(f"MODEL=(\n  {half[0]}\n)\nTRAIN=()\nTRAIN+=(\"--micro{half[1]}\")\n"
                      "torchrun --nproc_per_node 8 pretrain_gpt.py ${MODEL[@]} ${TRAIN[@]}\n")
    one = _check(inline, "--gpus", "8x80GB")["files"][0]["estimate"]["per_gpu_peak_bytes"]
    other = _check(arrays, "--gpus", "8x80GB")["files"][0]["estimate"]["per_gpu_peak_bytes"]
    assert one == other


def _megatron_estimator():
    """Megatron's own theoretical_memory_usage.py (core_v0.19.0, byte-exact), its two helpers from
    megatron/training/utils given as what they are there (print on rank 0; not a hybrid model)."""
    source = (DATA / "theoretical_memory_usage.py").read_text()
    source = source.replace("from .utils import is_hybrid_model, print_rank_0\n", "")
    scope = {"print_rank_0": lambda *a: None, "is_hybrid_model": lambda args: False, "__name__": "megatron"}
    exec(compile(source, "theoretical_memory_usage.py", "exec"), scope)
    return scope


ARGS = dict(num_layers=24, hidden_size=2048, num_attention_heads=16, kv_channels=128, ffn_hidden_size=8192,
            group_query_attention=False, num_query_groups=1, num_experts=None, swiglu=False,
            moe_shared_expert_intermediate_size=None, mtp_num_layers=None, normalization="LayerNorm",
            multi_latent_attention=False, padded_vocab_size=50432, untie_embeddings_and_output_weights=False,
            moe_latent_size=None, add_bias_linear=False, expert_tensor_parallel_size=2,
            expert_model_parallel_size=1, pipeline_model_parallel_size=1, tensor_model_parallel_size=2,
            world_size=8, data_parallel_size=4, use_distributed_optimizer=True, seq_length=4096,
            micro_batch_size=2, virtual_pipeline_model_parallel_size=None)


def test_states_and_layer_activations_equal_megatrons_own_estimator(tmp_path):
    """On arguments its formulas hold for (no biases, no learned positions, q = k = h, GELU,
    dropout, sequence parallel with selective recompute, the distributed optimizer), Megatron's
    weight-and-optimizer bytes and per-layer activation equal vramlint's to the byte."""
    plan = _plan(tmp_path, "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
                           "--num-attention-heads 16 --ffn-hidden-size 8192 --seq-length 4096 "
                           "--max-position-embeddings 4096 --vocab-size 50257 --position-embedding-type rope "
                           "--disable-bias-linear --micro-batch-size 2 --global-batch-size 64 "
                           "--tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer --bf16 "
                           "--recompute-activations\n", "8x80GB")
    megatron = _megatron_estimator()
    args = Namespace(**ARGS)
    weights = megatron["compute_weight_and_optimizer_memory"](args)
    local = plan.with_changes(model=plan.model.tp_local(2, plan.tp_split))
    states = megatron_states(local, ranks(local)[0])
    assert sum(c.bytes for c in states.resting + states.gradients) == weights
    per_layer = args.seq_length * args.micro_batch_size * args.hidden_size * (18 + 4 * args.ffn_hidden_size
                                                                              / args.hidden_size) / 2
    assert layer(widths(plan), ("core_attn",)) * args.seq_length * args.micro_batch_size == per_layer


def test_the_schedules_hold_megatrons_in_flight_micro_batches():
    """1F1B: rank r holds pp - r; interleaved (v chunks, groups of pp): 2(pp - r - 1) + (v - 1)pp + 1
    chunk-forwards, on rank 0 pp + (pp - 1)/v stages' worth: theoretical_memory_usage's penalty."""
    assert [in_flight("1F1B", r, 4, 1, 8) for r in range(4)] == [4, 3, 2, 1]
    assert in_flight("1F1B", 0, 4, 1, 2) == 2
    held = in_flight("Interleaved1F1B", 0, 4, 2, 8)
    assert held == 11 and held / 2 == 4 * (1 + (4 - 1) / (4 * 2))


@pytest.mark.parametrize("flags, words", [
    ("--num-attention-heads 12 --tensor-model-parallel-size 8", "num_attention_heads (12) must be a multiple of "
                                                                "tensor_model_parallel_size (8). (TC:1323)"),
    ("--num-attention-heads 16 --recompute-granularity full", 'Using recompute_granularity: full so '
                                                              'recompute_method must be "block" or "uniform"'),
    ("--num-attention-heads 16 --global-batch-size 12", "eval_global_batch_size (12) must be divisible by "
                                                        "eval_micro_batch_size (1) * data_parallel_size (8)"),
    ("--num-attention-heads 16 --pipeline-model-parallel-size 5", "world size (8) is not divisible by"),
    ("--num-attention-heads 16 --pipeline-model-parallel-size 8 --num-layers 12",
     "Number of layers should be divisible by the pipeline-model-parallel size"),
    ("--num-attention-heads 16 --use-distributed-optimizer --optimizer-cpu-offload",
     "The optimizer cpu offload must be used in conjunction with `--use-precision-aware-optimizer`"),
    ("--num-attention-heads 16 --cross-entropy-loss-fusion --cross-entropy-fusion-impl te",
     "Transformer Engine cross entropy loss fusion is disabled due to stability issues"),
])
def test_refusals(tmp_path, flags, words):
    script = tmp_path / "train.sh"
    base = "--hidden-size 1536 --seq-length 2048 --vocab-size 50257 --micro-batch-size 1"
    layers = "" if "--num-layers" in flags else "--num-layers 24 "
    script.write_text(f"torchrun --nproc_per_node 8 pretrain_gpt.py {layers}{base} {flags}\n")
    codes = _codes(_check(script, "--gpus", "8x80GB"))
    assert any(code == "VL313" and words in message for code, message in codes), codes


def test_optimizer_cpu_offload_keeps_its_fraction_of_the_shard_on_the_host(tmp_path):
    """--optimizer-cpu-offload with the precision-aware optimizer it needs (A:1803-1806): the
    --optimizer-offload-fraction (1.0 by default, A:2785) of the distributed optimizer's shard, its
    Adam moments and fp32 main copies, on the host; a fraction keeps the rest on the GPU."""
    base = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 --num-attention-heads 16 "
            "--seq-length 2048 --vocab-size 50257 --micro-batch-size 1 --use-distributed-optimizer --bf16 ")

    def states(flags: str, name: str) -> int:
        script = tmp_path / name
        script.write_text(base + flags + "\n")
        entry = _check(script, "--gpus", "8x80GB")["files"][0]
        return next((c["bytes"] for c in entry["estimate"]["components"] if c["name"] == "optimizer states"), 0)
    gpu = states("--use-precision-aware-optimizer", "a.sh")
    assert states("--use-precision-aware-optimizer --optimizer-cpu-offload", "b.sh") == 0
    assert states("--use-precision-aware-optimizer --optimizer-cpu-offload --optimizer-offload-fraction 0.25",
                  "c.sh") == pytest.approx(0.75 * gpu, rel=1e-6)


def test_the_published_rows_are_estimated_within_ten_percent_of_max_allocated():
    """benchmarks/megatron_published.py's rows (sources in the file): every row estimated, none more
    than 10 % from the max allocated Megatron printed."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from checked import without_context
    from megatron_published import ROWS, estimate
    for line in open(ROWS):
        row = json.loads(line)
        found = estimate(row)
        assert found is not None, row["name"]
        mib = without_context(found["estimate"]) / 2 ** 20
        assert abs(mib - row["max_allocated_mib"]) / row["max_allocated_mib"] <= 0.10, row["name"]


def test_a_megatron_job_the_tool_cannot_read_is_not_estimated_never_skipped(tmp_path):
    """NVIDIA's 23.04 pretrain_gpt3_175B.sh runs ``python -u ${DIR}/pretrain_gpt.py`` under srun with
    placeholder paths (it was "starts no job: skipped"); a NeMo Megatron config without its heads (in
    NeMo's keys); a tokenizer whose
    vocabulary only its files know. Each is VL011 with exit 1, and says what to do."""
    legacy = _check(SCRIPTS / "NVIDIA__Megatron-LM/examples/pretrain_gpt3_175B.sh", "--gpus", "16x8x80GB")
    assert legacy["files"][0]["status"] != "skipped" and any(c == "VL011" for c, _ in _codes(legacy))
    nemo = tmp_path / "megatron_gpt_config.yaml"
    nemo.write_text("trainer:\n  devices: 8\n  num_nodes: 1\nmodel:\n  micro_batch_size: 4\n"
                    "  tensor_model_parallel_size: 2\n  num_layers: 24\n  hidden_size: 2048\n")
    unread = next(f for f in _check(nemo, "--gpus", "8xH100")["files"][0]["findings"] if f["code"] == "VL011")
    assert "model.num_attention_heads not stated" in unread["message"] and "model.num_attention_heads" in unread["hint"]
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 24 --hidden-size 2048 "
                      "--num-attention-heads 16 --seq-length 2048 --max-position-embeddings 2048 "
                      "--micro-batch-size 1 --tokenizer-type HuggingFaceTokenizer --bf16\n")
    entry = _check(script, "--gpus", "8xH100")["files"][0]
    vocab = next(f for f in entry["findings"] if f["code"] == "VL011")
    assert "give --vocab-size" in vocab["message"] and vocab["hint"].startswith("add --vocab-size")


@pytest.mark.parametrize("flags, words", [
    ("--hybrid-layer-pattern M-G*-M-G*", "Gated DeltaNet (G)"),
    ("--hybrid-override-pattern M-M+M-M+", "multi-latent attention (+)"),
    ("--hybrid-layer-pattern M-M*-M-X*", "'X', not a layer symbol"),
    ("--hybrid-layer-pattern M-M*-M-E*", "MoE layers (E) in the layer pattern without --num-experts"),
    ("--hybrid-layer-pattern M-M*/*-/M-", "All MTP patterns must be identical"),
    ("--heterogeneous-layers-config-path nemotron_super.json", "--heterogeneous-layers-config-path"),
])
def test_layers_other_than_the_gpt_layer_are_not_priced_as_it(tmp_path, flags, words):
    """A hybrid pattern's layers not priced (Gated DeltaNet, latent attention), or a shape per layer,
    are not the GPT layer the other arguments state: VL011, never a silent GPT estimate."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 8 --hidden-size 2048 "
                      f"--num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 --vocab-size 32000 {flags}\n")
    entry = _check(script, "--gpus", "8xH100")["files"][0]
    assert entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and words in f["message"] for f in entry["findings"])


def test_megatrons_mimo_nemotron_example_under_uv_run_is_not_read_as_pretrain_gpt():
    """Megatron-LM's examples/mimo/scripts/run_hetero_nemotron_20l_mock_train.sh (core_v0.19.0,
    byte-exact): ``uv run --extra ssm python -m torch.distributed.run -m examples.mimo.pretrain_mimo``
    over a Nemotron pattern, its language model and vision encoder on rank groups of their own
    (--llm-tp 2 --llm-ep 4 --encoder-tp 2). It was skipped (exit 0), then VL011 for its hybrid layers;
    with those priced, MIMO's program is what is not read (VL011), never pretrain_gpt.py's layout
    (TP 1, EP 1) over its flags."""
    entry = _check(SCRIPTS / "NVIDIA__Megatron-LM/examples/mimo/scripts/run_hetero_nemotron_20l_mock_train.sh",
                   "--gpus", "8xH100")["files"][0]
    assert entry["via"] == "torchrun, line 25" and entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and "Megatron MIMO" in f["message"] for f in entry["findings"])


def test_where_no_layout_fits_the_hint_stays_in_megatrons_vocabulary():
    """Llama 3 8B at seq 8192 on one L4: no Megatron layout fits. The finding and ``vramlint plan``
    say so without offering LoRA / QLoRA or vramlint's own --lora-rank / --load-in-4bit, which
    are no Megatron-LM arguments."""
    example = ROOT / "examples" / "launch" / "megatron-llama3-8b.sh"
    report = _check(example, "--gpus", "1xL4")
    (finding,) = [f for f in report["files"][0]["findings"] if f["code"] == "VL201"]
    assert finding["hint"].startswith("none of its framework's layouts fits") and "LoRA" not in finding["hint"]
    proc = subprocess.run([sys.executable, "-m", "vramlint", "plan", str(example), "--gpus", "1xL4"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.splitlines()[-1]
    assert last.strip().startswith("none of its layouts") and "--lora-rank" not in proc.stdout


def test_an_unfused_attention_without_dropout_keeps_the_softmax_alone(tmp_path):
    """Megatron's local attention runs ``attention_dropout(softmax)`` before the values' matmul. At
    p = 0 torch's dropout returns the softmax itself (no mask, no copy: checked on torch here), so
    the layer keeps 2 B a score where dropout keeps 5 (the softmax, the mask, the dropped copy)."""
    torch = pytest.importorskip("torch")
    scores = torch.softmax(torch.randn(2, 4, 8, 8, requires_grad=True), dim=-1)
    assert torch.nn.functional.dropout(scores, 0.0, training=True) is scores
    line = ("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 16 "
            "--seq-length 2048 --micro-batch-size 1 --vocab-size 32000 --bf16 --transformer-impl local "
            "--attention-dropout {p}\n")
    kept = {}
    for p in ("0.1", "0.0"):
        plan = _plan(tmp_path, line.format(p=p), "8x80GB")
        kept[p] = plan.parallelism.scores
    assert kept == {"0.1": 5, "0.0": 2}


@pytest.mark.parametrize("model, vocabulary", [
    ("Qwen/Qwen2.5-7B", "152,064 (the Qwen/Qwen2.5-7B config's vocab_size"),
    ("meta-llama/Llama-3.1-8B", "128,256 (the meta-llama/Llama-3.1-8B config's vocab_size"),
    ("/models/Qwen2.5-7B", None), ("acme/unknown-model-7b", None),
])
def test_a_huggingface_tokenizer_named_by_its_hub_id_is_sized_by_the_catalogs_config(tmp_path, model, vocabulary):
    """``--tokenizer-type HuggingFaceTokenizer --tokenizer-model ORG/NAME`` of a model the bundled catalog
    holds: the config's vocab_size (the embedding rows every token id indexes: at least the tokenizer's
    length, padded as Megatron pads it); a local path or a model it does not know stays VL011."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 1024 "
                      "--num-attention-heads 16 --seq-length 2048 --micro-batch-size 1 --bf16 "
                      f"--tokenizer-type HuggingFaceTokenizer --tokenizer-model {model}\n")
    entry = _check(script, "--gpus", "8xH100")["files"][0]
    if vocabulary is None:
        assert entry["status"] == "not estimated"
        assert any(f["code"] == "VL011" and "give --vocab-size" in f["message"] for f in entry["findings"])
    else:
        assert entry["status"] == "estimated" and f"vocabulary {vocabulary}" in entry["model"]
