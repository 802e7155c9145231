"""`cbench validate`: the real command line, exit codes, --json, --case, bad files, fuzzing."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from cbench.cli.validate_cmd import render_json, render_text, run_validate
from cbench.errors import UsageError
from cbench.graph.graph import Graph
from cbench.schemas import (SCHEMA_KINDS, FileReport, check_against_graph, read_json, validate,
                               validate_file)

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "schemas" / "examples"
VALID = sorted(EXAMPLES.glob("*/valid-*.json"))
INVALID = sorted(EXAMPLES.glob("*/invalid-*.json"))


def cbench(*args, cwd=None):
    """Run the real CLI in a subprocess (``python -m cbench.cli``)."""
    proc = subprocess.run([sys.executable, "-m", "cbench.cli", "validate", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, timeout=120)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout, proc.stderr
    return proc


@pytest.fixture()
def case3(tmp_path):
    """A model artifact directory as far as --case needs: config.json (and meta.json's case)."""
    d = tmp_path / "case-3"
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"n_layers": 2, "n_heads": 1, "d_model": 12, "d_head": 12,
                                               "attn_only": False, "dtype": "float32", "act_fn": "relu"}))
    (d / "meta.json").write_text(json.dumps({"schema": "cbench/model-meta/v1", "case": "3"}))
    return d


def _scores():
    return read_json(EXAMPLES / "edge-scores" / "valid-case3-eap-ig.json")


# ---------------------------------------------------------------------------- real CLI
def test_valid_examples_ok_exit_0():
    proc = cbench(*VALID)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for path in VALID:
        assert f"{path}: OK ({path.parent.name})" in lines
    assert lines[-1] == f"{len(VALID)} files: {len(VALID)} valid, 0 invalid"
    assert proc.stderr == ""


def test_invalid_examples_exit_1_with_paths():
    proc = cbench(*INVALID)
    assert proc.returncode == 1
    out = proc.stdout
    for path in INVALID:
        assert str(path) in out
    assert "  $.edges['a0.h0->m1'].score: must be a number, not a string ('high')" in out
    assert "  $.circuits[3].fraction: must be one of 0.001" in out
    assert out.splitlines()[-1] == f"{len(INVALID)} files: 0 valid, {len(INVALID)} invalid"


