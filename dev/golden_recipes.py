"""Dev-only: print the facts vramlint reads from every collected training recipe, in the golden
format of tests/data/golden/recipe_facts.json: each fact as ``value @line`` when the recipe says it
(the line of the key), or ``value (default: whose)`` when the framework's default stands. Review the
output by reading it against the recipe before copying it over the golden file; never regenerate
to make a failing test pass.

    python dev/golden_recipes.py > /tmp/recipe_facts.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from vramlint.documents import ParseError, parse_json, parse_yaml
from vramlint.readers.registry import RECIPES, detect

ROOT = Path(__file__).resolve().parent.parent / "tests" / "data" / "recipes"
FACTS = ("stage", "model", "micro_batch", "grad_accum", "seq_len", "packing", "grad_checkpointing", "mixed_precision",
         "weights_dtype", "optimizer", "lora_rank", "lora_targets", "lora_dropout", "load_in_4bit", "load_in_8bit",
         "attn", "deepspeed")


def shown(fact) -> str:
    value = list(fact.value) if isinstance(fact.value, tuple) else fact.value
    if isinstance(value, dict):
        value = "{inline}"
    if fact.location is not None:
        return f"{json.dumps(value)} @{fact.location.line}"
    return f"{json.dumps(value)} (default: {fact.default})" if fact.default else json.dumps(value)


def facts(path: Path) -> dict | None:
    text = path.read_text(encoding="utf-8")
    parse = parse_json if path.suffix in (".json", ".conf") else parse_yaml
    try:
        document = parse(text, str(path.relative_to(ROOT)))
    except ParseError:
        return None
    kind = detect(document.data)
    if kind not in RECIPES:
        return None
    recipe = RECIPES[kind].read(document)
    out = {"framework": recipe.framework, "task": recipe.task}
    if not recipe.training:
        return out
    out.update({name: shown(getattr(recipe, name)) for name in FACTS})
    if recipe.fsdp is not None:
        out["fsdp"] = {name: shown(getattr(recipe.fsdp, name)) for name in ("strategy", "version", "offload")}
    if recipe.features:
        out["features"] = [f"{f.what} [{f.effect}]" for f in recipe.features]
    if recipe.switches:
        out["switches"] = {name: shown(fact) for name, fact in sorted(recipe.switches.items())}
    for name in ("reference", "colocated_share", "adapter_dtype", "sync_each_batch"):
        fact = getattr(recipe, name)
        if fact.from_file:
            out[name] = shown(fact)
    return out


def main() -> None:
    rows = []
    for tsv in sorted(ROOT.glob("SOURCES-*.tsv")):
        rows += [line.split("\t")[0] for line in tsv.read_text().splitlines()[1:]]
    golden = {}
    for rel in sorted(set(rows)):
        found = facts(ROOT / rel)
        if found is not None:
            golden[rel] = found
    json.dump(golden, sys.stdout, indent=1, sort_keys=True)
    print()


if __name__ == "__main__":
    main()
