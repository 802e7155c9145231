"""`cbench build datasets` on bad input: one clear line, non-zero exit, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

CBENCH = Path(sys.executable).parent / "cbench"


def _run(tmp_path, *args):
    env = dict(os.environ, CBENCH_HOME=str(tmp_path / "home"))
    proc = subprocess.run([str(CBENCH), "build", "datasets", "--out", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, env=env, timeout=300)
    return proc


@pytest.mark.parametrize("args, message", [
    (["--cases", "999"], "unknown case '999'"),
    (["--cases", "3", "--datasets", "counterfactuals", "--train-size", "20000", "--distinct-pairs"],
     "distinct pairs but its"),
    (["--datasets", "ioi", "--ioi-counterfactuals", "s2_io_flip,s3_io_flip"],
     "unknown IOI counterfactual type 's3_io_flip'"),
    (["--cases", "3", "--datasets", "counterfacts"], "unknown dataset 'counterfacts' (did you mean: counterfactuals"),
    (["--datasets", "ioi", "--ioi-sizes", "10,zero,3"], "--ioi-sizes wants TRAIN,VALIDATION,TEST"),
    (["--datasets", "counterfactuals"], "say which cases"),
    (["--cases", "3", "--datasets", "circuits", "--tracr-dir", "/nonexistent/tracr"], "no compiled Tracr model"),
    (["--cases", "3", "--main"], "give one of --cases, --main or --all"),
])
def test_bad_input_is_one_clear_line(tmp_path, args, message):
    proc = _run(tmp_path, *args)
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ") and message in lines[0], lines[0]
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.parquet"))


def test_distinct_error_names_the_numbers(tmp_path):
    # case 3: 4 symbols, lengths 3-4 -> 320 inputs; its validation share (~46 inputs) has about
    # 1,400 distinct pairs, fewer than the 4,000 validation pairs 20,000 train pairs imply
    proc = _run(tmp_path, "--cases", "3", "--datasets", "counterfactuals", "--train-size", "20000",
                "--distinct-pairs")
    assert proc.returncode == 2
    assert "case 3" in proc.stderr and "input space 320" in proc.stderr and "--distinct-pairs" in proc.stderr
