"""MIB's greedy circuits and InterpBench AUROC, written for the tests from what the reference code
does (EAP-IG branch ``MIB``: ``Graph.from_model``, ``apply_greedy``, ``prune``; MIB circuit track:
``evaluation.py::evaluate_area_under_roc``, ``compare_graphs``, ``print_results.area_under_curve``),
with no cbench import, so that it can run in a child interpreter under a chosen ``PYTHONHASHSEED``.

Its objects are the reference's: nodes keep their in-edges in ``parent_edges``, a ``set`` of edges
hashed by name (``ordered=False``; the reference), or a list in the order ``from_model`` adds them
(``ordered=True``: the reference's order with the hash dependence taken out); ``edges`` is an
insertion-ordered dict; ``apply_greedy`` chains ``heapq.merge`` over stably sorted candidate
lists. Scores are float32.

As a script: reads ``{"cfg": {"n_layers", "n_heads"}, "scores": {edge: float}, "truth": [edge],
"ordered": bool}`` on standard input and prints ``{"tpr", "fpr", "auroc", "orders"}``.
"""

from __future__ import annotations

import heapq
import json
import sys

import numpy as np

PCTS = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)


class Node:
    def __init__(self, name: str, ordered: bool):
        self.name = name
        self.parent_edges = [] if ordered else set()
        self.in_graph = False

    def add_parent_edge(self, edge) -> None:
        if isinstance(self.parent_edges, list):
            self.parent_edges.append(edge)
        else:
            self.parent_edges.add(edge)

    def __hash__(self):
        return hash(self.name)


class Edge:
    def __init__(self, parent: Node, child: Node, qkv: str | None):
        self.parent, self.child, self.qkv = parent, child, qkv
        self.name = f"{parent.name}->{child.name}" if qkv is None else f"{parent.name}->{child.name}<{qkv}>"
        self.score = np.float32(0.0)
        self.in_graph = False

    def __hash__(self):
        return hash(self.name)


class RefGraph:
    def __init__(self, n_layers: int, n_heads: int, ordered: bool):
        self.nodes: dict[str, Node] = {}
        self.edges: dict[str, Edge] = {}
        self.logits = Node("logits", ordered)
        self.logits.in_graph = True
        inp = Node("input", ordered)
        self.nodes["input"] = inp
        residual = [inp]
        for layer in range(n_layers):
            heads = [Node(f"a{layer}.h{h}", ordered) for h in range(n_heads)]
            mlp = Node(f"m{layer}", ordered)
            for h in heads:
                self.nodes[h.name] = h
            self.nodes[mlp.name] = mlp
            for node in residual:
                for h in heads:
                    for letter in "qkv":
                        self.add_edge(node, h, letter)
            residual += heads
            for node in residual:
                self.add_edge(node, mlp)
            residual.append(mlp)
        for node in residual:
            self.add_edge(node, self.logits)
        self.nodes["logits"] = self.logits

    def add_edge(self, parent: Node, child: Node, qkv: str | None = None) -> None:
        e = Edge(parent, child, qkv)
        self.edges[e.name] = e
        child.add_parent_edge(e)

    def apply_greedy(self, n_edges: float, absolute: bool = True) -> None:
        for node in self.nodes.values():
            if node is not self.logits:
                node.in_graph = False
        for e in self.edges.values():
            e.in_graph = False

        def abs_id(s):
            return abs(s) if absolute else s

        candidate_edges = sorted([e for e in self.edges.values() if e.child.in_graph], key=lambda e: abs_id(e.score),
                                 reverse=True)
        edges = heapq.merge(candidate_edges, key=lambda e: abs_id(e.score), reverse=True)
        while n_edges > 0:
            n_edges -= 1
            top = next(edges)
            top.in_graph = True
            parent = top.parent
            if not parent.in_graph:
                parent.in_graph = True
                pp = sorted([pe for pe in parent.parent_edges], key=lambda e: abs_id(e.score), reverse=True)
                edges = heapq.merge(edges, pp, key=lambda e: abs_id(e.score), reverse=True)
        self.prune()

    def prune(self) -> None:
        forward = [n for n in self.nodes.values() if n is not self.logits]
        while True:
            outgoing = {e.parent.name for e in self.edges.values() if e.in_graph}
            ingoing = {e.child.name for e in self.edges.values() if e.in_graph} | {"input"}
            new = {n.name: (n.name in outgoing and n.name in ingoing) for n in forward}
            same = all(new[n.name] == n.in_graph for n in forward)
            for n in forward:
                n.in_graph = new[n.name]
            for e in self.edges.values():
                if e.in_graph and not (e.parent.in_graph and e.child.in_graph):
                    e.in_graph = False
            if same:
                return


def evaluate_area_under_roc(graph: RefGraph, truth: set[str]) -> tuple[list[float], list[float], float]:
    def positive(name: str) -> bool:
        return name in truth or name.split("<")[0] in truth

    tprs, fprs = [], []
    for pct in PCTS:
        graph.apply_greedy(pct * len(graph.edges))
        tp = fp = tn = fn = 0
        for e in graph.edges.values():
            r, h = positive(e.name), e.in_graph
            tp += r and h
            fn += r and not h
            fp += (not r) and h
            tn += (not r) and not h
        tprs.append(tp / (tp + fn))
        fprs.append(fp / (fp + tn))
    area = 0.0
    for i in range(len(fprs) - 1):
        x1, x2 = fprs[i] / fprs[-1], fprs[i + 1] / fprs[-1]
        area += (x2 - x1) * ((tprs[i + 1] + tprs[i]) / 2)
    return tprs, fprs, area


def run(doc: dict) -> dict:
    g = RefGraph(doc["cfg"]["n_layers"], doc["cfg"]["n_heads"], doc["ordered"])
    for name, s in doc["scores"].items():
        g.edges[name].score = np.float32(s)
    tprs, fprs, area = evaluate_area_under_roc(g, set(doc["truth"]))
    orders = {n.name: [e.name for e in n.parent_edges] for n in g.nodes.values() if n.name not in ("logits", "input")}
    return {"tpr": tprs, "fpr": fprs, "auroc": area, "orders": orders}


if __name__ == "__main__":
    json.dump(run(json.load(sys.stdin)), sys.stdout)
