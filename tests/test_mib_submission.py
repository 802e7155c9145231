"""A MIB circuit-track leaderboard submission from cbench scores: `cbench export --format
mib-submission` writes `<task>_<model>/importances.json` for runs on MIB's models (graphs of
their published shapes: GPT-2 small, Qwen-2.5-0.5B, Gemma-2-2B; Llama-3.1-8B in the slow suite),
`cbench submit DIR` reads the directory back; every score survives the round trip, and a broken
submission is one line naming what is wrong."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import run_main  # noqa: E402

from cbench.artifacts.mib_submission import LEADERBOARD, MIB_MODELS, graph_names, read_submission  # noqa: E402


def _scores_document(model: str, seed: int) -> dict:
    """A cbench edge-scores document of a run on MIB's ``model`` (as `discover --model` writes
    one: every edge of the graph scored), with seeded scores."""
    from cbench.artifacts.mib_format import from_mib
    from cbench.artifacts.mib_submission import mib_graph

    rng = random.Random(seed)
    nodes, edges = graph_names(model)
    shape = MIB_MODELS[model]
    mib = {"cfg": {"n_layers": shape["n_layers"], "n_heads": shape["n_heads"], "parallel_attn_mlp": False,
                   "d_model": shape["d_model"]},
           "nodes": {n: {"in_graph": True} for n in nodes},
           "edges": {e: {"score": rng.gauss(0, 1) if rng.random() < 0.9 else 0.0, "in_graph": False} for e in edges}}
    doc = from_mib(mib, mib_graph(model), "ioi", {"repo": None, "revision": None, "kind": "pretrained"},
                   method="eap-ig-inputs", split="train", n_examples=100)
    return doc


@pytest.fixture(scope="module")
def submission(tmp_path_factory):
    """Two task/model folders exported through the CLI from two runs' scores (Qwen-2.5's and
    Llama-3.1's larger graphs: the slow suite)."""
    root = tmp_path_factory.mktemp("mib")
    out = root / "eap-ig"
    docs = {}
    for task, model, seed in (("ioi", "gpt2", 1), ("mcqa", "gemma2", 2)):
        doc = docs[(task, model)] = _scores_document(model, seed)
        path = root / f"{task}-{model}.json"
        path.write_text(json.dumps(doc))
        res = run_main(["export", str(path), "--format", "mib-submission", "--task", task, "--mib-model", model,
                        "--out", str(out)])
        assert res.code == 0 and res.exception is None, res.stderr
    return out, docs


def test_export_writes_mibs_folders_and_every_score_round_trips(submission):
    out, docs = submission
    assert sorted(p.name for p in out.iterdir()) == ["ioi_gpt2", "mcqa_gemma2"]
    assert all((out / f / "importances.json").is_file() and len(list((out / f).iterdir())) == 1
               for f in ("ioi_gpt2", "mcqa_gemma2"))
    raw = json.loads((out / "ioi_gpt2" / "importances.json").read_text())
    assert set(raw) == {"cfg", "nodes", "edges"} and raw["cfg"]["n_heads"] == 12
    assert "a11.h11->logits" in raw["edges"] and "a0.h3->a1.h0<k>" in raw["edges"]
    entries = {e.folder: e for e in read_submission(out)}
    assert {k: v.n_edges for k, v in entries.items()} == {"ioi_gpt2": 32491, "mcqa_gemma2": 74218}
    for (task, model), doc in docs.items():
        back = entries[f"{task}_{model}"].document["edges"]
        assert set(back) == set(doc["edges"])
        assert all(back[k]["score"] == doc["edges"][k]["score"] for k in doc["edges"])


def test_submit_reads_the_directory_back(submission):
    out, _ = submission
    res = run_main(["submit", str(out), "--json"])
    assert res.code == 0 and res.exception is None, res.stderr
    report = json.loads(res.stdout)
    assert [f["folder"] for f in report["folders"]] == ["ioi_gpt2", "mcqa_gemma2"]
    assert report["folders"][0]["edges"] == 32491 and 0 < report["folders"][0]["scored_edges"] < 32491
    assert run_main(["submit", str(out), "--report", str(out / "site")]).code == 2  # a directory is checked alone


def _broken_copy(submission, tmp_path, change) -> Path:
    import shutil

    out, _ = submission
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    change(copy)
    return copy


@pytest.mark.parametrize("change, message", [
    (lambda d: (d / "ioi_gpt2").rename(d / "ioi_gpt3"), "'ioi_gpt3' is not a task/model pair MIB scores"),
    (lambda d: (d / "mcqa_gemma2" / "importances.json").unlink(), "mcqa_gemma2: no importances.json"),
    (lambda d: (d / "notes.txt").write_text("hi"), "notes.txt is a file beside the task/model folders"),
    (lambda d: (d / "ioi_gpt2" / "importances.json").write_text(
        (d / "ioi_gpt2" / "importances.json").read_text().replace('"a0.h3->a1.h0<k>"', '"a0.h3->a1.h12<k>"')),
     "a0.h3->a1.h12<k>"),
    (lambda d: (d / "ioi_gpt2").rename(d / "mcqa_qwen2.5"), "n_layers is 12 but qwen2.5"),
    (lambda d: __import__("shutil").rmtree(d / "mcqa_gemma2"), "at least 2 models and 2 tasks"),
])
def test_a_broken_submission_is_one_line(submission, tmp_path, change, message):
    """Exit 1, as `cbench validate` on an invalid file, and one line naming the problem."""
    broken = _broken_copy(submission, tmp_path, change)
    res = run_main(["submit", str(broken)])
    assert res.code == 1 and res.exception is None
    assert len(res.error_lines()) == 1 and message in res.stderr, res.stderr


