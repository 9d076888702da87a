"""A bash script read as bash reads it, statically: its commands with their words expanded, each
word with the line and column it was written at, and what cannot be known before it runs named.

Parsed with tree-sitter-bash (a real grammar: line continuations, quoting, ``$(...)``, arrays,
heredocs), never with regular expressions. The script is walked top to bottom keeping the
variables it assigns (``X=1``, ``export X=1``, ``declare``, arrays), and each command's words are
expanded as bash would: ``$X``, ``${X}``, ``${X:-default}`` / ``${X:=default}``, ``"${ARGS[@]}"``,
``$((...))`` over known integers, word splitting of an unquoted expansion, ``\\``-newline inside
quotes, and ``read -r -d '' NAME <<EOF`` (a command kept in a heredoc, OpenRLHF's examples) with
each of its words at its own line and column. What only the run knows (``$(nvidia-smi ...)``,
``$1``, a variable the script never sets)
is a :class:`Word` whose ``text`` is None and whose ``unknown`` says why. An ``if`` whose test is
one ``[ ... ]`` over known words (``[ "$USE_FSDP" = 1 ]`` after ``USE_FSDP=${USE_FSDP:-1}``) runs the
branch bash would take, and only it. An assignment inside a branch whose test only the run knows, or
inside a loop, only fills a variable the script has not set yet (``MODEL=$1`` inside an argument loop
leaves ``MODEL="Qwen/Qwen-7B"`` set above it), and no later test is sure of that variable.
``bash -c '...'`` is read as the
script it runs (``bash -x -c``, ``bash -lc`` alike). ``#SBATCH`` lines, read by sbatch before the
script runs, are kept apart.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Callable

MOST_COMMANDS = 10_000        # commands a script may expand: a launch file has dozens
MOST_DEPTH = 8                # nested ``bash -c`` followed
MOST_NESTING = 200            # nested blocks, subshells and lists walked: deeper is no launch file
MOST_VALUE = 1 << 16          # characters a variable may hold (``X=$X$X`` sixty times would not fit in memory)


def shell_string(words: list[Word]) -> tuple[int, int] | None:
    """Where ``bash [options] -c 'script'`` stands in a command: the shell's index and its script's.
    The shell's own options may come first (``bash -x -c``, ``bash -o pipefail -c``) and ``-c`` may
    close a group of them (``bash -lc``, ``sh -ec``), as bash reads its arguments."""
    for i, word in enumerate(words[:-1]):
        if word.text not in ("bash", "sh"):
            continue
        j = i + 1
        while j < len(words) - 1 and (words[j].text or "")[:1] in ("-", "+") and words[j].text != "--":
            text = words[j].text
            if text[0] == "-" and not text.startswith("--") and "c" in text[1:]:
                script = words[j + 1]
                return (i, j + 1) if script.text or script.parts else None
            j += 2 if text in ("-o", "+o", "-O", "+O") else 1
        return None
    return None


@dataclass(frozen=True)
class Word:
    """One word of a command: its text, or None where only the run knows it (``unknown`` says
    why, e.g. ``$(nvidia-smi -L | wc -l)``); where it was written (1-based line and column:
    a word from a variable points at the assignment)."""

    text: str | None
    line: int
    column: int
    unknown: str = ""
    quoted: bool = False
    parts: tuple[Word, ...] = ()       # an unknown word's pieces, known and not ("--nnodes=" + "$N")

    @property
    def head(self) -> str | None:
        """The text the word starts with, known even where the rest is not (``--node_rank=$R``)."""
        if self.text is not None:
            return self.text
        return self.parts[0].text if self.parts and self.parts[0].text is not None else None


@dataclass(frozen=True)
class Command:
    """A simple command as it would run: its words after expansion, the ``NAME=value`` words
    before it (its own environment), and the variables set when it runs."""

    words: tuple[Word, ...]
    prefix: dict[str, Word]
    variables: dict[str, Word]
    line: int
    under: str = ""             # the command whose ``bash -c`` string this came from (``srun``), if any


@dataclass
class Script:
    """What a shell file states: its commands in order and its ``#SBATCH`` options."""

    path: str
    text: str
    commands: list[Command] = field(default_factory=list)
    sbatch: list[tuple[str, int]] = field(default_factory=list)     # (the option text, line)
    errors: int = 0                                                 # parse error nodes
    # the commands of branches the variables' values do not take (``[ "$MODE" = train ]`` after
    # ``MODE=${MODE:-eval}``): what the script runs when the environment sets them otherwise
    untaken: list[Command] = field(default_factory=list)


RUNS_STDIN = ("sbatch", "bash", "sh")     # commands that run the script they read from a heredoc


@lru_cache(maxsize=1)
def _parser():
    """tree-sitter with the bash grammar, built once (imported here: only scripts need it)."""
    import tree_sitter
    import tree_sitter_bash
    return tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))


