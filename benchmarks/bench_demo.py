"""`make demo`'s bench + report time: ``cbench demo`` in a fresh process, its phases timed.

The demo pulls the cases from the embedded hub (the pulls are not counted: the goal is the bench
and the report), runs ``cbench bench`` on the 16 main cases with every method on 100 pairs and
writes the HTML report; its last lines say how long each phase took. This script runs it with a
fresh results directory and reports, per phase, the wall time the demo printed, and for the whole
process its CPU time (user + system, children included) and the machine's load average before and
after, since on a shared machine wall time says little by itself.

Goal (issue 35): bench + report <= 60 s on a quiet 2-core machine.

Usage: ``python benchmarks/bench_demo.py [--methods eap,acdc] [--cases 3,4] [--out results.json] [--keep DIR]``
(``CBENCH_HOME`` as set in the environment: a warm cache measures the bench, not the download).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=None, help="the demo's cases (default: the demo's 16)")
    ap.add_argument("--methods", default=None, help="the demo's methods (default: every method of the bench)")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "demo.json"))
    ap.add_argument("--keep", default=None, help="keep the demo's results directory here (a new directory; "
                    "to compare its results.json with another run's)")
    args = ap.parse_args(argv)
    if args.keep and Path(args.keep).exists():
        sys.stderr.write(f"error: --keep {args.keep} exists; give a new directory\n")
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "cbench.cli", "demo", "--out", args.keep or str(Path(tmp) / "demo")]
        if args.cases:
            cmd += ["--cases", args.cases]
        if args.methods:
            cmd += ["--methods", args.methods]
        load_before = os.getloadavg()
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        load_after = os.getloadavg()
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr[-3000:])
        return 1
    m = re.search(r"demo finished in (\d+) s \(pulls (\d+) s, bench (\d+) s, report (\d+) s\)", proc.stdout)
    pulls, bench, report = (int(m.group(i)) for i in (2, 3, 4)) if m else (None, None, None)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc = {"cmd": cmd[3:], "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "pulls_s": pulls, "bench_s": bench,
           "report_s": report, "bench_plus_report_s": None if bench is None else bench + report,
           "cpus": os.cpu_count(), "load_before": [round(x, 1) for x in load_before],
           "load_after": [round(x, 1) for x in load_after],
           "tables_printed": proc.stdout.count("# cbench bench\n")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1) + "\n")
    print(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
