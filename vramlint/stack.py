"""The software stack an estimate is made for: the versions of vLLM, transformers, torch,
DeepSpeed, PEFT, bitsandbytes and TRL the job runs on, each with where it was read.

Teams pin a release and keep it for months, and what a job needs changes from release to release
(vLLM's start-up budget, transformers' loss, bitsandbytes' saved inputs). A version is taken from,
in order: the command line (``--vllm-version``, ``--transformers-version``), the settings
(``[tool.vramlint] vllm_version`` ...), the repository's own pins (requirements*.txt, pyproject
dependencies, uv.lock, poetry.lock, a Dockerfile's ``pip install`` line), the installed packages
(their dist-info metadata, never an import), and the current release vramlint models.
"""

from __future__ import annotations

import os
import re
import sys
import tomllib
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from vramlint.documents import MOST_BYTES
from vramlint.plan import Plan
from vramlint.vendored import vendored_versions

# The releases vramlint models when nothing else says (each module names the version it read).
CURRENT = {"vllm": "0.19.0", "transformers": "5.24.0", "torch": "2.13.0", "deepspeed": "0.19.8", "peft": "0.21.2",
           "bitsandbytes": "0.50.2", "trl": "1.16.0", "llamafactory": "0.9.5", "sglang": "0.5.23"}
PACKAGES = tuple(CURRENT)
_VERSION = re.compile(r"^\d+(\.\d+){0,3}")
_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?\s*(.*)$")
_SPEC = re.compile(r"(===|==|~=|>=|<=|!=|<|>)\s*v?([0-9][0-9A-Za-z.\-+*]*)")
# Which bound of a specifier set names the release a fresh install gets: an exact pin, else the
# newest an upper bound allows (pip takes the newest), else the compatible or lower bound.
_PREFERENCE = ("===", "==", "<=", "~=", ">=")


@dataclass(frozen=True)
class Pinned:
    """One package's version and where it was read ("--vllm-version", "requirements.txt:3", ...)."""

    version: str
    origin: str
    exact: bool = True        # == / a lock file / installed; False for a lower bound (>=, ~=)


@dataclass(frozen=True)
class Stack:
    versions: dict[str, Pinned] = field(default_factory=dict)

    def version(self, package: str) -> str:
        pinned = self.versions.get(package)
        return pinned.version if pinned else CURRENT[package]

    def origin(self, package: str) -> str:
        pinned = self.versions.get(package)
        return pinned.origin if pinned else f"vramlint's modelled release ({CURRENT[package]})"

    def release(self, package: str) -> tuple[int, ...]:
        """The version as numbers (``0.6.4.post1`` -> (0, 6, 4)); an unparsable one is the current."""
        return parse_version(self.version(package)) or parse_version(CURRENT[package])

    def words(self, package: str) -> str:
        return f"{package} {self.version(package)} ({self.origin(package)})"


def parse_version(text: str) -> tuple[int, ...] | None:
    match = _VERSION.match(str(text).strip().lstrip("v"))
    return tuple(int(part) for part in match.group(0).split(".")) if match else None


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement(line: str) -> tuple[str, str, bool] | None:
    """``transformers>=4.41.2,<=4.45.2 ; marker`` -> ("transformers", "4.45.2", False): the package
    and the release its specifiers name (``_PREFERENCE``), and whether that is an exact pin; None
    for a line whose environment marker excludes the job's environment (``applies``)."""
    text = line.split("#", 1)[0]
    requirement_text, _, marker = text.partition(";")
    match = _NAME.match(requirement_text)
    if not match:
        return None
    if marker.strip() and _norm(match[1]) in PACKAGES and not applies(marker):   # packaging only when it matters
        return None
    specs = {op: version for op, version in _SPEC.findall(match[2])}
    op = next((op for op in _PREFERENCE if op in specs and "*" not in specs[op]), None)
    return (_norm(match[1]), specs[op], op in ("==", "===")) if op else None


