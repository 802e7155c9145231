"""MIB's other baselines (NAP, NAP-IG, IFR, UGS), optimal ablation and greedy circuit
construction: each checked against a hook-based reference (benchmarks/hook_reference.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

from circuit_models import HANDBUILT_CIRCUIT, handbuilt_model, random_model, random_tokens  # noqa: E402
from hook_reference import (reference_ifr, reference_nap, reference_node_replacement_loss,  # noqa: E402
                            reference_ugs)

from cbench.graph import circuits  # noqa: E402
from cbench import schemas as validation  # noqa: E402
from cbench.discovery import METHODS, bench_methods, discover, to_edge_scores_document  # noqa: E402
from cbench.discovery.base import prepare  # noqa: E402
from cbench.discovery.nap import edge_scores_from_nodes  # noqa: E402
from cbench.errors import UsageError  # noqa: E402
from cbench.graph.graph import Graph  # noqa: E402
from cbench.tasks.metrics import make_metric  # noqa: E402
from cbench.runtime import ABLATIONS, CircuitRuntime  # noqa: E402
from cbench.runtime import optimal_ablation as oa  # noqa: E402
from cbench.tasks.data import TaskData  # noqa: E402

NEW = ("nap", "nap-ig", "ifr", "ugs")


def _data(n=10, p=5, d_vocab=9, seed=20):
    base, source = random_tokens(n, p, d_vocab, seed=seed + 1), random_tokens(n, p, d_vocab, seed=seed + 2)
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, "categorical")


@pytest.fixture(scope="module")
def ref_setup():
    model = random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=5, weight_scale=3.0)
    return model, CircuitRuntime(model), _data()


def _close(a, b, rel=1e-5):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    scale = max(1.0, float(np.abs(b).max()))
    assert np.abs(b).max() > 0
    assert np.allclose(a, b, atol=rel * scale, rtol=0), float(np.abs(a - b).max())


def test_registry_has_the_mib_baselines_and_the_bench_reads_it():
    for m in NEW:
        assert m in METHODS
    assert METHODS["ifr"].construction == "greedy" and METHODS["eap"].construction == "top-n"
    assert set(NEW) <= set(bench_methods()) and "activation-patching" in bench_methods()  # the oracle row
    from cbench.scoring.bench import _parse_methods

    assert _parse_methods(None) == list(bench_methods())
    assert "optimal" in ABLATIONS


@pytest.mark.parametrize("method", NEW)
def test_new_methods_write_valid_documents(ref_setup, method):
    _model, rt, data = ref_setup
    res = discover(rt, data, method, {"steps": 3} if method == "ugs" else {}, progress=False)
    assert res.scores.shape == (rt.n_edges,) and np.isfinite(res.scores).all()
    doc = to_edge_scores_document(res, "test-1", {"repo": None, "revision": None, "kind": "siit"}, d_model=16)
    validation.check(doc, "edge-scores")
    assert validation.check_against_graph(doc, rt.graph, case="test-1", d_model=16) == []


# ---------------------------------------------------------------------------- NAP, NAP-IG
@pytest.mark.parametrize("method,steps", [("nap", None), ("nap-ig", 3)])
def test_nap_matches_the_hook_based_reference(ref_setup, method, steps):
    model, rt, data = ref_setup
    hp = {"granularity": "neuron"} if steps is None else {"granularity": "neuron", "steps": steps}
    res = discover(rt, data, method, hp, progress=False)
    metric = prepare(rt, data, method).metric
    ref = reference_nap(model, data.base, data.source, metric, steps)
    ours = np.array(res.extra["neuron_scores"])
    want = np.stack([ref[n].numpy() for n in rt.graph.forward_nodes])
    _close(ours, want)
    node = discover(rt, data, method, dict(hp, granularity="node"), progress=False)
    _close([node.node_scores[n] for n in rt.graph.forward_nodes], want.sum(1))
    # neuron granularity: a node counts through its strongest neuron
    pick = np.abs(want).argmax(1)
    _close([res.node_scores[n] for n in rt.graph.forward_nodes], want[np.arange(len(pick)), pick])


def test_nap_node_score_is_the_sum_of_eap_scores_leaving_the_node(ref_setup):
    _model, rt, data = ref_setup
    eap = discover(rt, data, "eap", {}, progress=False)
    nap = discover(rt, data, "nap", {"granularity": "node"}, progress=False)
    ig1 = discover(rt, data, "nap-ig", {"granularity": "node", "steps": 1}, progress=False)  # alpha = 1
    g = rt.graph
    sums = [sum(eap.scores[e.index] for e in g.edges if e.src == n) for n in g.forward_nodes]
    _close([nap.node_scores[n] for n in g.forward_nodes], sums)
    _close([ig1.node_scores[n] for n in g.forward_nodes], sums)


def test_node_scores_to_edge_scores_rule():
    g = Graph(1, 2, has_mlp=False)
    s = edge_scores_from_nodes(g, np.array([0.0, 0.5, -2.0]))  # input, a0.h0, a0.h1
    e = {x.name: s[x.index] for x in g.edges}
    assert e["input->a0.h0<q>"] == 0.5 and e["a0.h0->logits"] == 0.5 and e["a0.h1->logits"] == -2.0
    assert e["input->logits"] == 3.0  # always present: above every node


# ---------------------------------------------------------------------------- IFR
@pytest.mark.parametrize("ln,mlp", [("LN", True), (None, False)])
def test_ifr_matches_the_hook_based_reference(ln, mlp):
    model = random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln=ln, attn_only=not mlp, seed=6)
    rt = CircuitRuntime(model)
    data = _data(n=7, seed=3)
    res = discover(rt, data, "ifr", {"batch_size": 3}, progress=False)
    ref = reference_ifr(model, data.base, prepare(rt, data, "ifr").metric.valid)
    _close(res.scores, [ref[e.name] for e in rt.graph.edges])
    # scores into each destination sum to 1 at each position (0 where no source is near)
    for node, qkv in rt.graph.backward_slots:
        into = [res.scores[e.index] for e in rt.graph.edges if (e.dst, e.qkv) == (node, qkv)]
        assert 0 < sum(into) <= 1 + 1e-5
    assert circuits.is_connected(rt.graph, res.in_graph)


# ---------------------------------------------------------------------------- UGS
def test_ugs_matches_the_hook_based_reference_and_is_deterministic(ref_setup):
    model, rt, data = ref_setup
    hp = {"steps": 4, "lr": 0.1, "lambda_reg": 0.5, "init": 0.5, "seed": 7, "batch_size": 100}
    res = discover(rt, data, "ugs", hp, progress=False)
    metric = prepare(rt, data, "ugs").metric
    ref = reference_ugs(model, data.base, data.source, metric, 4, 0.1, 0.5, 0.5, 7)
    _close(res.scores, ref.numpy())
    assert np.abs(res.scores - 1 / (1 + np.exp(-0.5))).max() > 1e-3  # it moved
    again = discover(rt, data, "ugs", hp, progress=False)
    other = discover(rt, data, "ugs", dict(hp, seed=8), progress=False)
    assert np.array_equal(res.scores, again.scores) and not np.array_equal(res.scores, other.scores)


@pytest.mark.slow
def test_ugs_finds_the_handbuilt_circuit():
    rt = CircuitRuntime(handbuilt_model(with_mlp=False))
    data = _data(n=40, p=5, d_vocab=4, seed=10)
    res = discover(rt, data, "ugs", {"ablation": "zero", "steps": 150, "seed": 0}, progress=False)
    gt = rt.graph.mask(HANDBUILT_CIRCUIT)
    assert res.scores[gt].min() > np.median(res.scores[~gt])
    assert set(rt.graph.edges_of_mask(res.in_graph)) >= {"a0.h0->a1.h1<v>", "a1.h1->logits"}


# ---------------------------------------------------------------------------- optimal ablation
def test_optimal_ablation_losses_match_hooks_and_training_helps(tmp_path, monkeypatch, ref_setup):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path))
    model, rt, data = ref_setup
    clean = rt.clean(data.base)
    loss = make_metric("ce", "categorical", clean_outputs=clean, valid=data.valid)
    init = rt.node_outputs(data.base).mean((1, 2))
    with torch.no_grad():
        ours = oa.node_losses(rt, data.base, init, loss)
    for f, node in enumerate(rt.graph.forward_nodes):
        assert float(ours[f]) == pytest.approx(reference_node_replacement_loss(model, data.base, node, init[f], loss),
                                               abs=1e-5)
    settings = oa.OptimalAblationSettings(max_steps=30, eval_every=10, patience=20)
    vectors, info = oa.learn(rt, data.base, loss, settings)
    assert all(b <= a + 1e-9 for a, b in zip(info["initial_loss"], info["loss"]))
    assert sum(info["loss"]) < sum(info["initial_loss"])
    # cached per model: the second call reads the file, the same vectors
    v1, cached1 = oa.load_or_learn(rt, data.base, loss, settings)
    v2, cached2 = oa.load_or_learn(rt, data.base, loss, settings)
    assert not cached1 and cached2 and torch.equal(v1, v2)
    assert list((tmp_path / "cache.cbench" / "optimal-ablation").glob(f"{oa.model_sha256(rt)}/*.safetensors"))


def test_every_ablating_method_takes_optimal_and_mean(tmp_path, monkeypatch, ref_setup):
    import functools

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path))
    short = oa.OptimalAblationSettings(max_steps=20, eval_every=10, patience=20)  # the schedule is tested above
    monkeypatch.setattr(oa, "load_or_learn", functools.partial(oa.load_or_learn, settings=short))
    _model, rt, data = ref_setup
    fast = {"sp": {"steps": 2}, "edge-sp": {"steps": 2}, "ugs": {"steps": 2}, "eap-ig-inputs": {"steps": 2},
            "eap-ig-activations": {"steps": 1}, "nap-ig": {"steps": 1}, "acdc": {}}
    for method, spec in METHODS.items():
        if "ablation" not in spec.params:
            continue
        for ablation in ("mean", "optimal"):
            res = discover(rt, data, method, dict(fast.get(method, {}), ablation=ablation), progress=False)
            assert np.isfinite(res.scores).all() and res.ablation == ablation
    # EAP with optimal ablation = EAP with the learned vectors as the ablated values
    eap = discover(rt, data, "eap", {"ablation": "optimal"}, progress=False)
    ctx = prepare(rt, data, "eap", ablation="optimal")
    assert torch.equal(ctx.ablated, rt.optimal_vectors[:, None, None, :])


def test_optimal_ablation_without_vectors_is_one_clear_error():
    rt = CircuitRuntime(random_model(n_layers=1, n_heads=1, d_model=8, d_head=4, seed=1))
    with pytest.raises(UsageError, match="optimal ablation needs vectors"):
        rt.ablated_outputs(random_tokens(2, 4), ablation="optimal")


# ---------------------------------------------------------------------------- greedy construction
def test_greedy_construction_grows_from_the_logits():
    g = Graph(2, 1, has_mlp=False)
    scores = np.zeros(g.n_edges)
    # a strong edge far from the logits and a weak path to them
    scores[g.edge_index("input->a0.h0<v>")] = 10.0
    scores[g.edge_index("a0.h0->a1.h0<v>")] = 0.1
    scores[g.edge_index("a1.h0->logits")] = 0.2
    top = circuits.circuit_masks(g, scores, [1], construction="top-n")[0]
    assert g.edges_of_mask(top) == ["input->a0.h0<v>"] and not circuits.is_connected(g, top)
    order = circuits.greedy_order(g, scores)
    assert sorted(order.tolist()) == list(range(g.n_edges))
    names = [g.edges[i].name for i in order[:3]]
    assert names == ["a1.h0->logits", "a0.h0->a1.h0<v>", "input->a0.h0<v>"]
    masks = circuits.circuit_masks(g, scores, [1, 2, 3, 5], construction="greedy")
    assert all((masks[i] <= masks[i + 1]).all() for i in range(3))  # prefix-consistent
    assert circuits.is_connected(g, masks[2])
    with pytest.raises(UsageError, match="unknown circuit construction"):
        circuits.edge_order(g, scores, construction="best")


def test_faithfulness_uses_greedy_circuits_when_asked():
    from cbench.scoring.faithfulness import SIZE_GRID, circuits_at_sizes, edges_at_size

    g = Graph(2, 2)
    rng = np.random.default_rng(0)
    s = rng.normal(size=g.n_edges)
    greedy = circuits_at_sizes(s, construction="greedy", graph=g)
    top = circuits_at_sizes(s)
    assert [int(x) for x in greedy.sum(1)] == [edges_at_size(g.n_edges, k) for k in SIZE_GRID] == list(top.sum(1))
    assert not np.array_equal(greedy, top)
    order = circuits.greedy_order(g, s)
    assert greedy[3].sum() and set(np.flatnonzero(greedy[3])) == set(order[:greedy[3].sum()])


# ---------------------------------------------------------------------------- the CLI
def test_cli_discover_new_methods_ablation_and_seed_then_evaluate_greedy(tmp_path, monkeypatch):
    import json

    from click.testing import CliRunner
    from test_discovery_cli import META, HANDBUILT_CIRCUIT as CIRCUIT

    from cbench.artifacts.model import write_model_artifact
    from cbench.cli import cli

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    model = handbuilt_model(with_mlp=False)
    g = Graph.from_config(model.cfg)
    circuit = {"schema": "cbench/circuit/v1", "case": "hand-1", "model_kind": "tracr", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 2, "has_mlp": False, "parallel_attn_mlp": False},
               "nodes": sorted(g.nodes_of(CIRCUIT)), "edges": sorted(CIRCUIT)}
    art = tmp_path / "hand-1"
    write_model_artifact(art, model, META, circuit=circuit)
    common = ["--sampled", "--n-examples", "20", "-q"]
    docs = {}
    for name, args in (("ugs1", ["-m", "ugs", "-p", "steps=3", "--seed", "5"]),
                       ("ugs2", ["-m", "ugs", "-p", "steps=3", "--seed", "5"]),
                       ("ifr", ["-m", "ifr"]), ("nap", ["-m", "nap", "--ablation", "mean"]),
                       ("nap-ig", ["-m", "nap-ig", "--ablation", "optimal", "-p", "steps=2"])):
        out = tmp_path / f"{name}.json"
        r = CliRunner().invoke(cli, ["discover", str(art), *args, *common, "--out", str(out)])
        assert r.exit_code == 0, r.output
        docs[name] = json.loads(out.read_text())
        validation.check(docs[name], "edge-scores")
    assert docs["ugs1"]["method"]["hyperparameters"]["seed"] == 5
    assert docs["ugs1"]["edges"] == docs["ugs2"]["edges"]
    assert docs["nap-ig"]["method"]["hyperparameters"]["ablation"] == "optimal"
    assert list((tmp_path / "home" / "cache.cbench" / "optimal-ablation").glob("*/*.safetensors"))
    from cbench.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["discover", str(art), "-m", "ifr", "--ablation", "mean", *common])
    assert exc.value.code == 2
    r = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "ifr.json"), "--case", str(art), "--sampled",
                                 "--n-examples", "20", "--ablation", "zero"])
    assert r.exit_code == 0, r.output
    assert "greedy circuits" in r.output
    r = CliRunner().invoke(cli, ["evaluate", str(tmp_path / "nap.json"), "--case", str(art), "--sampled",
                                 "--n-examples", "20", "--construction", "greedy"])
    assert r.exit_code == 0 and "greedy circuits" in r.output, r.output


def _released_models() -> list[Path]:
    """The newest version of every released SIIT, IIT and Tracr model."""
    import json

    releases = Path(__file__).resolve().parents[1] / "model_zoo" / "releases"
    index = json.loads((releases / "index.json").read_text())
    names = sorted({m["name"] for c in index["cases"] for m in c["models"] if m["model_kind"] in ("siit", "iit", "tracr")})
    out = []
    for name in names:
        root = releases / "models" / "cbench" / name
        out.append(max((p for p in root.iterdir() if p.is_dir()),
                       key=lambda p: tuple(int(x) for x in p.name[1:].split("."))))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("path", _released_models(), ids=lambda p: p.parent.name)
def test_the_mib_baselines_run_on_every_released_model_with_every_ablation(path, tmp_path, monkeypatch):
    """Issue 17's done-when: nap, nap-ig, ifr and ugs, each with resample, mean and optimal
    ablation, on every released SIIT, IIT and Tracr model: finite scores and a schema-valid edge-scores
    file."""
    import functools

    from cbench.artifacts.model import read_model_artifact
    from cbench.tasks.data import sample_pairs

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path))
    short = oa.OptimalAblationSettings(max_steps=20, eval_every=10, patience=20)
    monkeypatch.setattr(oa, "load_or_learn", functools.partial(oa.load_or_learn, settings=short))
    art = read_model_artifact(path)
    rt = CircuitRuntime(art.load_model())
    data = sample_pairs(art.meta, 8, seed=3)
    fast = {"ugs": {"steps": 3}, "nap-ig": {"steps": 2}}
    for method in NEW:
        ablations = ("resample", "mean", "optimal") if "ablation" in METHODS[method].params else (None,)
        for ablation in ablations:
            params = dict(fast.get(method, {}), **({"ablation": ablation} if ablation else {}))
            res = discover(rt, data, method, params, progress=False)
            assert np.isfinite(res.scores).all() and len(res.scores) == rt.graph.n_edges, (method, ablation)
            d_model = rt.model.cfg.d_model
            doc = to_edge_scores_document(res, art.case, {"repo": f"cbench/{path.parent.name}", "revision": None,
                                                          "kind": art.model_kind}, d_model=d_model)
            validation.check(doc, "edge-scores")
            assert validation.check_against_graph(doc, rt.graph, case=art.case, d_model=d_model) == []
