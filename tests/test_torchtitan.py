"""torchtitan (readers/torchtitan.py, layouts/torchtitan.py, memory/runtimes/torchtitan, memory/fit_layout/torchtitan.py):
its TOML job files as torchtitan's repository ships them (byte-exact: tests/data/torchtitan/
SOURCES.tsv, tag v0.2.2 and the commit of its 2024-12 benchmark), the launch line's
``--section.key`` arguments over them, the layouts torchtitan refuses, the pipeline split, and the
block's activations against the CPU trace of torchtitan's own block (dev/torchtitan_block.py)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import shutil
from pathlib import Path

import pytest

from conftest import DATA
from vramlint.cli import main as vramlint_main
from vramlint.documents import parse
from vramlint.memory.runtimes.torchtitan.activations import Widths, full, none, op, op_fused
from vramlint.memory.runtimes.torchtitan.layout import split
from vramlint.memory.runtimes.torchtitan.step import CHUNK_LOGITS, LOSS, PARALLEL_LOSS

TITAN = DATA / "torchtitan" / "pytorch__torchtitan"
V022, DEC2024 = TITAN / "v0.2.2", TITAN / "9dec370"
GiB = 1 << 30


def _check(*argv: str) -> list[dict]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        vramlint_main(["check", *map(str, argv), "--format", "json"])
    return json.loads(out.getvalue())["files"]


def _one(*argv: str) -> dict:
    (entry,) = _check(*argv)
    return entry


def _codes(entry: dict) -> set[str]:
    return {f["code"] for f in entry["findings"]}


def test_toml_keys_are_located_on_their_lines():
    text = (V022 / "llama3_70b.toml").read_text()
    document = parse(text, str(V022 / "llama3_70b.toml"))
    lines = text.splitlines()
    for path in ("$.training.local_batch_size", "$.parallelism.tensor_parallel_degree", "$.activation_checkpoint.mode",
                 "$.model.flavor"):
        line, column = document.positions[path]
        assert lines[line - 1].lstrip().startswith(path.rsplit(".", 1)[1]), path
    assert document.data["parallelism"]["tensor_parallel_degree"] == 8


def test_a_toml_that_does_not_parse_is_a_located_finding(tmp_path):
    bad = tmp_path / "job.toml"
    bad.write_text('[model]\nname = "llama3"\nflavor = \n')
    entry = _one(bad, "--gpus", "8xH100")
    (finding,) = entry["findings"]
    assert finding["code"] == "VL001" and finding["line"] == 3


def test_the_shipped_8b_job_is_read_with_its_defaults_named():
    entry = _one(V022 / "llama3_8b.toml", "--gpus", "8xH100")
    assert entry["status"] == "estimated" and entry["findings"] == []
    plan = entry["plan"]
    assert (plan["micro_batch"], plan["seq_len"]) == (1, 8192)
    notes = " ".join(entry["estimate"]["assumptions"])
    assert "dp_shard x cp = 8 GPUs" in notes and "per op" in notes       # dp_shard -1 over 8; selective_ac_option op
    parts = {c["name"]: c for c in entry["estimate"]["components"]}
    params = 8_030_261_248                                               # Llama-3.1-8B: torchtitan's 8B flavor
    assert parts["parameter shards"]["bytes"] == 4 * -(-params // 8)
    assert parts["optimizer states"]["bytes"] == 8 * -(-params // 8)


def test_the_2024_file_spells_its_keys_the_old_way_and_gives_the_same_job(tmp_path):
    """9dec370's llama3_8b.toml writes training.batch_size and the degrees under [training]; the
    same job in v0.2.2's keys is the same estimate."""
    old = _one(DEC2024 / "llama3_8b.toml", "--gpus", "8xH100")
    new = _one(V022 / "llama3_8b.toml", "--gpus", "8xH100")
    assert old["estimate"]["per_gpu_peak_bytes"] == new["estimate"]["per_gpu_peak_bytes"]


def test_one_job_two_ways_the_launch_line_over_the_toml(tmp_path):
    """run_train.sh's torchrun line with --training.local_batch_size and --compile.enable over the
    shipped file, and the file with those values written in it: one answer."""
    shutil.copy(V022 / "llama3_8b.toml", tmp_path / "llama3_8b.toml")
    script = tmp_path / "train.sh"
    script.write_text('#!/usr/bin/bash\nCONFIG_FILE=${CONFIG_FILE:-"./llama3_8b.toml"}\n'
                      'PYTORCH_ALLOC_CONF="expandable_segments:True" torchrun --nproc_per_node=8 '
                      '-m torchtitan.train --job.config_file ${CONFIG_FILE} --training.local_batch_size 2 '
                      '--compile.enable "$@"\n')
    text = (V022 / "llama3_8b.toml").read_text()
    assert "local_batch_size = 1\n" in text and "enable=false" in text.replace(" ", "")
    written = tmp_path / "written.toml"
    written.write_text(text.replace("local_batch_size = 1\n", "local_batch_size = 2\n")
                       .replace("[compile]\nenable=false", "[compile]\nenable=true"))
    by_line = _one(script, "--gpus", "H100")
    by_file = _one(written, "--gpus", "8xH100")
    assert by_line["plan"]["micro_batch"] == 2
    assert by_line["estimate"]["per_gpu_peak_bytes"] == by_file["estimate"]["per_gpu_peak_bytes"]
    assert "compiled" in " ".join(c["name"] for c in by_line["estimate"]["components"])


