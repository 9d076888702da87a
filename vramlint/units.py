"""Byte units, in one place.

GPU vendors sell memory in GB (10^9) while drivers, PyTorch and vLLM report GiB (2^30).
vramlint keeps bytes internally and prints GiB, the unit of ``torch.cuda`` error messages and
of vLLM's start-up log; ``--gpus 1x24GB`` is read as decimal gigabytes like a spec sheet.
"""

from __future__ import annotations

import re

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

UNITS = {
    "B": 1, "KB": KB, "MB": MB, "GB": GB, "TB": TB,
    "KIB": KiB, "MIB": MiB, "GIB": GiB, "TIB": TiB,
}

_SIZE = re.compile(r"^\s*(\d{1,20}(?:\.\d{1,20})?)\s*([KMGT]?I?B)\s*$", re.IGNORECASE)
MOST_BYTES = 1 << 60        # an exbibyte: past any GPU's or host's memory, and far from float's limits


def parse_size(text: str) -> int | None:
    """``'24GB'`` → 24e9, ``'79.19GiB'`` → bytes, ``'81559MiB'`` → bytes; None if not a size (or
    a size past ``MOST_BYTES``: no memory is that large, and the arithmetic would overflow)."""
    match = _SIZE.match(text)
    if not match:
        return None
    number, unit = match.groups()
    size = float(number) * UNITS[unit.upper()]
    return round(size) if size <= MOST_BYTES else None
