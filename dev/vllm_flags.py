"""Dev-only: add the ``vllm serve`` flags vLLM's own source declares to schemas/vllm.schema.json.

The schema's hand-written entries (types, enums, minimums for the flags that shape memory) stay
as they are; every other field of vLLM's ``EngineArgs`` / ``AsyncEngineArgs`` and of the OpenAI
server's ``BaseFrontendArgs`` / ``FrontendArgs`` dataclasses becomes a flag with the type its
annotation gives (vLLM turns each field into ``--field-name``, a bool into a
``BooleanOptionalAction`` with its ``--no-`` form, and parses dicts and config classes from JSON
strings). Without them a valid file using, say, ``language-model-only`` or
``cudagraph-capture-sizes`` was refused as an unknown key.

    pip download vllm==0.19.0 --no-deps && unzip -q vllm-0.19.0-*.whl 'vllm/engine/*' 'vllm/entrypoints/*'
    python dev/vllm_flags.py path/to/unzipped   # rewrites schemas/vllm.schema.json, prints what it added
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

SCHEMA = Path(__file__).resolve().parents[1] / "schemas" / "vllm.schema.json"
SOURCES = {"vllm/engine/arg_utils.py": {"EngineArgs", "AsyncEngineArgs"},
           "vllm/entrypoints/openai/cli_args.py": {"BaseFrontendArgs", "FrontendArgs"}}
# annotation words -> JSON types; anything else (enums, Literals, config classes) is named below
WORDS = {"bool": "boolean", "int": "integer", "float": "number", "str": "string", "None": "null",
         "list": "array", "set": "array", "tuple": "array", "dict": "object", "Any": None}


def fields(root: Path) -> dict[str, str]:
    """The flags of vLLM's argument classes: name -> annotation source. ``EngineArgs.add_cli_args``
    registers its fields one by one (``"--field-name"``; a few fields are not flags), the frontend
    classes every public field (``get_kwargs(cls)``)."""
    out: dict[str, str] = {}
    for path, classes in SOURCES.items():
        text = (root / path).read_text()
        for node in ast.parse(text).body:
            if isinstance(node, ast.ClassDef) and node.name in classes:
                for st in node.body:
                    if not (isinstance(st, ast.AnnAssign) and isinstance(st.target, ast.Name)):
                        continue
                    name = st.target.id
                    listed = f'"--{name.replace("_", "-")}"' in text or "Frontend" in node.name
                    if listed and not name.startswith("_"):
                        out.setdefault(name, ast.unparse(st.annotation))
    return out


def json_types(annotation: str) -> list[str]:
    """The JSON types a YAML value of this annotation can take on vLLM's command line."""
    types: set[str] = set()
    for part in annotation.split("|"):
        head = part.strip().split("[")[0]
        if head in WORDS:
            if WORDS[head]:
                types.add(WORDS[head])
        elif head == "Literal":
            types.add("string")
        elif head.endswith("Config"):              # a config class: a mapping, or its JSON text
            types |= {"object", "string"}
        else:                                      # an enum (OptimizationLevel is an int one)
            types |= {"string", "integer"}
    if types & {"array", "object"}:
        types.add("string")                        # JSON text on the command line
    return sorted(types) or ["string", "number", "boolean", "array", "object", "null"]


def main(root: str) -> None:
    schema = json.loads(SCHEMA.read_text())
    props = schema["properties"]
    added = []
    for name, annotation in sorted(fields(Path(root)).items()):
        types = json_types(annotation)
        for flag in [name] + ([f"no_{name}"] if types == ["boolean"] else []):
            if flag not in props:
                props[flag] = {"type": types[0] if len(types) == 1 else types}
                added.append(f"{flag}: {annotation}")
    SCHEMA.write_text(json.dumps(schema, indent=1) + "\n")
    print(f"added {len(added)} flags:", *added, sep="\n  ")


if __name__ == "__main__":
    main(sys.argv[1])
