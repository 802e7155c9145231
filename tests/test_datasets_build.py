"""The three datasets built from real compiled Tracr cases (3 and 33), loaded back three ways.

* ``datasets.load_dataset(local_dir, "case-3")``;
* published to a temporary hub (git repos served by olah on 127.0.0.1) and loaded at a tag,
  with ``cbench.load_dataset`` and with plain ``datasets.load_dataset(repo, revision=tag)``
  pointed at the hub's endpoint;
* offline from the cache with ``cbench.load_dataset(..., revision=..., offline=True)``;

and the rows equal what was built. Interchange labels are checked on a sample of rows against
the high-level model (HighLevelModel with that node interchanged) and, independently, against
Tracr's RASP evaluator with that operation's value taken from the source. Building twice gives
byte-identical files.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from cbench_builders.datasets import counterfactuals as cf

CASES = ["3", "33"]
TRAIN = 30  # validation and test: 6 each


@pytest.fixture(scope="module")
def tracr_dir(compiled_tracr):
    return compiled_tracr(*CASES)  # compiled once per session (tests/conftest.py)


def _build(out: Path, tracr_dir: Path, train_size: int = TRAIN, datasets=("counterfactuals", "circuits", "ioi")):
    from cbench_builders.datasets.build import build_datasets

    return build_datasets(CASES, datasets, train_size=train_size, tracr_dir=tracr_dir, siit_dir=None, out=out,
                          ioi_sizes={"train": 50, "validation": 10, "test": 10})


@pytest.fixture(scope="module")
def built(tracr_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("datasets")
    summary = _build(out, tracr_dir)
    return out, summary


def _rows(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def _files(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


# ----------------------------------------------------------------------------- local directory
def test_load_dataset_from_the_local_directory(built, tracr_dir, tmp_path):
    import datasets

    out, summary = built
    assert summary["counterfactuals"]["3"]["rows"] == {"train": 30, "validation": 6, "test": 6}
    for case in CASES:
        ds = datasets.load_dataset(str(out / "counterfactuals"), f"case-{case}", cache_dir=str(tmp_path / "hf"))
        assert set(ds) == {"train", "validation", "test"}
        for split in ds:
            assert ds[split].to_list() == _rows(out / "counterfactuals" / cf.data_file(case, split))
        circ = datasets.load_dataset(str(out / "circuits"), f"case-{case}", cache_dir=str(tmp_path / "hf"))["train"]
        truth = json.loads((tracr_dir / f"tracr-case-{case}" / "circuit.json").read_text())
        assert sorted(circ.filter(lambda r: r["in_circuit"])["edge"]) == sorted(truth["edges"])
        assert all(r is None for r in circ["in_circuit_siit"])
    ds = datasets.load_dataset(str(out / "counterfactuals"), "case-3", cache_dir=str(tmp_path / "hf"))
    row = ds["train"][0]
    assert row["high_level_nodes"] == ["select_3", "is_x_2", "frac_prevs_1"]
    assert len(row["interchange_labels"]) == 3 and len(row["base_label"]) == len(row["base_tokens"])
    # compact columns
    schema = pq.read_schema(out / "counterfactuals" / cf.data_file("3", "train"))
    assert str(schema.field("base_ids").type) == "list<element: int8>"
    assert str(schema.field("base_label").type) == "list<element: float>"
    schema33 = pq.read_schema(out / "counterfactuals" / cf.data_file("33", "train"))
    assert str(schema33.field("base_label").type) == "list<element: int8>"


def test_splits_are_disjoint_and_ids_match_tokens(built, tracr_dir):
    out, _ = built
    for case in CASES:
        meta = json.loads((tracr_dir / f"tracr-case-{case}" / "meta.json").read_text())
        inputs = {}
        for split in cf.SPLITS:
            rows = _rows(out / "counterfactuals" / cf.data_file(case, split))
            inputs[split] = {tuple(r["base_tokens"]) for r in rows} | {tuple(r["source_tokens"]) for r in rows}
            for r in rows:
                assert r["base_ids"][0] == meta["input_tokens"].index(meta["bos_token"])
                assert [str(meta["input_tokens"][i]) for i in r["base_ids"][1:]] == r["base_tokens"]
                assert [str(meta["input_tokens"][i]) for i in r["source_ids"][1:]] == r["source_tokens"]
                assert len(r["base_tokens"]) == len(r["source_tokens"]) and r["base_tokens"] != r["source_tokens"]
        assert not (inputs["train"] & inputs["validation"]) and not (inputs["train"] & inputs["test"])
        assert not (inputs["validation"] & inputs["test"])


# ----------------------------------------------------------------------------- interchange labels
def _rasp_interchange(spec, base, source, op_name):
    """RASP-level interchange: evaluate the program on ``base`` with op ``op_name``'s value taken
    from its evaluation on ``source`` (Tracr's own evaluator; independent of the compiled model)."""
    from tracr.rasp import rasp

    program = spec.program()

    class _Swap(rasp.DefaultRASPEvaluator):
        def __init__(self, override):
            super().__init__()
            self.override = override

        def evaluate(self, expr, xs):
            if self.override is not None and expr.label in self.override:
                return self.override[expr.label]
            return super().evaluate(expr, xs)

    def find(expr):
        stack, seen = [expr], set()
        while stack:
            e = stack.pop()
            if e.label == op_name:
                return e
            if id(e) not in seen:
                seen.add(id(e))
                stack.extend(e.children)
        raise AssertionError(op_name)

    op = find(program)
    targets = [op]
    if isinstance(op, rasp.Select):
        # a selector is interchanged as the output of the head(s) that use it (the unit the
        # correspondence maps it to): in RASP, the aggregates that read it
        targets, stack, seen = [], [program], set()
        while stack:
            e = stack.pop()
            if id(e) in seen:
                continue
            seen.add(id(e))
            if isinstance(e, rasp.Aggregate) and e.selector is op:
                targets.append(e)
            stack.extend(e.children)
    override = {t.label: rasp.DefaultRASPEvaluator().evaluate(t, list(source)) for t in targets}
    return _Swap(override).evaluate(program, list(base)), rasp.evaluate(program, list(base))


@pytest.mark.parametrize("case", CASES)
def test_interchange_labels_match_the_high_level_model(built, tracr_dir, case):
    import torch

    from cbench_builders.cases.specs import load_case
    from cbench_builders.datasets.high_level import HighLevelModel

    out, _ = built
    hl = HighLevelModel.from_artifact(tracr_dir / f"tracr-case-{case}")
    spec = load_case(case)
    vocab = {str(v): v for v in spec.vocab}
    classes = hl.output_classes
    rows = []
    for split in cf.SPLITS:
        rows += _rows(out / "counterfactuals" / cf.data_file(case, split))[:12]
    for r in rows:
        base = [vocab[t] for t in r["base_tokens"]]
        source = [vocab[t] for t in r["source_tokens"]]
        tb, ts = torch.tensor([r["base_ids"]]), torch.tensor([r["source_ids"]])
        np.testing.assert_allclose(r["base_label"], hl.labels(tb)[0].tolist(), atol=1e-6)
        np.testing.assert_allclose(r["source_label"], hl.labels(ts)[0].tolist(), atol=1e-6)
        for op, got in zip(r["high_level_nodes"], r["interchange_labels"]):
            want = hl.to_labels(hl.run_with_interchange(tb, ts, op))[0].tolist()
            np.testing.assert_allclose(got, want, atol=1e-6)
            # the same interchange done on the RASP program
            rasp_out, rasp_base = _rasp_interchange(spec, base, source, op)
            for i, v in enumerate(rasp_out):
                if v is None:
                    continue
                if hl.task_type == "categorical":
                    assert classes[got[i]] == v, (op, r["base_tokens"], r["source_tokens"], i)
                else:
                    assert got[i] == pytest.approx(float(v), abs=1e-4), (op, r["base_tokens"], r["source_tokens"], i)
            for i, v in enumerate(rasp_base):
                if v is not None and hl.task_type == "numerical":
                    assert r["base_label"][i] == pytest.approx(float(v), abs=1e-4)
    # the interchanges are not vacuous: some change the label
    changed = sum(got != r["base_label"] for r in rows for got in r["interchange_labels"])
    assert changed > 0


# ----------------------------------------------------------------------------- determinism
def test_building_twice_gives_identical_files(built, tracr_dir, tmp_path):
    out, _ = built
    _build(tmp_path, tracr_dir)
    for name in ("counterfactuals", "circuits", "ioi"):
        first, second = _files(out / name), _files(tmp_path / name)
        assert first == second, name
        assert any(k.endswith(".parquet") for k in first)


# ----------------------------------------------------------------------------- the hub
@pytest.fixture
def hub_env(tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    # this hub holds the test's own cbench/counterfactuals v1.0.0, not the zoo's: no zoo releases, no
    # zoo pins (the case specs stay: the builders read them)
    from cbench.hub.zoo import zoo_dir

    no_zoo = tmp_path / "no-zoo"
    no_zoo.mkdir()
    (no_zoo / "cases").symlink_to(zoo_dir() / "cases")
    monkeypatch.setenv("CBENCH_ZOO", str(no_zoo))
    for var in ("HF_HUB_OFFLINE", "CBENCH_ENDPOINT", "CBENCH_HUB"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path / "hub"


def test_publish_then_load_through_the_hub_at_a_tag_and_offline(built, tracr_dir, tmp_path, hub_env):
    import cbench
    from cbench.errors import UnknownRevisionError
    from cbench.hub.publishing import publish

    out, _ = built
    hub = hub_env
    for name in ("counterfactuals", "circuits", "ioi"):
        publish(out / name, f"cbench/{name}", "dataset", "v1.0.0", hub=hub)
    # a second version with more rows, so the tag matters
    out2 = tmp_path / "v1.1"
    _build(out2, tracr_dir, train_size=40, datasets=("counterfactuals",))
    publish(out2 / "counterfactuals", "cbench/counterfactuals", "dataset", "v1.1.0", hub=hub)

    hf = str(tmp_path / "hf")
    v1 = cbench.load_dataset("counterfactuals", "case-3", revision="v1.0.0", hub=hub, cache_dir=hf)
    for split in cf.SPLITS:
        assert v1[split].to_list() == _rows(out / "counterfactuals" / cf.data_file("3", split))
    v11 = cbench.load_dataset("cbench/counterfactuals", "case-33", revision="v1.1.0", hub=hub, cache_dir=hf)
    assert v11["train"].num_rows == 40
    assert v11["train"].to_list() == _rows(out2 / "counterfactuals" / cf.data_file("33", "train"))
    circ = cbench.load_dataset("circuits", "case-33", revision="v1.0.0", hub=hub, cache_dir=hf)["train"]
    assert circ.to_list() == _rows(out / "circuits" / "case-33" / "train-00000-of-00001.parquet")

    # offline: from the cache only, at the exact revision
    off = cbench.load_dataset("counterfactuals", "case-3", revision="v1.0.0", offline=True,
                              cache_dir=str(tmp_path / "hf-offline"))
    assert off["test"].to_list() == _rows(out / "counterfactuals" / cf.data_file("3", "test"))
    with pytest.raises(UnknownRevisionError):
        cbench.load_dataset("counterfactuals", "case-3", revision="v9.9.9", offline=True)

    # other projects: plain datasets.load_dataset(repo, config, revision=tag) against the hub
    from cbench.hub.server import HubServer

    code = (
        "import datasets, json, sys\n"
        "ds = datasets.load_dataset('cbench/counterfactuals', 'case-3', revision='v1.0.0', cache_dir=sys.argv[1])\n"
        "io = datasets.load_dataset('cbench/ioi', revision='v1.0.0', cache_dir=sys.argv[1])\n"
        "print(json.dumps([ds['validation'].to_list(), io['test'].num_rows]))\n"
    )
    with HubServer(hub) as server:
        env = dict(os.environ, HF_ENDPOINT=server.endpoint, HF_HUB_DISABLE_XET="1", HF_HUB_DISABLE_TELEMETRY="1",
                   HF_HOME=str(tmp_path / "hf-home"))
        env.pop("HF_HUB_OFFLINE", None)
        proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "hf-plain")], capture_output=True,
                              text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    val, n_ioi = json.loads(proc.stdout.strip().splitlines()[-1])
    assert n_ioi == 10
    want = _rows(out / "counterfactuals" / cf.data_file("3", "validation"))
    assert val == want  # floats survive the JSON round trip exactly (repr)


# ----------------------------------------------------------------------------- selectors (issue 14)
def test_select_op_labels_agree_with_the_correspondence():
    # case 3's select_3 and frac_prevs_1 both map to a1.h0 in correspondence.json; the labels of a
    # selector came from swapping only the attention pattern, which for Select(indices, indices,
    # LEQ) never changes anything (its label was the base label every time), so per-op IIA from the
    # dataset and the correspondence disagreed. Ops mapped to the same components get one label.
    import json

    import torch

    from cbench_builders.datasets.high_level import HighLevelModel

    zoo = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
    hl = HighLevelModel.from_artifact(zoo / "tracr-case-3" / "v1.0.0")
    corr = json.loads((zoo / "case-3" / "v1.0.0" / "correspondence.json").read_text())
    units = {}
    for node in corr["nodes"]:
        units.setdefault(tuple(sorted(ll["node"] for ll in node["low_level"])), []).append(node["high_level"])
    rng = np.random.default_rng(0)
    base = torch.as_tensor(np.c_[np.zeros((64, 1), int), rng.integers(1, 5, (64, 4))])
    source = torch.as_tensor(np.c_[np.zeros((64, 1), int), rng.integers(1, 5, (64, 4))])
    labels = {op: hl.to_labels(hl.run_with_interchange(base, source, op)) for ops in units.values() for op in ops}
    select = next(op for op in labels if op.startswith("select"))
    assert not torch.equal(labels[select], hl.labels(base))  # the selector's interchange does something
    for ops in units.values():
        for op in ops[1:]:
            assert torch.equal(labels[op], labels[ops[0]]), (ops[0], op)
