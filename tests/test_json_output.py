"""``--json`` and ``--out -`` on every command that reports something: standard output then holds
exactly one JSON document (the same one ``--out FILE`` writes), the text goes to standard error,
and no file named ``-`` appears."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import _scoring_toy as T
from cbench import schemas as validation
from cbench.cli import main


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    root = tmp_path_factory.mktemp("json_out")
    artifact = T.write_toy_artifact(root / "toy")
    g = artifact.graph
    mask = np.array([e.name in set(T.toy_circuit_edges(g)) for e in g.edges])
    doc = T.edge_scores_doc(g, mask * 1.0 + 0.01 * np.arange(g.n_edges) / g.n_edges, case="toy3", in_graph=mask)
    (root / "scores.json").write_text(json.dumps(doc))
    return root


# command -> (arguments after the command, what the document is, a check of its content)
COMMANDS = {
    "score": (["{toy}", "{scores}", "--sampled", "--n-examples", "12"], "results",
              lambda d: d["kind"] == "auroc" and d["results"]["edge_auroc"] == 1.0),
    "evaluate": (["{scores}", "--case", "{toy}", "--sampled", "--n-examples", "12"], "results",
                 lambda d: d["kind"] == "evaluation" and "cpr" in d["results"]["faithfulness"]),
    "test-circuit": (["{toy}", "truth", "--test", "equivalence", "--sampled", "--n-examples", "20"], "results",
                     lambda d: d["results"]["tests"]["equivalence"]["decision"] == "pass"),
    "adversarial": (["{toy}", "{scores}", "--sampled", "--n-examples", "8", "--k", "1"], "results",
                    lambda d: d["kind"] == "adversarial" and len(d["results"]["worst"]) == 1),
    "discover": (["{toy}", "--method", "eap", "--sampled", "--n-examples", "8", "-q"], "edge-scores",
                 lambda d: d["method"]["name"] == "eap" and d["case"] == "toy3"),
}


def _run(capsys, args):
    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code
    got = capsys.readouterr()
    return code, got.out, got.err


def _args(toy, template):
    return [a.format(toy=toy / "toy", scores=toy / "scores.json") for a in template]


@pytest.mark.parametrize("mode", ["--json", "--out -"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_machine_readable_output(toy, capsys, command, mode, monkeypatch):
    monkeypatch.chdir(toy)
    template, kind, check = COMMANDS[command]
    code, out, err = _run(capsys, [command, *_args(toy, template), *mode.split()])
    assert code == 0, err
    doc = json.loads(out)  # stdout is one JSON document and nothing else
    assert validation.validate(doc, kind) == [] and check(doc), doc
    assert err.strip()  # the lines for people went to stderr
    assert not (toy / "-").exists()


@pytest.mark.parametrize("command", ["score", "discover"])
def test_out_file_and_json_together_write_the_same_document(toy, capsys, command, tmp_path):
    template, kind, _ = COMMANDS[command]
    code, out, err = _run(capsys, [command, *_args(toy, template), "--json", "--out", str(tmp_path / "r.json")])
    assert code == 0, err
    printed, written = json.loads(out), json.loads((tmp_path / "r.json").read_text())
    printed.pop("runtime_s", None), written.pop("runtime_s", None)
    assert printed == written


def test_text_mode_is_unchanged(toy, capsys):
    code, out, err = _run(capsys, ["score", *_args(toy, COMMANDS["score"][0])])
    assert code == 0 and "edge AUROC: 1.0000" in out and not out.lstrip().startswith("{")


def test_failed_circuit_test_still_prints_its_document_and_exits_1(toy, capsys):
    (toy / "one.json").write_text(json.dumps(_first_edge(toy)))
    code, out, err = _run(capsys, ["test-circuit", str(toy / "toy"), str(toy / "one.json"), "--test", "equivalence",
                                   "--sampled", "--n-examples", "20", "--json"])
    assert code == 1 and "failed: equivalence" in err
    assert json.loads(out)["results"]["tests"]["equivalence"]["decision"] == "fail"


def _first_edge(toy):
    from cbench.artifacts.model import read_model_artifact

    return T.toy_circuit_edges(read_model_artifact(toy / "toy").graph)[:1]


def test_bench_json(toy, capsys, tmp_path):
    code, out, err = _run(capsys, ["bench", "--cases", str(toy / "toy"), "--methods", "random", "--out",
                                   str(tmp_path / "b"), "--sampled", "--n-examples", "8", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc == json.loads((tmp_path / "b" / "results.json").read_text())
    assert "random" in doc["results"]["auroc"]["toy3"] and "| toy3 |" in err


def test_export_out_dash(toy, capsys):
    code, out, err = _run(capsys, ["export", str(toy / "scores.json"), "--format", "mib", "--out", "-"])
    assert code == 0, err
    graph = json.loads(out)
    assert set(graph) >= {"cfg", "nodes", "edges"} and "standard output" in err


def test_dash_is_refused_where_standard_output_makes_no_sense(toy, capsys, monkeypatch):
    monkeypatch.chdir(toy)
    code, out, err = _run(capsys, ["score", *_args(toy, COMMANDS["score"][0]), "--plot", "-"])
    assert code == 2 and "--plot" in err and "standard output" in err
    assert not os.path.exists(toy / "-")


# ----------------------------------------------------------------------------- every command
#: commands whose answer is not one result, with the reason
NO_JSON = {
    "hub serve": "a server: it runs until stopped",
    "export": "its output is another tool's JSON: --out - prints it",
    "find baseline": "prints JSON Lines (the submission) on standard output already",
}


def _commands():
    """(name, click command) of every command and subcommand of the client (the builders'
    `cbench build` comes from another package and is left out)."""
    import click
    from cbench.cli import cli

    ctx = click.Context(cli, info_name="cbench")

    def walk(group, prefix):
        for name in group.list_commands(ctx):
            cmd = group.get_command(ctx, name)
            if prefix == "" and name == "build":
                continue
            if isinstance(cmd, click.Group):
                yield from walk(cmd, f"{prefix}{name} ")
            else:
                yield f"{prefix}{name}", cmd

    return list(walk(cli, ""))


def test_every_command_that_prints_a_result_takes_json():
    commands = dict(_commands())
    assert {"demo", "submit", "report", "publish", "pull", "verify", "validate", "find list"} <= set(commands)
    lacking = sorted(name for name, cmd in commands.items()
                     if name not in NO_JSON and not any("--json" in p.opts for p in cmd.params))
    assert lacking == []
    assert set(NO_JSON) <= set(commands)  # the exceptions are still commands


def test_bare_cbench_prints_the_help_and_exits_0(capsys):
    code, out, err = _run(capsys, [])
    assert code == 0 and out.startswith("Usage: cbench") and "Commands:" in out and err == ""


def test_report_and_submit_json(toy, capsys, tmp_path):
    import _report_toy as R

    code, out, err = _run(capsys, R.bench_args(str(toy / "toy"), tmp_path / "bench", methods="random"))
    assert code == 0, err
    code, out, err = _run(capsys, ["report", str(tmp_path / "bench"), "--html", str(tmp_path / "site"), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["index"] == str((tmp_path / "site" / "index.html").resolve()) and os.path.isfile(doc["index"])
    code, out, err = _run(capsys, ["submit", str(toy / "scores.json"), "--report", str(tmp_path / "site"),
                                   "--name", "mine", "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["name"], doc["case"], doc["edge_auroc"]) == ("mine", "toy3", 1.0) and os.path.isfile(doc["kept"])
    assert "mine" in (tmp_path / "site" / "index.html").read_text()
