"""SIIT training speed: the trainer as it was and the faster one, on one case, in the same run.

Each variant trains the case with its spec's settings to its target (as ``cbench build siit``
does: :func:`cbench_builders.siit.build.train_case`, the release gates on the pairs ``cbench
verify`` uses included) and the run reports, per variant, the training CPU seconds, the epochs,
the CPU per epoch, the wall time, and every release gate's value and verdict; then the ratio of
CPU per epoch against the first variant and whether the gate verdicts are the same.

Variants (``--variants``, comma-separated, the first is the reference):

* ``separate`` -- the trainer before issue 37: edge strictness takes the source's node outputs
  from a second pass over the source through the graph runtime (TransformerLens's head arithmetic);
* ``shared`` -- from the component run on the source that the node interventions make anyway
  (``edge_sources = "shared"``, the default now): one source pass per batch;
* ``shared-2t`` -- ``shared`` with two torch threads (results depend on the thread count).

``--case ioi`` trains the IOI build's trainer (the released model's settings) for ``--epochs``
epochs per variant and reports CPU per epoch only (the IOI model takes hours to its gates).

CPU time is the process's (``time.process_time``, all threads); on a shared machine the load
average is printed with each variant, since a loaded machine buys less work per CPU second.

Usage::

    python benchmarks/bench_siit_speed.py --case 3 --tracr-dir <dir> --json out.json
    python benchmarks/bench_siit_speed.py --case ioi --epochs 1 --variants separate,shared
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

VARIANTS = {"separate": {"edge_sources": "separate", "threads": 1},
            "shared": {"edge_sources": "shared", "threads": 1},
            "shared-2t": {"edge_sources": "shared", "threads": 2}}


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def run_case(case: str, tracr_dir: Path, variant: str, out: Path) -> dict:
    """One variant trained to its target and gated; its figures from the written meta.json."""
    from cbench_builders.siit.build import train_case

    load0, w0, c0 = _load(), time.perf_counter(), time.process_time()
    outcome = train_case(case, tracr_dir, out / variant, overrides=dict(VARIANTS[variant]), progress=False,
                         keep_failed=True)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    meta = json.loads((outcome.path / "meta.json").read_text())
    training = meta["training"]
    gates = {name: {k: v for k, v in g.items() if k != "threshold"} for name, g in meta["gates"].items()}
    return {"variant": variant, "epochs": training["epochs_trained"], "training_cpu_s": training["training_cpu_s"],
            "cpu_per_epoch_s": round(training["training_cpu_s"] / max(1, training["epochs_trained"]), 3),
            "training_wall_s": meta["training_time_s"], "total_cpu_s": round(cpu, 2), "total_wall_s": round(wall, 2),
            "released": meta["released"], "gates": gates, "load_before": load0, "load_after": _load()}


def run_ioi(epochs: int, variant: str) -> dict:
    from bench_siit_profile import build_ioi_trainer

    trainer, data, cfg, _ = build_ioi_trainer(epochs)
    for k, v in VARIANTS[variant].items():
        setattr(cfg, k, v)
    load0, w0, c0 = _load(), time.perf_counter(), time.process_time()
    res = trainer.train(data, progress=False)
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    last = res.history[-1]
    return {"variant": variant, "epochs": res.epochs, "training_cpu_s": round(res.training_cpu_s, 2),
            "cpu_per_epoch_s": round(res.training_cpu_s / max(1, res.epochs), 3), "training_wall_s": round(wall, 2),
            "total_cpu_s": round(cpu, 2), "total_wall_s": round(wall, 2), "released": None,
            "metrics": {k: last[k] for k in ("accuracy", "iia", "siia", "edge_siia")},
            "load_before": load0, "load_after": _load()}


def _worst(gate: dict) -> float:
    """A gate's worse value over the pair sets (the largest for an upper bound, else the smallest)."""
    values = [v for k, v in gate.items() if k not in ("passed", "op") and isinstance(v, (int, float))]
    if not values:
        return float("nan")
    return max(values) if str(gate.get("op", "")).startswith("<") else min(values)


def verdicts(row: dict) -> dict:
    return {name: g["passed"] for name, g in (row.get("gates") or {}).items()}


def report(case: str, rows: list[dict]) -> str:
    ref = rows[0]
    lines = [f"case {case}: {len(rows)} variants in one process (reference: {ref['variant']})",
             f"{'variant':<10} {'epochs':>6} {'train CPU s':>11} {'CPU/epoch':>9} {'ratio':>6} {'wall s':>8} "
             f"{'load':>11} {'released':>8}  gates as the reference"]
    for r in rows:
        ratio = ref["cpu_per_epoch_s"] / r["cpu_per_epoch_s"] if r["cpu_per_epoch_s"] else float("nan")
        same = "-" if r.get("gates") is None else ("yes" if verdicts(r) == verdicts(ref) else "NO")
        lines.append(f"{r['variant']:<10} {r['epochs']:>6} {r['training_cpu_s']:>11.1f} {r['cpu_per_epoch_s']:>9.2f} "
                     f"{ratio:>5.2f}x {r['training_wall_s']:>8.1f} {r['load_before']:>5}-{r['load_after']:<5} "
                     f"{str(r['released']):>8}  {same}")
    for r in rows:
        if r.get("gates"):
            vals = ", ".join(f"{n} {_worst(g):.4f}{'' if g['passed'] else ' FAIL'}" for n, g in r["gates"].items())
            lines.append(f"  {r['variant']}: {vals}")
        elif r.get("metrics"):
            lines.append(f"  {r['variant']}: " + ", ".join(f"{k} {v:.4f}" for k, v in r["metrics"].items()))
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", default="3", help="a case id (trained to its target and gated), or ioi")
    ap.add_argument("--tracr-dir", type=Path, default=Path("build/tracr"))
    ap.add_argument("--variants", default="separate,shared", help=f"comma-separated, of {', '.join(VARIANTS)}")
    ap.add_argument("--epochs", type=int, default=1, help="with --case ioi: epochs per variant")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    args = ap.parse_args(argv)
    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or not variants:
        print(f"error: unknown variant(s) {', '.join(unknown) or '(none)'}; choose from {', '.join(VARIANTS)}",
              file=sys.stderr)
        return 2
    if args.case != "ioi" and not (args.tracr_dir / f"tracr-case-{args.case}").is_dir():
        print(f"error: no tracr-case-{args.case} in {args.tracr_dir}", file=sys.stderr)
        return 2
    if args.epochs < 1:
        print("error: --epochs must be at least 1", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-siit-speed-") as tmp:
        for v in variants:
            rows.append(run_ioi(args.epochs, v) if args.case == "ioi" else run_case(args.case, args.tracr_dir, v, Path(tmp)))
            print(f"  {v}: {rows[-1]['epochs']} epochs, {rows[-1]['training_cpu_s']} s CPU", file=sys.stderr, flush=True)
    print(report(args.case, rows))
    if args.json:
        args.json.write_text(json.dumps({"case": args.case, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
