"""The Tracr builder: three-way exactness, derived circuits, artifacts, the Tracr-programs
dataset, the high-level model and bad input through the CLI.

One module-scoped build compiles cases 3, 4, 11, 13, 19 and 33 in this process (a few seconds
each once jax's compilation cache is warm) into a temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tracr")

from cbench.errors import BuildError  # noqa: E402

from cbench_builders.cases.specs import MAIN_CASES, list_cases, load_case  # noqa: E402

CASES = ["3", "4", "11", "13", "19", "33"]
REPO = Path(__file__).resolve().parents[1]
CBENCH = Path(sys.executable).with_name("cbench")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from cbench_builders.tracr.build import build_cases
    from cbench_builders.tracr.programs import write_dataset

    out = tmp_path_factory.mktemp("tracr")
    results = {r.case: r for r in build_cases(CASES, out, jobs=1, progress=False)}
    write_dataset([r.row for r in results.values() if r.ok], out)
    return out, results


# ---------------------------------------------------------------------------- case specs
def test_main_case_specs_load_and_validate():
    assert set(MAIN_CASES) <= set(list_cases())
    for cid in MAIN_CASES:
        case = load_case(cid)
        assert case.id == cid and case.spec["schema"] == "cbench/case/v1"
        assert case.bos not in case.vocab and case.min_seq_len <= case.max_seq_len
        assert "def program" in case.program_source()
    assert load_case("case-3") is load_case("003")


def test_unknown_case_is_one_clear_error():
    with pytest.raises(BuildError, match=r"unknown case '333'.*did you mean: .*33"):
        load_case("333")


def test_program_labels_are_reproducible():
    a = load_case("19").program()
    b = load_case("19").program()
    assert a.label == b.label


# ---------------------------------------------------------------------------- exactness and circuits
@pytest.mark.parametrize("cid", CASES)
def test_three_way_exactness_and_circuit_check(built, cid):
    _, results = built
    r = results[cid]
    assert r.ok, r.error
    assert r.exactness.startswith("exact on ")
    row = r.row
    import json

    exact = json.loads(row["exactness"])
    assert exact["ok"] and exact["n_inputs"] in (320, 2000) and exact["failure"] is None
    if load_case(cid).task_type == "numerical":
        assert exact["max_abs_err"] <= 1e-4


def test_case_3_circuit_is_the_published_one(built):
    from cbench.artifacts.model import read_model_artifact

    out, _ = built
    art = read_model_artifact(out / "tracr-case-3", verify=True)
    edges = set(art.circuit["edges"])
    # is_x MLP (layer 0) -> value input of the frac_prevs head (layer 1) -> logits, plus the inputs
    # feeding them (tokens into the MLP, indices into the head's query and key)
    assert edges == {"input->m0", "m0->a1.h0<v>", "a1.h0->logits", "input->a1.h0<q>", "input->a1.h0<k>"}
    assert art.circuit["nodes"] == ["input", "a1.h0", "m0", "logits"] or set(art.circuit["nodes"]) == {
        "input", "m0", "a1.h0", "logits"}
    ops = {op["name"]: op for op in art.circuit["high_level"]["ops"]}
    is_x = next(op for name, op in ops.items() if name.startswith("is_x"))
    frac = next(op for name, op in ops.items() if name.startswith("frac_prevs"))
    assert is_x["component"] == "m0" and is_x["type"] == "Map" and is_x["hidden_neurons"][0] == 0
    assert frac["component"] == "a1.h0" and frac["type"] == "Aggregate" and is_x["name"] in frac["parents"]
    assert art.circuit["high_level"]["output_op"] == frac["name"]


def test_circuit_check_detects_a_wrong_circuit(built):
    """The check is not vacuous: dropping the MLP->head edge of case 3 changes outputs."""
    from cbench.artifacts.model import read_model_artifact
    from cbench_builders.tracr.circuit import check_circuit
    from cbench_builders.tracr.exactness import case_inputs

    out, _ = built
    art = read_model_artifact(out / "tracr-case-3", verify=True)
    model = art.load_model()
    seqs, _ = case_inputs(load_case("3"))
    tid = {t: i for i, t in enumerate(art.meta["input_tokens"])}
    good = check_circuit(model, art.circuit, seqs, tid, "BOS", False, 42)
    assert good.ok and good.complement_max_change <= 1e-4 and good.logits_edges_changed > 0
    broken = dict(art.circuit, edges=[e for e in art.circuit["edges"] if e != "m0->a1.h0<v>"])
    bad = check_circuit(model, broken, seqs, tid, "BOS", False, 42)
    assert not bad.ok and "changed an output" in bad.failure


# ---------------------------------------------------------------------------- artifacts
@pytest.mark.parametrize("cid", CASES)
def test_artifacts_validate(built, cid):
    from cbench.artifacts.model import read_model_artifact
    from cbench.schemas import validate

    out, _ = built
    art = read_model_artifact(out / f"tracr-case-{cid}", verify=True)
    assert art.meta["model_kind"] == "tracr" and art.meta["case"] == cid
    assert validate(art.meta, "model-meta") == [] and validate(art.circuit, "circuit") == []
    assert art.meta["input_tokens"][0] == "BOS"
    cfg = art.config
    assert cfg["act_fn"] == "relu" and cfg["normalization_type"] is None
    assert cfg["attention_dir"] == ("causal" if load_case(cid).causal else "bidirectional")
    if art.meta["task_type"] == "numerical":
        assert cfg["d_vocab_out"] == 1 and art.meta["output_classes"] is None
    else:
        assert cfg["d_vocab_out"] == len(art.meta["output_classes"])
    assert "## Ground-truth circuit" in art.readme


# ---------------------------------------------------------------------------- high-level model
def test_high_level_model_labels_and_interchange(built):
    import torch

    from cbench_builders.datasets.high_level import HighLevelModel

    out, _ = built
    hl = HighLevelModel.from_artifact(out / "tracr-case-3")
    base = hl.encode([list("xaax"), list("abca")])
    source = hl.encode([list("aaaa"), list("xxxx")])
    assert torch.allclose(hl.labels(base), torch.tensor([[1, 1 / 2, 1 / 3, 1 / 2], [0, 0, 0, 0]]), atol=1e-5)
    is_x = next(o for o in hl.ops if o.startswith("is_x"))
    frac = next(o for o in hl.ops if o.startswith("frac_prevs"))
    # interchanging is_x (the MLP's hidden neurons) or the frac_prevs head gives the source's output
    for op in (is_x, frac):
        swapped = hl.to_labels(hl.run_with_interchange(base, source, op))
        assert torch.allclose(swapped, hl.labels(source), atol=1e-5)

    # case 19: x if x != previous else None. Interchanging `previous` from "bbca" into "abca"
    # makes position 2 a duplicate (b, b): no class fires (RASP's None); later positions keep theirs.
    hl19 = HighLevelModel.from_artifact(out / "tracr-case-19")
    b, s = hl19.encode([list("abca")]), hl19.encode([list("bbca")])
    prev = next(o for o in hl19.ops if o.startswith("previous_token"))
    assert hl19.decode(hl19.labels(b))[0][1:] == ["b", "c", "a"]
    swapped = hl19.run_with_interchange(b, s, prev)
    assert float(hl19.run(b)[0, 2].max()) > 0.5 and float(swapped[0, 2].abs().max()) < 1e-3
    assert hl19.decode(hl19.to_labels(swapped))[0][2:] == ["c", "a"]
    with pytest.raises(Exception, match="not in case 19's program"):
        hl19.run_with_interchange(b, s, "nope")


# ---------------------------------------------------------------------------- the dataset
def test_tracr_programs_dataset_loads(built, tmp_path):
    import json

    from datasets import load_dataset

    out, _ = built
    # a fresh cache: datasets 5.2 reuses a cached copy of an earlier local dataset of the same
    # name and layout even when its parquet changed
    ds = load_dataset(str(out / "tracr-programs"), cache_dir=str(tmp_path / "hf"))["train"]
    assert ds.num_rows == len(CASES)
    assert ds["case_id"] == sorted(CASES, key=int)
    row = ds[0]
    assert row["case_id"] == "3" and row["task_type"] == "numerical"
    assert "m0->a1.h0<v>" in row["circuit_edges"]
    ops = json.loads(row["op_graph"])
    assert {op["type"] for op in ops} >= {"Map", "Aggregate", "Select", "TokensType", "IndicesType"}
    assert json.loads(row["model_config"])["n_layers"] == 2
    assert "make_frac_prevs" in row["program_source"]
    readme = (out / "tracr-programs" / "README.md").read_text()
    assert "configs:" in readme and "data/train.parquet" in readme


# ---------------------------------------------------------------------------- bad input through the CLI
def _cli(args, env_extra=None):
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([str(CBENCH), "build", "tracr", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_cli_unknown_case(tmp_path):
    p = _cli(["--cases", "3,999", "--out", str(tmp_path)])
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1 and "unknown case '999'" in lines[0]
    assert not any(tmp_path.iterdir())


BAD_SPEC = '''"""A deliberately broken case for the tests."""

SPEC = {{
    "schema": "cbench/case/v1", "id": "{cid}", "description": "broken on purpose",
    "task_type": "categorical", "vocab": {vocab}, "min_seq_len": 2, "max_seq_len": 3,
    "bos": "BOS", "pad": "PAD", "causal": True, "label_positions": "all-but-bos",
    "source": "cbench", "seed": 1, "training": {{}},
}}


def program():
    from tracr.rasp import rasp
{body}
'''


def test_cli_rejected_program_and_unfit_vocab(tmp_path):
    cases = tmp_path / "zoo" / "cases"
    cases.mkdir(parents=True)
    # Tracr rejects: a categorical aggregate of a numerical SOp
    (cases / "case_901.py").write_text(BAD_SPEC.format(cid="901", vocab='["a", "b"]', body=(
        "    ones = rasp.numerical(rasp.Map(lambda t: 1, rasp.tokens))\n"
        "    return rasp.Aggregate(rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.EQ), ones)")))
    # the vocab does not fit: len() of integers
    (cases / "case_902.py").write_text(BAD_SPEC.format(cid="902", vocab="[1, 2]", body=(
        "    return rasp.Map(lambda w: len(w) % 2, rasp.tokens)")))
    p = _cli(["--cases", "901,902", "--out", str(tmp_path / "out"), "-j", "1"],
             {"CBENCH_ZOO": str(tmp_path / "zoo")})
    assert p.returncode != 0
    assert "Traceback" not in p.stderr
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert any(ln.startswith("error: case 901: Tracr rejects the program") for ln in errors), p.stderr
    assert any(ln.startswith("error: case 902: the vocab does not fit the program") for ln in errors), p.stderr
    assert "901" in errors[-1] and "902" in errors[-1]
    assert not (tmp_path / "out" / "tracr-case-901").exists()
