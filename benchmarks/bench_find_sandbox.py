"""Cost of the FIND sandbox (issue 33): scoring FIND's 2,000 submissions behind bubblewrap
against the runner it replaced.

Goal: no more than 2x the replaced runner's wall time (265 s on 2 cores in the README's full
run). Both runners get the same jobs (built as :func:`cbench.find.scoring.score` builds them)
and the same limits; each is timed as wall time and as CPU time of this process and of its
children (bwrap, the supervisors and every forked entry are waited for, so their CPU time
lands in ``RUSAGE_CHILDREN``). The replaced runner is taken from git history
(``git show REV:client/cbench/find/sandbox.py`` and its ``_sandbox_child.py``, default REV
``439abc1``, the last commit before the change) and run from a temporary directory; it is
only measured, never used for scoring. Each runner first runs the first ``--warmup`` jobs
untimed (its sandbox check is cached per process; whichever ran first otherwise paid for cold
caches); then the runners take the jobs chunk by chunk (``--interleave``, 200 = one batch), in
an order that rotates, and each one's times are summed: on a shared machine the load then falls
on all of them alike. ``--runs new,old,fb77628`` also measures the runner at any other
revision the same way (here the bubblewrap runner before issue 44). The outcomes are compared
too: the same code must succeed or fail the same way under every runner.

Submissions: the no-LM baseline's (``cbench find baseline``), generated here (a few CPU
minutes) unless ``--submissions FILE`` gives a JSON Lines file; ``--save FILE`` keeps the
generated one.

Usage: ``python benchmarks/bench_find_sandbox.py [--suite DIR] [--submissions FILE] [--save FILE]
[--limit N] [--runs new,old] [--warmup N] [--interleave N] [--out results.json]`` (default suite: the release in
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


RUNNER_MODULES = ("sandbox", "_sandbox_child", "_bwrap", "_seccomp", "limits")


def _old_runner(rev: str, tmp: Path):
    """The runner as it was at ``rev`` (sandbox.py and the modules it runs: _sandbox_child.py and,
    where they exist, _bwrap.py, _seccomp.py, limits.py), importable on its own as a package of
    its own (its ``cbench.find.<module>`` imports pointed at the copies)."""
    import re

    pkg = "cbench_old_find_" + re.sub(r"\W", "_", rev)
    root = tmp / pkg
    root.mkdir()
    (root / "__init__.py").write_text("")
    names = subprocess.run(["git", "ls-tree", "--name-only", rev, "client/cbench/find/"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split()
    here = [m for m in RUNNER_MODULES if f"client/cbench/find/{m}.py" in names]
    for m in here:
        text = subprocess.run(["git", "show", f"{rev}:client/cbench/find/{m}.py"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        for other in here:
            text = text.replace(f"from cbench.find.{other} import", f"from {pkg}.{other} import")
            text = text.replace(f"from cbench.find import {other}", f"from {pkg} import {other}")
        (root / f"{m}.py").write_text(text)
    sys.path.insert(0, str(tmp))
    try:
        return importlib.import_module(f"{pkg}.sandbox")
    finally:
        sys.path.remove(str(tmp))


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
    ap.add_argument("--runs", default="new,old", help="which runners, in order: new, old (--old-rev) or any git "
                                                       "revision (its runner, e.g. the one before an issue)")
    ap.add_argument("--old-rev", default=OLD_REV)
    ap.add_argument("--warmup", type=int, default=20,
                    help="run each runner untimed on the first N jobs first (its boundary check, cold caches)")
    ap.add_argument("--interleave", type=int, default=200,
                    help="time the runners chunk by chunk, N jobs each, in rotating order (0: each on all jobs)")
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
    names = [r.strip() for r in args.runs.split(",") if r.strip()]
    with tempfile.TemporaryDirectory(prefix="cbench-bench-old-") as tmp:
        runners, labels = {}, {}
        for run in names:
            if run == "new":
                boundary = resolve_boundary(False, [str(suite.root)])
                runners[run] = lambda js, b=boundary: run_submissions(js, grid, limits, boundary=b,
                                                                      private_paths=[str(suite.root)])
                labels[run] = guarantees(boundary)["boundary"]
                continue
            rev = args.old_rev if run == "old" else run
            try:
                old = _old_runner(rev, Path(tmp))
            except subprocess.CalledProcessError:
                raise SystemExit(f"unknown run {run!r} (new, old or a git revision)") from None
            runners[run] = lambda js, m=old: m.run_submissions(js, grid, m.Limits())
            labels[run] = (f"the replaced runner ({rev}: audit hook, rlimits, unshare -n)" if run == "old"
                           else f"the runner at {rev}")
        for run in names:
            if args.warmup:
                runners[run](jobs[:args.warmup])
        # each runner on each chunk in turn (the order rotating), so that the load of a shared
        # machine falls on every runner alike; --interleave 0: each runner on all jobs in turn
        size = args.interleave or len(jobs)
        chunks = [jobs[i:i + size] for i in range(0, len(jobs), size)]
        loads = {run: [] for run in names}
        for i, chunk in enumerate(chunks):
            order = names[i % len(names):] + names[:i % len(names)]
            for run in order:
                loads[run].append(os.getloadavg()[0])
                out, t = _timed(lambda: runners[run](chunk))
                outcomes.setdefault(run, {}).update(out)
                acc = report["runs"].setdefault(run, {"wall_s": 0.0, "children_cpu_s": 0.0, "self_cpu_s": 0.0})
                for k in acc:
                    acc[k] = round(acc[k] + t[k], 1)
        for run in names:
            t = report["runs"][run]
            t["boundary"] = labels[run]
            t["load_average_mean"] = round(sum(loads[run]) / len(loads[run]), 2)
            t.update(_summary(outcomes[run]))
            print(run, json.dumps(t), file=sys.stderr)
        report["chunks"] = len(chunks)
    new = outcomes.get("new")
    for run, old in outcomes.items():
        if run == "new" or new is None:
            continue
        suffix = "" if run == "old" else f"_{run}"
        report["same_outcomes" + suffix] = sum(new[k].ok == old[k].ok and (not new[k].ok or new[k].outputs ==
                                                                           old[k].outputs) for k in new)
        report["differences" + suffix] = [{"id": k, "new": new[k].reason, run: old[k].reason} for k in new
                                          if new[k].ok != old[k].ok or (new[k].ok and new[k].outputs != old[k].outputs)
                                          ][:20]
        report[f"wall_ratio_new_over_{run}"] = round(report["runs"]["new"]["wall_s"] /
                                                     max(report["runs"][run]["wall_s"], 1e-9), 2)
    print(json.dumps(report, indent=2))
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return report


if __name__ == "__main__":
    main()
