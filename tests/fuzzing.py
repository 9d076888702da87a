"""Fuzzing vramlint: cases drawn by hypothesis — the real files of tests/data and examples/
mutated (values, keys, types, bytes), hostile documents, mutated model configs and settings,
command lines at their edges, filesystem oddities — each run in-process under a hang guard.

A case passes when the run keeps the promise: exit 0, 1 or 2; no traceback; no internal error
(the catch-all's message, or a VL003 finding for a file); exit 2 says why in a line. Each family
runs in a fresh process (``python tests/fuzzing.py FAMILY CASES``) so that its memory high-water
mark is its own; it prints one JSON line: cases, failures (with the case to reproduce them), and
the slowest and the largest case. ``tests/test_fuzz.py`` runs it; ``benchmarks/fuzz.py`` prints
the times and memory as a table.
"""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import resource
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from hypothesis import HealthCheck, Phase, given, seed, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
GUARD_S = 30          # a case still running after this long is a hang
EIGHT = ("--gpus", "8xH100")


class Hang(BaseException):
    """Raised by the guard's alarm; a BaseException so that no ``except Exception`` takes it."""


@dataclass(frozen=True)
class Case:
    family: str
    argv: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()       # written into the case's folder
    specials: tuple[tuple[str, str], ...] = ()      # (name, kind): fifo, folder, loop, dangling, sparse
    stdin: bytes | None = None
    stream: str = "normal"                          # standard output: normal, closed, full, ascii

    def describe(self) -> dict:
        return {"argv": list(self.argv), "specials": list(self.specials), "stream": self.stream,
                "files": {name: data[:20000].decode("utf-8", "replace") for name, data in self.files},
                "stdin": None if self.stdin is None else self.stdin[:200].decode("utf-8", "replace")}


@dataclass
class Outcome:
    code: object
    out: str
    err: str
    seconds: float
    problems: list[str] = field(default_factory=list)


# Inputs -----------------------------------------------------------------------------------------

def _real(pattern: str, root: Path = DATA / "recipes") -> list[Path]:
    return sorted(p for p in root.rglob(pattern) if p.is_file())


