"""Launch scripts (readers/shell.py, readers/launch.py): the jobs real shell and sbatch scripts start,
the GPUs they state and where, and the same job stated in a recipe or on a launch line giving one
answer. The files under tests/data/launch are byte-exact copies from 25 public repositories, laid
out as in their repository (tests/data/launch/SOURCES.tsv names each file's repository, path and
commit), so the config files a script names resolve as they do there."""

from __future__ import annotations

import csv
import os
import re
import hashlib
import json
import subprocess
import sys

import pytest

from conftest import DATA, ROOT
from vramlint.readers.launch import launches, sbatch_options, slurm_variables, stated_gpus
from vramlint.readers.shell import read_script, sbatch_lines

LAUNCH = DATA / "launch"

# For each script, each job it starts, read by hand from the file: (launcher, line, GPUs per node,
# nodes, what states the per-node count, whether vramlint does not read the job yet). None: the
# count is only known when the script runs.
EXPECTED = {
    "OpenRLHF__OpenRLHF/examples/scripts/train_dpo_llama.sh": [("deepspeed", 36, None, 1, None, False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_dpo_llama_34b.sh": [("deepspeed", 32, None, 1, None, False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_nonrl_slurm.sh": [("torchrun", 38, 8, 1, "--nproc_per_node", True)],
    # OpenRLHF's PPO under Ray: the actor's GPUs its flags state, dotted (0.10.2+) or flat (readers/openrlhf_ppo.py)
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_ray_hybrid_engine.sh": [
        ("python", 3, 8, 1, "actor.num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_dapo_ray_hybrid_engine.sh": [
        ("python", 3, 8, 1, "actor.num_gpus_per_node", False)],
    # ``ray job submit ... -- python3 -m openrlhf.cli.train_ppo_ray`` under srun on 2 nodes: the actor's 4 x 1
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_ray_slurm.sh": [
        ("python", 55, 4, 1, "actor.num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray_slurm.sh": [
        ("python", 55, 4, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray.sh": [
        ("python", 3, 2, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray_70b.sh": [
        ("python", 3, 8, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray_hybrid_engine.sh": [
        ("python", 3, 8, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_ppo_llama_ray_hybrid_engine_dynamic_batch.sh": [
        ("python", 3, 8, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_grpo_ray_hybrid_engine.sh": [
        ("python", 3, 8, 1, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_reinforce_llama_ray_hybrid_engine.sh": [
        ("python", 3, 8, 1, "actor_num_gpus_per_node", False)],
    # the flags in bash arrays, a commented-out element among them
    "OpenRLHF__OpenRLHF/examples/scripts/train_reinforce_baseline_hybrid_engine.sh": [
        ("python", 100, 4, 1, "actor_num_gpus_per_node", False)],
    # a fork's own OpenRLHF: its rule reward server (serve_rm, a job not read), then the trainer
    "GAIR-NLP__LIMR/scripts/train_limr.sh": [("python", 4, 1, 1, "a single python process", True),
                                             ("python", 28, 4, 1, "actor_num_gpus_per_node", False)],
    # OpenRLHF's rule verifier (openrlhf.models.remote_rm, no GPU job) is no launch's
    "TideDra__lmm-r1/examples/scripts/lmm_r1/train_fre_text.sh": [
        ("python", 59, 1, 1, "a single python process", False), ("python", 67, 8, 1, "actor_num_gpus_per_node", False)],
    "RUCAIBox__R1-Searcher/scripts/qwen_reinforce_plus_train.sh": [
        ("python", 43, 4, 1, "actor_num_gpus_per_node", False)],
    "lilei199908__OpenRLHF/test.sh": [("python", 16, 8, 2, "actor_num_gpus_per_node", False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_rm.sh": [("deepspeed", 31, None, 1, None, False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_sft.sh": [("deepspeed", 30, None, 1, None, False)],
    "OpenRLHF__OpenRLHF/examples/scripts/train_sft_llama.sh": [("deepspeed", 29, None, 1, None, False)],
    "QwenLM__Qwen/finetune/finetune_ds.sh": [("torchrun", 67, None, 1, None, False)],
    "QwenLM__Qwen/finetune/finetune_lora_ds.sh": [("torchrun", 72, None, 1, None, False)],
    "QwenLM__Qwen/finetune/finetune_qlora_single_gpu.sh": [("python", 41, 1, 1, "a single python process", False)],
    "THUDM__ChatGLM-6B/ptuning/ds_train_finetune.sh": [("deepspeed", 6, 4, 1, "deepspeed --num_gpus", False)],
    "THUDM__ChatGLM-6B/ptuning/train.sh": [("python", 4, 1, 1, "a single python process", False)],
    "allenai__open-instruct/scripts/finetune_qlora_with_accelerate.sh": [
        ("accelerate", 12, 8, 1, "accelerate launch --num_processes", False),
        ("python", 40, 1, 1, "a single python process", False)],
    "allenai__open-instruct/scripts/finetune_with_accelerate.sh": [
        ("accelerate", 13, 4, 1, "accelerate launch --num_processes", False)],
    "allenai__open-instruct/scripts/slurm/sft/train_dolci_instruct.sh": [("torchrun", 72, 8, 1, "--nproc_per_node",
                                                                           True)],
    "bigscience-workshop__bigscience/train/tr11-176B-ml/tr11-176B-ml.slurm": [
        ("torchrun", 173, 8, 24, "--nproc_per_node", True)],
    "chtmp223__suri/ft/sft/run_sft.sh": [("accelerate", 21, 4, 1, "#SBATCH", False)],
    "cmu-flame__FLAME-MoE/scripts/training/flame-moe.sh": [],
    "cmu-flame__FLAME-MoE/scripts/training/modules/flame-moe_step2.sh": [
        ("torchrun", 34, 1, 1, "torchrun's default --nproc_per_node 1", True)],
    "dfy37__lifesim/scripts/run_user_model.sh": [("vllm", 5, 4, 1, "CUDA_VISIBLE_DEVICES", False)],
    "haotian-liu__LLaVA/scripts/v1_5/finetune.sh": [("deepspeed", 3, None, 1, None, False)],
    "haotian-liu__LLaVA/scripts/v1_5/finetune_task_lora.sh": [("deepspeed", 3, None, 1, None, False)],
    "hiyouga__LLaMA-Factory/examples/extras/fsdp_qlora/train.sh": [("accelerate", 4, 2, 1, "CUDA_VISIBLE_DEVICES",
                                                                     False)],
    "hiyouga__LLaMA-Factory/examples/full_multi_gpu/multi_node.sh": [("torchrun", 9, 4, 2, "--nproc_per_node", False)],
    "hiyouga__LLaMA-Factory/examples/train_lora/qwen3_lora_sft.sh": [("llamafactory-cli", 7, None, 1, None, False)],
    "hkust-nlp__deita/examples/train/sft.sh": [("deepspeed", 15, None, 1, None, False)],
    "hmosousa__tradutor/scripts/train/llama3_fft.sh": [("python", 3, 1, 1, "a single python process", False),
                                                       ("tune", 6, 4, 1, "--nproc_per_node", False)],
    "huggingface__alignment-handbook/recipes/launch.slurm": [("trl", 128, 8, 1, "#SBATCH", False),
                                                             ("accelerate", 144, 8, 1, "#SBATCH", False)],
    "huggingface__nanotron/examples/mamba/run_multinode.sh": [("torchrun", 143, 8, 2, "--nproc_per_node", True),
                                                              ("torchrun", 162, 8, 2, "--nproc_per_node", True)],
    "huggingface__open-r1/slurm/train.slurm": [("trl", 133, 8, 1, "#SBATCH", False),
                                               ("accelerate", 150, 8, 1, "#SBATCH", False)],
    "huggingface__picotron/template/base_job.slurm": [("torchrun", 76, None, 1, None, False)],
    "lm-sys__FastChat/scripts/train_lora.sh": [("deepspeed", 1, None, 1, None, False)],
    "lm-sys__FastChat/scripts/train_vicuna_7b.sh": [("torchrun", 1, 4, 1, "--nproc_per_node", False)],
    "offendo__formalize/run_em.sh": [("axolotl", 8, None, 1, None, False)],
    "pytorch__torchtitan/multinode_trainer.slurm": [("torchrun", 63, 8, 4, "--nproc_per_node", False)],
    # COMM_MODE=${COMM_MODE:-""}: the dry-run branch ([ -n "$COMM_MODE" ]) does not run, torchrun's does
    "pytorch__torchtitan/run_train.sh": [("torchrun", 43, 8, 1, "--nproc_per_node", False)],
    "shibing624__MedicalGPT/scripts/run_sft.sh": [("torchrun", 1, 2, 1, "--nproc_per_node", False)],
    "shibing624__MedicalGPT/scripts/vllm_deployment.sh": [("vllm", 19, 2, 1, "CUDA_VISIBLE_DEVICES", False)],
    "simplescaling__s1/train/launch.sh": [],
    "simplescaling__s1/train/sft.sh": [("torchrun", 15, None, 1, None, False)],
    "simplescaling__s1/train/sft_multinode.sh": [("torchrun", 12, None, 1, None, False)],
    "simplescaling__s1/train/sft_slurm.sh": [("torchrun", 42, None, 1, None, False)],
    "stas00__ml-engineering/orchestration/slurm/launchers/accelerate-launcher.slurm": [
        ("accelerate", 46, 8, 2, "accelerate launch --num_processes", False)],
    "stas00__ml-engineering/orchestration/slurm/launchers/torchrun-launcher.slurm": [
        ("torchrun", 42, 8, 2, "--nproc_per_node", False)],
    "uclaml__SPIN/scripts/finetune.sh": [("accelerate", 21, 8, 1, "accelerate launch --num_processes", False)],
    # verl's trainer: the GPUs its overrides state (readers/verl.py)
    "volcengine__verl/examples/grpo_trainer/run_qwen2-7b.sh": [("python", 4, 8, 1, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/slurm/ray_on_slurm.slurm": [("python", 71, 4, 2, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/ppo_trainer/run_gemma.sh": [("python", 3, 2, 1, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/ppo_trainer/run_deepseek7b_llm.sh": [("python", 3, 8, 1, "trainer.n_gpus_per_node",
                                                                     False)],
    "volcengine__verl/examples/grpo_trainer/run_qwen2-7b_seq_balance.sh": [
        ("python", 12, 8, 1, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/ppo_trainer/run_qwen2-7b_sglang_seq_balance.sh": [
        ("python", 11, 8, 1, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/tuning/7b/qwen2-7b_grpo_2_h800_fsdp_vllm.sh": [
        ("python", 11, 2, 1, "trainer.n_gpus_per_node", False)],
    "volcengine__verl/examples/grpo_trainer/run_qwen2_5-3b_gsm8k_grpo_lora.sh": [
        ("python", 3, 2, 1, "trainer.n_gpus_per_node", False)],
    # under ``ray job submit ... --``, its nodes only the run knows ($ARNOLD_WORKER_NUM)
    "hkust-nlp__simpleRL-reason/train_grpo_math_tune_ray.sh": [("python", 167, 8, 1, "trainer.n_gpus_per_node",
                                                               False)],
    "dingxianzhong__play-verl/examples/tuning/qwen2_7b_gsm8k_8gpu_min.sh": [
        ("python", 12, 8, 1, "trainer.n_gpus_per_node", False)],
    "dingxianzhong__play-verl/examples/tuning/qwen2_7b_gsm8k_8gpu_recommended.sh": [
        ("python", 12, 8, 1, "trainer.n_gpus_per_node", False)],
}


def _jobs(relative: str) -> list[tuple]:
    path = LAUNCH / relative
    text = path.read_text(encoding="utf-8", errors="replace")
    options = sbatch_options(sbatch_lines(text))
    script = read_script(text, str(path), known=slurm_variables(options))
    out = []
    for launch in launches(script.commands):
        gpus = stated_gpus(launch, options)
        out.append((launch.launcher, launch.line, gpus.per_node, gpus.nodes, gpus.by if gpus.per_node else None,
                    bool(launch.unread)))
    return out


def _check(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", *argv, "--format", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def test_the_files_are_the_sources_bytes_from_25_repositories():
    """Each file's git object id is the one its repository holds at the recorded commit (checked
    against the repositories when they were copied): the bytes are the source's, CRLF and all."""
    rows = list(csv.DictReader((LAUNCH / "SOURCES.tsv").open(), delimiter="\t"))
    assert len({row["repo"] for row in rows}) >= 25
    for row in rows:
        data = (LAUNCH / row["file"]).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == row["blob"], row["file"]
        assert len(row["commit"]) == 40 and row["url"].endswith(row["path"]), row["file"]


@pytest.mark.parametrize("relative", sorted(EXPECTED))
def test_each_script_states_its_jobs_and_gpus(relative):
    assert _jobs(relative) == EXPECTED[relative]


def test_a_recipe_and_its_launch_line_give_one_answer():
    """LLaMA-Factory's multi_node.sh runs llama3_full_sft.yaml under torchrun on 4 GPUs x 2 nodes;
    SPIN's finetune.sh runs config.yaml under accelerate launch with its ZeRO-3 config on 8: the
    scripts give the peaks of the recipes checked with those GPUs and that launch config."""
    factory = "tests/data/launch/hiyouga__LLaMA-Factory/examples/full_multi_gpu/"
    spin = "tests/data/launch/uclaml__SPIN/"
    pairs = [((factory + "multi_node.sh", "--gpus", "H100"), (factory + "llama3_full_sft.yaml", "--gpus", "2x4xH100")),
             ((spin + "scripts/finetune.sh", "--gpus", "H100"),
              (spin + "configs/config.yaml", "--gpus", "8xH100", "--launch-config", spin + "configs/deepspeed_zero3.yaml"))]
    for script, recipe in pairs:
        launched, alone = _check(*script)["files"][0], _check(*recipe)["files"][0]
        assert launched["status"] == alone["status"] == "estimated"
        assert launched["estimate"]["per_gpu_peak_bytes"] == alone["estimate"]["per_gpu_peak_bytes"]


def test_the_gpus_come_from_the_script_with_their_line():
    run = _check("tests/data/launch/hiyouga__LLaMA-Factory/examples/full_multi_gpu/multi_node.sh", "--gpus", "H100")
    entry = run["files"][0]
    assert "GPUs: 4 per node x 2 node(s), from --nproc_per_node at line 3" in entry["notes"]
    assert entry["gpus"]["from"] == "tests/data/launch/hiyouga__LLaMA-Factory/examples/full_multi_gpu/multi_node.sh:3"
    sky = _check("examples/launch/sky-sft.yaml")["files"][0]["gpus"]
    assert (sky["name"], sky["per_node"], sky["from"]) == ("A100-40GB", 8, "examples/launch/sky-sft.yaml:4")
    flagged = _check("examples/llama8b-zero3-8xh100.json", "--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B",
                     "--seq-len", "4096")["files"][0]["gpus"]
    assert flagged["from"] is None                    # the command line's


def test_a_count_only_the_run_knows_is_named_and_not_guessed():
    """Qwen's finetune_ds.sh counts GPUs with $(python -c 'import torch; ...') at line 12: VL014
    names it there, and with --gpus naming only the type the job is not estimated (VL011)."""
    entry = _check("tests/data/launch/QwenLM__Qwen/finetune/finetune_ds.sh", "--gpus", "H100")["files"][0]
    codes = {(f["code"], f["line"]) for f in entry["findings"]}
    assert {("VL014", 12), ("VL011", 12)} <= codes and entry["status"] == "not estimated"
    counted = _check("tests/data/launch/QwenLM__Qwen/finetune/finetune_ds.sh", "--gpus", "8xH100",
                     "--model", "Qwen/Qwen2.5-7B")["files"][0]
    assert counted["status"] == "estimated" and ("VL014", 12) in {(f["code"], f["line"]) for f in counted["findings"]}


def test_a_job_vramlint_does_not_read_yet_is_not_estimated_never_skipped():
    entry = _check("tests/data/launch/huggingface__nanotron/examples/mamba/run_multinode.sh", "--gpus",
                   "H100")["files"][0]
    assert entry["status"] == "not estimated"
    assert any(f["code"] == "VL011" and f["line"] == 143 and "nanotron" in f["message"] for f in entry["findings"])


def test_a_walk_checks_the_scripts_and_skips_what_launches_nothing(tmp_path):
    (tmp_path / "setup.sh").write_text("pip install -e .\n")
    (tmp_path / "train.sh").write_text("CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node 8 train.py \\\n"
                                       "  --model_name_or_path meta-llama/Llama-3.1-8B --per_device_train_batch_size 1"
                                       " \\\n  --bf16 True --gradient_checkpointing True --deepspeed ds.json\n")
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}')
    run = _check(str(tmp_path), "--gpus", "H100")
    paths = {f["path"].rsplit("/", 1)[-1]: f for f in run["files"]}
    assert "setup.sh" not in paths                            # names no launcher: not walked
    train = paths["train.sh"]
    assert ("VL315", 1) in {(f["code"], f["line"]) for f in train["findings"]}     # 8 processes, 4 visible GPUs


# -- the shell as bash reads it ------------------------------------------------------------------

def _words(text: str) -> list[list[str | None]]:
    return [[w.text for w in command.words] for command in read_script(text).commands]


def test_defaults_exports_arrays_and_arithmetic():
    text = ('export GPUS=${GPUS:-8}\nNODES=2\nARGS=(--nproc_per_node "$GPUS" --nnodes $NODES)\n'
            'torchrun "${ARGS[@]}" train.py --gradient_accumulation_steps $((64 / GPUS / NODES))\n')
    assert _words(text)[-1] == ["torchrun", "--nproc_per_node", "8", "--nnodes", "2", "train.py",
                                "--gradient_accumulation_steps", "4"]


def test_arithmetic_with_spaces_inside_is_computed():
    """verl's examples/tuning scripts (at a31a8f25) write ``$(( nproc_per_gpu * nnodes * ngpu_per_node ))``
    after a comment of non-ASCII marks: bash computes 16; it was left unknown (a leading space)."""
    text = ('nproc_per_gpu=16 # 64\u221a \u2192 128\u00d7\nnnodes=1\nngpu_per_node=1\n'
            'total_procs=$(( nproc_per_gpu * nnodes * ngpu_per_node ))\n'
            'python3 -m verl.trainer.main_ppo data.train_batch_size=${total_procs} x=$((  (total_procs + 2) / 3 ))\n')
    assert _words(text)[-1][-2:] == ["data.train_batch_size=16", "x=6"]


def test_an_unquoted_variable_splits_and_keeps_what_is_known():
    text = 'N=$(nvidia-smi -L | wc -l)\nDIST="--nproc_per_node $N \\\n  --nnodes 1"\ntorchrun $DIST train.py\n'
    (words,) = _words(text)[-1:]
    assert words == ["torchrun", "--nproc_per_node", None, "--nnodes", "1", "train.py"]


def test_a_command_read_from_a_heredoc_is_split_where_each_word_is_written():
    """OpenRLHF's examples keep the command in ``read -r -d '' training_commands <<EOF``: the body
    expanded, backslash-newline joined, each word at its own line and column; a quoted delimiter
    expands nothing; ``read`` without ``-d ''`` takes the first line only."""
    text = ("M=Qwen/Qwen2.5-7B\nread -r -d '' CMD <<EOF\nopenrlhf.cli.train_sft \\\n   --pretrain $M \\\n"
            "   --max_len ${LEN:-4096}\nEOF\ndeepspeed --module $CMD\n"
            "read -r -d '' RAW <<'EOF'\na $M\nEOF\necho $RAW\nread ONE <<EOF\nx y\nz\nEOF\necho $ONE\n")
    commands = read_script(text).commands
    assert [[w.text for w in c.words] for c in commands] == [
        ["deepspeed", "--module", "openrlhf.cli.train_sft", "--pretrain", "Qwen/Qwen2.5-7B", "--max_len", "4096"],
        ["echo", "a", "$M"], ["echo", "x", "y"]]
    placed = {w.text: (w.line, w.column) for w in commands[0].words}
    assert placed["openrlhf.cli.train_sft"] == (3, 1) and placed["--pretrain"] == (4, 4)
    assert placed["--max_len"] == (5, 4) and placed["Qwen/Qwen2.5-7B"] == (1, 3)     # a variable's value: where it is set


def test_a_branch_does_not_replace_what_was_set_before_it():
    text = 'MODEL="Qwen/Qwen-7B"\nwhile [[ "$1" != "" ]]; do\n  case $1 in\n    -m) shift; MODEL=$1 ;;\n  esac\n' \
           '  shift\ndone\npython finetune.py --model_name_or_path $MODEL\n'
    assert _words(text)[-1] == ["python", "finetune.py", "--model_name_or_path", "Qwen/Qwen-7B"]


@pytest.mark.parametrize("test, taken", [
    ('[ "$USE_FSDP" = 1 ]', "fsdp"), ('[[ "$USE_FSDP" == "1" ]]', "fsdp"), ('[ "$USE_FSDP" != 1 ]', "ddp"),
    ('[ -n "$EMPTY" ]', "ddp"), ('[ -z "$EMPTY" ]', "fsdp"), ('[ "$USE_FSDP" -eq 1 ]', "fsdp"),
    ('[[ "$USE_FSDP" == 1 && -z "$EMPTY" ]]', "fsdp"), ('! [ -n "$EMPTY" ]', None),
    ('[ "$UNSET" = 1 ]', None), ('[[ "$MODE" == f* ]]', None), ('[ "$MAYBE" = 1 ]', None),
])
def test_a_branch_whose_test_the_variables_decide_runs_as_bash_runs_it(test, taken):
    """``if [ "$USE_FSDP" = 1 ]; then ARGS=(...); else ...; fi`` after ``USE_FSDP=${USE_FSDP:-1}``:
    the branch bash takes sets the arguments, the other does not (Megatron-LM's FSDP example was read
    without its FSDP flags). A test only the run knows (an unset variable, a pattern, a command, a
    variable a possible branch set) keeps the old rule: the first branch fills what is unset."""
    text = ('USE_FSDP=${USE_FSDP:-1}\nEMPTY=""\nMODE=fsdp\nARGS=(--lr 1)\n'
            'if [ -f cfg ]; then MAYBE=1; fi\n'
            f'if {test}; then\n  ARGS=(--lr 1 --fsdp)\nelse\n  ARGS=(--lr 1 --ddp)\nfi\n'
            'python train.py ${ARGS[@]}\n')
    words = _words(text)[-1]
    assert words[-1] == {"fsdp": "--fsdp", "ddp": "--ddp", None: "1"}[taken]


@pytest.mark.parametrize("scale, taken", [
    ("8B", "4"), ("800M", "1"), ("small", "1"), ("70B-long", "8"), ("13B", None), ("$1", "1"),
])
def test_a_case_whose_word_the_variables_decide_runs_the_item_bash_runs(scale, taken):
    """``case "${MODEL_SCALE}" in "800M") TP=1 ;; "8B") TP=4 ;; ...`` (Megatron-LM's examples/mamba/
    train.sh): the item whose pattern matches runs, the others do not; each was read as a branch that
    may run, so the first item's values stood for every scale (the 8B job priced as the 800M one).
    No match: none runs (the default ``*)`` exits); a word only the run knows: the first fills."""
    text = (f'MODEL_SCALE="{scale}"\ncase "${{MODEL_SCALE}}" in\n  "800M"|small)\n    TP=1\n    ;;\n'
            '  "8B") TP=4 ;;\n  70B*) TP=8 ;;\nesac\npython train.py --tp ${TP:-none}\n')
    assert _words(text)[-1][-1] == (taken or "none")


@pytest.mark.parametrize("text, program", [
    ("$LAUNCHER train.py --lr 1e-5\n", "train.py"),
    ("${LAUNCH_SCRIPT} ${SCRIPT_DIR}/finetune.py --tensor-model-parallel-size ${TP}\n", "finetune.py"),
    ("$PYTHON prepare_data.py --out data\n", None),
    ("$(which python) -c 'print(1)'\n", None),
])
def test_a_training_script_run_by_a_launcher_only_the_run_knows_is_a_job(text, program):
    """``${LAUNCH_SCRIPT} ${SCRIPT_DIR}/finetune.py ...`` (Megatron-LM's modelopt finetune.sh, its
    launcher set in a file it sources): a job whose launcher is unknown (VL011), not a skip; an
    unknown command before a script that does not train stays no job."""
    found = launches(read_script(text).commands)
    if program is None:
        assert found == []
    else:
        (launch,) = found
        assert (launch.launcher, launch.program.text, launch.distributed) == ("?", program, True)
        assert "known only when it runs" in launch.unread


def test_megatrons_modelopt_finetune_script_is_a_job_not_a_skip(tmp_path):
    """Megatron-LM's examples/post_training/modelopt/finetune.sh (core_v0.19.0, byte-exact) was "starts
    no training job: skipped" with exit 0: its launcher, ``${LAUNCH_SCRIPT}``, is set in the
    conf/arguments.sh it sources (``source "${SCRIPT_DIR}/conf/arguments.sh"``). With that file beside
    it the line is torchrun's, read through the sourced file; without it, a job whose launcher only the
    run knows. Both are VL011 at line 86 (the program is modelopt's own finetune.py), never a skip."""
    folder = DATA / "megatron/scripts/NVIDIA__Megatron-LM/examples/post_training/modelopt"
    entry = _check(str(folder / "finetune.sh"), "--gpus", "8x80GB")["files"][0]
    assert entry["status"] == "not estimated" and entry["via"] == "torchrun, line 86"
    alone = tmp_path / "finetune.sh"
    alone.write_bytes((folder / "finetune.sh").read_bytes())
    entry = _check(str(alone), "--gpus", "8x80GB")["files"][0]
    (found,) = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert found["line"] == 86 and "(finetune.py)" in found["message"] and "$LAUNCH_SCRIPT" in found["message"]


def test_a_script_handed_to_one_only_the_run_names_is_a_warning_not_a_silent_skip(tmp_path):
    """``srun ... bash ${1}`` (Megatron-LM's modelopt slurm/sbatch.sh): the job is in a script the
    command line names; VL011 as a warning at its line, where it was skipped without a word."""
    script = tmp_path / "sbatch.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\nsrun -l --mpi=pmix --container-image ${IMAGE} bash ${1}\n")
    entry = _check(str(script), "--gpus", "8xH100")["files"][0]
    (found,) = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert (found["severity"], found["line"]) == ("warning", 3)
    assert "$1, a script only the run names" in found["message"]


@pytest.mark.parametrize("script, job", [("main_ppo_split.py", True), ("run_ppo.py", True), ("support.py", False),
                                         ("mapping.py", False)])
def test_a_python_script_whose_name_says_ppo_is_a_job(tmp_path, script, job):
    """verl's examples/split_placement runs ``python3 main_ppo_split.py`` with Hydra overrides: a PPO
    job (VL011: arguments no recipe vramlint reads), where it was skipped; "support" is no PPO."""
    path = tmp_path / "run.sh"
    path.write_text(f"python3 {script} actor_rollout_ref.model.path=deepseek-ai/deepseek-llm-7b-chat\n")
    entry = _check(str(path), "--gpus", "8xH100")["files"][0]
    assert (entry["status"] != "skipped") == job


@pytest.mark.parametrize("line, launcher", [
    ("NPROC_PER_NODE=8 swift rlhf --rlhf_type grpo --model Qwen/Qwen2.5-7B-Instruct", "swift"),
    ("NPROC_PER_NODE=8 megatron sft --model Qwen/Qwen3-30B-A3B --expert_model_parallel_size 8", "megatron"),
    ("xtuner train internlm2_chat_7b_qlora_oasst1_e3 --deepspeed deepspeed_zero2", "xtuner"),
    ("nemo llm finetune --factory llama3_8b", "nemo"),
    ("composer -n 8 train/train.py yamls/pretrain/mpt-7b.yaml", "composer"),
    ("colossalai run --nproc_per_node 8 train.py --plugin gemini", "colossalai"),
    ("text-generation-launcher --model-id meta-llama/Llama-3.1-8B --num-shard 2", "text-generation-launcher"),
    ("llamafactory-cli api examples/inference/llama3_vllm.yaml", "llamafactory-cli"),
    ("swift build -c release", None), ("composer --version", None), ("text-generation-launcher --help", None),
])
def test_another_frameworks_cli_job_is_not_estimated_never_skipped(line, launcher):
    """ms-swift's ``swift rlhf`` / ``megatron sft`` and the other frameworks' training CLIs: a job
    vramlint does not read yet (VL011), where they were "starts no training job: skipped" with exit
    0; Apple's ``swift build`` is no job (``swift sft`` is read: tests/test_swift.py)."""
    found = launches(read_script(line + "\n").commands)
    if launcher is None:
        assert found == []
    else:
        (launch,) = found
        assert launch.launcher == launcher and launch.distributed and "are not read yet" in launch.unread


@pytest.mark.parametrize("line, per_node, nodes", [
    ("mpirun -np 8 python train.py --lr 1e-5", 8, 1),
    ("mpiexec -n 16 -ppn 8 python pretrain_gpt.py --num-layers 2", 8, 2),
    ("mpirun --allow-run-as-root -np 16 --mca btl tcp,self -x NCCL_DEBUG=INFO --map-by ppr:8:node python train.py",
     8, 2),
    ("mpirun -N 4 --hostfile hosts python -u train.py", 4, 1),
])
def test_a_program_under_an_mpi_launcher_runs_once_a_rank(line, per_node, nodes):
    """``mpirun -np N [-ppn M] python train.py`` (Open MPI, MPICH / Intel MPI's Hydra): the program's
    job on the ranks the launcher states, its two-word options (--mca NAME VALUE) skipped whole, where
    it was "starts no training job: skipped" with exit 0."""
    (launch,) = launches(read_script(line + "\n").commands)
    gpus = stated_gpus(launch, {})
    assert (launch.launcher, launch.distributed, gpus.per_node, gpus.nodes) == ("python", True, per_node, nodes)
    assert launch.program.text.endswith(".py")


@pytest.mark.parametrize("header, per_node", [("#SBATCH --nodes=2\n#SBATCH --gres=gpu:8\n", 8), ("", None)])
def test_a_python_program_under_srun_runs_once_a_task_not_once(header, per_node):
    """``srun python pretrain_gpt.py`` (Megatron-LM's sbatch examples): srun starts it once a task, so
    its processes a node are what the #SBATCH request allocates (or only the run knows: VL014 with
    --gpus), never "a single python process" (it was VL007 against --gpus)."""
    text = f"#!/bin/bash\n{header}srun --container-image img python pretrain_gpt.py --num-layers 2\n"
    options = sbatch_options(sbatch_lines(text))
    (launch,) = launches(read_script(text, known=slurm_variables(options)).commands)
    assert launch.distributed and stated_gpus(launch, options).per_node == per_node


@pytest.mark.parametrize("program, bridge", [("examples/recipes/llama/pretrain_llama3_8b.py", True),
                                             ("scripts/training/run_recipe.py", True),
                                             ("recipes/lora_finetune_distributed.py", False)])
def test_a_megatron_bridge_recipe_script_says_what_is_read_instead(program, bridge):
    """Megatron-Bridge's recipe scripts are a Python recipe function with overrides: VL011 naming
    Bridge and the run_config.yaml it writes (which vramlint reads), not "Megatron (but
    pretrain_gpt.py)"; torchtune's recipes/ are no Bridge script."""
    (launch,) = launches(read_script(f"torchrun --nproc_per_node 8 {program} --config-file c.yaml\n").commands)
    assert ("Megatron-Bridge recipe script" in launch.unread) == bridge


@pytest.mark.parametrize("program, unread", [
    ("examples/mimo/train.py", "Megatron MIMO"), ("-m examples.mimo.pretrain_mimo", "Megatron MIMO"),
    ("-m tools.pretrain_bert", "Megatron (but pretrain_gpt.py"), ("pretrain_hybrid.py --hybrid-layer-pattern M*", ""),
    ("pretrain_hybrid.py --num-layers 8", "pretrain_hybrid.py without --hybrid-layer-pattern"),
])
def test_megatron_programs_other_than_its_gpt_and_hybrid_ones_are_said_not_read(program, unread):
    """Megatron-LM's MIMO trainers take its flags, but train encoders beside the language model on
    rank groups of their own: read as pretrain_gpt.py they priced the language model alone. A module
    (``-m pkg.pretrain_x``) is named by its last part as a script is; pretrain_hybrid.py is read where
    its pattern states the layers."""
    (launch,) = launches(read_script(f"torchrun --nproc_per_node 8 {program} --micro-batch-size 1\n").commands)
    assert launch.unread.startswith(unread) if unread else launch.unread == ""


def test_a_sourced_file_sets_what_the_script_runs_placed_at_its_source_line(tmp_path):
    """``source ./config.sh`` / ``. "${DIR}/conf/env.sh"``: the file's assignments and commands run
    here, as bash runs them, each word placed at the ``source`` line; a file that sources itself is
    read once; a file that is not there is no error, and one outside the repository (a machine's own)
    is not read."""
    (tmp_path / "conf").mkdir()
    (tmp_path / ".git").mkdir()           # the repository the script is in; files outside it are not read
    (tmp_path / "config.sh").write_text("NGPU=4\nLR=2e-5\nsource ./config.sh\n")
    (tmp_path / "conf" / "env.sh").write_text("MODEL=meta-llama/Llama-3.1-8B\n")
    script = tmp_path / "train.sh"
    outside = tmp_path.parent / f"{tmp_path.name}-outside.sh"
    outside.write_text("NGPU=64\n")
    script.write_text('DIR=$(dirname "$0")\nsource ./config.sh\n. "${DIR}/conf/env.sh"\nsource missing.sh\n'
                      f"source {outside}\n"
                      "torchrun --nproc_per_node $NGPU train.py --model_name_or_path $MODEL --learning_rate $LR\n")
    from vramlint.jobs.script import sourced_by
    commands = read_script(script.read_text(), str(script), sourced=sourced_by(str(script))).commands
    (launch,) = launches(commands)
    assert (launch.per_node.text, launch.per_node.line) == ("4", 2)
    values = {key: (value.text, value.line) for key, value, _ in launch.arguments}
    assert values["model_name_or_path"] == ("meta-llama/Llama-3.1-8B", 3) and values["learning_rate"] == ("2e-5", 2)


@pytest.mark.parametrize("mode, status, warned", [("eval", "skipped", True), ("train", "estimated", False)])
def test_a_job_only_in_a_branch_the_defaults_do_not_take_is_said(tmp_path, mode, status, warned):
    """``MODE=${MODE:-eval}; if [ "$MODE" = train ]; then torchrun ...; fi``: with its own default the
    script starts no job, but ``MODE=train ./run.sh`` does; that job is a VL011 warning at its line,
    never a silent pass. Where the branch is taken the job is checked and nothing more is said."""
    script = tmp_path / "run.sh"
    script.write_text(f'MODE=${{MODE:-{mode}}}\nif [ "$MODE" = "train" ]; then\n  torchrun --nproc_per_node 8 train.py '
                      "--model_name_or_path meta-llama/Llama-3.1-8B --per_device_train_batch_size 1\nelse\n"
                      "  echo eval\nfi\n")
    entry = _check(str(script), "--gpus", "8xH100")["files"][0]
    found = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert entry["status"] == status and bool(found) == warned
    if warned:
        assert (found[0]["severity"], found[0]["line"]) == ("warning", 3)


@pytest.mark.parametrize("line, launcher, program", [
    ("docker run --gpus all --rm -v $PWD:/ws -it nvcr.io/nvidia/pytorch:24.05-py3 torchrun --nproc_per_node 8 "
     "train.py", "torchrun", "train.py"),
    ("docker exec -it trainer torchrun --nproc_per_node 8 train.py", "torchrun", "train.py"),
    ("podman run --device nvidia.com/gpu=all --rm img python train.py", "python", "train.py"),
    ("enroot start --rw --mount /data img torchrun --nproc_per_node 8 train.py", "torchrun", "train.py"),
    ("docker run --gpus all --entrypoint python3 img train.py --lr 1e-5", "python", "train.py"),
    ("docker run --runtime nvidia --gpus all -p 8000:8000 --ipc=host vllm/vllm-openai:latest --model "
     "mistralai/Mistral-7B-v0.1", "vllm", "mistralai/Mistral-7B-v0.1"),
    ("docker run -d -p 5432:5432 postgres", None, None),
    ("apptainer exec --nv image.sif torchrun --nproc_per_node 8 train.py", "torchrun", "train.py"),
    ("singularity exec --nv --cleanenv -B /data:/data image.sif python train.py", "python", "train.py"),
    ("docker run --gpus all -e MODEL=m acme/trainer:1", "?", None),
])
def test_a_command_in_a_container_is_the_job(line, launcher, program):
    """``docker run [options] IMAGE command`` / ``docker exec`` / podman / enroot / apptainer: the command
    run in the container is the job (its options' values not taken for the image: ``--rm -v X``,
    apptainer's ``--nv``, which took the image for its value and skipped the job); vLLM's OpenAI image
    with no command is its entrypoint, the server; a GPU run of an image whose entrypoint only the image
    states is a job not read; a database container is no job."""
    found = launches(read_script(line + "\n").commands)
    if launcher is None:
        assert found == []
    else:
        (launch,) = found
        if launcher == "?":               # a GPU run of an image whose entrypoint only the image states
            assert launch.distributed and "the entrypoint of image acme/trainer:1" in launch.unread
            return
        named = launch.program.text if launch.program is not None else \
            next(value.text for key, value, _ in launch.arguments if key == "model")
        assert (launch.launcher, named) == (launcher, program)


def test_bash_c_and_srun_are_read_through():
    text = '#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gres=gpu:8\nCMD="torchrun --nnodes $SLURM_NNODES ' \
           '--nproc_per_node $SLURM_GPUS_ON_NODE train.py"\nsrun --jobid $SLURM_JOB_ID bash -c "$CMD"\n'
    options = sbatch_options(sbatch_lines(text))
    script = read_script(text, known=slurm_variables(options))
    (launch,) = launches(script.commands)
    gpus = stated_gpus(launch, options)
    assert (launch.launcher, gpus.per_node, gpus.nodes, launch.distributed) == ("torchrun", 8, 2, True)


@pytest.mark.parametrize("shell", ["bash -x -c", "bash -lc", "sh -ec", "bash -o pipefail -c"])
def test_a_shells_own_options_before_its_script_string_are_read_as_bash_reads_them(shell):
    """``bash -x -c "$CMD"`` (Megatron-LM's sbatch examples), ``bash -lc``, ``sh -ec``, ``bash -o
    pipefail -c``: the string is the script run, as for a plain ``bash -c``."""
    text = f'CMD="torchrun --nproc_per_node 4 train.py"\nsrun {shell} "$CMD"\n'
    (launch,) = launches(read_script(text).commands)
    assert launch.launcher == "torchrun"


def test_an_array_inside_a_string_is_its_elements_a_space_apart():
    """``CMD="python train.py ${ARGS[@]}"`` holds the elements joined by spaces, as bash's
    assignment does, so the command run from it has one word per argument (they were glued)."""
    text = 'ARGS=(--lr 1e-5 --epochs 2)\nCMD="python train.py ${ARGS[@]} --seed 1"\nbash -c "$CMD"\n'
    assert _words(text)[-1] == ["python", "train.py", "--lr", "1e-5", "--epochs", "2", "--seed", "1"]


@pytest.mark.parametrize("profiler", ["nsys profile -o out --trace=cuda,nvtx -f true", "ncu --set full -o out"])
def test_a_command_under_a_profiler_is_the_job(profiler):
    """``nsys profile [options] torchrun ...`` and ``ncu [options] ...`` run the command after their
    options: the launch is that command's."""
    (launch,) = launches(read_script(f"{profiler} torchrun --nproc_per_node 8 train.py\n").commands)
    assert launch.launcher == "torchrun"


@pytest.mark.parametrize("runner, launcher, program", [
    ("uv run", "torchrun", "train.py"),
    ("uv run --frozen --extra ssm --with wandb", "torchrun", "train.py"),
    ("conda run -n train --no-capture-output", "torchrun", "train.py"),
    ("conda run -p /opt/env -- ", "torchrun", "train.py"),
    ("micromamba run -n train --clean-env", "torchrun", "train.py"),
    ("poetry run -q", "torchrun", "train.py"),
    ("pipenv run", "torchrun", "train.py"),
])
def test_a_command_run_in_an_environment_is_the_job(runner, launcher, program):
    """``uv run [options] CMD`` (Megatron-LM's examples), ``conda run -n ENV [--] CMD``, ``poetry run``:
    the launch is CMD's, with the runner's flags not taken for values (``--frozen torchrun``)."""
    (launch,) = launches(read_script(f"{runner} torchrun --nproc_per_node 8 train.py --lr 1e-5\n").commands)
    assert (launch.launcher, launch.program.text, launch.per_node.text) == (launcher, program, "8")


def test_uv_runs_a_module_as_python_does():
    """``uv run -m torch.distributed.run`` is ``python -m torch.distributed.run`` (uv's --module): torchrun."""
    (launch,) = launches(read_script("uv run --no-sync -m torch.distributed.run --nproc-per-node 4 train.py\n")
                         .commands)
    assert (launch.launcher, launch.program.text, launch.per_node.text) == ("torchrun", "train.py", "4")


def test_megatrons_fsdp_llama3_example_under_uv_run_is_read_not_skipped():
    """Megatron-LM's examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh (core_v0.19.0, byte-exact)
    runs ``$VENV_PREFIX "${PROFILE_CMD[@]}" python -m torch.distributed.run ...`` with VENV_PREFIX "uv
    run" by default. It was "starts no training job: skipped" (exit 0); its job is now read at line 246
    as the Megatron line it is."""
    path = DATA / "megatron/scripts/NVIDIA__Megatron-LM/examples/megatron_fsdp/train_llama3_8b_fsdp_h100_fp8.sh"
    entry = _check(str(path), "--gpus", "8x80GB")["files"][0]
    assert entry["via"] == "torchrun, line 246" and entry["status"] != "skipped"
    assert entry["kind"] == "megatron" and entry["model"].startswith("Megatron GPT: 32 layers, hidden 4096")


def test_an_sbatch_line_with_a_variable_is_a_finding(tmp_path):
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=$NNODES\n#SBATCH --gpus-per-node=8\nsrun torchrun "
                      "--nproc_per_node 8 train.py --model_name_or_path meta-llama/Llama-3.1-8B "
                      "--per_device_train_batch_size 1\n")
    entry = _check(str(script), "--gpus", "H100")["files"][0]
    assert ("VL316", 2) in {(f["code"], f["line"]) for f in entry["findings"]}


# -- cloud task specs (readers/cloud.py) ------------------------------------------------------------

DSTACK = "tests/data/launch/dstackai__dstack/examples/"


@pytest.mark.parametrize("relative, gpus, line, launcher, status", [
    ("distributed-training/trl/fsdp.dstack.yml", "2x8x80GB", 48, "accelerate, line 23", "not estimated"),
    ("distributed-training/axolotl/.dstack.yml", "2x8x80GB", 45, "accelerate, line 31", "not estimated"),
    ("inference/vllm/.dstack.yml", "1x24GB", 26, "vllm, line 11", "estimated"),
    ("llms/llama/vllm/nvidia/.dstack.yml", "2xH200", 23, "vllm, line 12", "estimated"),
    ("llms/deepseek/trl/nvidia/deepseek_v2.dstack.yml", "1x48GB", 64, "python, line 22", "estimated"),
])
def test_a_dstack_task_states_its_gpus_and_its_job_without_gpus_on_the_command_line(relative, gpus, line, launcher,
                                                                                     status):
    (entry,) = _check(DSTACK + relative)["files"]
    assert f"GPUs: {gpus}" in " ".join(entry["notes"]) and f"resources at line {line}" in " ".join(entry["notes"])
    assert (entry["via"], entry["status"]) == (launcher, status)


def test_a_dstack_task_that_runs_files_of_a_cloned_repository_says_they_are_missing():
    """trl's FSDP example runs examples/accelerate_configs/fsdp1.yaml of the trl tree it clones:
    not in this repository, VL304 at the --config_file line (24), not a pass."""
    (entry,) = _check(DSTACK + "distributed-training/trl/fsdp.dstack.yml")["files"]
    assert ("VL304", 24) in {(f["code"], f["line"]) for f in entry["findings"]}


def test_a_skypilot_task_maps_its_variables_and_names_what_it_does_not_read():
    """verl's SkyPilot example: H100:1 on 2 nodes, which the trainer's overrides state too
    (``trainer.n_gpus_per_node=1``, ``trainer.nnodes=$NUM_NODES``, SkyPilot's 2); its 7B actor's fp32
    shards, AdamW states and gradients over 2 GPUs (16 B x P / 2) under the update's activations
    come to the card itself, so the finding is at the micro-batch (line 65)."""
    (entry,) = _check("tests/data/launch/volcengine__verl/examples/skypilot/verl-grpo.yaml")["files"]
    assert "GPUs: 2x1xH100-80GB (79.19 GiB each), from SkyPilot's resources at line 3" in entry["notes"]
    assert "GPUs: 2x1xH100-80GB (79.19 GiB each), from trainer.n_gpus_per_node 1 x trainer.nnodes 2" in entry["notes"]
    assert entry["status"] == "estimated" and ("VL204", 65) in {(f["code"], f["line"]) for f in entry["findings"]}


def test_a_task_with_no_gpu_type_and_a_file_without_gpus_need_gpus():
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", DSTACK + "distributed-training/torchrun/.dstack.yml"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "names no GPU type vramlint knows; give --gpus" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "examples/llama8b-zero3-8xh100.json",
                           "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "--gpus not given" in proc.stderr


def test_a_recipe_and_its_configs_are_the_job_the_script_starts():
    """SPIN's config.yaml alone would be judged under plain DDP (196 GiB on 8 H100: VL201); its
    repository launches it with accelerate launch --config_file configs/deepspeed_zero3.yaml on 8
    GPUs (scripts/finetune.sh), which fits. Walked together, the recipe and the Accelerate config
    say they are checked there; checked alone (a hook that sees only the recipe), each is checked
    through the script; a GPU count on the command line checks the recipe as the command says."""
    spin = "tests/data/launch/uclaml__SPIN/"
    run = _check(spin, "--gpus", "H100")
    by_path = {f["path"]: f for f in run["files"]}
    for name in ("configs/config.yaml", "configs/deepspeed_zero3.yaml"):
        assert by_path[spin + name]["status"] == "skipped"
        assert "not a job of its own: " + spin + "scripts/finetune.sh launch(es) it" in by_path[spin + name]["notes"][0]
    script = by_path[spin + "scripts/finetune.sh"]
    assert script["status"] == "estimated" and script["reads"] == [spin + "configs/config.yaml",
                                                                   spin + "configs/deepspeed_zero3.yaml"]
    (alone,) = _check(spin + "configs/config.yaml", "--gpus", "H100")["files"]
    assert alone["via"] == spin + "scripts/finetune.sh, accelerate, line 21"
    assert alone["estimate"]["per_gpu_peak_bytes"] == script["estimate"]["per_gpu_peak_bytes"]
    (stated,) = _check(spin + "configs/config.yaml", "--gpus", "8xH100")["files"]
    assert stated["via"] is None and any(f["code"] == "VL201" for f in stated["findings"])


# -- Kubernetes manifests (readers/kubernetes.py) ------------------------------------------------

GKE = "tests/data/launch/GoogleCloudPlatform__kubernetes-engine-samples/ai-ml/"


@pytest.mark.parametrize("relative, gpus, model, parallel", [
    ("llm-serving-gemma/vllm/vllm-2-2b-it.yaml", "1xL4", "google/gemma-2-2b-it", "TP 1 x PP 1"),
    ("llm-serving-gemma/vllm/vllm-2-27b-it.yaml", "4xL4", "google/gemma-2-27b-it", "TP 4 x PP 1"),
    ("llm-multihost-gpus/vllm-llama3-405b-A3.yaml", "2x8xH100-80GB", "meta-llama/Meta-Llama-3.1-405B-Instruct",
     "TP 8 x PP 2"),
])
def test_a_manifest_states_its_gpus_by_node_selector_and_limits(relative, gpus, model, parallel):
    """GKE's samples: the accelerator label names the GPU, the nvidia.com/gpu limit the count, a
    LeaderWorkerSet's group size the nodes; the vLLM image's entrypoint with the container's args
    and env ($(MODEL_ID)) is the job. No --gpus needed."""
    (entry,) = _check(GKE + relative)["files"]
    assert entry["status"] == "estimated" and entry["model"] == model
    assert any(note.startswith(f"GPUs: {gpus}") for note in entry["notes"])
    assert entry["via"].startswith("vllm, line") and parallel in json.dumps(entry)


def test_a_multi_document_manifest_is_no_parse_error_and_a_ray_service_is_not_skipped():
    """A Deployment and its Service in one file (---) were VL001 before: they are read; a
    RayService's job (Ray Serve, from Python) is VL011, named, never a pass."""
    (gemma,) = _check(GKE + "llm-serving-gemma/vllm/vllm-2-2b-it.yaml")["files"]
    assert not any(f["code"] == "VL001" for f in gemma["findings"])
    (ray,) = _check("tests/data/launch/ray-project__kuberay/ray-operator/config/samples/ray-service.llm-serve.yaml")[
        "files"]
    assert ray["status"] == "not estimated" and ("VL011", 2) in {(f["code"], f["line"]) for f in ray["findings"]}


def test_a_pytorchjob_counts_its_master_and_workers_as_nodes():
    path = "tests/data/launch/ServiceNow__Fast-LLM/examples/fast-llm.pytorchjob.yaml"
    (entry,) = _check(path, "--gpus", "H100")["files"]
    assert any(note.startswith("GPUs: 4x8xH100-80GB") for note in entry["notes"])
    assert entry["status"] == "not estimated"          # Fast-LLM's own CLI: not read yet, VL011


def test_hints_speak_the_launch_line():
    """A job stated on a launch line is told what to change as a command line, not as a YAML key."""
    (entry,) = _check("examples/launch/train-ddp.sbatch", "--gpus", "H100")["files"]
    (hint,) = [f["hint"] for f in entry["findings"] if f["code"] == "VL201"]
    assert hint.startswith('--fsdp "full_shard auto_wrap" fits at')
    (sky_entry,) = _check("examples/launch/sky-sft.yaml")["files"]
    (sky_hint,) = [f["hint"] for f in sky_entry["findings"] if f["code"] == "VL201"]
    assert "--per_device_train_batch_size 3 fits at" in sky_hint and "per_device_train_batch_size:" not in sky_hint


def test_accelerate_launch_flags_are_the_deepspeed_and_fsdp_settings_they_stand_for(tmp_path):
    """``accelerate launch --use_deepspeed --zero_stage 3`` is the ZeRO-3 job a DeepSpeed file of
    "auto" values states (one peak for both); ``--use_fsdp`` is FSDP FULL_SHARD; without either,
    plain DDP, which does not fit."""
    args = ("train.py --model_name_or_path meta-llama/Llama-3.1-8B --per_device_train_batch_size 4 "
            "--max_length 4096 --gradient_checkpointing True")
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto", '
                                      '"gradient_accumulation_steps": "auto", "bf16": {"enabled": "auto"}, '
                                      '"fp16": {"enabled": "auto"}}')
    scripts = {"flags.sh": f"accelerate launch --use_deepspeed --zero_stage 3 --num_processes 8 "
                           f"--mixed_precision bf16 {args}\n",
               "file.sh": f"torchrun --nproc_per_node 8 {args} --bf16 True --deepspeed ds.json\n",
               "fsdp.sh": f"accelerate launch --use_fsdp --num_processes 8 --mixed_precision bf16 {args}\n",
               "ddp.sh": f"accelerate launch --num_processes 8 --mixed_precision bf16 {args}\n"}
    peaks = {}
    for name, text in scripts.items():
        (tmp_path / name).write_text(text)
        (entry,) = _check(str(tmp_path / name), "--gpus", "H100")["files"]
        peaks[name] = entry["estimate"]["per_gpu_peak_bytes"]
    assert peaks["flags.sh"] == peaks["file.sh"]
    assert peaks["fsdp.sh"] < 80e9 < peaks["ddp.sh"]


def test_the_real_pre_commit_hook_takes_launch_scripts(tmp_path_factory):
    """The hook as published (.pre-commit-hooks.yaml), run by the real pre-commit: a script that
    starts more processes than visible GPUs fails at its line; one that launches nothing passes."""
    import subprocess

    from test_precommit import _git_repo, try_repo
    repo, env = _git_repo(tmp_path_factory, "launch-repo")
    (repo / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "H100"\n')
    (repo / "train.sh").write_bytes((ROOT / "examples" / "launch" / "gpus-contradict.sh").read_bytes())
    (repo / "setup.sh").write_text("pip install -r requirements.txt\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    proc = try_repo((repo, env), "train.sh", "setup.sh")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "train.sh:4:27  VL315 error" in proc.stdout
    assert try_repo((repo, env), "setup.sh").returncode == 0


def test_a_gpu_count_or_type_the_command_line_puts_over_a_files_is_a_finding(tmp_path):
    """--gpus 8xH100 over a launch of 4 processes: the estimate is for 8, and VL007 says so at the
    --nproc_per_node line; the same count from the settings yields to the launch's (the file
    states its job). --gpus H100 over a SkyPilot task's A100:8 is VL007 at its accelerators."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 4 train.py --model_name_or_path meta-llama/Llama-3.2-1B "
                      "--per_device_train_batch_size 2 --max_length 2048\n")
    (entry,) = _check(str(script), "--gpus", "8xH100")["files"]
    assert entry["gpus"]["per_node"] == 8 and ("VL007", 1) in {(f["code"], f["line"]) for f in entry["findings"]}
    (tmp_path / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\n')
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "train.sh", "--format", "json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    (settled,) = json.loads(proc.stdout)["files"]
    assert settled["gpus"]["per_node"] == 4 and not any(f["code"] == "VL007" for f in settled["findings"])
    (sky,) = _check("examples/launch/sky-sft.yaml", "--gpus", "H100")["files"]
    assert sky["gpus"]["name"] == "H100-80GB" and ("VL007", 4) in {(f["code"], f["line"]) for f in sky["findings"]}


def test_a_task_past_any_machine_is_a_usage_error_not_a_clamped_count(tmp_path):
    task = tmp_path / "sky.yaml"
    task.write_text("resources:\n  accelerators: H100:4096\nrun: |\n  torchrun --nproc_per_node 8 train.py\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(task)], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 2 and "at most 1024 GPUs a node" in proc.stderr


def test_a_script_that_hands_its_job_to_another_is_checked_through_it():
    """s1's launch.sh runs `srun ... ./train/sft_slurm.sh`: checked alone, the job of sft_slurm.sh
    is checked as launch.sh's (its GPU count is the run's to know: VL011), never a pass; walked
    with sft_slurm.sh, launch.sh says the job is checked in this run."""
    s1 = "tests/data/launch/simplescaling__s1/train/"
    (alone,) = _check(s1 + "launch.sh", "--gpus", "H100")["files"]
    assert alone["status"] == "not estimated" and alone["via"].startswith(f"handed by {s1}launch.sh")
    walked = {f["path"]: f for f in _check(s1, "--gpus", "H100")["files"]}
    assert walked[s1 + "launch.sh"]["status"] == "skipped"
    assert "checked in this run" in walked[s1 + "launch.sh"]["notes"][0]


def test_a_recipe_that_many_scripts_run_is_checked_through_the_first_and_names_the_rest(tmp_path):
    """A sweep: six copies of SPIN's finetune.sh run the same recipe. Checked alone, the recipe is
    checked through the first four scripts (each a full check) and the first result names the two
    left, rather than dropping them without a word."""
    from vramlint.jobs.launched import MOST_SCRIPTS
    spin = LAUNCH / "uclaml__SPIN"
    (tmp_path / "configs").mkdir()
    (tmp_path / "scripts").mkdir()
    for name in ("config.yaml", "deepspeed_zero3.yaml"):
        (tmp_path / "configs" / name).write_bytes((spin / "configs" / name).read_bytes())
    for i in range(MOST_SCRIPTS + 2):
        (tmp_path / "scripts" / f"sweep_{i}.sh").write_bytes((spin / "scripts" / "finetune.sh").read_bytes())
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", "configs/config.yaml", "--gpus", "H100",
                           "--format", "json"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    files = json.loads(proc.stdout)["files"]
    assert [f["via"].split(",")[0] for f in files] == [f"scripts/sweep_{i}.sh" for i in range(MOST_SCRIPTS)]
    assert "6 scripts launch it: checked through the first 4; scripts/sweep_4.sh, scripts/sweep_5.sh not" in \
        " ".join(files[0]["notes"])


# -- TRL's command line (TRL 1.16 cli/: `trl <trainer>` is accelerate launch of trl/scripts/<trainer>.py) --

TRL_DPO_RECIPE = """model_name_or_path: Qwen/Qwen2.5-7B
dataset_name: trl-lib/ultrafeedback_binarized
per_device_train_batch_size: 2
max_length: 2048
output_dir: out
"""
SFT_ARGUMENTS = ("--model_name_or_path Qwen/Qwen2.5-7B --dataset_name trl-lib/Capybara --per_device_train_batch_size 4 "
                 "--max_length 4096 --output_dir out")


def _files(folder, **scripts) -> dict:
    for name, text in scripts.items():
        (folder / name).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", *sorted(n for n in scripts if n.endswith(".sh")),
                           "--gpus", "H100", "--format", "json"], cwd=folder, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return {f["path"]: f for f in json.loads(proc.stdout)["files"]}


def test_trl_cli_and_its_script_under_accelerate_give_one_answer(tmp_path):
    """`trl dpo --config dpo.yaml --num_processes 4 --use_deepspeed --zero_stage 2` is accelerate
    launch of TRL's dpo.py with the same options (TRL docs, "Command Line Interfaces"): one job, one
    answer. The trainer the command names is the stage: DPO's frozen reference copy is priced,
    which the recipe alone (no DPO field in it) would read as SFT. `--accelerate_config zero3` is
    TRL's own shipped file (8 processes, ZeRO-3), read from its copy."""
    shipped = ROOT / "vramlint" / "data" / "shipped" / "trl" / "trl" / "accelerate_configs" / "zero3.yaml"
    files = _files(tmp_path, **{
        "dpo.yaml": TRL_DPO_RECIPE,
        "zero3.yaml": shipped.read_text(),
        "dpo.sh": "trl dpo --config dpo.yaml --num_processes 4 --use_deepspeed --zero_stage 2\n",
        "dpo_accelerate.sh": "accelerate launch --num_processes 4 --use_deepspeed --zero_stage 2 trl/scripts/dpo.py "
                             "--config dpo.yaml\n",
        "sft.sh": f"trl sft {SFT_ARGUMENTS} --accelerate_config zero3\n",
        "sft_accelerate.sh": f"accelerate launch --config_file zero3.yaml trl/scripts/sft.py {SFT_ARGUMENTS}\n"})
    peak = {name: f["estimate"]["per_gpu_peak_bytes"] for name, f in files.items()}
    assert peak["dpo.sh"] == peak["dpo_accelerate.sh"] and peak["sft.sh"] == peak["sft_accelerate.sh"]
    dpo = files["dpo.sh"]
    assert dpo["gpus"]["per_node"] == 4 and dpo["reads"] == ["dpo.yaml"]
    assert "reference model (frozen copy)" in [c["name"] for c in dpo["estimate"]["components"]]
    sft = files["sft.sh"]
    assert sft["reads"] == ["trl:trl/accelerate_configs/zero3.yaml"] and sft["gpus"]["per_node"] == 8
    assert sft["plan"]["zero_stage"] == 3
    (alone,) = _check_in(tmp_path, "dpo.yaml", "--gpus", "4xH100")
    assert "TRL recipe, stage sft" in alone["estimate"]["assumptions"]
    assert "TRL recipe, stage dpo (named by the launch at dpo.sh:1:5)" in dpo["estimate"]["assumptions"]
    assert "reference model (frozen copy)" not in [c["name"] for c in alone["estimate"]["components"]]


def _check_in(folder, *argv: str) -> list:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", *argv, "--format", "json"], cwd=folder,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)["files"]


def test_trls_shipped_accelerate_configs_are_the_wheels_bytes():
    """The copies of trl 1.16.0's accelerate_configs are the wheel's bytes (SOURCES.tsv: git blob)."""
    shipped = ROOT / "vramlint" / "data" / "shipped"
    rows = [line.split("\t") for line in (shipped / "SOURCES.tsv").read_text().splitlines()[1:]]
    trl = [row for row in rows if row[0].startswith("trl/")]
    assert len(trl) == 7
    for local, _, _, _, note in trl:
        data = (shipped / local).read_bytes()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        assert note.endswith(f"git blob {blob}"), local


# -- GitHub Actions workflows (readers/github_actions.py) ------------------------------------------

GPU_WORKFLOW = """name: gpu
on:
  workflow_dispatch:
env:
  MODEL: Qwen/Qwen2.5-7B
jobs:
  train:
    runs-on: [self-hosted, gpu]
    strategy:
      matrix:
        gpus: [2, 4]
    steps:
      - uses: actions/checkout@v4
      - name: train
        run: |
          torchrun --nproc_per_node ${{ matrix.gpus }} train.py \\
            --model_name_or_path $MODEL --per_device_train_batch_size 2 \\
            --max_length 2048 --bf16 --output_dir out
      - name: serve
        run: vllm serve Qwen/Qwen2.5-7B --tensor-parallel-size 2
"""
CI_WORKFLOW = """name: tests
on: [push]
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - run: pip install -e .
      - run: pytest tests/
"""


def test_a_workflows_run_steps_are_its_jobs_and_an_expression_is_a_value_only_the_run_knows(tmp_path):
    """A workflow's `run:` steps are read as a script with the workflow's `env`; `${{ matrix.gpus }}`
    is named where it is written (VL014) and `--gpus 2xH100` fills it; a CI workflow that launches
    nothing is skipped without --gpus, exit 0."""
    (tmp_path / "gpu.yml").write_text(GPU_WORKFLOW)
    (tmp_path / "ci.yml").write_text(CI_WORKFLOW)
    (ci,) = _check_in(tmp_path, "ci.yml")
    assert ci["kind"] == "github-actions" and ci["status"] == "skipped"
    untyped = subprocess.run([sys.executable, "-m", "vramlint", "check", "gpu.yml"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert untyped.returncode == 2 and "GitHub Actions names no GPU type" in untyped.stderr
    train, serve = _check_in(tmp_path, "gpu.yml", "--gpus", "2xH100")
    unknown = next(f for f in train["findings"] if f["code"] == "VL014")
    assert (unknown["line"], unknown["column"]) == (16, 37) and "${{ matrix.gpus }}" in unknown["message"]
    assert train["status"] == "estimated" and train["model"] == "Qwen/Qwen2.5-7B" and train["gpus"]["per_node"] == 2
    assert serve["status"] == "estimated" and serve["via"] == "vllm, line 20"


# Real workflows (byte-exact, SOURCES.tsv): each job its run: steps start, read by hand from the
# file, as (via, status, the codes of its findings). --gpus H100 names the type (no workflow does).
WORKFLOWS = {
    "vllm-project__production-stack/.github/workflows/router-e2e-test.yml": [
        (None, "skipped", ["VL011"] * 3), (None, "skipped", ["VL011"]),    # run steps' scripts it does not carry
        ("vllm, line 182", "not estimated", ["VL005"]), ("vllm, line 183", "not estimated", ["VL005"])],
    "deepspeedai__DeepSpeed/.github/workflows/xpu-compile.yml": [
        ("deepspeed, line 57", "not estimated", ["VL011"]), ("deepspeed, line 61", "not estimated", ["VL011"])],
    "InternLM__InternEvo/.github/workflows/pr_before_merge.yaml": [("python, line 29", "not estimated", ["VL011"])],
    "karpathy__llm.c/.github/workflows/ci_gpu.yml": [("python, line 31", "not estimated", ["VL011"]),
                                                     (None, "skipped", [])],
}


@pytest.mark.parametrize("relative", sorted(WORKFLOWS))
def test_a_real_workflows_jobs_are_read_from_its_run_steps(relative):
    """production-stack's e2e job serves facebook/opt-125m on GPU 0 and GPU 1 (CUDA_VISIBLE_DEVICES=0 /
    =1: one GPU each; the model is not resolvable offline, VL005), its other two jobs launch nothing; DeepSpeed's XPU job and InternEvo's
    srun'd trainer run programs vramlint does not read (VL011, never skipped); llm.c's first job runs
    `python train_gpt2.py`, a training program with no recipe's arguments (VL011, not a skip), its
    second only builds and tests."""
    files = _check(f"tests/data/launch/{relative}", "--gpus", "H100")["files"]
    assert [(f["via"], f["status"], [x["code"] for x in f["findings"]]) for f in files] == WORKFLOWS[relative]
    if relative.startswith("vllm-project"):
        assert [(f["gpus"]["per_node"], f["gpus"]["from"].rsplit(":", 1)[1]) for f in files if f["via"]] == [
            (1, "182"), (1, "183")]


def test_pippys_workflow_states_four_processes_per_job():
    """PiPPy's model tests run `torchrun --nproc-per-node 4 examples/...py` per step (lines 49-87,
    four of them commented out): each is a job, on 4 GPUs, of a program vramlint does not read."""
    files = _check("tests/data/launch/pytorch__PiPPy/.github/workflows/model_tests.yaml", "--gpus", "H100")["files"]
    assert [int(f["via"].rsplit(" ", 1)[1]) for f in files] == [49, 51, 53, 55, 57, 59, 63, 65, 67, 69, 71, 73, 75,
                                                                  77, 85, 87]
    assert all(f["status"] == "not estimated" for f in files)
    from vramlint.readers.cloud import read_tasks
    from vramlint.documents import parse
    from vramlint.readers.launch import launches, stated_gpus
    path = LAUNCH / "pytorch__PiPPy/.github/workflows/model_tests.yaml"
    (task,) = [t for t in read_tasks("github-actions", parse(path.read_text(), str(path))) if t.scripts]
    found = [launch for s in task.scripts for launch in launches(read_script(s.text, known=task.variables,
                                                                             line0=s.line0).commands)]
    assert {stated_gpus(launch, {}).per_node for launch in found} == {4} and len(found) == 16


def test_the_deepspeed_launchers_options_that_take_a_value_are_not_flags():
    """deepspeed 0.19.8's ``--enable_each_rank_log DIR`` takes a value (runner.py: type=str): the
    program is train.py, not the log folder, and the options after it are still the launcher's."""
    (command,) = read_script("deepspeed --enable_each_rank_log logs --num_gpus 4 train.py --deepspeed ds.json\n").commands
    (launch,) = launches([command])
    assert launch.program.text == "train.py" and stated_gpus(launch, {}).per_node == 4


# -- OpenRLHF's trainers (readers/openrlhf.py) ------------------------------------------------------

OPENRLHF = "tests/data/launch/OpenRLHF__OpenRLHF/examples/scripts/"
DOTTED_SFT = ("--model.model_name_or_path meta-llama/Meta-Llama-3-8B --train.micro_batch_size 4 --data.max_len 4096 "
              "--ds.zero_stage 3 --model.gradient_checkpointing_enable --ds.packing_samples")
FLAT_SFT = ("--pretrain meta-llama/Meta-Llama-3-8B --micro_train_batch_size 4 --max_len 4096 --zero_stage 3 "
            "--gradient_checkpointing --packing_samples --bf16 --flash_attn")


def test_openrlhfs_flags_in_either_spelling_and_under_either_launcher_give_one_answer(tmp_path):
    """OpenRLHF renamed its flags in 0.10.2 (``--micro_train_batch_size`` -> ``--train.micro_batch_size``):
    the same SFT job written in the old and the new spelling, under ``deepspeed --module`` or
    ``torchrun -m``, is one job with one peak; its DeepSpeed config is the one OpenRLHF builds."""
    files = _files(tmp_path, **{
        "dotted.sh": f"deepspeed --num_gpus 8 --module openrlhf.cli.train_sft {DOTTED_SFT}\n",
        "flat.sh": f"deepspeed --num_gpus 8 --module openrlhf.cli.train_sft {FLAT_SFT}\n",
        "torchrun.sh": f"torchrun --nproc_per_node 8 -m openrlhf.cli.train_sft {DOTTED_SFT}\n"})
    peaks = {name: f["estimate"]["per_gpu_peak_bytes"] for name, f in files.items()}
    assert len(set(peaks.values())) == 1, peaks
    dotted, flat = files["dotted.sh"], files["flat.sh"]
    assert dotted["kind"] == flat["kind"] == "openrlhf"
    plan = dotted["plan"]
    assert (plan["zero_stage"], plan["micro_batch"], plan["seq_len"], plan["grad_checkpointing"],
            plan["offload_param"]) == (3, 4, 4096, True, "none")
    assert plan["origins"]["micro_batch"] == "dotted.sh:1:110"
    assert flat["plan"]["origins"]["micro_batch"] == "flat.sh:1:94"
    assert "OpenRLHF 0.11.2 recipe, stage sft" in dotted["estimate"]["assumptions"]
    assert "OpenRLHF 0.10.1 recipe, stage sft" in flat["estimate"]["assumptions"]
    assert any("OpenRLHF fp32 logits" in note for note in dotted["estimate"]["assumptions"])


def test_openrlhfs_own_example_scripts_are_their_jobs():
    """OpenRLHF's example scripts at three releases: the SFT of 0.11 (dotted flags), the SFT of the
    ``--bf16 --flash_attn`` era and its 34B DPO (a separate frozen reference, ZeRO-3 sharded; Adam on
    the host), and the reward model (a scalar head: no vocabulary logits), each setting where the
    heredoc writes it."""
    sft = _check(OPENRLHF + "train_sft.sh", "--gpus", "8xH100")["files"][0]
    assert sft["status"] == "estimated" and sft["model"] == "meta-llama/Meta-Llama-3-8B"
    assert (sft["plan"]["micro_batch"], sft["plan"]["seq_len"], sft["plan"]["zero_stage"]) == (2, 2048, 2)
    assert sft["plan"]["origins"]["micro_batch"].endswith("train_sft.sh:10:4")
    old = _check(OPENRLHF + "train_sft_llama.sh", "--gpus", "8xH100")["files"][0]
    assert old["precision"] == "bf16" and old["plan"]["origins"]["micro_batch"].endswith("train_sft_llama.sh:10:4")
    # the same job in the spelling of two releases (packing pads nothing past the cap that is priced)
    assert old["estimate"]["per_gpu_peak_bytes"] == sft["estimate"]["per_gpu_peak_bytes"]
    dpo, rm = _check(OPENRLHF + "train_dpo_llama_34b.sh", OPENRLHF + "train_rm.sh", "--gpus", "8xH100", "--model",
                     "meta-llama/Meta-Llama-3-8B")["files"]
    names = [c["name"] for c in dpo["estimate"]["components"]]
    assert "reference model (frozen copy)" in names and dpo["plan"]["offload_optimizer"] == "cpu"
    reference = next(c for c in dpo["estimate"]["components"] if c["name"] == "reference model (frozen copy)")
    assert reference["formula"] == "2 B x P / 8"
    assert any(note == "OpenRLHF 0.10.1 recipe, stage dpo" for note in
               dpo["estimate"]["assumptions"])
    assert rm["plan"]["seq_len"] == 8192 and rm["plan"]["micro_batch"] == 1
    assert not any("logits" in c["name"] for c in rm["estimate"]["components"])


def test_an_openrlhf_job_that_does_not_fit_is_told_in_its_flags_and_never_a_parameter_offload(tmp_path):
    """OpenRLHF offloads no trained parameters (its DeepSpeed config has ``offload=False``): the hint
    speaks the job's own flags and stops at Adam's offload."""
    files = _files(tmp_path, **{
        "big.sh": "deepspeed --num_gpus 2 --module openrlhf.cli.train_sft --pretrain meta-llama/Meta-Llama-3-8B "
                  "--micro_train_batch_size 8 --max_len 4096 --bf16\n",
        "huge.sh": "deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --model.model_name_or_path "
                   "meta-llama/Meta-Llama-3-70B --train.micro_batch_size 1 --ds.zero_stage 3\n"})
    (hint,) = [f["hint"] for f in files["big.sh"]["findings"] if f["code"] == "VL201"]
    assert "--zero_stage 3" in hint and "--micro_train_batch_size" in hint and "offload_param" not in hint
    (huge,) = [f["hint"] for f in files["huge.sh"]["findings"] if f["code"] == "VL201"]
    assert huge.startswith("--model.gradient_checkpointing_enable + --ds.adam_offload fits at")
    assert "offload_param" not in huge


def test_a_smaller_micro_batch_is_hinted_only_where_deepspeed_accepts_it(tmp_path):
    """OpenRLHF fixes DeepSpeed's train_batch_size (--train_batch_size 128 over 2 GPUs), which DeepSpeed
    holds to micro-batch x accumulation x GPUs: the hint's micro-batch divides 64 per GPU (4, where 7
    would fit and be refused at start-up)."""
    files = _files(tmp_path, **{
        "big.sh": "deepspeed --num_gpus 2 --module openrlhf.cli.train_sft --pretrain meta-llama/Meta-Llama-3-8B "
                  "--micro_train_batch_size 8 --train_batch_size 128 --max_len 4096 --bf16\n"})
    (hint,) = [f["hint"] for f in files["big.sh"]["findings"] if f["code"] == "VL201"]
    micro = int(re.search(r"--micro_train_batch_size (\d+)", hint).group(1))
    assert micro == 4 and 128 % (micro * 2) == 0


def test_deepspeeds_own_accumulation_is_priced_where_the_file_fixes_the_global_batch():
    """OpenRLHF's train_sft.sh: --train.batch_size 256 at micro-batch 2 on 8 GPUs, so DeepSpeed
    accumulates 256 // 2 // 8 = 16 micro-batches (runtime/config.py), located at the flag."""
    entry = _check(OPENRLHF + "train_sft.sh", "--gpus", "8xH100")["files"][0]
    assert entry["plan"]["grad_accum"] == 16
    assert entry["plan"]["origins"]["grad_accum"].endswith("train_sft.sh:9:4")


def test_openrlhfs_default_micro_batch_is_what_its_deepspeed_config_gets(tmp_path):
    """Without --train.micro_batch_size OpenRLHF still sets train_micro_batch_size_per_gpu (its
    default 8, 1 for train_rm): DeepSpeed then accumulates 128 // 8 // 8 = 2, it does not spread the
    global batch of 128 into micro-batches of 16."""
    files = _files(tmp_path, **{
        "sft.sh": "deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --model.model_name_or_path "
                  "meta-llama/Meta-Llama-3-8B --ds.zero_stage 3 --model.gradient_checkpointing_enable\n",
        "rm.sh": "deepspeed --num_gpus 8 --module openrlhf.cli.train_rm --model.model_name_or_path "
                 "meta-llama/Meta-Llama-3-8B --ds.zero_stage 3 --model.gradient_checkpointing_enable\n"})
    assert (files["sft.sh"]["plan"]["micro_batch"], files["sft.sh"]["plan"]["grad_accum"]) == (8, 2)
    assert (files["rm.sh"]["plan"]["micro_batch"], files["rm.sh"]["plan"]["grad_accum"]) == (1, 16)


def test_a_flag_openrlhf_does_not_define_is_its_argparse_refusal(tmp_path):
    """A typo (--train.micro_batchsize) is not read as the default micro-batch in silence: OpenRLHF's
    argparse refuses it ("unrecognized arguments", the flags per release in data/openrlhf_flags.json
    from the wheels); an unambiguous prefix (--train.micro 4) is argparse's abbreviation, accepted."""
    files = _files(tmp_path, **{
        "typo.sh": "deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --model.model_name_or_path "
                   "meta-llama/Meta-Llama-3-8B --train.micro_batchsize 4 --ds.zero_stage 3\n",
        "abbrev.sh": "deepspeed --num_gpus 8 --module openrlhf.cli.train_sft --model.model_name_or_path "
                     "meta-llama/Meta-Llama-3-8B --train.micro 4 --ds.zero_stage 3\n"})
    (refused,) = [f for f in files["typo.sh"]["findings"] if f["code"] == "VL313"]
    assert refused["message"] == ("OpenRLHF 0.11.2 refuses to start: train_sft.py: error: unrecognized arguments: "
                                  "--train.micro_batchsize 4")
    assert refused["hint"].endswith("(did you mean --train.micro_batch_size?)") and refused["column"] == 110
    assert not [f for f in files["abbrev.sh"]["findings"] if f["code"] == "VL313"]
    assert files["abbrev.sh"]["plan"]["micro_batch"] == 4        # read as argparse reads it, not the default 8


def test_the_rl_reports_benchmark_rows_are_launches_it_reads():
    """tests/data/published/rl_reports.jsonl (benchmarks/rl_reports.py): each report has its
    source, outcome and GPU, and each command that starts python is one OpenRLHF PPO or verl
    launch as the shell reader reads it (a row that hands its job to a script it does not carry
    is checked as not estimated by the benchmark)."""
    from vramlint.readers.launch import launches
    rows = [json.loads(line) for line in (DATA / "published" / "rl_reports.jsonl").open(encoding="utf-8")]
    assert len({row["id"] for row in rows}) == len(rows) >= 30
    for row in rows:
        assert row["source"].startswith("https://") and row["outcome"] in ("fits", "oom") and row["gpu"]
        found = launches(read_script(row["command"]).commands)
        if "python" in row["command"]:
            assert [(launch.reads_as, launch.trainer.text if launch.trainer else None) for launch in found] in \
                ([("openrlhf", "ppo")], [("verl", None)]), row["id"]


def test_a_script_that_hands_its_work_to_one_not_here_says_so(tmp_path):
    """simpleRL-Zoo's README runs ``bash train_grpo_math_tune_ray.sh --model_name ...``: checked
    without that script, a warning at the line says the job it may start is not checked (it was
    skipped in silence); not an error, for a handed script may be a clean-up step."""
    script = tmp_path / "run.sh"
    script.write_text("bash train_grpo_math_tune_ray.sh --model_name Qwen-2.5-7B --max_response_length 8192\n")
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", str(script), "--gpus", "H100", "--format",
                           "json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    (entry,) = json.loads(proc.stdout)["files"]
    assert proc.returncode == 0 and entry["status"] == "skipped"
    assert [(f["code"], f["severity"], f["line"]) for f in entry["findings"]] == [("VL011", "warning", 1)]
    assert "train_grpo_math_tune_ray.sh" in entry["findings"][0]["message"]


def test_trl_vllm_serve_is_the_vllm_serve_line_it_runs(tmp_path):
    """TRL GRPO's server mode: ``trl vllm-serve`` (TRL 1.16 ``build_command``; ``python -m
    trl.scripts.vllm_serve`` is the same program) runs ``vllm serve``
    with its arguments and TRL's own gpu_memory_utilization 0.9 (not vLLM's release default): one
    job, one answer, whichever line states it. The trainer beside it holds no engine."""
    trl = tmp_path / "trl.sh"
    trl.write_text("CUDA_VISIBLE_DEVICES=7 trl vllm-serve --model Qwen/Qwen2.5-7B --tensor_parallel_size 1 "
                   "--max_model_len 4096 --log_level warning &\n"
                   "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6 accelerate launch --num_processes 7 train_grpo.py "
                   "--model_name_or_path Qwen/Qwen2.5-7B --use_vllm --vllm_mode server "
                   "--per_device_train_batch_size 4 --bf16\n")
    vllm = tmp_path / "vllm.sh"
    vllm.write_text("CUDA_VISIBLE_DEVICES=7 vllm serve Qwen/Qwen2.5-7B --tensor-parallel-size 1 --max-model-len 4096 "
                    "--gpu-memory-utilization 0.9\n")
    module = tmp_path / "module.sh"
    module.write_text("python -m trl.scripts.vllm_serve --model Qwen/Qwen2.5-7B --max_model_len 4096 &\n")
    server, trainer = _check(str(trl), "--gpus", "H100", "--vllm-version", "0.29.0")["files"]
    (same,) = _check(str(vllm), "--gpus", "H100", "--vllm-version", "0.29.0")["files"]
    (run,) = _check(str(module), "--gpus", "H100", "--vllm-version", "0.29.0")["files"]
    assert run["serving"]["kv_cache_bytes"] == same["serving"]["kv_cache_bytes"]
    assert server["via"] == "trl, line 1" and server["serving"]["gpu_memory_utilization"] == 0.9
    assert server["serving"]["kv_cache_bytes"] == same["serving"]["kv_cache_bytes"] > 0
    assert not [f for f in server["findings"] if f["severity"] == "error" or f["code"] == "VL101"]
    assert trainer["status"] == "estimated"
    assert not any(c["name"].startswith("vLLM") for c in trainer["estimate"]["components"])


def test_a_flat_gpu_count_that_is_the_lines_total_keeps_its_node_split(tmp_path):
    """--gpus 16xH100 over --nproc_per_node 8 --nnodes 2 names the same sixteen GPUs: the file's two
    nodes of eight are kept (the hint search places TP within a node) and nothing is overridden; 8xH100
    is another count, VL007 at the line."""
    script = tmp_path / "train.sh"
    script.write_text("torchrun --nproc_per_node 8 --nnodes 2 train.py --model_name_or_path meta-llama/Llama-3.2-1B "
                      "--per_device_train_batch_size 2 --max_length 2048\n")
    (same,) = _check(str(script), "--gpus", "16xH100")["files"]
    assert (same["gpus"]["per_node"], same["gpus"]["nodes"]) == (8, 2)
    assert not any(f["code"] == "VL007" for f in same["findings"])
    (other,) = _check(str(script), "--gpus", "8xH100")["files"]
    assert any(f["code"] == "VL007" for f in other["findings"])
