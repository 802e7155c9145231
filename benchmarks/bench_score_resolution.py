"""The measurements behind the scoring floor (cbench.scoring.resolution, docs/scoring.md).

Each deterministic method runs on the same pairs twice, once with the released float32 model and
once with the same weights in float64. The float64 run stands in for exact arithmetic, so per
(model, method) this reports, in units of eps32 x max|score| (eps32 = 1.19e-7):

* ``err``: the largest |float32 - float64| difference over the edges (the rounding error of the
  float32 computation where it is smooth; far larger where the model has a kink or a saturated
  softmax whose gradient underflows in float32, which is a different effect, not rounding);
* ``zero_resid``: the largest |float32 score| among edges whose float64 score is 0 (to 1e-12 of
  the largest): how far the rounding residue of an edge without effect reaches;
* ``n_zero``: how many such edges there are, and ``zero32_nonzero`` how many of them float32 gives
  a non-zero score;
* ``truth_below``: ground-truth edges whose float64 |score| lies below the floor
  (64 x eps32 x max|score|): real effects that float32 cannot resolve.

    python benchmarks/bench_score_resolution.py --cases stress --methods eap,eap-ig-inputs \\
        --out benchmarks/results/score-resolution.json

``--cases``: ``main``, ``stress``, ``ioi`` or a comma list of model names. Runs one thread.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

METHODS = "eap,eap-ig-inputs,eap-ig-activations,atp-star,activation-patching,nap,nap-ig,ifr"
EPS32 = float(np.finfo(np.float32).eps)


def _cases(arg: str) -> list[str]:
    from cbench.hub.zoo import zoo_releases
    from cbench.scoring.bench import MAIN_CASES

    out = []
    for part in arg.split(","):
        if part == "main":
            out += [f"case-{c}" for c in MAIN_CASES]
        elif part == "stress":
            out += sorted(r.repo_id.split("/")[-1] for r in zoo_releases()
                          if r.repo_type == "model" and r.repo_id.split("/")[-1].startswith("stress-"))
        elif part:
            out.append(part)
    return out


def measure(case: str, methods: list[str], n: int) -> list[dict]:
    import torch

    from cbench.api.inputs import resolve_case
    from cbench.discovery import discover
    from cbench.scoring.ground_truth import circuit_edge_names
    from cbench.scoring.resolution import RESOLUTION_FACTOR
    from cbench.tasks.data import load_task_data

    art = resolve_case(case).artifact
    data = load_task_data(art.case, art.meta, split="validation", n_examples=n)
    truth = set(circuit_edge_names(art.graph, art.circuit)) if art.circuit else set()
    m32, m64 = art.load_model(), art.load_model().to(torch.float64)
    rows = []
    for method in methods:
        t0 = time.perf_counter()
        r32 = discover(m32, data, method, progress=False)
        r64 = discover(m64, data, method, progress=False)
        names = r32.graph.edge_names
        s32 = np.asarray(r32.scores, dtype=np.float64)
        s64 = np.asarray(r64.scores, dtype=np.float64)
        mx = float(np.abs(s64).max()) or 1.0
        zero = np.abs(s64) <= 1e-12 * mx
        is_truth = np.array([n in truth for n in names])
        floor = RESOLUTION_FACTOR * EPS32 * mx
        rows.append({
            "case": case, "method": method, "n_edges": len(names), "max_abs_score": mx,
            "err": float(np.abs(s32 - s64).max() / mx / EPS32),
            "zero_resid": float(np.abs(s32[zero]).max() / mx / EPS32) if zero.any() else 0.0,
            "n_zero": int(zero.sum()), "zero32_nonzero": int((zero & (s32 != 0)).sum()),
            "truth_below": int((is_truth & ~zero & (np.abs(s64) < floor)).sum()),
            "seconds": round(time.perf_counter() - t0, 2)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def summary(rows: list[dict]) -> str:
    lines = ["| method | runs | err median | err 90th pct | err max | zero residue max | exact-zero edges "
             "non-zero in float32 | truth edges below the floor |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for m in dict.fromkeys(r["method"] for r in rows):
        rs = [r for r in rows if r["method"] == m]
        err = np.array([r["err"] for r in rs])
        lines.append(f"| {m} | {len(rs)} | {np.median(err):.2f} | {np.percentile(err, 90):.1f} | {err.max():.0f} | "
                     f"{max(r['zero_resid'] for r in rs):.3f} | {sum(r['zero32_nonzero'] for r in rs)} of "
                     f"{sum(r['n_zero'] for r in rs)} | {sum(r['truth_below'] for r in rs)} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default="main,stress,ioi")
    p.add_argument("--methods", default=METHODS)
    p.add_argument("--n", type=int, default=100, help="pairs per model (validation split)")
    p.add_argument("--out", type=Path, default=None, help="a JSON file for the rows (and .md beside it)")
    a = p.parse_args(argv)
    import torch

    torch.set_num_threads(1)
    from cbench.errors import CbenchError

    rows = []
    try:
        for case in _cases(a.cases):
            rows += measure(case, a.methods.split(","), a.n)
    except CbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    table = summary(rows)
    print(table)
    if a.out:
        a.out.write_text(json.dumps(rows, indent=1) + "\n")
        a.out.with_suffix(".md").write_text(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
