"""FIND suite builder: deterministic, the documented mix, ground-truth code that matches the spec."""

from __future__ import annotations

import hashlib
import json
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
            assert {f"{spec['key']}.w1", f"{spec['key']}.b2"} <= set(suite.weights)
            target = F.numeric_mean(spec["target"], x)
            inner = (x > -100) & (x < 100)
            err = np.mean((truth[inner] - target[inner]) ** 2) / np.mean(target[inner] ** 2)
            assert err < 0.1, (fn.id, fn.family, err)  # the MLP approximates its target


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


ZOO_FIND = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "datasets" / "cbench" / "find" / "v1.0.0"


def test_the_release_is_in_the_zoo_and_pull_find_means_cbench_find():
    from cbench.find.suite import FindSuite
    from cbench.hub.pull import candidates

    assert candidates("find", "dataset") == ["cbench/find"]
    index = json.loads((ZOO_FIND.parents[1] / ".." / ".." / "index.json").resolve().read_text())
    entry = next(d for d in index["datasets"] if d["repo"] == "cbench/find")
    assert entry["configs"] == ["numeric", "strings"]
    files = entry["versions"][0]["files"]
    assert set(files) == {"README.md", "numeric/mlp.safetensors", "numeric/test-00000-of-00001.parquet",
                          "strings/test-00000-of-00001.parquet"}
    for rel, sha in files.items():
        assert hashlib.sha256((ZOO_FIND / rel).read_bytes()).hexdigest() == sha
    assert sum((ZOO_FIND / rel).stat().st_size for rel in files) < 2_000_000
    suite = FindSuite.load(ZOO_FIND)
    assert len(suite.ids("numeric")) == 1000 and len(suite.ids("strings")) == 1000


@pytest.mark.slow
def test_cbench_pull_find_from_a_fresh_home(tmp_path):
    import os
    import subprocess
    import sys

    env = dict(os.environ, CBENCH_HOME=str(tmp_path / "home"))
    proc = subprocess.run([sys.executable, "-m", "cbench.cli", "pull", "find", "--type", "dataset"],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert "cbench/find v1.0.0" in proc.stdout
