"""MIB's tie order in greedy circuits (``--protocol mib``) against ``_mib_greedy_reference.py``, an
independent reimplementation of the reference's ``apply_greedy`` (its ``heapq.merge`` chain over
stably sorted candidate lists, ``parent_edges`` sets) and ``evaluate_area_under_roc``: at the
reference's order with the hash dependence taken out (sets replaced by lists in ``from_model``'s
insertion order), and under chosen ``PYTHONHASHSEED`` values with real sets in a child interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import _mib_greedy_reference as ref
from cbench.artifacts.model import read_model_artifact
from cbench.graph.circuits import greedy_order
from cbench.graph.graph import Graph
from cbench.scoring import mib_protocol as P
from cbench.scoring.ground_truth import circuit_edge_names
from cbench.scoring.mib_hash_order import hash_seed_range, set_orders

REF = Path(__file__).resolve().parent / "_mib_greedy_reference.py"


def _doc(g: Graph, scores, truth, ordered: bool) -> dict:
    return {"cfg": {"n_layers": g.n_layers, "n_heads": g.n_heads}, "ordered": ordered, "truth": sorted(truth),
            "scores": {e.name: float(s) for e, s in zip(g.edges, scores)}}


def _ref_in_child(doc: dict, seed: int) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=str(seed))
    proc = subprocess.run([sys.executable, str(REF)], input=json.dumps(doc), env=env, capture_output=True, text=True,
                          timeout=120, check=True)
    return json.loads(proc.stdout)


def _edge_index_auroc(g: Graph, scores, truth) -> float:
    """MIB AUROC with ties broken by the lower edge index (cbench's rule before issue 48)."""
    labels = P.truth_labels(g, truth)
    order = greedy_order(g, P.mib_key(scores), True)
    tpr, fpr = [], []
    for pct in P.SIZE_GRID:
        mask = P.greedy_circuit(g, scores, P.greedy_count(pct, g.n_edges), True, True, order)
        tpr.append((mask & labels).sum() / labels.sum())
        fpr.append((mask & ~labels).sum() / (~labels).sum())
    x = [v / fpr[-1] for v in fpr]
    return float(sum((x[i + 1] - x[i]) * (tpr[i + 1] + tpr[i]) / 2 for i in range(len(x) - 1)))


@pytest.fixture(scope="module")
def case3(tmp_path_factory):
    """case-3's NAP, NAP-IG and IFR scores under ``--protocol mib`` on 100 validation pairs (the
    model and its dataset pulled from the embedded hub into a fresh home)."""
    import cbench

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("CBENCH_HOME", str(tmp_path_factory.mktemp("home")))
        scores, g, path = {}, None, None
        for m in ("nap", "nap-ig", "ifr"):
            res = cbench.discover("case-3", m, protocol="mib", n_examples=100)
            g, path = res.graph, res.model_path
            scores[m] = np.array([res.edge_scores[e.name] for e in g.edges])
        art = read_model_artifact(path)
    return g, circuit_edge_names(g, art.circuit), scores


@pytest.mark.parametrize("method", ["nap", "nap-ig", "ifr"])
def test_case3_mib_auroc_equals_the_reference_at_its_deterministic_order(case3, method):
    g, truth, scores = case3
    s = scores[method]
    want = ref.run(_doc(g, s, truth, ordered=True))
    got = P.mib_auroc(g, s, truth)
    assert list(got.tpr) == want["tpr"] and list(got.fpr) == want["fpr"]
    assert got.auroc == want["auroc"]
    assert len(set(np.float32(s).tolist())) < g.n_edges  # ties: what this test is about


def test_case3_ties_change_the_mib_auroc(case3):
    """The tie order matters on these scores: the edge-index rule cbench used gives other AUROCs."""
    g, truth, scores = case3
    differs = [m for m, s in scores.items() if _edge_index_auroc(g, s, truth) != ref.run(_doc(g, s, truth, True))["auroc"]]
    assert "nap" in differs or "nap-ig" in differs, differs


@pytest.mark.parametrize("seed", [0, 1, 7])
def test_a_hash_seed_gives_the_reference_order_and_auroc(case3, seed):
    g, truth, scores = case3
    s = scores["nap"]
    want = _ref_in_child(_doc(g, s, truth, ordered=False), seed)
    orders = set_orders([g], seed)[0]
    assert {n: [g.edges[i].name for i in idx] for n, idx in orders.items()} == want["orders"]
    got = P.mib_auroc(g, s, truth, within=orders)
    assert list(got.tpr) == want["tpr"] and got.auroc == want["auroc"]


def test_the_hash_range_covers_what_seeds_give(case3):
    g, truth, scores = case3
    r = hash_seed_range(g, scores["nap"], truth, seeds=range(6))
    assert r.low <= r.auroc <= r.high or r.n_equal == 0
    assert r.values[3] == _ref_in_child(_doc(g, scores["nap"], truth, ordered=False), 3)["auroc"]
    assert r.low == min(r.values) and r.high == max(r.values) and len(r.values) == 6


@pytest.mark.parametrize("layers,heads,seed", [(2, 2, 0), (3, 2, 1), (3, 3, 2), (4, 4, 3)])
def test_tie_heavy_scores_equal_the_reference(layers, heads, seed):
    g = Graph(layers, heads)
    rng = np.random.default_rng(seed)
    s = rng.integers(-2, 3, size=g.n_edges).astype(float) * 0.5  # five values, zeros and signs included
    truth = {g.edges[i].name for i in rng.choice(g.n_edges, size=max(3, g.n_edges // 6), replace=False)}
    want = ref.run(_doc(g, s, truth, ordered=True))
    got = P.mib_auroc(g, s, truth)
    assert list(got.tpr) == want["tpr"] and list(got.fpr) == want["fpr"] and got.auroc == want["auroc"]


def test_a_tie_order_must_list_the_nodes_in_edges():
    from cbench.errors import UsageError

    g = Graph(2, 1)
    with pytest.raises(UsageError, match="must list its in-edges"):
        P.mib_greedy_order(g, np.zeros(g.n_edges), within={"a1.h0": [0, 1]})