def _load(path: Path):
    """The file's data; None for the few real files that are templates (``{{ model_dir }}``)."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError):
        return None


def _sources() -> dict[str, list[tuple[str, object]]]:
    """Real documents by family, as (file name, parsed data)."""
    deepspeed = [p for p in _real("*.json") if "zero_optimization" in p.read_text()]
    deepspeed += [p for p in sorted((ROOT / "examples").glob("*.json")) if p.name != "cases.json"]
    yamls = _real("*.yaml") + _real("*.yml")
    texts = {p: p.read_text(encoding="utf-8") for p in yamls}
    accelerate = [p for p, t in texts.items() if "distributed_type" in t]
    recipes = [p for p, t in texts.items() if p not in accelerate]
    vllm = sorted((ROOT / "examples").glob("vllm-*.yaml"))
    out = {"deepspeed": deepspeed, "accelerate": accelerate, "recipe": recipes, "vllm": vllm,
           "model": sorted((DATA / "hf_configs").glob("*/config.json"))}
    loaded = {family: [(p.name, _load(p)) for p in paths] for family, paths in out.items()}
    return {family: [(name, doc) for name, doc in docs if isinstance(doc, dict)] for family, docs in loaded.items()}


def _keys(doc) -> set[str]:
    """Every mapping key in a document, at any depth."""
    found, stack = set(), [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            found |= {str(k) for k in node}
            stack += list(node.values())
        elif isinstance(node, list):
            stack += node
    return found


SOURCES = _sources()
KEYS = {family: sorted(set().union(*(_keys(doc) for _, doc in docs))) for family, docs in SOURCES.items()}
WORDS = ["auto", "", "none", "cpu", "nvme", "bf16", "fp16", "fp32", "no", "true", "false", "null", "1e999",
         "-1", "0", "8x80GB", "\x1b[31mred", "../../etc", "~", "${HOME}", "all-linear", "FULL_SHARD", "DEEPSPEED",
         "meta-llama/Llama-3.1-8B", "gpt2", "not/a-model", "/", ".", "x" * 300, "\u202e", "nan", "inf"]
SCALARS = st.one_of(
    st.integers(-3, 300), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 2**31, 2**63, 10**30, -10**30]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([0.0, 1e-300, 1e308, -0.5, 0.98, 1.0]),
    st.booleans(), st.none(), st.sampled_from(WORDS), st.text(max_size=24))
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(max_size=8), inner, max_size=4), max_leaves=8)


def _slots(doc) -> list[tuple[object, object]]:
    """(container, key or index) of every value in ``doc``."""
    slots, stack = [], [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for key, value in items:
            slots.append((node, key))
            stack.append(value)
    return slots


def _mutate(data, doc, keys: list[str]):
    """A few edits to ``doc``: a value replaced, a key dropped or added, a value wrapped."""
    for _ in range(data.draw(st.integers(1, 4), label="edits")):
        slots = _slots(doc)
        if not slots or not isinstance(doc, (dict, list)):
            return data.draw(VALUES, label="document")
        node, key = slots[data.draw(st.integers(0, len(slots) - 1), label="slot")]
        edit = data.draw(st.sampled_from(["value", "drop", "add", "wrap", "deepen"]), label="edit")
        if edit == "value":
            node[key] = data.draw(VALUES, label="value")
        elif edit == "drop":
            del node[key]
        elif edit == "add" and isinstance(node, dict):
            node[data.draw(st.sampled_from(keys or ["x"]), label="key")] = data.draw(VALUES, label="value")
        elif edit == "wrap":
            node[key] = data.draw(st.sampled_from([[node[key]], {"enabled": node[key]}, {"auto": node[key]}]))
        elif edit == "deepen":
            node[key] = {"a": {"b": {"c": node[key]}}}
    return doc


def _serialize(doc, as_json: bool) -> bytes:
    if as_json:
        return json.dumps(doc, allow_nan=True, default=str).encode("utf-8", "surrogatepass")
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False).encode("utf-8", "surrogatepass")


def _bytes_mutated(data, raw: bytes) -> bytes:
    """Sometimes the bytes themselves: cut short, a byte changed, junk inserted, a chunk doubled."""
    if not raw or not data.draw(st.booleans(), label="byte mutation"):
        return raw
    at = data.draw(st.integers(0, len(raw) - 1), label="at")
    edit = data.draw(st.sampled_from(["cut", "flip", "insert", "double"]), label="byte edit")
    if edit == "cut":
        return raw[:at]
    if edit == "flip":
        return raw[:at] + bytes([raw[at] ^ data.draw(st.integers(1, 255))]) + raw[at + 1:]
    if edit == "insert":
        return raw[:at] + data.draw(st.binary(max_size=16), label="junk") + raw[at:]
    return raw[:at] + raw[at:at + 64] * data.draw(st.integers(2, 50)) + raw[at:]


FORMATS = st.sampled_from(["text", "json", "sarif", "github"])


def _document_case(family: str, name_of, argv_of):
    @st.composite
    def case(draw):
        data = _Draw(draw)
        name, doc = draw(st.sampled_from(SOURCES[family]))
        doc = _mutate(data, json.loads(json.dumps(doc, default=str)), KEYS[family])
        raw = _bytes_mutated(data, _serialize(doc, name.endswith(".json")))
        target = name_of(name)
        return Case(family, ("check", target, *argv_of(draw), "--format", draw(FORMATS)), ((target, raw),))
    return case()


class _Draw:
    """``st.composite``'s draw with the ``data.draw(strategy, label=...)`` signature."""

    def __init__(self, draw) -> None:
        self._draw = draw

    def draw(self, strategy, label: str = ""):
        return self._draw(strategy)


def _training_argv(draw) -> tuple[str, ...]:
    return (*EIGHT, "--model", draw(st.sampled_from(["gpt2", "meta-llama/Llama-3.1-8B", "Qwen/Qwen3-30B-A3B"])),
            "--seq-len", str(draw(st.sampled_from([512, 2048]))))


