"""[tool.vramlint] settings: discovery, validation, per-file overrides, merge order."""

from __future__ import annotations

import pytest

from conftest import EXAMPLES
from vramlint.cli import main
from vramlint.errors import UsageError
from vramlint.settings import load_settings, merge

OVER = str(EXAMPLES / "llama70b-zero1-8xh100.json")


def write(tmp_path, text: str):
    (tmp_path / "pyproject.toml").write_text(text)
    return tmp_path


def test_table_is_found_in_the_nearest_pyproject(tmp_path):
    write(tmp_path, '[tool.vramlint]\ngpus = "8xH100"\nmodel = "llama-3.1-70b"\nseq_len = 4096\n')
    nested = tmp_path / "configs" / "ds"
    nested.mkdir(parents=True)
    values = load_settings(start=nested).for_file("x.json")
    assert values["gpus"] == "8xH100" and values["seq_len"] == 4096
    assert values["near_threshold"] == 0.90                      # built-in default beneath


def test_unknown_key_is_rejected_by_name_with_a_suggestion(tmp_path):
    write(tmp_path, '[tool.vramlint]\nseqlen = 4096\n')
    with pytest.raises(UsageError, match="unknown setting 'seqlen'.*did you mean 'seq_len'"):
        load_settings(start=tmp_path)


def test_wrong_type_names_the_key(tmp_path):
    write(tmp_path, '[tool.vramlint]\nseq_len = "long"\n')
    with pytest.raises(UsageError, match="seq_len"):
        load_settings(start=tmp_path)


def test_first_matching_override_applies_and_command_line_wins(tmp_path):
    write(tmp_path, '[tool.vramlint]\ngpus = "8xH100"\nmodel = "llama-3.1-8b"\nseq_len = 2048\n'
                    '[[tool.vramlint.overrides]]\nfiles = "configs/70b/*.json"\nmodel = "llama-3.1-70b"\n'
                    '[[tool.vramlint.overrides]]\nfiles = "configs/*"\nmodel = "never-reached"\n')
    settings = load_settings(start=tmp_path)
    assert settings.for_file("configs/70b/z3.json")["model"] == "llama-3.1-70b"
    assert settings.for_file("other.json")["model"] == "llama-3.1-8b"
    merged = merge(settings.for_file("configs/70b/z3.json"), {"model": "qwen3-8b", "seq_len": None})
    assert merged["model"] == "qwen3-8b" and merged["seq_len"] == 2048


def test_check_needs_no_flags_with_settings(tmp_path, monkeypatch, capsys):
    write(tmp_path, '[tool.vramlint]\ngpus = "8xH100"\nmodel = "meta-llama/Llama-3.1-70B"\nseq_len = 4096\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", OVER]) == 1
    assert "VL201" in capsys.readouterr().out


def test_ignored_rule_does_not_fail(tmp_path, monkeypatch, capsys):
    write(tmp_path, '[tool.vramlint]\ngpus = "8xH100"\nmodel = "meta-llama/Llama-3.1-70B"\nseq_len = 4096\n'
                    'ignore = ["exceeds-gpu-memory"]\n')
    monkeypatch.chdir(tmp_path)
    assert main(["check", OVER]) == 0


def test_explicit_config_file(tmp_path, capsys):
    cfg = tmp_path / "vramlint.toml"
    cfg.write_text('gpus = "8xH100"\nmodel = "meta-llama/Llama-3.1-70B"\nseq_len = 4096\n')
    assert main(["check", OVER, "--config", str(cfg)]) == 1


def test_missing_gpus_is_a_usage_error(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["check", OVER, "--model", "llama-3.1-8b"]) == 2
    assert "--gpus not given" in capsys.readouterr().err


def test_lora_dropout_is_a_probability(tmp_path):
    write(tmp_path, '[tool.vramlint]\nlora_dropout = 0.05\n')
    assert load_settings(start=tmp_path).for_file("x.json")["lora_dropout"] == 0.05
    write(tmp_path, '[tool.vramlint]\nlora_dropout = 1.5\n')
    with pytest.raises(UsageError, match="lora_dropout"):
        load_settings(start=tmp_path)


def test_overrides_match_relative_to_the_settings_folder_from_anywhere(tmp_path, monkeypatch):
    """Run from a sub-folder, a 70B config is still checked as the 70B override says, not as the
    repository's 8B default; a pattern with a slash is anchored at the settings' folder and ``*``
    stays within one folder (gitignore rules)."""
    write(tmp_path, '[tool.vramlint]\nmodel = "llama-3.1-8b"\n[[tool.vramlint.overrides]]\nfiles = "configs/70b/*.json"\n'
                    'model = "llama-3.1-70b"\n[[tool.vramlint.overrides]]\nfiles = ["*405b*"]\nmodel = "llama-3.1-405b"\n')
    (tmp_path / "configs" / "70b" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "configs")
    settings = load_settings()
    assert settings.for_file("70b/ds.json")["model"] == "llama-3.1-70b"
    assert settings.for_file("70b/deep/ds.json")["model"] == "llama-3.1-8b"          # * does not cross /
    assert settings.for_file("../other/configs/70b/ds.json")["model"] == "llama-3.1-8b"   # anchored
    assert settings.for_file("some/where/ds_405b.json")["model"] == "llama-3.1-405b"     # no slash: any depth
