"""The Python API: from a fresh CBENCH_HOME, pull (through the hub protocol, olah on loopback),
discover, score and evaluate in four calls of ``cbench.*``, on a toy case published to a local
hub (default suite) and on the released case-3 (slow); each answer equals what the command of the
same name prints with ``--json``. docs/new-method.md's method runs as written. Also: the API is
what ``help(cbench)`` shows, ``import cbench`` stays free of torch, results are frozen, and bad
input is one CbenchError."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import _scoring_toy as T
import cbench
import pytest
from cbench.cli import main
from cbench.errors import CbenchError

ROOT = Path(__file__).resolve().parents[1]
API = ("pull", "discover", "score", "evaluate", "bench", "verify", "validate", "load", "load_dataset",
       "register_method")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    home = tmp_path_factory.mktemp("api") / "home"
    mp = pytest.MonkeyPatch()
    mp.setenv("CBENCH_HOME", str(home))
    for var in ("HF_HUB_OFFLINE", "CBENCH_ENDPOINT", "CBENCH_HUB"):
        mp.delenv(var, raising=False)
    yield home
    mp.undo()


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy case of tests/_scoring_toy.py as a model artifact directory (case toy3)."""
    return T.write_toy_artifact(tmp_path_factory.mktemp("toy") / "toy").path


@pytest.fixture(scope="module")
def toy_hub(home, toy, tmp_path_factory):
    """A hub directory holding the toy case as cbench/toy3 v1.0.0."""
    from cbench.hub.publishing import publish

    hub = tmp_path_factory.mktemp("toy_hub") / "hub"
    publish(toy, "cbench/toy3", "model", "v1.0.0", hub=hub)
    return hub


@pytest.mark.slow  # ~12 s of CPU: publishing validates the artifact (9 s), olah serves the pull (3 s)
def test_four_calls_on_a_local_hub(toy_hub, home, capsys, tmp_path):
    """pull through the hub protocol into a fresh cache, discover, score and evaluate; the
    numbers are the command's."""
    pulled = cbench.pull("cbench/toy3", hub=toy_hub)
    found = cbench.discover(pulled, "eap", sampled=True, n_examples=16)
    scored = cbench.score(pulled, found, sampled=True, n_examples=16)
    evaluated = cbench.evaluate(found, sampled=True, n_examples=16)

    assert isinstance(pulled, cbench.PullResult) and (pulled.repo_id, pulled.revision, pulled.case) == \
        ("cbench/toy3", "v1.0.0", "toy3")
    assert re.fullmatch(r"[0-9a-f]{40}", pulled.commit) and pulled.path.is_relative_to(home / "cache")
    assert not pulled.from_cache and cbench.pull("cbench/toy3", hub=toy_hub).from_cache
    assert isinstance(found, cbench.DiscoveryResult) and (found.case, found.method, found.metric) == ("toy3", "eap", "ce")
    assert found.model == {"repo": "cbench/toy3", "revision": "v1.0.0", "kind": "tracr"}
    truth = set(T.toy_circuit_edges(found.graph))
    assert len(found.edge_scores) == found.graph.n_edges == 46 and set(found.circuit) <= truth
    assert {name for name, _ in found.top(len(truth))} == truth  # the toy's circuit ranks first
    assert isinstance(scored, cbench.ScoreResult) and (scored.edge_auroc, scored.edge_auroc_promoted) == (1.0, 1.0)
    assert scored.n_true_edges == len(truth) and scored.edge_precision == 1.0
    assert isinstance(evaluated, cbench.EvaluationResult) and evaluated.auroc.edge_auroc == 1.0
    assert evaluated.construction == "top-n" and evaluated.n_examples == 16
    with pytest.raises(dataclasses.FrozenInstanceError):
        scored.edge_auroc = 0.5

    path = found.write(tmp_path / "scores.json")
    args = ["--sampled", "--n-examples", "16", "--json"]
    assert _cli_json(capsys, ["score", str(pulled.path), str(path), *args])["results"]["edge_auroc"] == 1.0
    doc = _cli_json(capsys, ["evaluate", str(path), "--case", str(pulled.path), *args])["results"]["faithfulness"]
    assert (doc["cpr"], doc["cmd"]) == (pytest.approx(evaluated.cpr, rel=1e-9), pytest.approx(evaluated.cmd, rel=1e-9))
    checked = cbench.validate(path, case=pulled.path)
    assert checked.valid and checked.files[0].kind == "edge-scores" and checked.violations == {}


