"""OpenRLHF's PPO trainer under Ray (readers/openrlhf_ppo.py, memory/rl.py): real launch scripts from
OpenRLHF and the repositories that run it (tests/data/launch/SOURCES.tsv), read flag by flag, and
the RL step priced phase by phase on the actor's GPUs."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from vramlint.packaged import data_json
from vramlint.readers.openrlhf_ppo import ALIASES, DEFAULTS, FLAT, OLD, VERSION

ROOT = Path(__file__).resolve().parents[1]
LAUNCH = ROOT / "tests" / "data" / "launch"
SCRIPTS = LAUNCH / "OpenRLHF__OpenRLHF" / "examples" / "scripts"
EXAMPLE = ROOT / "examples" / "launch" / "openrlhf-ppo-7b.sh"


def _check(*argv: str) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", *argv, "--format", "json"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    return json.loads(proc.stdout)


def _entry(*argv: str) -> dict:
    """The actor's job (the first; the critic's GPUs, where they are its own, come after it)."""
    (entry,) = [f for f in _check(*argv)["files"] if f.get("estimate") or f["status"] != "skipped"][:1]
    return entry


def _components(entry: dict) -> dict[str, int]:
    return {c["name"]: c["bytes"] for c in entry["estimate"]["components"]}


def test_the_flags_it_reads_are_the_wheels_own():
    """Every flat flag the reader renames is one train_ppo_ray's argparse defined up to 0.10.1, and
    its dotted name one 0.11.2's defines (data/openrlhf_flags.json, read from the wheels by
    dev/openrlhf_flags.py)."""
    releases = data_json("openrlhf_flags.json")["releases"]
    flat = set().union(*(releases[r]["programs"]["train_ppo_ray"] for r in ("0.9.0", "0.9.10", "0.10.1")))
    dotted = set(releases["0.11.2"]["programs"]["train_ppo_ray"])
    assert not set(ALIASES) - flat, set(ALIASES) - flat
    assert not set(ALIASES.values()) - dotted, set(ALIASES.values()) - dotted
    assert {"prompt_max_len", "generate_max_len"} <= set(releases["0.9.5"]["programs"]["train_ppo_ray"])
    assert "prompt_max_len" not in releases["0.9.10"]["programs"]["train_ppo_ray"]
    assert DEFAULTS[OLD]["train.micro_batch_size"] == 4 and DEFAULTS[VERSION] == DEFAULTS[FLAT]


def test_the_hybrid_engine_peaks_at_the_rollout_beside_the_awake_deepspeed_states():
    """examples/launch/openrlhf-ppo-7b.sh: colocate_all with --vllm.enable_sleep but no
    --ds.enable_sleep. At the rollout vLLM's 0.6 of the GPU sits beside the actor's and the critic's
    ZeRO-3 states, the reference's 16-bit shard and the contexts of the critic's, the reference's and
    the vLLM worker's processes; --ds.enable_sleep (both models' states to the host) is the hint."""
    entry = _entry(str(EXAMPLE), "--gpus", "H100")
    parts = _components(entry)
    assert entry["estimate"]["peak_moment"] == "rollout"
    assert parts["rollout engine (vLLM, awake)"] == int(0.6 * entry["gpus"]["memory_bytes"])
    p_actor, p_critic = 7_615_616_512, 7_070_622_720          # Qwen2.5-7B, and its value model
    assert parts["optimizer states"] == 12 * p_actor // 8
    assert parts["critic optimizer states"] == 12 * p_critic // 8
    assert parts["reference weights"] == 2 * p_actor // 8
    assert parts["other processes' CUDA contexts"] == 2 * 1_800_000_000 + 730_000_000
    assert "reward model weights" not in parts                 # --reward.remote_url: no reward model
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert finding["line"] == 14 and finding["hint"].startswith("--ds.enable_sleep fits at")


def test_ds_enable_sleep_keeps_the_16_bit_weights_and_one_flag_moves_both_models_states(tmp_path):
    """offload_deepspeed_states moves the optimizer states, the fp32 master, the gradient partition
    and the reduce bucket, never the 16-bit parameters; the critic's go with the actor's."""
    script = tmp_path / "ppo.sh"
    script.write_text(EXAMPLE.read_text().replace("   --vllm.enable_sleep \\\n",
                                                  "   --vllm.enable_sleep \\\n   --ds.enable_sleep \\\n"))
    entry = _entry(str(script), "--gpus", "H100")
    parts = _components(entry)
    # the peak moves to the actor's update, its states loaded back; the critic's stay on the host
    # (a component of no bytes is left out of the listing)
    assert entry["estimate"]["peak_moment"] == "backward at the loss" and entry["status"] == "estimated"
    assert parts["optimizer states"] == 12 * 7_615_616_512 // 8 and parts["critic 16-bit weights"] > 0
    assert not {"critic optimizer states", "critic gradient partition", "critic reduce bucket"} & set(parts)
    assert not [f for f in entry["findings"] if f["code"] in ("VL201", "VL210")]
    (line,) = [a for a in entry["estimate"]["assumptions"] if a.startswith("RL step phases")]
    update, rollout = (float(x) for x in re.findall(r"(?:update|rollout) ([0-9.]+) GiB", line))
    assert rollout < update < 79.2


def test_one_job_in_flat_and_dotted_flags_gives_one_answer(tmp_path):
    """The example written with 0.10.1's flat flags is the same job: the same peak, the same hint in
    its own spelling."""
    flat = {"--actor.num_nodes": "--actor_num_nodes", "--actor.num_gpus_per_node": "--actor_num_gpus_per_node",
            "--ref.num_nodes": "--ref_num_nodes", "--ref.num_gpus_per_node": "--ref_num_gpus_per_node",
            "--vllm.num_engines": "--vllm_num_engines", "--vllm.tensor_parallel_size": "--vllm_tensor_parallel_size",
            "--train.colocate_all": "--colocate_all_models",
            "--vllm.gpu_memory_utilization": "--vllm_gpu_memory_utilization",
            "--vllm.enable_sleep": "--vllm_enable_sleep", "--actor.model_name_or_path": "--pretrain",
            "--reward.remote_url": "--remote_rm_url", "--ckpt.output_dir": "--save_path",
            "--train.micro_batch_size": "--micro_train_batch_size", "--train.batch_size": "--train_batch_size",
            "--rollout.micro_batch_size": "--micro_rollout_batch_size", "--rollout.batch_size": "--rollout_batch_size",
            "--data.max_len": "--max_len", "--ds.zero_stage": "--zero_stage", "--ds.param_dtype": "--param_dtype",
            "--actor.gradient_checkpointing_enable": "--gradient_checkpointing",
            "--ds.packing_samples": "--packing_samples", "--data.prompt_dataset": "--prompt_data",
            "--data.input_key": "--input_key", "--data.apply_chat_template": "--apply_chat_template"}
    text = EXAMPLE.read_text()
    for dotted, old in flat.items():
        text = re.sub(rf"(?m)^   {re.escape(dotted)}(?=\s)", f"   {old}", text)
    script = tmp_path / "flat.sh"
    script.write_text(text)
    one, two = _entry(str(EXAMPLE), "--gpus", "H100"), _entry(str(script), "--gpus", "H100")
    assert one["estimate"]["per_gpu_peak_bytes"] == two["estimate"]["per_gpu_peak_bytes"]
    (hint,) = [f["hint"] for f in two["findings"] if f["code"] == "VL201"]
    assert hint.startswith("--deepspeed_enable_sleep fits at")
    assert not [f for f in two["findings"] if f["code"] == "VL313"]


def test_separate_placements_price_the_actors_and_the_critics_gpus_each(tmp_path):
    """OpenRLHF's train_ppo_llama_ray.sh (flat flags, prompt + generate lengths): the actor on 2 GPUs
    with the reference beside it (--colocate_actor_ref), the critic with the reward model beside it
    on 2 others (--colocate_critic_reward), vLLM on 4. Two jobs: the actor's GPUs (no engine, no
    critic), and the critic's, its DeepSpeed update of a value model (lm_head replaced by one output
    a hidden unit, no vocabulary logits) beside the reward model's ZeRO-3 shard and its process.
    The reward model is Llama-3-8B fine-tuned; the script's Hub id is not in the offline catalog,
    so the script is read with Meta-Llama-3-8B-Instruct's name in its place."""
    script = tmp_path / "train_ppo_llama_ray.sh"
    script.write_text((SCRIPTS / "train_ppo_llama_ray.sh").read_text().replace(
        "OpenRLHF/Llama-3-8b-rm-mixture", "meta-llama/Meta-Llama-3-8B-Instruct"))
    actor, critic, engines = _check(str(script), "--gpus", "A100-80GB", "--model",
                                    "meta-llama/Meta-Llama-3-8B-Instruct")["files"]
    parts = _components(actor)
    assert actor["gpus"]["per_node"] == 2 and actor["plan"]["seq_len"] == 2048    # 1024 + 1024
    assert actor["plan"]["micro_batch"] == 16 and actor["plan"]["offload_optimizer"] == "cpu"
    assert parts["reference weights"] == 2 * 8_030_261_248 // 2
    assert not any(name.startswith(("rollout engine", "critic")) for name in parts)
    assert not [f for f in actor["findings"] if f["code"] == "VL210"]    # the frozen models share trained GPUs
    assert engines["via"].endswith("vLLM engines") and engines["kind"] == "vllm"
    value = 8_030_261_248 - 128_256 * 4096 + 4096                          # lm_head -> Linear(4096, 1)
    theirs = _components(critic)
    assert critic["via"].endswith("critic") and critic["gpus"]["per_node"] == 2
    assert critic["gpus"]["from"].endswith(":11")                          # --critic_num_gpus_per_node
    assert theirs["weights (16-bit)"] == theirs["reward model weights"] == 2 * value // 2
    assert theirs["other processes' CUDA contexts"] == parts["other processes' CUDA contexts"]   # one process beside
    assert not any("logits" in name for name in theirs) and critic["plan"]["micro_batch"] == 16
    assert critic["estimate"]["per_gpu_peak_bytes"] < actor["estimate"]["per_gpu_peak_bytes"]


