"""The arithmetic a breakdown's formula column states, evaluated: ``tests/test_formulas.py`` holds
every printed formula to the bytes beside it.

A formula is a sum of terms ``[k x ]b B x OPERAND[ / DIVISOR]`` (OPERAND: P, T, (P + T), a number,
or a parenthesised sum of labelled numbers; DIVISOR: N_d or a number), or one of the shapes below
(``= k x n``, bytes per token, the replayed reserve). Text after the arithmetic says why and is
not read. ``None``: the formula states no arithmetic (a measured constant, a description).
"""

from __future__ import annotations

import math
import re

NUM = r"\d[\d,]*(?:\.\d+)?"


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _split_top(text: str, sep: str) -> list[str]:
    """``text`` split at ``sep`` outside parentheses."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(text):
        char = text[i]
        depth += (char == "(") - (char == ")")
        if depth == 0 and text.startswith(sep, i):
            parts.append(text[start:i])
            start = i = i + len(sep)
            continue
        i += 1
    return parts + [text[start:]]


def _group(text: str) -> tuple[str, str] | None:
    """A leading parenthesised group and what follows it."""
    depth = 0
    for i, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if depth == 0:
            return text[1:i], text[i + 1:]
    return None


def _operand(text: str, env: dict) -> tuple[float, str] | None:
    symbols = {"(P + T)": env["P"] + env["T"], "P": env["P"], "T": env["T"]}
    for name, value in symbols.items():
        if text.startswith(name) and not text[len(name):len(name) + 1].isalnum():
            return value, text[len(name):]
    match = re.match(NUM, text)
    if match:
        return _num(match[0]), text[match.end():]
    match = re.match(rf"[a-z_][\w' -]*? \(({NUM})\)", text)         # "the largest parameter (525,336,576)"
    if match:
        return _num(match[1]), text[match.end():]
    if text.startswith("("):
        inner, rest = _group(text)
        values = [re.search(NUM, part) for part in _split_top(inner, " + ")]
        if all(values):
            return sum(_num(v[0]) for v in values), rest
    return None


def _term(text: str, env: dict) -> float | None:
    text = re.sub(r"^[A-Za-z][\w ,-]*: ", "", text.strip())          # a label: "Adam m, v: ..."
    match = re.match(rf"(?:({NUM}) x )?({NUM}) B x ", text)
    if not match:
        return None
    factor = (_num(match[1]) if match[1] else 1) * _num(match[2])
    operand = _operand(text[match.end():], env)
    if operand is None:
        return None
    value, rest = operand
    value *= factor
    rest = re.sub(r"^ (?:routed-expert |trainable |vision tower )?params\b", "", rest)
    while step := re.match(rf" ([/x]) (N_d|nodes|{NUM}|\([^()]*\))", rest):   # "/ N_d", "/ nodes x 1.5", "/ (TP 2 x PP 1)"
        name = step[2]
        amount = (env[name] if name in env else _num(name) if name[0] != "(" else
                  math.prod(_num(n) for n in re.findall(NUM, name)))
        value = value / amount if step[1] == "/" else value * amount
        rest = rest[step.end():]
    return value


def evaluate(formula: str, env: dict) -> float | None:
    """The bytes ``formula`` states, or None where it states no arithmetic. ``env``: P and T (the
    parameters and trainable parameters of the rank's model), N_d (data-parallel ranks), nodes,
    GPUs (all of them) and per_node."""
    text = re.sub(rf"^({NUM}) B \+ ({NUM}) B x ", lambda m: f"{_num(m[1]) + _num(m[2]):g} B x ", formula)
    shapes = ((rf"= ({NUM}) x ({NUM})\b", lambda m: _num(m[1]) * _num(m[2])),
              (rf"^({NUM}) B/token/layer x ({NUM}) tokens x ({NUM}) layers",
               lambda m: _num(m[1]) * _num(m[2]) * _num(m[3])),
              (rf"^({NUM}) B/token x ({NUM}) tokens x ({NUM}) layers", lambda m: _num(m[1]) * _num(m[2]) * _num(m[3])),
              (rf"^({NUM}) B/token x ({NUM})", lambda m: _num(m[1]) * _num(m[2])),
              (rf"^({NUM}) x ({NUM}) x ({NUM}) B$", lambda m: _num(m[1]) * _num(m[2]) * _num(m[3])),
              (rf"capped at the ({NUM}) GB left", lambda m: _num(m[1]) * 1e9),
              (rf"^replayed reserved ({NUM}) GB − allocated ({NUM}) GB", lambda m: (_num(m[1]) - _num(m[2])) * 1e9),
              (rf"^({NUM}) x max\(4 x GPUs, 16\) x ({NUM})", lambda m: _num(m[1]) * max(4 * env["GPUs"], 16) * _num(m[2])))
    for pattern, value in shapes:
        match = re.search(pattern, text)
        if match:
            return value(match)
    if text.startswith("(") and text.endswith(") x GPUs per node"):
        inner = evaluate(_group(text)[0], env)
        return None if inner is None else inner * env["per_node"]
    terms = [_term(part, env) for part in _split_top(text, " + ")]
    if any(term is None for term in terms):
        return None
    return sum(terms)


def tolerance(formula: str, value: float, env: dict) -> float:
    """Rounding a formula does not state: ceiling divisions (a byte per rank and term), the GB a
    reserve is printed in."""
    if formula.startswith("replayed reserved") or " GB left" in formula:
        return 0.011e9
    return 1e-9 * value + 16 * env["N_d"] * (formula.count(" + ") + 1)