@st.composite
def _model_case(draw):
    data = _Draw(draw)
    _, doc = draw(st.sampled_from(SOURCES["model"]))
    doc = _mutate(data, json.loads(json.dumps(doc)), KEYS["model"] + ["num_hidden_layers", "hidden_size",
                                                                    "intermediate_size", "vocab_size",
                                                                    "num_local_experts", "num_experts",
                                                                    "max_position_embeddings", "head_dim"])
    raw = _bytes_mutated(data, _serialize(doc, True))
    ds = b'{"bf16": {"enabled": true}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": 1}'
    command = draw(st.sampled_from([("check", "ds.json", *EIGHT, "--model", "m/config.json", "--seq-len", "1024"),
                                    ("model", "m/config.json"),
                                    ("estimate", "--model", "m/config.json", *EIGHT, "--seq-len", "512")]))
    return Case("model", command, (("m/config.json", raw), ("ds.json", ds)))


SETTING_KEYS = ["gpus", "model", "seq_len", "micro_batch", "format", "ignore", "select", "extend_ignore", "strict",
                "near_threshold", "overrides", "files", "kind", "download", "host_ram", "launch_config",
                "grad_accum", "zero_stage", "mixed_precision", "lora_rank", "tp", "unknown_key"]


def _toml_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return "nan" if value != value else "inf" if value == float("inf") else "-inf" if value == -float("inf") \
            else repr(value)
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + "}"
    return json.dumps("" if value is None else str(value))


@st.composite
def _settings_case(draw):
    data = _Draw(draw)
    table = draw(st.dictionaries(st.sampled_from(SETTING_KEYS), VALUES, max_size=5))
    if draw(st.booleans()):
        table.setdefault("gpus", "8xH100")
        table.setdefault("model", "gpt2")
        table.setdefault("seq_len", 512)
    overrides = draw(st.lists(st.dictionaries(st.sampled_from(["files", "model", "gpus", "ignore", "seq_len"]),
                                              VALUES, max_size=3), max_size=2))
    text = "[tool.vramlint]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in table.items())
    text += "".join("[[tool.vramlint.overrides]]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in o.items())
                    for o in overrides)
    raw = _bytes_mutated(data, text.encode("utf-8", "surrogatepass"))
    ds = b'{"bf16": {"enabled": true}, "zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'
    argv = draw(st.sampled_from([("check", "configs/ds.json"), ("check", "configs"), ("plan", "configs/ds.json"),
                                 ("check", "--config", "pyproject.toml", "configs/ds.json")]))
    return Case("settings", argv, (("pyproject.toml", raw), ("configs/ds.json", ds)))


GPUS = ["8xH100", "8x80GB", "1x" + "9" * 40 + "GB", "0xH100", "-1xH100", "8x", "x", "8xH100x", "2x8xA100-80GB",
        "99999999x80GB", "1x0GB", "1x0.0001GB", "8xNOPE", "1x1e308GB", "1xnanGB", "1xinfGB", "", "8x80TB",
        "3x2x1x80GB", "8×H100", "1x24GiB"]
NUMBERS = ["0", "-1", "1", "2", "1e9", "9" * 30, "abc", "", "1.5", "nan", "inf", "0x10", "4096", "131072"]
FLAG_VALUES = {"--gpus": GPUS, "--seq-len": NUMBERS, "--micro-batch": NUMBERS, "--grad-accum": NUMBERS,
               "--zero-stage": ["0", "3", "4", "-1", "auto"], "--mixed-precision": ["no", "bf16", "bf17"],
               "--model": ["gpt2", "meta-llama/Llama-3.1-70B", "not/a-model", "./nothing.json", "/", "..", ""],
               "--format": ["text", "json", "sarif", "github", "xml"], "--select": ["VL2", "VL999", "", ",,", "ALL"],
               "--ignore": ["VL201", "nonsense", "VL"], "--extend-ignore": ["VL3", "x"],
               "--near-threshold": ["0.9", "-1", "2", "nan", "abc"], "--host-ram": ["64GB", "0", "-5GB", "x"],
               "--tp": NUMBERS, "--lora-rank": NUMBERS, "--lora-targets": ["q,k", "", "all-linear", ",,,"],
               "--kind": ["deepspeed", "vllm", "axolotl", "bogus"], "--launch-config": ["acc.yaml", "nothing.yaml"],
               "--stdin-filename": ["x.json", "", "../../x"], "--attn": ["sdpa", "eager", "xformers"],
               "--optimizer": ["adamw", "lion"], "--weights-dtype": ["bfloat16", "int4"]}
