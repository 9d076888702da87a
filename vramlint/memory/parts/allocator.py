"""A model of PyTorch's CUDA caching allocator, to predict ``max_memory_reserved``.

What nvidia-smi shows is not the tensors alive at the peak but the segments the caching allocator
holds: PyTorch never returns a freed block to the driver during a step, so a request that no
cached block can serve gets a new segment even when enough memory sits free in smaller blocks
(docs/reference.md section 4: reserved exceeds the allocated peak by 0.3-45 %). The rules below are
those of ``c10/cuda/CUDACachingAllocator.cpp`` (default settings):

- sizes round up to 512 bytes; requests up to 1 MiB come from a small pool of 2 MiB segments
  (modelled as exact: small tensors barely fragment);
- a larger request takes the smallest cached free block that fits (best fit), splitting it when
  more than 1 MiB would remain;
- otherwise a new segment is reserved: 20 MiB for requests up to 10 MiB, else the request
  rounded up to 2 MiB;
- a freed block merges with free neighbours of the same segment; ``empty_cache`` releases only
  segments that are entirely free;
- blocks belong to the stream that allocated them: a request on one stream never reuses a block
  cached by another (the pools are keyed by stream), which is why work that DeepSpeed runs on
  its all-gather and reduce streams reserves memory of its own.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

SMALL, ROUND, LARGE_BUFFER, MIN_LARGE, ROUND_LARGE = 1 << 20, 512, 20 << 20, 10 << 20, 2 << 20


@dataclass(frozen=True)
class Peaks:
    """What a replay ends with: ``max_memory_allocated`` and ``max_memory_reserved``."""

    allocated: int
    reserved: int


class CachingAllocator:
    """Replays allocations and frees; tracks allocated and reserved bytes and their peaks.

    The replays' hot path (a 70B model's step makes ~10^5 requests, a hint search replays a dozen
    steps): the accounting and the free-list updates are written out in ``malloc`` and ``free``
    rather than called, comparisons rather than ``max``."""

    __slots__ = ("_next", "_free", "_stream", "_free_at", "_free_end", "_segments", "_live", "allocated", "reserved",
                 "peak_allocated", "peak_reserved")

    def __init__(self) -> None:
        self._next = 0                                       # the next handle or segment id
        self._free: dict[int, list[tuple[int, int, int]]] = {}   # stream -> [(size, segment, offset)], sorted
        self._stream: dict[int, int] = {}                    # segment -> stream
        self._free_at: dict[tuple[int, int], int] = {}       # (segment, offset) -> size
        self._free_end: dict[tuple[int, int], int] = {}      # (segment, end) -> offset
        self._segments: dict[int, int] = {}                  # segment -> size
        self._live: dict[int, tuple[int, int, int]] = {}     # handle -> (segment, offset, size)
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0

    def malloc(self, size: int, stream: int = 0) -> int:
        size = -(-int(size) // ROUND) * ROUND or ROUND
        handle = self._next
        self._next = handle + 1
        if size <= SMALL:
            self._live[handle] = (-1, 0, size)
            self.reserved += size
            if self.reserved > self.peak_reserved:
                self.peak_reserved = self.reserved
            self._allocate(size)
            return handle
        pool = self._free.get(stream)
        if pool is None:
            pool = self._free[stream] = []
        index = bisect.bisect_left(pool, (size, -1, -1))
        if index < len(pool):
            block, segment, offset = pool.pop(index)
            del self._free_at[(segment, offset)]
            del self._free_end[(segment, offset + block)]
        else:
            block = LARGE_BUFFER if size <= MIN_LARGE else -(-size // ROUND_LARGE) * ROUND_LARGE
            segment, offset = self._next, 0
            self._next += 1
            self._segments[segment] = block
            self._stream[segment] = stream
            self.reserved += block
            if self.reserved > self.peak_reserved:
                self.peak_reserved = self.reserved
        if block - size > SMALL:
            rest = block - size
            bisect.insort(pool, (rest, segment, offset + size))
            self._free_at[(segment, offset + size)] = rest
            self._free_end[(segment, offset + block)] = offset + size
            block = size
        self._live[handle] = (segment, offset, block)
        self._allocate(block)
        return handle

    def _allocate(self, size: int) -> None:
        self.allocated += size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated

    def free(self, handle: int) -> None:
        segment, offset, size = self._live.pop(handle)
        self.allocated -= size
        if segment < 0:
            self.reserved -= size
            return
        free_at, free_end = self._free_at, self._free_end
        pool = self._free[self._stream[segment]]
        after = free_at.pop((segment, offset + size), None)
        if after is not None:
            del pool[bisect.bisect_left(pool, (after, segment, offset + size))]
            del free_end[(segment, offset + size + after)]
            size += after
        before = free_end.pop((segment, offset), None)
        if before is not None:
            del pool[bisect.bisect_left(pool, (offset - before, segment, before))]
            del free_at[(segment, before)]
            offset, size = before, size + offset - before
        bisect.insort(pool, (size, segment, offset))
        free_at[(segment, offset)] = size
        free_end[(segment, offset + size)] = offset

    def empty_cache(self) -> None:
        """Release every segment that holds no live block (torch.cuda.empty_cache)."""
        for segment, size in list(self._segments.items()):
            if self._free_at.get((segment, 0)) == size:
                pool = self._free[self._stream[segment]]
                del pool[bisect.bisect_left(pool, (size, segment, 0))]
                del self._free_at[(segment, 0)]
                del self._free_end[(segment, size)]
                del self._segments[segment]
                del self._stream[segment]
                self.reserved -= size

    def reset_peaks(self) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved
