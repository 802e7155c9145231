"""CPU cost of the FIND baseline interpreter and of sandboxed scoring, over the whole suite.

Goal (issue 22): the baseline's full run over the 2,000 functions takes a few CPU minutes.
CPU time (``time.process_time``, this process only) is reported per config together with a
ratio against a reference workload timed in the same process (5,000 least-squares fits of a
513x4 system: the baseline's inner operation), so the figure can be compared across machines
and load. Scoring runs the submitted code in the sandbox (child processes), so its cost is
reported as wall time and child CPU time.

Usage: ``python benchmarks/bench_find_baseline.py [--suite DIR] [--limit N] [--out results.json]``
(default: the suite pulled as ``cbench/find``).
"""

from __future__ import annotations

import argparse
import json
import resource
import time

import numpy as np


def reference_seconds(n: int = 5000) -> float:
    rng = np.random.default_rng(0)
    A = rng.normal(size=(513, 4))
    y = rng.normal(size=513)
    t0 = time.process_time()
    for _ in range(n):
        np.linalg.lstsq(A, y, rcond=None)
    return time.process_time() - t0


def main(argv=None) -> dict:
    from cbench.find.baseline import run_baseline
    from cbench.find.scoring import format_table, score
    from cbench.find.suite import load_suite

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default=None)
    ap.add_argument("--limit", type=int, default=None, help="first N functions of each config")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    suite = load_suite(args.suite)
    ref = reference_seconds()
    report: dict = {"reference_cpu_s": round(ref, 3), "configs": {}}
    entries = []
    for config in ("numeric", "strings"):
        ids = suite.ids(config)[: args.limit] if args.limit else suite.ids(config)
        t0 = time.process_time()
        got = run_baseline(suite, ids)
        cpu = time.process_time() - t0
        entries += got
        report["configs"][config] = {"functions": len(ids), "cpu_s": round(cpu, 2),
                                     "cpu_ms_per_function": round(1000 * cpu / max(len(ids), 1), 1),
                                     "ratio_to_reference": round(cpu / ref, 2),
                                     "calls_per_function": round(sum(e["calls"] for e in got) / max(len(got), 1), 1)}
    report["baseline_cpu_s_total"] = round(sum(c["cpu_s"] for c in report["configs"].values()), 2)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    res = score(suite, {"schema": "cbench/find-submission/v1", "entries": entries})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report["scoring"] = {"wall_s": round(time.perf_counter() - t0, 1),
                         "child_cpu_s": round((after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime), 1)}
    report["summary"] = res["summary"]
    print(format_table(res))
    print(json.dumps({k: v for k, v in report.items() if k != "summary"}, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"report": report, "results": res}, f, indent=1, sort_keys=True)
    return report


if __name__ == "__main__":
    main()
