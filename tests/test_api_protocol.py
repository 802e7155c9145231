"""The Python API's ``protocol`` argument (docs/python-api.md): ``cbench.discover``,
``cbench.score`` and ``cbench.evaluate`` with ``protocol="mib"`` give the numbers of ``cbench
discover/score/evaluate --protocol mib`` (run in this process) on the toy case: MIB's NAP scores
and its optimal ablation, MIB's greedy-pruned AUROC, pruned int(k*n)-edge CPR/CMD circuits,
neuron-level CPR/CMD of a NAP document, pruned circuits-at-sizes; a bad protocol, or one the
method does not have, is one CbenchError saying what to pass."""

from __future__ import annotations

import json

import _scoring_toy as T
import cbench
import numpy as np
import pytest
from cbench.errors import CbenchError, UsageError
from hub_helpers import run_in_process

DATA = ("--sampled", "--n-examples", "10")
API_DATA = {"sampled": True, "n_examples": 10}


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy case (case toy3, with a ground-truth circuit) and an edge-scores file that ranks it badly."""
    root = tmp_path_factory.mktemp("api_protocol")
    art = T.write_toy_artifact(root / "toy")
    g = art.graph
    (root / "noisy.json").write_text(json.dumps(T.edge_scores_doc(g, np.cos(np.arange(g.n_edges)), case="toy3")))
    return root


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))  # optimal ablation's cache: fresh per test
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def _graph(root):
    from cbench.artifacts.model import read_model_artifact

    return read_model_artifact(root / "toy").graph


def _cli(capsys, *argv) -> str:
    code, out, err = run_in_process(capsys, *argv)
    assert code == 0, err
    return out


def test_discover_with_protocol_mib_is_the_command(toy, capsys, tmp_path):
    for extra, api in ((("--protocol", "mib"), {}), (("--protocol", "mib", "--ablation", "optimal"), {"ablation": "optimal"})):
        path = tmp_path / "nap.json"
        out = _cli(capsys, "discover", str(toy / "toy"), "-m", "nap", *DATA, *extra, "--out", str(path))
        assert out.splitlines()[1].startswith("protocol mib: MIB's code")
        doc = json.loads(path.read_text())
        found = cbench.discover(toy / "toy", "nap", protocol="mib", **api, **API_DATA)
        assert found.hyperparameters["protocol"] == "mib" == doc["method"]["hyperparameters"]["protocol"]
        assert found.hyperparameters.get("ablation") == doc["method"]["hyperparameters"].get("ablation")
        assert found.edge_scores == pytest.approx({e: v["score"] for e, v in doc["edges"].items()}, rel=1e-9, abs=1e-12)
        assert found.document["nodes"] == doc["nodes"] and "neurons_scores" in doc["nodes"]["m0"]
    # the protocol changes NAP's scores (MIB takes the MLP gradient at its input)
    plain = cbench.discover(toy / "toy", "nap", **API_DATA)
    assert plain.edge_scores != pytest.approx(found.edge_scores)


def test_score_and_evaluate_with_protocol_mib_are_the_command(toy, capsys, tmp_path):
    from cbench.scoring.mib_protocol import mib_auroc

    scores = str(toy / "noisy.json")
    cli_score = json.loads(_cli(capsys, "score", str(toy / "toy"), scores, "--protocol", "mib", *DATA, "--json"))
    cli_eval = json.loads(_cli(capsys, "evaluate", scores, "--case", str(toy / "toy"), "--protocol", "mib", *DATA,
                               "--json"))
    scored = cbench.score(toy / "toy", scores, protocol="mib", **API_DATA)
    evaluated = cbench.evaluate(scores, toy / "toy", protocol="mib", **API_DATA)

    g = _graph(toy)
    doc = json.loads((toy / "noisy.json").read_text())
    want = mib_auroc(g, np.array([doc["edges"][e.name]["score"] for e in g.edges]), T.toy_circuit_edges(g)).auroc
    assert 0.0 < want < 1.0 and want != pytest.approx(scored.edge_auroc)  # the two AUROCs differ on these scores
    assert scored.mib_auroc == pytest.approx(want, abs=1e-12) == cli_score["results"]["mib"]["auroc"]
    assert scored.document["results"] == cli_score["results"]
    assert evaluated.protocol == "mib" and evaluated.auroc.mib_auroc == pytest.approx(want, abs=1e-12)
    faith = cli_eval["results"]["faithfulness"]
    assert (faith["protocol"], faith["level"], faith["metric"]) == ("mib", "edge", "kl")
    assert faith["metric_note"].startswith("MIB's code has no metric for this task")
    assert evaluated.cpr == pytest.approx(faith["cpr"], rel=1e-9) and evaluated.cmd == pytest.approx(faith["cmd"], rel=1e-9)
    assert evaluated.document["results"] == cli_eval["results"]  # every figure, AUROCs and curves included
    assert evaluated.document["inputs"] == cli_eval["inputs"]
    # MIB's circuits: int(k*n) edges, pruned; the default protocol's sizes differ
    assert faith["cpr_curve"]["n_edges"][0] == 0
    default = cbench.evaluate(scores, toy / "toy", **API_DATA)
    assert default.protocol == "cbench" and default.auroc.mib_auroc is None
    assert default.document["results"]["faithfulness"]["cpr_curve"]["n_edges"] != faith["cpr_curve"]["n_edges"]


def test_evaluate_a_nap_document_at_mibs_neuron_level_as_the_command_does(toy, capsys, tmp_path):
    found = cbench.discover(toy / "toy", "nap", protocol="mib", **API_DATA)
    path = found.write(tmp_path / "nap.json")
    cli = json.loads(_cli(capsys, "evaluate", str(path), "--case", str(toy / "toy"), "--protocol", "mib", *DATA,
                          "--json"))["results"]["faithfulness"]
    assert cli["level"] == "neuron"
    for submission, case in ((found, None), (path, toy / "toy")):  # the result itself (it names its model), its file
        evaluated = cbench.evaluate(submission, case, protocol="mib", **API_DATA)
        got = evaluated.document["results"]["faithfulness"]
        assert got["level"] == "neuron" and evaluated.construction == "top-n"
        assert evaluated.cpr == pytest.approx(cli["cpr"], rel=1e-9) and evaluated.cmd == pytest.approx(cli["cmd"], rel=1e-9)
        assert got["cpr_curve"]["f"] == pytest.approx(cli["cpr_curve"]["f"], rel=1e-9, abs=1e-12)
        assert got["cmd_curve"]["n_edges"] == cli["cmd_curve"]["n_edges"]  # sizes counted in neurons
    assert cbench.evaluate(found, **API_DATA).document["results"]["faithfulness"]["level"] == "edge"


def test_evaluate_circuits_at_sizes_with_protocol_mib_as_the_command_does(toy, capsys, tmp_path):
    g = _graph(toy)
    truth = T.toy_circuit_edges(g)
    doc = {"schema": "cbench/circuits-at-sizes/v1", "case": "toy3",
           "model": {"repo": None, "revision": None, "kind": "tracr"}, "method": {"name": "hand", "hyperparameters": {}},
           "selection": "signed",
           "circuits": [{"fraction": 0.1, "edges": truth[:4] + ["a1.h0->logits"]}, {"fraction": 0.5, "edges": truth},
                        {"fraction": 1.0, "edges": list(g.edge_names)}]}
    path = tmp_path / "cas.json"
    path.write_text(json.dumps(doc))
    cli = json.loads(_cli(capsys, "evaluate", str(path), "--case", str(toy / "toy"), "--protocol", "mib", *DATA,
                          "--json"))["results"]["faithfulness"]
    evaluated = cbench.evaluate(doc, toy / "toy", protocol="mib", **API_DATA)
    assert evaluated.kind == "circuits-at-sizes" and evaluated.cmd is None
    assert evaluated.cpr == pytest.approx(cli["cpr"], rel=1e-9)
    assert evaluated.document["results"]["faithfulness"] == cli
    plain = cbench.evaluate(doc, toy / "toy", **API_DATA).document["results"]["faithfulness"]
    assert "metric_note" not in plain and cli["metric_note"].startswith("MIB's code has no metric")


def test_a_bad_protocol_is_one_cbench_error_before_anything_loads(toy, capsys):
    say = r"protocol must be cbench \(the papers' procedures\) or mib \(MIB's reference code's; docs/mib-parity.md\), got "
    nowhere = toy / "no-such-case"
    with pytest.raises(UsageError, match=say + "'MIB'"):
        cbench.evaluate(toy / "noisy.json", nowhere, protocol="MIB")
    with pytest.raises(UsageError, match=say + "None"):
        cbench.discover(nowhere, "nap", protocol=None)
    with pytest.raises(UsageError, match=say + "'interpbench'"):
        cbench.score(nowhere, toy / "noisy.json", protocol="interpbench")
    assert issubclass(UsageError, CbenchError)
    with pytest.raises(CbenchError, match=r"^eap runs the same under MIB's code; protocol='mib' applies to: "
                                          r"nap, nap-ig, ifr, ugs$"):
        cbench.discover(nowhere, "eap", protocol="mib")
    with pytest.raises(CbenchError, match=r"^protocol='mib' and params\['protocol'\]='cbench' disagree$"):
        cbench.discover(nowhere, "nap", protocol="mib", params={"protocol": "cbench"})
    with pytest.raises(CbenchError, match=r"^random ablates nothing, so it takes no ablation$"):
        cbench.discover(nowhere, "random", ablation="optimal")
    # the command: click's usage error for the value; its own option names in the shared step's messages
    code, _out, err = run_in_process(capsys, "discover", str(nowhere), "-m", "nap", "--protocol", "MIB")
    assert code == 2 and "'MIB' is not one of 'cbench', 'mib'" in err
    code, _out, err = run_in_process(capsys, "discover", str(nowhere), "-m", "eap", "--protocol", "mib")
    assert code == 2 and err == "error: eap runs the same under MIB's code; --protocol mib applies to: nap, nap-ig, ifr, ugs\n"


def test_discover_takes_the_commands_default_number_of_pairs(toy, capsys, tmp_path):
    """Without n_examples the API runs on as many pairs as `cbench discover` (activation patching:
    500; EAP: all of them), and scores the edges alike."""
    path = tmp_path / "ap.json"
    _cli(capsys, "discover", str(toy / "toy"), "-m", "activation-patching", "--sampled", "--out", str(path))
    doc = json.loads(path.read_text())
    found = cbench.discover(toy / "toy", "activation-patching", sampled=True)
    assert found.data["n_examples"] == 500
    assert found.edge_scores == pytest.approx({e: v["score"] for e, v in doc["edges"].items()}, rel=1e-9, abs=1e-12)
    out = _cli(capsys, "discover", str(toy / "toy"), "-m", "eap", "--sampled", "--out", str(tmp_path / "eap.json"))
    n_eap = cbench.discover(toy / "toy", "eap", sampled=True).data["n_examples"]
    assert n_eap != 500 and f" {n_eap} examples" in out
