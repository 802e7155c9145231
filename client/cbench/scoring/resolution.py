"""The numerical resolution of a scores document: scores below it tie with zero.

A method's edge score is computed in the model's floating-point type, by sums over examples,
positions and dimensions. Two edges whose computed scores differ by less than the rounding error of
that computation cannot be told apart, and a score smaller than the rounding error cannot be told
from 0: it is no evidence that the method found the edge. Ranked as it is, though, any positive
number ranks ahead of an exact zero, so an edge scored 1e-12 beside exact zeros counts as
"detected" and lifts its class's AUROC (issue 45: 0.95 AUROC from scores eight orders of magnitude
below the largest one).

**The rule** (docs/scoring.md gives the derivation and the measurements behind it)::

    resolution = RESOLUTION_FACTOR * eps(dtype) * max_e |score_e|

with ``eps`` the machine epsilon of the type the scores were computed in (``method.details.dtype``
of the document, float32 when it does not say: cbench's runtime and the released models are
float32) and ``RESOLUTION_FACTOR = 64``. Every score with ``|score| < resolution`` is scored as 0
(ties count one half in the AUROC). The factor is measured, not guessed: the same methods on the
same pairs in float32 and float64 (``benchmarks/bench_score_resolution.py``) differ by a few
eps x max|score| wherever the computation is smooth, and edges whose exact effect is 0
come out within 0.03 eps x max|score| of 0. On ten stress models EAP-IG (inputs), activation patching,
NAP and IFR differ by at most 5 units and EAP by 19 on case 3; 64 covers them with a margin.

Scores ranked by their sign (mask logits: ``sp``, ``edge-sp``) are not effect sizes and 0 is not
special among them, so they get no floor (resolution 0). Node scores given by a node-level method
get the same rule over the node scores.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

__all__ = ["RESOLUTION_FACTOR", "DEFAULT_DTYPE", "score_dtype", "resolution_of", "floored", "ScoreFloor",
           "floor_scores"]

RESOLUTION_FACTOR = 64
DEFAULT_DTYPE = "float32"
_DTYPES = {"float32": np.float32, "float64": np.float64, "float16": np.float16, "bfloat16": None}
_BF16_EPS = 2.0 ** -7  # bfloat16 keeps 8 significant bits (numpy has no bfloat16)


def score_dtype(doc: Mapping) -> str:
    """The floating-point type a document's scores were computed in: ``method.details.dtype`` (or
    ``method.hyperparameters.dtype``) when it is one cbench knows, else float32."""
    method = doc.get("method") if isinstance(doc, Mapping) else None
    if isinstance(method, Mapping):
        for key in ("details", "hyperparameters"):
            block = method.get(key)
            value = block.get("dtype") if isinstance(block, Mapping) else None
            if isinstance(value, str) and value.removeprefix("torch.") in _DTYPES:
                return value.removeprefix("torch.")
    return DEFAULT_DTYPE


def _eps(dtype: str) -> float:
    kind = _DTYPES[dtype]
    return _BF16_EPS if kind is None else float(np.finfo(kind).eps)


def resolution_of(values, dtype: str = DEFAULT_DTYPE, factor: float = RESOLUTION_FACTOR) -> float:
    """``factor * eps(dtype) * max |values|`` over the finite values (0 when there are none)."""
    a = np.abs(np.asarray(values, dtype=np.float64))
    a = a[np.isfinite(a)]
    if a.size == 0:
        return 0.0
    return float(factor * _eps(dtype) * a.max())


def floored(values, resolution: float) -> np.ndarray:
    """``values`` with every entry whose magnitude is below ``resolution`` set to exactly 0."""
    v = np.asarray(values, dtype=np.float64)
    if resolution <= 0:
        return v.copy()
    return np.where(np.abs(v) < resolution, 0.0, v)


@dataclass(frozen=True)
class ScoreFloor:
    """The resolution applied to one vector of scores: what it was and what it changed."""

    resolution: float  #: scores with |score| below it tie with 0 (0: no floor)
    dtype: str
    factor: float
    n_floored: int  #: non-zero scores set to 0
    applied: bool  #: False for signed (mask-logit) rankings

    def to_dict(self) -> dict:
        return {"resolution": self.resolution, "dtype": self.dtype, "factor": self.factor,
                "n_floored": self.n_floored, "applied": self.applied}


def floor_scores(values, doc: Mapping | None = None, signed: bool = False,
                 dtype: str | None = None) -> tuple[np.ndarray, ScoreFloor]:
    """The scores as ranked (sub-resolution magnitudes tied with 0) and the floor used. ``signed``
    rankings (mask logits) are returned unchanged."""
    v = np.asarray(values, dtype=np.float64)
    dt = dtype or (score_dtype(doc) if doc is not None else DEFAULT_DTYPE)
    if signed:
        return v.copy(), ScoreFloor(0.0, dt, RESOLUTION_FACTOR, 0, False)
    r = resolution_of(v, dt)
    out = floored(v, r)
    return out, ScoreFloor(r, dt, RESOLUTION_FACTOR, int(((v != 0) & (out == 0)).sum()), True)