def test_torchtitans_own_launcher_runs_the_file_it_names():
    """v0.2.2's run_train.sh, run from the repository root its CONFIG_FILE is relative to."""
    root = TITAN / "v0.2.2"
    tree = root / "torchtitan" / "models" / "llama3" / "train_configs"
    try:
        tree.mkdir(parents=True)
        shutil.copy(root / "debug_model.toml", tree / "debug_model.toml")
        with contextlib.chdir(root):
            entries = _check("run_train.sh", "--gpus", "H100")
    finally:
        shutil.rmtree(root / "torchtitan")
    # the torchrun line over 8 (COMM_MODE=${COMM_MODE:-""} leaves the one-GPU dry run's branch untaken)
    assert [e["plan"]["micro_batch"] for e in entries] == [8]              # debug_model.toml's local batch
    assert all(e["status"] == "estimated" for e in entries)


def test_torchtitans_030_launcher_runs_the_config_function_it_names():
    """b5bcd76's run_train.sh (the 0.3.0 era) selects a Python config function (``--module ${MODULE}
    --config ${CONFIG}``, llama3 / llama3_debugmodel unless set): read from the wheel's registry."""
    entries = _check(DATA / "launch" / "pytorch__torchtitan" / "run_train.sh", "--gpus", "8xH100")
    assert [e["status"] for e in entries] == ["estimated"]       # the torchrun branch (COMM_MODE unset)
    for entry in entries:
        assert entry["plan"]["micro_batch"] == 8 and entry["plan"]["seq_len"] == 2048   # llama3_debugmodel's
        said = " ".join(entry["estimate"]["assumptions"])
        assert "torchtitan 0.3.0" in said and "llama3_debugmodel" in json.dumps(entry)
    slurm = _one(DATA / "launch" / "pytorch__torchtitan" / "multinode_trainer.slurm", "--gpus", "H100")
    assert slurm["status"] == "estimated" and slurm["plan"]["data_parallel"] == 32


V030 = TITAN / "v0.3.0"
REGISTRY = json.loads((Path(vramlint_main.__code__.co_filename).parent / "data" /
                       "torchtitan_0.3.0_registry.json").read_text())


def _calls(node, name: str) -> dict:
    """The literal keyword arguments of the first ``name(...)`` call under ``node``."""
    for call in ast.walk(node):
        if isinstance(call, ast.Call) and ast.unparse(call.func) == name:
            return {k.arg: ast.literal_eval(k.value) for k in call.keywords
                    if isinstance(k.value, (ast.Constant, ast.UnaryOp))}
    return {}


@pytest.mark.parametrize("module", ["llama3", "qwen3"])
def test_the_registry_is_the_wheels_config_functions(module):
    """data/torchtitan_0.3.0_registry.json (dev/torchtitan_registry.py) against the wheel's own
    config_registry.py (byte-exact, SOURCES.tsv): each function's line, and the batch, the mesh and
    the checkpointing class it writes literally."""
    tree = ast.parse((V030 / f"{module}_config_registry.py").read_text())
    functions = [f for f in tree.body if isinstance(f, ast.FunctionDef) and not f.args.args]
    assert functions
    for function in functions:
        entry = REGISTRY["configs"][function.name]
        assert entry["module"] == module
        assert entry["source"] == f"torchtitan/models/{module}/config_registry.py:{function.lineno}"
        if not any(isinstance(c, ast.Call) and ast.unparse(c.func) == "Trainer.Config" for c in ast.walk(function)):
            continue                     # a variant that edits another config function's result
        for key, value in _calls(function, "TrainingConfig").items():
            if key in entry["training"]:
                assert entry["training"][key] == value, (function.name, key)
        for key, value in _calls(function, "ParallelismConfig").items():
            assert entry["parallelism"][key] == value, (function.name, key)
        text = ast.unparse(function)
        for cls in ("FullAC", "SelectiveAC"):
            if f"activation_checkpoint={cls}.Config()" in text:
                assert entry["activation_checkpoint"]["class"] == f"{cls}.Config", function.name


def test_the_fields_a_line_may_set_are_the_wheels_config_classes():
    """The registry data's field lists (tyro's refusal of any other, readers/torchtitan_registry.py)
    are the dataclass fields of the wheel's own config/configs.py (byte-exact, SOURCES.tsv)."""
    tree = ast.parse((V030 / "configs.py").read_text())
    classes = {node.name: [item.target.id for item in node.body if isinstance(item, ast.AnnAssign)]
               for node in tree.body if isinstance(node, ast.ClassDef)}
    fields = REGISTRY["fields"]
    assert fields["training"] == classes["TrainingConfig"]
    assert fields["parallelism"] == classes["ParallelismConfig"]
    assert fields["compile"] == classes["CompileConfig"]


