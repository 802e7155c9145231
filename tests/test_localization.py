"""The causal-variable track: the pyvene adapter against plain TransformerLens hooks, variables
and aligned locations, localization on released models (Tracr: IIA 1 at the aligned location),
the ``cbench localize`` command and ``cbench bench --track causal-variables``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from cbench import schemas as validation
from cbench.artifacts.model import read_model_artifact
from cbench.errors import UsageError
from cbench.localization import pyvene_adapter as pa
from cbench.localization.featurizers import FeaturizerSpec
from cbench.localization.localize import load_variable_data, localize
from cbench.localization.track import run_track
from cbench.localization.variables import parse_location, variable, variables
from test_scoring_cli import run  # the CLI runner (exit code, stdout, stderr)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "model_zoo" / "releases" / "models" / "cbench"
DATASET = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.1.0"
MAIN = ("3", "4", "8", "11", "13", "18", "19", "20", "21", "26", "29", "33", "34", "35", "36", "37")


def art(name: str):
    return read_model_artifact(MODELS / name / "v1.0.0")


@pytest.fixture(scope="module")
def case4():
    model = art("case-4").load_model()
    g = torch.Generator().manual_seed(0)
    base = torch.randint(1, 6, (6, 10), generator=g)
    source = torch.randint(1, 6, (6, 10), generator=g)
    base[:, 0] = source[:, 0] = 0
    return model, base, source


def _hook_reference(model, site, hook, base, source, Q=None):
    """Interchange with plain TransformerLens hooks: h_b + Q Q^T (h_s - h_b) (Q=None: h_s)."""
    _, cache = model.run_with_cache(source)
    pos = list(site.positions) if site.positions else slice(None)

    def fn(x, hook):
        x = x.clone()
        src = cache[hook.name]
        if site.head is not None:
            b, s = x[:, pos, site.head], src[:, pos, site.head]
            x[:, pos, site.head] = s if Q is None else b + ((s - b) @ Q) @ Q.T
        else:
            b, s = x[:, pos], src[:, pos]
            x[:, pos] = s if Q is None else b + ((s - b) @ Q) @ Q.T
        return x

    return model.run_with_hooks(base, fwd_hooks=[(hook, fn)])


SITES = [
    (pa.Site("resid_pre", 1), "blocks.1.hook_resid_pre"),
    (pa.Site("resid_post", 1), "blocks.1.hook_resid_post"),
    (pa.Site("mlp_out", 0), "blocks.0.hook_mlp_out"),
    (pa.Site("head_z", 1, head=3), "blocks.1.attn.hook_z"),
    (pa.Site("head_result", 0, head=2), "blocks.0.attn.hook_result"),
    (pa.Site("head_z", 1, head=0, positions=(2, 7)), "blocks.1.attn.hook_z"),
    (pa.Site("mlp_out", 1, positions=(4,)), "blocks.1.hook_mlp_out"),
]


@pytest.mark.parametrize("site,hook", SITES, ids=[f"{s.kind}-{s.layer}-{s.head}-{s.positions}" for s, _ in SITES])
def test_pyvene_interchange_equals_plain_hooks(case4, site, hook):
    model, base, source = case4
    clean = model(base)
    n = site.width(model)
    iv = pa.intervenable(model, [site], [pa.BasisIntervention(torch.eye(n), basis=torch.eye(n))])
    out = pa.interchange(iv, [site], base, source)
    ref = _hook_reference(model, site, hook, base, source)
    assert torch.equal(out, ref)  # the full vector: identical outputs
    assert (out - clean).abs().max() > 1e-3  # and the interchange does something
    Q, _ = torch.linalg.qr(torch.randn(n, 2, generator=torch.Generator().manual_seed(1)))
    iv = pa.intervenable(model, [site], [pa.BasisIntervention(torch.eye(n), basis=Q)])
    out = pa.interchange(iv, [site], base, source)
    assert torch.allclose(out, _hook_reference(model, site, hook, base, source, Q), atol=1e-5)
    acts = pa.collect(model, site, source)
    P = base.shape[1] if site.positions is None else len(site.positions)
    assert acts.shape == (base.shape[0], P, n)
    assert torch.equal(model(base), clean)  # a prepared model computes what it did


@pytest.mark.parametrize("site,hook", SITES, ids=[f"{s.kind}-{s.layer}-{s.head}-{s.positions}" for s, _ in SITES])
def test_hooked_interchange_equals_pyvene_with_the_same_gradients(case4, site, hook):
    """What fitting a featurizer runs each step (plain hooks, the sources' vectors computed once)
    gives pyvene's logits and the same gradients to the intervention's parameters."""
    model, base, source = case4
    clean = model(base)
    n = site.width(model)
    torch.manual_seed(0)
    iv = pa.BasisIntervention(torch.eye(n), k=2)  # DAS's trainable rotation
    target = torch.randn(base.shape[0], base.shape[1], model.cfg.d_vocab_out, generator=torch.Generator().manual_seed(2))
    ref = pa.interchange(pa.intervenable(model, [site], [iv]), [site], base, source)
    (ref * target).sum().backward()
    g_ref = [p.grad.clone() for p in iv.parameters() if p.requires_grad]
    iv.zero_grad()
    h = pa.HookedInterchange(model, [site], [iv])
    out = h(base, h.sources(source))
    (out * target).sum().backward()
    g = [p.grad.clone() for p in iv.parameters() if p.requires_grad]
    assert torch.allclose(out, ref, atol=1e-6) and (out - clean).abs().max() > 1e-3
    assert g and all(torch.allclose(a, b, atol=1e-5) for a, b in zip(g, g_ref))
    assert any(float(a.abs().max()) > 1e-4 for a in g)  # the gradient is not trivially zero
    assert torch.equal(model(base), clean)  # no hook left behind
    sites = [pa.Site("head_z", 0, head=0), pa.Site("mlp_out", 0)]  # two sites from one source run
    ivs = [pa.BasisIntervention(torch.eye(s.width(model)), basis=torch.eye(s.width(model))) for s in sites]
    h = pa.HookedInterchange(model, sites, ivs)
    assert torch.equal(h(base, h.sources(source)), pa.interchange(pa.intervenable(model, sites, ivs), sites, base, source))
    # side by side: each group's copy of the batch equals that group's interchange alone
    both = pa.HookedInterchange(model, [sites[0], sites[1], sites[1]], [ivs[0], ivs[1], ivs[1]], group=[0, 0, 1])
    out = both(base, both.sources(source)).chunk(2, 0)
    assert torch.equal(out[0], pa.interchange(pa.intervenable(model, sites, ivs), sites, base, source))
    assert torch.equal(out[1], pa.interchange(pa.intervenable(model, sites[1:], ivs[1:]), sites[1:], base, source))


def test_two_sites_together_and_bad_sites(case4):
    model, base, source = case4
    sites = [pa.Site("head_z", 0, head=0), pa.Site("mlp_out", 0)]
    ivs = [pa.BasisIntervention(torch.eye(s.width(model)), basis=torch.eye(s.width(model))) for s in sites]
    out = pa.interchange(pa.intervenable(model, sites, ivs), sites, base, source)
    _, cache = model.run_with_cache(source)

    def z(x, hook):
        x = x.clone()
        x[:, :, 0] = cache[hook.name][:, :, 0]
        return x

    ref = model.run_with_hooks(base, fwd_hooks=[("blocks.0.attn.hook_z", z),
                                                ("blocks.0.hook_mlp_out", lambda x, hook: cache[hook.name])])
    assert torch.equal(out, ref)
    with pytest.raises(Exception, match="head index"):
        pa.Site("head_z", 0)
    with pytest.raises(Exception, match="layer 5"):
        pa.intervenable(model, [pa.Site("mlp_out", 5)], [ivs[1]])


def test_variables_and_aligned_locations():
    siit = {v.name: v for v in variables(art("case-18"))}
    assert siit["hist_4"].aligned == "a0.h0+m0" and siit["frequency_class_1"].aligned == "m1"
    assert "same_tok_5" not in siit  # a Select: an attention pattern, not a vector
    tr = {v.name: v for v in variables(art("tracr-case-4"))}
    assert tr["bools_open_6"].aligned.startswith("m0[") and tr["opens_5"].aligned.startswith("a1.h0[")
    with pytest.raises(UsageError, match="Select"):
        variable(art("case-3"), "select_3")
    with pytest.raises(UsageError, match="did you mean"):
        variable(art("case-3"), "is_x_1")
    cfg = art("case-3").config
    from types import SimpleNamespace

    cfg = SimpleNamespace(**cfg)
    loc = parse_location("a1.h0+m0", cfg)
    assert loc.nodes == {"a1.h0", "m0"} and len(loc.parts) == 2
    assert parse_location("resid.2", cfg).parts[0].site.kind == "resid_post"
    assert parse_location("m0[3,5]", cfg).parts[0].dims == (3, 5)
    for bad in ("a2.h0", "m9", "resid.3", "x", "m0[12]", "resid.1+m0"):
        with pytest.raises(UsageError, match="location"):
            parse_location(bad, cfg)


@pytest.mark.parametrize("name,var", [("tracr-case-3", "is_x_2"), ("tracr-case-4", "bools_open_6")])
def test_tracr_identity_and_das_reach_iia_one_at_the_aligned_location(name, var):
    a = art(name)
    model = a.load_model()
    v = variable(a, var)
    data = load_variable_data(a, v, DATASET, n_train=512, n_test=300)
    locs = [v.aligned, "m0", "a0.h0"]
    for f in ("identity", "das"):
        res = localize(a, var, FeaturizerSpec(f), locations=locs, model=model, data=data)
        row = {r.location: r for r in res.rows}
        assert row[v.aligned].iia >= 0.99 and row[v.aligned].is_aligned
        assert res.scores["iia_aligned"] >= 0.99
    # a random one-dimensional direction of the same vector does not hold the variable
    res = localize(a, var, FeaturizerSpec("random"), locations=["m0"], model=model, data=data)
    assert res.rows[0].iia_changed < 0.5


def test_siit_localization_sanity_bounds():
    a = art("case-3")
    model = a.load_model()
    v = variable(a, "is_x_2")
    data = load_variable_data(a, v, DATASET, n_train=512, n_test=300)
    res = localize(a, "is_x_2", FeaturizerSpec("identity"), locations=["m0", "a0.h1", "m1"], model=model, data=data)
    row = {r.location: r for r in res.rows}
    assert row["m0"].iia >= 0.9  # SIIT trained m0 to hold it (sanity bound, not a v1 figure)
    assert row["a0.h1"].iia_changed < 0.2  # a head outside the circuit does not
    assert res.scores["best_location"] == "m0" and res.scores["localized"] is True
    assert res.scores["gap"] == pytest.approx(row["m0"].iia - max(row["a0.h1"].iia, row["m1"].iia), abs=1e-6)


def test_cli_localize_writes_a_valid_results_file(tmp_path, capsys):
    out = tmp_path / "loc.json"
    code, stdout, err = run(capsys, "localize", str(MODELS / "tracr-case-3" / "v1.0.0"), "--variable", "is_x_2",
                            "--featurizer", "pca", "--k", "1", "--locations", "m0,m0[5],resid.1",
                            "--n-train", "256", "--n-test", "200", "--dataset", str(DATASET), "--out", str(out))
    assert code == 0, err
    assert "<- aligned" in stdout and "results written" in stdout
    doc = json.loads(out.read_text())
    assert validation.validate(doc) == [] and doc["kind"] == "localization"
    r = doc["results"]
    assert r["featurizer"] == "pca" and r["hyperparameters"]["k"] == 1 and r["aligned_location"] == "m0[5]"
    assert [x["location"] for x in r["locations"]] == ["m0", "m0[5]", "resid.1"]
    assert r["scores"]["iia_aligned"] >= 0.99


@pytest.mark.parametrize("argv,needle", [
    (["--variable", "select_3"], "Select"),
    (["--variable", "nope"], "no variable"),
    (["--variable", "is_x_2", "--locations", "m7"], "location 'm7'"),
    (["--variable", "is_x_2", "--featurizer", "sae"], "sae"),
])
def test_cli_localize_bad_input_is_one_line(tmp_path, capsys, argv, needle):
    code, _stdout, err = run(capsys, "localize", str(MODELS / "case-3" / "v1.0.0"), "--dataset", str(DATASET),
                            "--n-train", "8", "--n-test", "8", *argv)
    assert code != 0 and needle in err and "Traceback" not in err
    assert not list(tmp_path.iterdir())


def test_track_writes_table_plot_and_results(tmp_path):
    lines = []
    doc = run_track(["3"], tmp_path, featurizers="identity,random", n_train=64, n_test=100, dataset_dir=DATASET,
                    loader=art, echo=lines.append, include_trivial=True)
    assert validation.validate(doc) == [] and doc["kind"] == "causal-variables"
    # every Tracr variable owns its component: marked, and left out of the summaries by default
    assert all(r["separates"] is False for r in doc["results"]["rows"] if r["model_kind"] == "tracr")
    assert {b["variable_kind"] for b in doc["results"]["leaderboard"]} >= {"tracr"}
    rows = doc["results"]["rows"]
    assert {(r["model_kind"], r["featurizer"]) for r in rows} == {(k, f) for k in ("siit", "tracr")
                                                                   for f in ("identity", "random")}
    tracr_identity = [r for r in rows if r["model_kind"] == "tracr" and r["featurizer"] == "identity"]
    assert tracr_identity and all(r["scores"]["iia_aligned"] >= 0.99 for r in tracr_identity)
    assert "| tracr | identity |" in (tmp_path / "table.md").read_text()
    assert (tmp_path / "iia_aligned.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # resumable: a second run reads the runs back
    again = run_track(["3"], tmp_path, featurizers="identity", n_train=64, n_test=100, dataset_dir=DATASET,
                      loader=art, echo=lines.append)
    assert all(s["model_kind"] != "tracr" for s in again["results"]["summary"])
    assert "tracr" not in {b["variable_kind"] for b in again["results"]["leaderboard"]}
    assert (tmp_path / "leaderboard.png").is_file() or not again["results"]["leaderboard"]


@pytest.mark.slow
def test_tracr_sanity_row_for_every_main_case(tmp_path):
    """The issue's 'done when': on Tracr models DAS and identity reach IIA >= 0.99 at the aligned
    location for every variable of the 16 main cases."""
    doc = run_track(list(MAIN), tmp_path, featurizers="identity,das", kinds="tracr", n_train=1024, n_test=500,
                    dataset_dir=DATASET, loader=art, echo=lambda s: None)
    rows = doc["results"]["rows"]
    assert {r["case"] for r in rows} == set(MAIN)
    low = [(r["model"], r["variable"], r["featurizer"], r["scores"]["iia_aligned"]) for r in rows
           if r["scores"]["iia_aligned"] < 0.99]
    assert not low, low
