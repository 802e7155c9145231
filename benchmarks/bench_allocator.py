"""glibc's malloc defaults against :func:`cbench.runtime.allocator.tune` on one `cbench verify` run.

Runs :func:`cbench.verify.artifact.verify_artifact` on a model artifact twice in this process (after a
10-pair warm-up, so both runs find the data loaded): first with
the allocator as the process found it (run with ``CBENCH_MALLOC=default`` semantics: nothing
tuned), then after :func:`cbench.runtime.allocator.tune`. Prints wall, user and system seconds and minor
page faults of each run (``getrusage``), the ratio, and checks the two reports agree gate by gate.

Usage::

    python benchmarks/bench_allocator.py ARTIFACT_DIR [--n-pairs 50] [--out benchmarks/results/allocator.md]
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path


def _timed(fn):
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    out = fn()
    r1, t1 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    return out, {"wall_s": t1 - t0, "user_s": r1.ru_utime - r0.ru_utime, "sys_s": r1.ru_stime - r0.ru_stime,
                 "minor_faults": r1.ru_minflt - r0.ru_minflt, "peak_rss_mb": r1.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact", type=Path)
    ap.add_argument("--n-pairs", type=int, default=50)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    import torch

    from cbench.runtime.allocator import tune
    from cbench.artifacts.model import read_model_artifact
    from cbench.verify.artifact import verify_artifact

    torch.set_num_threads(1)
    art = read_model_artifact(args.artifact)
    run = lambda: verify_artifact(art, n_pairs=args.n_pairs, offline=True)  # noqa: E731
    verify_artifact(art, n_pairs=10, offline=True)  # warm-up: data loaded, modules imported
    default, d = _timed(run)
    if not tune():
        raise SystemExit("cbench.runtime.allocator.tune() did not apply here (not glibc, or CBENCH_MALLOC=default)")
    tuned, t = _timed(run)
    same = [(g.name, g.pairs, g.value) for g in default.gates] == [(g.name, g.pairs, g.value) for g in tuned.gates]
    lines = [f"`cbench verify` on {art.meta.get('case')} ({args.n_pairs} pairs per set), one torch thread, "
             "same process: glibc's defaults first, then `cbench.runtime.allocator.tune()`.", "",
             "| allocator | wall s | user s | system s | minor page faults | peak RSS MB (process so far) |",
             "|---|---|---|---|---|---|"]
    for name, m in (("glibc defaults", d), ("tuned", t)):
        lines.append(f"| {name} | {m['wall_s']:.1f} | {m['user_s']:.1f} | {m['sys_s']:.1f} | "
                     f"{m['minor_faults']:,} | {m['peak_rss_mb']:.0f} |")
    lines += ["", f"Speed-up (wall): {d['wall_s'] / t['wall_s']:.2f}x; gates identical: {same}."]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