def test_frozen_models_and_engines_on_gpus_of_their_own_are_jobs_of_their_own():
    """OpenRLHF's 70B script (flat flags of 0.9.5): the reference and the reward model on 4 GPUs each
    of their own, the vLLM engines on 4 x TP 2. Five jobs: the actor, the critic, the reference and
    the reward model (ZeRO-3 eval engines: their 16-bit shards over their 4 GPUs and their no-grad
    forward over --micro_rollout_batch_size 2 rows of 1024 + 1024 tokens, packed), and the engines,
    checked as the vllm serve config create_vllm_engines builds (bf16, TP 2, max_model_len 2048,
    OpenRLHF's gpu_memory_utilization 0.95) at 0.9.5's pinned vLLM 0.17.0. Nothing is VL210."""
    files = _check(str(SCRIPTS / "train_ppo_llama_ray_70b.sh"), "--gpus", "A100-80GB")["files"]
    assert [f["via"].rsplit(", ", 1)[-1] for f in files] == ["line 3", "critic", "reference", "reward model",
                                                                 "vLLM engines"]
    assert [f["status"] for f in files] == ["estimated"] * 5
    assert not [f for one in files for f in one["findings"] if f["code"] == "VL210"]
    reference, reward, engines = files[2], files[3], files[4]
    p, value = 70_553_706_496, 70_553_706_496 - 128_256 * 8192 + 8192     # lm_head -> Linear(8192, 1)
    ref_parts, reward_parts = _components(reference), _components(reward)
    assert reference["gpus"]["per_node"] == 4 and reference["gpus"]["from"].endswith(":8")
    assert ref_parts["weights (16-bit eval engine)"] == 2 * p // 4
    assert ref_parts["log-prob logits"] == 6 * 2 * 2048 * 128_256         # bf16 + fp32, 2 rows of 2048
    assert ref_parts["head gathered"] == 2 * 128_256 * 8192
    assert reward_parts["weights (16-bit eval engine)"] == 2 * -(-value // 4)
    assert not any("logits" in name for name in reward_parts)           # a value head: no vocabulary
    assert reward["estimate"]["per_gpu_peak_bytes"] < reference["estimate"]["per_gpu_peak_bytes"]
    serving = engines["serving"]
    assert (serving["tensor_parallel"], serving["max_model_len"], serving["gpu_memory_utilization"]) == (2, 2048, 0.95)
    assert engines["vllm_version"] == "0.17.0" and serving["components"][0]["bytes"] == 2 * p // 2


def test_a_frozen_group_that_does_not_fit_gets_its_own_changes(tmp_path):
    """The same script under ZeRO-2 with the reference on 2 GPUs: its eval engine keeps the whole
    70B model (get_ds_eval_config: stage 0 below the actor's ZeRO-3), 131 GiB. VL201 at the
    experience micro-batch's line, with the changes a frozen model has: ZeRO-3, and its weights on
    the host (--ref_reward_offload, ZeRO-3's offload_param); never checkpointing or the optimizer."""
    script = tmp_path / "ppo.sh"
    script.write_text((SCRIPTS / "train_ppo_llama_ray_70b.sh").read_text().replace("--zero_stage 3", "--zero_stage 2")
                      .replace("--ref_num_gpus_per_node 4", "--ref_num_gpus_per_node 2"))
    reference = _check(str(script), "--gpus", "A100-80GB")["files"][2]
    (finding,) = [f for f in reference["findings"] if f["code"] == "VL201"]
    assert finding["line"] == 22                                       # --micro_rollout_batch_size 2
    assert _components(reference)["weights (16-bit eval engine)"] == 2 * 70_553_706_496
    assert finding["hint"].startswith("--zero_stage 3 + --ref_reward_offload fits at")
    assert "checkpointing" not in finding["hint"] and "adam" not in finding["hint"]


def test_a_reward_model_on_the_actors_gpus_is_resolved_as_any_model_a_file_names():
    """OpenRLHF's own hybrid-engine script (dotted flags, at 3c3be623): its reward model shares the
    actor's GPUs, so its shape is needed; not in the offline catalog here, that is VL005 at its line,
    and the run is not estimated (never passed in silence). Its flags are all 0.11's: no VL313."""
    entry = _check(str(SCRIPTS / "train_ppo_ray_hybrid_engine.sh"), "--gpus", "H100", "--model",
                   "meta-llama/Meta-Llama-3-8B-Instruct")["files"][0]
    codes = {(f["code"], f["line"]) for f in entry["findings"]}
    assert ("VL005", 17) in codes and not any(code == "VL313" for code, _ in codes)
    assert entry["status"] == "not estimated"


def test_train_ppo_rays_start_up_assertions_are_its_refusals(tmp_path):
    """colocate_all asserts actor GPUs == vllm engines x TP (cli/train_ppo_ray.py at 0.11.2)."""
    script = tmp_path / "ppo.sh"
    script.write_text(EXAMPLE.read_text().replace("--vllm.num_engines 4", "--vllm.num_engines 2"))
    entry = _check(str(script), "--gpus", "H100")["files"][0]
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL313"]
    assert finding["line"] == 11 and "must be equal to vllm_num_engines * vllm_tensor_parallel_size, got 8 and 4" \
        in finding["message"]


def test_a_fork_that_holds_its_own_openrlhf_is_held_to_its_own_flags(tmp_path):
    """GAIR-NLP/LIMR's train_limr.sh passes --ref_pretrain and --samples_save_path, flags of its own
    copy of openrlhf/cli/train_ppo_ray.py (98ebf1bd) that no release has: argparse's refusal only
    where the repository holds no copy."""
    repo = tmp_path / "limr"
    (repo / "scripts").mkdir(parents=True)
    (repo / ".git").mkdir()
    shutil.copy(LAUNCH / "GAIR-NLP__LIMR" / "scripts" / "train_limr.sh", repo / "scripts" / "train_limr.sh")
    alone = _check(str(repo / "scripts" / "train_limr.sh"), "--gpus", "8xA100-80GB", "--model", "Qwen/Qwen2.5-7B")
    refusals = [f for entry in alone["files"] for f in entry["findings"] if f["code"] == "VL313"]
    assert refusals and "--ref_pretrain" in refusals[0]["message"] and refusals[0]["line"] == 28
    (repo / "openrlhf" / "cli").mkdir(parents=True)
    shutil.copy(LAUNCH / "GAIR-NLP__LIMR" / "openrlhf" / "cli" / "train_ppo_ray.py", repo / "openrlhf" / "cli")
    fork = _check(str(repo / "scripts" / "train_limr.sh"), "--gpus", "8xA100-80GB", "--model", "Qwen/Qwen2.5-7B")
    assert not [f for entry in fork["files"] for f in entry["findings"] if f["code"] == "VL313"]


def test_flags_kept_in_bash_arrays_with_a_commented_out_element_are_read():
    """OpenRLHF 0.10.1's train_reinforce_baseline_hybrid_engine.sh keeps its flags in bash arrays, one
    element commented out (``# --adam_offload``) after --gradient_checkpointing: a comment is no
    word, so checkpointing is on and the optimizer is not offloaded."""
    entry = _entry(str(SCRIPTS / "train_reinforce_baseline_hybrid_engine.sh"), "--gpus", "H100", "--model",
                   "Qwen/Qwen2.5-3B-Instruct")
    assert entry["plan"]["grad_checkpointing"] is True and entry["plan"]["offload_optimizer"] == "none"
    assert entry["gpus"]["per_node"] == 4
    # --use_dynamic_batch: DeepSpeed gets micro-batch 1 and accumulation 1, no train_batch_size
    # (deepspeed.py:451-456); it used to derive 1024 x 2 / 4 = 512 accumulated micro-batches
    assert entry["plan"]["micro_batch"] == 1 and entry["plan"]["grad_accum"] == 1


def test_the_flat_ref_reward_offload_puts_the_references_zero3_shards_on_the_host():
    """OpenRLHF's train_ppo_llama_ray_slurm.sh (bdf7dfa5): ZeRO-3, the reference beside the actor
    (--colocate_actor_ref), --ref_reward_offload: its shards live on the host, nothing on the GPU."""
    entry = _entry(str(SCRIPTS / "train_ppo_llama_ray_slurm.sh"), "--gpus", "A100-80GB", "--model",
                   "meta-llama/Meta-Llama-3-8B-Instruct")
    assert entry["plan"]["zero_stage"] == 3 and "reference weights" not in _components(entry)
    assert any("reference" in a for a in entry["estimate"]["assumptions"] if a.startswith("OpenRLHF 0.9.5"))


def test_ds_enable_sleep_moves_nothing_under_adam_offload(tmp_path):
    """offload_deepspeed_states returns at once when the optimizer is already on the host
    (deepspeed_utils.py:155-157): the reduce bucket stays, so --ds.enable_sleep changes no phase."""
    def phases(extra: str) -> str:
        script = tmp_path / "ppo.sh"
        sleep = "   --vllm.enable_sleep \\\n"
        script.write_text(EXAMPLE.read_text().replace(sleep, sleep + extra))
        (line,) = [a for a in _entry(str(script), "--gpus", "H100")["estimate"]["assumptions"]
                   if a.startswith("RL step phases")]
        return line
    assert phases("   --ds.adam_offload \\\n") == phases("   --ds.adam_offload \\\n   --ds.enable_sleep \\\n")
    assert phases("   --ds.adam_offload \\\n") != phases("   --ds.enable_sleep \\\n")


def test_an_engine_count_only_the_run_knows_is_vllm_and_no_refusal(tmp_path):
    """``--vllm_num_engines $N`` with ``N=$(nvidia-smi -L | wc -l)``: the flag is written, so vLLM
    generates (not "no vLLM", which would refuse --packing_samples); VL014 says the count is unknown."""
    script = tmp_path / "ppo.sh"
    script.write_text("N=$(nvidia-smi -L | wc -l)\npython3 -m openrlhf.cli.train_ppo_ray --pretrain "
                      "Qwen/Qwen2.5-7B-Instruct --vllm_num_engines $N --packing_samples --colocate_all_models "
                      "--advantage_estimator group_norm --n_samples_per_prompt 4 --init_kl_coef 0\n")
    entry = _entry(str(script), "--gpus", "H100")
    codes = {f["code"] for f in entry["findings"]}
    assert "VL313" not in codes and "VL014" in codes and entry["status"] == "estimated"
    assert any(name.startswith("rollout engine (vLLM") for name in _components(entry))


def test_a_critic_of_the_actors_unresolved_model_says_so_once(tmp_path):
    """GAE without colocate_all and no critic or reward model named: the critic is the actor's
    model. Where that cannot be resolved, the actor's job has the VL005 and the critic's a VL011
    pointing at it, not a second VL005 for the same line."""
    script = tmp_path / "ppo.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path ./no-such-model "
                      "--reward.remote_url http://localhost:5000/get_reward --vllm.num_engines 2\n")
    actor, critic, reference, engines = _check(str(script), "--gpus", "H100")["files"]
    assert [f["code"] for f in actor["findings"] if f["severity"] == "error"] == ["VL005"]
    for group in (reference, engines):
        (said,) = [f for f in group["findings"] if f["severity"] == "error"]
        assert said["code"] == "VL011" and "VL005 above" in said["message"]
    (finding,) = [f for f in critic["findings"] if f["severity"] == "error"]
    assert finding["code"] == "VL011" and "VL005 above" in finding["message"] and critic["via"].endswith("critic")


