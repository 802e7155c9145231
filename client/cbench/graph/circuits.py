"""From edge scores to circuits: top-n and greedy construction (MIB appendix E.1).

* ``top-n``: the n edges of highest score (signed for CPR, by magnitude for CMD); ties keep
  the graph's edge order. It can give a circuit with no path from the input to the logits.
* ``greedy``: start from C = ({logits}, {}); n times, add the highest-scoring edge into a node
  of C that is not in C yet, and add its source node to C. Every circuit it builds is
  connected to the logits. Greedy construction is prefix-consistent (the circuit of n + 1 edges
  is that of n edges plus one), so one ordering of the edges (:func:`greedy_order`) gives the
  circuits of every size.

A destination is a node: an edge into ``a1.h0<q>`` is "into ``a1.h0``", so once a head is in C
its q, k and v edges are all candidates.
"""

from __future__ import annotations

import heapq

import numpy as np

from cbench.errors import UsageError

CONSTRUCTIONS = ("top-n", "greedy")


def _key(scores, absolute: bool) -> np.ndarray:
    s = np.asarray(scores, dtype=np.float64)
    if not np.all(np.isfinite(s)):
        raise UsageError("edge scores must be finite numbers")
    return np.abs(s) if absolute else s


def top_n_order(scores, absolute: bool = False) -> np.ndarray:
    """Edge indices, best first (stable: ties keep the graph's order)."""
    return np.argsort(-_key(scores, absolute), kind="stable")


def greedy_order(graph, scores, absolute: bool = False) -> np.ndarray:
    """Edge indices in the order greedy construction adds them (every edge of the graph: each
    node reaches the logits, so each edge eventually becomes a candidate)."""
    key = _key(scores, absolute)
    if key.shape != (graph.n_edges,):
        raise UsageError(f"need one score per edge ({graph.n_edges}), got {key.shape}")
    into: dict[str, list[int]] = {}
    for e in graph.edges:
        into.setdefault(e.dst, []).append(e.index)
    heap: list[tuple[float, int]] = []
    in_c = {"logits"}

    def push(node: str) -> None:
        for i in into.get(node, ()):
            heapq.heappush(heap, (-key[i], i))  # ties: lower edge index first

    push("logits")
    order = []
    while heap:
        _k, i = heapq.heappop(heap)
        order.append(i)
        src = graph.edges[i].src
        if src not in in_c:
            in_c.add(src)
            push(src)
    return np.asarray(order, dtype=np.int64)


def edge_order(graph, scores, absolute: bool = False, construction: str = "top-n") -> np.ndarray:
    if construction == "top-n":
        return top_n_order(scores, absolute)
    if construction == "greedy":
        return greedy_order(graph, scores, absolute)
    raise UsageError(f"unknown circuit construction {construction!r}; choose one of: {', '.join(CONSTRUCTIONS)}")


def greedy_circuit(graph, scores, n: int, absolute: bool = False) -> np.ndarray:
    """Boolean edge mask of the greedy circuit with ``n`` edges."""
    out = np.zeros(graph.n_edges, dtype=bool)
    out[greedy_order(graph, scores, absolute)[:max(0, int(n))]] = True
    return out


def circuit_masks(graph, scores, sizes, absolute: bool = False, construction: str = "top-n") -> np.ndarray:
    """Boolean masks ``[len(sizes), n_edges]``: the circuit of each size (a number of edges)."""
    order = edge_order(graph, scores, absolute, construction)
    out = np.zeros((len(sizes), graph.n_edges), dtype=bool)
    for i, n in enumerate(sizes):
        out[i, order[:int(n)]] = True
    return out


def is_connected(graph, mask) -> bool:
    """Whether every edge of the circuit lies on a path from ``input`` to ``logits`` within it."""
    mask = np.asarray(mask, dtype=bool)
    edges = [graph.edges[i] for i in np.flatnonzero(mask)]
    if not edges:
        return False
    fwd: dict[str, set] = {}
    bwd: dict[str, set] = {}
    for e in edges:
        fwd.setdefault(e.src, set()).add(e.dst)
        bwd.setdefault(e.dst, set()).add(e.src)

    def reach(start, adj):
        seen, stack = {start}, [start]
        while stack:
            for m in adj.get(stack.pop(), ()):
                if m not in seen:
                    seen.add(m)
                    stack.append(m)
        return seen

    from_input, to_logits = reach("input", fwd), reach("logits", bwd)
    return all(e.src in from_input and e.dst in to_logits for e in edges)
