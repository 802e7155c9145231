"""Issue 20: every discovery method runs on a GPU (runs only where torch sees one) and gives
the CPU's scores there (float32 agreement); device selection errors are one clear message."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from circuit_models import random_model, random_tokens  # noqa: E402

from cbench.discovery import METHODS, discover  # noqa: E402
from cbench.errors import GraphError  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402
from cbench.runtime.model_state import select_device  # noqa: E402
from cbench.tasks.data import TaskData  # noqa: E402

SHORT = {"sp": {"steps": 10}, "edge-sp": {"steps": 10}, "ugs": {"steps": 10}}


def _data(n=8, p=6):
    base, source = random_tokens(n, p, 9, seed=1), random_tokens(n, p, 9, seed=2)
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, "categorical")


def test_device_selection_messages(monkeypatch):
    monkeypatch.delenv("CBENCH_DEVICE", raising=False)
    assert select_device(None) is None
    assert select_device("cpu") == torch.device("cpu")
    assert select_device("auto").type == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("CBENCH_DEVICE", "cpu")
    assert select_device(None) == torch.device("cpu")
    with pytest.raises(GraphError, match="unknown device"):
        select_device("gpu-please")
    if not torch.cuda.is_available():
        with pytest.raises(GraphError, match="no GPU"):
            select_device("cuda")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU (torch.cuda.is_available())")
@pytest.mark.parametrize("method", [m for m in METHODS if m != "random"])
def test_every_method_runs_on_the_gpu_with_the_cpu_scores(method):
    data = _data()
    hp = SHORT.get(method, {})
    cpu = discover(CircuitRuntime(random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=3)),
                   data, method, hp, progress=False)
    rt = CircuitRuntime(random_model(n_layers=2, n_heads=2, d_model=16, d_head=4, ln="LN", seed=3), device="cuda")
    assert rt.device.type == "cuda" and next(rt.model.parameters()).is_cuda
    gpu = discover(rt, data, method, hp, progress=False)
    a, b = np.asarray(gpu.scores), np.asarray(cpu.scores)
    assert np.isfinite(a).all()
    # GPU kernels sum in other orders: float32 agreement (trained methods amplify it a little)
    tol = (1e-3 if method in SHORT else 1e-4) * max(1.0, float(np.abs(b).max()))
    assert np.abs(a - b).max() <= tol, f"{method}: {np.abs(a - b).max():.3g}"
