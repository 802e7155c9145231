"""Issue 45's stress designs: the dense floor (every edge outside the circuit given a small effect,
measured by the floor gate), four designs per mechanism for eight mechanisms, the combinations
(whose gates are plain checks of the open vocabulary: no mechanism code of their own), and the
held-out designs."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from cbench_builders.stress import variants  # noqa: E402
from cbench_builders.stress.build import circuit_of, meta_of  # noqa: E402
from cbench_builders.stress.registry import DESIGNS  # noqa: E402


def _gates(d, n=200, circuit_edit=None):
    from cbench.runtime import CircuitRuntime
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.mechanisms import stress_gates

    model = d.kit.model()
    circuit = circuit_of(d, CircuitRuntime(model).graph)
    if circuit_edit:
        circuit_edit(circuit)
    gates, _ = stress_gates(model, circuit, stress_pairs(meta_of(d), "validation", n), "validation")
    return {g.name: g for g in gates}


def test_four_designs_per_mechanism_for_eight_mechanisms_and_three_combinations():
    by = {}
    for name, f in DESIGNS.items():
        if name in variants.HELD_OUT:
            continue
        by.setdefault(f().mechanism, []).append(name)
    four = [m for m, names in by.items() if len(names) >= 4]
    assert len(four) >= 8, by
    assert len(by["combo"]) >= 3
    assert set(variants.HELD_OUT).isdisjoint(variants.DESIGNS)
    assert set(variants.HELD_OUT_2).isdisjoint(set(variants.DESIGNS) | set(variants.HELD_OUT))


def test_the_dense_floor_gives_outside_edges_effects_and_its_gate_can_fail():
    d = variants.dist_3()
    g = _gates(d)
    share = g["floor_share_above_resolution"]
    assert share.passed and 0.2 <= share.value <= 1.0
    assert g["circuit_effect_over_floor"].passed and g["complement_edge_effect"].passed
    # the floor is measured, not asserted: asking for every edge fails on this design
    g_all = _gates(d, circuit_edit=lambda c: c["floor"].update(min_share=1.0))
    assert not g_all["floor_share_above_resolution"].passed
    # measured on the logits, the share counts every edge the KL cutoff counts and more, and says
    # why the rest do not move them
    moving = g["floor_share_moving_logits"]
    assert moving.passed and share.value <= moving.value < 1.0
    assert "outside edges move a logit" in moving.detail and "the rest:" in moving.detail
    assert not g_all["floor_share_moving_logits"].passed
    # the dense floor's weights are kept apart (a high-level model can take them out)
    assert d.kit.floor_W and all(np.abs(v).sum() > 0 for v in d.kit.floor_W.values())


def test_a_combination_is_gated_by_plain_checks_only():
    d = variants.combo_3()
    assert all(spec["kind"] == "check" for spec in d.gates)
    g = _gates(d)
    for name in ("distributed_each_share_alone", "distributed_all_shares_together", "cancellation_each_alone",
                 "cancellation_together", "decoy_norm_ratio", "decoy_changes", "floor_share_above_resolution",
                 "circuit_effect_over_floor"):
        assert g[name].passed, (name, g[name])
    # the explicit necessity contexts reach circuit.json
    from cbench.runtime import CircuitRuntime

    c = circuit_of(d, CircuitRuntime(d.kit.model()).graph)
    assert c["mechanism"]["contexts"]["a0.h3->m1"] == [["a0.h3->logits"]]


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(set(variants.DESIGNS) | set(variants.HELD_OUT) | set(variants.HELD_OUT_2)))
def test_every_new_design_passes_its_gates(name):
    g = _gates(DESIGNS[name](), n=400)
    bad = {k: (v.value, v.op, v.threshold) for k, v in g.items() if not v.passed}
    assert not bad


def test_the_robustness_table_marks_a_verdict_robust_only_when_every_design_agrees():
    from cbench.scoring.stress_tier import robustness_markdown, robustness_table

    auroc = {"a1": {"eap": 0.95, "acdc": 0.95}, "a2": {"eap": 0.99, "acdc": 0.61},
             "b1": {"eap": 0.50, "acdc": 0.80}}
    t = robustness_table(auroc, {"a1": "and", "a2": "and", "b1": "backup"}, ["eap", "acdc"])
    assert t["and"]["eap"]["robust"] and t["and"]["eap"]["verdict"] == "pass"
    assert t["and"]["eap"]["spread"] == pytest.approx(0.04)
    assert not t["and"]["acdc"]["robust"] and t["and"]["acdc"]["verdict"] is None
    assert not t["backup"]["eap"]["robust"]  # one design is no robustness
    md = robustness_markdown(t, ["eap", "acdc"])
    assert "| and (2) | 0.97 (0.04) R pass | 0.78 (0.34) D |" in md
    assert "| backup (1) | 0.50 (0.00) 1 design |" in md
