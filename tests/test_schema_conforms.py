"""``schemas.conforms`` (the fast path that spares a valid file the jsonschema import) decides
exactly as the real jsonschema does, on the real corpus files and on every one-value change of
them that the fuzz makes: a file it calls valid has no schema finding, and one it calls invalid
goes to jsonschema for its messages."""

from __future__ import annotations

import copy
import random

import jsonschema
import pytest

from conftest import CORPUS, EXAMPLES, shared_or_skip
from vramlint.documents import parse, read_text
from vramlint.readers.registry import detect
from vramlint.schemas import conforms, load_schema

FORMATS = ("deepspeed", "accelerate", "vllm")
# values that hit each keyword's edge: bools against integers and enums, integral floats, negative
# and zero bounds, empty strings, nested containers, null
ODD_VALUES = (True, False, 0, 1, -1, 1.0, 2.5, float("inf"), "", "auto", "none", "cpu", "1e9", "4k", None, [],
              [1, "x"], {}, {"device": "cpu"}, 3)


def _files() -> list:
    folder = shared_or_skip(CORPUS)
    found = []
    for path in sorted(list(folder.rglob("*.json")) + list(folder.rglob("*.yaml")) + list(folder.rglob("*.yml"))
                       + list(EXAMPLES.rglob("*.json")) + list(EXAMPLES.rglob("*.yaml"))):
        try:
            data = parse(read_text(path), str(path)).data
        except Exception:  # noqa: BLE001 - files that do not parse have no schema check
            continue
        fmt = detect(data) if isinstance(data, dict) else None
        if fmt in FORMATS:
            found.append((path, fmt, data))
    return found


def _mutations(data: dict, rng: random.Random, count: int):
    """``count`` copies of ``data`` with one value replaced, one key added or one removed, at any depth."""
    paths = []

    def walk(node, at):
        if isinstance(node, dict):
            for key, value in node.items():
                paths.append(at + [key])
                walk(value, at + [key])

    walk(data, [])
    for _ in range(count):
        changed = copy.deepcopy(data)
        path = rng.choice(paths) if paths else []
        holder = changed
        for key in path[:-1]:
            holder = holder[key]
        roll = rng.random()
        if path and roll < 0.7:
            holder[path[-1]] = rng.choice(ODD_VALUES)
        elif path and roll < 0.85:
            del holder[path[-1]]
        else:
            holder["stage3_prefetch_bucket_sizee" if rng.random() < 0.5 else path[-1] if path else "x"] = 1
        yield changed


def test_the_corpus_is_there():
    assert len(_files()) >= 60


@pytest.mark.parametrize("fmt", FORMATS)
def test_conforms_agrees_with_jsonschema_on_real_files_and_their_mutations(fmt):
    rng = random.Random(fmt)
    schema = load_schema(fmt)
    validator = jsonschema.Draft202012Validator(schema)
    cases = valid = 0
    for path, found, data in _files():
        if found != fmt:
            continue
        for instance in [data, *_mutations(data, rng, 40)]:
            expected = validator.is_valid(instance)
            assert conforms(instance, schema) is expected, (path, instance)
            cases += 1
            valid += expected
    assert cases >= 200 and 0 < valid < cases      # both answers were tested


def test_conforms_agrees_on_settings_tables():
    schema = load_schema("settings")
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(7)
    keys = sorted(schema["properties"])
    tables = [{}, {"gpus": "8xH100"}, {"gpus": "8xH100", "seq_len": 4096, "strict": True}]
    for _ in range(400):
        table = {rng.choice(keys + ["unknown_key"]): rng.choice(ODD_VALUES) for _ in range(rng.randint(1, 3))}
        tables.append(table)
    outcomes = set()
    for table in tables:
        expected = validator.is_valid(table)
        assert conforms(table, schema) is expected, table
        outcomes.add(expected)
    assert outcomes == {True, False}


def test_a_keyword_it_does_not_decide_is_left_to_jsonschema():
    assert conforms({"a": 1}, {"type": "object", "patternProperties": {"^a$": {"type": "string"}}}) is None
    assert conforms("x", {"type": "string", "maxLength": 3}) is None
