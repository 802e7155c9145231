"""``cbench.verify``: a released model's node, edge and calibration gates recomputed on fresh
pairs (``cbench verify``)."""

from __future__ import annotations

import os
from typing import Any

from cbench.api.results import VerifyResult


def verify(case: Any, *, n_pairs: int = 1000, seed: int = 20261122, sampled: bool = False,
           revision: str | None = None, endpoint: str | None = None,
           hub: str | os.PathLike | None = None) -> VerifyResult:
    """Recompute every gate of ``case`` (as for :func:`cbench.discover`) on ``n_pairs`` pairs of
    the counterfactuals validation split and ``n_pairs`` freshly sampled pairs (``seed``; only
    the fresh ones with ``sampled=True``). ``result.passed`` says whether every gate holds;
    ``result.report.format()`` is the text ``cbench verify`` prints.

    >>> cbench.verify("case-3", n_pairs=200).passed                   # doctest: +SKIP
    True
    """
    from cbench.api.inputs import resolve_case
    from cbench.api import arguments as check
    from cbench.verify.artifact import verify_artifact

    check.n_examples("n_pairs", n_pairs, low=10)
    check.seed("seed", seed)
    check.flag("sampled", sampled)
    art = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub).artifact
    report = verify_artifact(art, n_pairs=n_pairs, seed=seed, use_dataset=not sampled)
    return VerifyResult(case=report.case, model_kind=report.model_kind, passed=report.passed,
                        gates=tuple(report.gates), failures=tuple(report.failures()), report=report,
                        document=report.to_dict())
