"""FIND suite builder: deterministic, the documented mix, ground-truth code that matches the spec."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from _find_helpers import SMALL, small_suite, small_suite_dir
from cbench.find import functions as F
from cbench_builders.find import suite as B


def _digest(root):
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.slow  # ~25 s of building beyond the shared small suite: `make test-slow` (docs/performance.md)
def test_same_seed_same_bytes_other_seed_other_functions(tmp_path):
    first = small_suite_dir()
    B.build_suite(tmp_path / "a", **SMALL)
    assert _digest(tmp_path / "a" / "find") == _digest(first)
    B.build_suite(tmp_path / "b", seed=SMALL["seed"] + 1, n_numeric=0, n_strings=SMALL["n_strings"])
    specs_a = pq.read_table(first / "strings" / B.DATA_FILE).column("spec").to_pylist()
    specs_b = pq.read_table(tmp_path / "b" / "find" / "strings" / B.DATA_FILE).column("spec").to_pylist()
    assert specs_a != specs_b


def test_the_mix_of_the_paper_and_the_issue():
    assert B._counts(1000, B.NUMERIC_SHARES) == {"atomic": 400, "noisy": 150, "corrupted": 150,
                                                 "composition": 150, "neural": 150}
    assert B._counts(1000, B.STRING_SHARES) == {"atomic": 200, "copycat": 100, "composition": 700}
    suite = small_suite()
    subs = [f.subcategory for f in suite.functions.values() if f.config == "numeric"]
    assert {s: subs.count(s) for s in set(subs)} == B._counts(SMALL["n_numeric"], B.NUMERIC_SHARES)
    assert len(suite.ids("strings")) == SMALL["n_strings"]


def test_numeric_specs_code_and_intervals_agree():
    suite = small_suite()
    x = F.test_grid()
    for fn in suite.functions.values():
        if fn.config != "numeric":
            continue
        spec = fn.spec
        truth = F.numeric_mean(spec, x, suite.weights)
        assert np.isfinite(truth).sum() > 500, fn.id
        if spec["kind"] in ("atomic", "polynomial", "compose"):
            with np.errstate(all="ignore"):
                got = eval(fn.code, {"np": np, "x": x})  # the code column is a numpy expression in x
            np.testing.assert_allclose(np.broadcast_to(got, x.shape)[np.isfinite(truth)], truth[np.isfinite(truth)],
                                       rtol=1e-9, atol=1e-9)
        if spec["kind"] == "corrupted":
            lo, hi = spec["interval"]
            assert fn.interval == (lo, hi)
            a = lo if lo is not None else hi
            assert -100 <= a <= 100
            if lo is not None and hi is not None:
                assert 5 <= hi - lo <= 20
            inside = F.in_interval(x, spec["interval"])
            assert np.all(truth[inside] == spec["mu"])
        else:
            assert fn.interval is None
        if spec["kind"] == "mlp":
            assert spec["hidden"] == 64 and suite.weights[f"{spec['key']}.w1"].shape == (64, 1)
            assert suite.weights[f"{spec['key']}.w2"].shape == (1, 64)
            assert F.numeric_mean(spec["target"], x).shape == truth.shape


def test_string_code_reproduces_the_stored_test_set():
    suite = small_suite()
    for fn in suite.functions.values():
        if fn.config != "strings":
            continue
        assert len(fn.test_inputs) == 10 == len(fn.test_outputs)
        ns: dict = {}
        exec(fn.code, ns)
        assert [ns["f"](s) for s in fn.test_inputs] == list(fn.test_outputs), fn.id
        if fn.spec["kind"] == "compose":
            probes = list(B._PROBES)
            assert [F.string_call(fn.spec, p) for p in probes] != probes  # never the identity


def test_card_has_both_configs_and_says_what_is_left_out():
    card = (small_suite_dir() / "README.md").read_text()
    assert "- config_name: numeric" in card and "- config_name: strings" in card
    assert "path: numeric/test-00000-of-00001.parquet" in card
    assert "synthetic neural modules" in card and "Vicuna" in card
    neural = [f.id for f in small_suite().functions.values() if f.spec["kind"] == "mlp"]
    assert neural and sorted(_card_fits(card)) == sorted(neural)
    assert "Linear(1, 64) -> ReLU -> Linear(64, 1)" in card and "10,000 epochs" in card
    assert "10,000 evenly spaced points of [-100, 100]" in card and "Deviations from FIND" in card
    meta = json.loads(pq.read_schema(small_suite_dir() / "numeric" / B.DATA_FILE).metadata[b"cbench"])
    assert meta["test_grid"] == [-128.0, 128.0, 1025] and meta["seed"] == SMALL["seed"]


def test_no_pickles_and_weights_are_safetensors():
    files = [p.name for p in small_suite_dir().rglob("*") if p.is_file()]
    assert "mlp.safetensors" in files
    assert not [f for f in files if f.endswith((".pkl", ".pt", ".pth", ".pickle"))]


def test_bad_sizes_are_a_usage_error(tmp_path):
    from cbench.errors import UsageError

    with pytest.raises(UsageError):
        B.build_suite(tmp_path, n_numeric=0, n_strings=0)


ZOO_FIND_ALL = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "datasets" / "cbench" / "find"
RELEASED = "v2.0.0"  # FIND's MLP training (10k epochs, 1-64-1); v1.0.0 (1,500 steps, 1-32-1) stays pullable
ZOO_FIND = ZOO_FIND_ALL / RELEASED
#: the card's NMSE and one recomputed on other fresh inputs differ by sampling alone (100,000 and
#: 50,000 uniform points; errors near a step's jump are the noisiest): a relative tolerance
FIT_REL_TOL = 0.2
#: the fit FIND's recipe reaches here (the card: 144 of 150 below 0.1, median 1.3e-05); FIND's own
#: released MLPs: 83 of 151 below 0.1, median 0.0050
FIT_MIN_BELOW_0_1 = 140
FIT_MAX_MEDIAN = 1e-3
_FIT_ROW = re.compile(r"^\| (n\d{4}) \| (\w+) \| (\S+) \| (\S+) \|$", re.M)


def _card_fits(card: str) -> dict[str, tuple[float, float]]:
    """The card's MLP fit table: id -> (NMSE over (-100, 100), NMSE over [-128, 128])."""
    return {m[1]: (float(m[3]), float(m[4])) for m in _FIT_ROW.finditer(card)}