def read_script(text: str, path: str = "<string>", known: dict[str, Word] | None = None, line0: int = 0,
                sourced: Callable[[str], str | None] | None = None) -> Script:
    """The script's commands and ``#SBATCH`` lines; ``known``: variables the platform sets
    before the script runs (``$SLURM_NNODES`` from its ``#SBATCH --nodes``, ...); ``line0``: the
    line before the script's first in the file that holds it (a task YAML's ``run`` block);
    ``sourced``: the text of a file ``source NAME`` / ``. NAME`` reads, by that name (None: not there)."""
    script = Script(path, text)
    script.sbatch = sbatch_lines(text)
    walker = _Walker(script, dict(known or {}))
    walker.sourced = sourced
    walker.program(text.encode("utf-8", "surrogateescape"), line0, 0)
    return script


_SBATCH = re.compile(r"^#SBATCH\s+(.*?)\s*$")


def sbatch_lines(text: str) -> list[tuple[str, int]]:
    """The ``#SBATCH`` options sbatch reads: the comment lines at the top of the script, before
    its first command (sbatch stops at the first line that is neither a comment nor blank)."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        found = _SBATCH.match(stripped)
        if found:
            out.append((found.group(1).split(" #", 1)[0].strip(), number))
    return out


class _Walker:
    """Walks the syntax tree in order, expanding each command's words with the variables so far."""

    def __init__(self, script: Script, variables: dict[str, Word]) -> None:
        self.script = script
        self.variables: dict[str, Word | tuple[Word, ...]] = variables
        self.src = b""
        self.line0 = self.col0 = 0
        self.depth = self.nesting = 0
        self.under = ""
        self.written: dict[str, tuple[bytes, int, int]] = {}    # ``cat > NAME <<EOF``: NAME's script, where
        self.uncertain: set[str] = set()      # set in a branch or loop that may not run: no test is sure of them
        self.sourced: Callable[[str], str | None] | None = None
        self.sourcing: set[str] = set()       # the files being sourced (a file that sources itself is read once)

    # the tree -------------------------------------------------------------------------------------
    def program(self, src: bytes, line0: int, col0: int) -> None:
        saved = self.src, self.line0, self.col0
        self.src, self.line0, self.col0 = src, line0, col0
        self.depth += 1
        try:
            if self.depth <= MOST_DEPTH:
                tree = _parser().parse(src)
                self.statements(tree.root_node, conditional=False)
        finally:
            self.depth -= 1
            self.src, self.line0, self.col0 = saved

    def statements(self, node, conditional: bool) -> None:
        self.nesting += 1
        try:
            if self.nesting <= MOST_NESTING:
                for child in node.children:
                    self.statement(child, conditional)
        finally:
            self.nesting -= 1

    def statement(self, node, conditional: bool) -> None:
        kind = node.type
        if kind == "ERROR":
            self.script.errors += 1
        if kind == "variable_assignment":
            self.assign(node, conditional)
        elif kind == "declaration_command":
            for child in node.children:
                if child.type == "variable_assignment":
                    self.assign(child, conditional)
        elif kind == "command":
            self.command(node)
        elif kind == "redirected_statement" and (self.read_heredoc(node, conditional) or self.run_heredoc(node)):
            return
        elif kind == "function_definition":
            return                       # a function's commands run where it is called: not followed
        elif kind == "if_statement":
            self.branches(node, conditional)
        elif kind == "case_statement":
            self.cases(node, conditional)
        elif kind in ("elif_clause", "else_clause", "case_item", "while_statement",
                      "for_statement", "c_style_for_statement", "do_group"):
            self.statements(node, conditional=True)
        elif kind in ("heredoc_body", "comment", "test_command"):
            return
        else:                             # lists, pipelines, subshells, redirections, compound statements
            self.statements(node, conditional)

    def branches(self, node, conditional: bool) -> None:
        """``if ...; then ...; elif ...; else ...; fi``: a branch whose test is known from the
        variables so far (``[ "$USE_FSDP" = 1 ]`` after ``USE_FSDP=${USE_FSDP:-1}``) runs, as bash
        runs it, and those after it do not; one whose test only the run knows may run or not
        (``conditional``: it fills only what is unset), and so may every one after it."""
        unsure, taken = False, False
        for test, body in _clauses(node):
            if taken:
                self.aside(body)
                continue
            truth = True if test is None else self.truth(test)
            for part in test or ():
                self.statement(part, conditional or unsure)
            if truth is False:
                self.aside(body)
                continue
            for part in body:
                self.statement(part, conditional or unsure or truth is None)
            taken = bool(truth)
            unsure = unsure or truth is None

    def cases(self, node, conditional: bool) -> None:
        """``case WORD in PATTERN) ...;; esac``: bash runs the first item a pattern of which matches
        the word (glob patterns, ``|`` between them; a quoted one literal), the others not; where the
        word or a pattern before the match only the run knows, every item from there may run
        (``conditional``), as an ``if`` whose test is unknown. ``;&`` / ``;;&`` fall-throughs run on too."""
        value = node.child_by_field_name("value")
        word = self._known(value) if value is not None else None
        unsure, taken = word is None, False
        for item in (c for c in node.children if c.type == "case_item"):
            body = [c for c in item.children if c.type not in (";;", ";&", ";;&", ")", "|", "(")
                    and c not in item.children_by_field_name("value")]
            if taken:
                self.aside(body)
                continue
            match = None if unsure else self._matches(word, item.children_by_field_name("value"))
            if match is False:
                self.aside(body)
                continue
            for part in body:
                self.statement(part, conditional or unsure or match is None)
            falls = any(c.type in (";&", ";;&") for c in item.children)
            taken = bool(match) and not falls
            unsure = unsure or match is None or falls

    def _matches(self, word: str, patterns: list) -> bool | None:
        """Whether one of a case item's patterns matches ``word``; None where one is unknown."""
        for pattern in patterns:
            text = self._known(pattern)
            if text is None:
                return None
            glob = pattern.type in ("word", "extglob_pattern", "concatenation")
            if (fnmatch.fnmatchcase(word, text) if glob else word == text):
                return True
        return False

    def aside(self, body: list) -> None:
        """A branch bash does not take with the values the script sets: its commands walked apart
        (``Script.untaken``), leaving the variables, the written scripts and the commands as they were."""
        saved = dict(self.variables), set(self.uncertain), dict(self.written), len(self.script.commands)
        try:
            for part in body:
                self.statement(part, True)
        finally:
            self.script.untaken.extend(self.script.commands[saved[3]:])
            del self.script.commands[saved[3]:]
            self.variables, self.uncertain, self.written = saved[0], saved[1], saved[2]

    def truth(self, parts: list) -> bool | None:
        """A branch's test as bash would find it, where it is one ``[ ... ]`` / ``[[ ... ]]`` over
        known words: string (in)equality, ``-z`` / ``-n``, integer comparisons, ``!``, ``&&`` and
        ``||``; None where only the run knows (a command, an unknown word, a ``[[ == ]]`` pattern)."""
        tests = [p for p in parts if p.type not in (";", "&", "comment")]
        if len(tests) != 1 or tests[0].type != "test_command":
            return None
        inner = [c for c in tests[0].named_children if c.type != "comment"]
        return self._truth(inner[0]) if len(inner) == 1 else None

    def _truth(self, node) -> bool | None:
        kind = node.type
        if kind == "parenthesized_expression" and node.named_child_count == 1:
            return self._truth(node.named_children[0])
        if kind == "unary_expression":
            operator = self.text(node.child_by_field_name("operator") or node.children[0])
            operand = node.named_children[-1]
            if operator == "!":
                inner = self._truth(operand)
                return None if inner is None else not inner
            value = self._known(operand)
            if value is None or operator not in ("-z", "-n"):
                return None
            return (value == "") == (operator == "-z")
        if kind != "binary_expression":
            return None
        found = node.child_by_field_name("operator")
        left, right = node.child_by_field_name("left"), node.child_by_field_name("right")
        if found is None or left is None or right is None:
            return None
        operator = self.text(found)
        if operator in ("&&", "||", "-a", "-o"):
            a, b = self._truth(left), self._truth(right)
            if operator in ("&&", "-a"):
                return False if False in (a, b) else None if None in (a, b) else True
            return True if True in (a, b) else None if None in (a, b) else False
        a, b = self._known(left), self._known(right)
        if a is None or b is None:
            return None
        if operator in ("=", "==", "!="):
            if right.type not in ("string", "raw_string") and any(ch in b for ch in "*?["):
                return None                   # ``[[ $X == fp* ]]``: a pattern
            return (a == b) == (operator != "!=")
        numbers = {"-eq": int.__eq__, "-ne": int.__ne__, "-lt": int.__lt__, "-le": int.__le__, "-gt": int.__gt__,
                   "-ge": int.__ge__}
        if operator in numbers and re.fullmatch(r"-?\d+", a.strip()) and re.fullmatch(r"-?\d+", b.strip()):
            return numbers[operator](int(a), int(b))
        return None

    def _known(self, node) -> str | None:
        if self._uncertain(node):
            return None
        words = self.expand(node, split=False)
        return words[0].text if len(words) == 1 else "" if not words else None

    def _uncertain(self, node) -> bool:
        """Whether the word reads a variable that a branch or loop that may not have run set."""
        if node.type == "variable_name" and self.text(node) in self.uncertain:
            return True
        return any(self._uncertain(child) for child in node.children)

    def text(self, node) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "surrogateescape")

    def where(self, node) -> tuple[int, int]:
        row, column = node.start_point
        return self.line0 + row + 1, (self.col0 if row == 0 else 0) + column + 1

    # assignments ----------------------------------------------------------------------------------
    def assign(self, node, conditional: bool) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        if name_node is None:
            return
        name = self.text(name_node)
        if name_node.type == "subscript":
            return                        # ARR[i]=x: an element, not followed
        if conditional:
            self.uncertain.add(name)
        else:
            self.uncertain.discard(name)
        if value_node is None:
            value: Word | tuple[Word, ...] = Word("", *self.where(node))
        elif value_node.type == "array":
            value = tuple(w for child in value_node.named_children[:MOST_VALUE] if child.type != "comment"
                          for w in self.expand(child))       # a commented-out element is no word
        else:
            words = self.expand(value_node, split=False)
            # quoting is the use's, not the value's: ``"$X"`` stays one word, ``$X`` is split
            value = replace(words[0], quoted=False) if words else Word("", *self.where(value_node))
        old = self.variables.get(name)
        if any(child.type == "+=" for child in node.children) and old is not None:
            if conditional and not _empty(old):
                return                    # ``X+=(...)`` in a branch: the first branch to fill X fills it
            value = _appended(old, value)
        elif conditional and old is not None and _known(old):
            return                        # a branch may not run: the value set before stands
        self.variables[name] = _capped(value)

    def read_heredoc(self, node, conditional: bool) -> bool:
        """``read [-r] [-d ''] NAME <<EOF ... EOF``: NAME holds the heredoc's text as bash gives it
        (expanded unless the delimiter is quoted; backslash-newline joined unless both the
        delimiter is quoted and ``-r`` is given; the first line only without ``-d ''``; leading and
        trailing blanks stripped). False where the statement is not that (it is walked as usual)."""
        command = next((c for c in node.children if c.type == "command"), None)
        heredoc = next((c for c in node.children if c.type == "heredoc_redirect"), None)
        if command is None or heredoc is None:
            return False
        words = [w for child in command.children if child.is_named for w in self.expand(child, split=False)]
        if not words or words[0].text != "read":
            return False
        options, names = _read_options(words[1:])
        body = next((c for c in heredoc.children if c.type == "heredoc_body"), None)
        start = next((c for c in heredoc.children if c.type == "heredoc_start"), None)
        if options is None or len(names) != 1 or names[0].text is None or start is None:
            return False
        quoted = self.text(start)[:1] in ("'", '"', "\\")
        pieces = self.heredoc_pieces(body, quoted, raw="r" in options) if body is not None else []
        if options.get("d", "\n") != "":
            pieces = _first_line(pieces)
        value = _stripped(pieces, *self.where(heredoc))
        old = self.variables.get(names[0].text)
        if not (conditional and old is not None and _known(old)):
            self.variables[names[0].text] = _capped(value)
        return True

    def run_heredoc(self, node) -> bool:
        """``sbatch <<EOF`` / ``bash <<EOF``: the heredoc is the script the command runs, so its
        commands are walked as this script's (the job a ``sbatch`` heredoc submits is the file's
        job); ``cat > NAME <<EOF`` writes a script that a later ``sbatch NAME`` / ``bash NAME`` runs
        (``run_written``). False where the statement is neither."""
        command = next((c for c in node.children if c.type == "command"), None)
        heredoc = next((c for c in node.children if c.type == "heredoc_redirect"), None)
        body = next((c for c in heredoc.children if c.type == "heredoc_body"), None) if heredoc is not None else None
        if command is None or body is None:
            return False
        words = [w for child in command.children if child.is_named for w in self.expand(child, split=False)]
        name = (words[0].text or "").rsplit("/", 1)[-1] if words else ""
        line, column = self.where(body)
        script = (self.src[body.start_byte:body.end_byte], line - 1, column - 1)
        if name == "cat":
            target = self._written_to(node) or self._written_to(heredoc)
            if target:
                self.written[target] = script
            return bool(target)
        if name not in RUNS_STDIN:
            return False
        self.program(*script)
        return True

    def _written_to(self, node) -> str:
        """The file a ``> NAME`` redirect among ``node``'s children writes, where the walk knows it."""
        for child in node.children:
            if child.type == "file_redirect" and child.child_by_field_name("destination") is not None:
                words = self.expand(child.child_by_field_name("destination"), split=False)
                return words[0].text or "" if words else ""
        return ""

    def run_written(self, words: list[Word]) -> bool:
        """``sbatch NAME`` / ``bash NAME`` / ``./NAME`` of a script this one wrote: its commands walked."""
        runs = words[0].text in RUNS_STDIN and len(words) > 1
        target = (words[1].text if runs else words[0].text) or ""
        script = self.written.get(target.removeprefix("./"))
        if script is None:
            return False
        self.program(*script)
        return True

    def run_sourced(self, words: list[Word]) -> bool:
        """``source FILE`` / ``. FILE`` of a file there is (``sourced`` gives its text; a folder only
        the run knows, ``${SCRIPT_DIR}/conf/arguments.sh``, is tried as the known rest): its
        assignments and commands run here, as bash runs them, each placed at the ``source`` line (a
        finding points into this file). False where it is no such command (it is walked as any)."""
        if self.sourced is None or len(words) < 2 or words[0].text not in ("source", "."):
            return False
        target = words[1]
        tail = target.parts[-1].text if target.text is None and target.parts else None
        name = target.text if target.text is not None else (
            tail.lstrip("/") if tail and tail.startswith("/") and len(tail) > 1 else None)   # ${DIR}/conf/x.sh
        text = self.sourced(name) if name and name not in self.sourcing else None
        if text is None:
            return False
        before, first = dict(self.variables), len(self.script.commands)
        self.sourcing.add(name)
        try:
            self.program(text.encode("utf-8", "surrogateescape"), 0, 0)
        finally:
            self.sourcing.discard(name)
        at = (words[0].line, words[0].column)
        for key, value in self.variables.items():
            if before.get(key) is not value:
                self.variables[key] = _placed(value, at)
        for index in range(first, len(self.script.commands)):
            command = self.script.commands[index]
            self.script.commands[index] = Command(tuple(_placed(w, at) for w in command.words),
                                                  {k: _placed(v, at) for k, v in command.prefix.items()},
                                                  command.variables, at[0], command.under)
        return True

    def heredoc_pieces(self, body, quoted: bool, raw: bool) -> list[Word]:
        """A heredoc body as located pieces (blank runs, other runs, expansions' values)."""
        pieces: list[Word] = []
        cursor = body.start_byte
        for child in [*body.children, None]:
            end = child.start_byte if child is not None else body.end_byte
            if end > cursor:
                pieces += self.literal(cursor, end, unescape=not quoted, join=not (quoted and raw), raw=raw)
            if child is None:
                break
            if child.type == "heredoc_content":
                pieces += self.literal(child.start_byte, child.end_byte, unescape=not quoted,
                                       join=not (quoted and raw), raw=raw)
            elif not quoted:
                pieces += self.expand(child, split=False)
            else:
                pieces += self.literal(child.start_byte, child.end_byte, unescape=False, join=not raw, raw=raw)
            cursor = child.end_byte
        return pieces

    def literal(self, start: int, end: int, unescape: bool, join: bool, raw: bool) -> list[Word]:
        """Source bytes as pieces at their own line and column: runs of blanks, runs of the rest;
        a backslash-newline dropped where it joins lines, ``\\$`` ``\\``` ``\\\\`` unescaped in an
        unquoted heredoc, and every ``\\x`` where ``read`` runs without ``-r``."""
        text = self.src[start:end].decode("utf-8", "surrogateescape")
        line, column = self.where_byte(start)
        out: list[Word] = []
        for match in re.finditer(r"\\\n|\s+|(?:\\[^\n]|[^\s\\])+|\\", text):
            piece = match.group()
            before = text[:match.start()]
            at_line = line + before.count("\n")
            at_column = (column + len(before)) if "\n" not in before else len(before) - before.rfind("\n")
            if piece == "\\\n":
                if not join:
                    out += [Word("\\", at_line, at_column), Word("\n", at_line, at_column + 1)]
                continue
            if not piece.isspace():
                if not raw:
                    piece = re.sub(r"\\(.)", r"\1", piece)
                elif unescape:
                    piece = re.sub(r"\\([$`\\])", r"\1", piece)
            out.append(Word(piece, at_line, at_column))
        return out

    def where_byte(self, offset: int) -> tuple[int, int]:
        """The 1-based line and column of a byte of the source (columns in characters)."""
        before = self.src[:offset]
        row = before.count(b"\n")
        line_start = before.rfind(b"\n") + 1
        column = len(before[line_start:].decode("utf-8", "surrogateescape"))
        return self.line0 + row + 1, (self.col0 if row == 0 else 0) + column + 1

    # commands -------------------------------------------------------------------------------------
    def command(self, node) -> None:
        if len(self.script.commands) >= MOST_COMMANDS:
            return
        prefix: dict[str, Word] = {}
        words: list[Word] = []
        for child in node.children:
            if child.type == "variable_assignment":
                name = child.child_by_field_name("name")
                value = child.child_by_field_name("value")
                if name is not None:
                    expanded = self.expand(value, split=False) if value is not None else []
                    prefix[self.text(name)] = expanded[0] if expanded else Word("", *self.where(child))
            elif child.type == "command_name":
                words += self.expand(child.named_children[0] if child.named_children else child)
            elif child.type in ("file_redirect", "heredoc_redirect", "herestring_redirect"):
                continue
            elif child.is_named:
                words += self.expand(child)
        if not words:
            for name, value in prefix.items():       # `X=1` alone parses as a command in some places
                self.variables[name] = value
            return
        if self.run_written(words) or self.run_sourced(words):
            return
        line = self.where(node)[0]
        variables = {k: v for k, v in self.variables.items() if isinstance(v, Word)}
        shell = shell_string(words)
        if shell is not None and (shell[0] == 0 or words[0].text == "srun"):
            under, self.under = self.under, self.under or (words[0].text if shell[0] else "")
            try:
                self._nested(words[shell[1]])
            finally:
                self.under = under
            return
        self.script.commands.append(Command(tuple(words), prefix, {**variables, **prefix}, line, self.under))

    def _nested(self, word: Word) -> None:
        """``bash -c '...'``: the string is a script of its own, run with the variables so far; a
        piece only the run knows (``bash -c "$LAUNCHER $CMD"`` with ``$CMD`` partly unknown) stands
        in it as a variable that holds the unknown word."""
        if word.text is not None:
            source = word.text
        else:
            pieces = []
            for index, part in enumerate(word.parts):
                if part.text is None:
                    self.variables[f"_vramlint_unknown_{index}"] = part
                    pieces.append(f"${{_vramlint_unknown_{index}}}")
                else:
                    pieces.append(part.text)
            source = "".join(pieces)
        first = word.parts[0] if word.text is None and word.parts else word
        self.program(source.encode("utf-8", "surrogateescape"), first.line - 1, first.column)

    # words ----------------------------------------------------------------------------------------
    def expand(self, node, split: bool = True) -> list[Word]:
        """A word node as the words it becomes: one, several (an unquoted expansion split on
        whitespace, ``"${ARR[@]}"``), or one unknown (also past ``MOST_NESTING`` nested expansions)."""
        self.nesting += 1
        try:
            if self.nesting > MOST_NESTING:
                return [Word(None, *self.where(node), unknown="expansions nested too deep to follow")]
            return self._expand(node, split)
        finally:
            self.nesting -= 1

    def _expand(self, node, split: bool) -> list[Word]:
        kind = node.type
        line, column = self.where(node)
        if kind in ("word", "number", "extglob_pattern"):
            return [Word(_unescape(self.text(node)), line, column)]
        if kind == "raw_string":
            return [Word(self.text(node)[1:-1], line, column, quoted=True)]
        if kind == "ansi_c_string":
            return [Word(self.text(node)[2:-1], line, column, quoted=True)]
        if kind in ("simple_expansion", "expansion"):
            value = self.variable(node)
            if isinstance(value, tuple):          # ${ARGS[@]} unquoted: each element word-split
                return [w for element in value for w in _split(replace(element, quoted=False))] if split \
                    else list(value)
            return _split(value) if split else [value]
        if kind == "string":
            inner = [c for c in node.children if c.type != '"']
            if len(inner) == 1 and inner[0].type == "expansion":
                value = self.variable(inner[0])
                if isinstance(value, tuple):
                    return list(value)            # "${ARGS[@]}": one word per element
            return [self.string(node)]
        if kind == "concatenation":
            parts = [w for child in node.children for w in self.expand(child, split=False)]
            return [_joined(parts, line, column)]
        if kind == "command_substitution":
            return [Word(None, line, column, unknown=self.text(node))]
        if kind == "arithmetic_expansion":
            return [self.arithmetic(node)]
        return [Word(_unescape(self.text(node)), line, column)]

    def string(self, node) -> Word:
        line, column = self.where(node)
        parts = []
        for child in node.children:
            if child.type == '"':
                continue
            if child.type == "string_content":
                raw = self.text(child).replace("\\\n", "")          # a line continuation inside quotes
                parts.append(Word(re.sub(r'\\([$`"\\])', r"\1", raw), line, column))
            else:                   # an array among other text ("cmd ${ARGS[@]}"): its elements a space apart
                for index, element in enumerate(self.expand(child, split=False)):
                    parts.extend([Word(" ", element.line, element.column)] * bool(index) + [element])
        joined = _joined(parts, line, column)
        if len(parts) == 1 and parts[0].text is not None and node.child_count == 3 and node.children[1].type != \
                "string_content":
            return Word(parts[0].text, parts[0].line, parts[0].column, quoted=True)   # "$X": where X was set
        return Word(joined.text, joined.line, joined.column, joined.unknown, quoted=True, parts=joined.parts)

    def variable(self, node) -> Word | tuple[Word, ...]:
        """``$X`` / ``${X}`` / ``${X:-default}`` / ``${X:=default}`` / ``${X[@]}`` / ``${#X}``."""
        line, column = self.where(node)
        text = self.text(node)
        names = [c for c in node.children if c.type in ("variable_name", "special_variable_name", "subscript")]
        if not names:
            return Word(None, line, column, unknown=text)
        target = names[0]
        if target.type == "subscript":
            name = self.text(target.child_by_field_name("name") or target)
            index = self.text(target.child_by_field_name("index")) if target.child_by_field_name("index") else ""
            value = self.variables.get(name)
            if isinstance(value, tuple) and index in ("@", "*"):
                return value
            return Word(None, line, column, unknown=text)
        name = self.text(target)
        value = self.variables.get(name)
        if isinstance(value, tuple):
            value = value[0] if value else Word("", line, column)
        if text.startswith("${#"):
            known = isinstance(value, Word) and value.text is not None
            return Word(str(len(value.text)), line, column) if known else Word(None, line, column, unknown=text)
        rest = [c.type for c in node.children if c.type not in ("$", "${", "}", target.type)]
        operator = rest[0] if rest else None
        if operator in (":-", "-", ":=", "="):
            if value is None or (operator.startswith(":") and value.text == ""):
                default = self._default(node, operator, line, column)
                if operator in (":=", "="):
                    self.variables[name] = default
                return default
            return value
        if operator is not None:
            return Word(None, line, column, unknown=text)          # ${X:+y}, ${X%.*}, ${X/a/b}: not followed
        return value if value is not None else Word(None, line, column, unknown=f"${name}")

    def _default(self, node, operator: str, line: int, column: int) -> Word:
        seen, parts = False, []
        for child in node.children:
            if child.type == operator:
                seen = True
            elif seen and child.type != "}":
                parts.extend(self.expand(child, split=False))
        return _joined(parts, line, column) if parts else Word("", line, column)

    def arithmetic(self, node) -> Word:
        """``$((...))`` over integers the script knows: + - * / % and parentheses."""
        line, column = self.where(node)
        text = self.text(node)[3:-2]

        def value(match: re.Match) -> str:
            word = self.variables.get(match.group(1))
            if isinstance(word, Word) and word.text is not None and word.text.strip().lstrip("-").isdigit():
                return word.text.strip()
            raise ValueError(match.group(1))
        try:
            expression = re.sub(r"\$?\{?([A-Za-z_][A-Za-z_0-9]*)\}?", value, text)
            if not re.fullmatch(r"[\d\s+\-*/%()]+", expression) or len(expression) > 200:
                raise ValueError(text)
            result = _integer(expression.strip())     # `$(( a * 2 ))`: Python parses no leading space
        except (ValueError, ZeroDivisionError, SyntaxError):
            return Word(None, line, column, unknown=self.text(node))
        return Word(str(result), line, column)