def test_register_method_runs_beside_the_built_in_ones(toy, tmp_path):
    """The walk-through of docs/new-method.md, run as written, then benched with eap."""
    method, _usage = _doc_blocks()
    assert len(method.strip().splitlines()) < 30
    pulled = toy  # a model artifact directory: no hub needed
    scope: dict = {}
    try:
        exec(compile(method, "docs/new-method.md", "exec"), scope)  # noqa: S102 - the doc, run as written
        found = cbench.discover(pulled, "mask-ig", params={"steps": 3}, sampled=True, n_examples=16)
        assert found.method == "mask-ig" and found.hyperparameters["steps"] == 3 and found.metric == "ce"
        assert cbench.score(pulled, found, sampled=True, n_examples=16).edge_auroc == 1.0
        run = cbench.bench([str(pulled)], ["eap", "mask-ig"], out=tmp_path / "b", sampled=True, n_examples=16)
        assert run.auroc == {"toy3": {"eap": 1.0, "mask-ig": 1.0}} and "mask-ig" in run.table
        with pytest.raises(CbenchError, match="already registered"):
            cbench.register_method("mask-ig", scope["mask_ig"])
        with pytest.raises(CbenchError, match="built-in method"):
            cbench.register_method("eap", scope["mask_ig"])
    finally:
        cbench.unregister_method("mask-ig")
    with pytest.raises(CbenchError, match="unknown method 'mask-ig'"):
        cbench.discover(pulled, "mask-ig")


@pytest.mark.slow
def test_new_method_walk_through_on_released_cases(home, tmp_path, monkeypatch):
    """docs/new-method.md's two Python blocks, exactly as written, on case-3 and case-4."""
    monkeypatch.chdir(tmp_path)
    scope: dict = {}
    try:
        for block in _doc_blocks():
            exec(compile(block, "docs/new-method.md", "exec"), scope)  # noqa: S102 - the doc, run as written
    finally:
        cbench.unregister_method("mask-ig")
    assert scope["scored"].edge_auroc > 0.5 and set(scope["run"].auroc) == {"3", "4"}


@pytest.mark.slow
def test_four_calls_on_a_released_case(home):
    """The same four calls on the released case-3 from the per-user hub (seeded from the zoo)."""
    pulled = cbench.pull("case-3")
    found = cbench.discover("case-3", "eap", n_examples=100)
    scored = cbench.score("case-3", found)
    evaluated = cbench.evaluate(found, n_examples=100)
    assert pulled.repo_id == "cbench/case-3" and pulled.case == "3" and re.fullmatch(r"v\d+\.\d+\.\d+", pulled.revision)
    assert pulled.path.is_relative_to(home / "cache") and (pulled.path / "config.json").is_file()
    assert (found.case, found.method, found.metric) == ("3", "eap", "mae") and found.data["n_examples"] == 100
    assert found.model == {"repo": "cbench/case-3", "revision": pulled.revision, "kind": "siit"}
    assert 0.9 <= scored.edge_auroc <= 1.0 and scored.document["results"]["edge_auroc"] == scored.edge_auroc
    assert evaluated.auroc.edge_auroc == scored.edge_auroc and evaluated.n_examples == 100
    assert evaluated.cpr is not None and evaluated.cmd is not None


def _doc_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "new-method.md").read_text(), re.DOTALL)


def _cli_json(capsys, args) -> dict:
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    got = capsys.readouterr()
    assert code == 0, got.err
    return json.loads(got.out)


def test_bad_input_is_one_cbench_error(toy):
    pulled = toy
    with pytest.raises(CbenchError, match=r"unknown method 'eapp' \(did you mean: eap"):
        cbench.discover(pulled, "eapp")
    with pytest.raises(CbenchError, match="edge scores are a DiscoveryResult"):
        cbench.score(pulled, 42)
    with pytest.raises(CbenchError, match="a case is a case name"):
        cbench.discover(3.5, "eap")
    with pytest.raises(CbenchError, match="give at least one FILE"):
        cbench.validate()


def test_help_shows_the_api_and_import_stays_light():
    import pydoc

    text = pydoc.render_doc(cbench, renderer=pydoc.plaintext)
    for name in API:
        assert re.search(rf"^    {name}\(", text, re.MULTILINE), name
        assert name in cbench.__all__ and callable(getattr(cbench, name)) and getattr(cbench, name).__doc__
    code = "import sys, cbench; print(sorted(m for m in ('torch', 'transformer_lens', 'datasets') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_reference_documents_every_call_and_result():
    import cbench.api

    text = (ROOT / "docs" / "python-api.md").read_text()
    missing = [name for name in cbench.api.__all__ if f"cbench.{name}(" not in text and f"`{name}`" not in text
               and f"**`{name}`**" not in text]
    assert missing == []


def test_the_old_module_path_does_not_hide_the_function():
    import importlib
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = importlib.import_module("cbench.pull")
    assert module.__name__ == "cbench.hub.pull" and callable(cbench.pull) and cbench.pull.__module__ == "cbench.api.fetching"
