"""Wall time of every ``cbench ... --help`` (each command and subcommand, read from the click
tree), ``cbench list`` and ``cbench info case-3`` (pulled), each in a fresh process through the
installed ``cbench`` script, against references measured in the same run: ``python -c pass``,
``python -c 'import click'`` and ``python -c 'import torch'`` (issue 49: each under 0.5 s, none
importing torch). Also ``cbench hub serve`` on a fresh home: seconds until its first line and
until it answers ``/api/models`` (goal 5 s; it seeds the zoo in the background).

The median of ``--repeat`` runs (default 5) per command; the load average before and after.

    python benchmarks/bench_help.py [--repeat 5] [--out benchmarks/results/help.json]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CBENCH = str(Path(sys.executable).with_name("cbench"))


def command_paths() -> list[list[str]]:
    """Every command path of the click tree (``[]`` is ``cbench`` itself)."""
    import click

    from cbench.cli import cli

    def walk(cmd, path, ctx):
        yield path
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None:
                    yield from walk(sub, path + [name], click.Context(sub, info_name=name, parent=ctx))

    return list(walk(cli, [], click.Context(cli, info_name="cbench")))


def timed(argv: list[str], env: dict, repeat: int) -> dict:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, env=env, capture_output=True, text=True)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr[-500:]}")
    return {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}


def hub_serve(env: dict) -> dict:
    """Seconds until ``cbench hub serve`` on a fresh home prints its line and answers."""
    t0 = time.perf_counter()
    p = subprocess.Popen([CBENCH, "hub", "serve"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline()
        t_line = time.perf_counter() - t0
        port = int(re.search(r"127\.0\.0\.1:(\d+)", line).group(1))
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/api/models")
        status = conn.getresponse().status
        t_answer = time.perf_counter() - t0
    finally:
        t_stop = time.perf_counter()
        p.send_signal(signal.SIGINT)
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:  # a finding, not a crash of the benchmark
            p.kill()
            p.communicate()
        stopped = time.perf_counter() - t_stop
    return {"first_line_s": round(t_line, 3), "answers_s": round(t_answer, 3), "status": status,
            "stops_after_ctrl_c_s": round(stopped, 3)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    work = tempfile.mkdtemp(prefix="cbench-bench-help-")
    env = dict(os.environ, CBENCH_HOME=os.path.join(work, "home"))
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(k, None)
    load0 = os.getloadavg()
    py = sys.executable
    refs = {"python -c pass": [py, "-c", "pass"], "python -c 'import click'": [py, "-c", "import click"],
            "python -c 'import torch'": [py, "-c", "import torch"]}
    rows = {name: timed(argv, env, a.repeat) for name, argv in refs.items()}
    for name, row in rows.items():
        print(f"{row['median_s']:6.3f} s  {name}  (reference)", flush=True)
    t0 = time.perf_counter()
    subprocess.run([CBENCH, "pull", "case-3"], env=env, check=True, capture_output=True)
    print(f"(cbench pull case-3 into a fresh home: {time.perf_counter() - t0:.1f} s, not counted)", flush=True)
    cmds = {"cbench " + " ".join(path + ["--help"]): [CBENCH, *path, "--help"] for path in command_paths()}
    cmds["cbench list"] = [CBENCH, "list"]
    cmds["cbench info case-3"] = [CBENCH, "info", "case-3"]
    for name, argv in cmds.items():
        rows[name] = timed(argv, env, a.repeat)
        print(f"{rows[name]['median_s']:6.3f} s  {name}", flush=True)
    serve_env = dict(env, CBENCH_HOME=os.path.join(work, "serve-home"))
    serve = hub_serve(serve_env)
    print(f"cbench hub serve on a fresh home: first line {serve['first_line_s']:.2f} s, answers /api/models "
          f"{serve['answers_s']:.2f} s (HTTP {serve['status']}); stops {serve['stops_after_ctrl_c_s']:.2f} s after Ctrl-C")
    ours = {k: v for k, v in rows.items() if k.startswith("cbench")}
    worst = max(ours, key=lambda k: ours[k]["median_s"])
    print(f"slowest: {worst} {ours[worst]['median_s']:.3f} s (median of {a.repeat}); "
          f"{sum(v['median_s'] < 0.5 for v in ours.values())}/{len(ours)} under 0.5 s; "
          f"load average {load0[0]:.2f} before, {os.getloadavg()[0]:.2f} after")
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"repeat": a.repeat, "load_before": load0, "load_after": os.getloadavg(),
                                     "cpus": os.cpu_count(), "commands": rows, "hub_serve": serve}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