def _placed(value, at: tuple[int, int]):
    """A word (or an array's words) from a sourced file, placed at the ``source`` line that read it."""
    if isinstance(value, tuple):
        return tuple(_placed(v, at) for v in value)
    return replace(value, line=at[0], column=at[1], parts=tuple(_placed(p, at) for p in value.parts))


def _clauses(node) -> list[tuple[list | None, list]]:
    """An ``if`` statement's branches in order: each test's nodes (None for ``else``) and its body."""
    out, test, body, into = [], [], [], "test"
    for child in node.children:
        if child.type in ("if", "fi"):
            continue
        if child.type == "then":
            into = "body"
        elif child.type in ("elif_clause", "else_clause"):
            out += _clauses_of(child)
        elif into == "test":
            test.append(child)
        else:
            body.append(child)
    return [(test, body)] + out


def _clauses_of(clause) -> list[tuple[list | None, list]]:
    if clause.type == "else_clause":
        return [(None, [c for c in clause.children if c.type != "else"])]
    test, body, into = [], [], "test"
    for child in clause.children:
        if child.type == "elif":
            continue
        if child.type == "then":
            into = "body"
        elif into == "test":
            test.append(child)
        else:
            body.append(child)
    return [(test, body)]


def _integer(expression: str) -> int:
    """An integer expression of + - * / % and parentheses, as bash computes it (``/`` truncates)."""
    import ast
    tree = ast.parse(expression.replace("/", "//"), mode="eval")

    def value(node) -> int:
        if isinstance(node, ast.Expression):
            return value(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -value(node.operand) if isinstance(node.op, ast.USub) else value(node.operand)
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)):
            left, right = value(node.left), value(node.right)
            if abs(left) > 1 << 62 or abs(right) > 1 << 62:
                raise ValueError("too large")
            return {ast.Add: left + right, ast.Sub: left - right, ast.Mult: left * right}.get(type(node.op)) \
                if not isinstance(node.op, (ast.FloorDiv, ast.Mod)) else (
                int(left / right) if isinstance(node.op, ast.FloorDiv) else left % right)
        raise ValueError("not an integer expression")
    return value(tree)


