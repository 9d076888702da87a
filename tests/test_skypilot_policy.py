"""The SkyPilot admin policy (vramlint/integrations/skypilot.py) with the real skypilot package:
tasks are built by SkyPilot's own ``Task.from_yaml`` and handed to the policy as SkyPilot hands
them (``UserRequest``); no cloud is needed, the policy is a function of the request."""

from __future__ import annotations

import pytest

sky = pytest.importorskip("sky")

from sky import admin_policy  # noqa: E402
from sky.utils import config_utils  # noqa: E402

from conftest import DATA  # noqa: E402
from vramlint.integrations.skypilot import VramlintPolicy, task_yaml  # noqa: E402

DS = '{"zero_optimization": {"stage": 1}, "train_micro_batch_size_per_gpu": "auto", "bf16": {"enabled": "auto"}}'
TASK = """name: sft
workdir: .
resources:
  accelerators: H100:8
envs:
  MODEL: {model}
run: |
  torchrun --nproc_per_node $SKYPILOT_NUM_GPUS_PER_NODE train.py \\
    --model_name_or_path $MODEL --per_device_train_batch_size 4 \\
    --bf16 True --gradient_checkpointing False --deepspeed ds.json --max_length 4096
"""


def _request(path):
    task = sky.Task.from_yaml(str(path))
    return task, admin_policy.UserRequest(task=task, skypilot_config=config_utils.Config(), request_name=None)


def _task(folder, model: str):
    (folder / "ds.json").write_text(DS)
    (folder / "task.yaml").write_text(TASK.format(model=model))
    return folder / "task.yaml"


def test_a_task_that_fits_is_passed_on_unchanged(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    task, request = _request(_task(tmp_path, "meta-llama/Llama-3.2-1B"))
    mutated = VramlintPolicy.validate_and_mutate(request)
    assert isinstance(mutated, admin_policy.MutatedUserRequest) and mutated.task is task


def test_a_task_that_will_not_fit_is_refused_with_the_change_that_would(tmp_path, monkeypatch):
    """Llama-3.1-70B under ZeRO-1 on H100:8 at micro-batch 4: refused, with VL201 and its hint."""
    monkeypatch.chdir(tmp_path)
    _, request = _request(_task(tmp_path, "meta-llama/Llama-3.1-70B"))
    with pytest.raises(sky.exceptions.UserRequestRejectedByPolicy) as refused:
        VramlintPolicy.validate_and_mutate(request)
    message = str(refused.value)
    assert "VL201 per-GPU peak" in message and "on 8xH100-80GB" in message and "fits at" in message


def test_a_job_vramlint_cannot_judge_passes_with_a_warning_or_is_refused_when_strict(monkeypatch, capsys):
    """SkyPilot's distributed-pytorch example (a real file): torchrun of minGPT's main.py, whose
    arguments are no recipe vramlint reads, so not judged."""
    path = DATA / "launch" / "skypilot-org__skypilot" / "examples" / "distributed-pytorch" / "train.yaml"
    task, request = _request(path)
    assert task_yaml(task)["resources"]["accelerators"] == "L4:1" and task_yaml(task)["num_nodes"] == 2
    assert VramlintPolicy.validate_and_mutate(request).task is task
    assert "vramlint: warning: VL011" in capsys.readouterr().err
    monkeypatch.setenv("VRAMLINT_POLICY_STRICT", "1")
    with pytest.raises(sky.exceptions.UserRequestRejectedByPolicy):
        VramlintPolicy.validate_and_mutate(request)


def test_a_task_with_no_accelerator_is_passed_on(tmp_path, monkeypatch):
    """A CPU task (data preparation) has no GPU memory to run out of: never refused."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cpu.yaml").write_text("name: prep\nresources:\n  cpus: 8\nrun: |\n  python prepare.py\n")
    task, request = _request(tmp_path / "cpu.yaml")
    assert VramlintPolicy.validate_and_mutate(request).task is task
