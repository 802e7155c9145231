"""Wall and CPU time of the stress tier: building it (``cbench build stress``: the sixteen models
with their gates on 1,000 pairs per set) and benching it (``cbench bench --cases stress`` with
every method on 100 pairs).

Goal (issue 34): the bench of the tier with all methods within 10 minutes on 2 cores. Each figure
is the real command in a fresh process with a fresh ``CBENCH_HOME`` (so the bench's first pulls,
hub seeding included, count), one CPU thread per process as the CLI sets by default.

Issue 45: ``--only`` builds a list of models (the designs of ``stress/variants.py``, say) and
``--cases`` benches a list instead of the whole tier; ``--workers`` runs the bench's tasks in that many
processes (the local executor's process pool).

Usage: ``python benchmarks/bench_stress.py [--skip-build] [--pairs 100] [--out DIR] [--only A,B] [--cases stress|A,B] [--workers N]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "cbench.cli"]


def timed(cmd: list[str], env: dict) -> tuple[float, float, int]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
    return wall, cpu, proc.returncode


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--skip-build", action="store_true", help="time only the bench")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--out", type=Path, default=None, help="keep the bench's results here")
    ap.add_argument("--only", default=None, help="build only these models (comma-separated)")
    ap.add_argument("--cases", default="stress", help="what to bench (default: the whole tier)")
    ap.add_argument("--workers", type=int, default=1, help="bench worker processes")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cbench-bench-stress-") as tmp:
        env = dict(os.environ, CBENCH_HOME=str(Path(tmp) / "home"), HF_HUB_DISABLE_TELEMETRY="1")
        if not args.skip_build:
            only = ["--only", args.only] if args.only else []
            wall, cpu, rc = timed([*CLI, "build", "stress", "--out", str(Path(tmp) / "build"), *only], env)
            n = len(args.only.split(",")) if args.only else "every"
            rows.append((f"cbench build stress ({n} models, gates on 2 x 1000 pairs)", wall, cpu, rc))
        out = args.out or Path(tmp) / "bench"
        wall, cpu, rc = timed([*CLI, "bench", "--cases", args.cases, "--out", str(out), "--n-examples",
                               str(args.pairs), "--workers", str(args.workers)], env)
        n = len(args.cases.split(",")) if args.cases != "stress" else "the tier"
        rows.append((f"cbench bench --cases ({n} models; every method, {args.pairs} pairs, "
                     f"{args.workers} worker(s))", wall, cpu, rc))
    print("| step | wall s | CPU s | exit |\n| --- | --- | --- | --- |")
    for name, wall, cpu, rc in rows:
        print(f"| {name} | {wall:.0f} | {cpu:.0f} | {rc} |")
    print(json.dumps({"rows": [dict(zip(("step", "wall_s", "cpu_s", "exit"), r)) for r in rows]}))
    return max(r[3] for r in rows)


if __name__ == "__main__":
    sys.exit(main())
