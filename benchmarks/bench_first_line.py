"""Seconds from starting a command to its first output at a terminal (a pseudo-terminal, as a
person sees it), and to its end, for the commands that load torch, a model or pairs (issue 47:
a line within one second). Pulls case-3 into a fresh CBENCH_HOME first.

    python benchmarks/bench_first_line.py [--out benchmarks/results/first-line.json]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import select
import sys
import tempfile
import time
from pathlib import Path

CBENCH = str(Path(sys.executable).with_name("cbench"))
COMMANDS = {
    "discover": ["discover", "case-3", "--method", "eap", "--n-examples", "50", "--out", "s.json"],
    "score": ["score", "case-3", "s.json", "--n-examples", "50"],
    "verify": ["verify", "case-3", "--n-pairs", "50"],
    "bench": ["bench", "--cases", "3", "--methods", "random", "--n-examples", "20", "--out", "results/bench"],
}


def first_output(args: list[str], env: dict, cwd: str) -> tuple[float | None, float]:
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(cwd)
        os.execve(CBENCH, [CBENCH, *args], env)
    first = None
    while True:
        ready, _, _ = select.select([fd], [], [], 600)
        if not ready:
            break
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        if first is None and data.strip():
            first = time.perf_counter() - t0
    os.waitpid(pid, 0)
    return first, time.perf_counter() - t0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cbench-first-line-")
    env = dict(os.environ, CBENCH_HOME=os.path.join(work, "home"))
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(k, None)
    first_output(["pull", "case-3"], env, work)
    rows = {}
    for name, args in COMMANDS.items():
        first, total = first_output(args, env, work)
        rows[name] = {"first_output_s": None if first is None else round(first, 2), "total_s": round(total, 1)}
        print(f"{name}: first output after {rows[name]['first_output_s']} s, done after {rows[name]['total_s']} s")
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
