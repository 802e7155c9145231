"""A length-only RASP program (tracr's ``make_length``) builds and passes the circuit check
(issue 14): its counterfactual sources of the same length carry the same answer, so the check cuts
the circuit's edges into logits with sources of other lengths, which a bidirectional model allows.
Its counterfactual pairs (spec ``dataset.source_lengths: same-or-longer``) take sources of other
lengths, so the interchange labels say what the length op does; before, every pair was of one
length and every interchange label was the base's label."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tracr")

CASE_003 = Path(__file__).resolve().parents[1] / "model_zoo" / "cases" / "case_003.py"


def _length_case(zoo: Path) -> None:
    src = CASE_003.read_text()
    spec = src[src.index("SPEC = {"):src.index("\n\n\ndef program")]
    for old, new in (('"id": "3"', '"id": "900"'), ('"task_type": "numerical"', '"task_type": "categorical"'),
                     ('"causal": True', '"causal": False'), ('"min_seq_len": 3', '"min_seq_len": 1'),
                     ('"seed": 42,', '"seed": 42,\n    "dataset": {"source_lengths": "same-or-longer"},')):
        assert old in spec
        spec = spec.replace(old, new)
    (zoo / "cases").mkdir(parents=True)
    (zoo / "cases" / "case_900.py").write_text(
        '"""The length of the input at every position (tracr.compiler.lib.make_length)."""\n\n' + spec
        + '\n\n\ndef program():\n    from tracr.compiler import lib\n\n    return lib.make_length()\n')


@pytest.mark.slow  # about 70 s on a loaded 2-core machine (jax compilation)
def test_make_length_builds_and_passes_the_circuit_check(tmp_path, monkeypatch):
    from cbench.artifacts.model import read_model_artifact
    from cbench_builders.tracr.build import build_case

    _length_case(tmp_path / "zoo")
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path / "zoo"))
    res = build_case("900", tmp_path / "out")
    assert res.ok, res.error
    art = read_model_artifact(tmp_path / "out" / "tracr-case-900")
    check = art.meta["circuit_check"]
    assert check["ok"] and check["outputs_changed_without_logits_edges"] > 0
    # the build checked that the model is exact on PAD-padded inputs (what longer sources need)
    assert art.meta["exactness"]["pad_exact"] is True and art.meta["exactness"]["pad_max_abs_err"] <= 1e-4

    # counterfactual pairs with longer sources: the length op's interchange label is the
    # source's length at every position of the base (RASP: length is the same at every position)
    import pyarrow.parquet as pq
    import torch

    from cbench.tasks.interchange import run_interchanged, source_activations
    from cbench.tasks.data import from_rows
    from cbench_builders.datasets import counterfactuals as cf
    from cbench_builders.datasets.build import build_datasets

    build_datasets(["900"], ("counterfactuals",), train_size=60, tracr_dir=tmp_path / "out", siit_dir=None,
                   out=tmp_path / "ds")
    path = tmp_path / "ds" / "counterfactuals" / cf.data_file("900", "train")
    rows = pq.read_table(path).to_pylist()
    classes = art.meta["output_classes"]
    nodes_hl = rows[0]["high_level_nodes"]
    op = next(o["name"] for o in art.circuit["high_level"]["ops"] if o.get("type") == "SelectorWidth")  # length_1
    k = nodes_hl.index(op)
    longer = [r for r in rows if len(r["source_tokens"]) > len(r["base_tokens"])]
    assert longer and all(len(r["source_tokens"]) >= len(r["base_tokens"]) for r in rows)
    for r in rows:
        nb, ns = len(r["base_tokens"]), len(r["source_tokens"])
        assert [classes[c] for c in r["base_label"]] == [nb] * nb
        assert [classes[c] for c in r["interchange_labels"][k]] == [ns] * nb
    meta = json.loads(pq.read_metadata(path).metadata[b"cbench"])
    assert meta["source_lengths"] == "same-or-longer"

    # the client pads each base to its source's length; the Tracr model, interchanged with hooks
    # at the components the op maps to, gives the dataset's labels on every valid position
    data = from_rows(rows, art.meta, "train")
    assert data.n_examples == len(rows) and (data.source[:, 1:] != data.base[:, 1:]).any()
    model = art.load_model(tokenizer=False)
    comps = next(o for o in art.circuit["high_level"]["ops"] if o["name"] == op)["components"]
    nodes = [c for c in comps if c != "input"]
    out = run_interchanged(model, data.base, source_activations(model, data.source, nodes), {n: True for n in nodes})
    got = out.argmax(-1)
    want = torch.tensor([[-1] + r["interchange_labels"][k] + [-1] * (data.base.shape[1] - 1 - len(r["base_tokens"]))
                         for r in rows])
    assert torch.equal(got[data.valid], want[data.valid])
