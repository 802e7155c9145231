"""The stress tier's floor gate: every edge outside a circuit patched alone, by the edge-masked
pass (``_Probe.kl`` of one-edge groups, what the gate ran before) and by the fast pass of
:mod:`cbench.verify.edge_patching` (``_Probe.single_kl``), on the same pairs; prints the wall and
CPU seconds of each, the speedup, and the largest difference between their scores.

Usage: ``python benchmarks/bench_stress_floor.py [--model deep-1] [--pairs 100] [--skip-masked]
[--masked-edges N]``. The masked pass of deep-1 takes long on a shared 2-core machine:
``--skip-masked`` times the fast pass alone, ``--masked-edges N`` the masked pass on N edges.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np


def timed(fn):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn()
    return out, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="deep-1", help="a stress design (cbench_builders.stress.registry)")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--skip-masked", action="store_true", help="time the fast pass only")
    ap.add_argument("--masked-edges", type=int, default=0,
                    help="time the masked pass on the first N outside edges only (its cost per edge x all)")
    args = ap.parse_args(argv)

    from cbench_builders.stress.build import circuit_of, meta_of
    from cbench_builders.stress.registry import DESIGNS

    from cbench.runtime.threads import use_cpu_threads
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.mechanisms import _Probe

    use_cpu_threads()
    d = DESIGNS[args.model]()
    model = d.kit.model()
    data = stress_pairs(meta_of(d), "validation", args.pairs)
    probe, t_probe, _ = timed(lambda: _Probe(model, data))
    circuit = circuit_of(d, probe.rt.graph)
    outside = [e.name for e in probe.rt.graph.edges if e.name not in set(circuit["edges"])]
    fast, t_fast, c_fast = timed(lambda: probe.single_kl(outside))
    row = {"model": d.name, "pairs": args.pairs, "outside_edges": len(outside), "probe_s": round(t_probe, 2),
           "fast_wall_s": round(t_fast, 2), "fast_cpu_s": round(c_fast, 2), "floor": float(fast.max()),
           "load": os.getloadavg()[0]}
    if not args.skip_masked:
        n = args.masked_edges or len(outside)
        masked, t_masked, c_masked = timed(lambda: probe.kl([[e] for e in outside[:n]]))
        scale = len(outside) / n  # the masked pass's cost is per edge (batches of 4 at 1,000 pairs)
        row.update({"masked_edges": n, "masked_wall_s": round(t_masked, 2), "masked_cpu_s": round(c_masked, 2),
                    "masked_cpu_s_all_edges": round(c_masked * scale, 1),
                    "speedup_cpu": round(c_masked * scale / max(c_fast, 1e-9), 1),
                    "max_abs_diff": float(np.abs(fast[:n] - masked).max()),
                    "max_rel_diff": float((np.abs(fast[:n] - masked) / np.maximum(np.abs(masked), 1e-12)).max())})
    row["load_after"] = os.getloadavg()[0]
    print(json.dumps(row))
    return 0


if __name__ == "__main__":
    sys.exit(main())
