"""Cost of the FIND sandbox (issue 33): scoring FIND's 2,000 submissions behind bubblewrap
against the runner it replaced.

Goal: no more than 2x the replaced runner's wall time (265 s on 2 cores in the README's full
run). Both runners get the same jobs (built as :func:`cbench.find.scoring.score` builds them)
and the same limits; each is timed as wall time and as CPU time of this process and of its
children (bwrap, the supervisors and every forked entry are waited for, so their CPU time
lands in ``RUSAGE_CHILDREN``). The replaced runner is taken from git history
(``git show REV:client/cbench/find/sandbox.py`` and its ``_sandbox_child.py``, default REV
``439abc1``, the last commit before the change) and run from a temporary directory; it is
only measured, never used for scoring. The outcomes of both are compared too: the same code
must succeed or fail the same way.

Submissions: the no-LM baseline's (``cbench find baseline``), generated here (a few CPU
minutes) unless ``--submissions FILE`` gives a JSON Lines file; ``--save FILE`` keeps the
generated one.

Usage: ``python benchmarks/bench_find_sandbox.py [--suite DIR] [--submissions FILE] [--save FILE]
[--limit N] [--runs new,old] [--out results.json]`` (default suite: the release in
``model_zoo/releases/datasets/cbench/find``, else pulled as ``cbench/find``).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "find"
OLD_REV = "439abc1"


def _suite(path):
    from cbench.find.suite import load_suite

    if path:
        return load_suite(path)
    releases = sorted(RELEASE.glob("v*")) if RELEASE.is_dir() else []
    return load_suite(releases[-1]) if releases else load_suite()


def _old_runner(rev: str, tmp: Path):
    """The runner as it was at ``rev`` (sandbox.py + _sandbox_child.py), importable on its own."""
    for name in ("sandbox.py", "_sandbox_child.py"):
        text = subprocess.run(["git", "show", f"{rev}:client/cbench/find/{name}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (tmp / name).write_text(text)
    spec = importlib.util.spec_from_file_location("cbench_old_find_sandbox", tmp / "sandbox.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _jobs(suite, entries):
    from cbench.find.scoring import sandbox_jobs

    return sandbox_jobs(suite, entries)


def _timed(fn):
    c0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    out = fn()
    wall = time.perf_counter() - t0
    c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    s1 = resource.getrusage(resource.RUSAGE_SELF)
    return out, {"wall_s": round(wall, 1),
                 "children_cpu_s": round((c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime), 1),
                 "self_cpu_s": round((s1.ru_utime + s1.ru_stime) - (s0.ru_utime + s0.ru_stime), 1)}


def _summary(outcomes) -> dict:
    ok = sum(o.ok for o in outcomes.values())
    reasons: dict = {}
    for o in outcomes.values():
        if not o.ok:
            key = (o.reason or "").split(" (")[0][:60]
            reasons[key] = reasons.get(key, 0) + 1
    return {"entries": len(outcomes), "ran": ok, "failed": len(outcomes) - ok,
            "failure_reasons": dict(sorted(reasons.items(), key=lambda kv: -kv[1]))}


def main(argv=None) -> dict:
    from cbench.find import functions as F
    from cbench.find.sandbox import Limits, guarantees, resolve_boundary, run_submissions

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", default=None)
    ap.add_argument("--submissions", default=None, help="JSON Lines submission to score (default: run the baseline)")
    ap.add_argument("--save", default=None, help="write the generated baseline submission here")
    ap.add_argument("--limit", type=int, default=None, help="first N functions of each config")
    ap.add_argument("--runs", default="new,old", help="which runners, in order (new, old)")
    ap.add_argument("--old-rev", default=OLD_REV)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    suite = _suite(args.suite)
    if args.submissions:
        entries = [json.loads(line) for line in Path(args.submissions).read_text().splitlines() if line.strip()]
    else:
        from cbench.find.baseline import run_baseline

        ids = [i for c in ("numeric", "strings") for i in (suite.ids(c)[: args.limit] if args.limit else suite.ids(c))]
        t0 = time.process_time()
        entries = run_baseline(suite, ids)
        print(f"baseline: {len(entries)} entries in {time.process_time() - t0:.1f} CPU s", file=sys.stderr)
        if args.save:
            Path(args.save).write_text("".join(json.dumps(e) + "\n" for e in entries))
    if args.limit:
        keep = {i for c in ("numeric", "strings") for i in suite.ids(c)[: args.limit]}
        entries = [e for e in entries if e["id"] in keep]
    jobs = _jobs(suite, entries)
    grid = F.test_grid().tolist()
    limits = Limits()
    report: dict = {"entries": len(jobs), "cpus": os.cpu_count(), "limits": vars(limits), "runs": {}}
    outcomes: dict = {}
    with tempfile.TemporaryDirectory(prefix="cbench-bench-old-") as tmp:
        for run in [r.strip() for r in args.runs.split(",") if r.strip()]:
            load0 = os.getloadavg()[0]
            if run == "new":
                boundary = resolve_boundary(False, [str(suite.root)])
                out, t = _timed(lambda: run_submissions(jobs, grid, limits, boundary=boundary,
                                                        private_paths=[str(suite.root)]))
                t["boundary"] = guarantees(boundary)["boundary"]
            elif run == "old":
                old = _old_runner(args.old_rev, Path(tmp))
                out, t = _timed(lambda: old.run_submissions(jobs, grid, old.Limits()))
                t["boundary"] = f"the replaced runner ({args.old_rev}: audit hook, rlimits, unshare -n)"
            else:
                raise SystemExit(f"unknown run {run!r} (new, old)")
            t["load_average_at_start"] = round(load0, 2)
            t.update(_summary(out))
            report["runs"][run] = t
            outcomes[run] = out
            print(run, json.dumps(t), file=sys.stderr)
    if "new" in outcomes and "old" in outcomes:
        new, old = outcomes["new"], outcomes["old"]
        report["same_outcomes"] = sum(new[k].ok == old[k].ok and (not new[k].ok or new[k].outputs == old[k].outputs)
                                      for k in new)
        report["differences"] = [{"id": k, "new": new[k].reason, "old": old[k].reason} for k in new
                                 if new[k].ok != old[k].ok or (new[k].ok and new[k].outputs != old[k].outputs)][:20]
        report["wall_ratio_new_over_old"] = round(report["runs"]["new"]["wall_s"] / max(report["runs"]["old"]["wall_s"],
                                                                                        1e-9), 2)
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return report


if __name__ == "__main__":
    main()
