"""Which model a name means, in the order a user expects: a local path, the offline catalog, the
Hugging Face cache, and — only when the user allows it — the Hub.

The cache is read with the standard library, as huggingface_hub lays it out (huggingface_hub 2.4.0
``file_download.py``: ``<cache>/models--{org}--{name}/refs/<revision>`` holds the commit,
``snapshots/<commit>/config.json`` the file), where huggingface_hub itself looks: ``HF_HUB_CACHE``,
else ``HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub`` (``constants.py:158-184``). So a model that transformers, vLLM or the
``hf`` CLI has fetched resolves with no flag and no network, at the revision a recipe pins.

A download (``--download``, or ``download = true`` in the settings) goes through huggingface_hub,
imported only then: ``config.json`` and the small side files that shape memory, never weights, with
the user's own token (huggingface_hub reads it as it always does), never while ``HF_HUB_OFFLINE`` is
set. A LoRA adapter repository (``adapter_config.json``, no ``config.json``) resolves to its base
model with the adapter's weights counted as loaded.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from vramlint.errors import ModelNotFound, UsageError
from vramlint.models.peft import PEFT_DEFAULT_RANK, peft_default_targets
from vramlint.models.shape import ModelShape

SIDE_FILES = ("hf_quant_config.json", "model.safetensors.index.json", "adapter_config.json")
COMMIT = re.compile(r"[0-9a-f]{40}")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?")
MOST_ADAPTER_HOPS = 4          # an adapter on an adapter on ...: a loop would never end
# First folders of the paths recipes write for a model an earlier run made (LLaMA-Factory's saves/,
# the Trainer's output_dir, merged and exported checkpoints): ``saves/llama3-8b/lora`` is a path on
# the machine that ran the job, never a Hub id, so the Hub is not asked for it.
LOCAL_ROOTS = frozenset({"output", "outputs", "saves", "save", "checkpoints", "checkpoint", "ckpt", "ckpts", "models",
                         "model", "exp", "exps", "experiments", "runs", "results", "work_dirs", "pretrained",
                         "pretrained_models", "weights", "data", "tmp", "cache", "merged", "export", "exports"})


def hub_cache() -> Path:
    """The cache huggingface_hub reads and writes, from the environment as it reads it."""
    env = os.environ
    home = env.get("HF_HOME") or os.path.join(env.get("XDG_CACHE_HOME", "~/.cache"), "huggingface")
    cache = env.get("HF_HUB_CACHE") or env.get("HUGGINGFACE_HUB_CACHE") or os.path.join(home, "hub")
    return Path(os.path.expandvars(os.path.expanduser(cache)))


def offline() -> bool:
    """``HF_HUB_OFFLINE`` (or transformers' ``TRANSFORMERS_OFFLINE``) set to a true value."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "on", "yes", "true")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def looks_like_hub_id(name: str) -> bool:
    return bool(HUB_ID.fullmatch(name)) and not looks_local(name)


def looks_local(name: str) -> bool:
    """A name that is a path where the job runs, not a Hub id: relative or absolute by its first
    character, deeper than ``org/name``, under a folder runs write to (``LOCAL_ROOTS``), or under
    a folder that exists here."""
    if name.startswith((".", "/", "~", "$")) or "\\" in name:
        return True
    parts = name.split("/")
    if len(parts) > 2:
        return True
    return len(parts) == 2 and (parts[0].lower() in LOCAL_ROOTS or _is(Path(parts[0]), Path.is_dir))


def cached_file(repo_id: str, filename: str, revision: str | None = None, cache: Path | None = None) -> Path | None:
    """A file of a Hub repository as the cache holds it at ``revision`` (a branch, a tag or a full
    commit sha; ``main`` by default), or None."""
    folder = (cache or hub_cache()) / ("models--" + repo_id.replace("/", "--"))
    revision = revision or "main"
    if COMMIT.fullmatch(revision):
        commit = revision
    else:
        ref = folder / "refs" / revision
        try:
            commit = ref.read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            return None
    path = folder / "snapshots" / commit / filename
    return path if _is(path, Path.is_file) else None


def _read_json(path: Path) -> dict[str, Any]:
    from vramlint.models.hfconfig import load_json
    return load_json(path)


def fetch_command(name: str, revision: str | None) -> str:
    """The command that puts a model's config in the cache (huggingface_hub's CLI)."""
    pinned = f" --revision {revision}" if revision and revision != "main" else ""
    return f"hf download {name} config.json{pinned}"


ENDPOINT = "https://huggingface.co"      # huggingface_hub's default; HF_ENDPOINT replaces it
PROBE_SECONDS = 3.0                       # a reachable Hub answers a TCP connect in well under this


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT", "").strip().rstrip("/") or ENDPOINT


@lru_cache(maxsize=None)
def unreachable(url: str) -> str | None:
    """Why the Hub at ``url`` (or the proxy the environment routes it through) takes no TCP
    connection, or None. One probe a run: without a network the Hub client retries for minutes
    per file and then blames the model, so a run that cannot reach it says so at once."""
    import socket
    from urllib.parse import urlsplit
    scheme = urlsplit(url).scheme or "https"
    proxy = os.environ.get(f"{scheme}_proxy") or os.environ.get(f"{scheme.upper()}_PROXY")
    target = urlsplit(proxy if proxy else url)
    host, port = target.hostname, target.port or (443 if target.scheme == "https" else 80)
    if not host:
        return f"{url} is not a URL"
    try:
        socket.create_connection((host, port), timeout=PROBE_SECONDS).close()
    except OSError as exc:
        return f"{'the proxy ' + proxy if proxy else url} takes no connection ({exc.strerror or type(exc).__name__})"
    return None


def download(repo_id: str, revision: str | None, cache: Path | None = None) -> None:
    """``config.json`` and the side files through huggingface_hub, into its cache; the side files
    a repository lacks are skipped. Errors become one-line usage errors that say what to do."""
    try:
        from huggingface_hub import hf_hub_download
        from huggingface_hub import errors
    except ImportError:
        raise UsageError("--download needs huggingface_hub: pip install huggingface_hub") from None
    if offline():
        raise UsageError(f"model {repo_id!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set: "
                         "no download")
    why = unreachable(endpoint())
    if why is not None:
        raise UsageError(f"--download: no network to the Hugging Face Hub here: {why}; fetch the config where there "
                         f"is one (`{fetch_command(repo_id, revision)}`) or drop --download")
    kwargs = {"revision": revision or "main", "cache_dir": str(cache or hub_cache())}
    found = False
    for filename in ("config.json", *SIDE_FILES):
        try:
            hf_hub_download(repo_id, filename, **kwargs)
            found = True
        except errors.GatedRepoError:
            raise UsageError(f"model {repo_id!r} is gated: accept its licence on huggingface.co and log in "
                             "(hf auth login) or set HF_TOKEN") from None
        except errors.RepositoryNotFoundError:
            raise UsageError(f"model {repo_id!r}: no such repository on the Hub (or it is private: log in with "
                             "hf auth login or set HF_TOKEN)") from None
        except errors.RevisionNotFoundError:
            raise UsageError(f"model {repo_id!r} has no revision {kwargs['revision']!r}") from None
        except errors.EntryNotFoundError:
            continue
        except (errors.HfHubHTTPError, OSError) as exc:
            raise UsageError(f"model {repo_id!r}: download failed ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0] if str(exc) else 'no answer'})") from None
    if not found:
        raise UsageError(f"model {repo_id!r} has neither config.json nor adapter_config.json")


def _is(path: Path, test) -> bool:
    """``path.is_dir()`` / ``is_file()``, False for a name no filesystem takes (too long, a NUL)."""
    try:
        return test(path)
    except (OSError, ValueError):
        return False


def read_model(source: str, revision: str | None = None, download: bool = False) -> ModelShape:
    """A path to a config.json, a folder holding one, a catalog name, or a Hugging Face id found in
    the local cache (or, with ``download``, on the Hub)."""
    return resolve(source, revision, download)


def from_folder(path: Path) -> ModelShape:
    """A checkpoint folder: its config.json (with ModelOpt's hf_quant_config.json beside it), or a
    PEFT adapter folder's adapter_config.json, which names the base."""
    from vramlint.models.hfconfig import load_json, shape_from_dict
    config, adapter = path / "config.json", path / "adapter_config.json"
    if config.is_file():
        side = path / "hf_quant_config.json"
        return shape_from_dict(load_json(config), name=str(path),
                               side_quant=load_json(side) if side.is_file() else None)
    if adapter.is_file():
        return adapter_shape(str(path), load_json(adapter))
    raise UsageError(f"{path}: no config.json (or adapter_config.json) in this folder")


def resolve(name: str, revision: str | None = None, allow_download: bool = False) -> ModelShape:
    """A path to a config.json, a folder holding one, a catalog name, or a Hugging Face id."""
    from vramlint.models.catalog import find
    from vramlint.models.hfconfig import shape_from_dict
    path = Path(name).expanduser()
    if _is(path, Path.is_dir):
        return _with(from_folder(path), "path")
    if _is(path, Path.is_file):
        return _with(shape_from_dict(_read_json(path), name=str(path)), "path")
    pinned = revision not in (None, "main")
    if not pinned:
        entry = find(name)
        if entry is not None:
            return _with(entry, "catalog")
    if looks_local(name):
        raise ModelNotFound(f"model {name!r}: no such folder here; it is a local path (an earlier run's output or "
                            "a download location), not a Hub id", local=True)
    if not looks_like_hub_id(name):
        raise ModelNotFound(f"model {name!r}: no such file or folder, and not a Hub id")
    shape = _from_cache(name, revision, allow_download)
    if shape is not None:
        return shape
    if pinned:
        entry = find(name)
        if entry is not None:
            return _with(entry, "catalog")
    raise ModelNotFound(_unresolved(name, revision, allow_download))


def _from_cache(name: str, revision: str | None, allow_download: bool, hops: int = 0) -> ModelShape | None:
    how = "cache"
    config = cached_file(name, "config.json", revision)
    adapter = cached_file(name, "adapter_config.json", revision)
    if config is None and adapter is None and allow_download:
        download(name, revision)
        how = "hub"
        config = cached_file(name, "config.json", revision)
        adapter = cached_file(name, "adapter_config.json", revision)
    if config is not None:
        from vramlint.models.hfconfig import shape_from_dict
        side = cached_file(name, "hf_quant_config.json", revision)
        shape = shape_from_dict(_read_json(config), name=name, side_quant=_read_json(side) if side else None)
        return _with(shape, how, _index_note(cached_file(name, "model.safetensors.index.json", revision)))
    if adapter is not None:
        return adapter_shape(name, _read_json(adapter), allow_download, hops, how)
    return None


def adapter_shape(name: str, adapter: dict, allow_download: bool = False, hops: int = 0,
                  how: str = "path") -> ModelShape:
    """A PEFT adapter repository: its base model, with the adapter's LoRA weights loaded beside it."""
    from vramlint.memory.parts.adapters import lora_params
    base = adapter.get("base_model_name_or_path")
    if not isinstance(base, str) or not base or hops >= MOST_ADAPTER_HOPS:
        raise UsageError(f"model {name!r} is an adapter without a usable base_model_name_or_path")
    shape = resolve(base, allow_download=allow_download) if hops == 0 else _from_cache(base, None, allow_download,
                                                                                      hops + 1)
    if shape is None:
        raise UsageError(_unresolved(base, None, allow_download))
    rank = adapter.get("r") if isinstance(adapter.get("r"), int) else PEFT_DEFAULT_RANK
    raw = adapter.get("target_modules")
    targets = tuple(raw) if isinstance(raw, list) else (raw,) if isinstance(raw, str) else peft_default_targets(shape)
    loaded = lora_params(shape, rank, targets)
    note = (f"{name} is a LoRA adapter (r={rank} on {', '.join(targets)}) on {base}: its {loaded:,} parameters "
            "are loaded with the base")
    return replace(shape, name=name, extra_params=shape.extra_params + loaded, resolved_by=how,
                   notes=shape.notes + (note,))


def _index_note(index: Path | None) -> str:
    """The checkpoint's own size, from its safetensors index: a cross-check of the count."""
    if index is None:
        return ""
    from vramlint.documents import ParseError, read_text
    try:
        total = json.loads(read_text(index)).get("metadata", {}).get("total_size")
    except (OSError, ParseError, ValueError, RecursionError, AttributeError):
        return ""
    return f"the checkpoint's safetensors index says {total:,} bytes of weights" if isinstance(total, int) else ""


def _with(shape: ModelShape, how: str, note: str = "") -> ModelShape:
    return replace(shape, resolved_by=how, notes=shape.notes + ((note,) if note else ()))


def _unresolved(name: str, revision: str | None, allow_download: bool) -> str:
    from vramlint.models.catalog import close_names
    where = f"not in the offline catalog or the Hugging Face cache ({hub_cache()})"
    close = close_names(name)
    near = f" (did you mean {', '.join(close)}?)" if close else ""
    if offline():
        return f"model {name!r} is {where}{near}, and HF_HUB_OFFLINE is set"
    hint = "" if allow_download else " or rerun with --download"
    return f"model {name!r} is {where}{near}: fetch its config with `{fetch_command(name, revision)}`{hint}"
