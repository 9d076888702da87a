"""A gate you can trust: nothing passes silently, output is a linter's, the command line takes what
linters take, and no input breaks a run."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import CORPUS, EXAMPLES, ROOT, shared_or_skip
from vramlint.cli import main

FITS = str(EXAMPLES / "llama8b-zero3-8xh100.json")
OVER = str(EXAMPLES / "llama70b-zero1-8xh100.json")
EIGHT = ["--gpus", "8xH100", "--model", "meta-llama/Llama-3.1-8B", "--seq-len", "4096"]


def run(*args: str, stdin: str | None = None, **env) -> subprocess.CompletedProcess:
    environment = {**os.environ, **env}
    return subprocess.run([sys.executable, "-m", "vramlint", *args], capture_output=True, text=True, cwd=ROOT,
                          input=stdin, env=environment, timeout=120)


# Nothing silent ---------------------------------------------------------------------------------

def test_a_passing_file_is_one_line_naming_model_gpus_and_precision(capsys):
    assert main(["check", FITS, *EIGHT, "--format", "text"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[-1].startswith("1 file(s) checked")
    assert lines[0].startswith(f"{FITS}: fits") and "meta-llama/Llama-3.1-8B on 8xH100-80GB" in lines[0]
    assert "ZeRO-3 bf16" in lines[0]


def test_verbose_gives_the_breakdown_and_quiet_only_findings(capsys):
    main(["check", FITS, *EIGHT, "--format", "text", "--verbose"])
    verbose = capsys.readouterr().out
    assert "allocator reserve" in verbose and "plan: ZeRO-3 bf16" in verbose
    assert main(["check", OVER, *EIGHT, "--format", "text", "--quiet"]) == 1
    quiet = capsys.readouterr().out
    assert "VL201" in quiet and "file(s) checked" not in quiet and ": does not fit" not in quiet


def test_every_file_is_checked_with_its_own_gpus(tmp_path, capsys, monkeypatch):
    (tmp_path / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "8xH100"\nmodel = "llama-3.1-8b"\nseq_len = 4096\n'
                                             '[[tool.vramlint.overrides]]\nfiles = "big/*.json"\ngpus = "2x8xH100"\n'
                                             'model = "llama-3.1-70b"\n')
    (tmp_path / "big").mkdir()
    shutil.copy(OVER, tmp_path / "big" / "ds.json")
    shutil.copy(FITS, tmp_path / "ds.json")
    monkeypatch.chdir(tmp_path / "big")
    main(["check", "ds.json", "../ds.json", "--format", "json"])
    files = json.loads(capsys.readouterr().out)["files"]
    assert [f["gpus"]["nodes"] for f in files] == [2, 1]
    assert [f["model"] for f in files] == ["meta-llama/Llama-3.1-70B", "meta-llama/Llama-3.1-8B"]
    assert all(f["precision"] == "bf16" for f in files)


def test_sarif_and_github_name_what_each_file_was_checked_as(capsys, tmp_path, monkeypatch):
    spaced = tmp_path / "my configs" / "ds 70b.json"
    spaced.parent.mkdir()
    shutil.copy(OVER, spaced)
    (tmp_path / ".git").mkdir()
    monkeypatch.chdir(tmp_path)
    main(["check", "my configs/ds 70b.json", *EIGHT, "--format", "sarif"])
    run_ = json.loads(capsys.readouterr().out)["runs"][0]
    result = run_["results"][0]
    location = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert location == {"uri": "my%20configs/ds%2070b.json", "uriBaseId": "%SRCROOT%"}
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"] == tmp_path.resolve().as_uri() + "/"
    assert "checked as meta-llama/Llama-3.1-8B on 8xH100-80GB" in result["message"]["text"]
    main(["check", "my configs/ds 70b.json", *EIGHT, "--format", "github"])
    assert "(checked as meta-llama/Llama-3.1-8B" in capsys.readouterr().out


def test_a_vllm_model_that_cannot_be_read_is_a_finding_in_every_format(capsys):
    path = str(shared_or_skip(CORPUS / "vllm" / "Akikukeo1__Live-Vision-Narrator__vllm_config.yaml"))
    for fmt, words in (("github", "title=VL006"), ("sarif", '"ruleId": "VL006"'), ("text", "VL006 warning")):
        main(["check", path, "--gpus", "1xH100", "--model", "meta-llama/Llama-3.1-8B", "--format", fmt])
        assert words in capsys.readouterr().out


def test_a_peak_that_fits_only_without_the_allocators_cache_is_an_error(capsys):
    path = str(EXAMPLES / "llama13b-zero2-offload-4xa100-40gb.json")
    assert main(["check", path, *EIGHT, "--format", "json"]) == 1
    found = json.loads(capsys.readouterr().out)["files"][0]
    assert [f["code"] for f in found["findings"]] == ["VL204"]
    assert "expandable_segments" in found["findings"][0]["hint"]
    assert found["estimate"]["per_gpu_peak_bytes"] <= found["gpus"]["memory_bytes"]


def test_vllm_at_the_whole_card_is_an_error(tmp_path, capsys):
    path = tmp_path / "serve.yaml"
    path.write_text("model: meta-llama/Llama-3.1-8B\ngpu-memory-utilization: 1.0\n")
    assert main(["check", str(path), "--gpus", "1xH100", "--format", "json"]) == 1
    finding = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]
    assert finding["code"] == "VL407" and finding["line"] == 2


def precision_of(tmp_path, capsys, text: str, *flags: str) -> dict:
    path = tmp_path / "ds.json"
    path.write_text(text)
    main(["check", str(path), *EIGHT, *flags, "--format", "json"])
    return json.loads(capsys.readouterr().out)["files"][0]


def test_a_bf16_trainer_adds_the_bf16_section_an_fp16_auto_file_lacks(tmp_path, capsys):
    """transformers fills fp16: auto with false, then Accelerate's set_mixed_precision adds
    bf16 {"enabled": true}: the job trains in bf16, stated or assumed, one answer."""
    text = '{"fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'
    assert precision_of(tmp_path, capsys, text)["precision"] == "bf16"
    assert precision_of(tmp_path, capsys, text, "--mixed-precision", "bf16")["precision"] == "bf16"
    assert precision_of(tmp_path, capsys, text, "--mixed-precision", "fp16")["precision"] == "fp16"


def test_a_section_written_disabled_keeps_the_trainers_precision_off(tmp_path, capsys):
    text = ('{"bf16": {"enabled": false}, "fp16": {"enabled": "auto"}, "zero_optimization": {"stage": 2}, '
            '"train_micro_batch_size_per_gpu": 1}')
    entry = precision_of(tmp_path, capsys, text)
    assert entry["precision"] == "fp32"
    assert any("enabled False: DeepSpeed trains in fp32" in note for note in entry["estimate"]["assumptions"])


def test_a_file_without_precision_sections_is_fp32_unless_the_trainer_says(tmp_path, capsys):
    text = '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'
    assert precision_of(tmp_path, capsys, text)["precision"] == "fp32"
    assert precision_of(tmp_path, capsys, text, "--mixed-precision", "bf16")["precision"] == "bf16"


def test_accelerate_mixed_precision_no_fills_auto_with_fp32_and_says_so(tmp_path, capsys):
    (tmp_path / "ds.json").write_text('{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, '
                                      '"train_micro_batch_size_per_gpu": 1}')
    for precision in ("no", "bf16"):
        (tmp_path / f"acc_{precision}.yaml").write_text(
            "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
            f"mixed_precision: '{precision}'\nnum_processes: 8\n")
    main(["check", str(tmp_path / "acc_no.yaml"), *EIGHT, "--format", "json"])
    entry = json.loads(capsys.readouterr().out)["files"][0]
    found = [f for f in entry["findings"] if f["code"] == "VL311"]
    assert entry["precision"] == "fp32" and len(found) == 1
    assert found[0]["path"].endswith("ds.json") and "acc_no.yaml:4" in found[0]["message"]
    main(["check", str(tmp_path / "acc_bf16.yaml"), *EIGHT, "--format", "json"])
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert entry["precision"] == "bf16" and not any(f["code"] == "VL311" for f in entry["findings"])


def test_fp32_zero3_keeps_its_buffers_and_no_second_master(tmp_path, capsys):
    """ZeRO-3 without mixed precision: the fp32 partition is the optimizer's master (stage3.py
    _create_fp32_partitions), and the IPG bucket, gradient partition and gathered parameters are
    4 bytes an element; ZeRO-2 still clones its master partition (stage_1_and_2.py)."""
    rows = {}
    for stage in (2, 3):
        path = tmp_path / f"z{stage}.json"
        path.write_text(f'{{"zero_optimization": {{"stage": {stage}}}, "train_micro_batch_size_per_gpu": 1}}')
        main(["check", str(path), *EIGHT, "--format", "json"])
        entry = json.loads(capsys.readouterr().out)["files"][0]
        assert entry["precision"] == "fp32"
        rows[stage] = {c["name"]: c for c in entry["estimate"]["components"]}
    p = 8_030_261_248
    assert rows[3]["optimizer states"]["bytes"] == -(-8 * p // 8)
    assert rows[2]["optimizer states"]["bytes"] == -(-12 * p // 8)
    assert rows[3]["IPG reduce bucket"]["bytes"] == 4 * 500_000_000
    assert rows[3]["gradient partition (fp32)"]["bytes"] == -(-4 * p // 8)
    assert rows[3]["gathered parameters at the loss"]["formula"].startswith("4 B x")


# Output like a linter ---------------------------------------------------------------------------

def test_colour_follows_no_color_and_force_color():
    forced = run("check", OVER, *EIGHT, "--format", "text", FORCE_COLOR="1")
    assert "\x1b[" in forced.stdout
    plain = run("check", OVER, *EIGHT, "--format", "text", NO_COLOR="1")
    assert "\x1b[" not in plain.stdout


def test_columns_sets_the_width():
    narrow = run("check", FITS, *EIGHT, "--format", "text", "--verbose", COLUMNS="70")
    assert max(len(line) for line in narrow.stdout.splitlines() if "│" in line or "|" in line) <= 70


def test_a_stream_that_cannot_encode_more_gets_ascii():
    proc = subprocess.run([sys.executable, "-m", "vramlint", "check", OVER, *EIGHT, "--format", "text", "--verbose"],
                          capture_output=True, cwd=ROOT, env={**os.environ, "PYTHONIOENCODING": "cp1252"}, timeout=120)
    out, err = proc.stdout.decode("cp1252"), proc.stderr.decode("cp1252")
    assert proc.returncode == 1 and "internal error" not in err and "Traceback" not in err
    assert "█" not in out and "#" in out


def test_a_closed_pipe_ends_the_run_quietly_with_exit_0(tmp_path):
    """More output than a pipe holds, read by head -1: the run stops without a traceback and exits
    0, the reader having taken what it wanted (a failing file among them)."""
    for index in range(400):
        shutil.copy(FITS, tmp_path / f"ds{index:03}.json")
    shutil.copy(OVER, tmp_path / "ds999.json")
    shell = f"{sys.executable} -m vramlint check {tmp_path} {' '.join(EIGHT)} --format text --verbose | head -1"
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True, text=True, cwd=ROOT,
                          timeout=300)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.count("\n") == 1


def test_a_control_character_in_a_config_does_not_reach_the_terminal(tmp_path, capsys):
    path = tmp_path / "ds.json"
    path.write_text('{"zero_optimization": {"stage": "\\u001b[31mred"}, "train_micro_batch_size_per_gpu": 1}')
    main(["check", str(path), *EIGHT, "--format", "text"])
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b" in out


def test_rule_prints_its_documentation(capsys):
    assert main(["rule", "VL201"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("VL201 exceeds-gpu-memory (error)") and "Bad:" in text and "Good:" in text
    assert main(["rule", "fits-only-without-cache"]) == 0 and "VL204" in capsys.readouterr().out


def test_select_ignore_and_extend_ignore_as_ruff_has_them(capsys):
    path = str(EXAMPLES / "batch-arithmetic-rejected.json")

    def codes(*extra):
        main(["check", path, *EIGHT, "--format", "json", *extra])
        return {f["code"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]}
    everything = codes()
    assert {"VL201", "VL301"} <= everything
    assert codes("--select", "VL3") == {c for c in everything if c.startswith("VL3")}
    assert "VL201" not in codes("--ignore", "exceeds-gpu-memory")
    assert codes("--select", "VL2,VL3", "--extend-ignore", "VL301") == everything - {"VL301"} - \
        {c for c in everything if not c.startswith(("VL2", "VL3"))}


def test_an_unknown_rule_is_refused(tmp_path, capsys, monkeypatch):
    assert main(["check", FITS, *EIGHT, "--ignore", "VL999"]) == 2
    assert "no rule 'VL999'" in capsys.readouterr().err
    (tmp_path / "pyproject.toml").write_text('[tool.vramlint]\nignore = ["exceeds-gpu-memroy"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", FITS, *EIGHT]) == 2


def test_a_json_file_says_its_suppressions_as_a_key_without_vl002(tmp_path, capsys):
    config = json.loads(Path(OVER).read_text())
    path = tmp_path / "ds.json"
    path.write_text(json.dumps({**config, "vramlint": {"disable": ["VL201"]}}, indent=2))
    assert main(["check", str(path), *EIGHT, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"][0]["findings"] == []


# Command-line habits ----------------------------------------------------------------------------

def test_options_anywhere_among_the_files(capsys):
    assert main(["check", FITS, "--format", "json", OVER, *EIGHT]) == 1
    assert [f["path"] for f in json.loads(capsys.readouterr().out)["files"]] == [FITS, OVER]


def test_a_folder_is_walked_with_the_hooks_patterns_and_each_file_checked_once(tmp_path, capsys):
    (tmp_path / "configs").mkdir()
    shutil.copy(FITS, tmp_path / "configs" / "ds.json")
    (tmp_path / "configs" / "config.json").write_text('{"model_type": "llama", "architectures": ["LlamaForCausalLM"], '
                                                        '"hidden_size": 4096}')     # a model's: walked, skipped by content
    (tmp_path / "notes.txt").write_text("x")
    main(["check", str(tmp_path), str(tmp_path / "configs" / "ds.json"), *EIGHT, "--format", "json"])
    files = json.loads(capsys.readouterr().out)["files"]
    assert [Path(f["path"]).name for f in files] == ["config.json", "ds.json"]
    assert files[0]["status"] == "skipped" and files[0]["notes"][0].startswith("a model's config.json (model_type llama)")


def test_standard_input_with_a_name(capsys):
    proc = run("check", "-", "--stdin-filename", "configs/ds.json", *EIGHT, "--format", "json",
               stdin=Path(OVER).read_text())
    entry = json.loads(proc.stdout)["files"][0]
    assert proc.returncode == 1 and entry["path"] == "configs/ds.json"
    assert entry["findings"][0]["path"] == "configs/ds.json" and entry["findings"][0]["line"] == 2


# Unbreakable ------------------------------------------------------------------------------------

def test_one_files_crash_is_its_own_finding_and_the_run_goes_on(tmp_path, capsys, monkeypatch):
    import vramlint.jobs as jobs
    real = jobs.check_document

    def broken(document, result, ctx):
        if document.path.endswith("broken.json"):
            raise RuntimeError("a bug")
        return real(document, result, ctx)
    monkeypatch.setattr(jobs, "check_document", broken)
    shutil.copy(FITS, tmp_path / "broken.json")
    assert main(["check", OVER, str(tmp_path / "broken.json"), *EIGHT, "--format", "json"]) == 1
    files = json.loads(capsys.readouterr().out)["files"]
    assert [f["code"] for f in files[0]["findings"]] == ["VL201"]
    assert [f["code"] for f in files[1]["findings"]] == ["VL003"] and "RuntimeError: a bug" in \
        files[1]["findings"][0]["message"]


def test_a_file_that_cannot_be_read_does_not_hide_the_others(tmp_path, capsys):
    code = main(["check", OVER, str(tmp_path / "missing.json"), *EIGHT, "--format", "json"])
    out = capsys.readouterr()
    assert code == 2 and "cannot read" in out.err
    assert [f["code"] for f in json.loads(out.out)["files"][0]["findings"]] == ["VL201"]


@pytest.mark.parametrize("name, text", [
    ("bomb.yaml", "a: &a [1,1,1,1,1,1,1,1,1]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]\n" for i in range(7))),
    ("deep.json", "[" * 10_000),
    ("deep.yaml", "- " * 10_000 + "x\n"),
    ("big.json", "[" + "1," * 2_500_000 + "1]"),
])
def test_inputs_past_a_configs_limits_are_refused_with_a_finding(tmp_path, capsys, name, text):
    path = tmp_path / name
    path.write_text(text)
    assert main(["check", str(path), *EIGHT, "--format", "json"]) == 1
    assert [f["code"] for f in json.loads(capsys.readouterr().out)["files"][0]["findings"]] == ["VL004"]


def test_a_pipe_or_a_device_is_not_read(tmp_path, capsys):
    fifo = tmp_path / "ds.json"
    os.mkfifo(fifo)
    assert main(["check", str(fifo), "/dev/zero", *EIGHT, "--format", "json"]) == 1
    files = json.loads(capsys.readouterr().out)["files"]
    assert [[f["code"] for f in entry["findings"]] for entry in files] == [["VL004"], ["VL004"]]


def test_a_model_past_any_real_one_is_refused_in_one_line(tmp_path, capsys):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 100_000,
                                  "num_attention_heads": 32, "intermediate_size": 11008, "vocab_size": 32000}))
    assert main(["model", str(config)]) == 2
    err = capsys.readouterr().err
    assert "num_hidden_layers" in err and err.count("\n") == 1


# Found by the fuzz run (tests/fuzzing.py), each once a crash, a hang or gigabytes read ----------

def test_settings_are_read_as_configs_are(tmp_path, capsys):
    """--config on a 5 GB sparse file read it whole (10 GB of memory); now the 4 MiB cap."""
    sparse = tmp_path / "settings.toml"
    with open(sparse, "wb") as handle:
        handle.truncate(5 << 30)
    assert main(["check", "--config", str(sparse), FITS, *EIGHT]) == 2
    err = capsys.readouterr().err
    assert "larger than 4 MiB" in err and err.count("\n") == 1


def test_a_symlink_loop_and_a_fifo_in_the_repository_break_nothing(tmp_path, capsys, monkeypatch):
    (tmp_path / "loop.json").symlink_to("loop.json")
    os.mkfifo(tmp_path / "recipe.yaml")          # the scan for recipes that name ds.json must not open it
    shutil.copy(FITS, tmp_path / "ds.json")
    monkeypatch.chdir(tmp_path)
    assert main(["check", ".", *EIGHT, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert "internal error" not in err and [e["path"] for e in json.loads(out)["files"]] == ["./ds.json"]


@pytest.mark.parametrize("text, key", [
    ("per_device_train_batch_size: {a: 1}\n", "per_device_train_batch_size"),
    ("lora_dropout: {enabled: 0.05}\nuse_peft: true\n", "lora_dropout"),
    ("torch_dtype: {auto: null}\n", "torch_dtype"),
    ("num_generations: 8\nuse_vllm: true\nmax_completion_length: [1024]\n", "max_completion_length"),
])
def test_a_recipe_value_of_the_wrong_kind_is_a_finding(tmp_path, capsys, text, key):
    path = tmp_path / "recipe.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nlearning_rate: 1.0e-5\noutput_dir: out\n"
                    "gradient_accumulation_steps: 2\n" + text)
    assert main(["check", str(path), "--gpus", "8xH100", "--format", "json"]) == 1
    findings = json.loads(capsys.readouterr().out)["files"][0]["findings"]
    assert [(f["code"], f["message"].split(":")[0]) for f in findings] == [("VL102", key)]


def test_an_accelerate_zero_stage_of_the_wrong_kind_is_said(tmp_path, capsys):
    path = tmp_path / "accelerate.yaml"
    path.write_text("distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: {a: 3}\nnum_processes: 8\n")
    main(["check", str(path), *EIGHT, "--format", "json"])
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert not any(f["code"] == "VL003" for f in entry["findings"])
    assert any("zero_stage must be 0, 1, 2 or 3" in note for note in entry["notes"])


def test_a_vllm_configs_model_loses_only_to_a_stated_model_and_says_so(tmp_path, capsys, monkeypatch):
    """--model named on the command line wins over the file's model with VL006 (it used to lose to it
    silently); the settings' default model never stands in for a model the file names (VL005, an
    error: the job is not estimated, so it does not pass; --warn VL005 lets it pass as a warning)."""
    path = tmp_path / "vllm.yaml"
    path.write_text("model: Qwen/Qwen2.5-7B-Instruct\nmax-model-len: 8192\n")
    main(["check", str(path), "--gpus", "1xH100", "--model", "meta-llama/Llama-3.1-8B", "--format", "json"])
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert entry["model"] == "meta-llama/Llama-3.1-8B" and [f["code"] for f in entry["findings"]] == ["VL006"]
    path.write_text("model: /checkpoints/not-here\nmax-model-len: 8192\n")
    (tmp_path / "pyproject.toml").write_text('[tool.vramlint]\ngpus = "1xH100"\nmodel = "meta-llama/Llama-3.1-8B"\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", "vllm.yaml", "--format", "json"]) == 1
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert [f["code"] for f in entry["findings"]] == ["VL005"] and "serving" not in entry
    assert entry["status"] == "not estimated"
    assert main(["check", "vllm.yaml", "--format", "json", "--warn", "VL005"]) == 0
    entry = json.loads(capsys.readouterr().out)["files"][0]
    assert [(f["code"], f["severity"]) for f in entry["findings"]] == [("VL005", "warning")]


def test_standard_inputs_own_suppressions_apply(tmp_path, capsys, monkeypatch):
    """The directives come from the text read on standard input, not from a file of that name."""
    monkeypatch.chdir(tmp_path)
    text = json.dumps({"vramlint": {"disable": ["VL201"]}, **json.loads(Path(OVER).read_text())})
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    assert main(["check", "-", "--stdin-filename", "ds.json", *EIGHT, "--format", "json"]) == 0
    assert not any(f["code"] == "VL201" for f in json.loads(capsys.readouterr().out)["files"][0]["findings"])


def test_the_verdict_names_the_micro_batch_and_says_when_it_was_assumed(tmp_path, capsys):
    main(["check", FITS, *EIGHT, "--format", "text"])
    assert "ZeRO-3 bf16, micro-batch 1 x 4,096 tokens" in capsys.readouterr().out
    path = tmp_path / "ds.json"
    path.write_text('{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, '
                    '"train_micro_batch_size_per_gpu": "auto"}')
    main(["check", str(path), *EIGHT, "--format", "text"])
    out = capsys.readouterr().out
    assert "micro-batch 1 (assumed) x 4,096 tokens" in out
    assert "VL305" in out and "bf16.enabled" in out        # the auto precision, said with the other autos


def test_an_optimizer_vramlint_does_not_price_is_said_not_taken_for_adamw(tmp_path, capsys):
    path = tmp_path / "recipe.yaml"
    path.write_text("model_name_or_path: Qwen/Qwen2.5-1.5B-Instruct\nlearning_rate: 1.0e-5\noutput_dir: out\n"
                    "per_device_train_batch_size: 2\noptim: lion_32bit\n")
    main(["check", str(path), "--gpus", "8xH100", "--format", "json"])
    finding = json.loads(capsys.readouterr().out)["files"][0]["findings"][0]
    assert finding["code"] == "VL210" and "'lion_32bit'" in finding["message"] and finding["line"] == 5
