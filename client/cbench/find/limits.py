"""The per-entry limits of the FIND sandbox and their bounds.

:class:`Limits` is what :func:`cbench.find.sandbox.run_submissions` applies to each entry; the
bounds below are what it (and ``cbench find score``, at parse time) accepts. They keep every
value one the supervisor and the kernel can take (a deadline ``time.monotonic() + wall_s``,
an rlimit in bytes) and one a scoring run can mean: at most an hour of wall clock or CPU per
function, at most 1 TiB of address space.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

from cbench.errors import UsageError

#: (lowest, highest) accepted, both included except where ``LOW_OPEN`` names the field
BOUNDS = {
    "wall_s": (0.0, 3600.0),
    "cpu_s": (1, 3600),
    "memory_mb": (64, 1 << 20),
    "print_bytes": (0, 1 << 30),
    "output_bytes": (1, 1 << 30),
}
LOW_OPEN = {"wall_s"}
#: what the options are called on the command line (``cbench find score``)
OPTION = {"wall_s": "--wall-s", "cpu_s": "--cpu-s", "memory_mb": "--memory-mb", "print_bytes": "print-bytes",
          "output_bytes": "output-bytes"}


@dataclass(frozen=True)
class Limits:
    """Per-entry limits (a batch may use ``len(entries) * wall_s`` in all)."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 1024
    print_bytes: int = 65536
    output_bytes: int = 1 << 20


def describe(name: str) -> str:
    lo, hi = BOUNDS[name]
    return f"{'more than' if name in LOW_OPEN else 'at least'} {lo:g} and at most {hi:g}"


def check_limits(limits: Limits) -> Limits:
    """``limits`` when every field is a number within :data:`BOUNDS` (a finite float for
    ``wall_s``, an int for the others); otherwise :class:`UsageError` naming the first one that
    is not."""
    if not isinstance(limits, Limits):
        raise UsageError(f"limits must be a cbench.find.sandbox.Limits, not {type(limits).__name__}")
    for f in fields(limits):
        name, value = f.name, getattr(limits, f.name)
        lo, hi = BOUNDS[name]
        what = OPTION[name]
        if name == "wall_s":
            ok_type = type(value) in (int, float) and math.isfinite(value)
        else:
            ok_type = type(value) is int
        if not ok_type:
            raise UsageError(f"limit {what} must be {'a finite number' if name == 'wall_s' else 'a whole number'} "
                             f"({describe(name)}), not {value!r}")
        if not ((lo < value if name in LOW_OPEN else lo <= value) and value <= hi):
            raise UsageError(f"limit {what} = {value!r} is out of range: it must be {describe(name)}")
    return limits
