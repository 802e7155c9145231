"""``cbench verify`` over every released stress model, as a user runs it: a fresh ``CBENCH_HOME``
(the embedded hub seeded from this checkout's ``model_zoo``), ``cbench pull NAME`` then
``cbench verify NAME --json``, each in its own process. Prints one line per model (gates held,
wall and CPU seconds) and a JSON summary; exits 1 when any gate of any model fails.

Usage: ``python benchmarks/verify_stress.py [--models stress-or-1,...] [--n-pairs 1000]``.
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

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cbench.cli"]


def released_stress_models() -> list[str]:
    return sorted(p.name for p in (ROOT / "model_zoo" / "releases" / "models" / "cbench").glob("stress-*"))


def run(cmd: list[str], env: dict) -> tuple[subprocess.CompletedProcess, float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return proc, wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: every released stress model)")
    ap.add_argument("--n-pairs", type=int, default=1000)
    args = ap.parse_args(argv)
    models = [m for m in args.models.split(",") if m] or released_stress_models()
    rows, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="cbench-verify-stress-") as tmp:
        env = dict(os.environ, CBENCH_HOME=str(Path(tmp) / "home"), HF_HUB_DISABLE_TELEMETRY="1")
        for name in models:
            pulled, _, _ = run([*CLI, "pull", name], env)
            if pulled.returncode != 0:
                rows.append({"model": name, "pulled": False, "error": pulled.stderr.strip()[-300:]})
                failed += 1
                print(f"{name}: pull failed: {pulled.stderr.strip()[-200:]}", flush=True)
                continue
            proc, wall, cpu = run([*CLI, "verify", name, "--json", "--n-pairs", str(args.n_pairs)], env)
            try:
                report = json.loads(proc.stdout)
            except json.JSONDecodeError:
                report = {}
            gates = report.get("gates", [])
            held = sum(1 for g in gates if g.get("passed", g.get("ok")))
            ok = proc.returncode == 0
            failed += not ok
            rows.append({"model": name, "passed": ok, "gates": len(gates), "held": held, "wall_s": round(wall, 1),
                         "cpu_s": round(cpu, 1)})
            print(f"{name}: {'PASS' if ok else 'FAIL'} {held}/{len(gates)} gates, {wall:.0f} s wall, {cpu:.0f} s CPU",
                  flush=True)
            if not ok:
                print(proc.stdout[-1500:] + proc.stderr[-1500:], flush=True)
    print(json.dumps({"models": rows, "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
