"""A discovery method from another package: ``tests/data/plugin_method`` declares three in the
``cbench.methods`` entry points and is pip-installed into a temporary directory; ``cbench bench``
and ``cbench discover`` then run and score them beside the built-in ones. Also
``cbench.register_method`` in a running process."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import _scoring_toy as T
import numpy as np
import pytest
from cbench.cli import main

PLUGIN = Path(__file__).parent / "data" / "plugin_method"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """The example package installed (its dist-info and its module) in a directory of its own."""
    root = tmp_path_factory.mktemp("plugin")
    src = root / "src"
    shutil.copytree(PLUGIN, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = root / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--quiet", "--target", str(target), str(src)], capture_output=True, text=True, timeout=300,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert (target / "cbench_plugin_example-0.1.0.dist-info" / "entry_points.txt").is_file()
    T.write_toy_artifact(root / "toy")
    return root, target


@pytest.fixture
def on_path(installed, monkeypatch):
    """The installed package importable and its entry points read, for one test."""
    from cbench.discovery import METHODS

    root, target = installed
    monkeypatch.syspath_prepend(str(target))
    METHODS.reload_entry_points()
    yield root
    monkeypatch.undo()
    sys.modules.pop("cbench_plugin_example", None)
    METHODS.reload_entry_points()


def _run(capsys, args):
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    got = capsys.readouterr()
    return code, got.out, got.err


def test_bench_runs_and_scores_an_installed_method_beside_the_built_in_ones(on_path, capsys):
    root = on_path
    code, out, err = _run(capsys, ["bench", "--cases", str(root / "toy"), "--methods", "eap,theirs,theirs-class",
                                   "--out", str(root / "bench"), "--sampled", "--n-examples", "12", "--json"])
    assert code == 0, err
    auroc = json.loads(out)["results"]["auroc"]["toy3"]
    assert auroc["theirs"] == 1.0 and auroc["eap"] == 1.0  # the toy's circuit, found by both
    assert 0.5 < auroc["theirs-class"] < 1.0  # node sizes: better than chance, not the circuit
    theirs = json.loads((root / "bench" / "scores" / "toy3" / "theirs.json").read_text())
    eap = json.loads((root / "bench" / "scores" / "toy3" / "eap.json").read_text())
    assert theirs["method"]["name"] == "theirs" and theirs["method"]["hyperparameters"]["scale"] == 1.0
    # d loss / d mask at the all-ones mask is EAP's score with the opposite sign (cbench.runtime)
    a = np.array([theirs["edges"][e]["score"] for e in eap["edges"]])
    b = np.array([eap["edges"][e]["score"] for e in eap["edges"]])
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-7 * np.abs(b).max())
    assert "| toy3 |" in err and "theirs" in (root / "bench" / "table.md").read_text()


def test_discover_runs_an_installed_method_with_its_own_hyperparameters(on_path, capsys):
    root = on_path
    code, out, err = _run(capsys, ["discover", str(root / "toy"), "--method", "theirs", "--param", "scale=2",
                                   "--sampled", "--n-examples", "12", "--json", "-q"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["method"] == {"name": "theirs", "hyperparameters": {"scale": 2.0, "ablation": "resample",
                                                                   "rel_threshold": 0.05, "metric": "ce"},
                             "details": {"dtype": "float32"}}  # what its scores' resolution follows from
    code, out, err = _run(capsys, ["discover", str(root / "toy"), "--method", "theirs-class", "--ablation", "mean",
                                   "--sampled", "--n-examples", "12"])
    assert code == 2 and "theirs-class ablates nothing" in err
    code, out, err = _run(capsys, ["discover", str(root / "toy"), "--method", "theirs", "--param", "scale=x",
                                   "--sampled"])
    assert code == 2 and err.startswith("error: theirs: scale must be float") and "Traceback" not in err


def test_a_method_that_cannot_be_imported_is_one_error_line(on_path, capsys):
    code, _out, err = _run(capsys, ["discover", str(on_path / "toy"), "--method", "theirs-missing", "--sampled"])
    assert code != 0 and "Traceback" not in err
    assert err.startswith("error: method 'theirs-missing' (entry point theirs-missing = "
                          "cbench_plugin_example.not_there:method (cbench-plugin-example 0.1.0)) could not be "
                          "imported: ModuleNotFoundError"), err


def test_installed_methods_are_listed_but_never_change_the_default_bench(on_path, capsys):
    from cbench.discovery import METHODS, bench_methods

    assert {"theirs", "theirs-class", "theirs-missing"} <= set(METHODS)
    assert not {"theirs", "theirs-class", "theirs-missing"} & set(bench_methods())
    code, out, _err = _run(capsys, ["discover", "--help"])
    assert code == 0 and "theirs-class" in out


def test_without_the_package_the_method_is_unknown(installed, capsys):
    code, _out, err = _run(capsys, ["discover", str(installed[0] / "toy"), "--method", "theirs", "--sampled"])
    assert code == 2 and "unknown method 'theirs'" in err
