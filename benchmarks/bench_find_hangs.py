"""What hanging entries cost the FIND sandbox (issue 44): a batch with k entries that try to
keep the supervisor waiting, beside a few ordinary ones, timed for several k.

Each hanging entry is one of four (cycled): it closes its result descriptor and sleeps; closes
it and stops itself (SIGSTOP); stops itself with the descriptor open; closes it and spins with
SIGXCPU ignored. Before issue 44 the first two left the supervisor waiting without a deadline,
so each cost the batch's whole budget (30 s + (wall + 1 s) per entry) and then a rerun alone;
now each is stopped at its own wall-clock limit. The report gives the wall time per k, the
cost per hanging entry over the k = 0 run (goal: about ``--wall-s``), whether every ordinary
entry gave the same outputs as when it runs alone, and how many supervisors were started (one
per batch when none died).

Usage: ``python benchmarks/bench_find_hangs.py [--wall-s 2] [--ks 0,1,2,4,8] [--ordinary 4]
[--out results.json]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HANGS = {
    "closed_then_sleep": "import os, time\nos.close(3)\ntime.sleep(1000)\n",
    "closed_then_stopped": "import os, signal\nos.close(3)\nsignal.raise_signal(signal.SIGSTOP)\n",
    "stopped": "import signal\nsignal.raise_signal(signal.SIGSTOP)\n",
    "closed_then_spin": "import os, signal\nos.close(3)\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                        "while True:\n    pass\n",
}
ORDINARY = "def f(x):\n    return {k} * x + 1\n"


def main(argv=None) -> dict:
    from cbench.find import sandbox as S
    from cbench.find.sandbox import Limits, run_submissions

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--wall-s", type=float, default=2.0)
    ap.add_argument("--ks", default="0,1,2,4,8", help="numbers of hanging entries, comma-separated")
    ap.add_argument("--ordinary", type=int, default=4, help="ordinary entries in each batch")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    limits = Limits(wall_s=args.wall_s)  # default CPU (5 s) and memory limits, as `cbench find score`
    inputs = [0.0, 1.0, -2.5]
    ordinary = [{"key": f"ok{i}", "kind": "numeric", "code": ORDINARY.format(k=i + 1)} for i in range(args.ordinary)]
    alone = {e["key"]: run_submissions([e], inputs, limits)[e["key"]] for e in ordinary}
    starts: list = []
    real = S._run_batch

    def counted(entries, *a, **kw):
        starts.append(len(entries))
        return real(entries, *a, **kw)

    S._run_batch = counted
    report: dict = {"wall_s": args.wall_s, "cpus": os.cpu_count(), "runs": []}
    try:
        for k in [int(x) for x in args.ks.split(",") if x.strip()]:
            ways = list(HANGS)
            hanging = [{"key": f"hang{i}-{ways[i % len(ways)]}", "kind": "numeric", "code": HANGS[ways[i % len(ways)]]}
                       for i in range(k)]
            entries = []  # ordinary and hanging entries interleaved
            for i in range(max(len(ordinary), k)):
                entries += ordinary[i:i + 1] + hanging[i:i + 1]
            starts.clear()
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            out = run_submissions(entries, inputs, limits)
            wall = time.perf_counter() - t0
            run = {"k": k, "entries": len(entries), "wall_s": round(wall, 2), "supervisors": len(starts),
                   "load_average_at_start": round(load, 2),
                   "hanging_stopped_at_wall_limit": sum(out[h["key"]].reason == f"ran longer than {args.wall_s} s "
                                                        "(stopped)" for h in hanging),
                   "ordinary_as_if_alone": all(out[e["key"]] == alone[e["key"]] for e in ordinary),
                   "batch_budget_s": 30 + len(entries) * (args.wall_s + 1)}
            report["runs"].append(run)
            print(json.dumps(run), file=sys.stderr)
    finally:
        S._run_batch = real
    base = next((r["wall_s"] for r in report["runs"] if r["k"] == 0), None)
    if base is not None:
        for r in report["runs"]:
            if r["k"]:
                r["cost_per_hanging_entry_s"] = round((r["wall_s"] - base) / r["k"], 2)
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return report


if __name__ == "__main__":
    main()
