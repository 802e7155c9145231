"""``--protocol mib`` circuits and AUROC against an independent reimplementation of MIB's
reference code (EAP-IG branch MIB ``Graph.apply_greedy`` / ``apply_topn`` / ``prune``, MIB
circuit track ``evaluate_area_under_roc`` + ``print_results.area_under_curve``), written here from
what that code does, on small graphs with random scores."""

from __future__ import annotations

import heapq
import json
import math
from pathlib import Path

import numpy as np
import pytest
from cbench.graph.graph import Graph, promote_edge_name
from cbench.scoring import mib_protocol as P

PCTS = (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)


class _RefGraph:
    """MIB's graph semantics: forward nodes with an in_graph flag, edges (parent, child node) with
    scores and in_graph flags; the logits node always in the graph."""

    def __init__(self, graph: Graph, scores):
        self.names = [e.name for e in graph.edges]
        self.parent = [e.src for e in graph.edges]
        self.child = [e.dst for e in graph.edges]
        self.score = [float(np.float32(s)) for s in scores]
        self.parent_edges: dict[str, list[int]] = {}
        for i, c in enumerate(self.child):
            self.parent_edges.setdefault(c, []).append(i)
        self.forward = list(graph.forward_nodes)

    def greedy(self, n_edges: float, absolute: bool = True) -> set[int]:
        f = (lambda s: abs(s)) if absolute else (lambda s: s)
        nodes_in = set()
        in_graph = set()
        cands = sorted(self.parent_edges["logits"], key=lambda i: f(self.score[i]), reverse=True)
        edges = heapq.merge(cands, key=lambda i: f(self.score[i]), reverse=True)
        while n_edges > 0:
            n_edges -= 1
            top = next(edges)
            in_graph.add(top)
            p = self.parent[top]
            if p not in nodes_in:
                nodes_in.add(p)
                new = sorted(self.parent_edges.get(p, []), key=lambda i: f(self.score[i]), reverse=True)
                edges = heapq.merge(edges, new, key=lambda i: f(self.score[i]), reverse=True)
        return self.prune(in_graph, nodes_in)[0]

    def topn(self, n: int, absolute: bool) -> set[int]:
        f = (lambda s: abs(s)) if absolute else (lambda s: s)
        order = sorted(range(len(self.names)), key=lambda i: -f(self.score[i]))
        chosen = set(order[:n])
        nodes = {self.parent[i] for i in chosen} & ({self.child[i] for i in chosen} | {"input"})
        # apply_topn(prune=True), then evaluate_graph prunes the circuit again before running it: the
        # first prune stops after one pass when the node set it computes equals apply_topn's
        # (a node can keep an out-edge after losing its only in-edge); the second finishes the job
        return self.prune(*self.prune(chosen, nodes))[0]

    def prune(self, in_graph: set[int], nodes_in: set[str]) -> set[int]:
        in_graph = set(in_graph)
        while True:
            outgoing = {self.parent[i] for i in in_graph}
            ingoing = {self.child[i] for i in in_graph} | {"input"}
            new_nodes = {n for n in self.forward if n in outgoing and n in ingoing}
            same = new_nodes == nodes_in
            nodes_in = new_nodes
            in_graph = {i for i in in_graph if self.parent[i] in nodes_in
                        and (self.child[i] in nodes_in or self.child[i] == "logits")}
            if same:
                return in_graph, nodes_in


def _ref_auroc(graph: Graph, scores, truth: set[str]) -> tuple[float, list[float], list[float]]:
    ref = _RefGraph(graph, scores)
    tprs, fprs = [], []
    for pct in PCTS:
        hyp = ref.greedy(pct * len(ref.names))
        tp = fp = tn = fn = 0
        for i, name in enumerate(ref.names):
            r, h = name in truth, i in hyp
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
    return area, tprs, fprs


