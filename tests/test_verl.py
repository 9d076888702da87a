"""verl's PPO trainer (readers/verl.py, memory/rl.py, memory/fit_rl.py): the job a launch line's
Hydra overrides or a config file state, over verl 0.9.1's own composed defaults, and the phases of
its step on every GPU of the hybrid engine. The scripts are byte-exact copies from verl's examples
and from repositories that run it (tests/data/launch/SOURCES.tsv); verl's composed config is the
wheel's own file (tests/data/verl/_generated_ppo_trainer.yaml, from verl-0.9.1-py3-none-any.whl,
sha256 db6e6f2a8d9d5808d9ec32d357a42319fdc6967df688ff9d9810050f49bfdd14)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import DATA, ROOT

VERL = DATA / "launch" / "volcengine__verl" / "examples"
GiB = 1 << 30
QWEN2_7B = ("--model", "Qwen/Qwen2-7B")     # Qwen2-7B-Instruct's shapes (only max_position_embeddings differ)


def _check(*argv: str, cwd: Path = ROOT) -> dict:
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", *map(str, argv), "--format", "json"], cwd=cwd,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1), proc.stderr
    (entry,) = json.loads(proc.stdout)["files"]
    return entry


def _components(entry: dict) -> dict[str, int]:
    return {c["name"]: c["bytes"] for c in entry["estimate"]["components"]}


def _codes(entry: dict) -> set[tuple[str, int]]:
    """The findings but VL006 (the model --model names instead of the file's)."""
    return {(f["code"], f["line"]) for f in entry["findings"] if f["code"] != "VL006"}


def test_the_defaults_are_verls_composed_config():
    """vramlint/data/verl_ppo_trainer.json is the wheel's _generated_ppo_trainer.yaml less its
    profiler sections (dev/verl_defaults.py), value for value."""
    sys.path.insert(0, str(ROOT / "dev"))
    from verl_defaults import trimmed
    text = (DATA / "verl" / "_generated_ppo_trainer.yaml").read_bytes()
    assert hashlib.sha256(text).hexdigest() == "f19ebe24c2995052ca5a00de9c4ac302f6ba8c379effcc3ff83f058b0f9dcc90"
    shipped = json.loads((ROOT / "vramlint" / "data" / "verl_ppo_trainer.json").read_text())
    assert shipped["release"] == "0.9.1" and shipped["config"] == trimmed(yaml.safe_load(text))


def test_a_default_that_follows_another_key_follows_the_jobs_value(tmp_path):
    """``log_prob_max_token_len_per_gpu: ${oc.select:actor_rollout_ref.actor.ppo_max_token_len_per_gpu,16384}``
    takes the actor's budget where the job sets it, located there; rollout.n's default is 1."""
    from vramlint.documents import Document
    from vramlint.readers.verl import VerlKeys, nested
    document = nested(Document("x.sh", "", {"actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "9000"},
                                {"$": (1, 1), "$.actor_rollout_ref.actor.ppo_max_token_len_per_gpu": (3, 5)},
                                on_command_line=True))
    keys = VerlKeys(document)
    fact = keys.count("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu")
    assert fact.value == 9000 and fact.location.line == 3
    assert keys.count("actor_rollout_ref.ref.log_prob_max_token_len_per_gpu").value == 9000
    assert keys.count("actor_rollout_ref.rollout.n").value == 1
    assert keys.count("critic.ppo_max_token_len_per_gpu").value == 32768
    unset = VerlKeys(nested(Document("y.sh", "", {}, {"$": (1, 1)}, on_command_line=True)))
    assert unset.count("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu").value == 16384


def test_one_job_as_a_launch_line_and_as_a_config_file_gives_one_answer(tmp_path):
    """verl's run_qwen2-7b.sh and the same settings written as a Hydra config: one estimate."""
    script = VERL / "grpo_trainer" / "run_qwen2-7b.sh"
    config = {"algorithm": {"adv_estimator": "grpo", "use_kl_in_reward": False},
              "data": {"train_batch_size": 1024, "max_prompt_length": 512, "max_response_length": 1024},
              "actor_rollout_ref": {
                  "model": {"path": "Qwen/Qwen2-7B-Instruct", "use_remove_padding": True,
                            "enable_gradient_checkpointing": True},
                  "actor": {"ppo_mini_batch_size": 256, "ppo_micro_batch_size_per_gpu": 40, "use_kl_loss": True,
                            "entropy_coeff": 0, "fsdp_config": {"param_offload": False, "optimizer_offload": False}},
                  "rollout": {"log_prob_micro_batch_size_per_gpu": 40, "tensor_model_parallel_size": 2,
                              "name": "vllm", "gpu_memory_utilization": 0.6, "n": 5},
                  "ref": {"log_prob_micro_batch_size_per_gpu": 40, "fsdp_config": {"param_offload": True}}},
              "trainer": {"n_gpus_per_node": 8, "nnodes": 1}}
    (tmp_path / "ppo.yaml").write_text(yaml.safe_dump(config))
    line = _check(script, "--gpus", "H100", *QWEN2_7B)
    file = _check(tmp_path / "ppo.yaml", "--gpus", "H100", *QWEN2_7B)
    assert line["estimate"]["per_gpu_peak_bytes"] == file["estimate"]["per_gpu_peak_bytes"]
    assert line["estimate"]["peak_moment"] == file["estimate"]["peak_moment"] == "rollout"
    assert line["gpus"]["per_node"] == file["gpus"]["per_node"] == 8


def test_the_rollout_holds_the_engines_share_beside_what_the_trainer_keeps():
    """run_qwen2-7b.sh on 8 H100s: at the rollout the actor's fp32 shards (4 B x P / 8) and AdamW
    states (8 B x P / 8) stay, gradients are gone, the reference is on the host, and vLLM holds
    0.6 of the GPU's total memory; verl empties the cache before it wakes (no reserve)."""
    entry = _check(VERL / "grpo_trainer" / "run_qwen2-7b.sh", "--gpus", "H100", *QWEN2_7B)
    parts = _components(entry)
    p, total = 7_615_616_512, 85_029_158_912
    assert parts["parameter shards"] == 4 * -(-p // 8) and parts["optimizer states"] == 8 * -(-p // 8)
    assert parts["rollout engine (vLLM, awake)"] == int(0.6 * total)
    assert parts["allocator reserve"] == 0 and not any("gradient" in name for name in parts)
    assert entry["status"] == "estimated" and not _codes(entry)
    phases = next(a for a in entry["estimate"]["assumptions"] if a.startswith("RL step phases"))
    assert "update" in phases and "rollout" in phases and "log-prob forward" in phases


def test_offload_between_phases_leaves_the_rollout_but_not_the_update(tmp_path):
    """verl's MIN config for Qwen2-7B GRPO on 2 H800s (examples/tuning, docs/perf/device_tuning.rst):
    param_offload and optimizer_offload move the actor's shards and AdamW states to the host for the
    rollout, but its update loads them back (train_mode): the update is the peak."""
    entry = _check(VERL / "tuning" / "7b" / "qwen2-7b_grpo_2_h800_fsdp_vllm.sh", "--gpus", "H100", *QWEN2_7B)
    assert entry["estimate"]["peak_moment"] != "rollout"
    parts = _components(entry)
    assert parts["optimizer states"] == 8 * -(-7_615_616_512 // 2)
    phases = next(a for a in entry["estimate"]["assumptions"] if a.startswith("RL step phases"))
    rollout = float(phases.split("rollout ")[1].split(" GiB")[0])
    # the engine's 0.6 of the card and the context, nothing of the actor
    assert abs(rollout - (0.6 * 85_029_158_912 + 1.4 * GiB) / GiB) < 1.0


def test_ppo_prices_the_critic_beside_the_actor():
    """run_deepseek7b_llm.sh (GAE): the critic, a value model of the actor's shape with a one-output
    head, keeps fp32 shards and AdamW states over the 8 GPUs through every phase."""
    entry = _check(VERL / "ppo_trainer" / "run_deepseek7b_llm.sh", "--gpus", "H100")
    parts = _components(entry)
    assert parts["critic parameter shards"] * 2 == parts["critic optimizer states"] > 0
    assert any("critic: a value model of the actor's shape" in a for a in entry["estimate"]["assumptions"])


def test_sglangs_share_is_of_the_memory_free_when_it_starts():
    """run_qwen2-7b_sglang_seq_balance.sh: SGLang's mem_fraction_static (verl's gpu_memory_utilization)
    is a share of what is free at its start, after the actor's and critic's shards and the context."""
    entry = _check(VERL / "ppo_trainer" / "run_qwen2-7b_sglang_seq_balance.sh", "--gpus", "H100", *QWEN2_7B)
    assert entry["estimate"]["peak_moment"] == "rollout"
    parts = _components(entry)
    engine = parts["rollout engine (SGLang, awake)"]
    context = parts["CUDA context + NCCL"]
    free = 85_029_158_912 - parts["parameter shards"] - parts["critic parameter shards"] - context
    assert engine == int(0.5 * free)


def test_a_share_too_large_for_the_trainers_states_is_found_at_its_line_with_the_largest_that_fits(tmp_path):
    """gpu_memory_utilization 0.9 beside an actor that keeps its states: VL201 at that override,
    and the hint's value fits when written back (it is found by running the model, not guessed)."""
    text = (VERL / "grpo_trainer" / "run_qwen2-7b.sh").read_text()
    (tmp_path / "run.sh").write_text(text.replace("gpu_memory_utilization=0.6", "gpu_memory_utilization=0.9"))
    entry = _check(tmp_path / "run.sh", "--gpus", "H100", *QWEN2_7B)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "gpu_memory_utilization" in row)
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert finding["line"] == line and entry["estimate"]["peak_moment"] == "rollout"
    hinted = finding["hint"].split("gpu_memory_utilization=")[1].split(" ")[0]
    assert 0.5 < float(hinted) < 0.9
    (tmp_path / "run.sh").write_text(text.replace("gpu_memory_utilization=0.6", f"gpu_memory_utilization={hinted}"))
    assert _check(tmp_path / "run.sh", "--gpus", "H100", *QWEN2_7B)["status"] == "estimated"
    assert not _codes(_check(tmp_path / "run.sh", "--gpus", "H100", *QWEN2_7B))


def test_a_micro_batch_too_large_is_found_with_verls_own_key(tmp_path):
    text = (VERL / "grpo_trainer" / "run_qwen2-7b.sh").read_text()
    (tmp_path / "run.sh").write_text(text.replace("ppo_micro_batch_size_per_gpu=40",
                                                  "ppo_micro_batch_size_per_gpu=160"))
    entry = _check(tmp_path / "run.sh", "--gpus", "H100", *QWEN2_7B)
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=" in finding["hint"]


def test_verls_start_up_refusals_are_its_own_words(tmp_path):
    """ray_on_slurm.slurm leaves rollout.name at the config's ``???``: Hydra's MissingMandatoryValue;
    a train batch x n that the GPUs do not divide, and no log-prob micro-batch: validate_config's."""
    slurm = _check(VERL / "slurm" / "ray_on_slurm.slurm", "--gpus", "H100")
    assert any("Missing mandatory value: actor_rollout_ref.rollout.name" in f["message"]
               for f in slurm["findings"] if f["code"] == "VL313")
    (tmp_path / "run.sh").write_text(
        "python3 -m verl.trainer.main_ppo actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B \\\n"
        "  actor_rollout_ref.rollout.name=vllm data.train_batch_size=12 trainer.n_gpus_per_node=8 \\\n"
        "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 actor_rollout_ref.actor.ppo_mini_batch_size=8\n")
    messages = [f["message"] for f in _check(tmp_path / "run.sh", "--gpus", "H100")["findings"] if f["code"] == "VL313"]
    assert any("real_train_batch_size (12) must be divisible by minimal possible batch size (8)" in m for m in messages)
    assert any("Please set at least one of 'actor_rollout_ref.rollout.log_prob_micro_batch_size'" in m
               for m in messages)


def test_a_gpu_count_only_the_run_knows_is_not_guessed(tmp_path):
    text = (VERL / "grpo_trainer" / "run_qwen2-7b.sh").read_text()
    (tmp_path / "run.sh").write_text(text.replace("trainer.n_gpus_per_node=8", "trainer.n_gpus_per_node=$GPUS"))
    entry = _check(tmp_path / "run.sh", "--gpus", "H100", *QWEN2_7B)
    assert entry["status"] == "not estimated" and "VL011" in {f["code"] for f in entry["findings"]}
    counted = _check(tmp_path / "run.sh", "--gpus", "4xH100", *QWEN2_7B)
    assert counted["status"] == "estimated" and counted["gpus"]["per_node"] == 4


@pytest.mark.parametrize("engine", ["torchtitan", "veomni"])
def test_an_engine_vramlint_does_not_model_is_not_estimated_and_says_so(tmp_path, engine):
    """``model_engine=torchtitan`` / ``veomni`` compose their own actor configs (verl 0.9.1
    ppo_trainer.yaml ``${model_engine}_actor``): not priced as the FSDP workers the default is."""
    (tmp_path / "run.sh").write_text(
        f"python3 -m verl.trainer.main_ppo model_engine={engine} actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B \\\n"
        "  actor_rollout_ref.rollout.name=vllm actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \\\n"
        "  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=2\n")
    entry = _check(tmp_path / "run.sh", "--gpus", "H100")
    assert entry["status"] == "not estimated"
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL011"]
    assert "strategy is not modelled" in finding["message"] and finding["line"] == 1


def test_a_job_submitted_to_ray_is_the_command_after_the_separator():
    """SimpleRL-Zoo's train_grpo_math_tune_ray.sh: ``ray job submit ... -- python -m
    verl.trainer.main_ppo``: read as verl's trainer (its model a placeholder to fill: VL005)."""
    entry = _check(DATA / "launch" / "hkust-nlp__simpleRL-reason" / "train_grpo_math_tune_ray.sh", "--gpus", "H100")
    assert any(f["code"] == "VL005" and "TO_BE_FILLED/Qwen2.5-Math-7B" in f["message"] for f in entry["findings"])


def test_the_dynamic_token_budget_is_the_update_micro_batch():
    """use_dynamic_bsz with ppo_max_token_len_per_gpu 24000: one packed row of 24,000 tokens."""
    entry = _check(VERL / "grpo_trainer" / "run_qwen2-7b_seq_balance.sh", "--gpus", "H100", *QWEN2_7B)
    assert entry["plan"]["micro_batch"] == 1 and entry["plan"]["seq_len"] == 24000


def _line(tmp_path, *overrides: str) -> Path:
    """A verl launch of Qwen2.5-7B-Instruct on 8 GPUs with the overrides given."""
    base = ["actor_rollout_ref.model.path=Qwen/Qwen2.5-7B-Instruct", "actor_rollout_ref.rollout.name=vllm",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8", "data.train_batch_size=256",
            "actor_rollout_ref.actor.ppo_mini_batch_size=64",
            "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=8"]
    (tmp_path / "run.sh").write_text("python3 -m verl.trainer.main_ppo \\\n" + " \\\n".join(
        f"    {o}" for o in base + list(overrides)) + "\n")
    return tmp_path / "run.sh"


def test_the_reference_log_prob_micro_batch_is_read_where_it_is_the_larger(tmp_path):
    """With a reference (use_kl_loss) its own log_prob_micro_batch_size_per_gpu sizes the log-prob
    forward where it is larger than the actor's, and a hint speaks its key."""
    path = _line(tmp_path, "actor_rollout_ref.actor.use_kl_loss=True",
                 "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=256")
    entry = _check(path, "--gpus", "H100")
    assert entry["estimate"]["peak_moment"] == "log-prob forward"
    parts = _components(entry)
    assert parts["log-prob logits"] == 2 * 256 * (512 + 512) * 152_064
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert finding["line"] == 9 and "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=" in finding["hint"]
    without = _check(_line(tmp_path, "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=256"), "--gpus", "H100")
    assert without["estimate"]["peak_moment"] != "log-prob forward"     # no reference: its setting is unused


def test_a_critic_of_another_model_is_that_models_shape(tmp_path):
    """PPO with critic.model.path naming a 0.5B model beside a 7B actor: the critic's states are the
    0.5B's (resolved as any model a file names), not the actor's."""
    entry = _check(_line(tmp_path, "algorithm.adv_estimator=gae", "critic.model.path=Qwen/Qwen2.5-0.5B",
                         "critic.ppo_micro_batch_size_per_gpu=8"), "--gpus", "H100")
    parts = _components(entry)
    from vramlint.models import read_model
    small = read_model("Qwen/Qwen2.5-0.5B")
    critic = small.params - small.head_params + small.hidden_size
    assert parts["critic optimizer states"] == 8 * -(-critic // 8)
    unknown = _check(_line(tmp_path, "algorithm.adv_estimator=gae", "critic.model.path=acme/no-such-critic"),
                     "--gpus", "H100")
    assert unknown["status"] == "not estimated" and "VL005" in {f["code"] for f in unknown["findings"]}


def test_a_token_budget_below_one_sequence_is_verls_assertion(tmp_path):
    """use_dynamic_bsz with ppo_max_token_len_per_gpu under prompt + response: rearrange_micro_batches'
    assertion once a sequence reaches its caps (VL313)."""
    entry = _check(_line(tmp_path, "actor_rollout_ref.actor.use_dynamic_bsz=True",
                         "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=800",
                         "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=4096"), "--gpus", "H100")
    messages = [f["message"] for f in entry["findings"] if f["code"] == "VL313"]
    assert len(messages) == 1 and "Got max_token_len=800 and max_seq_len=1024" in messages[0]


def test_a_config_that_composes_verls_own_and_verls_megatron_config_are_jobs(tmp_path):
    """A Hydra config whose ``defaults`` list pulls in verl's ppo_trainer (no actor section of its
    own) is a verl job, not a skipped file; ``--config-name=ppo_megatron_trainer.yaml`` is verl's
    own Megatron config, not a missing file: a job on the Megatron engine, here one that states no
    micro-batch, which verl refuses."""
    (tmp_path / "grpo.yaml").write_text("defaults:\n  - ppo_trainer\n  - _self_\ndata:\n  max_response_length: 2048\n")
    entry = _check(tmp_path / "grpo.yaml", "--gpus", "H100")
    assert entry["kind"] == "verl" and entry["status"] == "not estimated"      # it names no model
    (tmp_path / "m.sh").write_text("python3 -m verl.trainer.main_ppo --config-path=config "
                                   "--config-name=ppo_megatron_trainer.yaml "
                                   "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B "
                                   "actor_rollout_ref.rollout.name=vllm\n")
    megatron = _check(tmp_path / "m.sh", "--gpus", "H100")
    assert megatron["status"] == "not estimated"
    assert "ppo_micro_batch_size_per_gpu" in " ".join(f["message"] for f in megatron["findings"])


def test_a_micro_batch_only_the_run_knows_is_no_refusal_and_no_estimate(tmp_path):
    """``ppo_micro_batch_size_per_gpu=$MICRO`` (unset in the script): the key is written, so verl's
    "Please set at least one of" is no VL313; there is no micro-batch to price, so the job is not
    estimated (VL011), never a crash (it was VL003, a TypeError in the plan)."""
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo algorithm.adv_estimator=grpo data.train_batch_size=64 \\\n"
                      "  actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct \\\n"
                      "  actor_rollout_ref.rollout.name=vllm \\\n"
                      "  actor_rollout_ref.actor.ppo_mini_batch_size=64 \\\n"
                      "  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=$MICRO \\\n"
                      "  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=$MICRO \\\n"
                      "  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=8 trainer.n_gpus_per_node=8\n")
    entry = _check(script, "--gpus", "H100")
    codes = {f["code"] for f in entry["findings"]}
    assert "VL313" not in codes and "VL003" not in codes and "VL011" in codes
    assert entry["status"] == "not estimated"


def test_a_shorter_response_is_proposed_after_every_other_change(tmp_path):
    """The verl example with 4,096-token responses and half of each H100 for vLLM: the update at
    ppo_micro_batch_size_per_gpu 32 is over. A smaller micro-batch fits, and so does a shorter
    data.max_response_length (the rows of prompt + response shorten in the update and the log-prob
    forward alike); the response comes last, for it changes what the run learns from. Checked
    again at the proposed length, the job fits."""
    text = (ROOT / "examples" / "launch" / "verl-grpo-7b.sh").read_text()
    script = tmp_path / "grpo.sh"
    script.write_text(text.replace("data.max_response_length=1024", "data.max_response_length=4096")
                      .replace("rollout.gpu_memory_utilization=0.85", "rollout.gpu_memory_utilization=0.5"))
    (over,) = [f for f in _check(str(script), "--gpus", "H100")["findings"] if f["code"] == "VL201"]
    micro, response = over["hint"].split("; or ")
    assert micro.startswith("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=")
    assert response.startswith("data.max_response_length=")
    length = int(response.split("=")[1].split()[0])
    assert 1024 < length < 4096
    script.write_text(script.read_text().replace("data.max_response_length=4096", f"data.max_response_length={length}"))
    codes = {f["code"] for f in _check(str(script), "--gpus", "H100")["findings"]}
    assert "VL201" not in codes


# verl's Megatron workers (readers/verl_megatron.py, memory/runtimes/megatron/rl.py)
MEGATRON_GRPO = VERL / "grpo_trainer" / "run_qwen2-7b_math_megatron.sh"
MEGATRON_MOE = VERL / "grpo_trainer" / "run_qwen3moe-30b_megatron_96gb.sh"
MEGATRON_PPO = VERL / "ppo_trainer" / "run_deepseek_math_gsm8k_megatron.sh"


def _phases(entry: dict) -> dict[str, float]:
    """The RL summary's per-phase GiB ('RL step phases per GPU: update 43.2 GiB (at ...), rollout ...')."""
    (line,) = [a for a in entry["estimate"]["assumptions"] if a.startswith("RL step phases")]
    out = {}
    for part in line.split(": ", 1)[1].split(", "):
        name, _, rest = part.partition(" ")
        if name == "log-prob":
            name, rest = "log-prob forward", rest.removeprefix("forward ")
        out[name] = float(rest.split(" GiB")[0])
    return out


def test_the_megatron_defaults_are_verls_composed_config():
    """vramlint/data/verl_ppo_megatron_trainer.json is the wheel's _generated_ppo_megatron_trainer.yaml
    (``model_engine=megatron``) less its profiler sections, value for value."""
    sys.path.insert(0, str(ROOT / "dev"))
    from verl_defaults import trimmed
    text = (DATA / "verl" / "_generated_ppo_megatron_trainer.yaml").read_bytes()
    assert hashlib.sha256(text).hexdigest() == "1be20fcd7e94d74daa6b8031c9f61876f28711228f0d27d1fc5b4ac103c62dcc"
    shipped = json.loads((ROOT / "vramlint" / "data" / "verl_ppo_megatron_trainer.json").read_text())
    assert shipped["release"] == "0.9.1" and shipped["config"] == trimmed(yaml.safe_load(text))


def test_a_megatron_actor_holds_its_layouts_share_with_the_reference_beside_it():
    """verl's example on 8 GPUs, TP 2 x PP 2: each rank holds bf16 parameters of its TP and stage
    share, the fp32 DDP gradient buffer over the same (twice the bytes), the distributed optimizer's
    12 B over dp 2, and the forward-only reference's bf16 weights of the same share; through the
    rollout all of it stays (no param_offload) beside vLLM's 0.6 of the GPU."""
    entry = _check(MEGATRON_GRPO, "--gpus", "8xH100", *QWEN2_7B)
    assert entry["status"] == "estimated", entry["findings"]
    parts = _components(entry)
    params = parts["parameters"]
    assert parts["gradient buffer"] == 2 * params and parts["reference weights"] == params
    assert abs(parts["optimizer states"] - 12 * params / 2 / 2) <= 12
    assert entry["estimate"]["peak_moment"] == "rollout"
    assert parts["rollout engine (vLLM, awake)"] == int(0.6 * 85_029_158_912)
    notes = " ".join(entry["estimate"]["assumptions"])
    assert "data-parallel 2 = 8 GPUs / (TP 2 x PP 2 x CP 1)" in notes and "160 micro-batches of 4" in notes
    assert "enable_gradient_checkpointing is not read by verl's Megatron engine" in notes


def test_one_megatron_job_by_config_name_and_by_model_engine_gives_one_answer(tmp_path):
    """``--config-name='ppo_megatron_trainer.yaml'`` (deprecated) and ``model_engine=megatron`` compose
    the same config: the same estimate, never the FSDP workers' (what the override was priced as)."""
    text = MEGATRON_GRPO.read_text()
    assert "--config-name='ppo_megatron_trainer.yaml'" in text
    (tmp_path / "engine.sh").write_text(text.replace("--config-name='ppo_megatron_trainer.yaml'",
                                                     "model_engine=megatron"))
    named, engine = (_check(path, "--gpus", "8xH100", *QWEN2_7B) for path in (MEGATRON_GRPO, tmp_path / "engine.sh"))
    assert engine["estimate"]["per_gpu_peak_bytes"] == named["estimate"]["per_gpu_peak_bytes"]
    assert _components(engine) == _components(named) and "gradient buffer" in _components(engine)


def test_param_offload_empties_the_rollout_and_the_log_prob_forward_loads_the_parameters_alone(tmp_path):
    """``megatron.param_offload`` moves the parameters and the gradient buffer to the host outside
    the update (and the reference's weights: its switch follows the actor's); the log-prob forward's
    eval mode loads the parameters back, not the gradient buffer; the update loses only the
    reference's resting weights."""
    text = MEGATRON_GRPO.read_text()
    (tmp_path / "off.sh").write_text(text.replace("    actor_rollout_ref.actor.use_kl_loss=True",
                                                  "    actor_rollout_ref.actor.megatron.param_offload=True \\\n"
                                                  "    actor_rollout_ref.actor.use_kl_loss=True"))
    kept, off = (_check(path, "--gpus", "8xH100", *QWEN2_7B) for path in (MEGATRON_GRPO, tmp_path / "off.sh"))
    params = _components(kept)["parameters"] / GiB
    before, after = _phases(kept), _phases(off)
    assert abs(before["update"] - after["update"] - params) < 0.15
    assert abs(before["rollout"] - after["rollout"] - 4 * params) < 0.15        # params, grads (2x), reference
    assert abs(before["log-prob forward"] - after["log-prob forward"] - 3 * params) < 0.15   # grads, reference


def test_a_critic_on_the_megatron_engine_is_the_actors_layout_with_a_value_head():
    """PPO (GAE) on the Megatron engine: the critic's parameters, gradient buffer and optimizer
    states rest on each rank as the actor's do (the vocabulary head, which it has not, is on the last
    pipeline rank; the peak here is the first's)."""
    entry = _check(MEGATRON_PPO, "--gpus", "8xH100")
    assert entry["status"] == "estimated", entry["findings"]
    parts = _components(entry)
    assert "pipeline rank 0" in entry["estimate"]["peak_moment"] or entry["estimate"]["peak_moment"] == "rollout"
    assert parts["critic parameters"] == parts["parameters"]
    assert parts["critic gradient buffer"] == parts["gradient buffer"] == 2 * parts["parameters"]
    assert parts["critic optimizer states"] == parts["optimizer states"]


def test_megatrons_optimizer_cpu_offload_keeps_the_moe_example_on_the_h20s_it_was_tested_on():
    """verl's Qwen3-30B-A3B example, 'tested in NNODES=1~4 * 96G H20 GPU': EP 8 over 8 GPUs with
    ``optimizer_cpu_offload`` of the whole shard under the precision-aware optimizer
    (``override_optimizer_config``): no optimizer state on the GPU, and the job fits the 96 GB it
    ran on; priced with the states on the GPU it would not."""
    entry = _check(MEGATRON_MOE, "--gpus", "8xH20")
    assert entry["status"] == "estimated"
    parts = _components(entry)
    assert "optimizer states" not in parts and "optimizer states (routed experts)" not in parts     # 0 B
    assert parts["parameters (routed experts)"] and parts["gradient buffer (routed experts)"]
    assert not [f for f in entry["findings"] if f["code"] == "VL201"]
    assert "optimizer_cpu_offload: 1 of the optimizer's shard on the host" in " ".join(entry["estimate"]["assumptions"])


def test_without_the_precision_aware_optimizer_the_main_copies_stay_on_the_gpu(tmp_path):
    """Without the precision-aware optimizer Megatron's distributed optimizer makes the fp32 main
    copies on the GPU before HybridDeviceOptimizer clones them to the host (distrib_optimizer.py):
    4 B a parameter of the shard stay, Adam's moments go."""
    text = MEGATRON_MOE.read_text().replace("use_precision_aware_optimizer=True", "use_precision_aware_optimizer=False")
    (tmp_path / "moe.sh").write_text(text)
    parts = _components(_check(tmp_path / "moe.sh", "--gpus", "8xH20"))
    experts = parts["parameters (routed experts)"] // 2           # bf16: 2 B each; their optimizer group is 1 rank
    assert parts["optimizer states (routed experts)"] == 4 * experts


def test_the_offload_hint_is_the_job_with_the_switches_written(tmp_path):
    """The hint's offload (optimizer_offload + param_offload) prices what the job would then be: the
    reference's weights go to the host with the actor's parameters (ref.megatron.param_offload
    interpolates the actor's), so the hint's peak is the peak of the job with both switches written."""
    text = MEGATRON_GRPO.read_text().replace("gpu_memory_utilization=0.6 ", "gpu_memory_utilization=0.75 ")
    (tmp_path / "share.sh").write_text(text)
    switches = ("    actor_rollout_ref.actor.megatron.optimizer_offload=True \\\n"
                "    actor_rollout_ref.actor.megatron.param_offload=True \\\n")
    (tmp_path / "both.sh").write_text(text.replace("    actor_rollout_ref.actor.use_kl_loss=True",
                                                   switches + "    actor_rollout_ref.actor.use_kl_loss=True"))
    hinted = _check(tmp_path / "share.sh", "--gpus", "8xH100", *QWEN2_7B)
    (finding,) = [f for f in hinted["findings"] if f["code"] == "VL201"]
    said = finding["hint"].split("megatron.param_offload=True fits at ")[1]
    written = _check(tmp_path / "both.sh", "--gpus", "8xH100", *QWEN2_7B)
    assert float(said.split(" GiB")[0]) == round(written["estimate"]["per_gpu_peak_bytes"] / GiB, 1)


def test_where_no_single_change_fits_the_offload_is_combined_with_the_layouts(tmp_path):
    """On 8 x A100 40 GB neither the offload nor a layout change alone fits the example: the hint
    combines them (offload + TP 4 with sequence parallel), and its peak is the job with those
    written (the reference's layout as the example keeps it)."""
    entry = _check(MEGATRON_GRPO, "--gpus", "8xA100-40GB", *QWEN2_7B)
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    combined = next(part for part in finding["hint"].split("; or ") if "tensor_model_parallel_size=4" in part)
    assert combined.startswith("actor_rollout_ref.actor.megatron.optimizer_offload=True + "
                               "actor_rollout_ref.actor.megatron.param_offload=True + ")
    switches = ("    actor_rollout_ref.actor.megatron.optimizer_offload=True \\\n"
                "    actor_rollout_ref.actor.megatron.param_offload=True \\\n"
                "    actor_rollout_ref.actor.megatron.sequence_parallel=True \\\n")
    text = MEGATRON_GRPO.read_text()
    written = text.replace("    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2 \\\n",
                           switches + "    actor_rollout_ref.actor.megatron.tensor_model_parallel_size=4 \\\n")
    assert written != text
    (tmp_path / "tp4.sh").write_text(written)
    tp4 = _check(tmp_path / "tp4.sh", "--gpus", "8xA100-40GB", *QWEN2_7B)
    said = float(combined.split(" fits at ")[1].split(" GiB")[0])
    assert said == round(tp4["estimate"]["per_gpu_peak_bytes"] / GiB, 1)


def test_lora_on_the_megatron_engine_is_not_estimated_and_says_so(tmp_path):
    text = MEGATRON_GRPO.read_text().replace("    actor_rollout_ref.actor.use_kl_loss=True",
                                             "    actor_rollout_ref.model.lora.rank=64 \\\n"
                                             "    actor_rollout_ref.actor.use_kl_loss=True")
    (tmp_path / "lora.sh").write_text(text)
    entry = _check(tmp_path / "lora.sh", "--gpus", "8xH100", *QWEN2_7B)
    assert entry["status"] == "not estimated"
    assert any("LoRA on Megatron" in f["message"] for f in entry["findings"] if f["code"] == "VL011")


def test_a_megatron_engine_rollout_too_large_is_told_in_its_own_keys(tmp_path):
    """The example with vLLM's share raised to 0.75 does not fit 80 GB at the rollout: the hints are
    the share that fits and the Megatron section's offload switches (not fsdp_config's), each run
    through the model."""
    text = MEGATRON_GRPO.read_text()
    assert "gpu_memory_utilization=0.6 " in text
    (tmp_path / "share.sh").write_text(text.replace("gpu_memory_utilization=0.6 ", "gpu_memory_utilization=0.75 "))
    entry = _check(tmp_path / "share.sh", "--gpus", "8xH100", *QWEN2_7B)
    (finding,) = [f for f in entry["findings"] if f["code"] == "VL201"]
    assert entry["estimate"]["peak_moment"] == "rollout" and finding["line"] == text.count("\n", 0, text.index(
        "gpu_memory_utilization=0.6")) + 1
    assert "actor_rollout_ref.rollout.gpu_memory_utilization=0." in finding["hint"]
    assert "actor_rollout_ref.actor.megatron.param_offload=True" in finding["hint"]
    assert "fsdp_config" not in finding["hint"]