def test_export_refuses_scores_of_another_model_and_pairs_mib_does_not_score(submission, tmp_path):
    path = tmp_path / "gpt2.json"
    path.write_text(json.dumps(_scores_document("gpt2", 4)))
    for args, message in ((["--task", "ioi", "--mib-model", "llama3"], "n_layers is 12 but llama3"),
                          (["--task", "arithmetic-addition", "--mib-model", "gpt2"], "does not score"),
                          (["--task", "ioi"], "needs --task and --mib-model"),
                          (["--task", "ioi", "--mib-model", "gpt5"], "MIB's models are")):
        res = run_main(["export", str(path), "--format", "mib-submission", *args, "--out", str(tmp_path / "s")])
        assert res.code == 2 and len(res.error_lines()) == 1 and message in res.stderr, (args, res.stderr)
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_qwen_folder_round_trips_through_the_cli(tmp_path):
    doc = _scores_document("qwen2.5", 3)
    (tmp_path / "q.json").write_text(json.dumps(doc))
    assert run_main(["export", str(tmp_path / "q.json"), "--format", "mib-submission", "--task", "ioi",
                     "--mib-model", "qwen2.5", "--out", str(tmp_path / "s")]).code == 0
    (entry,) = read_submission(tmp_path / "s", require_coverage=False)
    assert entry.folder == "ioi_qwen2.5" and entry.n_edges == 179749
    assert all(entry.document["edges"][k]["score"] == v["score"] for k, v in doc["edges"].items())


@pytest.mark.slow
def test_llama3_folder_round_trips_by_name(tmp_path):
    """Llama-3.1-8B's graph (1.6 M edges) is over cbench's Graph size: its folder is checked by
    enumerated names, and still round-trips."""
    from cbench.artifacts.mib_submission import _check_against_graph, folder_name

    nodes, edges = graph_names("llama3")
    shape = MIB_MODELS["llama3"]
    doc = {"cfg": {"n_layers": 32, "n_heads": 32, "parallel_attn_mlp": False, "d_model": shape["d_model"]},
           "nodes": {n: {"in_graph": True} for n in nodes},
           "edges": {e: {"score": float(i % 7) - 3.0, "in_graph": False} for i, e in enumerate(edges)}}
    back = _check_against_graph(doc, "llama3", "llama3")
    assert len(back["edges"]) == 1592881 and back["edges"][edges[10]]["score"] == doc["edges"][edges[10]]["score"]
    assert folder_name("arc_challenge", "llama3") == "arc-challenge_llama3"


@pytest.mark.parametrize("model, n_layers, n_heads, n_kv_heads", [
    ("gpt2", 12, 12, 12), ("qwen2.5", 24, 14, 2), ("gemma2", 26, 8, 4), ("llama3", 32, 32, 8)])
def test_node_names_follow_each_models_published_config(model, n_layers, n_heads, n_kv_heads):
    """One node per query head (grouped-query models' shared key/value heads are not nodes: each
    query head has its own q, k and v inputs), one MLP node per layer, input and logits; the edge
    count is MIB's for that shape."""
    from cbench.artifacts.mib_submission import folder_name

    shape = MIB_MODELS[model]
    assert (shape["n_layers"], shape["n_heads"], shape["n_kv_heads"]) == (n_layers, n_heads, n_kv_heads)
    nodes, edges = graph_names(model)
    assert nodes[0] == "input" and nodes[-1] == "logits"
    assert [n for n in nodes if n.startswith("m")] == [f"m{i}" for i in range(n_layers)]
    assert sum(n.startswith("a") for n in nodes) == n_layers * n_heads
    assert f"a{n_layers - 1}.h{n_heads - 1}" in nodes and f"a0.h{n_heads}" not in nodes
    # every node upstream of a layer feeds each head's q, k, v and the layer's MLP; all feed logits
    upstream = [1 + layer * (n_heads + 1) for layer in range(n_layers)]
    assert len(edges) == sum(u * 3 * n_heads + u + n_heads for u in upstream) + len(nodes) - 1
    assert f"a0.h{n_heads - 1}->a1.h0<v>" in edges and f"m{n_layers - 1}->logits" in edges
    tasks = ("ioi", "mcqa", "arithmetic_addition", "arithmetic_subtraction", "arc_easy", "arc_challenge")
    scored = [t for t in tasks if f"{t.replace('_', '-')}_{model}" in LEADERBOARD]
    assert scored and [folder_name(t, model) for t in scored] == [f"{t.replace('_', '-')}_{model}" for t in scored]