def _line(tmp_path: Path, arguments: str, name: str = "run.sh") -> Path:
    script = tmp_path / name
    script.write_text(f"#!/bin/bash\ntorchrun --nproc_per_node=8 -m torchtitan.train {arguments}\n")
    return script


def test_one_030_job_spelled_three_ways_gives_one_answer(tmp_path):
    """tyro's spellings (manager.py, tyro): ``--a.b v`` / ``--a.b=v``, dashes for underscores, the
    module and config anywhere on the line."""
    lines = ["--module llama3 --config llama3_8b --training.local_batch_size 2 --parallelism.tensor_parallel_degree 2",
             "--training.local-batch-size=2 --module=llama3 --parallelism.tensor-parallel-degree=2 --config=llama3_8b",
             "--config llama3_8b --parallelism.tensor_parallel_degree=2 --module llama3 --training.local_batch_size=2"]
    peaks = {_one(_line(tmp_path, line, f"run{i}.sh"), "--gpus", "H100")["estimate"]["per_gpu_peak_bytes"]
             for i, line in enumerate(lines)}
    assert len(peaks) == 1


def test_030_flags_subcommand_and_the_config_functions_defaults(tmp_path):
    """llama3_8b: local batch 1, seq 8192, per-op selective checkpointing, chunked loss (8); the
    ``activation-checkpoint:full`` subcommand and the bare boolean flags change it as tyro does."""
    base = _one(_line(tmp_path, "--module llama3 --config llama3_8b"), "--gpus", "H100")
    assert (base["plan"]["micro_batch"], base["plan"]["seq_len"]) == (1, 8192)
    said = " ".join(base["estimate"]["assumptions"])
    assert "per op" in said and "llama3_8b (torchtitan/models/llama3/config_registry.py:184)" in json.dumps(base)
    names = " ".join(c["name"] for c in base["estimate"]["components"])
    assert "loss gradient accumulator (fp32)" in names and "compiled" not in names
    full = _one(_line(tmp_path, "--module llama3 --config llama3_8b activation-checkpoint:full", "full.sh"),
                "--gpus", "H100")
    assert "full (each block keeps its input)" in " ".join(full["estimate"]["assumptions"])
    assert full["estimate"]["per_gpu_peak_bytes"] < base["estimate"]["per_gpu_peak_bytes"]
    compiled = _one(_line(tmp_path, "--module llama3 --config llama3_8b --compile.enable", "c.sh"), "--gpus", "H100")
    assert "compiled" in " ".join(c["name"] for c in compiled["estimate"]["components"])
    undone = _one(_line(tmp_path, "--module llama3 --config llama3_8b --compile.enable --compile.no-enable", "u.sh"),
                  "--gpus", "H100")
    assert undone["estimate"]["per_gpu_peak_bytes"] == base["estimate"]["per_gpu_peak_bytes"]


@pytest.mark.parametrize("arguments, words", [
    ("--module llama3 --config my_llama", "my_llama is not a config function torchtitan 0.3.0 ships"),
    ("--module qwen3 --config qwen3_30b_a3b", "a mixture-of-experts model (48 of 48 layers)"),
    ("--module deepseek_v3 --config deepseek_v3_16b", "deepseek_v3 is not modelled for torchtitan yet"),
    ("--config llama3_8b", "--module is required"),
    ("--module llama3 --config ${CONFIG}", "--config is known only when the script runs"),
    ("--module graph_trainer.llama3 --config graph_trainer_llama3_8b", "--module graph_trainer.llama3: vramlint "
                                                                       "reads torchtitan 0.3.0's own model registries"),
])
def test_a_030_config_it_cannot_price_is_not_estimated_and_says_why(tmp_path, arguments, words):
    entry = _one(_line(tmp_path, arguments), "--gpus", "H100")
    assert entry["status"] == "not estimated"
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert words in finding["message"] and finding["line"] == 2


def test_030_a_field_its_config_has_not_is_tyros_refusal(tmp_path):
    """tyro exits 2 on a field 0.3.0's config has not: a later torchtitan's batch-in-tokens flag, or
    --loss.num_chunks where the config function's loss is no ChunkedLossWrapper (the helper run on
    the wheel's parser: manager.py)."""
    for line, key in (("--module llama3 --config llama3_8b --training.num-tokens-per-train-step 2048",
                       "--training.num_tokens_per_train_step"),
                      ("--module llama3 --config llama3_debugmodel_ce_loss --loss.num_chunks 4", "--loss.num_chunks"),
                      ("--module llama3 --config llama3_8b --model.flavor 70B", "--model.flavor")):
        entry = _one(_line(tmp_path, line, "u.sh"), "--gpus", "H100")
        (finding,) = [f for f in entry["findings"] if f["code"] == "VL313"]
        assert f"Unrecognized options: {key}" in finding["message"] and finding["line"] == 2
    fine = _one(_line(tmp_path, "--module llama3 --config llama3_8b --loss.num_chunks 4 --training.steps 10",
                      "ok.sh"), "--gpus", "H100")
    assert not [f for f in fine["findings"] if f["code"] == "VL313"]


