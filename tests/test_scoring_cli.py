"""The scoring commands end to end on a toy model artifact: score, evaluate, test-circuit,
adversarial, bench; and their bad-input messages (one line, non-zero exit, no traceback)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import _scoring_toy as T
from cbench import schemas as validation
from hub_helpers import run_in_process


run = run_in_process  # cbench ARGV in this process: (exit code, stdout, stderr)


@pytest.fixture(scope="module")
def art(tmp_path_factory):
    root = tmp_path_factory.mktemp("scoring_cli")
    artifact = T.write_toy_artifact(root / "toy")
    g = artifact.graph
    mask = np.array([e.name in set(T.toy_circuit_edges(g)) for e in g.edges])
    scores = mask * 1.0 + 0.01 * np.arange(g.n_edges) / g.n_edges  # perfect ranking
    doc = T.edge_scores_doc(g, scores, case="toy3", in_graph=mask)
    (root / "scores.json").write_text(json.dumps(doc))
    return root, artifact


def test_score_table_results_and_plot(art, capsys):
    root, _ = art
    out, png = root / "r.json", root / "roc.png"
    code, stdout, err = run(capsys, "score", str(root / "toy"), str(root / "scores.json"), "--out", str(out),
                            "--plot", str(png), "--sampled")
    assert code == 0, err
    assert "edge AUROC: 1.0000" in stdout and "node AUROC: 1.0000" in stdout
    doc = json.loads(out.read_text())
    assert validation.validate(doc) == [] and doc["kind"] == "auroc" and doc["case"] == "toy3"
    assert doc["results"]["edge_auroc"] == 1.0 and doc["results"]["edge_precision_recall"]["recall"] == 1.0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evaluate(art, capsys):
    root, _ = art
    out = root / "ev.json"
    code, stdout, err = run(capsys, "evaluate", str(root / "scores.json"), "--case", str(root / "toy"), "--sampled",
                            "--n-examples", "20", "--out", str(out))
    assert code == 0, err
    assert "edge AUROC: 1.0000" in stdout and "CPR:" in stdout and "CMD:" in stdout
    doc = json.loads(out.read_text())
    assert validation.validate(doc) == [] and doc["kind"] == "evaluation"
    curve = doc["results"]["faithfulness"]["cmd_curve"]
    assert curve["f"][-1] == pytest.approx(1.0) and curve["f"][-2] == pytest.approx(1.0, abs=1e-5)


def test_evaluate_circuits_at_sizes(art, capsys):
    root, artifact = art
    truth = T.toy_circuit_edges(artifact.graph)
    doc = {"schema": "cbench/circuits-at-sizes/v1", "case": "toy3",
           "model": {"repo": None, "revision": None, "kind": "tracr"}, "method": {"name": "hand", "hyperparameters": {}},
           "selection": "absolute",
           "circuits": [{"fraction": 0.5, "edges": truth}, {"fraction": 1.0, "edges": list(artifact.graph.edge_names)},
                        {"fraction": 0.1, "edges": truth[:4]}]}
    (root / "cas.json").write_text(json.dumps(doc))
    out = root / "cas_r.json"
    code, stdout, err = run(capsys, "evaluate", str(root / "cas.json"), "--case", str(root / "toy"), "--sampled",
                            "--n-examples", "20", "--out", str(out))
    assert code == 0, err
    assert "CMD:" in stdout and "CPR:" not in stdout
    res = json.loads(out.read_text())["results"]["faithfulness"]
    assert res["curve"]["grid"] == [0.1, 0.5, 1.0]
    assert res["curve"]["f"][1] == pytest.approx(1.0, abs=1e-5)
    # (0.5 - 0.1) * (1 - f(0.1)) / 2 + 0 is the whole distance
    assert res["cmd"] == pytest.approx(0.4 * (1 - res["curve"]["f"][0]) / 2, abs=1e-6)


def test_test_circuit_and_adversarial(art, capsys):
    root, _ = art
    out = root / "ht.json"
    code, stdout, err = run(capsys, "test-circuit", str(root / "toy"), "truth", "--test", "equivalence",
                            "--test", "independence", "--test", "minimality", "--n-reference", "50",
                            "--n-permutations", "100", "--sampled", "--n-examples", "40", "--out", str(out))
    assert code == 0, err
    for name in ("equivalence", "independence", "minimality"):
        assert f"{name}: pass" in stdout
    doc = json.loads(out.read_text())
    assert validation.validate(doc) == [] and doc["results"]["tests"]["minimality"]["sizes"]["n_reference"] == 50
    out = root / "adv.json"
    code, stdout, err = run(capsys, "adversarial", str(root / "toy"), str(root / "scores.json"), "--sampled",
                            "--n-examples", "12", "--k", "2", "--out", str(out))
    assert code == 0, err
    assert "over 144 pairs" in stdout and "sample size:" in stdout
    doc = json.loads(out.read_text())
    assert validation.validate(doc) == [] and len(doc["results"]["worst"]) == 2


def test_test_circuit_exits_1_when_a_test_fails(art, capsys):
    # issue 14: test-circuit used to exit 0 whatever the tests decided
    root, artifact = art
    (root / "one_edge.json").write_text(json.dumps(T.toy_circuit_edges(artifact.graph)[:1]))
    out = root / "ht_fail.json"
    code, stdout, err = run(capsys, "test-circuit", str(root / "toy"), str(root / "one_edge.json"),
                            "--test", "equivalence", "--sampled", "--n-examples", "40", "--out", str(out))
    assert code == 1, (stdout, err)
    assert "equivalence: fail" in stdout and "failed: equivalence" in stdout
    assert json.loads(out.read_text())["results"]["tests"]["equivalence"]["decision"] == "fail"  # still written


def test_bench_is_resumable(art, capsys):
    root, artifact = art
    out = root / "bench"
    code, stdout, err = run(capsys, "bench", "--cases", str(root / "toy"), "--methods", "eap,random",
                            "--out", str(out), "--sampled", "--n-examples", "20")
    assert code == 0, err
    assert (out / "scores" / "toy3" / "eap.json").is_file()
    doc = json.loads((out / "results.json").read_text())
    assert validation.validate(doc) == [] and doc["results"]["auroc"]["toy3"]["eap"] == pytest.approx(1.0)
    assert "| toy3 |" in (out / "table.md").read_text()
    assert (out / "auroc_boxplot.png").is_file() and (out / "roc_toy3.png").is_file()
    # both AUROC kinds: cbench's rank AUROC and MIB's greedy-pruned one (scoring/mib_protocol.py)
    from cbench.scoring.mib_protocol import mib_auroc

    eap = json.loads((out / "scores" / "toy3" / "eap.json").read_text())
    eap_scores = np.array([eap["edges"][e.name]["score"] for e in artifact.graph.edges])
    truth = T.toy_circuit_edges(artifact.graph)
    assert doc["results"]["auroc_mib"]["toy3"]["eap"] == pytest.approx(mib_auroc(artifact.graph, eap_scores, truth).auroc)
    assert 0.2 < doc["results"]["auroc_mib"]["toy3"]["random"] < 0.8
    tier = next(iter(doc["results"]["auroc_by_tier"].values()))
    assert tier["eap"]["rank"] == doc["results"]["auroc"]["toy3"]["eap"] and tier["eap"]["n"] == 1
    assert "greedy-pruned AUROC" in (out / "table.md").read_text()
    stamp = (out / "scores" / "toy3" / "eap.json").stat().st_mtime_ns
    code, _, err = run(capsys, "bench", "--cases", str(root / "toy"), "--methods", "eap,random",
                       "--out", str(out), "--sampled", "--n-examples", "20")
    assert code == 0, err
    assert (out / "scores" / "toy3" / "eap.json").stat().st_mtime_ns == stamp  # not run again


def test_bench_seeds_the_random_baseline_per_case(art, capsys):
    from cbench.scoring.bench import bench_hyperparameters

    assert bench_hyperparameters("acdc", "3") == {}
    seeds = {bench_hyperparameters("random", c)["seed"] for c in ("3", "20", "33", "36")}
    assert len(seeds) == 4 and bench_hyperparameters("random", "3") == bench_hyperparameters("random", "3")
    root, _ = art
    out = root / "bench-random"
    code, _, err = run(capsys, "bench", "--cases", str(root / "toy"), "--methods", "random", "--out", str(out),
                       "--sampled", "--n-examples", "20")
    assert code == 0, err
    doc = json.loads((out / "scores" / "toy3" / "random.json").read_text())
    assert doc["method"]["hyperparameters"]["seed"] == bench_hyperparameters("random", "toy3")["seed"]


def test_bench_has_an_oracle_row_and_a_random_row_at_chance(art, capsys):
    # issue 14: the table's oracle (exact activation patching) and random (mean over 10,000 draws)
    from cbench.scoring.bench import random_aurocs

    root, artifact = art
    out = root / "bench-calibration"
    code, _, err = run(capsys, "bench", "--cases", str(root / "toy"), "--methods", "activation-patching,random",
                       "--out", str(out), "--sampled", "--n-examples", "20")
    assert code == 0, err
    res = json.loads((out / "results.json").read_text())["results"]
    assert res["granularity"] == "qkv" and res["auroc"]["toy3"]["activation-patching"] == 1.0
    assert res["calibration"]["activation-patching"]["mean"] == 1.0
    seed = json.loads((out / "scores" / "toy3" / "random.json").read_text())["method"]["hyperparameters"]["seed"]
    marks = res["no_signal_edges"]["toy3"]["edges"]
    want = random_aurocs(artifact.graph, T.toy_circuit_edges(artifact.graph), seed, no_signal=marks).mean(0)
    assert res["auroc"]["toy3"]["random"] == pytest.approx(want[0]) and abs(want[0] - 0.5) < 0.02
    assert res["auroc_promoted"]["toy3"]["random"] == pytest.approx(want[1])
    table = (out / "table.md").read_text()
    assert "| oracle (activation-patching) | 1.000 |" in table and "| random (10000 seeds) |" in table
    assert "promoted to heads (InterpBench-compatible" in table



def test_bench_never_reuses_scores_of_another_version_of_the_model(art, capsys, tmp_path):
    # a resumed bench reused case 21's scores from the model version before it (same graph and
    # data): the table showed the old model's AUROC. Scores now name the weights they came from.
    root, artifact = art
    out = tmp_path / "bench"
    args = ["bench", "--methods", "eap", "--out", str(out), "--sampled", "--n-examples", "20"]
    code, _, err = run(capsys, *args, "--cases", str(root / "toy"))
    assert code == 0, err
    doc = json.loads((out / "scores" / "toy3" / "eap.json").read_text())
    assert doc["model_sha256"] == artifact.meta["files"]["model.safetensors"]
    assert doc["model"]["repo"] is None and validation.validate(doc) == []
    other = T.write_toy_artifact(tmp_path / "toy-v2", seed=1)  # the same case, other weights
    assert other.meta["files"]["model.safetensors"] != doc["model_sha256"]
    code, _, err = run(capsys, *args, "--cases", str(tmp_path / "toy-v2"))
    assert code == 0, err
    redone = json.loads((out / "scores" / "toy3" / "eap.json").read_text())
    assert redone["model_sha256"] == other.meta["files"]["model.safetensors"]
    assert redone["edges"] != doc["edges"]


def test_bench_resumes_a_killed_run_and_redoes_only_missing_or_stale_pairs(art, capsys, tmp_path):
    root, _ = art
    out = tmp_path / "bench"
    args = ["bench", "--cases", str(root / "toy"), "--methods", "eap,random,activation-patching", "--out", str(out),
            "--sampled", "--n-examples", "20"]
    code, _, err = run(capsys, *args)
    assert code == 0, err
    first = json.loads((out / "results.json").read_text())["results"]
    scores = out / "scores" / "toy3"
    stamps = {m: (scores / f"{m}.json").stat().st_mtime_ns for m in ("eap", "random", "activation-patching")}
    # as a run killed while writing activation-patching would leave it: eap and random done, no third file
    (scores / "activation-patching.json").unlink()
    # a file made another way (another seed) is stale, one cut short is invalid: both are run again
    doc = json.loads((scores / "random.json").read_text())
    doc["method"]["hyperparameters"]["seed"] = 5
    (scores / "random.json").write_text(json.dumps(doc))
    (out / "results.json").unlink()
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert (scores / "eap.json").stat().st_mtime_ns == stamps["eap"]  # kept
    from cbench.scoring.bench import bench_hyperparameters

    redone = json.loads((scores / "random.json").read_text())["method"]["hyperparameters"]["seed"]
    assert redone == bench_hyperparameters("random", "toy3")["seed"] != 5  # redone
    assert (scores / "activation-patching.json").is_file()
    again = json.loads((out / "results.json").read_text())["results"]
    assert again["auroc"] == first["auroc"] and again["node_auroc"] == first["node_auroc"]
    assert set(again["method_runtime_s"]["toy3"]) == {"eap", "random", "activation-patching"}
    assert again["model_kind"] == {"toy3": "tracr"}
    table = (out / "table.md").read_text()
    assert "| toy3 | tracr-case-toy3 |" in table and "Method runtime per case" in table
    # a half-written file (not possible with the atomic writes, but a copy can be cut short) is redone
    (scores / "eap.json").write_text((scores / "eap.json").read_text()[:100])
    code, _, err = run(capsys, *args)
    assert code == 0, err
    assert json.loads((out / "results.json").read_text())["results"]["auroc"] == first["auroc"]
    # another number of pairs is another run: nothing is reused
    stamp = (scores / "random.json").stat().st_mtime_ns
    code, _, err = run(capsys, *args[:-1], "12")
    assert code == 0, err
    assert json.loads((scores / "eap.json").read_text())["data"]["n_examples"] == 12
    assert (scores / "random.json").stat().st_mtime_ns != stamp
    # other sampled pairs (another --seed) are another run too
    stamp = (scores / "eap.json").stat().st_mtime_ns
    code, _, err = run(capsys, *args[:-1], "12", "--seed", "3")
    assert code == 0, err
    assert json.loads((scores / "eap.json").read_text())["data"]["seed"] == 3
    assert (scores / "eap.json").stat().st_mtime_ns != stamp


def _one_line_error(code, err, *needles):
    assert code not in (0, None)
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], lines[0]


def test_bad_input_one_line_each(art, capsys, tmp_path):
    root, _ = art
    doc = json.loads((root / "scores.json").read_text())
    other = dict(doc, case="33")
    (tmp_path / "other.json").write_text(json.dumps(other))
    _one_line_error(*run(capsys, "score", str(root / "toy"), str(tmp_path / "other.json"))[::2],
                    "case '33'", "not case 'toy3'")
    text = (root / "scores.json").read_text().replace('"score": 1.0', '"score": NaN', 1)
    (tmp_path / "nan.json").write_text(text)
    _one_line_error(*run(capsys, "score", str(root / "toy"), str(tmp_path / "nan.json"))[::2], "NaN")
    (tmp_path / "bad.json").write_text(json.dumps(["input->logits", "a7.h0->logits"]))
    _one_line_error(*run(capsys, "test-circuit", str(root / "toy"), str(tmp_path / "bad.json"),
                         "--test", "equivalence", "--sampled")[::2], "a7.h0->logits", "not in the model's graph")
    (tmp_path / "empty.json").write_text("[]")
    _one_line_error(*run(capsys, "test-circuit", str(root / "toy"), str(tmp_path / "empty.json"),
                         "--test", "equivalence", "--sampled")[::2], "empty")
    _one_line_error(*run(capsys, "adversarial", str(root / "toy"), str(tmp_path / "empty.json"), "--sampled")[::2],
                    "empty")


def test_bench_case_sets_name_the_released_models():
    from cbench.errors import UsageError
    from cbench.scoring.bench import MAIN_CASES, _parse_cases, released_siit_cases

    released = released_siit_cases()
    assert set(MAIN_CASES) <= set(released) and released == sorted(released, key=int)
    assert _parse_cases("main") == list(MAIN_CASES)
    assert _parse_cases("all") == released
    assert _parse_cases("main,3,99") == list(MAIN_CASES) + ["99"]  # no duplicates, ids kept
    extra = [c for c in released if c not in MAIN_CASES]
    if extra:
        assert _parse_cases("appendix-h") == extra
    else:
        with pytest.raises(UsageError, match="no SIIT model of an appendix-H case"):
            _parse_cases("appendix-h")
    with pytest.raises(UsageError, match="empty"):
        _parse_cases(" , ")


def test_bench_scores_name_the_hub_snapshot_they_came_from(tmp_path):
    # a pulled model's scores say which repository and commit (the inverse of repo_folder_name)
    from cbench.hub.cache import repo_folder_name, snapshot_of_path
    from cbench.hub.repos import RepoRef

    folder = repo_folder_name(RepoRef("cbench/case-3", "model"))
    sha = "a" * 40
    assert snapshot_of_path(tmp_path / folder / "snapshots" / sha) == ("cbench/case-3", sha)
    assert snapshot_of_path(tmp_path / "toy") is None


def test_score_and_evaluate_with_protocol_mib(art, capsys):
    from cbench.scoring.mib_protocol import SIZE_GRID, circuits_at_sizes, mib_auroc

    root, artifact = art
    g = artifact.graph
    doc = json.loads((root / "scores.json").read_text())
    scores = np.array([doc["edges"][e.name]["score"] for e in g.edges])
    out = root / "score_mib.json"
    code, stdout, err = run(capsys, "score", str(root / "toy"), str(root / "scores.json"), "--protocol", "mib",
                            "--include-no-signal", "--out", str(out))
    assert code == 0, err
    want = mib_auroc(g, scores, T.toy_circuit_edges(g)).auroc
    assert json.loads(out.read_text())["results"]["mib"]["auroc"] == pytest.approx(want, abs=1e-12)
    assert "MIB edge AUROC" in stdout
    out = root / "eval_mib.json"
    code, stdout, err = run(capsys, "evaluate", str(root / "scores.json"), "--case", str(root / "toy"),
                            "--protocol", "mib", "--sampled", "--n-examples", "10", "--out", str(out))
    assert code == 0, err
    faith = json.loads(out.read_text())["results"]["faithfulness"]
    assert faith["protocol"] == "mib"
    for curve, absolute in ((faith["cpr_curve"], False), (faith["cmd_curve"], True)):
        assert curve["n_edges"] == [int(m.sum()) for m in circuits_at_sizes(g, scores, SIZE_GRID, absolute=absolute)]
    assert faith["cpr_curve"]["n_edges"][0] == 0  # int(.001 * n) = 0 edges: MIB's empty circuit, not cbench's 1


def test_a_case_name_is_not_shadowed_by_a_folder_of_that_name(tmp_path, monkeypatch):
    """`cbench bench --cases ioi --out ioi` created ./ioi, then took it for the case's artifact
    ("ioi: not a model artifact"); a bare name that names a folder without meta.json is the hub's."""
    from cbench.errors import CbenchError
    from cbench.scoring.bench import _resolve

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "3").mkdir()
    (tmp_path / "case-3").mkdir()
    for name in ("3", "case-3"):
        label, art = _resolve(name)
        assert label == "3" and (art.path / "meta.json").is_file() and art.path != tmp_path / name
    with pytest.raises(CbenchError):
        _resolve("./case-3")  # a path is still taken as the directory it names


def test_a_bench_that_scores_nothing_writes_nothing(tmp_path, monkeypatch):
    """`cbench bench --cases 999 --out o/p` exited 1 but left o/p/table.md; now the directories it
    created are taken back and nothing is written."""
    from cbench.errors import CbenchError
    from cbench.scoring.bench import run_bench

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "keep").mkdir()
    with pytest.raises(CbenchError, match="no case could be scored"):
        run_bench("999", "random", "o/p", echo=lambda s: None)
    assert not (tmp_path / "o").exists()
    with pytest.raises(CbenchError, match="no case could be scored"):
        run_bench("999", "random", "keep", echo=lambda s: None)
    assert (tmp_path / "keep").is_dir() and list((tmp_path / "keep").iterdir()) == []  # the user's folder stays