def test_engines_that_cannot_start_are_said_in_openrlhfs_flags(tmp_path):
    """The 70B script's engines at --vllm_tensor_parallel_size 1: the 16-bit 70B model alone is
    more than OpenRLHF's 0.95 share of an 80 GB card, so vLLM refuses to allocate its KV cache
    ("No available memory for the cache blocks"), at the TP flag's line. The hint speaks
    train_ppo_ray's flags; vLLM settings OpenRLHF fixes (dtype, quantization, max_num_seqs) are
    not proposed."""
    script = tmp_path / "ppo.sh"
    script.write_text((SCRIPTS / "train_ppo_llama_ray_70b.sh").read_text()
                      .replace("--vllm_tensor_parallel_size 2", "--vllm_tensor_parallel_size 1"))
    engines = _check(str(script), "--gpus", "A100-80GB")["files"][-1]
    (finding,) = [f for f in engines["findings"] if f["severity"] == "error"]
    assert finding["code"] == "VL201" and finding["line"] == 16
    assert finding["message"].startswith("No available memory for the cache blocks.")
    assert finding["hint"] == "--vllm_tensor_parallel_size 2 (2 GPUs)"


def test_dotted_engines_run_the_vllm_openrlhf_pins(tmp_path):
    """0.11.2's dotted flags: its vllm extra pins vLLM 0.29.0 (the wheel's METADATA), newer than
    the releases vramlint models, which the engines' job says (VL009); a repository pin wins."""
    script = tmp_path / "ppo.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct "
                      "--reward.remote_url http://localhost:5000/get_reward --algo.advantage.estimator group_norm "
                      "--rollout.n_samples_per_prompt 8 --vllm.num_engines 2 --vllm.tensor_parallel_size 2 "
                      "--vllm.gpu_memory_utilization 0.6\n")
    engines = _check(str(script), "--gpus", "H100")["files"][-1]
    assert engines["via"].endswith("vLLM engines") and engines["vllm_version"] == "0.29.0"
    assert [f["code"] for f in engines["findings"]] == ["VL009"]
    assert engines["serving"]["gpu_memory_utilization"] == 0.6
    (tmp_path / "requirements.txt").write_text("vllm==0.11.0\n")
    (tmp_path / ".git").mkdir()
    pinned = _check(str(script), "--gpus", "H100")["files"][-1]
    assert pinned["vllm_version"] == "0.11.0" and not pinned["findings"]