def test_cbench_entry_point_and_python_m_agree():
    exe = Path(sys.executable).parent / "cbench"
    if not exe.exists():
        pytest.skip("no cbench script next to this python")
    path = EXAMPLES / "circuit" / "valid-case3-qkv.json"
    proc = subprocess.run([str(exe), "validate", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"{path}: OK (circuit)\n"


def test_json_report(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    good = EXAMPLES / "results" / "valid-auroc-case3.json"
    wrong = EXAMPLES / "results" / "invalid-unknown-kind.json"
    proc = cbench("--json", good, wrong, bad)
    assert proc.returncode == 1
    report = json.loads(proc.stdout)
    assert report["valid"] is False
    files = report["files"]
    assert [f["path"] for f in files] == [str(good), str(wrong), str(bad)]
    assert files[0] == {"path": str(good), "kind": "results", "valid": True, "violations": []}
    assert files[1]["kind"] == "results" and files[1]["valid"] is False
    assert files[1]["violations"][0]["path"] == "$.kind"
    assert "'roc'" in files[1]["violations"][0]["message"]
    assert files[2]["kind"] is None and files[2]["valid"] is False
    assert files[2]["violations"][0]["message"].startswith("not JSON: ")
    ok = cbench("--json", good)
    assert ok.returncode == 0 and json.loads(ok.stdout)["valid"] is True


def test_schema_option_overrides_the_file(tmp_path):
    path = EXAMPLES / "circuit" / "valid-case3-qkv.json"
    proc = cbench("--schema", "edge-scores", path)
    assert proc.returncode == 1
    assert "$.schema: must be 'cbench/edge-scores/v1'" in proc.stdout
    no_field = tmp_path / "noschema.json"
    doc = read_json(path)
    del doc["schema"]
    no_field.write_text(json.dumps(doc))
    proc = cbench(no_field)
    assert proc.returncode == 1 and "no 'schema' field" in proc.stdout
    proc = cbench("--schema", "circuit", no_field)
    assert proc.returncode == 1 and "$: missing required field 'schema'" in proc.stdout


def test_case_checks_bad_edge_name_and_non_finite_score(case3, tmp_path):
    doc = _scores()
    doc["edges"]["a5.h0->m1"] = {"score": 0.1, "in_graph": False}
    bad_name = tmp_path / "bad-name.json"
    bad_name.write_text(json.dumps(doc))
    text = json.dumps(_scores(), indent=1)
    inf = tmp_path / "inf.json"
    inf.write_text(text.replace('"score": ', '"score": Infinity, "x": ', 1))
    huge = tmp_path / "huge.json"
    huge.write_text(text.replace('"score": ', '"score": 1e999, "x": ', 1))
    good = EXAMPLES / "edge-scores" / "valid-case3-eap-ig.json"
    proc = cbench("--case", case3, good, bad_name, inf, huge)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert f"{good}: OK (edge-scores)" in lines
    assert f"{bad_name}: 1 violation (edge-scores)" in lines
    assert any(line.startswith("  $.edges['a5.h0->m1']: edge 'a5.h0->m1' is not in the model's graph") for line in lines)
    assert f"{inf}: error: not a usable JSON document: Infinity is not allowed (JSON has no NaN or Infinity; write a number or null)" in lines
    assert any(line.startswith(f"{huge}: error: ") and "1e999" in line for line in lines)
    # without --case the unknown edge is well-formed, so only the schema speaks
    assert cbench(bad_name).returncode == 0


def test_case_checks_other_case_cfg_and_missing_edges(case3, tmp_path):
    doc = _scores()
    doc["case"] = "4"
    doc["cfg"]["n_heads"] = 2
    del doc["edges"]["input->a0.h0<q>"]
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    proc = cbench("--case", case3 / "config.json", path)  # a config.json path works too
    assert proc.returncode == 1
    assert "  $.case: this file is for case '4' but the model is case '3'" in proc.stdout
    assert "  $.cfg.n_heads: is 2 but the model has n_heads = 1" in proc.stdout
    assert "1 of the graph's 23 edges have no score (e.g. 'input->a0.h0<q>')" in proc.stdout


def test_case_checks_circuits(case3, tmp_path):
    circuit = read_json(EXAMPLES / "circuit" / "valid-case3-qkv.json")
    circuit["edges"].append("a0.h0->a1.h0<q>")  # exists in the graph, but a0.h0 is not in nodes
    p = tmp_path / "c.json"
    p.write_text(json.dumps(circuit))
    sizes = read_json(EXAMPLES / "circuits-at-sizes" / "valid-case3-grid.json")
    sizes["circuits"][0]["edges"] = ["input->m0", "m0->a1.h0<v>"]  # ceil(0.001 x 23) = 1
    q = tmp_path / "sizes.json"
    q.write_text(json.dumps(sizes))
    proc = cbench("--case", case3, p, q, EXAMPLES / "circuits-at-sizes" / "valid-case3-grid.json")
    assert proc.returncode == 1
    assert "  $.edges[3]: edge 'a0.h0->a1.h0<q>' uses node 'a0.h0', which is not in $.nodes" in proc.stdout
    assert ("  $.circuits[0].edges: 2 edges is more than a circuit of size 0.001 may have "
            "(ceil(0.001 x 23 edges) = 1)") in proc.stdout


@pytest.mark.parametrize("setup,words", [
    (lambda d: d / "missing", "no such directory"),
    (lambda d: d, "config.json not found"),
])
def test_case_usage_errors_exit_2(tmp_path, setup, words):
    proc = cbench("--case", setup(tmp_path), EXAMPLES / "circuit" / "valid-case3-qkv.json")
    assert proc.returncode == 2 and words in proc.stderr
    assert proc.stderr.count("\n") == 1


def test_case_config_without_shape_exit_2(tmp_path):
    (tmp_path / "config.json").write_text('{"d_model": 12}')
    proc = cbench("--case", tmp_path, EXAMPLES / "circuit" / "valid-case3-qkv.json")
    assert proc.returncode == 2 and "no usable 'n_layers'" in proc.stderr


def test_usage_errors_exit_2():
    assert cbench().returncode == 2
    proc = cbench("--schema", "nope", EXAMPLES / "circuit" / "valid-case3-qkv.json")
    assert proc.returncode == 2 and "'nope' is not one of" in proc.stderr
    assert cbench("--bogus-flag", "x.json").returncode == 2


def test_bad_files_one_line_each(tmp_path):
    files = {}
    files["notjson"] = tmp_path / "notjson.json"
    files["notjson"].write_text("schema: cbench/circuit/v1\n")
    files["empty"] = tmp_path / "empty.json"
    files["empty"].write_text("")
    files["blank"] = tmp_path / "blank.json"
    files["blank"].write_text("  \n\t\n")
    files["binary"] = tmp_path / "binary.json"
    files["binary"].write_bytes(bytes(range(256)) * 4)
    files["latin1"] = tmp_path / "latin1.json"
    files["latin1"].write_bytes('{"schema": "caf\xe9"}'.encode("latin-1"))
    files["unknown"] = tmp_path / "unknown.json"
    files["unknown"].write_text('{"schema": "cbench/widget/v1"}')
    files["array"] = tmp_path / "array.json"
    files["array"].write_text("[1, 2, 3]")
    files["dupkey"] = tmp_path / "dupkey.json"
    files["dupkey"].write_text('{"schema": "cbench/circuit/v1", "case": "3", "case": "4"}')
    files["deep"] = tmp_path / "deep.json"
    files["deep"].write_text("[" * 100000 + "]" * 100000)
    files["big"] = tmp_path / "big.json"
    with open(files["big"], "wb") as fh:  # sparse: 100 MB on paper, nothing written
        fh.truncate(100 * 1024 * 1024)
    files["missing"] = tmp_path / "missing.json"
    files["directory"] = tmp_path / "adir"
    files["directory"].mkdir()
    expected = {
        "notjson": "not JSON: Expecting value at line 1 column 1",
        "empty": "empty file, not JSON",
        "blank": "empty file, not JSON",
        "binary": "binary file (it contains NUL bytes), not JSON",
        "latin1": "binary file or not UTF-8 text (byte 15), not JSON",
        "unknown": "unknown schema kind 'widget'",
        "array": "a cbench document is a JSON object, not an array",
        "dupkey": "duplicate key 'case' in one object",
        "deep": "nested too deeply",
        "big": "100.0 MB is larger than the 64.0 MB cbench reads for one JSON document; refusing to read it",
        "missing": "no such file",
        "directory": "is a directory, not a JSON file",
    }
    order = list(files)
    proc = cbench(*[files[k] for k in order])
    assert proc.returncode == 1
    assert proc.stderr == ""
    lines = proc.stdout.splitlines()
    assert len(lines) == len(order) + 1  # one line per file and the summary
    for key, line in zip(order, lines):
        assert line.startswith(f"{files[key]}: error: "), line
        assert expected[key] in line, (key, line)
    # a valid file among bad ones is still OK
    both = cbench(files["empty"], EXAMPLES / "case" / "valid-case3.json")
    assert both.returncode == 1 and f"{EXAMPLES / 'case' / 'valid-case3.json'}: OK (case)" in both.stdout


def test_many_violations_are_capped_in_text_but_not_in_json(tmp_path):
    doc = _scores()
    for i in range(70):
        doc["edges"][f"bad-{i}"] = {"score": 0, "in_graph": False}
    p = tmp_path / "many.json"
    p.write_text(json.dumps(doc))
    reports = run_validate([str(p)])
    text, code = render_text(reports)
    assert code == 1 and "... and 20 more (--json lists every one)" in text
    report, code = render_json(reports)
    assert len(json.loads(report)["files"][0]["violations"]) == 70


def test_run_validate_usage_errors():
    with pytest.raises(UsageError):
        run_validate([])
    with pytest.raises(UsageError):
        run_validate(["x.json"], schema="widget")


# ---------------------------------------------------------------------------- fuzzing
json_scalars = (st.none() | st.booleans() | st.integers() | st.integers(min_value=-(10 ** 400), max_value=10 ** 400)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.text(alphabet=st.characters(
                    codec=None, categories=("Cs", "Co", "Cc", "Zl", "Mn", "So")), max_size=8))
json_trees = st.recursive(json_scalars, lambda children: st.lists(children, max_size=5)
                          | st.dictionaries(st.text(max_size=12), children, max_size=5), max_leaves=25)

EXAMPLE_DOCS = [read_json(p) for p in VALID + [p for p in INVALID if "nan" not in p.name]]
KINDS = list(SCHEMA_KINDS) + [None]


def _paths(doc, max_depth=8):
    """Every path into ``doc`` up to ``max_depth`` (iteratively: documents can be very deep)."""
    out, stack = [], [(doc, ())]
    while stack:
        value, prefix = stack.pop()
        out.append(prefix)
        if len(prefix) >= max_depth:
            continue
        if isinstance(value, dict):
            stack.extend((v, prefix + (k,)) for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((v, prefix + (i,)) for i, v in enumerate(value))
    return sorted(out, key=lambda p: (len(p), repr(p)))


def _deep(n):
    out: list = []
    cur = out
    for _ in range(n):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    return out


@st.composite
def mutated_documents(draw):
    doc = copy.deepcopy(draw(st.sampled_from(EXAMPLE_DOCS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = list(_paths(doc))
        path = draw(st.sampled_from(paths))
        op = draw(st.sampled_from(["drop", "replace", "huge", "unicode", "deep", "type", "schema", "dup"]))
        if not path:
            if op == "schema":
                doc["schema"] = draw(st.sampled_from([f"cbench/{k}/v1" for k in SCHEMA_KINDS] + ["cbench/x/v1", 3, None]))
            continue
        parent = doc
        for p in path[:-1]:
            parent = parent[p]
        key = path[-1]
        if op == "drop":
            del parent[key]
        elif op == "replace":
            parent[key] = draw(json_trees)
        elif op == "huge":
            parent[key] = draw(st.sampled_from([10 ** 300, -(10 ** 5000), 1.7e308, -1e-320, 2 ** 63, float("inf")]))
        elif op == "unicode":
            parent[key] = draw(st.text(alphabet=st.characters(codec=None), min_size=1, max_size=20))
        elif op == "deep":
            parent[key] = _deep(draw(st.integers(60, 3000)))
        elif op == "type":
            value = parent[key]
            parent[key] = [value] if not isinstance(value, list) else {"0": value}
        elif op == "schema":
            parent[key] = "cbench/circuit/v1"
        elif op == "dup" and isinstance(parent, list):
            parent.append(parent[key])
    return doc


documents = st.one_of(mutated_documents(), mutated_documents(), json_trees,
                      st.dictionaries(st.text(max_size=10), json_trees, max_size=6))

GRAPH = Graph(2, 1, has_mlp=True)


@example(doc={"schema": "cbench/find-submission/v1", "entries": 10**300}, kind="find-submission")  # found by CI
@example(doc={"schema": "cbench/find-submission/v1", "entries": "abc"}, kind="find-submission")
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, kind=st.sampled_from(KINDS))
def test_fuzz_validate_never_raises(doc, kind):
    violations = validate(doc, kind)
    assert isinstance(violations, list)
    for v in violations:
        assert v.path.startswith("$") and isinstance(v.message, str) and v.message
        str(v).encode("utf-8")  # printable: no lone surrogates leak into messages
    if isinstance(doc, dict) and not violations:
        assert isinstance(check_against_graph(doc, GRAPH), list)
    if isinstance(doc, dict):
        check_against_graph(doc, GRAPH, case="3", d_model=12)


def _dump(doc) -> bytes:
    try:
        return json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")
    except (ValueError, RecursionError, TypeError):
        return b"[" * 5000


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents, noise=st.binary(max_size=64), mode=st.sampled_from(["json", "json", "truncated", "noise"]),
       as_json=st.booleans(), kind=st.sampled_from(KINDS))
def test_fuzz_cli_core_never_raises(doc, noise, mode, as_json, kind):
    data = _dump(doc)
    if mode == "truncated":
        data = data[: max(0, len(data) // 2)]
    elif mode == "noise":
        data = noise + data[:100]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "doc.json")
        with open(path, "wb") as fh:
            fh.write(data)
        graph_dir = os.path.join(tmp, "model")
        os.mkdir(graph_dir)
        with open(os.path.join(graph_dir, "config.json"), "w") as fh:
            json.dump({"n_layers": 2, "n_heads": 1, "d_model": 12}, fh)
        reports = run_validate([path], schema=kind, case_dir=graph_dir)
        assert len(reports) == 1 and isinstance(reports[0], FileReport)
        text, code = (render_json if as_json else render_text)(reports)
        assert code == (0 if reports[0].valid else 1)
        text.encode("utf-8", "backslashreplace")
        if as_json:
            assert json.loads(text)["files"][0]["valid"] is reports[0].valid


def test_fuzz_a_handful_through_the_real_cli(tmp_path):
    import random  # a fixed seed: the same dozen documents every run

    rng = random.Random(1234)
    paths = []
    for i in range(12):
        doc = copy.deepcopy(rng.choice(EXAMPLE_DOCS))
        keys = list(doc)
        victim = rng.choice(keys)
        action = i % 4
        if action == 0:
            del doc[victim]
        elif action == 1:
            doc[victim] = {"\ud800\u202e\x00": [10 ** 400, -0.0, "\U0001F600" * 50]}
        elif action == 2:
            doc[victim] = _deep(200)
        else:
            doc[victim] = rng.choice([None, True, 1e308, "", [], {}])
        p = tmp_path / f"fuzz-{i}.json"
        p.write_bytes(_dump(doc))
        paths.append(p)
    proc = cbench(*paths)
    assert proc.returncode == 1
    assert proc.stderr == ""
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("  ")]
    assert len(lines) == len(paths) + 1
    proc = cbench("--json", *paths)
    assert proc.returncode == 1 and len(json.loads(proc.stdout)["files"]) == len(paths)


# ---------------------------------------------------------------------------- fast path = reference
def _reference_validator(kind):
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    root = ROOT / "schemas"
    resources = [(s["$id"], Resource.from_contents(s)) for s in
                 (json.loads(p.read_text()) for p in root.glob("*.schema.json"))]
    schema = json.loads((root / f"{kind}.schema.json").read_text())
    return Draft202012Validator(schema, registry=Registry().with_resources(resources))


REFERENCE = {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=mutated_documents(), kind=st.sampled_from(SCHEMA_KINDS))
def test_fast_validator_agrees_with_plain_jsonschema(doc, kind):
    """cbench validates against inlined schemas with fast paths for big maps and arrays; a
    plain draft 2020-12 validator on the published schemas must reach the same verdict."""
    from cbench import schemas as validation

    structural, fatal = validation._walk(doc)
    if fatal or structural:
        return
    if kind not in REFERENCE:
        REFERENCE[kind] = _reference_validator(kind)
    assert validation._validator(kind).is_valid(doc) == REFERENCE[kind].is_valid(doc)


def test_gpt2_sized_edge_scores_validate_quickly(tmp_path):
    import time

    g = Graph(12, 12)
    doc = read_json(EXAMPLES / "edge-scores" / "valid-case3-eap-ig.json")
    doc["cfg"] = {"n_layers": 12, "n_heads": 12, "parallel_attn_mlp": False, "d_model": 768}
    doc["nodes"] = {n: {"in_graph": False} for n in g.node_names}
    doc["edges"] = {e: {"score": i / 7, "in_graph": False} for i, e in enumerate(g.edge_names)}
    doc["edges"]["a11.h11->logits"]["score"] = "high"
    path = tmp_path / "gpt2.json"
    path.write_text(json.dumps(doc))
    t = time.perf_counter()
    report = validate_file(path, graph=g)
    elapsed = time.perf_counter() - t
    assert [v.path for v in report.violations] == ["$.edges['a11.h11->logits'].score"]
    assert elapsed < 20  # about 1 s on an idle core; generous for a loaded machine