_READ_VALUED = frozenset("adinNptu")      # ``read`` options that take a value (bash 5 help read)


def _read_options(words: list[Word]) -> tuple[dict[str, str] | None, list[Word]]:
    """``read``'s options and the names it assigns; None where an option is only known when it
    runs or is ``-a`` (an array), which this reader does not follow."""
    options: dict[str, str] = {}
    index = 0
    while index < len(words):
        text = words[index].text
        if text is None:
            return None, []
        if not text.startswith("-") or text == "-":
            break
        for position, letter in enumerate(text[1:], 1):
            if letter in _READ_VALUED:
                value = text[position + 1:]
                if not value:
                    index += 1
                    value = words[index].text if index < len(words) else None
                if value is None or letter == "a":
                    return None, []
                options[letter] = value
                break
            options[letter] = ""
        index += 1
    return options, words[index:]


def _first_line(pieces: list[Word]) -> list[Word]:
    """What ``read`` without ``-d`` takes: the pieces up to the first newline."""
    out = []
    for piece in pieces:
        if piece.text is not None and "\n" in piece.text and piece.text.isspace():
            break
        out.append(piece)
    return out


def _stripped(pieces: list[Word], line: int, column: int) -> Word:
    """``read``'s value for one name: the pieces without leading and trailing blanks, one word
    whose text is known where every piece is, keeping the pieces (so splitting it later puts each
    word where it is written)."""
    while pieces and pieces[0].text is not None and pieces[0].text.isspace():
        pieces = pieces[1:]
    while pieces and pieces[-1].text is not None and pieces[-1].text.isspace():
        pieces = pieces[:-1]
    if not pieces:
        return Word("", line, column)
    flat = [q for p in pieces for q in (p.parts if p.text is None and p.parts else (p,))]
    unknown = next((p for p in flat if p.text is None), None)
    first = flat[0]
    if unknown is not None:
        return Word(None, first.line, first.column, unknown=unknown.unknown, parts=tuple(flat))
    return Word("".join(p.text for p in flat), first.line, first.column, parts=tuple(flat))


