"""The Python API: one call per job of the ``cbench`` command, each returning a typed, frozen result.

``cbench.pull``, ``cbench.discover``, ``cbench.score``, ``cbench.evaluate``, ``cbench.bench``,
``cbench.verify`` and ``cbench.validate`` do what the commands of the same names do, with the
same defaults, and return :class:`PullResult`, :class:`DiscoveryResult`, :class:`ScoreResult`,
:class:`EvaluationResult`, :class:`BenchResult`, :class:`VerifyResult` and
:class:`ValidationResult`; :func:`cbench.register_method` adds a discovery method. The top-level
package re-exports them (imported on first use, so ``import cbench`` stays light); every failure
is a :class:`cbench.errors.CbenchError` with a one-line message. Reference: docs/python-api.md.

Sits below the ``cli`` (which may use it) and above every package it calls: ``verify``,
``report``, ``scoring``, ``discovery``, ``hub`` and below. Its modules import nothing heavy at
import time.
"""

from __future__ import annotations

from cbench.api.benching import bench
from cbench.api.checking import verify
from cbench.api.discovering import discover
from cbench.api.fetching import pull
from cbench.api.methods import methods, register_method, unregister_method
from cbench.api.results import (
    BenchResult,
    DiscoveryResult,
    EvaluationResult,
    PullResult,
    ScoreResult,
    ValidationResult,
    VerifyResult,
)
from cbench.api.scoring import evaluate, score
from cbench.api.validation import validate

__all__ = [
    "BenchResult", "DiscoveryResult", "EvaluationResult", "PullResult", "ScoreResult", "ValidationResult",
    "VerifyResult", "bench", "discover", "evaluate", "methods", "pull", "register_method", "score",
    "unregister_method", "validate", "verify",
]