def test_030_a_bare_flag_does_not_swallow_the_subcommand_after_it(tmp_path):
    """``--training.disable_cuda_graphs activation-checkpoint:full``: the flag takes no value, the
    subcommand is the line's next word."""
    flagged = _one(_line(tmp_path, "--module llama3 --config llama3_8b --parallelism.no-enable_sequence_parallel "
                                   "activation-checkpoint:full", "a.sh"), "--gpus", "H100")
    assert "full (each block keeps its input)" in " ".join(flagged["estimate"]["assumptions"])
    assert not [f for f in flagged["findings"] if f["code"] == "VL313"]


def test_030_pipeline_parallel_needs_cuda_graphs_off(tmp_path):
    """trainer.py:179-187: CUDA graphs (on by default) refuse a pipeline, at parse time."""
    pp = "--module llama3 --config llama3_8b --parallelism.pipeline_parallel_degree 2 --training.local_batch_size 8"
    refused = _one(_line(tmp_path, pp), "--gpus", "H100")
    (finding,) = [f for f in refused["findings"] if f["code"] == "VL313"]
    assert "CUDA graphs do not support pipeline parallelism yet" in finding["message"]
    assert finding["hint"] == "--training.disable_cuda_graphs"
    ran = _one(_line(tmp_path, pp + " --training.disable_cuda_graphs", "off.sh"), "--gpus", "H100")
    assert ran["status"] == "estimated" and "pipeline rank" in ran["estimate"]["peak_moment"]
    chunks = _one(_line(tmp_path, "--module llama3 --config llama3_8b --loss.num_chunks 3", "chunks.sh"),
                  "--gpus", "H100")
    (finding,) = [f for f in chunks["findings"] if f["code"] == "VL313"]
    assert "ChunkedLossWrapper sequence length must be divisible by num_chunks (8192 % 3)" in finding["message"]
    tied = _one(_line(tmp_path, "--module qwen3 --config qwen3_0_6b --parallelism.pipeline_parallel_degree 2 "
                                "--training.disable_cuda_graphs", "tied.sh"), "--gpus", "H100")
    (finding,) = [f for f in tied["findings"] if f["code"] == "VL313"]
    assert "Weight tying is not supported with Pipeline Parallel" in finding["message"]


def test_030_cuda_graphs_keep_the_gradient_shards_and_the_chunks_size_the_logits(tmp_path):
    """Under CUDA graphs zero_grad keeps the gradients (trainer.py:874); ChunkedLossWrapper's logits
    are a chunk's: twice the chunks, half the chunk."""
    def parts(arguments: str, name: str) -> dict:
        entry = _one(_line(tmp_path, "--module llama3 --config llama3_8b " + arguments, name), "--gpus", "H100")
        return {c["name"]: c["bytes"] for c in entry["estimate"]["components"]}
    graphs, off = parts("", "a.sh"), parts("--training.disable_cuda_graphs", "b.sh")
    assert "gradient shards (fp32)" in graphs and "gradient shards (fp32)" not in off
    eight, sixteen = parts("--loss.num_chunks 8", "c.sh"), parts("--loss.num_chunks 16", "d.sh")
    name = "a chunk's logits and loss (backward)"
    assert eight[name] == 2 * sixteen[name] and eight[name] == 14 * 8192 // 8 * 128256
    compiled = parts("--compile.enable", "e.sh")          # the compiled loss saves the logits it was given
    assert compiled["a chunk's logits and loss (backward, compiled)"] == 4 * 8192 // 8 * 128256


def test_the_030_block_and_loss_are_the_wheels_traced():
    """dev/torchtitan030_trace.py: torchtitan 0.3.0's own llama3 and qwen3 blocks and its
    ChunkedLossWrapper, recorded on the CPU (the block's input left out: 2h)."""
    trace = json.loads((DATA / "torchtitan030_trace.json").read_text())
    assert trace["torchtitan"] == "0.3.0"
    rope = {"llama3": 4, "qwen3": 8}
    for block in trace["blocks"]:
        s = block["shape"]
        w = Widths(s["h"], s["kv"] * s["head_dim"], s["ffn"], s["heads"], 1, 2, s["heads"] * s["head_dim"],
                   rope[block["model"]] * s["head_dim"], s["kv"], s["qk_norm"])
        counted = {"none": none(w), "full": full(w) - 2 * s["h"], "op": op_fused(w, False) - 2 * s["h"]}
        assert counted[block["policy"]] == block["kept_per_token"], block
    for loss in trace["loss"]:
        n, h, vocab = loss["b"] * loss["s"], loss["h"], loss["vocab"]
        copies = (2 * h + 8) * n if loss["b"] > 1 else 0      # the trace passes labels, no positions
        # without FSDP the output's gradient accumulates in bf16 (FSDP2 with sync off: fp32, 4 B)
        rest = 4 * n * h + copies + 2 * vocab * h
        chunk = n // loss["chunks"] * vocab
        assert abs(loss["peak"] - rest - (LOSS["backward"] + CHUNK_LOGITS) * chunk) <= 64, loss


