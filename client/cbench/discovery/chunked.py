"""A discovery run in parts of its pairs, so its peak memory stays within a budget
(:func:`cbench.runtime.memory_plan.plan_for` chooses the part size, ``plan.chunk``).

EAP's and EAP-IG's scores are means over pairs (the metric is a mean over examples of each
example's mean over its valid positions, :mod:`cbench.tasks.metrics`), so the runs over parts of
``n_1 .. n_k`` pairs, weighted by ``n_i / N`` and summed, give the scores of one run over all
``N`` pairs up to the order of a float sum; the circuit is then chosen from the combined scores
as the method chooses it (``top_n`` / ``rel_threshold``, dangling edges pruned). Every part's
node outputs and ablated outputs are freed before the next part runs.

Only ablations that are per pair or constant split this way: ``resample`` (each pair's own
source) and ``zero``. ``mean`` and ``optimal`` ablation are computed over all pairs, so a run
that would need parts under them is refused in one line.
"""

from __future__ import annotations

import time
from typing import Any, Mapping

import numpy as np

from cbench.errors import UsageError

CHUNKABLE = ("eap", "eap-ig-inputs")
PER_PAIR_ABLATIONS = ("resample", "zero")


def pairs_part(data, start: int, stop: int):
    """Pairs ``start:stop`` of ``data`` (a :class:`~cbench.tasks.data.TaskData`), same provenance."""
    from cbench.tasks.data import TaskData

    def cut(x):
        return None if x is None else x[start:stop]

    return TaskData(data.base[start:stop], cut(data.source), cut(data.labels), cut(data.valid), data.task_type,
                    data.split, data.dataset, data.revision, dict(data.info), cut(data.answers))


def discover_in_parts(runtime, data, method: str, params: Mapping[str, Any], metric: str | None, chunk: int,
                      progress: bool = False):
    """``method`` on ``data`` in consecutive parts of at most ``chunk`` pairs; one
    :class:`~cbench.discovery.base.DiscoveryResult` over all pairs (scores the size-weighted sum of
    the parts', the circuit chosen from them; ``extra["pairs_per_part"]`` and ``extra["parts"]``)."""
    from cbench.discovery import discover
    from cbench.discovery.base import circuit_from_scores

    N = data.n_examples
    chunk = max(1, min(int(chunk), N))
    if chunk >= N:
        return discover(runtime, data, method, params, metric, progress=progress)
    if method not in CHUNKABLE:
        raise UsageError(f"{method} does not run in parts of its pairs (those that do: {', '.join(CHUNKABLE)})")
    ablation = (params or {}).get("ablation", "resample")
    if ablation not in PER_PAIR_ABLATIONS:
        raise UsageError(f"{method} fits the memory budget only in parts of {chunk} of {N} pairs, and {ablation} "
                         f"ablation is computed over all pairs: use --ablation resample or zero, fewer pairs "
                         f"(--n-examples {chunk}) or a larger --memory-budget")
    t0 = time.perf_counter()
    total = None
    first = None
    for s in range(0, N, chunk):
        e = min(N, s + chunk)
        res = discover(runtime, pairs_part(data, s, e), method, params, metric, progress=progress)
        part = res.scores * ((e - s) / N)
        total = part if total is None else total + part
        first = first or res
    scores = np.asarray(total, dtype=np.float64)
    hp = first.hyperparameters
    in_graph = first.graph.prune_dangling(circuit_from_scores(scores, hp.get("top_n"), hp.get("rel_threshold")))
    extra = dict(first.extra or {}, pairs_per_part=chunk, parts=-(-N // chunk))
    return type(first)(first.method, hp, first.graph, scores, in_graph, first.metric, first.ablation,
                       data.data_block(), float(time.perf_counter() - t0), first.node_scores, extra)
