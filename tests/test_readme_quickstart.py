"""The README's quick starts run as written: the Python block (default suite), the Python API block and
the CLI block (slow: they run a discovery method and scoring), each on a fresh CBENCH_HOME."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _env(home: Path) -> dict:
    env = dict(os.environ, CBENCH_HOME=str(home), CBENCH_THREADS="1", HF_HUB_DISABLE_PROGRESS_BARS="1")
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(k, None)
    return env


def test_python_quick_start(tmp_path):
    block = re.search(r"<!-- quickstart-python -->\n```python\n(.*?)```", README, flags=re.DOTALL).group(1)
    proc = subprocess.run([sys.executable, "-c", block], check=False, capture_output=True, text=True, env=_env(tmp_path / "home"),
                          cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "['BOS', 'x', 'a', 'b']"
    assert lines[1].startswith("['") and len(lines) == 2
    # the dataset came through the verified cache, case 3's files only (the card says which)
    cached = [p.relative_to(tmp_path).as_posix() for p in (tmp_path / "home" / "cache").rglob("*.parquet")]
    assert len(cached) == 3 and all("/case-3/" in p for p in cached), cached


@pytest.mark.slow
def test_python_api_quick_start(tmp_path):
    block = re.search(r"<!-- quickstart-api -->\n```python\n(.*?)```", README, flags=re.DOTALL).group(1)
    proc = subprocess.run([sys.executable, "-c", block], check=False, capture_output=True, text=True, env=_env(tmp_path / "home"),
                          cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stderr
    auroc, cmd = (float(x) for x in proc.stdout.split())
    assert 0.9 <= auroc <= 1.0 and 0.0 <= cmd <= 1.0, proc.stdout


@pytest.mark.slow
def test_cli_quick_start(tmp_path):
    block = re.search(r"```bash\n(cbench pull case-3.*?)```", README, flags=re.DOTALL).group(1)
    bin_dir = str(Path(sys.executable).parent)
    env = _env(tmp_path / "home")
    env["PATH"] = bin_dir + os.pathsep + env.get("PATH", "")
    for line in block.strip().splitlines():
        cmd = line.split("  #")[0].strip()
        proc = subprocess.run(["bash", "-ec", cmd], check=False, capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=900)
        assert proc.returncode == 0, (cmd, proc.stderr)
    assert (tmp_path / "scores.json").is_file()
    # then the next block, verbatim, in the same fresh directory (results/ does not exist yet)
    block = re.search(r"```bash\n(cbench bench --cases main.*?)```", README, flags=re.DOTALL).group(1)
    assert not (tmp_path / "results").exists()
    for line in block.strip().splitlines():
        cmd = line.split("  #")[0].strip()
        proc = subprocess.run(["bash", "-ec", cmd], check=False, capture_output=True, text=True, env=env, cwd=tmp_path,
                              timeout=3000)
        assert proc.returncode == 0, (cmd, proc.stderr[-2000:])
    assert (tmp_path / "results" / "bench" / "results.json").is_file()
    assert (tmp_path / "results" / "site" / "index.html").is_file()


def test_bench_and_report_create_missing_parents_and_say_so(tmp_path):
    """The README's `cbench bench --out results/bench` and `cbench report --html results/site` in a
    fresh directory (fast form: one case, one method): the missing parents are created and named."""
    env = _env(tmp_path / "home")
    cbench = str(Path(sys.executable).with_name("cbench"))
    proc = subprocess.run([cbench, "bench", "--cases", "3", "--methods", "random", "--n-examples", "8", "--out",
                           "results/bench"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "created results, results/bench for --out results/bench" in proc.stderr
    proc = subprocess.run([cbench, "report", "results/bench", "--html", "out/site/html"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "created out, out/site, out/site/html for --html out/site/html" in proc.stderr
    assert (tmp_path / "out" / "site" / "html" / "index.html").is_file()
    # a path under a file is still refused before any work, and nothing is created
    (tmp_path / "afile").write_text("x")
    proc = subprocess.run([cbench, "bench", "--cases", "3", "--methods", "random", "--out", "afile/sub/dir"],
                          capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "afile").is_dir()