def test_030_sequence_parallel_off_is_said_not_priced(tmp_path):
    entry = _one(_line(tmp_path, "--module llama3 --config llama3_8b --parallelism.tensor_parallel_degree 2 "
                                 "--parallelism.no-enable_sequence_parallel"), "--gpus", "H100")
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL210"]
    assert "sequence parallel off" in finding["message"] and finding["line"] == 2


def test_030_bf16_adam_moments_are_said_not_priced(tmp_path):
    entry = _one(_line(tmp_path, "--module llama3 --config llama3_8b --optimizer.implementation "
                                 "fused_opt_states_bf16"), "--gpus", "H100")
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL210"]
    assert "AdamW's moments in bf16" in finding["message"] and finding["line"] == 2


def test_030_tied_embeddings_stay_gathered_twice_through_forward(tmp_path):
    """qwen3_0_6b ties its embeddings: one [embedding, norm, output] unit, two bf16 copies of the
    tied weight all-gathered for the whole forward (fsdp.py:180-192); the untied qwen3_32b has the
    [norm, output] unit alone."""
    def parts(config: str) -> dict:
        entry = _one(_line(tmp_path, f"--module qwen3 --config {config}", f"{config}.sh"), "--gpus", "8xH100")
        return {c["name"]: c["bytes"] for c in entry["estimate"]["components"]}
    tied, untied = parts("qwen3_0_6b"), parts("qwen3_32b")
    vocab, hidden = 151936, 1024
    assert tied["embedding + norm + output unit (unsharded, tied: two copies)"] == 2 * (2 * vocab * hidden + hidden)
    assert "norm + output unit (unsharded)" in untied and not any("tied" in name for name in untied)


