"""The memory plan (``cbench.runtime.memory_plan``) against the measured peak: for each shape and
method, a fresh subprocess builds a random-weight model of that shape (tests/real_model_families.py),
loads it as ``cbench discover --model`` does (``resolve_model``), runs the method once on a tiny
input (libraries and kernels loaded), then resets the process's resident high-water mark (Linux
``/proc/self/clear_refs``), runs the method on ``N`` pairs of ``P`` tokens through
``run_model_discovery`` (the plan checked first) and reads the high-water mark (``VmHWM``) less
the resident memory before the run: the memory the run added. With ``--budget-mb`` the run is the
plan's one in parts of the pairs (``memory_budget``), and the peak is compared with the budget.

    .venv/bin/python benchmarks/bench_memory_plan.py --shapes gpt2-small,pythia-160m,llama-8b-slice

Results: one JSON line per run in benchmarks/results/memory-plan.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SHAPES = {
    # family, overrides (one layer count, widths), vocabulary
    "gpt2-small": ("gpt2", dict(n_layers=12, d_model=768, d_head=64, n_heads=12, d_mlp=3072, d_vocab=8192, n_ctx=64)),
    "pythia-160m": ("pythia", dict(n_layers=12, d_model=768, d_head=64, n_heads=12, d_mlp=3072, rotary_dim=16,
                                   d_vocab=8192, n_ctx=64)),
    "qwen2.5-0.5b-4l": ("qwen2.5", dict(n_layers=4, d_model=896, d_head=64, n_heads=14, n_key_value_heads=2,
                                        d_mlp=4864, rotary_dim=64, d_vocab=8192, n_ctx=64)),
    "gemma2-2b-2l": ("gemma2", dict(n_layers=2, d_model=2304, d_head=256, n_heads=8, n_key_value_heads=4,
                                    d_mlp=9216, rotary_dim=256, attn_scores_soft_cap=50.0,
                                    output_logits_soft_cap=30.0, window_size=4, d_vocab=8192, n_ctx=64)),
    # two layers at Llama-3.1-8B's width, its vocabulary of 128,256 (embedding and unembedding 4.2 GB
    # in float32; the whole slice 1.5 B parameters, 6 GB)
    "llama-8b-slice": ("llama3.1", dict(n_layers=2, d_model=4096, d_head=128, n_heads=32, n_key_value_heads=8,
                                        d_mlp=14336, rotary_dim=128, d_vocab=128256, n_ctx=64)),
}


def _status(key: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(key)


def child(args) -> None:
    import numpy as np
    import torch

    from real_model_families import family_model, tokens

    from cbench.api.real_models import resolve_model, run_model_discovery
    from cbench.api.discovering import discovery_hyperparameters
    from cbench.discovery import discover
    from cbench.runtime.memory_plan import plan_for
    from cbench.tasks.data import TaskData

    torch.set_num_threads(1)
    family, over = SHAPES[args.shape]
    t_build = time.perf_counter()
    model = family_model(family, seed=0, dtype=args.dtype, **over)
    V = over["d_vocab"]

    def data(n, p, seed):
        b, s = tokens(n, p, V, seed), tokens(n, p, V, seed + 1)
        valid = torch.ones(n, p, dtype=torch.bool)
        valid[:, 0] = False
        return TaskData(b, s, None, valid, "categorical")

    d = data(args.n, args.p, 11)
    rm = resolve_model(model, d)  # the real-model path: the runtime cbench discover --model builds
    rt = rm.runtime
    build_s = time.perf_counter() - t_build
    hp = discovery_hyperparameters(args.method, {"steps": args.steps} if args.method == "eap-ig-inputs" else {})
    with torch.no_grad():
        discover(rt, data(1, 4, 7), args.method, hp, progress=False)  # warm-up
    budget_gb = None if args.budget_mb is None else args.budget_mb / 1024
    plan = plan_for(rt, args.method, args.n, args.p, steps=args.steps,
                    budget=None if budget_gb is None else budget_gb * 2**30)
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    t0 = time.perf_counter()
    run = run_model_discovery(rm, None, args.method, hp, memory_budget=budget_gb)  # the plan's parts, if any
    seconds = time.perf_counter() - t0
    peak = _status("VmHWM") - before
    total = run.result.scores
    print(json.dumps({"shape": args.shape, "method": args.method, "dtype": args.dtype, "n_examples": args.n,
                      "positions": args.p, "steps": args.steps if args.method == "eap-ig-inputs" else None,
                      "n_edges": rt.n_edges, "budget_mb": args.budget_mb, "chunk": plan.chunk,
                      "rows_per_pass": plan.rows_per_pass, "plan_mb": round(plan.peak / 2**20, 1),
                      "held_mb": round(plan.held / 2**20, 1), "clean_pass_mb": round(plan.clean_pass / 2**20, 1),
                      "gradient_pass_mb": round(plan.gradient_pass / 2**20, 1),
                      "measured_mb": round(peak / 2**20, 1), "ratio": round(peak / plan.peak, 3),
                      "model_rss_mb": round(before / 2**20, 1), "build_s": round(build_s, 1),
                      "seconds": round(seconds, 2), "score_abs_max": float(np.abs(total).max())}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="gpt2-small,pythia-160m,llama-8b-slice")
    ap.add_argument("--methods", default="eap,eap-ig-inputs")
    ap.add_argument("--runs", default="8x16,32x16", help="N x P pairs of positions, comma-separated")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--budget-mb", type=float, default=None)
    ap.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "memory-plan.jsonl"))
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--shape", help=argparse.SUPPRESS)
    ap.add_argument("--method", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--p", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return 0
    # glibc's dynamic mmap threshold serves a freed block's size from the heap afterwards, where the
    # run may reuse memory the build and warm-up freed (the same run measured 253 or 447 MB on the
    # Qwen-2.5 shape): a fixed threshold maps every block over 128 KB on its own, so the resident
    # high-water mark follows the live tensors
    env = dict(os.environ, PYTHONPATH=str(ROOT / "client"), OMP_NUM_THREADS="1", MALLOC_MMAP_THRESHOLD_="131072")
    rows = []
    for shape in args.shapes.split(","):
        for method in args.methods.split(","):
            for run in args.runs.split(","):
                n, p = (int(x) for x in run.split("x"))
                cmd = [sys.executable, __file__, "--child", "--shape", shape, "--method", method, "--n", str(n),
                       "--p", str(p), "--steps", str(args.steps), "--dtype", args.dtype]
                if args.budget_mb is not None:
                    cmd += ["--budget-mb", str(args.budget_mb)]
                r = subprocess.run(cmd, capture_output=True, text=True, env=env)
                if r.returncode != 0:
                    row = {"shape": shape, "method": method, "n_examples": n, "positions": p,
                           "error": f"exit {r.returncode}: {r.stderr.strip().splitlines()[-1:]}"}
                else:
                    row = json.loads(r.stdout.strip().splitlines()[-1])
                print(json.dumps(row), flush=True)
                rows.append(row)
    with open(args.out, "a") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
