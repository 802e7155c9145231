"""The bounds of every number a user gives cbench, and the checks that hold the API's calls to them.

One place for both callers: the commands' option types (:mod:`cbench.cli.options`) take their
bounds from the constants here, and the API's calls check their keyword arguments with
:func:`integer`, :func:`number`, :func:`flag` and :func:`seed` before anything is read or
written, so ``cbench.bench(n_examples=float("nan"))`` and ``cbench bench --n-examples nan`` are
refused alike: a :class:`~cbench.errors.UsageError` naming the argument, its bounds and the value.

A bool is not an integer here (``n_examples=True`` is refused), nor is a float with an integral
value (``n_examples=100.0``) or a string (``"100"``): the API takes what its signature says.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from cbench.errors import UsageError

#: the splits of cbench/counterfactuals (whether a case's config has the split is checked on load)
SPLITS = ("train", "validation", "test")
#: pairs of inputs any command or call draws (each pair is a forward pass or more)
MAX_EXAMPLES = 100_000
#: seeds: numpy's and torch's generators take any of these (and the same value means the same draw)
MAX_SEED = 2**32 - 1
#: counts of things a build makes or a run repeats (epochs, rows, functions, pairs)
MAX_COUNT = 10_000_000
#: seconds of a time limit (a year: anything longer is a typo)
MAX_SECONDS = 365 * 24 * 3600.0
#: loss weights and learning rates
MAX_WEIGHT = 1e6


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def integer(name: str, value: Any, low: int, high: int) -> int:
    """``value`` if it is an int (not a bool) with ``low <= value <= high``; UsageError otherwise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise UsageError(f"{name} must be an integer from {low} to {high} (got {_show(value)}, "
                         f"a {type(value).__name__})")
    value = int(value)
    if not low <= value <= high:
        raise UsageError(f"{name} must be an integer from {low} to {high} (got {_show(value)})")
    return value


def number(name: str, value: Any, low: float, high: float, *, low_open: bool = False,
           high_open: bool = False) -> float:
    """``value`` as a float if it is a finite real number within the bounds (``low_open``:
    ``low`` itself refused; ``high_open`` likewise); UsageError otherwise."""
    span = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise UsageError(f"{name} must be a number in {span} (got {_show(value)}, a {type(value).__name__})")
    try:
        x = float(value)
    except (OverflowError, ValueError):
        raise UsageError(f"{name} must be a number in {span} (got {_show(value)})") from None
    if not math.isfinite(x):
        raise UsageError(f"{name} must be a finite number in {span} (got {_show(value)})")
    if x < low or x > high or (low_open and x == low) or (high_open and x == high):
        raise UsageError(f"{name} must be a number in {span} (got {_show(value)})")
    return x


def flag(name: str, value: Any) -> bool:
    """``value`` if it is True or False; UsageError otherwise (``"no"`` is truthy in Python)."""
    if not isinstance(value, bool):
        raise UsageError(f"{name} must be True or False (got {_show(value)}, a {type(value).__name__})")
    return value


def choice(name: str, value: Any, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices``; UsageError otherwise."""
    if not isinstance(value, str) or value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)} (got {_show(value)})")
    return value


def seed(name: str, value: Any) -> int:
    """A seed: an integer from 0 to :data:`MAX_SEED`."""
    return integer(name, value, 0, MAX_SEED)


def n_examples(name: str, value: Any, low: int = 1, *, none_ok: bool = False) -> int | None:
    """A number of input pairs: an integer from ``low`` to :data:`MAX_EXAMPLES` (None: the
    call's default, when ``none_ok``)."""
    if value is None and none_ok:
        return None
    return integer(name, value, low, MAX_EXAMPLES)