def test_the_release_is_in_the_zoo_and_pull_find_means_cbench_find():
    from cbench.find.suite import FindSuite
    from cbench.hub.pull import candidates

    assert candidates("find", "dataset") == ["cbench/find"]
    index = json.loads((ZOO_FIND_ALL.parents[2] / "index.json").read_text())
    entry = next(d for d in index["datasets"] if d["repo"] == "cbench/find")
    assert entry["configs"] == ["numeric", "strings"]
    assert [v["version"] for v in entry["versions"]] == ["v1.0.0", RELEASED]  # the old tag stays
    for v in entry["versions"]:
        files = v["files"]
        assert set(files) == {"README.md", "numeric/mlp.safetensors", "numeric/test-00000-of-00001.parquet",
                              "strings/test-00000-of-00001.parquet"}
        for rel, sha in files.items():
            assert hashlib.sha256((ZOO_FIND_ALL / v["version"] / rel).read_bytes()).hexdigest() == sha
        assert sum((ZOO_FIND_ALL / v["version"] / rel).stat().st_size for rel in files) < 2_000_000
    suite = FindSuite.load(ZOO_FIND)
    assert len(suite.ids("numeric")) == 1000 and len(suite.ids("strings")) == 1000
    old = FindSuite.load(ZOO_FIND_ALL / "v1.0.0")  # only the MLPs changed
    changed = {f for f in suite.functions if suite.functions[f].spec != old.functions[f].spec}
    assert changed == {f for f, fn in suite.functions.items() if fn.spec["kind"] == "mlp"} and len(changed) == 150


def _torch_mlp(weights, key, x):
    """The released MLP as FIND's own module, ``Linear(1, H) -> ReLU -> Linear(H, 1)``."""
    import torch

    w1 = torch.from_numpy(weights[f"{key}.w1"]).double()
    net = torch.nn.Sequential(torch.nn.Linear(1, w1.shape[0]), torch.nn.ReLU(), torch.nn.Linear(w1.shape[0], 1))
    net = net.double()
    with torch.no_grad():
        net[0].weight.copy_(w1)
        net[0].bias.copy_(torch.from_numpy(weights[f"{key}.b1"]))
        net[2].weight.copy_(torch.from_numpy(weights[f"{key}.w2"]))
        net[2].bias.copy_(torch.from_numpy(weights[f"{key}.b2"]))
        return net(torch.from_numpy(x).reshape(-1, 1)).numpy()[:, 0]


def test_the_released_mlps_fit_their_functions_as_the_card_says():
    """NMSE of every released MLP against its target, recomputed on fresh inputs with torch's
    modules and the target's code text (neither the training code nor the builder's measure)."""
    from safetensors import safe_open

    from cbench.find.suite import FindSuite

    suite = FindSuite.load(ZOO_FIND)
    card = (ZOO_FIND / "README.md").read_text()
    stated = _card_fits(card)
    neural = {f: fn for f, fn in suite.functions.items() if fn.spec["kind"] == "mlp"}
    assert sorted(stated) == sorted(neural) and len(neural) == 150
    with safe_open(str(ZOO_FIND / "numeric" / "mlp.safetensors"), "np") as fh:
        recipe = json.loads(fh.metadata()["recipe"])
    assert (recipe["hidden"], recipe["points"], recipe["epochs"], recipe["lr"]) == (64, 10_000, 10_000, 0.01)
    assert (recipe["lo"], recipe["hi"]) == (-100.0, 100.0)
    g = np.random.default_rng(20261126)  # not the builder's streams
    ranges = {0: g.uniform(-100, 100, 50_000), 1: g.uniform(-128, 128, 50_000)}
    got = {}
    for fid, fn in neural.items():
        for i, x in ranges.items():
            with np.errstate(all="ignore"):
                target = np.broadcast_to(eval(F.numeric_code(fn.spec["target"]), {"np": np, "x": x}), x.shape)
            err = np.sum((_torch_mlp(suite.weights, fid, x) - target) ** 2) / np.sum(target ** 2)
            got[fid, i] = err
            card_value = stated[fid][i]
            assert abs(err - card_value) <= FIT_REL_TOL * card_value + 1e-8, (fid, fn.family, i, err, card_value)
    train = np.array([got[f, 0] for f in neural])
    assert int((train < 0.1).sum()) >= FIT_MIN_BELOW_0_1, sorted(train)[-10:]
    assert float(np.median(train)) <= FIT_MAX_MEDIAN


@pytest.mark.slow
def test_cbench_pull_find_from_a_fresh_home(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, CBENCH_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "cbench.cli", "pull", "find", "--type", "dataset"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert f"cbench/find {RELEASED}" in proc.stdout
    proc = subprocess.run([sys.executable, "-m", "cbench.cli", "pull", "find@v1.0.0", "--type", "dataset"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0 and "cbench/find v1.0.0" in proc.stdout, proc.stderr