@pytest.mark.parametrize("layers,heads,seed", [(2, 2, 0), (3, 2, 1), (4, 4, 2), (3, 3, 3)])
def test_mib_auroc_equals_the_reference_procedure(layers, heads, seed):
    g = Graph(layers, heads)
    rng = np.random.default_rng(seed)
    scores = rng.normal(size=g.n_edges)
    truth = {g.edges[i].name for i in rng.choice(g.n_edges, size=max(3, g.n_edges // 8), replace=False)}
    ref_auc, ref_tpr, ref_fpr = _ref_auroc(g, scores, truth)
    got = P.mib_auroc(g, scores, truth)
    assert got.tpr == tuple(ref_tpr)
    assert got.fpr == tuple(ref_fpr)
    assert got.auroc == ref_auc
    assert 0.0 <= got.auroc <= 1.0


@pytest.mark.parametrize("absolute", [True, False])
def test_mib_circuits_equal_the_reference_procedure(absolute):
    g = Graph(3, 2)
    rng = np.random.default_rng(7)
    scores = rng.normal(size=g.n_edges)
    ref = _RefGraph(g, scores)
    for construction in ("top-n", "greedy"):
        masks = P.circuits_at_sizes(g, scores, PCTS, absolute=absolute, construction=construction)
        for pct, mask in zip(PCTS, masks):
            n = int(pct * g.n_edges)
            want = ref.topn(n, absolute) if construction == "top-n" else ref.greedy(n, absolute)
            assert set(np.flatnonzero(mask).tolist()) == want, (construction, pct)


def test_counts_follow_the_reference_loops():
    assert P.greedy_count(0.1, 1108) == 111  # 110.8: the float loop runs 111 times; int() gives 110
    assert P.topn_count(0.1, 1108) == 110
    assert P.greedy_count(0.1, 30) == 3 and P.topn_count(0.1, 30) == 3
    assert P.greedy_count(0.001, 1108) == 2 and P.topn_count(0.001, 1108) == 1
    assert P.greedy_count(1.0, 1108) == 1108 and P.topn_count(0.0005, 1108) == 0


def test_a_greedy_circuit_without_an_input_path_prunes_to_nothing():
    g = Graph(2, 1)
    scores = np.zeros(g.n_edges)
    scores[g.edge_index("a1.h0->logits")] = 5.0  # greedy takes it first; a1.h0 then has no input yet
    mask = P.greedy_circuit(g, scores, 1)
    assert not mask.any()
    scores[g.edge_index("input->a1.h0<v>")] = 4.0
    mask = P.greedy_circuit(g, scores, 2)
    assert sorted(g.edges_of_mask(mask)) == ["a1.h0->logits", "input->a1.h0<v>"]


def test_head_level_truth_labels_every_qkv_edge():
    g = Graph(2, 1)
    lab = P.truth_labels(g, ["input->a1.h0"])
    assert sorted(g.edges[i].name for i in np.flatnonzero(lab)) == [
        "input->a1.h0<k>", "input->a1.h0<q>", "input->a1.h0<v>"]
    assert all(promote_edge_name(g.edges[i].name) == "input->a1.h0" for i in np.flatnonzero(lab))


CASE = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench" / "case-3" / "v1.0.0"


@pytest.mark.slow  # two CLI runs on a released model: about a minute on a loaded machine
def test_score_cli_reports_the_mib_auroc(tmp_path):
    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.ground_truth import circuit_edge_names
    from cli_inprocess import run_main

    art = read_model_artifact(CASE)
    g = art.graph
    path = tmp_path / "scores.json"
    res = run_main(["discover", str(CASE), "-m", "random", "--sampled", "--n-examples", "8", "-q", "--out", str(path)])
    assert res.code == 0, (res.stderr, res.exception)
    doc = json.loads(path.read_text())
    scores = np.array([doc["edges"][e.name]["score"] for e in g.edges])
    out = tmp_path / "res.json"
    res = run_main(["score", str(CASE), str(path), "--protocol", "mib", "--include-no-signal", "--out", str(out)])
    assert res.code == 0, (res.stderr, res.exception)
    want = P.mib_auroc(g, scores, circuit_edge_names(g, art.circuit)).auroc
    got = json.loads(out.read_text())["results"]["mib"]
    assert got["auroc"] == pytest.approx(want, abs=1e-12) and math.isfinite(want)
    assert f"{want:.4f}"[:5] in res.stdout + res.stderr

