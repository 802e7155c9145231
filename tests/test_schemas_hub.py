"""Issue 47: the schemas as a hub repository (``cbench/schemas``), and plain ``jsonschema`` agreeing
with ``cbench validate`` on every shipped example but the rules docs/formats.md lists."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

import cbench.schemas as S
from cbench.hub.repos import RepoRef
from cbench.hub.server import HubServer
from cbench_builders.release.schemas import ONLY_CBENCH_VALIDATE, write_examples

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "schemas"
EXAMPLES = ROOT / "schemas" / "examples"
DOCUMENTED = {v.removesuffix(".json") for v in ONLY_CBENCH_VALIDATE.values() if v}


def _newest() -> Path:
    return max(RELEASE.iterdir(), key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))


def test_the_released_repository_holds_the_schemas_the_client_ships(tmp_path):
    rel = _newest()
    for kind in S.SCHEMA_KINDS:
        assert (rel / f"{kind}.schema.json").read_bytes() == (ROOT / "schemas" / f"{kind}.schema.json").read_bytes(), kind
        assert json.loads((rel / "bundled" / f"{kind}.schema.json").read_text()) == S.bundled_schema(kind), kind
    assert (rel / "defs.schema.json").read_bytes() == (ROOT / "schemas" / "defs.schema.json").read_bytes()
    write_examples(EXAMPLES, tmp_path / "examples.jsonl")
    assert (rel / "data" / "examples.jsonl").read_bytes() == (tmp_path / "examples.jsonl").read_bytes()
    card = (rel / "README.md").read_text()
    assert "hf_hub_download(\"cbench/schemas\", \"bundled/edge-scores.schema.json\"" in card
    assert all(rule in card for rule in ONLY_CBENCH_VALIDATE)
    formats = (ROOT / "docs" / "formats.md").read_text()
    assert all(rule in formats for rule in ONLY_CBENCH_VALIDATE)  # the docs list the same rules


def _plain(doc, kind: str) -> bool:
    return not list(jsonschema.Draft202012Validator(S.bundled_schema(kind)).iter_errors(doc))


def _cbench(doc, kind: str) -> bool:
    return not S.validate(doc, kind)


def test_plain_jsonschema_agrees_with_cbench_validate_on_every_example_but_the_documented_rules():
    disagree = set()
    n = 0
    for f in sorted(EXAMPLES.rglob("*.json")):
        kind = f.relative_to(EXAMPLES).parts[0]
        doc = json.loads(f.read_text())  # Python's json, as a plain user's: NaN reads as a float
        n += 1
        assert _cbench(doc, kind) == f.name.startswith("valid"), f
        if _plain(doc, kind) != _cbench(doc, kind):
            disagree.add(f"{kind}/{f.stem}")
    assert n >= 60 and disagree == DOCUMENTED


def test_the_five_cases_of_the_issue():
    doc = json.loads((EXAMPLES / "edge-scores" / "valid-submission.json").read_text())
    edge = next(iter(doc["edges"]))
    # a case id and an edge key ending in a newline: Python's `$` matched before it; now both refuse
    for bad in (dict(doc, case=doc["case"] + "\n"),
                dict(doc, edges={**doc["edges"], edge + "\n": doc["edges"][edge]})):
        assert not _plain(bad, "edge-scores") and not _cbench(bad, "edge-scores")
    # NaN and Infinity: only cbench refuses them (documented)
    for value in (float("nan"), float("inf")):
        bad = dict(doc, edges={**doc["edges"], edge: dict(doc["edges"][edge], score=value)})
        assert _plain(bad, "edge-scores") and not _cbench(bad, "edge-scores")
    # a duplicate key never reaches a validator as a dict: the reader refuses it (documented)
    text = json.dumps(doc)
    twice = text.replace(f'"{edge}": ', f'"{edge}": {json.dumps(doc["edges"][edge])}, "{edge}": ', 1)
    assert _plain(json.loads(twice), "edge-scores")
    with pytest.raises(Exception, match="twice|duplicate"):
        S.loads(twice)


SCRIPT = """
import json, sys, jsonschema
from huggingface_hub import hf_hub_download
schema = json.load(open(hf_hub_download("cbench/schemas", "bundled/edge-scores.schema.json", repo_type="dataset", revision="v1.0.0")))
rows = [json.loads(l) for l in open(hf_hub_download("cbench/schemas", "data/examples.jsonl", repo_type="dataset"))]
out = {}
for r in rows:
    full = json.load(open(hf_hub_download("cbench/schemas", "bundled/" + r["kind"] + ".schema.json", repo_type="dataset")))
    out[r["kind"] + "/" + r["name"]] = not list(jsonschema.Draft202012Validator(full).iter_errors(json.loads(r["document"])))
doc = json.loads(sys.stdin.read())
jsonschema.validate(doc, schema)
print(json.dumps(out))
"""


def test_a_script_with_only_jsonschema_and_huggingface_hub_validates_from_the_hub(tmp_path):
    """The card's recipe, run in a fresh interpreter against the local hub seeded with the
    released repository: it validates a submission and agrees with cbench on every example."""
    from cbench.hub.seeding import ensure_seeded

    hub = tmp_path / "hub"
    ensure_seeded(hub, only=[RepoRef("cbench/schemas", "dataset")])
    env = dict(os.environ, HF_HOME=str(tmp_path / "hf"), HF_HUB_DISABLE_TELEMETRY="1", HF_HUB_DISABLE_XET="1")
    for k in ("HF_HUB_OFFLINE", "HF_TOKEN"):
        env.pop(k, None)
    submission = (EXAMPLES / "edge-scores" / "valid-submission.json").read_text()
    with HubServer(hub) as server:
        env["HF_ENDPOINT"] = server.endpoint
        proc = subprocess.run([sys.executable, "-c", SCRIPT], input=submission, capture_output=True, text=True,
                              env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    plain = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(plain) >= 60
    ours = {}
    for f in EXAMPLES.rglob("*.json"):
        kind = f.relative_to(EXAMPLES).parts[0]
        ours[f"{kind}/{f.stem}"] = _cbench(json.loads(f.read_text()), kind)
    assert {k for k in plain if plain[k] != ours[k]} == DOCUMENTED
