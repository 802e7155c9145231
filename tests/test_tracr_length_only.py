"""A length-only RASP program (tracr's ``make_length``) builds and passes the circuit check
(issue 14): its counterfactual sources of the same length carry the same answer, so the check cuts
the circuit's edges into logits with sources of other lengths, which a bidirectional model allows."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tracr")

CASE_003 = Path(__file__).resolve().parents[1] / "model_zoo" / "cases" / "case_003.py"


def _length_case(zoo: Path) -> None:
    src = CASE_003.read_text()
    spec = src[src.index("SPEC = {"):src.index("\n\n\ndef program")]
    for old, new in (('"id": "3"', '"id": "900"'), ('"task_type": "numerical"', '"task_type": "categorical"'),
                     ('"causal": True', '"causal": False'), ('"min_seq_len": 3', '"min_seq_len": 1')):
        assert old in spec
        spec = spec.replace(old, new)
    (zoo / "cases").mkdir(parents=True)
    (zoo / "cases" / "case_900.py").write_text(
        '"""The length of the input at every position (tracr.compiler.lib.make_length)."""\n\n' + spec
        + '\n\n\ndef program():\n    from tracr.compiler import lib\n\n    return lib.make_length()\n')


@pytest.mark.slow  # about 70 s on a loaded 2-core machine (jax compilation)
def test_make_length_builds_and_passes_the_circuit_check(tmp_path, monkeypatch):
    from cbench.artifacts import read_model_artifact
    from cbench_builders.tracr_build import build_case

    _length_case(tmp_path / "zoo")
    monkeypatch.setenv("CBENCH_ZOO", str(tmp_path / "zoo"))
    res = build_case("900", tmp_path / "out")
    assert res.ok, res.error
    art = read_model_artifact(tmp_path / "out" / "tracr-case-900")
    check = art.meta["circuit_check"]
    assert check["ok"] and check["outputs_changed_without_logits_edges"] > 0