def applies(marker: str) -> bool:
    """Whether a PEP 508 environment marker (``python_version<'3.10'``) holds, evaluated by
    ``packaging`` for the interpreter running the check (a job's own Python is at least the 3.10
    vramlint needs, as is any recent training stack); an unreadable marker counts as holding."""
    from packaging.markers import InvalidMarker, Marker
    try:
        return Marker(marker.strip()).evaluate()
    except (InvalidMarker, ValueError, TypeError, KeyError):
        return True


def _requirements(text: str, where: str) -> dict[str, Pinned]:
    found: dict[str, Pinned] = {}
    for number, line in enumerate(text.splitlines(), 1):
        parsed = requirement(line)
        if parsed and parsed[0] in PACKAGES:
            found.setdefault(parsed[0], Pinned(parsed[1], f"{where}:{number}", parsed[2]))
    return found


def _pyproject(text: str, where: str) -> dict[str, Pinned]:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    project = data.get("project", {}) if isinstance(data.get("project"), dict) else {}
    deps = list(project.get("dependencies") or [])      # the job's own; extras are tools, not the job
    poetry = data.get("tool", {}).get("poetry", {}) if isinstance(data.get("tool"), dict) else {}
    for name, spec in (poetry.get("dependencies") or {}).items():
        version = spec.get("version") if isinstance(spec, dict) else spec
        if isinstance(version, str):
            deps.append(f"{name}{'' if version[:1] in '=<>~^' else '=='}{version.lstrip('^')}")
    found = {}
    lines = text.splitlines()
    for dep in deps:
        parsed = requirement(str(dep))
        if parsed and parsed[0] in PACKAGES:
            number = next((n for n, line in enumerate(lines, 1) if f'"{dep}"' in line), None)
            found.setdefault(parsed[0], Pinned(parsed[1], f"{where}:{number}" if number else where, parsed[2]))
    return found


