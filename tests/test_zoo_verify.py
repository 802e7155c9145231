"""Every released SIIT model passes ``cbench verify`` from a fresh ``$CBENCH_HOME`` (the zoo's
promise: a released model never fails its own verification). ``benchmarks/verify_zoo.py`` is the
script; the whole zoo takes about 30 CPU seconds per model, so the sweep is in ``make test-slow``.
The index listing and a bad model name are checked in the default suite."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "verify_zoo.py"
_spec = importlib.util.spec_from_file_location("verify_zoo", SCRIPT)
verify_zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(verify_zoo)


def test_the_sweep_covers_every_released_siit_model():
    index = json.loads((verify_zoo.ROOT / "model_zoo" / "releases" / "index.json").read_text())
    siit = {m["name"] for c in index["cases"] for m in c["models"] if m["model_kind"] == "siit"}
    listed = verify_zoo.released_siit_models()
    assert {n for n, _ in listed} == siit and len(listed) == len(siit) >= 77
    assert all(v.startswith("v") for _, v in listed)
    assert not any(n.startswith(("iit-", "tracr-", "stress-")) for n, _ in listed)


def test_an_unknown_model_is_one_error_line(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--models", "case-3,iit-case-3"], capture_output=True, check=False,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert r.stderr.strip() == "error: not a released SIIT model: iit-case-3"


@pytest.mark.slow  # about 30 CPU seconds per model, 77 models: `make test-slow`
def test_every_released_siit_model_passes_cbench_verify_from_a_fresh_home(tmp_path):
    out = tmp_path / "verify.jsonl"
    r = subprocess.run([sys.executable, str(SCRIPT), "--out", str(out)], capture_output=True, text=True, check=False)
    rows = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    failing = [f"{row['model']}: {row.get('error') or row['failed']}" for row in rows if not row["passed"]]
    assert not failing, "\n".join(failing)
    assert len(rows) == len(verify_zoo.released_siit_models())
    assert r.returncode == 0, r.stdout[-2000:]
