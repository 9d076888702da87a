"""What transformers builds for a model config, kept on disk, so a second check costs no import of
torch or transformers.

Building a model type that is not modelled by hand takes seconds (``models/meta.py`` imports torch
and transformers and builds the model on the meta device), and a pre-commit hook pays it on every
commit. The result, a :class:`ModelShape`, depends only on the config and on the transformers that
built it, so it is stored under a key of both: the SHA-256 of the config's canonical JSON and the
installed transformers and torch versions (read from their metadata, without importing them).

Kept in vramlint's cache folder (``vramlint/cache.py``: ``VRAMLINT_CACHE_DIR`` or the platform's
user cache folder, under ``shapes``), written whole; an entry that cannot be read is rebuilt.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import fields, is_dataclass
from typing import Any

from vramlint import cache
from vramlint.models import shape as shapes

KIND = "shapes"
FORMAT = 1                    # bumped when the stored form changes: older entries are not read
# The types an entry may hold: nothing else is ever constructed from a cache file.
TYPES = {cls.__name__: cls for cls in (shapes.ModelShape, shapes.Layer, shapes.Attention, shapes.Mlp,
                                       shapes.Params, shapes.Block, shapes.Quantization, shapes.Tower)}


def key(raw: dict[str, Any]) -> str | None:
    """The entry's name: the config and the builders' versions; None where transformers is not
    installed (nothing would be built)."""
    from importlib import metadata
    try:
        versions = [metadata.version("transformers"), metadata.version("torch")]
    except metadata.PackageNotFoundError:
        return None
    text = json.dumps({"format": FORMAT, "versions": versions, "config": raw}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(name: str) -> shapes.ModelShape | None:
    try:
        found = _decode(cache.read(KIND, name))
    except (ValueError, TypeError, KeyError, RecursionError):
        return None
    return found if isinstance(found, shapes.ModelShape) else None


def store(name: str, shape: shapes.ModelShape) -> None:
    try:
        encoded = _encode(shape)
    except TypeError:
        return
    cache.write(KIND, name, encoded)


def _encode(value: Any) -> Any:
    if is_dataclass(value):
        return {"$": type(value).__name__, **{f.name: _encode(getattr(value, f.name)) for f in fields(value)}}
    if isinstance(value, tuple):
        return {"$t": [_encode(v) for v in value]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if isinstance(value, dict):
        return {"$d": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, frozenset):
        return {"$f": sorted(_encode(v) for v in value)}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot store a {type(value).__name__}")


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "$t" in value:
        return tuple(_decode(v) for v in value["$t"])
    if "$d" in value:
        return {_decode(k): _decode(v) for k, v in value["$d"]}
    if "$f" in value:
        return frozenset(_decode(v) for v in value["$f"])
    cls = TYPES[value["$"]]
    return cls(**{k: _decode(v) for k, v in value.items() if k != "$"})