def _lock(text: str, where: str) -> dict[str, Pinned]:
    """uv.lock and poetry.lock: ``[[package]]`` tables with ``name`` and ``version``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return {}
    found = {}
    for entry in data.get("package", []) if isinstance(data.get("package"), list) else []:
        name, version = _norm(str(entry.get("name", ""))), entry.get("version")
        if name in PACKAGES and isinstance(version, str):
            found.setdefault(name, Pinned(version, f"{where} ({name} {version})"))
    return found


def _dockerfile(text: str, where: str) -> dict[str, Pinned]:
    found = {}
    for number, line in enumerate(text.splitlines(), 1):
        if "pip" not in line or "install" not in line:
            continue
        for token in re.findall(r"[A-Za-z0-9_.\-\[\]]+(?:==|>=|~=|<=)[0-9][0-9A-Za-z.\-+]*", line.replace('"', " ")):
            for name, pinned in _requirements(token, where).items():
                found.setdefault(name, Pinned(pinned.version, f"{where}:{number}", pinned.exact))
    return found


def _reader(path: Path):
    name = path.name
    if name == "pyproject.toml":
        return _pyproject
    if name in ("uv.lock", "poetry.lock"):
        return _lock
    if name.startswith("Dockerfile"):
        return _dockerfile
    return _requirements


PIN_ORDER = ("uv.lock", "poetry.lock", "requirements*.txt", "requirements/*.txt", "pyproject.toml", "Dockerfile*")


def repository_pins(root: Path) -> dict[str, Pinned]:
    """The pins the repository's own files state, lock files first (exact), then the rest; read
    once per set of pin files as they stand (every file of a check asks for its repository's)."""
    files = []
    for pattern in PIN_ORDER:
        for path in sorted(root.glob(pattern)):
            try:
                stat = path.stat()
            except OSError:
                continue
            if path.is_file() and stat.st_size <= MOST_BYTES:
                files.append((path, stat.st_mtime_ns, stat.st_size))
    return _pins(root, tuple(files))


@lru_cache(maxsize=32)
def _pins(root: Path, files: tuple[tuple[Path, int, int], ...]) -> dict[str, Pinned]:
    found = {name: Pinned(version, f"{where} (the repository's own copy)")
             for name, (version, where) in vendored_versions(root).items()}
    for path, _, _ in files:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for name, pinned in _reader(path)(text, str(path.relative_to(root))).items():
            if name not in found or (pinned.exact and not found[name].exact):
                found[name] = pinned
    return found


@lru_cache(maxsize=1)
def installed() -> dict[str, Pinned]:
    """The modelled packages installed beside vramlint, as ``importlib.metadata.version`` finds
    them: the first ``NAME-*.dist-info`` (or ``.egg-info``) on ``sys.path``, its ``Version:``
    header. Read here rather than through ``importlib.metadata``, whose import (the email parser)
    costs a hook more than a bare interpreter's start-up."""
    wanted = {_normal(name): name for name in PACKAGES}
    found: dict[str, Pinned] = {}
    for entry in sys.path:
        try:
            children = sorted(os.listdir(entry or "."))
        except OSError:                 # a zip file, a folder gone
            continue
        for child in children:
            stem, _, kind = child.rpartition(".")
            name = wanted.get(_normal(stem.split("-", 1)[0])) if kind in ("dist-info", "egg-info") else None
            if name and name not in found:
                version = _metadata_version(Path(entry or ".", child))
                if version:
                    found[name] = Pinned(version, "installed here")
    return found


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares it."""
    return re.sub(r"[-_.]+", "-", name).lower()


def _metadata_version(folder: Path) -> str | None:
    """The ``Version:`` header of a distribution's METADATA (PKG-INFO for an egg-info, which may
    be the file itself)."""
    for path in (folder / "METADATA", folder / "PKG-INFO", folder):
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    if line.startswith("Version:"):
                        return line.split(":", 1)[1].strip()
                    if not line.strip():       # the headers end at the first blank line
                        break
        except OSError:
            continue
    return None


def stack_for(values: dict, path: str | None = None) -> Stack:
    """The stack of the job a file describes (its repository's pins), or with no file, of the
    repository the command runs in."""
    from vramlint.repository import root_of
    target = Path(path) if path and Path(path).is_file() else Path.cwd() / "-"
    return resolve_stack(values, root_of(target))


def resolve_stack(values: dict, root: Path | None) -> Stack:
    """Each package's version: a flag or setting (``<name>_version``), else the repository's
    pins, else what is installed here, else the current release."""
    pins = repository_pins(root) if root is not None else {}
    here = installed()
    versions = {}
    for name in PACKAGES:
        said = values.get(f"{name}_version")
        if said:
            versions[name] = Pinned(str(said), f"--{name}-version / {name}_version")
        elif name in pins:
            versions[name] = pins[name]
        elif name in here:
            versions[name] = here[name]
    return Stack(versions)


# The releases each package's mechanisms are modelled over (older or newer: the nearest, said).
MODELLED = {"transformers": ((4, 40), (5, 24)), "vllm": ((0, 6), (0, 19)), "bitsandbytes": ((0, 42), (0, 50)),
            "sglang": ((0, 4), (0, 5, 23))}


def unmodelled(stack: Stack, package: str) -> str | None:
    """Why a version is not one vramlint models (unparsable, or outside ``MODELLED``), else None."""
    text = stack.version(package)
    release = parse_version(text)
    if release is None:
        return f"{package} {text!r} ({stack.origin(package)}) is no version vramlint can read: modelled as {CURRENT[package]}"
    low, high = MODELLED.get(package, ((0,), (999,)))
    if release[:len(low)] < low or release[:len(high)] > high:
        nearest = ".".join(map(str, low if release[:len(low)] < low else high))
        return (f"{package} {text} ({stack.origin(package)}) is outside the releases vramlint models: modelled as "
                f"{nearest}")
    return None


def plan_for_stack(plan: Plan, stack: Stack) -> Plan:
    """The plan as the stack's releases run it, and an assumption naming them:
    - transformers up to 4.48: the loss also makes a shifted fp32 copy of the logits (memory/parts/loss.py);
    - transformers up to 4.44: an inference prefill computes every prompt position's logits, fp32;
    - transformers before 4.54: SDPA is given repeat_kv's full-head k and v (and keeps them);
    - transformers 4.53.1 to 4.57, a step without attention_mask or cache: SDPA is given a causal
      mask built in ``masking_utils`` (``find_packed_sequence_indices`` never returns None, so the
      is_causal skip is off: 4.57.6 masking_utils.py:637-661, 820-822; fixed by 5.0.0's skip for
      non-packed sequences), kept per layer, and 4.54's enable_gqa falls back to repeat_kv;
    - bitsandbytes up to 0.43.1: MatMul4Bit keeps each 4-bit linear's input.
    A framework that runs its own model code (``Plan.model_code``: LitGPT) gets no transformers item."""
    changes: dict = {}
    notes: list[str] = []
    if plan.model_code == "transformers":
        _transformers_items(plan, stack, changes, notes)
    if plan.mode == "train" and plan.load_in_4bit and stack.release("bitsandbytes") < (0, 43, 2):
        changes["bnb_keeps_input"] = True
        notes.append(f"{stack.words('bitsandbytes')}: MatMul4Bit keeps each 4-bit linear's input for backward "
                     "(until 0.43.2)")
    if not notes:
        runs = [stack.words("transformers")] if plan.model_code == "transformers" else []
        notes.append("stack: " + ", ".join(runs + [stack.words("torch")]))
    return plan.with_changes(**changes, assumptions=plan.assumptions + tuple(notes))


def _transformers_items(plan: Plan, stack: Stack, changes: dict, notes: list[str]) -> None:
    """``plan_for_stack``'s transformers items (its docstring), where transformers' model code runs."""
    tf = stack.release("transformers")
    if plan.mode == "train" and plan.loss == "full" and tf < (4, 49):
        changes["loss"] = "full-4.48"
        notes.append(f"{stack.words('transformers')}: the loss also makes a shifted fp32 copy of the logits "
                     "(removed in 4.49.0)")
    if plan.mode == "train" and plan.attn == "sdpa" and tf < (4, 54) and plan.model.block.default_attn != "eager":
        changes["sdpa_repeat_kv"] = True
        notes.append(f"{stack.words('transformers')}: SDPA keeps repeat_kv's full-head copies of k and v (grouped "
                     "heads passed to SDPA expanded until 4.54.0)")
    if plan.mode == "train" and plan.attn == "sdpa" and not plan.attention_mask and (4, 53, 1) <= tf < (5,) \
            and stack.release("torch") >= (2, 6) and plan.model.block.default_attn != "eager":
        changes.update(sdpa_causal_mask=True, sdpa_repeat_kv=True)
        notes.append(f"{stack.words('transformers')}: with no attention_mask and no cache, transformers builds SDPA a "
                     "b x s x s causal mask (its packed-sequence check never returns None: 4.53.1 until 5.0), which "
                     "each layer keeps in the compute dtype, with repeat_kv's full-head k and v")
    if plan.quantized_base and plan.model.is_moe and tf < (5,):
        changes["quantized_experts"] = True
        notes.append(f"{stack.words('transformers')}: each routed expert is an nn.Linear, which bitsandbytes "
                     "quantizes (transformers 5 fuses them into 3-D parameters it leaves in the load dtype)")
    if plan.mode == "infer" and tf < (4, 45):
        changes["prompt_logits"] = True
        notes.append(f"{stack.words('transformers')}: the prefill computes the logits of every prompt position "
                     "(logits_to_keep arrived in 4.45.0)")
