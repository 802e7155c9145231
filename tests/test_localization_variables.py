"""The variables tier and MIB-comparable scoring: gates that hold on the released models and fail
without their mechanism, IIA per example vs per position, the featurizers MIB compares (identity
fails where variables share a component, DAS and DBM find the subspace, DBM on standard dimensions
fails in a rotated basis), variables that cannot separate featurizers marked, and byte-identical
output for the same command and seed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from cbench import schemas as validation
from cbench.artifacts.model import read_model_artifact
from cbench.localization.featurizers import FEATURIZERS, FeaturizerSpec
from cbench.localization.localize import load_variable_data, localize
from cbench.localization.variables import variable, variables
from cbench.tasks.variables import HighLevel, variable_pairs
from cbench.verify.variables import verify_variables
from test_scoring_cli import run  # the CLI runner (exit code, stdout, stderr)

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "model_zoo" / "releases" / "models" / "cbench"
DATASET = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.1.0"
KINDS = {"shared": 3, "rotated": 3, "spread": 3}


def art(name: str):
    return read_model_artifact(MODELS / name / "v1.0.0")


def test_nine_models_three_per_kind_with_their_variables():
    names = sorted(p.name for p in MODELS.glob("var-*"))
    assert len(names) == 9
    kinds: dict[str, int] = {}
    for n in names:
        a = art(n)
        assert a.model_kind == "variables" and (a.path / "saes.safetensors").is_file()
        vs = variables(a)
        assert len(vs) >= 2 and all(v.separates for v in vs)
        kind = n.split("-")[1]
        kinds[kind] = kinds.get(kind, 0) + 1
        assert any(v.kind == kind for v in vs)
    assert kinds == KINDS


def test_high_level_interchange_labels():
    a = art("var-shared-1")
    hl = HighLevel.from_meta(a.meta)
    data, changed = variable_pairs(a.meta, "A", "differs", "test", 200)
    base, source = data.base.numpy(), data.source.numpy()
    assert (hl.values(base)["A"] != hl.values(source)["A"]).all()  # "differs": the variable differs
    mixed = hl.values(base)
    mixed["A"] = hl.values(source)["A"]
    assert np.array_equal(data.labels[:, 1].numpy(), hl.output(mixed))
    assert (data.labels[:, 1:] == data.labels[:, 1:2]).all() and not data.valid[:, 0].any()
    assert 0 < int(changed.any(1).sum()) < 200
    again, _ = variable_pairs(a.meta, "A", "differs", "test", 200)
    assert torch.equal(again.base, data.base)  # deterministic


@pytest.mark.parametrize("name", ["var-shared-1", "var-rotated-2", "var-spread-1"])
def test_gates_hold_on_the_released_model(name):
    a = art(name)
    report = verify_variables(a.load_model(), a.meta, a.circuit, n_pairs=200)
    assert report.passed, report.format()
    names = {g.name for g in report.gates}
    kind = name.split("-")[1]
    assert any(n.startswith("iia_whole_component[") for n in names)
    assert any(n.startswith("axis_alignment[") for n in names) == (kind == "rotated")
    assert any(n.startswith("iia_one_component[") for n in names) == (kind == "spread")


def test_gates_fail_without_the_mechanism():
    """The rotated model's variables are not where the unrotated model puts them, the unrotated
    model's subspaces are axis-aligned, and a spread variable's single component does not hold it."""
    rot, flat = art("var-rotated-1"), art("var-shared-1")
    wrong = dict(rot.circuit, variables=flat.circuit["variables"])  # axis-aligned bases in a rotated model
    report = verify_variables(rot.load_model(), rot.meta, wrong, n_pairs=200)
    assert not report.passed
    assert any(g.name.startswith("iia_true_subspace[") and not g.passed for g in report.gates)
    flat_as_rotated = dict(flat.circuit, variables=[dict(v, kind="rotated") for v in flat.circuit["variables"]])
    report = verify_variables(flat.load_model(), flat.meta, flat_as_rotated, n_pairs=100)
    assert [g.name for g in report.gates if not g.passed] == ["axis_alignment[A]", "axis_alignment[B]"]
    sp = art("var-spread-1")
    one_part = [dict(v, parts=v["parts"][:1], location=v["parts"][0]["node"]) if v["kind"] == "spread" else v
                for v in sp.circuit["variables"]]
    report = verify_variables(sp.load_model(), sp.meta, dict(sp.circuit, variables=one_part), n_pairs=200)
    assert any(g.name == "iia_true_subspace[A]" and not g.passed for g in report.gates)


@pytest.fixture(scope="module")
def shared():
    a = art("var-shared-1")
    model = a.load_model()
    v = variable(a, "A")
    return a, model, v, load_variable_data(a, v, n_train=512, n_test=200)


def test_identity_fails_das_and_dbm_find_a_shared_variable(shared):
    a, model, _v, data = shared
    res = {f: localize(a, "A", FeaturizerSpec(f, steps=48), locations=["m0", "a0.h0"], model=model, data=data)
           for f in ("identity", "dbm", "das")}
    iia = {f: {r.location: r.iia for r in x.rows} for f, x in res.items()}
    assert iia["identity"]["m0"] < 0.6  # the whole MLP moves B too
    assert iia["das"]["m0"] >= 0.95 and iia["dbm"]["m0"] >= 0.95
    assert res["das"].scores["mib"]["best_location"] == "m0" and res["das"].scores["mib"]["best_is_true"]
    assert set(res["das"].rows[0].datasets) == {"random", "differs"}
    mib = res["identity"].scores["mib"]
    assert mib["mean_iia"] == pytest.approx((iia["identity"]["m0"] + iia["identity"]["a0.h0"]) / 2, abs=1e-6)


def test_dbm_on_standard_dimensions_fails_in_a_rotated_basis():
    a = art("var-rotated-1")
    model = a.load_model()
    v = variable(a, "A")
    data = load_variable_data(a, v, n_train=512, n_test=200)
    dbm = localize(a, "A", FeaturizerSpec("dbm", steps=48), locations=["m0"], model=model, data=data)
    das = localize(a, "A", FeaturizerSpec("das", steps=48), locations=["m0"], model=model, data=data)
    # a mask over rotated standard dimensions moves part of B with A: DAS reaches the gate, DBM does not
    # (0.91 for A in the track's run: the argmax read-out forgives a partial interchange often)
    assert das.rows[0].iia >= 0.95 > dbm.rows[0].iia


def test_iia_per_example_and_per_position(shared):
    a, model, _v, data = shared
    ex = localize(a, "A", FeaturizerSpec("random", k=2), locations=["m0"], model=model, data=data)
    pos = localize(a, "A", FeaturizerSpec("random", k=2), locations=["m0"], model=model, data=data,
                   iia_unit="position")
    assert ex.results()["iia_unit"] == "example" and pos.results()["iia_unit"] == "position"
    # labels are the same at every position of these models, and so are the outputs: the units agree
    assert ex.rows[0].iia == pytest.approx(pos.rows[0].iia, abs=1e-9)


def test_siit_variables_marked_when_they_cannot_separate():
    vs = {v.name: v for v in variables(art("case-18"))}
    assert vs["frequency_class_1"].separates is False and "nothing else" in vs["frequency_class_1"].why
    assert vs["frequency_class_1"].holds == ("m1", "resid.2")
    tr = variables(art("tracr-case-3"))
    assert all(v.separates is False for v in tr)


def test_cli_featurizer_choices_match_the_library():
    from cbench.cli.localize_cmd import FEATURIZERS as CLI

    assert tuple(CLI) == tuple(FEATURIZERS)


@pytest.mark.parametrize("featurizer", ["das", "dbm-sae"])
def test_same_command_same_seed_same_bytes(tmp_path, capsys, featurizer):
    outs = []
    for i in range(2):
        out = tmp_path / f"run{i}.json"
        code, _stdout, err = run(capsys, "localize", str(MODELS / "var-rotated-1" / "v1.0.0"), "--variable", "B",
                                 "--featurizer", featurizer, "--locations", "m0,resid.1", "--steps", "6",
                                 "--n-train", "128", "--n-test", "100", "--seed", "3", "--reproducible",
                                 "--out", str(out))
        assert code == 0, err
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    assert validation.validate(doc) == [] and doc["results"]["iia_unit"] == "example"
    assert "runtime_s" not in json.dumps(doc["results"]) and doc["runtime_s"] is None


def test_das_does_not_depend_on_the_global_rng(shared):
    """torch's orthogonal parametrization completes DAS's start basis with the global RNG; fit
    seeds it from the spec, so the trained rotation is the same whatever the global state."""
    from cbench.localization.featurizers import fit
    from cbench.localization.variables import parse_location

    _a, model, v, (train, _tests) = shared
    loc = parse_location("m0", model.cfg)
    Qs = []
    for s in (1, 2):
        torch.manual_seed(s)
        ivs, _ = fit(model, loc, FeaturizerSpec("das", steps=4, seed=0), train, v.n_dims)
        Qs.append(ivs[0].Q().detach())
    assert torch.equal(Qs[0], Qs[1])
    ivs, _ = fit(model, loc, FeaturizerSpec("das", steps=4, seed=1), train, v.n_dims)
    assert not torch.equal(ivs[0].Q().detach(), Qs[0])


@pytest.mark.parametrize("featurizer", ["das", "dbm-sae"])
def test_locations_trained_side_by_side_equal_each_trained_alone(featurizer):
    """The track fits a featurizer at every location in one optimisation (each location on its own
    copy of every batch): the same parameters, bit for bit, as fitting each location alone,
    a two-component location among them."""
    from cbench.localization.featurizers import fit, fit_many
    from cbench.localization.sae import artifact_saes
    from cbench.localization.variables import parse_location

    a = art("var-spread-1")
    model, v = a.load_model(), variable(a, "A")
    assert "+" in v.aligned
    train, _ = load_variable_data(a, v, n_train=128, n_test=8)
    locs = [parse_location(n, model.cfg) for n in ("m0", "a0.h1", v.aligned, "resid.1")]
    spec, saes = FeaturizerSpec(featurizer, steps=6, seed=0, batch_size=32), artifact_saes(a)
    together = fit_many(model, locs, spec, train, v.n_dims, saes=saes)
    for loc, (ivs, info) in zip(locs, together):
        alone, info_alone = fit(model, loc, spec, train, v.n_dims, saes=saes)
        assert len(ivs) == len(loc.parts) == len(alone)
        for x, y in zip(ivs, alone):
            mine = x.Q() if featurizer == "das" else x.mask_logits
            theirs = y.Q() if featurizer == "das" else y.mask_logits
            assert torch.equal(mine.detach(), theirs.detach())
        assert info["final_loss"] == info_alone["final_loss"] and info["k"] == info_alone["k"]
    losses = {info["final_loss"] for _, info in together}
    assert len(losses) == len(locs)  # the locations were trained on their own losses


def test_cli_bad_iia_unit_is_one_line(capsys):
    code, _stdout, err = run(capsys, "localize", str(MODELS / "var-shared-1" / "v1.0.0"), "--variable", "A",
                             "--iia-unit", "token")
    assert code != 0 and "iia-unit" in err and "Traceback" not in err


@pytest.mark.slow
def test_every_variables_model_pulls_and_verifies_from_a_fresh_home(tmp_path, monkeypatch, capsys):
    """The issue's 'done when': the nine models pass their gates with cbench verify, pulled from
    the embedded hub into an empty CBENCH_HOME (``cbench pull`` first: verify reads a pulled model
    and never pulls one; this test called verify alone and failed on "not pulled")."""
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CBENCH_HUB", raising=False)
    monkeypatch.delenv("CBENCH_ENDPOINT", raising=False)
    names = sorted(p.name for p in MODELS.glob("var-*"))
    assert len(names) == sum(KINDS.values())
    for name in names:
        code, stdout, err = run(capsys, "pull", name)
        assert code == 0, (name, stdout, err)
        code, stdout, err = run(capsys, "verify", name)
        assert code == 0, (name, stdout, err)
        assert "FAIL" not in stdout and "PASSED" in stdout
