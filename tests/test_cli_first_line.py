"""Issue 47: a command that loads torch, a model or pairs says so at once when a person is watching
(standard error a terminal), and says nothing extra when its output is captured (so a bad argument
is still one line). The time to that line is measured in benchmarks/bench_first_line.py."""

from __future__ import annotations

import os
import pty
import select
import sys
from pathlib import Path

CBENCH = str(Path(sys.executable).with_name("cbench"))


def _under_a_terminal(args: list[str], env: dict, cwd: Path) -> str:
    pid, fd = pty.fork()
    if pid == 0:  # the child: standard input, output and error are the terminal
        os.chdir(cwd)
        os.execve(CBENCH, [CBENCH, *args], env)
    out = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 300)
        if not ready:
            break
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        out += data
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, out.decode(errors="replace")[-2000:]
    return out.decode(errors="replace")


def test_discover_says_what_it_loads_first_at_a_terminal_and_not_in_a_pipe(tmp_path, monkeypatch, capsys):
    import cbench
    from cbench.cli import main

    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_HUB_OFFLINE"):
        monkeypatch.delenv(k, raising=False)
    cbench.pull("case-3")
    env = dict(os.environ)
    args = ["discover", "case-3", "--method", "random", "--n-examples", "4", "--out", "s.json"]
    text = _under_a_terminal(args, env, tmp_path)
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[0] == "cbench discover: loading torch, the model and its pairs ...", lines[:3]
    assert (tmp_path / "s.json").is_file()
    monkeypatch.chdir(tmp_path)
    assert main([*args[:-1], "s2.json"]) == 0  # captured standard error: no such line
    assert "loading" not in capsys.readouterr().err
