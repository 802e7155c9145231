"""Issue 20: the memory-bounded passes keep every method's scores.

``tests/data/scale_reference_scores.json`` holds the scores of every discovery method on two
small random models, written by the code *before* the issue-20 changes (``python
tests/test_scale_memory.py --write`` on that commit); the current code must give the same
scores (float32 agreement: the passes may sum in another order). A tiny memory budget forces
every chunked method into many small passes and must not change the scores either.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from circuit_models import random_model, random_tokens  # noqa: E402

from cbench.discovery import METHODS, discover  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402
from cbench.tasks.data import TaskData  # noqa: E402

REFERENCE = HERE / "data" / "scale_reference_scores.json"
METHODS_CHECKED = [m for m in METHODS if m != "random"]
# every method but the trained ones on a short schedule, so the test stays fast
# ugs at the penalty the reference was recorded with (its default now scales with the graph)
FAST = {"sp": {"steps": 20}, "edge-sp": {"steps": 20}, "ugs": {"steps": 20, "lambda_reg": 0.1}}
CHUNKED = ("eap", "eap-ig-inputs", "eap-ig-activations", "nap", "nap-ig", "ifr", "activation-patching",
           "sp", "edge-sp", "ugs", "acdc")


def _models():
    return {
        "ln-3x3": random_model(n_layers=3, n_heads=3, d_model=16, d_head=4, ln="LN", seed=5, weight_scale=2.0),
        "noln-2x2": random_model(n_layers=2, n_heads=2, d_model=12, d_head=4, ln=None, seed=7),
    }


def _data(n=12, p=6, d_vocab=9, seed=3):
    base, source = random_tokens(n, p, d_vocab, seed=seed), random_tokens(n, p, d_vocab, seed=seed + 1)
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, "categorical")


def all_scores() -> dict:
    out = {}
    data = _data()
    for name, model in _models().items():
        rt = CircuitRuntime(model)
        out[name] = {m: discover(rt, data, m, FAST.get(m, {}), progress=False).scores.tolist()
                     for m in METHODS_CHECKED}
    return out


def _close(a, b, what):
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, what
    tol = 2e-5 * max(1.0, float(np.abs(b).max()))
    assert np.abs(a - b).max() <= tol, f"{what}: max difference {np.abs(a - b).max():.3g}"


@pytest.fixture(scope="module")
def current():
    return all_scores()


def test_every_method_scores_as_before_the_change(current):
    ref = json.loads(REFERENCE.read_text())
    assert set(ref) == set(current)
    for model, per_method in ref.items():
        for method, scores in per_method.items():
            assert np.abs(scores).max() > 0 or method == "random"
            _close(current[model][method], scores, f"{model} {method}")


def test_a_tiny_memory_budget_splits_the_passes_and_keeps_the_scores(current, monkeypatch):
    from cbench.runtime import memory

    monkeypatch.setenv("CBENCH_MEMORY_MB", "0.05")
    data = _data()
    model = _models()["ln-3x3"]
    rt = CircuitRuntime(model)
    assert memory.rows_per_pass(rt, data.base.shape[1]) < data.n_examples  # the budget really splits
    assert memory.masked_rows_per_pass(rt, data.base.shape[1]) < data.n_examples  # (the masked pass's too)
    assert memory.masked_grad_rows_per_pass(rt, data.base.shape[1]) < data.n_examples  # (and a training step's)
    for m in CHUNKED:
        _close(discover(rt, data, m, FAST.get(m, {}), progress=False).scores, current["ln-3x3"][m], f"chunked {m}")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    REFERENCE.parent.mkdir(exist_ok=True)
    REFERENCE.write_text(json.dumps(all_scores()) + "\n")
    print(f"wrote {REFERENCE}")
