"""The JSON Schemas: every valid example passes, every invalid one fails where it should."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from cbench import schemas as validation
from cbench.errors import SchemaError, UsageError
from cbench.schemas import SCHEMA_KINDS, Violation, check, kind_of, load_schema, read_json, validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "schemas"
EXAMPLES = SCHEMAS / "examples"


def _examples(prefix: str):
    return sorted(EXAMPLES.glob(f"*/{prefix}-*.json"))


VALID = _examples("valid")
INVALID = _examples("invalid")


def _id(p: Path) -> str:
    return f"{p.parent.name}/{p.stem}"


def test_every_kind_has_a_schema_and_examples():
    files = {p.name for p in SCHEMAS.glob("*.schema.json")}
    assert files == {f"{k}.schema.json" for k in SCHEMA_KINDS} | {"defs.schema.json"}
    for kind in SCHEMA_KINDS:
        assert len(list((EXAMPLES / kind).glob("valid-*.json"))) >= 1, kind
        assert len(list((EXAMPLES / kind).glob("invalid-*.json"))) >= 2, kind


@pytest.mark.parametrize("kind", SCHEMA_KINDS)
def test_schema_is_valid_draft_2020_12_with_id_and_schema_const(kind):
    schema = load_schema(kind)
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://cbench.dev/schemas/{kind}/v1"
    assert schema["properties"]["schema"] == {"const": f"cbench/{kind}/v1", "description": "names this document's kind and version"}
    assert "schema" in schema["required"]
    # the package data is the top-level schemas/ directory, not a copy
    assert schema == json.loads((SCHEMAS / f"{kind}.schema.json").read_text())


def test_defs_schema_is_valid():
    Draft202012Validator.check_schema(json.loads((SCHEMAS / "defs.schema.json").read_text()))


def test_load_schema_accepts_schema_ids_and_returns_a_copy():
    a = load_schema("cbench/circuit/v1")
    a["title"] = "changed"
    assert load_schema("circuit")["title"] != "changed"
    with pytest.raises(UsageError, match="did you mean: circuit"):
        load_schema("circuti")


@pytest.mark.parametrize("path", VALID, ids=_id)
def test_valid_examples_pass(path):
    doc = read_json(path)
    assert validate(doc) == []
    assert kind_of(doc) == path.parent.name
    assert check(doc) == path.parent.name
    assert validate(doc, path.parent.name) == []


@pytest.mark.parametrize("path", INVALID, ids=_id)
def test_invalid_examples_fail(path):
    try:
        doc = read_json(path)
    except SchemaError as exc:  # e.g. NaN: not JSON at all
        assert "NaN" in str(exc)
        return
    violations = validate(doc, path.parent.name)
    assert violations, path
    for v in violations:
        assert isinstance(v, Violation) and v.path.startswith("$") and v.message
        assert "Traceback" not in v.message
    with pytest.raises(SchemaError):
        check(doc, path.parent.name)


# (example, expected violation path, words in the message)
EXPECTED = [
    ("case/invalid-unknown-task-type", "$.task_type", "'categorical', 'numerical'"),
    ("case/invalid-missing-vocab", "$", "missing required field 'vocab'"),
    ("case/invalid-label-position-bos", "$.label_positions[0]", "at least 1"),
    ("case/invalid-min-above-max-seq-len", "$.min_seq_len", "larger than max_seq_len"),
    ("model-meta/invalid-iia-not-a-fraction", "$.metrics.iia", "at most 1"),
    ("model-meta/invalid-sha256-not-hex", "$.files['model.safetensors']", "sha256"),
    ("model-meta/invalid-numerical-with-output-classes", "$.output_classes", "null"),
    ("model-meta/invalid-unknown-model-kind", "$.model_kind", "'tracr', 'siit', 'iit'"),
    ("model-meta/invalid-file-path-escapes", "$.files['../secrets']", "relative POSIX path"),
    ("circuit/invalid-head-edge-without-qkv", "$.edges[1]", "<q>, <k> or <v>"),
    ("circuit/invalid-duplicate-edge", "$.edges", "duplicate item 'input->m0' (at [0] and [3])"),
    ("circuit/invalid-unknown-granularity", "$.granularity", "'neuron'"),
    ("circuit/invalid-node-name", "$.nodes[2]", "'L1H0' is not a node name"),
    ("circuit/invalid-graph-missing-has-mlp", "$.graph", "'has_mlp'"),
    ("circuit/invalid-edge-signal-not-boolean", "$.edge_signal['input->a1.h0<q>'].signal", "true or false"),
    ("circuit/invalid-edge-signal-not-an-edge-of-the-circuit", "$.edge_signal['m0->logits']",
     "not one of the circuit's edges"),
    ("correspondence/invalid-empty-low-level", "$.nodes[1].low_level", "must not be empty"),
    ("correspondence/invalid-negative-head", "$.nodes[1].low_level[0].head", "at least 0"),
    ("correspondence/invalid-misspelled-schema", "$.schema", "did you mean: correspondence"),
    ("benchmark-index/invalid-version-not-semver", "$.version", "'v1.0.0'"),
    ("benchmark-index/invalid-revision-not-a-commit", "$.cases[0].versions[0].revision", "commit sha"),
    ("benchmark-index/invalid-case-listed-twice", "$.cases[1].case", "listed twice"),
    ("benchmark-index/invalid-created-not-a-timestamp", "$.created", "RFC 3339"),
    ("edge-scores/invalid-score-is-a-string", "$.edges['a0.h0->m1'].score", "must be a number, not a string"),
    ("edge-scores/invalid-edge-name-without-qkv", "$.edges['a0.h0->a1.h0']", "is not an edge name"),
    ("edge-scores/invalid-cfg-missing-d-model", "$.cfg", "'d_model'"),
    ("edge-scores/invalid-edge-missing-in-graph", "$.edges['input->m0']", "'in_graph'"),
    ("circuits-at-sizes/invalid-fraction-off-grid", "$.circuits[3].fraction", "0.03"),
    ("circuits-at-sizes/invalid-bad-edge-name", "$.circuits[4].edges[0]", "'a1.h0-->logits' is not an edge name"),
    ("circuits-at-sizes/invalid-fraction-twice", "$.circuits[9].fraction", "appears twice"),
    ("circuits-at-sizes/invalid-missing-model", "$", "'model'"),
    ("results/invalid-unknown-kind", "$.kind", "'roc'"),
    ("results/invalid-no-case", "$", "'case' or 'cases'"),
    ("results/invalid-created-not-rfc3339", "$.created", "RFC 3339"),
    ("results/invalid-results-not-an-object", "$.results", "must be an object, not an array"),
    # FIND (issue 22)
    ("find-submission/invalid-missing-code", "$.entries[0]", "missing required field 'code'"),
    ("find-submission/invalid-interval-reversed", "$.entries[0].interval", "above upper bound"),
    ("find-submission/invalid-interval-on-string-function", "$.entries[0].interval", "no corrupted interval"),
    ("find-submission/invalid-bad-id", "$.entries[0].id", "FIND function id"),
    ("find-results/invalid-rate-above-one", "$.summary.numeric.success_rate", "at most 1"),
    ("find-results/invalid-row-without-reason", "$.functions[1]", "'reason'"),
    ("find-results/invalid-sandbox-without-boundary", "$.sandbox", "missing required field 'boundary'"),
    # causal-variable track (issue 19)
    ("results/invalid-localization-unknown-featurizer", "$.results.featurizer", "'sae'"),
    ("results/invalid-localization-iia-above-one", "$.results.locations[0].iia", "at most 1"),
    ("results/invalid-bench-discrimination-unknown-tier", "$.results.discrimination.gold", "'main', 'appendix-h'"),
]


@pytest.mark.parametrize("name,path,words", EXPECTED, ids=[e[0] for e in EXPECTED])
def test_invalid_example_reports_path_and_reason(name, path, words):
    doc = read_json(EXAMPLES / f"{name}.json")
    violations = validate(doc)
    assert [v.path for v in violations] == [path], violations
    assert words in violations[0].message, violations[0].message


def test_every_invalid_example_has_an_expected_path_except_nan():
    named = {e[0] for e in EXPECTED}
    rest = {_id(p) for p in INVALID} - named
    assert rest == {"edge-scores/invalid-score-nan"}


def test_nan_example_refused_when_read():
    with pytest.raises(SchemaError, match="NaN is not allowed"):
        read_json(EXAMPLES / "edge-scores" / "invalid-score-nan.json")


# ---------------------------------------------------------------------------- the API
def _circuit():
    return read_json(EXAMPLES / "circuit" / "valid-case3-qkv.json")


def test_kind_of_and_unknown_kinds():
    assert kind_of(_circuit()) == "circuit"
    with pytest.raises(SchemaError, match="no 'schema' field"):
        kind_of({"case": "3"})
    with pytest.raises(SchemaError, match="did you mean: circuit"):
        kind_of({"schema": "cbench/circut/v1"})
    with pytest.raises(SchemaError, match="does not know"):
        kind_of({"schema": "cbench/circuit/v2"})
    with pytest.raises(SchemaError, match="JSON object"):
        kind_of([1, 2])
    assert validate({"case": "3"}) == [Violation("$", validate({"case": "3"})[0].message)]
    assert validate({"schema": "cbench/nope/v1"})[0].path == "$.schema"
    with pytest.raises(UsageError):
        validate(_circuit(), "nope")


def test_explicit_kind_overrides_and_reports_schema_mismatch():
    v = validate(_circuit(), "edge-scores")
    paths = [x.path for x in v]
    assert "$.schema" in paths
    msg = next(x.message for x in v if x.path == "$.schema")
    assert "cbench/edge-scores/v1" in msg


def test_check_raises_with_every_violation_listed():
    doc = _circuit()
    doc["granularity"] = "neuron"
    doc["nodes"].append(7)
    with pytest.raises(SchemaError) as info:
        check(doc, source="c.json")
    err = info.value
    assert str(err).startswith("c.json: circuit document is not valid: 2 violations")
    assert "$.granularity: must be one of 'qkv', 'head'; got 'neuron'" in err.violations
    assert "$.nodes[4]: must be a string, not an integer (7)" in err.violations


def test_in_memory_documents_nan_tuples_and_non_json_values():
    doc = _circuit()
    doc["edges"] = tuple(doc["edges"])  # json.dump writes tuples as arrays
    assert validate(doc) == []
    es = read_json(EXAMPLES / "edge-scores" / "valid-case3-eap-ig.json")
    es["edges"]["a0.h0->m1"]["score"] = float("nan")
    es["edges"]["m1->logits"]["score"] = float("-inf")
    v = validate(es)
    assert [x.path for x in v] == ["$.edges['a0.h0->m1'].score", "$.edges['m1->logits'].score"]
    assert "not a finite number" in v[0].message
    es = read_json(EXAMPLES / "edge-scores" / "valid-case3-eap-ig.json")
    es["method"]["hyperparameters"]["seen"] = {1, 2}
    es["method"]["hyperparameters"][3] = "x"
    v = validate(es)
    assert {x.path for x in v} == {"$.method.hyperparameters.seen", "$.method.hyperparameters"}


def test_deep_nesting_is_one_violation_not_a_crash():
    doc = _circuit()
    deep: list = []
    cur = deep
    for _ in range(5000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt
    doc["high_level"]["extra"] = deep
    v = validate(doc)
    assert len(v) == 1 and "levels deep" in v[0].message
    assert v[0].path.startswith("$.high_level.extra[0][0]")


def test_unknown_fields_where_closed_and_open_where_later_issues_add():
    doc = _circuit()
    doc["graph"]["n_layer"] = 2
    doc["provenance"] = {"built_by": "cbench build tracr"}  # top level is open
    v = validate(doc)
    assert [x.path for x in v] == ["$.graph.n_layer"]
    assert "unknown field" in v[0].message and "n_layers" in v[0].message


def test_patterns_follow_ecma_semantics():
    doc = _circuit()
    doc["edges"][0] = "input->m0\n"  # Python's $ would accept this
    assert [x.path for x in validate(doc)] == ["$.edges[0]"]
    doc = _circuit()
    doc["nodes"][1] = "m\u0663"  # ARABIC-INDIC DIGIT THREE: \d in Python, not in JSON Schema
    assert [x.path for x in validate(doc)] == ["$.nodes[1]"]
    doc = _circuit()
    doc["nodes"][1] = "m01"  # no leading zeros
    assert [x.path for x in validate(doc)] == ["$.nodes[1]"]


def test_case_prefix_refused_in_case_ids():
    doc = _circuit()
    doc["case"] = "case-3"
    v = validate(doc)
    assert [x.path for x in v] == ["$.case"] and "without the 'case-' prefix" in v[0].message


def test_paths_quote_odd_keys():
    assert validation.format_path(["edges", "a0.h0->m1", "score"]) == "$.edges['a0.h0->m1'].score"
    assert validation.format_path(["a", 0, "it's", "new\nline"]) == "$.a[0]['it\\'s']['new\\nline']"


def test_validators_are_cached():
    assert validation._validator("circuit") is validation._validator("circuit")


def test_meta_json_cannot_list_itself():
    meta = read_json(EXAMPLES / "model-meta" / "valid-case3-siit.json")
    meta["files"]["meta.json"] = "0" * 64
    v = validate(meta)
    assert [x.path for x in v] == ["$.files['meta.json']"]
    meta = read_json(EXAMPLES / "model-meta" / "valid-case3-siit.json")
    del meta["files"]["model.safetensors"]
    v = validate(meta)
    assert [(x.path, x.message) for x in v] == [("$.files", "missing required field 'model.safetensors'")]


def test_categorical_meta_needs_output_classes_and_bos_in_tokens():
    meta = read_json(EXAMPLES / "model-meta" / "valid-case3-tracr.json")
    meta["task_type"] = "categorical"
    meta["bos_token"] = "<s>"
    v = validate(meta)
    assert [x.path for x in v] == ["$.output_classes", "$.bos_token"]
    assert "must be an array, not null" in v[0].message


def test_size_grid_matches_schema():
    defs = json.loads((SCHEMAS / "defs.schema.json").read_text())["$defs"]
    assert tuple(float(x) for x in defs["sizeFraction"]["enum"]) == validation.SIZE_GRID
    assert all(math.isclose(a, b) for a, b in zip(validation.SIZE_GRID, (.001, .002, .005, .01, .02, .05, .1, .2, .5, 1)))