SWITCHES = ["--strict", "--verbose", "--quiet", "-v", "-q", "--grad-checkpointing", "--load-in-4bit",
            "--empty-cache-each-step", "--help", "--version"]


@st.composite
def _cli_case(draw):
    command = draw(st.sampled_from(["check", "check", "check", "plan", "estimate", "model", "rule", "models", "gpus",
                                    "nonsense"]))
    parts: list[str] = []
    for flag in draw(st.lists(st.sampled_from(sorted(FLAG_VALUES)), max_size=6)):
        parts += [flag, draw(st.sampled_from(FLAG_VALUES[flag]))]
    parts += draw(st.lists(st.sampled_from(SWITCHES), max_size=2))
    parts += draw(st.lists(st.sampled_from(["ds.json", "ds.json", "acc.yaml", "vllm.yaml", "-", "missing.json",
                                            "VL201", "."]), max_size=3))
    parts = draw(st.permutations(parts))
    ds = b'{"bf16": {"enabled": "auto"}, "zero_optimization": {"stage": 3}, "train_micro_batch_size_per_gpu": "auto"}'
    acc = b"distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\nnum_processes: 8\n"
    files = (("ds.json", ds), ("acc.yaml", acc), ("vllm.yaml", b"model: gpt2\nmax-model-len: 1024\n"))
    stdin = draw(st.sampled_from([ds, b"", b"\xff\xfe", b"model: gpt2\n", b"[" * 100]))
    stream = draw(st.sampled_from(["normal", "normal", "normal", "closed", "full", "ascii"]))
    return Case("cli", (command, *parts), files, stdin=stdin, stream=stream)


