"""The scale benchmark's measuring pieces (issue 20): a call cut at its CPU-time limit still
reports its peak memory, a child past its address-space limit reports an out-of-memory error
(instead of the kernel killing processes), and the table shows both."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import bench_scale  # noqa: E402
import scale_measure  # noqa: E402


def _busy_with_memory():
    import torch

    keep = torch.ones(64 * 2**20 // 4)  # 64 MB held while the loop runs
    x = torch.randn(300, 300)
    while True:
        x = torch.tanh(x @ x) + keep[:1]


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the resident set from /proc")
def test_a_call_cut_at_its_time_limit_reports_its_peak_memory():
    r = scale_measure.measure(_busy_with_memory, repeat=1, timeout=0.5)
    assert r["error"].startswith("not done in")
    assert r["cpu_s_limit"] == 0.5
    assert r["added_mb"] >= 60  # the 64 MB it held


@pytest.mark.skipif(sys.platform != "linux", reason="RLIMIT_AS and glibc")
def test_a_child_past_its_memory_limit_reports_out_of_memory():
    code = ("import sys; sys.path.insert(0, %r); import torch; from scale_measure import emit, measure; "
            "emit('big', measure(lambda: torch.ones(6 * 2**30, dtype=torch.uint8)))" % str(BENCH))
    res = bench_scale.run_child([sys.executable, "-c", code], 1, 60, 0, memory_gb=4)
    assert res["big"]["error"] == "out of memory (its 4 GB address-space limit)"
    row = dict(size="gpt2", method="eap", cpu_s=1.0, x_floor=1.0, peak_mb=10.0, added_mb=5.0, ac=res["big"])
    table = bench_scale.markdown([row], "header")
    assert "| gpt2 | eap | 1.00 | 1.00 | 10 | 5 | out of memory (its 4 GB address-space limit) | — | — |" in table


def test_the_table_shows_the_memory_of_a_call_that_ran_out_of_time():
    row = dict(size="gpt2", method="acdc", error="not done in 400 s of CPU", peak_mb=5120.4, added_mb=900.6)
    table = bench_scale.markdown([row], "header")
    assert "| gpt2 | acdc | not done in 400 s of CPU | | 5120 | 901 | | | |" in table
