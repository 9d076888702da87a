"""Load config files and keep where every key sits, so a finding points at the line to edit.

A :class:`Document` is the parsed data plus a map from JSON path (``$.zero_optimization.stage``)
to the line and column of that key. JSON is read by a small position-tracking parser that also
accepts what DeepSpeed's hjson loader accepts and HF's strict ``json.load`` does not — ``//``,
``#`` and ``/* */`` comments and trailing commas — and records that it did, so a rule can warn that
the HF/Accelerate path would reject the file. A file that does not parse raises
:class:`ParseError` with a position; the caller turns it into a ``parse-error`` finding.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Location:
    """Where a finding points: file, JSON path, 1-based line and column."""

    path: str
    json_path: str = "$"
    line: int = 1
    column: int = 1

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


class ParseError(Exception):
    def __init__(self, message: str, line: int, column: int) -> None:
        super().__init__(message)
        self.message, self.line, self.column = message, line, column


@dataclass
class Document:
    path: str
    text: str
    data: Any
    positions: dict[str, tuple[int, int]] = field(default_factory=dict)
    lenient: list[str] = field(default_factory=list)   # non-JSON syntax that was accepted
    elsewhere: dict[str, str] = field(default_factory=dict)   # key -> the file that states it, where not ``path``
    # (a launch script's arguments over the recipe it runs: one job, each value where it is written)
    on_command_line: bool = False     # its keys are a launch line's ``--key value`` arguments (as hints spell them)
    # Keys the launch line writes with a value only the run knows (``--x $N``): not in ``data``, yet
    # set, so a refusal for a missing key does not fire on them
    unknown: frozenset[str] = frozenset()

    def locate(self, json_path: str) -> Location:
        """The key's own position, else its nearest ancestor's, else the top of the file."""
        probe = json_path
        while probe not in self.positions and "." in probe:
            probe = probe.rsplit(".", 1)[0]
        line, column = self.positions.get(probe, (1, 1))
        return Location(self.elsewhere.get(probe, self.path), json_path, line, column)

    def has(self, json_path: str) -> bool:
        return json_path in self.positions


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_WORDS = {"true": True, "false": False, "null": None}


class _JsonReader:
    """Recursive-descent JSON with positions; comments and trailing commas tolerated."""

    def __init__(self, text: str) -> None:
        self.text, self.i = text, 0
        self.depth, self.nodes = 0, 0
        self.positions: dict[str, tuple[int, int]] = {}
        self.lenient: set[str] = set()
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def where(self, index: int | None = None) -> tuple[int, int]:
        index = self.i if index is None else index
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= index:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, index - self._line_starts[lo] + 1

    def fail(self, message: str) -> ParseError:
        return ParseError(message, *self.where())

    def skip(self) -> None:
        text = self.text
        while self.i < len(text):
            ch = text[self.i]
            if ch in " \t\r\n\ufeff":
                self.i += 1
            elif text.startswith("//", self.i) or ch == "#":
                self.lenient.add("comments")
                end = text.find("\n", self.i)
                self.i = len(text) if end < 0 else end
            elif text.startswith("/*", self.i):
                self.lenient.add("comments")
                end = text.find("*/", self.i + 2)
                if end < 0:
                    raise self.fail("unterminated /* comment")
                self.i = end + 2
            else:
                return

    def value(self, path: str) -> Any:
        self.skip()
        if self.i >= len(self.text):
            raise self.fail("unexpected end of file")
        self.nodes += 1
        if self.nodes > MOST_NODES:
            raise TooLarge(f"more than {MOST_NODES:,} values: data, not a config", *self.where())
        ch = self.text[self.i]
        if ch in "{[":
            self.depth += 1
            if self.depth > MOST_DEPTH:
                raise TooLarge(f"nested more than {MOST_DEPTH} deep: not a config", *self.where())
            try:
                return self.obj(path) if ch == "{" else self.arr(path)
            finally:
                self.depth -= 1
        if ch == '"':
            return self.string()
        match = _NUMBER.match(self.text, self.i)
        if match:
            self.i = match.end()
            token = match.group()
            if len(token) > MOST_DIGITS:
                raise TooLarge(f"a number of {len(token):,} digits: not a config value", *self.where())
            return float(token) if any(c in token for c in ".eE") else int(token)
        for word, result in _WORDS.items():
            if self.text.startswith(word, self.i):
                self.i += len(word)
                return result
        bare = re.match(r"[A-Za-z_][\w.\-]*", self.text[self.i:])
        if bare:
            raise self.fail(f"bare word {bare.group()!r} is not a JSON value (a template placeholder?)")
        raise self.fail(f"unexpected character {ch!r}")

    def string(self) -> str:
        start = self.i
        try:
            value, end = json.decoder.scanstring(self.text, self.i + 1)
        except json.JSONDecodeError as exc:
            self.i = start
            raise self.fail(f"bad string: {exc.msg}") from None
        self.i = end
        return value

    def obj(self, path: str) -> dict[str, Any]:
        self.i += 1
        out: dict[str, Any] = {}
        while True:
            self.skip()
            if self.text.startswith("}", self.i):
                self.i += 1
                return out
            if not self.text.startswith('"', self.i):
                raise self.fail("expected a quoted key or '}'")
            key_at = self.where()
            key = self.string()
            if key in out:
                raise ParseError(f"duplicate key {key!r}", *key_at)
            self.skip()
            if not self.text.startswith(":", self.i):
                raise self.fail(f"expected ':' after key {key!r}")
            self.i += 1
            child = f"{path}.{key}"
            self.positions[child] = key_at
            out[key] = self.value(child)
            self.skip()
            if self.text.startswith(",", self.i):
                self.i += 1
                self.skip()
                if self.text.startswith("}", self.i):
                    self.lenient.add("trailing commas")
            elif not self.text.startswith("}", self.i):
                raise self.fail("expected ',' or '}'")

    def arr(self, path: str) -> list[Any]:
        self.i += 1
        out: list[Any] = []
        while True:
            self.skip()
            if self.text.startswith("]", self.i):
                self.i += 1
                return out
            child = f"{path}[{len(out)}]"
            self.positions[child] = self.where()
            out.append(self.value(child))
            self.skip()
            if self.text.startswith(",", self.i):
                self.i += 1
                self.skip()
                if self.text.startswith("]", self.i):
                    self.lenient.add("trailing commas")
            elif not self.text.startswith("]", self.i):
                raise self.fail("expected ',' or ']'")


def parse_json(text: str, path: str = "<string>") -> Document:
    reader = _JsonReader(text)
    data = reader.value("$")
    reader.skip()
    if reader.i < len(text):
        raise reader.fail("extra data after the top-level value")
    positions = {"$": (1, 1), **reader.positions}
    return Document(path, text, data, positions, sorted(reader.lenient))


def parse(text: str, path: str = "<string>") -> Document:
    """A config file's text as TOML (named .toml: torchtitan's job files), JSON (it opens with ``{``
    or ``[``, or is named .json / .conf, as open-instruct names DeepSpeed files) or YAML; ParseError
    (TooLarge past the limits) if none."""
    if path.endswith(".toml"):
        return parse_toml(text, path)
    as_json = text.lstrip().startswith(("{", "[")) or path.endswith((".json", ".conf"))
    return (parse_json if as_json else parse_yaml)(text, path)


_TOML_ERROR = re.compile(r"^(.*?)(?: \(at line (\d+), column (\d+)\))?$")


def parse_toml(text: str, path: str = "<string>") -> Document:
    """TOML as torchtitan reads its job files (the standard library's ``tomllib``, TOML 1.0), plus
    each key's position (``_toml_positions``)."""
    import tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_ERROR.match(str(exc))
        line, column = (int(match.group(2)), int(match.group(3))) if match and match.group(2) else (1, 1)
        raise ParseError(f"not valid TOML: {match.group(1) if match else exc}", line, column) from None
    return Document(path, text, data, _toml_positions(text))


_TOML_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(#.*)?$")
_TOML_KEY = re.compile(r"^(\s*)([A-Za-z0-9_\-.\"' ]+?)\s*=")


def _toml_positions(text: str) -> dict[str, tuple[int, int]]:
    """Where each table header and ``key =`` line of a TOML file that ``tomllib`` accepted sits,
    as JSON paths (``[training]`` / ``seq_len = 8192`` -> ``$.training.seq_len``). tomllib keeps
    no positions; this pass only locates, over text already parsed: the lines of a multi-line
    array or string are no keys."""
    positions: dict[str, tuple[int, int]] = {"$": (1, 1)}
    table, depth, quote = "$", 0, None
    for number, line in enumerate(text.splitlines(), 1):
        if quote:                                   # inside a multi-line string: until its closing quotes
            quote = None if line.count(quote) % 2 else quote
            continue
        if depth:                                   # inside a multi-line array: until its brackets close
            depth = max(0, depth + _brackets(line))
            continue
        header = _TOML_TABLE.match(line)
        if header and not line.lstrip().startswith("[["):
            table = "$." + _toml_name(header.group(1))
            positions.setdefault(table, (number, line.index("[") + 1))
            continue
        key = _TOML_KEY.match(line)
        if key and not line.lstrip().startswith("#"):
            positions.setdefault(f"{table}.{_toml_name(key.group(2))}", (number, len(key.group(1)) + 1))
            value = line[key.end():]
            quote = next((q for q in ('"""', "'''") if value.count(q) % 2), None)
            depth = max(0, _brackets(value))
    return positions


def _toml_name(dotted: str) -> str:
    """A TOML key or table name (``a."b".c``) as JSON path parts."""
    return ".".join(part.strip().strip("\"'") for part in dotted.split("."))


def _brackets(value: str) -> int:
    """Brackets a line opens and does not close, before its comment."""
    code = value.split("#", 1)[0]
    return code.count("[") - code.count("]")


def sub_document(document: Document, json_path: str) -> Document:
    """The mapping at ``json_path`` as a document of its own, with the positions it has in the
    file (a recipe's inline ``deepspeed:`` section, read by the DeepSpeed reader)."""
    node = document.data
    for part in json_path.split(".")[1:]:
        node = node[part]
    prefix = json_path + "."
    positions = {"$" + key[len(json_path):]: where for key, where in document.positions.items()
                 if key.startswith(prefix)}
    positions["$"] = document.positions.get(json_path, (1, 1))
    return Document(document.path, document.text, node, positions)


MOST_BYTES = 4 << 20        # a config is kilobytes; four MiB is data, not a config
MOST_DEPTH = 64             # sections nested deeper than any framework's config
MOST_NODES = 200_000        # values in a document, its YAML aliases expanded
MOST_DIGITS = 100           # a number longer than this is no setting (Python refuses int() past 4,300)


class TooLarge(ParseError):
    """A file past the limits a config keeps: too big, too deep, or an alias bomb."""


def read_text(path: Path) -> str:
    """A regular file's text, at most ``MOST_BYTES``: a FIFO, a device or a folder is not read
    (``/dev/zero`` would never end); undecodable bytes and a file past the cap become a
    ParseError at line 1; OSError propagates."""
    import stat
    mode = path.stat().st_mode
    if not stat.S_ISREG(mode):
        raise TooLarge("not a regular file (a pipe, device or folder): not read", 1, 1)
    with path.open("rb") as handle:
        data = handle.read(MOST_BYTES + 1)
    if len(data) > MOST_BYTES:
        raise TooLarge(f"larger than {MOST_BYTES >> 20} MiB: not a config file, not read", 1, 1)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParseError(f"not UTF-8 text ({exc.reason})", 1, 1) from None


def parse_yaml(text: str, path: str = "<string>") -> Document:
    """YAML as the frameworks read it (PyYAML ``safe_load``, YAML 1.1: unquoted ``NO`` is false,
    a duplicated key keeps the last value; libyaml's C parser where it is installed) plus each
    key's position from the composed node tree, walked once per node however many aliases point
    at it. A document past the limits (nesting, values with its aliases expanded) is refused
    before anything walks it."""
    import yaml

    _yaml_shape(text)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        roots = []
        while loader.check_node():           # several documents (``---``): Kubernetes manifests and the like
            roots.append(loader.get_node())
            _expanded_size(roots[-1])
        if len(roots) > 1:
            data = [loader.construct_document(root) for root in roots]
            positions = {"$": (1, 1)}
            for index, root in enumerate(roots):
                positions.update({f"$[{index}]" + key[1:]: where for key, where in _yaml_positions(root).items()})
            return Document(path, text, YamlDocuments(data), positions)
        root = roots[0] if roots else None
        data = loader.construct_document(root) if root is not None else None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ParseError(f"not valid YAML: {problem}", line, column) from None
    except RecursionError:
        raise TooLarge(f"nested more than {MOST_DEPTH} deep: not a config", 1, 1) from None
    except ValueError as exc:              # an int past Python's 4,300-digit conversion limit
        raise TooLarge(f"a value past what any config holds ({str(exc).split(':')[0]})", 1, 1) from None
    finally:
        loader.dispose()
    return Document(path, text, data, _yaml_positions(root))


class YamlDocuments(list):
    """The documents of a YAML stream of several (``---``), in order: a list that says where it
    came from, so it is told from a YAML file whose one document is a list."""


def _yaml_shape(text: str) -> None:
    """Nesting no config has, refused before the parser recurses into it: flow brackets, ``- -``
    runs on one line, indentation."""
    depth = deepest = 0
    for ch in re.sub(r"'[^'\n]*'|\"(?:[^\"\\\n]|\\.)*\"|#[^\n]*", "", text):
        if ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth = max(0, depth - 1)
    dashes = max((len(m.group()) // 2 for m in re.finditer(r"(?:- )+", text)), default=0)
    indent = max((len(m.group()) for m in re.finditer(r"(?m)^[ ]+", text)), default=0)
    if max(deepest, dashes) > MOST_DEPTH or indent > 8 * MOST_DEPTH:
        raise TooLarge(f"nested more than {MOST_DEPTH} deep: not a config", 1, 1)


def _expanded_size(root) -> int:
    """The values the document holds with every alias expanded, counted once per node (memoized):
    a few hundred bytes of aliases can stand for billions of values."""
    import yaml
    sizes: dict[int, int] = {}
    order, stack = [], [root] if root is not None else []
    while stack:                                     # post-order without recursion
        node = stack.pop()
        if id(node) in sizes:
            continue
        sizes[id(node)] = -1
        order.append(node)
        if isinstance(node, yaml.MappingNode):
            stack += [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            stack += node.value
    for node in reversed(order):
        children = ([part for pair in node.value for part in pair] if isinstance(node, yaml.MappingNode)
                    else node.value if isinstance(node, yaml.SequenceNode) else [])
        sizes[id(node)] = min(MOST_NODES + 1, 1 + sum(max(sizes[id(child)], 1) for child in children))
    total = sizes.get(id(root), 0)
    if total > MOST_NODES:
        raise TooLarge(f"more than {MOST_NODES:,} values once its aliases are expanded: not a config", 1, 1)
    return total


def _yaml_positions(root) -> dict[str, tuple[int, int]]:
    """Each key's and item's line and column, from the node tree; a node an alias reaches again
    is not walked again (its keys are where the first path to them finds them)."""
    import yaml

    positions: dict[str, tuple[int, int]] = {"$": (1, 1)}
    seen: set[int] = set()
    stack = [(root, "$")] if root is not None else []
    while stack:
        node, path = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                child = f"{path}.{key.value}"
                positions[child] = (key.start_mark.line + 1, key.start_mark.column + 1)   # a repeated key: the last
                stack.append((value, child))
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                child = f"{path}[{index}]"
                positions[child] = (item.start_mark.line + 1, item.start_mark.column + 1)
                stack.append((item, child))
    return positions