def _capped(value):
    """A value past ``MOST_VALUE`` characters (or pieces) is one no launch needs: unknown."""
    if isinstance(value, tuple):
        return value[:MOST_VALUE] if len(value) > MOST_VALUE else value
    if (value.text is not None and len(value.text) > MOST_VALUE) or len(value.parts) > MOST_VALUE:
        return Word(None, value.line, value.column, unknown="a value too long to follow")
    return value


def _empty(value) -> bool:
    """An empty array, or a variable set to the empty string."""
    return value == () or (isinstance(value, Word) and value.text == "")


def _appended(old, new):
    """``X+=(...)`` / ``X+=text``: an array's elements after the old ones (a string variable's
    words first, as bash makes it element 0), a string's text after the old text."""
    if isinstance(new, tuple) or isinstance(old, tuple):
        before = old if isinstance(old, tuple) else (() if old.text == "" else (old,))
        return before + (new if isinstance(new, tuple) else (new,))
    if old.text is None or new.text is None:
        return Word(None, new.line, new.column, unknown=old.unknown or new.unknown, parts=(old, new))
    return replace(old, text=old.text + new.text)


def _known(value) -> bool:
    if isinstance(value, tuple):
        return all(_known(v) for v in value)
    return value.text is not None


def _joined(parts: list[Word], line: int, column: int) -> Word:
    """Words written together as one (``a$X"b"``): known where every piece is, else unknown
    with its pieces kept (so splitting it later keeps what is known)."""
    flat = [q for p in parts for q in (p.parts if p.text is None and p.parts else (p,))]
    unknown = next((p for p in flat if p.text is None), None)
    if unknown is not None:
        return Word(None, line, column, unknown=unknown.unknown, parts=tuple(flat))
    if len(parts) == 1:
        return parts[0]
    return _capped(Word("".join(p.text for p in parts), line, column))


def _split(value: Word) -> list[Word]:
    """An unquoted expansion's words: its value split on whitespace (bash's word splitting), the
    pieces of a partly unknown value kept apart (``"--nproc_per_node $N --nnodes 1"``)."""
    if value.quoted:
        return [value]
    if value.text is not None and not value.parts:
        pieces = value.text.split()
        return [Word(p, value.line, value.column) for p in pieces] if len(pieces) != 1 else [value]
    if not value.parts:
        return [value]
    words: list[Word] = []
    current: list[Word] = []
    for part in value.parts:
        if part.text is None:
            current.append(part)
            continue
        for piece in re.split(r"(\s+)", part.text):
            if piece.isspace():
                if current:
                    words.append(_joined(current, current[0].line, current[0].column))
                current = []
            elif piece:
                current.append(Word(piece, part.line, part.column))
    if current:
        words.append(_joined(current, current[0].line, current[0].column))
    return words


def _unescape(text: str) -> str:
    """An unquoted word's backslashes: ``\\x`` is ``x``; a backslash-newline disappears."""
    return re.sub(r"\\(.)", r"\1", text.replace("\\\n", ""), flags=re.S)
