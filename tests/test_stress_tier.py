"""The stress tier (issue 34): hand-set models whose planted mechanism is proved by gates.

Each mechanism gate holds on its model and fails on the same model with the mechanism taken out
(one redundant path instead of three, no backup, a helping instead of a suppressing head, ...),
so a gate cannot pass a model that lacks what it claims."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("cbench_builders")

from cbench_builders.stress import designs as D  # noqa: E402
from cbench_builders.stress.build import circuit_of, meta_of  # noqa: E402

from cbench.runtime import CircuitRuntime  # noqa: E402
from cbench.tasks.data import sample_pairs  # noqa: E402
from cbench.verify.mechanisms import stress_gates  # noqa: E402

N = 120


def gates_of(design, mutate=None) -> dict[str, object]:
    if mutate is not None:
        mutate(design.kit)
    model = design.kit.model()
    circuit = circuit_of(design, CircuitRuntime(model).graph)
    data = sample_pairs(meta_of(design), N, seed=3)
    gates, _ = stress_gates(model, circuit, data, "fresh")
    return {g.name: g for g in gates}


def _zero_head(layer: int, head: int):
    def f(kit):
        kit.W[f"blocks.{layer}.attn.W_O"][head] = 0.0
    return f


def test_the_kit_builds_exactly_what_it_is_told():
    kit = D._kit(1)
    kit.head(0, 0, attend=2, read="tok", write="ans", gain=3.0)
    kit.unembed("ans")
    model = kit.model()
    tokens = torch.tensor([[0, 1, 5, 2, 8]])  # BOS a e b h
    out = model(tokens)[0]
    assert torch.allclose(out[:, 4], torch.full((5,), 3.0), atol=1e-4)  # token 'e' (id 5 -> class 4)
    assert float(out[:, [0, 1, 2, 3, 5, 6, 7]].detach().abs().max()) < 1e-4


def test_stress_pairs_are_deterministic_and_differ_by_split():
    from cbench.tasks.data import load_task_data

    meta = meta_of(D.or_1())
    a = load_task_data(meta["case"], meta, "validation", n_examples=50)
    b = load_task_data(meta["case"], meta, "validation", n_examples=50)
    c = load_task_data(meta["case"], meta, "test", n_examples=50)
    assert torch.equal(a.base, b.base) and torch.equal(a.source, b.source)
    assert not torch.equal(a.base, c.base)
    assert a.split == "validation" and int(a.base[:, 0].max()) == 0


def test_redundancy_gate_holds_and_fails_with_one_path():
    g = gates_of(D.or_1())
    assert g["redundancy_each_path_alone"].passed and g["redundancy_each_path_alone"].value == 0.0
    assert g["redundancy_paths_together"].passed and g["redundancy_paths_together"].value > 0.8
    assert g["circuit_effect_over_floor"].passed and g["floor"].passed and g["complement_edge_effect"].passed
    single = D.or_1()  # one path: the readout needs two votes, so give that one path both votes' weight
    single.kit.W["blocks.0.attn.W_O"][0] *= 2.0

    def drop_two(kit):
        kit.W["blocks.0.attn.W_O"][1:3] = 0.0
    g = gates_of(single, drop_two)
    assert not g["redundancy_each_path_alone"].passed


def test_backup_gate_holds_and_fails_without_the_backup():
    g = gates_of(D.backup_1())
    assert g["backup_primary_alone"].passed and g["backup_alone"].passed
    assert g["backup_primary_and_backup"].passed

    def no_backup(kit):
        kit.W["blocks.0.mlp.W_out"][:] = 0.0
    g = gates_of(D.backup_1(), no_backup)
    assert not g["backup_primary_alone"].passed  # nothing takes over


def test_negative_gate_holds_and_fails_for_a_helping_head():
    assert gates_of(D.neg_1())["negative_raises_the_answer_when_removed"].passed

    def helping(kit):
        kit.W["blocks.0.attn.W_O"][1] *= -1.0
    assert not gates_of(D.neg_1(), helping)["negative_raises_the_answer_when_removed"].passed


def test_cancellation_gate_holds_and_fails_without_the_indirect_path():
    g = gates_of(D.cancel_1())
    assert g["cancellation_each_alone"].passed and g["cancellation_together"].passed

    def no_indirect(kit):
        kit.W["blocks.0.mlp.W_out"][:] = 0.0
    g = gates_of(D.cancel_1(), no_indirect)
    assert not g["cancellation_together"].passed


def test_saturation_gate_holds_and_fails_for_a_soft_head():
    g = gates_of(D.sat_1())
    assert g["saturation_share_saturated"].passed and g["saturation_query_patch_changes"].passed
    soft = D._saturation(1.0, "stress-soft", seed=9)
    assert not gates_of(soft)["saturation_share_saturated"].passed


def test_and_gate_holds_and_fails_for_an_or():
    g = gates_of(D.and_2())
    assert g["and_breaks_when_an_input_is_ablated"].passed and g["and_silent_where_it_does_not_hold"].passed

    def make_or(kit):
        kit.W["blocks.0.mlp.b_in"][0] = 0.0  # fires when either holds
    g = gates_of(D.and_2(), make_or)
    assert not (g["and_breaks_when_an_input_is_ablated"].passed and g["and_silent_where_it_does_not_hold"].passed)


def test_decoy_gate_holds_and_fails_for_a_quiet_decoy():
    g = gates_of(D.decoy_1())
    assert g["decoy_norm_ratio"].passed and g["decoy_changes"].passed
    assert not gates_of(D.decoy_1(), lambda kit: kit.W["blocks.0.attn.W_O"][1].__imul__(0.01))["decoy_norm_ratio"].passed


def test_distributed_gate_holds_and_fails_when_one_head_carries_it():
    g = gates_of(D.dist_1())
    assert g["distributed_each_share_alone"].passed and g["distributed_all_shares_together"].passed

    def one_carries(kit):
        kit.W["blocks.0.attn.W_O"][0] *= 12.0
    assert not gates_of(D.dist_1(), one_carries)["distributed_each_share_alone"].passed


def test_routing_gate_holds_and_fails_when_the_route_fires_everywhere():
    from cbench_builders.stress.routing import route_1

    g = gates_of(route_1())
    assert g["routing_route_needed_on_the_template"].passed and g["routing_route_silent_off_the_template"].passed

    def no_template(kit):  # the route's neurons no longer wait for the template: always on
        kit.W["blocks.0.mlp.b_in"][:16] = 0.0
    g = gates_of(route_1(), no_template)
    assert not g["routing_route_silent_off_the_template"].passed


def test_deep_gate_holds_and_fails_for_a_shallow_or_a_broken_chain():
    """On a three-layer version of the deep design (with the size threshold lowered to its 24 edges):
    the gates hold; a chain cut before the answer fails 'each chain needed'; and the size gate
    fails at the released threshold (50 edges)."""
    from cbench_builders.stress.deep import _chains

    def small():
        d = _chains("stress-deep-small", 3, [1, 2, 3], [1.0, 0.7, 0.45], seed=19)
        d.gates[0]["min_edges"] = 20
        return d

    g = gates_of(small())
    assert all(g[n].passed for n in ("deep_circuit_edges", "deep_layers_spanned", "deep_each_chain_needed"))
    assert g["deep_circuit_edges"].value == 24 and g["deep_layers_spanned"].value == 3
    assert g["circuit_effect_over_floor"].passed and g["complement_edge_effect"].passed

    def cut_last_chain(kit):  # the lightest chain no longer reaches the answer
        kit.W["blocks.2.attn.W_O"][2] = 0.0
    assert not gates_of(small(), cut_last_chain)["deep_each_chain_needed"].passed
    released_threshold = _chains("stress-deep-small", 3, [1, 2, 3], [1.0, 0.7, 0.45], seed=19)
    assert not gates_of(released_threshold)["deep_circuit_edges"].passed


def test_floor_gate_fails_when_an_outside_edge_does_more_than_a_circuit_edge():
    def loud_distractor(kit):
        kit.W["blocks.0.attn.W_O"][3] *= 400.0  # a floor head of or-1 now moves the answer
    g = gates_of(D.or_1(), loud_distractor)
    assert not (g["circuit_effect_over_floor"].passed and g["complement_edge_effect"].passed)


def test_every_design_names_edges_of_its_graph_and_predicts_methods_that_exist():
    from cbench.discovery import METHODS

    from cbench_builders.stress.registry import DESIGNS

    kinds = {}
    for name, fn in DESIGNS.items():
        d = fn()
        graph = CircuitRuntime(d.kit.model()).graph
        assert all(graph.has_edge(e) for e in list(d.edges) + list(d.marked)), name
        assert set(d.predictions) <= set(METHODS) | {"atp-star"}, name
        assert all(p.expect in ("fail", "pass", "partial") for p in d.predictions.values())
        kinds.setdefault(d.mechanism, []).append(name)
    assert len(kinds) >= 10 and all(len(v) >= 2 for v in kinds.values()), kinds
    from cbench_builders.stress import variants

    # the first 20, the 19 dense-floor designs, 4 held-out ones and the second round's 8
    assert len(DESIGNS) == 20 + len(variants.DESIGNS) + len(variants.HELD_OUT) + len(variants.HELD_OUT_2) == 51
    assert set(D.DESIGNS) < set(DESIGNS)


def test_class_aurocs_score_each_class_against_the_edges_outside():
    from cbench.scoring.stress_tier import class_aurocs, mechanism_table, predictions_held, verdict

    d = D.or_1()
    graph = CircuitRuntime(d.kit.model()).graph
    circuit = circuit_of(d, graph)
    truth = set(circuit["edges"])
    # a method that finds the primary edge but scores every redundant edge 0
    scores = {e.name: (1.0 if circuit["edge_classes"].get(e.name) == "primary" else
                       0.0 if e.name in truth else 0.5) for e in graph.edges}
    doc = {"edges": {n: {"score": s, "in_graph": False} for n, s in scores.items()}, "method": {"name": "x"}}
    per = class_aurocs(graph, doc, circuit)
    assert per == {"primary": 1.0, "redundant": 0.0}
    assert verdict(0.75) == "fail" and verdict(0.9) == "pass" and verdict(0.8) == "partial" and verdict(None) is None
    rows = predictions_held({"eap": {"expect": "fail"}, "acdc": {"expect": "pass"}, "sp": {"expect": "pass"}},
                            {"eap": 0.5, "acdc": 0.85})
    assert [(r["method"], r["held"]) for r in rows] == [("acdc", False), ("eap", True)]
    table = mechanism_table({"a": {"eap": 0.5}, "b": {"eap": 1.0}, "c": {"eap": 0.2}},
                            {"a": "redundancy", "b": "redundancy", "c": "backup"}, ["eap"])
    assert table == {"backup": {"eap": 0.2}, "redundancy": {"eap": 0.75}}


def test_defeats_use_auroc_and_cpr_below_random_and_the_markdown_shows_cpr_and_cmd():
    from cbench.scoring.stress_tier import defeats, markdown

    mechanisms = {"a": "redundancy", "b": "redundancy", "c": "backup"}
    methods = ["eap", "acdc", "ugs", "random"]
    auroc = {"a": {"eap": 0.6, "acdc": 0.95, "ugs": 0.85, "random": 0.5},
             "b": {"eap": 0.8, "acdc": 0.93, "ugs": 0.85, "random": 0.5},
             "c": {"eap": 0.95, "acdc": 0.8, "ugs": 0.91, "random": 0.5}}
    # ugs's CPR on backup is below random's: defeated there although its AUROC passes
    cpr = {"a": {"eap": 0.3, "acdc": 0.9, "ugs": 0.7, "random": 0.4},
           "b": {"eap": 0.5, "acdc": 0.9, "ugs": 0.7, "random": 0.4},
           "c": {"eap": 0.9, "acdc": 0.6, "ugs": 0.2, "random": 0.3}}
    got = defeats(auroc, cpr, mechanisms, methods)
    # redundancy: eap's mean AUROC 0.70 <= 0.75; acdc's 0.94 >= 0.90; ugs's 0.85 neither
    assert got == {"backup": {"defeated": ["ugs"], "not_defeated": ["eap", "ugs"]},
                   "redundancy": {"defeated": ["eap"], "not_defeated": ["acdc"]}}
    md = markdown({"redundancy": {"eap": 0.7}}, methods, {}, {"cpr": {"redundancy": {"eap": 0.4, "random": 0.4}},
                                                              "cmd": {"redundancy": {"eap": 0.25}}}, got)
    assert "### Mean CPR per mechanism (higher is better)" in md and "| redundancy | 0.400 |" in md
    assert "### Mean CMD per mechanism (lower is better)" in md and "| redundancy | 0.250 |" in md
    assert "| backup | ugs | eap, ugs |" in md


def test_the_stress_dataset_holds_the_split_rows_and_the_models_answers(tmp_path):
    """`cbench build stress-dataset`: each config's split is stress_pairs' rows for that split,
    readable by `datasets.load_dataset` and by cbench's row reader, with the model's answers as
    labels (the `labels` gate of cbench verify holds on them, and fails on a wrong label)."""
    from datasets import load_dataset
    from cbench_builders.stress.dataset import build_stress_dataset

    from cbench.tasks.data import from_rows
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.mechanisms import _labels_gate

    card = build_stress_dataset(tmp_path / "ds", ["neg-2"], rows=40, echo=lambda _: None)
    assert "config_name: stress-neg-2" in card.read_text()
    ds = load_dataset(str(tmp_path / "ds"), "stress-neg-2")
    assert {s: ds[s].num_rows for s in ds} == {"train": 40, "validation": 40, "test": 40}
    d = D.neg_2()
    meta = meta_of(d)
    data = from_rows(list(ds["validation"]), meta, "validation")
    want = stress_pairs(meta, "validation", 40)
    assert torch.equal(data.base, want.base) and torch.equal(data.source, want.source)
    model = d.kit.model()
    # copy suppression answers x2 at every position: the label is x2's class
    assert torch.equal(data.labels[:, 1:], (data.base[:, 2:3] - 1).expand(-1, 4))
    assert _labels_gate(model, data, "validation").passed
    data.labels[0, 1] = (data.labels[0, 1] + 1) % len(d.kit.vocab)
    gate = _labels_gate(model, data, "validation")
    assert not gate.passed and gate.value == pytest.approx(1 - 1 / (40 * 4))
