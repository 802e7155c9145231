"""The C allocator's settings for cbench's processes (glibc only).

cbench's runs allocate and free tensors of one to tens of megabytes thousands of times (a masked
forward per batch of edges, a patched run per edge). With glibc's defaults a freed block above the
dynamic mmap threshold goes back to the kernel, and the top of the heap is trimmed as soon as 128 KB
of it is free; the next allocation of the same size then faults in fresh zeroed pages. On
`cbench verify ioi` (200 pairs) that was 121 million page faults and more system time than user
time: 502 s of wall. With blocks up to 32 MB served from the heap, the heap grown 1 GB at a time and
never trimmed, the same run took 214 s (12 s of system time); at 50 pairs, in one process,
136.8 s -> 58.1 s at 22 % more peak memory (`benchmarks/bench_allocator.py`; README "Measured").

:func:`tune` applies that once per process. The CLI calls it before any command runs; a library user
may call it too. ``CBENCH_MALLOC=default`` leaves the allocator as it is.
"""

from __future__ import annotations

import ctypes
import os
import sys

# mallopt parameters (malloc.h)
M_TRIM_THRESHOLD = -1
M_TOP_PAD = -2
M_MMAP_THRESHOLD = -3

MMAP_THRESHOLD = 32 << 20  # glibc's largest (HEAP_MAX_SIZE / 2 on 64-bit)
TOP_PAD = 1 << 30
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: never trim in practice

_tuned: bool | None = None


def tune() -> bool:
    """Set glibc's malloc for many short-lived large tensors; True if it was applied (now or before)."""
    global _tuned
    if _tuned is not None:
        return _tuned
    _tuned = False
    if os.environ.get("CBENCH_MALLOC", "").strip().lower() == "default" or not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    _tuned = all(mallopt(p, v) == 1 for p, v in ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_TOP_PAD, TOP_PAD),
                                                  (M_TRIM_THRESHOLD, TRIM_THRESHOLD)))
    return _tuned
