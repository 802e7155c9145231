"""DAS for one variable at one location: training time on one CPU core (issue 19's goal: < 30 s).

For each chosen case and model kind (SIIT ``case-<id>``, Tracr ``tracr-case-<id>``, from the
zoo's releases), every variable is localized with DAS at its aligned location only, with the
``cbench localize`` defaults (2048 train pairs, 64 steps of batch 128, lr 0.01); the time is the
featurizer's fit (PCA start + training), as CPU time of this process (``time.process_time``,
one torch thread: the wall time on an idle core, without the time other processes hold it).

The reference, in the same process on the same model and pairs, is the bare model doing the
same passes without pyvene (two forwards per step -- source and base -- and one backward
through the base run): ``ratio`` = DAS time / reference time is what the intervention engine
costs on top of the model itself.

Run: ``.venv/bin/python benchmarks/bench_das.py [--cases 3,21] [--n-train 2048]``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "model_zoo" / "releases" / "models" / "cbench"
DATASET = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.1.0"


def reference_passes(model, data, spec) -> float:
    """CPU seconds of the same forward/backward passes on the bare model."""
    d = data.data
    t0 = time.process_time()
    n_batches = -(-d.n_examples // spec.batch_size)
    for step in range(spec.steps):
        start = (step % n_batches) * spec.batch_size
        sl = slice(start, start + spec.batch_size)
        with torch.no_grad():
            model(d.source[sl])
        x = torch.zeros((), requires_grad=True)
        out = model.run_with_hooks(d.base[sl], fwd_hooks=[("blocks.0.hook_resid_pre", lambda r, hook: r + x)])
        out.sum().backward()
    return time.process_time() - t0


def main(argv=None) -> int:
    from cbench.artifacts.model import read_model_artifact
    from cbench.localization.featurizers import FeaturizerSpec, fit
    from cbench.localization.localize import iia, load_variable_data
    from cbench.localization.variables import parse_location, variables

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default="3,21,18")
    p.add_argument("--n-train", type=int, default=2048)
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    spec = FeaturizerSpec("das")
    rows = []
    for case in args.cases.split(","):
        for name in (f"case-{case}", f"tracr-case-{case}"):
            art = read_model_artifact(MODELS / name / "v1.0.0")
            model = art.load_model()
            for var in variables(art):
                train, tests = load_variable_data(art, var, DATASET, args.n_train, 500)
                test = next(iter(tests.values()))
                loc = parse_location(var.aligned, model.cfg)
                for p_ in model.parameters():
                    p_.requires_grad_(False)
                ref = reference_passes(model, train, spec)
                t0 = time.process_time()
                ivs, info = fit(model, loc, spec, train, var.n_dims)
                das_s = time.process_time() - t0
                a, _ = iia(model, loc, ivs, test)
                rows.append({"model": name, "variable": var.name, "location": var.aligned, "k": info["k"],
                             "steps": info["steps"], "das_cpu_s": round(das_s, 2), "reference_cpu_s": round(ref, 2),
                             "ratio": round(das_s / ref, 2), "iia": round(a, 4)})
                print(json.dumps(rows[-1]), flush=True)
    worst = max(r["das_cpu_s"] for r in rows)
    print(f"slowest DAS fit: {worst:.2f} s CPU (goal < 30 s); median ratio to bare passes: "
          f"{sorted(r['ratio'] for r in rows)[len(rows) // 2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if worst < 30 else 1


if __name__ == "__main__":
    sys.exit(main())
