"""Ablation routines: outputs, accuracy, metric, and per-node effects (one implementation)."""

from __future__ import annotations

import pytest
import torch

from circuit_models import HANDBUILT_CIRCUIT, handbuilt_model, random_tokens

from cbench.scoring.ablation import ablate, node_effects
from cbench.errors import GraphError, UsageError
from cbench.runtime import CircuitRuntime
from cbench.tasks.data import TaskData


@pytest.fixture(scope="module")
def setup():
    rt = CircuitRuntime(handbuilt_model(with_mlp=True))
    base, source = random_tokens(40, 5, 4, seed=1), random_tokens(40, 5, 4, seed=2)
    valid = torch.ones(40, 5, dtype=torch.bool)
    valid[:, 0] = False
    return rt, TaskData(base, source, None, valid, "categorical")


def test_circuit_run_is_faithful_and_knockouts_hurt(setup):
    rt, data = setup
    circuit = ablate(rt, data, edges=sorted(HANDBUILT_CIRCUIT), kind="zero", complement=True)
    assert circuit.accuracy == 1.0 and circuit.clean_accuracy == 1.0
    assert circuit.metric == "kl" and circuit.metric_value == pytest.approx(0.0, abs=1e-6)
    assert len(circuit.ablated_edges) == rt.n_edges - len(HANDBUILT_CIRCUIT)
    knocked = ablate(rt, data, nodes=["a0.h0"], kind="zero")
    assert knocked.ablated_nodes == ["a0.h0"]
    assert knocked.accuracy < 1.0 and knocked.metric_value > 0.1
    unused = ablate(rt, data, nodes=["a0.h1", "m0", "m1"], kind="resample")
    assert unused.accuracy == 1.0 and unused.metric_value == pytest.approx(0.0, abs=1e-7)


def test_node_effects_all_kinds(setup):
    rt, data = setup
    effects = node_effects(rt, data)
    by = {(e.node, e.kind): e for e in effects}
    assert len(effects) == (rt.n_forward - 1) * 3
    for kind in ("resample", "mean", "zero"):
        for n in ("a0.h1", "a1.h0", "m0", "m1"):  # not in the circuit: no effect under any ablation
            assert by[(n, kind)].effect == 0.0
            assert by[(n, kind)].normalized_kl == pytest.approx(0.0, abs=1e-6)
    assert by[("a0.h0", "zero")].effect > 0 and by[("a0.h0", "zero")].normalized_kl > 1
    assert by[("a1.h1", "resample")].effect > 0
    # every path goes through a1.h1: resampling it gives exactly the source's output, d_V = 1
    assert by[("a1.h1", "resample")].normalized_kl == pytest.approx(1.0, abs=1e-5)


def test_bad_names(setup):
    rt, data = setup
    with pytest.raises(GraphError, match="not in this model's graph"):
        ablate(rt, data, nodes=["a7.h0"])
    with pytest.raises(GraphError, match="not in this model's graph"):
        ablate(rt, data, edges=["input->a0.h0<z>"])
    with pytest.raises(UsageError, match="unknown ablation kind"):
        ablate(rt, data, nodes=["a0.h0"], kind="gaussian")
    with pytest.raises(UsageError, match="name the nodes or edges"):
        ablate(rt, data)
