"""JSON with positions, and the lenient syntax DeepSpeed's hjson loader accepts."""

from __future__ import annotations

import json

import pytest

from conftest import CORPUS, shared_or_skip
from vramlint.documents import ParseError, parse_json


def test_positions_point_at_keys():
    doc = parse_json('{\n  "zero_optimization": {\n    "stage": 3\n  },\n  "bf16": {"enabled": true}\n}', "x.json")
    assert doc.locate("$.zero_optimization.stage").line == 3
    assert doc.locate("$.zero_optimization.stage").column == 5
    assert doc.locate("$.bf16.enabled") .line == 5
    assert doc.locate("$.bf16.missing").line == 5          # falls back to the nearest ancestor
    assert doc.locate("$.nothing").line == 1


def test_comments_and_trailing_commas_are_accepted_and_recorded():
    doc = parse_json('{\n // comment\n "a": 1, # another\n "b": [1, 2,],\n}')
    assert doc.data == {"a": 1, "b": [1, 2]}
    assert doc.lenient == ["comments", "trailing commas"]


@pytest.mark.parametrize("text, line, column, words", [
    ('{"train_batch_size": CONFIG_BATCH_SIZE}', 1, 22, "placeholder"),
    ('{"a": 1,\n "a": 2}', 2, 2, "duplicate key"),
    ('{"a": 1', 1, 8, "expected"),
    ('[1 2]', 1, 4, "expected"),
    ('', 1, 1, "end of file"),
])
def test_errors_carry_positions(text, line, column, words):
    with pytest.raises(ParseError) as err:
        parse_json(text)
    assert (err.value.line, err.value.column) == (line, column)
    assert words in err.value.message


def test_every_corpus_deepspeed_file_parses_like_json_or_fails_with_a_position():
    folder = shared_or_skip(CORPUS / "deepspeed")
    failures = []
    for path in sorted(folder.iterdir()):
        text = path.read_text()
        try:
            doc = parse_json(text, str(path))
        except ParseError as exc:
            failures.append((path.name, exc.line))
            continue
        try:
            assert doc.data == json.loads(text)
        except json.JSONDecodeError:
            assert doc.lenient, path.name        # accepted only what DeepSpeed's hjson accepts
    assert sorted(name for name, _ in failures) == sorted(p.name for p in folder.iterdir() if "TEMPLATE" in p.name)
