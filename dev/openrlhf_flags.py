"""Dev-only: the flags each OpenRLHF training program's argparse defines, per release, read from the
wheels with ``ast`` (no import): vramlint/data/openrlhf_flags.json, which readers/openrlhf.py holds a
launch line's flags to (argparse refuses the rest: "error: unrecognized arguments").

    for v in 0.11.2 0.11.0 0.10.4 0.10.2 0.10.1 0.9.10 0.9.5 0.9.0 0.6.1; do
        pip download openrlhf==$v --no-deps -d wheels; done
    python dev/openrlhf_flags.py wheels/*.whl > vramlint/data/openrlhf_flags.json
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import zipfile

from vramlint.vendored import argparse_flags


def main(wheels: list[str]) -> None:
    out: dict = {"source": "dev/openrlhf_flags.py over the openrlhf wheels named here", "releases": {}}
    for path in sorted(wheels):
        release = re.search(r"openrlhf-([0-9.]+)-", path).group(1)
        with zipfile.ZipFile(path) as wheel:
            programs = {}
            for name in wheel.namelist():
                found = re.search(r"openrlhf/cli/(train_(?:sft|dpo|rm|ppo_ray))\.py$", name)
                if found:
                    programs[found.group(1)] = argparse_flags(wheel.read(name).decode())
        digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
        out["releases"][release] = {"wheel_sha256": digest, "programs": programs}
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
