"""The JSON Schemas of ``schemas/``, from the installed wheel or from a source checkout.

The schemas live at the top of the repository, where editors and people find them, and are
packaged as ``vramlint.schemas_data`` in the wheel (see pyproject.toml ``package-dir``).
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from vramlint.packaged import schema_path


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict:
    """``load_schema("settings")`` -> the parsed ``settings.schema.json``."""
    return json.loads(schema_path(f"{name}.schema.json").read_text(encoding="utf-8"))


# The keywords ``conforms`` decides (the ones vramlint's schemas use); annotations it skips. A
# schema with any other keyword is left to jsonschema.
ANNOTATIONS = frozenset({"$schema", "$id", "$comment", "title", "description", "default", "examples", "format",
                         "deprecated", "$defs", "definitions"})
_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, list),
    "object": lambda v: isinstance(v, dict),
}


class Undecided(Exception):
    """``conforms`` met a keyword it does not decide: jsonschema must."""


def conforms(instance, schema: dict) -> bool | None:
    """Whether ``instance`` is valid under ``schema`` (Draft 2020-12), decided without jsonschema,
    or None where the schema uses a keyword this does not decide. Why: importing jsonschema costs
    a pre-commit hook about three bare interpreter start-ups, and nearly every file it sees is
    valid; jsonschema still checks every file this finds invalid, and words the findings
    (``rules/schema.check_schema``). Its semantics are jsonschema 4's: ``True`` is not ``1`` in
    ``enum`` / ``const``, ``1.0`` is an integer, bounds and lengths apply only to their type."""
    try:
        return _valid(instance, schema, schema)
    except Undecided:
        return None


def _valid(value, schema, root: dict) -> bool:
    if schema is True or schema is False:
        return schema
    for keyword, expected in schema.items():
        if keyword in ANNOTATIONS:
            continue
        check = _KEYWORDS.get(keyword)
        if check is None:
            raise Undecided(keyword)
        if not check(value, expected, schema, root):
            return False
    return True


def _equal(one, two) -> bool:
    """jsonschema's ``_utils.equal``: booleans equal only booleans; lists and mappings element-wise."""
    if isinstance(one, bool) or isinstance(two, bool):
        return isinstance(one, bool) and isinstance(two, bool) and one == two
    if isinstance(one, list) and isinstance(two, list):
        return len(one) == len(two) and all(_equal(a, b) for a, b in zip(one, two))
    if isinstance(one, dict) and isinstance(two, dict):
        return one.keys() == two.keys() and all(_equal(one[k], two[k]) for k in one)
    if isinstance(one, (list, dict)) or isinstance(two, (list, dict)):
        return False
    return one == two


def _number(value) -> bool:
    return _TYPES["number"](value)


def _ref(value, ref: str, schema, root: dict) -> bool:
    if not ref.startswith("#/"):
        raise Undecided(ref)
    target = root
    for part in ref[2:].split("/"):
        target = target[part.replace("~1", "/").replace("~0", "~")]
    return _valid(value, target, root)


def _properties(value, properties: dict, schema, root: dict) -> bool:
    return not isinstance(value, dict) or all(_valid(value[k], sub, root) for k, sub in properties.items() if k in value)


def _additional(value, additional, schema, root: dict) -> bool:
    if not isinstance(value, dict):
        return True
    if "patternProperties" in schema:
        raise Undecided("patternProperties")
    known = schema.get("properties", {})
    return all(_valid(v, additional, root) for k, v in value.items() if k not in known)


_KEYWORDS = {
    "type": lambda v, t, s, r: any(_TYPES[name](v) for name in ([t] if isinstance(t, str) else t)),
    "enum": lambda v, options, s, r: any(_equal(v, option) for option in options),
    "const": lambda v, c, s, r: _equal(v, c),
    "minimum": lambda v, n, s, r: not _number(v) or v >= n,
    "maximum": lambda v, n, s, r: not _number(v) or v <= n,
    "exclusiveMinimum": lambda v, n, s, r: not _number(v) or v > n,
    "exclusiveMaximum": lambda v, n, s, r: not _number(v) or v < n,
    "minLength": lambda v, n, s, r: not isinstance(v, str) or len(v) >= n,
    "pattern": lambda v, p, s, r: not isinstance(v, str) or re.search(p, v) is not None,
    "minItems": lambda v, n, s, r: not isinstance(v, list) or len(v) >= n,
    "items": lambda v, sub, s, r: not isinstance(v, list) or all(_valid(x, sub, r) for x in v),
    "required": lambda v, names, s, r: not isinstance(v, dict) or all(name in v for name in names),
    "properties": _properties,
    "additionalProperties": _additional,
    "anyOf": lambda v, subs, s, r: any(_valid(v, sub, r) for sub in subs),
    "oneOf": lambda v, subs, s, r: sum(_valid(v, sub, r) for sub in subs) == 1,
    "$ref": _ref,
}