def test_a_reward_model_that_is_also_the_critic_unresolved_says_so_once(tmp_path):
    """GAE with a reward model on GPUs of its own and no critic named: the critic is built from the
    reward model (cli/train_ppo_ray.py:648). Where that model cannot be resolved, the critic's job
    has the VL005 and the reward model's a VL011 pointing at it; the reference (the actor's model)
    and the engines are estimated."""
    script = tmp_path / "ppo.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct "
                      "--reward.model_name_or_path ./no-such-rm --vllm.num_engines 2 --ds.zero_stage 3\n")
    actor, critic, reference, reward, engines = _check(str(script), "--gpus", "H100")["files"]
    assert [f["code"] for f in critic["findings"] if f["severity"] == "error"] == ["VL005"]
    (said,) = [f for f in reward["findings"] if f["severity"] == "error"]
    assert said["code"] == "VL011" and "VL005 above" in said["message"] and reward["via"].endswith("reward model")
    assert [one["status"] for one in (actor, reference, engines)] == ["estimated"] * 3


def test_asynchronous_training_gives_the_engines_gpus_of_their_own(tmp_path):
    """--train.async_enable with --train.colocate_all: train_ppo_ray places the vLLM engines apart
    (create_vllm_engines gets no shared placement group, cli/train_ppo_ray.py:75 at 0.11.2), so
    the actor's GPUs hold no engine and the engines are their own vllm serve check, their unstated
    settings named as OpenRLHF's defaults."""
    script = tmp_path / "ppo.sh"
    script.write_text("python3 -m openrlhf.cli.train_ppo_ray --actor.model_name_or_path Qwen/Qwen2.5-7B-Instruct "
                      "--reward.remote_url http://localhost:5000/get_reward --algo.advantage.estimator group_norm "
                      "--rollout.n_samples_per_prompt 8 --train.colocate_all --train.async_enable "
                      "--vllm.num_engines 4 --vllm.tensor_parallel_size 2 --ds.zero_stage 3\n")
    files = _check(str(script), "--gpus", "H100")["files"]
    actor, engines = files[0], files[-1]
    assert not any(name.startswith("rollout engine") for name in _components(actor))
    assert engines["via"].endswith("vLLM engines")
    (note,) = [n for n in engines["notes"] if n.startswith("the vLLM engines' GPUs")]
    assert "gpu_memory_utilization 0.95 (OpenRLHF 0.11.2 default)" in note