def _alias_bomb(levels: int, width: int) -> bytes:
    lines = ["a0: &a0 [x, y]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return ("\n".join(lines) + "\n").encode()


@st.composite
def _hostile_case(draw):
    depth = draw(st.integers(1, 5000))
    kind = draw(st.sampled_from(["bomb", "deep-json", "deep-yaml-flow", "deep-yaml-block", "wide", "long", "tags",
                                 "merge", "multi", "bom", "nul", "invalid-utf8", "crlf", "hjson", "dupes", "binary"]))
    raw = {
        "bomb": lambda: _alias_bomb(draw(st.integers(2, 12)), draw(st.integers(2, 12))),
        "deep-json": lambda: b'{"zero_optimization": ' + b'{"a": ' * depth + b"1" + b"}" * depth + b"}",
        "deep-yaml-flow": lambda: b"zero_optimization: " + b"[" * depth + b"1" + b"]" * depth + b"\n",
        "deep-yaml-block": lambda: "".join(f"{'  ' * i}k{i}:\n" for i in range(min(depth, 400))).encode() + b"  x\n",
        "wide": lambda: json.dumps({"zero_optimization": {"stage": 3}, "x": list(range(draw(st.integers(
            1000, 400_000))))}).encode(),
        "long": lambda: b'{"zero_optimization": {"stage": "' + b"x" * draw(st.integers(1, 5_000_000)) + b'"}}',
        "tags": lambda: draw(st.sampled_from([b"!!python/object/apply:os.system ['true']\n",
                                              b"x: !!binary aGVsbG8=\n", b"x: !custom 1\n",
                                              b"x: !!python/name:os.system\n", b"!!set {a, b}\n"])),
        "merge": lambda: b"base: &b {stage: 3}\nzero_optimization:\n  <<: *b\n  <<: *b\n",
        "multi": lambda: b"a: 1\n---\nb: 2\n---\nzero_optimization: {stage: 2}\n",
        "bom": lambda: b"\xef\xbb\xbf" + b'{"zero_optimization": {"stage": 2}}',
        "nul": lambda: b'{"zero_optimization": {"stage": 2}}\x00\x00',
        "invalid-utf8": lambda: b'{"zero_optimization": {"stage": "\xff\xfe"}}',
        "crlf": lambda: b"zero_optimization:\r\n  stage: 3\r\n\tbad: tab\r\n",
        "hjson": lambda: b'{// c\n "zero_optimization": {"stage": 2,},\n /* x */ "bf16": {enabled: true}}',
        "dupes": lambda: b'{"zero_optimization": {"stage": 2}, "zero_optimization": {"stage": 3}}',
        "binary": lambda: draw(st.binary(min_size=1, max_size=2000)),
    }[kind]()
    name = draw(st.sampled_from(["ds.json", "config.yaml", "recipe.yml", "accelerate.yaml", "vllm.yaml"]))
    argv = ("check", name, *EIGHT, "--model", "gpt2", "--seq-len", "512", "--format", draw(FORMATS))
    return Case("hostile", argv, ((name, raw),))


@st.composite
def _filesystem_case(draw):
    special = draw(st.sampled_from(["fifo", "folder", "loop", "dangling", "sparse", "devzero", "devnull", "empty",
                                    "proc"]))
    name = "odd.json"
    files, specials = [], [(name, special)]
    if special == "empty":
        files, specials = [(name, b"")], []
    where = {"devzero": "/dev/zero", "devnull": "/dev/null", "proc": "/proc/self/status"}.get(special, name)
    argv = draw(st.sampled_from([("check", where, *EIGHT, "--model", "gpt2", "--seq-len", "512"),
                                 ("check", "--config", where, "ds.json", *EIGHT, "--model", "gpt2", "--seq-len",
                                  "512"),
                                 ("check", "ds.json", "--launch-config", where, *EIGHT),
                                 ("check", ".", *EIGHT, "--model", "gpt2", "--seq-len", "512"),
                                 ("model", where)]))
    ds = b'{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": 1}'
    return Case("filesystem", argv, tuple(files) + (("ds.json", ds),), tuple(specials))


SCRIPTS = sorted(p for p in (DATA / "launch").rglob("*") if p.suffix in (".sh", ".slurm", ".sbatch"))
# Shell that stretches a static reader: growth, nesting, quoting, arithmetic, wrappers.
SHELL_EDGES = (
    "X=a\n" + "X=$X$X\n" * 70 + "torchrun --nproc_per_node 8 train.py --model_name_or_path $X\n",
    "(" * 3000 + "torchrun x.py" + ")" * 3000 + "\n",
    "A=" + "${B:-" * 2000 + "x" + "}" * 2000 + "\ntorchrun --nproc_per_node $A t.py\n",
    "N=$((" + "(" * 2000 + "8" + ")" * 2000 + "))\ntorchrun --nproc_per_node $N t.py --per_device_train_batch_size 1\n",
    "N=$((2**64 * 2**64 / 0))\ntorchrun --nproc_per_node $N t.py\n",
    'bash -c "bash -c \'bash -c \\"torchrun --nproc_per_node 8 t.py\\"\'"\n',
    "A=(" + " --x" * 50000 + ")\ntorchrun \"${A[@]}\" t.py\n",
    "CUDA_VISIBLE_DEVICES=,,,, torchrun --nproc_per_node 999999999999999999999 t.py --per_device_train_batch_size -1\n",
    "#SBATCH --nodes=99999999999999999999\n#SBATCH --gres=gpu:0\nsrun torchrun t.py\n",
    "deepspeed --include localhost:" + ",".join(str(i) for i in range(5000)) + " t.py --deepspeed ds.json\n",
    "accelerate launch --num_processes 7 --num_machines 0 t.py --bf16\n",
    "vllm serve m --tensor-parallel-size 0 --max-model-len -5 -tp x\n",
    "srun srun srun env env A=1 nohup time timeout 5 torchrun --nnodes 1:999999 t.py\n",
    "torchrun \\\n" * 5000 + "t.py\n",
    "llamafactory-cli train missing.yaml " + " ".join(f"k{i}=v" for i in range(3000)) + "\n",
    "python -m sglang.launch_server --model-path m --tp 0 --mem-fraction-static 7 --context-length -1 "
    "--config missing.yaml --kv-cache-dtype fp4_e2m1 --page-size 0\n",
    "sglang serve --model-path gpt2 --tp-size 99999999999999999999 --dp-size x --nnodes 0 --max-total-tokens -3\n",
    "deepspeed --module openrlhf.cli.train_dpo --ds.zero_stage 9 --train.micro_batch_size -1 --data.max_len 0 "
    "--ds.lora.rank x --train.batch_size 0 --model.model_name_or_path gpt2 --ref.offload\n",
    "read -r -d '' C <<EOF\n" + "openrlhf.cli.train_sft \\\n" * 3000 + "EOF\ndeepspeed --module $C\n",
    "read -d x -r -a A <<'EOF'\n$(rm -rf /)\nEOF\ndeepspeed --module $A\n",
)


@st.composite
def _script_case(draw):
    """A real launch script (tests/data/launch), its bytes or lines mutated, or shell at the edges."""
    data = _Draw(draw)
    kind = draw(st.sampled_from(["real", "bytes", "lines", "edge"]))
    if kind == "edge":
        raw = draw(st.sampled_from(SHELL_EDGES)).encode()
    else:
        raw = draw(st.sampled_from(SCRIPTS)).read_bytes()
        if kind == "bytes":
            raw = _bytes_mutated(data, raw)
        elif kind == "lines":
            lines = raw.splitlines(keepends=True)
            at = draw(st.integers(0, max(0, len(lines) - 1)))
            edit = draw(st.sampled_from(["drop", "double", "swap", "cut-quote"]))
            if edit == "drop" and lines:
                del lines[at]
            elif edit == "double" and lines:
                lines.insert(at, lines[at] * draw(st.integers(2, 200)))
            elif edit == "swap" and len(lines) > 1:
                lines[at], lines[-1] = lines[-1], lines[at]
            elif lines:
                lines[at] = lines[at].replace(b'"', b"", 1)
            raw = b"".join(lines)
    name = draw(st.sampled_from(["train.sh", "job.sbatch", "run.slurm", "launch.bash"]))
    gpus = draw(st.sampled_from(["H100", "8xH100", "2x8xH100", "1xL4"]))
    return Case("script", ("check", name, "--gpus", gpus, "--format", draw(FORMATS)), ((name, raw),))


def _names(family: str) -> callable:
    return {"deepspeed": lambda n: "ds_config.json", "accelerate": lambda n: "accelerate.yaml",
            "vllm": lambda n: "vllm.yaml", "recipe": lambda n: n}[family]


FAMILIES = {
    "deepspeed": _document_case("deepspeed", _names("deepspeed"), _training_argv),
    "accelerate": _document_case("accelerate", _names("accelerate"), _training_argv),
    "vllm": _document_case("vllm", _names("vllm"), lambda draw: EIGHT),
    "recipe": _document_case("recipe", _names("recipe"), lambda draw: EIGHT),
    "model": _model_case(),
    "settings": _settings_case(),
    "cli": _cli_case(),
    "hostile": _hostile_case(),
    "filesystem": _filesystem_case(),
    "script": _script_case(),
}
SHARES = {"deepspeed": 0.14, "accelerate": 0.1, "vllm": 0.1, "recipe": 0.14, "model": 0.12, "settings": 0.1,
          "cli": 0.12, "hostile": 0.08, "filesystem": 0.04, "script": 0.06}


# Running ----------------------------------------------------------------------------------------

def _lay_out(case: Case, folder: Path) -> None:
    for name, data in case.files:
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    for name, kind in case.specials:
        path = folder / name
        if kind == "fifo":
            os.mkfifo(path)
        elif kind == "folder":
            path.mkdir()
        elif kind == "loop":
            os.symlink(name, path)
        elif kind == "dangling":
            os.symlink("nowhere/at/all", path)
        elif kind == "sparse":
            with open(path, "wb") as handle:
                handle.truncate(5 << 30)


def _alarm(signum, frame):
    raise Hang


class FullWriter(io.TextIOBase):
    """Standard output on a full disk (``> /dev/full``): every write fails with ENOSPC."""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")


def _stdout(stream: str):
    """What standard output is for the case: a buffer, closed (None), full, or ASCII-only."""
    if stream == "closed":
        return None
    if stream == "full":
        return FullWriter()
    if stream == "ascii":
        return io.TextIOWrapper(io.BytesIO(), encoding="ascii", errors="strict")
    return io.StringIO()


def _written(stdout) -> str:
    if isinstance(stdout, io.StringIO):
        return stdout.getvalue()
    if isinstance(stdout, io.TextIOWrapper):
        stdout.flush()
        return stdout.buffer.getvalue().decode("ascii")
    return ""


def run_case(case: Case) -> Outcome:
    """``vramlint`` run in-process in a folder of its own, the guard's alarm armed."""
    from vramlint.cli import main
    out, err = _stdout(case.stream), io.StringIO()
    before = os.getcwd()
    stdin = sys.stdin
    with tempfile.TemporaryDirectory() as folder:
        _lay_out(case, Path(folder))
        os.chdir(folder)
        if case.stdin is not None:
            sys.stdin = io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8")
        signal.signal(signal.SIGALRM, _alarm)
        signal.setitimer(signal.ITIMER_REAL, GUARD_S)
        start = time.perf_counter()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = main(list(case.argv))
        except SystemExit as exc:         # argparse: --help, --version, a refused option
            code = exc.code
        except Hang:
            code = "hang"
        except BaseException as exc:      # noqa: BLE001 - what escapes main is what the fuzz is for
            code = f"escaped {type(exc).__name__}: {exc}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            seconds = time.perf_counter() - start
            sys.stdin = stdin
            os.chdir(before)
    outcome = Outcome(code, _written(out), err.getvalue(), seconds)
    outcome.problems = problems(outcome)
    return outcome


def problems(outcome: Outcome) -> list[str]:
    """What a run did that vramlint promises it never does."""
    found = []
    if outcome.code not in (0, 1, 2, None):
        found.append(f"exit {outcome.code!r}")
    text = outcome.out + outcome.err
    if "Traceback (most recent call last)" in text:
        found.append("traceback")
    if "internal error" in outcome.err:
        found.append("internal error: " + outcome.err.strip().splitlines()[-1][:300])
    crashed = re.search(r'(VL003 error|"code": "VL003"|"ruleId": "VL003"|title=VL003)[^\n]*', outcome.out)
    if crashed:
        found.append("VL003: " + crashed[0][:300])
    if outcome.code == 2 and not outcome.err.strip() and not outcome.out.strip():
        found.append("exit 2 without a word")
    if CONTROL.search(text):
        found.append("a control sequence in the output: " + repr(CONTROL.search(text).group()))
    return found


CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")     # what reaches a terminal or a CI log as a command


def _rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def run_family(family: str, cases: int, start: int = 0) -> dict:
    """``cases`` drawn for ``family``; failures kept (the first of each kind), not raised."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("NO_COLOR", "1")
    from vramlint.cli import main  # noqa: F401 - imported before the baseline is read
    baseline = _rss()
    report = {"family": family, "cases": 0, "failures": {}, "slowest": (0.0, None), "rss_growth": (0, None)}
    times: list[float] = []

    @settings(max_examples=cases, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @seed(start)
    @given(FAMILIES[family])
    def one(case: Case) -> None:
        high = _rss()
        outcome = run_case(case)
        report["cases"] += 1
        times.append(outcome.seconds)
        for problem in outcome.problems:
            report["failures"].setdefault(problem.split(":")[0] if problem.startswith("VL003") else problem,
                                          {"problem": problem, "case": case.describe(), "stderr": outcome.err[-600:]})
        if outcome.seconds > report["slowest"][0]:
            report["slowest"] = (round(outcome.seconds, 3), case.describe())
        if _rss() > high:
            report["rss_growth"] = (_rss() - baseline, case.describe())

    one()
    report["failures"] = list(report["failures"].values())
    times.sort()
    report["median_s"] = times[len(times) // 2] if times else 0.0
    report["p99_s"] = times[int(len(times) * 0.99)] if times else 0.0
    return report


if __name__ == "__main__":
    name, count = sys.argv[1], int(sys.argv[2])
    print(json.dumps(run_family(name, count, int(sys.argv[3]) if len(sys.argv) > 3 else 0), default=str))