def test_the_022_qwen3_block_is_the_wheels_traced():
    """dev/torchtitan022_qwen3_trace.py: torchtitan 0.2.2's own qwen3 block (q / k norms, its RoPE's
    bf16 cos and sin rows, one [seq, head_dim] each a position for the batch's rows) under its own
    policies, at its debugmodel and a narrower GQA shape (the block's input left out: 2h)."""
    trace = json.loads((DATA / "torchtitan022_qwen3_trace.json").read_text())
    assert trace["torchtitan"] == "0.2.2"
    for block in trace["blocks"]:
        s = block["shape"]
        rope = -(-4 * s["head_dim"] // block["b"])
        w = Widths(s["h"], s["kv"] * s["head_dim"], s["ffn"], s["heads"], 1, 2, s["heads"] * s["head_dim"], rope,
                   s["kv"], True)
        counted = {"none": none(w), "full": full(w) - 2 * s["h"], "op": op(w) - 2 * s["h"]}
        assert counted[block["policy"]] == block["kept_per_token"], block


@pytest.mark.parametrize("name, flavor, mode", [("qwen3_0.6b", "0.6B", "per op"), ("qwen3_1.7b", "1.7B", "per op"),
                                                ("qwen3_32b", "32B", "full")])
def test_torchtitans_022_qwen3_job_files_are_estimated(name, flavor, mode):
    """v0.2.2's own qwen3 job files (byte-exact, SOURCES.tsv): the flavor's shapes (q wider than the
    model for 0.6B and 32B), its checkpointing, its q / k norms in the block's count."""
    entry = _one(V022 / f"{name}.toml", "--gpus", "8xH100")
    assert entry["status"] == "estimated" and entry["model"] == f"torchtitan qwen3 {flavor}"
    said = " ".join(entry["estimate"]["assumptions"])
    assert mode in said


def test_030_hints_speak_the_launch_lines_flags(tmp_path):
    entry = _one(_line(tmp_path, "--module qwen3 --config qwen3_32b --parallelism.tensor_parallel_degree 4 "
                                 "activation-checkpoint:selective"), "--gpus", "H100")
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert "activation-checkpoint:full" in finding["hint"] and "activation_checkpoint.mode" not in finding["hint"]
    assert finding["line"] == 2


@pytest.mark.parametrize("edit, words", [
    ("tensor_parallel_degree = 8", "Invalid parallel dims: dp_replicate(1) * dp_shard(0)"),
    ("seq_len = 8193", "must be divisible by the product of TP degree"),
])
def test_layouts_torchtitan_refuses_are_vl313_in_its_words(tmp_path, edit, words):
    text = (V022 / "llama3_8b.toml").read_text()
    key = edit.split(" = ")[0]
    lines = [edit if line.startswith(key + " ") else line for line in text.splitlines()]
    job = tmp_path / "job.toml"
    job.write_text("\n".join(lines) + "\n")
    entry = _one(job, "--gpus", "4xH100")
    refused = [f for f in entry["findings"] if f["code"] == "VL313"]
    assert refused and words in refused[0]["message"] and entry.get("estimate") is None
    at = "data_parallel_shard_degree" if "dims" in words else key      # the file's dp_shard -1 is what cannot be
    assert refused[0]["line"] == next(i for i, line in enumerate(lines, 1) if line.startswith(at + " "))


def test_pipeline_microbatches_fewer_than_stages_are_refused(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text((V022 / "llama3_8b.toml").read_text().replace("pipeline_parallel_degree = 1",
                                                                 "pipeline_parallel_degree = 4"))
    entry = _one(job, "--gpus", "8xH100")
    assert any("Number of microbatches (1) is less than the total number of stages (4)" in f["message"]
               for f in entry["findings"])


@pytest.mark.parametrize("pp, per, schedule, words", [
    (2, 9, "1F1B", "Single stage schedule requires exactly 1 stage per rank, but got 2 stages per rank"),
    (8, 3, "ZBVZeroBubble", "Number of virtual stages (12) must be divisible by pipeline parallel size (8)"),
    (4, 3, "ZBVZeroBubble", "v schedules assume 2 stages per rank, got 3"),
    (4, 9, "Interleaved1F1B", "Multi-stage schedule requires at least 2 stages per rank, but got 1"),
])
def test_the_stages_layers_per_stage_makes_must_suit_the_schedule(tmp_path, pp, per, schedule, words):
    """pipeline_parallel.py's checks of pipeline_parallel_layers_per_stage: 32 layers + the embedding
    and the head in ceil(34 / per) stages, as 0.2.2 and 0.3.0 raise them."""
    line = (f"--module llama3 --config llama3_8b --training.disable_cuda_graphs --training.local_batch_size 32 "
            f"--parallelism.pipeline_parallel_degree {pp} --parallelism.pipeline_parallel_layers_per_stage {per} "
            f"--parallelism.pipeline_parallel_schedule {schedule}")
    entry = _one(_line(tmp_path, line), "--gpus", "8xH100")
    assert any(f["code"] == "VL313" and words in f["message"] for f in entry["findings"]), entry["findings"]


def test_a_v_shaped_schedule_without_a_pipeline_runs_no_schedule(tmp_path):
    """A job naming ZBVZeroBubble with pipeline_parallel_degree 1 (its schedule is never built) is
    estimated as the job without a pipeline (it failed inside the runtime before)."""
    base = '[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n[parallelism]\n'
    plain, shaped = tmp_path / "plain.toml", tmp_path / "v.toml"
    plain.write_text(base)
    shaped.write_text(base + 'pipeline_parallel_schedule = "ZBVZeroBubble"\n')
    peaks = [_one(job, "--gpus", "8xH100")["estimate"]["per_gpu_peak_bytes"] for job in (plain, shaped)]
    assert peaks[0] == peaks[1]


def test_the_pipeline_split_is_torchtitans():
    """generate_llm_fqn_per_model_part (pipeline_parallel.py:236-345): 32 layers + embedding + head
    over 8 stages is 34 effective layers, 5 for the first two stages, 4 for the rest, the embedding
    and the head each taking one of their stage's."""
    stages = split(32, 8)
    assert [len(s.layers) for s in stages] == [4, 5, 4, 4, 4, 4, 4, 3]
    assert stages[0].embedding and stages[-1].head and sum(len(s.layers) for s in stages) == 32
    assert [len(s.layers) for s in split(126, 16)] == [7, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 7]


def test_the_activation_counts_are_the_traced_blocks():
    """Each policy's count at each traced shape (dev/torchtitan_block.py, torch 2.13 on the CPU) —
    the trace leaves out the block's input, which a checkpointed block keeps (2h)."""
    trace = json.loads((DATA / "torchtitan_block.json").read_text())
    for block in trace["blocks"]:
        s = block["shape"]
        w = Widths(s["h"], s["kv"] * s["h"] // s["heads"], s["ffn"], s["heads"], 1, 2)
        assert none(w) == block["none"]
        assert full(w) - 2 * s["h"] == block["full"]
        assert op(w) - 2 * s["h"] == block["op"]
    for name, counts in (("loss", LOSS), ("loss_parallel", PARALLEL_LOSS)):
        loss = trace[name]
        assert round(loss["forward_peak_per_logit"]) == counts["forward"]
        assert round(loss["backward_peak_per_logit"]) == counts["backward"]
    assert PARALLEL_LOSS != LOSS


def test_a_job_that_does_not_fit_gets_a_hint_in_torchtitans_keys():
    entry = _one(V022 / "llama3_8b.toml", "--gpus", "8xA10G")
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert "parallelism.tensor_parallel_degree = 8" in finding["hint"]
    assert "zero_optimization" not in finding["hint"]


def test_pipeline_parallel_keeps_the_stage_unsharded_and_names_the_peak_rank(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text((V022 / "llama3_70b.toml").read_text().replace("pipeline_parallel_degree = 1",
                                                                  "pipeline_parallel_degree = 4"))
    entry = _one(job, "--gpus", "4x8xH100")
    names = {c["name"] for c in entry["estimate"]["components"]}
    assert {"unsharded stage parameters", "accumulated unsharded gradients"} <= names
    assert "pipeline rank" in entry["estimate"]["peak_moment"]


def test_an_unknown_torchtitan_model_is_not_estimated(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "deepseek_v3"\nflavor = "16B"\n[training]\nlocal_batch_size = 4\n')
    entry = _one(job, "--gpus", "8xH100")
    assert "VL011" in _codes(entry) and "deepseek_v3" in json.dumps(entry["findings"])


def test_the_files_are_sourced():
    rows = [line.split("\t") for line in (DATA / "torchtitan" / "SOURCES.tsv").read_text().splitlines()[1:]]
    assert len(rows) == 14
    for local, repo, path, commit, *_ in rows:
        assert (TITAN.parent / local).is_file() and repo == "pytorch/torchtitan" and len(commit) == 40


def test_the_rows_file_names_a_source_for_every_row():
    for line in (DATA / "published" / "torchtitan.jsonl").read_text().splitlines():
        row = json.loads(line)
        assert row["source"].startswith("https://") and row["quote"] and row["measured_gib"] > 0



def test_what_the_runtime_does_not_price_is_said_at_its_line():
    """The shipped 405B job turns on float8 and async TP: each a VL210 where the file states it."""
    entry = _one(V022 / "llama3_405b.toml", "--gpus", "64x8xH100")
    said = {f["message"].split(":")[0]: f["line"] for f in entry["findings"] if f["code"] == "VL210"}
    text = (V022 / "llama3_405b.toml").read_text().splitlines()
    assert "converters" in text[said["float8 linears (model.converters)"] - 1]
    assert "enable_async_tensor_parallel" in text[said["async tensor parallel"] - 1]


LOCAL = "local_batch_size = 1\n"       # the shipped 8B file's [training] line, where a test adds its key


def _edited(tmp_path, source: Path, *edits: tuple[str, str]) -> Path:
    text = source.read_text()
    for old, new in edits:
        assert old in text, old
        text = text.replace(old, new)
    job = tmp_path / "job.toml"
    job.write_text(text)
    return job


def test_a_file_that_names_no_optimizer_is_torchtitans_adamw(tmp_path):
    job = tmp_path / "job.toml"
    job.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\nseq_len = 8192\n')
    entry = _one(job, "--gpus", "8xH100")
    assert entry["findings"] == [] and "every 2 fully checkpointed" in " ".join(entry["estimate"]["assumptions"])


@pytest.mark.parametrize("edit, code, words", [
    (("pipeline_parallel_degree = 1", 'pipeline_parallel_degree = "two"'), "VL102", "'two' is not a whole number"),
    (('mode = "selective"', 'mode = "partial"'), "VL313", "Invalid AC mode: partial"),
    (('selective_ac_option = "op"', 'selective_ac_option = "some"'), "VL313", "Invalid selective AC option: some"),
    (("local_batch_size = 1\n", "local_batch_size = 1\nglobal_batch_size = 12\n"), "VL313",
     "global batch size must be multiple of local"),
])
def test_values_torchtitan_turns_away_are_findings_at_their_line(tmp_path, edit, code, words):
    job = _edited(tmp_path, V022 / "llama3_8b.toml", edit)
    entry = _one(job, "--gpus", "8xH100")
    (finding,) = [f for f in entry["findings"] if f["code"] == code]
    assert words in finding["message"] and entry.get("estimate") is None
    assert edit[1].splitlines()[-1] in job.read_text().splitlines()[finding["line"] - 1]


def test_gradient_accumulation_keeps_the_earlier_micro_batches_gradients(tmp_path):
    """global_batch_size 16 over 8 ranks of local batch 1: two micro-batches a step; the second's
    loss has the first's fp32 gradient shards beside it. One micro-batch a step has them too, as
    the reduce-scatter stream's cache: FSDP2 allocated them on that stream and zero_grad returned
    them to its pool, which the compute stream cannot draw on. Reserved, the two peaks are one."""
    one = _one(V022 / "llama3_8b.toml", "--gpus", "8xH100")
    job = _edited(tmp_path, V022 / "llama3_8b.toml", (LOCAL, LOCAL + "global_batch_size = 16\n"))
    two = _one(job, "--gpus", "8xH100")
    shards = 4 * -(-8_030_261_248 // 8)
    first = {c["name"]: c for c in one["estimate"]["components"]}
    second = {c["name"]: c for c in two["estimate"]["components"]}
    assert second["gradient shards (fp32)"]["bytes"] == shards and "reduce-scatter stream's cache" not in second
    assert "gradient shards (fp32)" not in first
    assert first["reduce-scatter stream's cache"]["bytes"] == shards
    assert two["estimate"]["per_gpu_peak_bytes"] == one["estimate"]["per_gpu_peak_bytes"]
    assert two["estimate"]["allocated_peak_bytes"] - one["estimate"]["allocated_peak_bytes"] == shards


def test_cpu_offload_is_host_memory(tmp_path):
    job = _edited(tmp_path, V022 / "llama3_8b.toml", (LOCAL, LOCAL + "enable_cpu_offload = true\n"))
    entry = _one(job, "--gpus", "8xH100")
    assert entry["estimate"]["host_ram_bytes"] == 16 * -(-8_030_261_248 // 8) * 8


def test_plan_weighs_torchtitans_layouts_in_its_keys():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        vramlint_main(["plan", str(V022 / "llama3_8b.toml"), "--gpus", "8xH100"])
    lines = out.getvalue().splitlines()[1:]
    assert lines and all("zero_optimization" not in line and "distributed_type" not in line for line in lines)
    assert any("parallelism.tensor_parallel_degree = 8" in line for line in lines)
    assert any(line.strip().endswith("as written") for line in lines)


TP8 = ("tensor_parallel_degree = 1", "tensor_parallel_degree = 8")
EXAMPLE_70B = Path(__file__).resolve().parent.parent / "examples" / "recipes" / "torchtitan-llama3-70b.toml"


def _parts(entry: dict) -> dict[str, dict]:
    return {c["name"]: c for c in entry["estimate"]["components"]}


def test_under_tp_the_loss_runs_over_the_vocabulary_shard_unless_loss_parallel_is_off(tmp_path):
    """TP 8: the output's Shard(-1) logits in torch's loss_parallel, 16 B a logit of the 16,032
    the rank holds at the start of backward (traced: dev/torchtitan_block.py); with
    disable_loss_parallel the output gathers them (Replicate) and the plain loss's 12 B run over
    the whole 128,256."""
    tokens = 8192
    shard = _parts(_one(_edited(tmp_path, V022 / "llama3_8b.toml", TP8), "--gpus", "8xH100"))
    assert shard["logits and loss (backward)"]["bytes"] == 16 * tokens * 16_032
    off = _edited(tmp_path, V022 / "llama3_8b.toml", TP8,
                  ("[parallelism]\n", "[parallelism]\ndisable_loss_parallel = true\n"))
    whole = _parts(_one(off, "--gpus", "8xH100"))
    assert whole["logits and loss (backward)"]["bytes"] == 12 * tokens * 128_256


def test_fsdp2s_own_streams_keep_their_caches_beside_the_peak(tmp_path):
    """The 8B over FSDP 8: the copy-in stream's peak is the last block's all-gather output held
    while the [norm, output] unit's is made, with that unit's bf16 shard cast; the reduce-scatter
    stream's is the fp32 gradient shards. Under TP 8 on 8 GPUs nothing is sharded by FSDP: neither."""
    parts = _parts(_one(V022 / "llama3_8b.toml", "--gpus", "8xH100"))
    tail, block = 128_256 * 4096 + 4096, 218_112_000
    assert parts["all-gather stream's cache"]["bytes"] == 2 * (block + tail + -(-tail // 8))
    assert parts["reduce-scatter stream's cache"]["bytes"] == 4 * -(-8_030_261_248 // 8)
    tp = _parts(_one(_edited(tmp_path, V022 / "llama3_8b.toml", TP8), "--gpus", "8xH100"))
    assert not {"all-gather stream's cache", "reduce-scatter stream's cache"} & set(tp)


def test_a_2024_file_splits_its_pipeline_into_as_many_micro_batches_as_stages(tmp_path):
    """9dec370's [experimental] pipeline: with no pipeline_parallel_microbatches the local batch
    is split into pipeline_parallel_degree micro-batches (pipelining_utils.py:79-81), where v0.2.2
    makes micro-batches of one row."""
    job = _edited(tmp_path, DEC2024 / "llama3_405b.toml", ("batch_size = 2", "batch_size = 16"),
                  ("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 8"))
    notes = json.dumps(_one(job, "--gpus", "64x8xH100"))
    assert "8 micro-batches of 2 row(s)" in notes
    counted = _edited(tmp_path, job, ("pipeline_parallel_degree = 8",
                                      "pipeline_parallel_degree = 8\npipeline_parallel_microbatches = 16"))
    assert "16 micro-batches of 1 row(s)" in json.dumps(_one(counted, "--gpus", "64x8xH100"))


def test_caches_above_the_card_are_capped_as_pytorch_frees_them_before_it_fails(tmp_path):
    """The 70B job at local batch 10 on 3 nodes: its tensors fit, its streams' caches would not.
    A request that finds no memory makes PyTorch release every cached block and retry, so the peak
    is the card's, and VL204 says so; its hint does not ask for the expandable segments
    torchtitan's launcher already sets."""
    job = _edited(tmp_path, EXAMPLE_70B, ("local_batch_size = 8", "local_batch_size = 10"))
    entry = _one(job, "--gpus", "3x8xH100")
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL204"]
    assert "expandable_segments" not in finding["hint"] and "local_batch_size" in finding["hint"]
    estimate, card = entry["estimate"], 85_029_158_912     # an H100's 79.19 GiB (hardware.py)
    assert estimate["per_gpu_peak_bytes"] == card and estimate["allocated_peak_bytes"] < card
    assert any("capped: the card leaves" in c["formula"] for c in estimate["components"])
