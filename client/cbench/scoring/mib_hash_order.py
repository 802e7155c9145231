"""The part of MIB's greedy tie order that follows Python's string hashing, and the MIB AUROC a
user of MIB's code sees under each ``PYTHONHASHSEED``.

``Graph.apply_greedy`` (EAP-IG branch ``MIB``) sorts each node's in-edges out of ``Node.parent_edges``,
a ``set`` of edges hashed by their names, with a stable ``sorted``: equal scores keep the set's
iteration order. That order is fixed by the edges' string hashes and the order they were added to
the set (``Graph.from_model``: sources in residual-stream order, and for a head q, k, v per
source), so it changes with ``PYTHONHASHSEED`` (random per process unless set). Every other part
of the order is deterministic (:func:`cbench.scoring.mib_protocol.mib_greedy_order`).

:func:`set_orders` reproduces the iteration order of those sets under a given hash seed: a child
interpreter started with that ``PYTHONHASHSEED`` adds the edge names to a ``set`` in the
reference's order and lists it (a set of names iterates as a set of objects hashed by those names
does). The mapping from a seed to an order is that of this interpreter's string hash (SipHash-1-3
from Python 3.11, SipHash-2-4 before), so one seed's order is version-specific; the spread over
many seeds is what a user of MIB's code can meet. :func:`hash_seed_range` gives MIB AUROC over
seeds beside the value at the insertion order (cbench's ``--protocol mib``,
:func:`cbench.scoring.mib_protocol.insertion_orders`).
"""

from __future__ import annotations

import json
import math
import os
import platform
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cbench.errors import CbenchError, UsageError
from cbench.scoring.mib_protocol import insertion_orders, mib_auroc

__all__ = ["HashSeedRange", "hash_seed_range", "set_orders"]

_CHILD = """
import json, sys
out = []
for graph in json.load(sys.stdin):
    orders = {}
    for node, names in graph.items():
        s = set()
        for n in names:
            s.add(n)
        orders[node] = list(s)
    out.append(orders)
json.dump(out, sys.stdout)
"""


def set_orders(graphs: Sequence, seed: int) -> list[dict[str, list[int]]]:
    """For each graph, ``{node: edge indices in the iteration order of the reference's
    parent_edges set}`` under ``PYTHONHASHSEED=seed``."""
    if not 0 <= int(seed) <= 4294967295:
        raise UsageError(f"PYTHONHASHSEED must be in [0, 4294967295], got {seed}")
    payload = [{node: [g.edges[i].name for i in idx] for node, idx in insertion_orders(g).items() if node != "logits"}
               for g in graphs]
    env = dict(os.environ, PYTHONHASHSEED=str(int(seed)))
    proc = subprocess.run([sys.executable, "-c", _CHILD], input=json.dumps(payload), env=env,
                          capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise CbenchError(f"could not list set orders under PYTHONHASHSEED={seed}: {proc.stderr.strip()[-500:]}")
    return [{node: [g.edge_index(n) for n in names] for node, names in orders.items()}
            for g, orders in zip(graphs, json.loads(proc.stdout))]


@dataclass(frozen=True)
class HashSeedRange:
    """MIB AUROC of one score vector: at the insertion order and under each hash seed."""

    auroc: float  # at insertion order (PYTHONHASHSEED-independent; what cbench --protocol mib reports)
    low: float
    high: float
    seeds: tuple[int, ...]
    values: tuple[float, ...]  # per seed
    n_equal: int  # seeds whose AUROC equals ``auroc``
    python: str  # the interpreter whose string hash gave the orders

    def to_dict(self) -> dict:
        clean = lambda x: None if not math.isfinite(x) else x
        return {"auroc": clean(self.auroc), "low": clean(self.low), "high": clean(self.high),
                "n_seeds": len(self.seeds), "seeds": [self.seeds[0], self.seeds[-1]] if self.seeds else [],
                "n_equal": self.n_equal, "python": self.python}


def hash_seed_range(graph, scores, truth_edges: Iterable[str], seeds: Iterable[int] = range(100),
                    absolute: bool = True) -> HashSeedRange:
    """MIB AUROC at the insertion order and its range over ``seeds`` (one child interpreter each)."""
    truth = list(truth_edges)
    seeds = tuple(int(s) for s in seeds)
    if not seeds:
        raise UsageError("need at least one hash seed")
    base = mib_auroc(graph, scores, truth, absolute).auroc
    values = tuple(mib_auroc(graph, scores, truth, absolute, within=set_orders([graph], s)[0]).auroc for s in seeds)
    finite = [v for v in values if math.isfinite(v)]
    return HashSeedRange(base, min(finite, default=math.nan), max(finite, default=math.nan), seeds, values,
                         sum(v == base for v in values), platform.python_version())
