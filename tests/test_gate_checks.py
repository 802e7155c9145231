"""The open gate vocabulary (cbench.verify.gate_checks): the primitives on a hand-set model, bad
checks refused in one line, and the ten legacy mechanism kinds, expanded into checks, giving the
figures the released stress models' meta.json recorded when they were built by the per-mechanism
code (the same pair sets: the dataset's validation rows and the build's fresh seed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from cbench.errors import UsageError  # noqa: E402
from cbench.verify.gate_checks import run_check, slice_mask, validate  # noqa: E402
from cbench.verify.mechanisms import _Probe, expand  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"


def _probe(name: str, n: int = 300, which: str = "validation"):
    from cbench.tasks.data import sample_pairs
    from cbench.tasks.stress import stress_pairs
    from cbench_builders.stress.build import SEED, meta_of
    from cbench_builders.stress.registry import DESIGNS

    d = DESIGNS[name]()
    meta = meta_of(d)
    data = stress_pairs(meta, "validation", n) if which == "validation" else sample_pairs(meta, n, seed=SEED)
    return d, _Probe(d.kit.model(), data)


def _check(**kw):
    return {"kind": "check", "name": "c", "op": ">=", "threshold": 0.0, **kw}


def test_primitives_on_a_negative_head():
    d, p = _probe("neg-1")
    # ablating the primary's output changes answers; the negative head's output does not (it never flips)
    prim = run_check(p, _check(measure="changed", sets=[{"edges": ["a0.h0->logits"]}]))
    neg = run_check(p, _check(measure="changed", sets=[{"edges": ["a0.h1->logits"]}]))
    assert prim.value > 0.5 and neg.value == 0.0
    # zero-ablating the negative head raises the answer's margin everywhere
    raised = run_check(p, _check(measure="margin_raised", ablation="zero", sets=[{"edges": ["a0.h1->logits"]}]))
    assert raised.value == 1.0
    # a node ablated whole is every edge out of it
    node = run_check(p, _check(measure="changed", sets=[{"nodes": ["a0.h0"]}]))
    assert node.value == pytest.approx(prim.value)
    # compare two sets: kl of the primary over kl of the negative head
    ratio = run_check(p, _check(measure="kl", sets=[{"edges": ["a0.h0->logits"]}],
                                over={"measure": "kl", "sets": [{"edges": ["a0.h1->logits"]}]}, compare="ratio"))
    assert ratio.value > 1.0
    # max / min over sets name the deciding set
    both = run_check(p, _check(measure="changed", reduce="min", sets=[{"label": "P", "edges": ["a0.h0->logits"]},
                                                                       {"label": "N", "edges": ["a0.h1->logits"]}]))
    assert both.value == 0.0 and both.detail == "smallest: N"


def test_slices_select_by_tokens():
    d, p = _probe("route-1")
    first = int(p.base[0, 2])
    only = slice_mask(p, [{"tokens": "base", "where": {"2": [first]}}])
    assert bool(only[0]) and int(only.sum()) == int((p.base[:, 2] == first).sum())
    none = slice_mask(p, [{"tokens": "base", "where": {"2": [first]}}, {"tokens": "base", "where": {"2": [first]},
                                                                        "holds": False}])
    assert int(none.sum()) == 0
    mixed = slice_mask(p, [{"tokens": "mixed", "at": [2], "where": {"2": [first]}}])
    assert int(mixed.sum()) == int((p.data.source[:, 2] == first).sum())
    # the route is needed on its template and silent off it; an empty slice reads 0 when pooled
    on = run_check(p, _check(measure="changed", sets=[{"edges": ["a0.h2->m0"],
                                                         "slice": [{"tokens": "base", "where": {"2": [8]}}]}]))
    assert on.value > 0.5
    empty = run_check(p, _check(measure="changed", reduce="pool", sets=[{"edges": ["a0.h2->m0"], "slice": [
        {"tokens": "base", "where": {"2": [8]}}, {"tokens": "base", "where": {"2": [8]}, "holds": False}]}]))
    assert empty.value == 0.0


@pytest.mark.parametrize("bad, words", [
    ({"kind": "check", "measure": "changed", "op": ">=", "threshold": 1, "sets": [{"edges": []}]}, "needs a 'name'"),
    (_check(measure="loudness", sets=[{"edges": []}]), "measure 'loudness'"),
    (_check(measure="changed", op="==", sets=[{"edges": []}]), "op '=='"),
    (_check(measure="changed", threshold="high", sets=[{"edges": []}]), "numeric 'threshold'"),
    (_check(measure="changed", sets=[]), "non-empty list"),
    (_check(measure="changed", reduce="mean", sets=[{"edges": []}]), "reduce 'mean'"),
    (_check(measure="changed", sets=[{"edges": [], "slice": [{"tokens": "other"}]}]), "slice reads tokens"),
])
def test_bad_checks_are_refused_in_one_line(bad, words):
    with pytest.raises(UsageError, match=words.replace("(", r"\(").replace("'", "'")):
        validate(bad)


def test_unknown_edges_and_kinds_are_refused():
    d, p = _probe("neg-1", n=50)
    with pytest.raises(UsageError, match="edges the model does not have"):
        run_check(p, _check(measure="changed", sets=[{"edges": ["a9.h9->logits"]}]))
    with pytest.raises(UsageError, match="nodes the model does not have"):
        run_check(p, _check(measure="changed", sets=[{"nodes": ["a9.h9"]}]))
    with pytest.raises(UsageError, match="unknown stress mechanism 'teleport'"):
        expand({"kind": "teleport"})


def _released_gates(name: str) -> dict:
    versions = sorted((ZOO / f"stress-{name}").iterdir(), key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))
    v1 = [v for v in versions if v.name.startswith("v1.")]
    return json.loads((v1[-1] / "meta.json").read_text())["gates"]


RELEASED = ["or-1", "or-2", "backup-1", "backup-2", "neg-1", "neg-2", "cancel-1", "cancel-2", "sat-1", "sat-2",
            "and-1", "and-2", "decoy-1", "decoy-2", "dist-1", "dist-2", "route-1", "route-2", "deep-1", "deep-2"]


@pytest.mark.slow
@pytest.mark.parametrize("name", RELEASED)
def test_legacy_kinds_as_checks_give_the_released_figures(name):
    """Every mechanism gate of the 20 released models, run as checks, equals the figure its
    meta.json recorded (built by the per-mechanism code), on validation and fresh pairs."""
    from cbench_builders.stress.build import circuit_of
    from cbench.runtime import CircuitRuntime

    released = _released_gates(name)
    for which in ("validation", "fresh"):
        d, p = _probe(name, 1000, which)
        circuit = circuit_of(d, CircuitRuntime(d.kit.model()).graph)
        results = {}  # meta.json keeps a gate name once: the last spec's (decoy-2 has two decoy specs)
        for spec in circuit["mechanism"]["gates"]:
            for c in expand(spec):
                r = run_check(p, c)
                results[r.name] = r
                assert r.passed
        assert results and set(results) <= set(released)
        for r in results.values():
            ref = released[r.name]
            assert r.op == ref["op"] and r.threshold == ref["threshold"]
            assert r.value == pytest.approx(ref[which], rel=1e-6, abs=1e-12), (r.name, which)
