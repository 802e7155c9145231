"""Mechanism (g) of the stress tier, conditional routing: a rare input template is computed by a
different path. On most inputs the answer is the first token, copied by a primary head; when the
input matches a template, MLP neurons (each an AND of the template and a token) suppress the
primary's answer and write the token another head carried there instead. The route is exact on
the template and silent off it, which the ``routing`` gate of ``cbench verify`` shows."""

from __future__ import annotations

import numpy as np

from cbench_builders.stress.designs import ANSWER_GAIN, V, Prediction, StressDesign, _edges, _floor, _kit, _qk_marks

ROUTE_GAIN = 2.0  # the route's vote: beats the primary's +1 after suppressing it


def _route_neurons(k, layer: int, template: dict[str, int], carried: str, primary: str) -> None:
    """Per token v: relu(carried[v] + sum of the template's indicators - len(template)) writes
    +ROUTE_GAIN for v, and the same AND over ``primary`` writes -ROUTE_GAIN: on the template the
    answer is the carried token, off it both neurons are silent."""
    need = float(len(template))
    for v in range(V):
        e = np.eye(V)[v]
        reads = {slot: np.eye(V)[tok] for slot, tok in template.items()}
        k.neuron(layer, {carried: e, **reads}, -need, {"ans": ROUTE_GAIN * e})
        k.neuron(layer, {primary: e, **reads}, -need, {"ans": -ROUTE_GAIN * e})


def _predictions(rare: bool) -> dict[str, Prediction]:
    share = "1.6 %" if rare else "12.5 %"
    kink = (f"the route's neurons are at or below their kink on every input without the template ({100 - float(share.split()[0]):.1f} % "
            "of them), so their gradient at the clean point is 0 there")
    return {
        "activation-patching": Prediction("pass", f"exact: the route flips the answer on the {share} of inputs with the template"),
        "acdc": Prediction("pass", "exact evaluations see the flips on the template"),
        "eap": Prediction("fail", kink + "; the linear estimate misses the pairs whose source has the template"),
        "atp-star": Prediction("fail", "as EAP: neither the QK fix nor GradDrop moves a neuron off its kink"),
        "nap": Prediction("fail", "node attribution at the clean point: the same zero gradient"),
        "eap-ig-inputs": Prediction("pass", "the integration path from the ablated input crosses the route's "
                                            "active region on the pairs with the template"),
        "eap-ig-activations": Prediction("pass", "as over inputs"),
        "sp": Prediction("fail" if rare else "partial", f"the route matters on {share} of inputs: a sparsity "
                                                         "penalty pays more for its nodes than the loss it saves"),
        "ugs": Prediction("pass", "random joint masks measure each edge's average effect, template pairs included"),
    }


def route_1() -> StressDesign:
    """x2 == 'h' (12.5 % of inputs) routes the answer from x4 (head a0.h2) instead of x1 (a0.h0)."""
    k = _kit(1)
    k.head(0, 0, attend=1, read="tok", write="ans")  # the primary: x1
    k.head(0, 0, attend=1, read="tok", write="X1")   # ... and its token where the route suppresses it
    k.head(0, 1, attend=2, read="tok", write="X2")   # the template's token
    k.head(0, 2, attend=4, read="tok", write="X4")   # the routed token
    _route_neurons(k, 0, {"X2": V - 1}, "X4", "X1")
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(0, 3)], seed=17, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("gate", "input->a0.h1<v>", "a0.h1->m0"),
             **_edges("rare-route", "input->a0.h2<v>", "a0.h2->m0", "a0.h0->m0", "m0->logits")}
    return StressDesign(
        "stress-route-1", "routing",
        "Conditional routing: the answer is the first token, except on inputs whose second token is 'h' "
        "(12.5 %), where MLP neurons suppress it and answer the fourth token, carried by another head.",
        k, edges, _qk_marks(["a0.h0", "a0.h1", "a0.h2"]),
        [{"kind": "routing", "route": ["a0.h2->m0"], "condition": {"2": [V]}, "on_min": 0.5, "off_max": 0.01}],
        _predictions(rare=False))


def route_2() -> StressDesign:
    """A two-token template (x2 == 'h' and x3 == 'g', 1.6 %) and a two-step route: a0.h3 moves x4
    into slot Y, a1.h0 reads it at position 1 and the neurons of m1 route it."""
    k = _kit(2)
    k.head(0, 0, attend=1, read="tok", write="ans")
    k.head(0, 0, attend=1, read="tok", write="X1")
    k.head(0, 1, attend=2, read="tok", write="X2")
    k.head(0, 2, attend=3, read="tok", write="X3")
    k.head(0, 3, attend=4, read="tok", write="Y")
    k.head(1, 0, attend=1, read="Y", write="Z")  # every position reads Y at position 1 (= x4)
    _route_neurons(k, 1, {"X2": V - 1, "X3": V - 2}, "Z", "X1")
    k.unembed("ans", ANSWER_GAIN)
    _floor(k, [(1, 1), (1, 2), (1, 3)], seed=18, low=0.01, high=0.03)
    edges = {**_edges("primary", "input->a0.h0<v>", "a0.h0->logits"),
             **_edges("gate", "input->a0.h1<v>", "a0.h1->m1", "input->a0.h2<v>", "a0.h2->m1"),
             **_edges("rare-route", "input->a0.h3<v>", "a0.h3->a1.h0<v>", "a1.h0->m1", "a0.h0->m1", "m1->logits")}
    return StressDesign(
        "stress-route-2", "routing",
        "Conditional routing on a rare template: when the second and third tokens are 'h' and 'g' (1.6 % of "
        "inputs) a two-step route answers the fourth token instead of the first.",
        k, edges, _qk_marks(["a0.h0", "a0.h1", "a0.h2", "a0.h3", "a1.h0"]),
        [{"kind": "routing", "route": ["a1.h0->m1"], "condition": {"2": [V], "3": [V - 1]}, "on_min": 0.5,
          "off_max": 0.01}],
        _predictions(rare=True))
