"""How many input pairs ``cbench discover`` needs: the smallest n whose scores match the full split's.

For each case and method, the method runs on the first n pairs of the case's counterfactual
validation split (what ``cbench discover --n-examples n`` uses) for every n of ``--ns`` and on the
whole split (up to 4,000 pairs: the default before this measurement). Against the whole split's
run, each n reports:

* the Spearman rank correlation of the edge scores (signed; ``spearman``) and of |score|
  (``spearman_abs``, the ranking edge AUROC uses),
* the change of edge AUROC against the ground truth (``d_auroc``, |AUROC(n) - AUROC(full)|).

An n is stable when, for every case and method, ``d_auroc <= 0.005`` and ``spearman_abs >= 0.99``
(``--max-d-auroc``, ``--min-rho``); the figure printed last is the smallest stable n. Edges whose
scores are all exactly tied (e.g. zero everywhere) carry no ranking, so a correlation over a
constant vector counts as 1 when both runs agree exactly and 0 otherwise.

Resumable: every run's scores are kept under ``--cache`` (one .npy per case, method and n), so a
killed run continues where it stopped. One CPU thread, as the CLI uses.

Usage: ``nice -n 10 python benchmarks/bench_discover_pairs.py [--cases 3,13,18]
[--methods eap,eap-ig-inputs,acdc,activation-patching] [--ns 25,50,100,200,500,1000,2000]
[--cache /tmp/cbench-pairs] [--out benchmarks/results/discover_pairs.json]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return 1.0 if np.array_equal(a, b) else 0.0
    return float(spearmanr(a, b).statistic)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="3,13,18")
    ap.add_argument("--methods", default="eap,eap-ig-inputs,acdc,activation-patching")
    ap.add_argument("--ns", default="25,50,100,200,500,1000,2000")
    ap.add_argument("--cache", default="/tmp/cbench-pairs")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "discover_pairs.json"))
    ap.add_argument("--max-d-auroc", type=float, default=0.005)
    ap.add_argument("--min-rho", type=float, default=0.99)
    args = ap.parse_args(argv)

    from cbench.discovery import discover
    from cbench.hub.loading import load
    from cbench.runtime import CircuitRuntime
    from cbench.runtime.threads import use_cpu_threads
    from cbench.scoring.ground_truth import circuit_edge_names, score_against_truth
    from cbench.tasks.data import load_task_data

    use_cpu_threads()
    cache = Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    ns = [int(x) for x in args.ns.split(",")]
    rows = []
    for case in args.cases.split(","):
        art = load(f"case-{case}")
        full = load_task_data(art.case, art.meta)
        rt = CircuitRuntime(art)
        truth = circuit_edge_names(art.graph, art.circuit)
        sizes = [n for n in ns if n < full.n_examples] + [full.n_examples]
        for method in args.methods.split(","):
            scores, seconds = {}, {}
            for n in sizes:
                f = cache / f"{case}_{method}_{n}.npy"
                t = cache / f"{case}_{method}_{n}.time"
                if not f.is_file():
                    t0 = time.perf_counter()
                    res = discover(rt, full.subset(n), method, progress=False)
                    t.write_text(f"{time.perf_counter() - t0:.3f}")
                    np.save(f, res.scores)
                scores[n], seconds[n] = np.load(f), float(t.read_text()) if t.is_file() else None
                print(f"case {case} {method} n={n}: {seconds[n]} s", file=sys.stderr, flush=True)

            def auroc(s, art=art, method=method, truth=truth):
                doc = {"edges": {name: {"score": float(v), "in_graph": False}
                                 for name, v in zip(art.graph.edge_names, s)}, "method": {"name": method}}
                return score_against_truth(art.graph, doc, truth).edge_auroc

            ref = scores[full.n_examples]
            a_ref = auroc(ref)
            for n in sizes:
                rows.append({"case": case, "method": method, "n": n, "n_full": full.n_examples,
                             "spearman": spearman(scores[n], ref),
                             "spearman_abs": spearman(np.abs(scores[n]), np.abs(ref)),
                             "auroc": auroc(scores[n]), "auroc_full": a_ref,
                             "d_auroc": abs(auroc(scores[n]) - a_ref), "seconds": seconds[n]})
    stable = None
    for n in ns:
        at = [r for r in rows if r["n"] == min(n, r["n_full"])]
        if at and all(r["d_auroc"] <= args.max_d_auroc and r["spearman_abs"] >= args.min_rho for r in at):
            stable = n
            break
    out = {"cases": args.cases.split(","), "methods": args.methods.split(","), "ns": ns,
           "criterion": {"max_d_auroc": args.max_d_auroc, "min_spearman_abs": args.min_rho},
           "smallest_stable_n": stable, "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print("| case | method | n | Spearman | Spearman abs | AUROC | AUROC full | s |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['case']} | {r['method']} | {r['n']} | {r['spearman']:.4f} | {r['spearman_abs']:.4f} | "
              f"{r['auroc']:.4f} | {r['auroc_full']:.4f} | {r['seconds'] if r['seconds'] is not None else '–'} |")
    print(f"smallest stable n (|dAUROC| <= {args.max_d_auroc}, Spearman |score| >= {args.min_rho}): {stable}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
