"""cbench.scoring.hypothesis_tests on the toy model (known circuit) and, once built, Tracr case 3."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

import _scoring_toy as T
from cbench.errors import UsageError
from cbench.scoring import hypothesis_tests as H
from cbench.scoring.task import circuit_mask, outgoing_edges, pair_data, random_circuit, random_path

ROOT = Path(__file__).resolve().parents[1]
TRACR_3 = ROOT / "model_zoo" / "releases" / "models" / "cbench" / "tracr-case-3" / "v1.0.0"  # released, in every clone


@pytest.fixture(scope="module")
def toy():
    case = T.toy_case()
    data = pair_data(case, n=40, sampled=True)
    return case, data, case.truth_edges()


def test_equivalence_p_value_hand_computed():
    # k = 8 of n = 10: t = 0.3, region j in {0,1,2,8,9,10}, theta = 0.6
    t, p = H.equivalence_p_value(10, 8, 0.1)
    exact = sum(math.comb(10, j) * 0.6 ** j * 0.4 ** (10 - j) for j in (0, 1, 2, 8, 9, 10))
    assert t == pytest.approx(0.3) and p == pytest.approx(exact)
    assert H.equivalence_p_value(0, 0, 0.1) == (0.0, 1.0)
    assert H.equivalence_p_value(10, 5, 0.1)[1] == pytest.approx(1.0)


def test_random_paths_go_from_input_to_logits(toy):
    case, _, edges = toy
    g = case.graph
    rng = np.random.default_rng(0)
    for _ in range(20):
        path = [g.edges[i] for i in random_path(g, rng)]
        assert path[0].src == "input" and path[-1].dst == "logits"
        assert all(a.dst == b.src for a, b in zip(path, path[1:]))
    allowed = ~circuit_mask(g, edges)
    m = random_circuit(g, 10, rng, allowed, _out=outgoing_edges(g))
    assert m.sum() >= 10 and not (m & ~allowed).any()


def test_ground_truth_passes_all_five(toy):
    case, data, edges = toy
    opts = {"minimality": {"n_reference": 100}, "independence": {"n_permutations": 200},
            "sufficiency": {"n_random": 50}, "partial-necessity": {"n_random": 50, "reference": "complement"}}
    for name in H.TESTS:
        r = H.run_test(name, case, data, edges, **opts.get(name, {}))
        assert r.passed, (name, r.to_dict())
        assert r.sizes["n_examples"] == 40 and r.sizes["circuit_edges"] == 18
    eq = H.run_test("equivalence", case, data, edges)
    assert eq.p_value == 1.0 and eq.sizes["n_ties"] == 40  # the circuit reproduces the model


def test_broken_circuit_fails_equivalence_and_padded_circuit_fails_minimality(toy):
    case, data, edges = toy
    # one edge, everything else zeroed: the circuit loses to the model on every example
    r = H.equivalence(case, data, ["input->logits"], ablation="zero")
    assert not r.passed and r.p_value < 1e-6 and r.details["share_circuit_better"] == 0.0
    padded = edges + ["a0.h1->logits"]  # a silenced head: its edge carries zeros
    r = H.minimality(case, data, padded, n_reference=100)
    assert not r.passed and r.details["unnecessary_edges"] == ["a0.h1->logits"]
    assert r.to_dict()["decision"] == "fail"


def test_bad_options(toy):
    case, data, edges = toy
    with pytest.raises(UsageError, match="unknown test"):
        H.run_test("minimalty", case, data, edges)
    with pytest.raises(UsageError, match="empty"):
        H.equivalence(case, data, [])
    with pytest.raises(UsageError, match="no option"):
        H.run_test("equivalence", case, data, edges, n_random=3)
    with pytest.raises(UsageError):
        H.sufficiency(case, data, edges, q_star=1.5)


def test_tracr_case_3_ground_truth_passes_idealized_tests():
    """The paper's Tracr result (table 1, appendix E): equivalence, independence (p = 1) and
    minimality pass. Like the paper (appendix D), Tracr circuits are tested with zero ablation:
    under resample ablation the q/k edges of frac_prevs read only positions, which base and
    source share, so removing them changes nothing and minimality flags them."""
    from cbench.scoring.task import pair_data, resolve_case

    case = resolve_case(TRACR_3)
    data = pair_data(case, n=100, sampled=True)
    edges = case.truth_edges()
    results = {name: H.run_test(name, case, data, edges, ablation="zero")
               for name in ("equivalence", "independence", "minimality")}
    for name, r in results.items():
        assert r.passed, (name, r.to_dict())
    assert results["independence"].p_value == 1.0
    assert results["minimality"].sizes["n_reference"] == 1000 and results["minimality"].sizes["edges_tested"] == 5
    resample = H.minimality(case, data, edges, ablation="resample", n_reference=200)
    assert set(resample.details["unnecessary_edges"]) == {"input->a1.h0<q>", "input->a1.h0<k>"}
