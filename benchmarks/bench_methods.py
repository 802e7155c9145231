"""NAP, NAP-IG, IFR, UGS and optimal ablation: cbench's runtime against the straightforward
hook-based references of ``hook_reference.py``, in the same process, on the same pairs.

Each pair of runs is checked for agreement (the assertion the tests make, on bigger inputs) and
timed the same way as ``bench_discovery.py``: the best of ``--repeat`` runs of the CPU time of
this process (``time.process_time``), one torch thread, a garbage collection before each run.
cbench's time is the whole ``discover`` call (clean and ablated runs included); the
reference's is its whole function. Optimal ablation is timed as the per-node replacement losses
of all nodes (one batched pass against one hooked pass per node), the inner loop of its training.

Models: the released SIIT case-3 artifact and a random model of SIIT-like size (3 layers x 4
heads, d_model 48, MLPs). Inputs: deterministic sampled pairs (100 by default; UGS 20 steps).
Run: ``.venv/bin/python benchmarks/bench_methods.py [--n-examples 100] [--repeat 3] [--json out.json]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_discovery import random_pairs, released, siit_like_model  # noqa: E402
from hook_reference import (reference_ifr, reference_nap, reference_node_replacement_loss,  # noqa: E402
                            reference_ugs)

from cbench.discovery import discover  # noqa: E402
from cbench.discovery.base import prepare  # noqa: E402
from cbench.tasks.metrics import make_metric  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402
from cbench.runtime.optimal_ablation import node_losses  # noqa: E402
from cbench.tasks.data import sample_pairs  # noqa: E402

UGS = {"steps": 20, "lr": 0.1, "lambda_reg": 0.1, "init": 1.0, "seed": 0}


def best_cpu(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def check(ours, ref, what):
    ours, ref = np.asarray(ours, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    tol = 1e-4 * max(1.0, float(np.abs(ref).max()))
    err = float(np.abs(ours - ref).max())
    if err > tol:
        raise SystemExit(f"{what}: cbench and the reference disagree (max difference {err:.3g})")
    return err


def bench_model(label, model, data, repeat):
    rt = CircuitRuntime(model)
    g = rt.graph
    rows = []
    for method, steps in (("nap", None), ("nap-ig", 5)):
        hp = {} if steps is None else {"steps": steps}
        t_ours, res = best_cpu(lambda: discover(rt, data, method, hp, progress=False), repeat)
        metric = prepare(rt, data, method).metric
        t_ref, ref = best_cpu(lambda: reference_nap(model, data.base, data.source, metric, steps), repeat)
        err = check(np.array(res.extra["neuron_scores"]), np.stack([ref[n].numpy() for n in g.forward_nodes]), method)
        rows.append((label, method, t_ours, t_ref, err))
    t_ours, res = best_cpu(lambda: discover(rt, data, "ifr", {}, progress=False), repeat)
    valid = prepare(rt, data, "ifr").metric.valid
    t_ref, ref = best_cpu(lambda: reference_ifr(model, data.base, valid), repeat)
    rows.append((label, "ifr", t_ours, t_ref, check(res.scores, [ref[e.name] for e in g.edges], "ifr")))
    hp = dict(UGS, batch_size=data.n_examples)
    t_ours, res = best_cpu(lambda: discover(rt, data, "ugs", hp, progress=False), repeat)
    metric = prepare(rt, data, "ugs").metric
    t_ref, ref = best_cpu(lambda: reference_ugs(model, data.base, data.source, metric, UGS["steps"], UGS["lr"],
                                                UGS["lambda_reg"], UGS["init"], UGS["seed"]), repeat)
    rows.append((label, "ugs", t_ours, t_ref, check(res.scores, ref.numpy(), "ugs")))
    loss = make_metric("ce", "categorical", clean_outputs=rt.clean(data.base), valid=data.valid)
    vectors = rt.node_outputs(data.base).mean((1, 2))

    def ours_oa():
        with torch.no_grad():
            return node_losses(rt, data.base, vectors, loss)

    def ref_oa():
        return [reference_node_replacement_loss(model, data.base, n, vectors[f], loss)
                for f, n in enumerate(g.forward_nodes)]

    t_ours, res = best_cpu(ours_oa, repeat)
    t_ref, ref = best_cpu(ref_oa, repeat)
    rows.append((label, "optimal-ablation losses", t_ours, t_ref, check(res.numpy(), ref, "optimal ablation")))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n-examples", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    from cbench.artifacts.model import read_model_artifact

    art = read_model_artifact(released("case-3"))
    model = art.load_model()
    data = sample_pairs(art.meta, args.n_examples, seed=0)
    # case 3 is numerical and sampled pairs have no labels: MAE against the clean outputs has its
    # kink exactly at the clean point (gradient 0 in exact arithmetic, rounding noise in any other
    # order of operations), so the source inputs' outputs (the counterfactual answers) are the labels
    with torch.no_grad():
        data.labels = CircuitRuntime(model).clean(data.source)[..., 0]
    rows = bench_model("SIIT case 3", model, data, args.repeat)
    rows += bench_model("random 3x4", siit_like_model(0), random_pairs(args.n_examples, 8, 12, seed=0), args.repeat)
    print(f"{'model':<12} {'method':<24} {'cbench s':>9} {'reference s':>12} {'speed-up':>9} {'max diff':>9}")
    for label, method, a, b, err in rows:
        print(f"{label:<12} {method:<24} {a:9.3f} {b:12.3f} {b / a:8.1f}x {err:9.1e}")
    if args.json:
        args.json.write_text(json.dumps([dict(model=r[0], method=r[1], cbench_s=r[2], reference_s=r[3],
                                              max_diff=r[4]) for r in rows], indent=1) + "\n")


if __name__ == "__main__":
    main()
