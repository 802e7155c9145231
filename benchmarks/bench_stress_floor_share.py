"""The dense-floor share of every released stress model, measured two ways on the same pairs: the
legacy gate's (an outside edge counts when its KL is at or above 64 eps(float32) x the largest KL,
circuit edges included) and the logit measure of :mod:`cbench.verify.floor_share` (an outside edge
counts when its ablation alone moves some logit by at least 64 eps(float32) x max |clean logit|),
split by edge kind (q/k/v into heads, MLP, logits), with the reason for every edge that does not
move the logits. Also the pass's own rounding: the same pass with every ablated value set to its
clean value (every true effect exactly 0), whose largest logit change is printed in units of
eps(float32) x max |clean logit|.

Reads the released artifacts in ``model_zoo/releases/models/cbench/stress-*`` whose circuit has a
dense floor; pairs: ``cbench.tasks.stress.stress_pairs(meta, "validation")`` (the rows of the
dataset's validation split) and the fresh pairs ``cbench verify`` draws.

Usage: ``python benchmarks/bench_stress_floor_share.py [--models stress-or-3,...] [--pairs 1000]
[--json out.json] [--validation-only]``. Prints one markdown row per model.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RELEASES = ROOT / "model_zoo" / "releases" / "models" / "cbench"


def dense_floor_models() -> list[str]:
    out = []
    for p in sorted(RELEASES.glob("stress-*")):
        for v in sorted(p.iterdir()):
            c = v / "circuit.json"
            if c.exists() and json.loads(c.read_text()).get("floor"):
                out.append(p.name)
                break
    return out


def measure_model(name: str, n_pairs: int, sets: tuple[str, ...] = ("validation", "fresh")) -> dict:
    import torch

    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.resolution import resolution_of
    from cbench.tasks.data import sample_pairs
    from cbench.tasks.stress import stress_pairs
    from cbench.verify.artifact import VERIFY_SEED
    from cbench.verify.edge_patching import single_edge_effects
    from cbench.verify.floor_share import _EPS32, floor_share
    from cbench.verify.mechanisms import _Probe

    version = sorted((RELEASES / name).iterdir())[-1]
    art = read_model_artifact(version)
    model, meta, circuit = art.load_model(), art.meta, art.circuit
    row: dict = {"model": name, "recorded_legacy": (meta.get("gates") or {}).get("floor_share_above_resolution")}
    for pairs in sets:
        data = (stress_pairs(meta, "validation", n_pairs) if pairs == "validation"
                else sample_pairs(meta, n_pairs, seed=VERIFY_SEED))
        t0 = time.perf_counter()
        p = _Probe(model, data)
        g = p.rt.graph
        truth = set(circuit["edges"])
        marked = {e for e, v in (circuit.get("edge_signal") or {}).items() if not v.get("signal", True)}
        outside = [e.name for e in g.edges if e.name not in truth]
        inside = sorted(truth - marked)
        kl, logit, dest = p.single_effects(outside + inside)  # the gate's one pass
        res_kl = resolution_of(kl, "float32")
        legacy = float((kl[:len(outside)] >= res_kl).mean())
        n = len(outside)
        fs = floor_share(p.rt, p.node_outputs(), p.ablated, p.clean, p.valid, outside, measured=(logit[:n], dest[:n]))
        # the pass's own rounding: every ablated value equal to its clean value
        acts = p.node_outputs()
        null = 0.0
        for _, out, _ in single_edge_effects(p.rt, acts, acts, [g.edge_index(e) for e in outside]):
            d = (out - p.clean.unsqueeze(0)).abs().amax(-1)
            null = max(null, float(torch.where(p.valid.unsqueeze(0), d, torch.zeros_like(d)).max()))
        top = float(p.clean[p.valid].abs().max())
        moving = fs.moving
        row[pairs] = {
            "outside": len(outside), "legacy_share": legacy, "legacy_kl_resolution": res_kl,
            "share": fs.share, "logit_resolution": fs.resolution, "max_abs_logit": top,
            "null_pass_eps_units": null / (_EPS32 * top) if top else 0.0,
            "by_kind": fs.by_kind(), "reasons": fs.reason_counts(),
            "smallest_moving_change": float(fs.logit_change[moving].min()) if moving.any() else None,
            "kl_of_smallest_moving": float(kl[:len(outside)][moving][np.argmin(fs.logit_change[moving])])
            if moving.any() else None,
            "largest_not_moving_eps_units": float(fs.logit_change[~moving].max() / (_EPS32 * top))
            if (~moving).any() and top else None,
            "moving_below_legacy_cutoff": int((moving & (kl[:len(outside)] < res_kl)).sum()),
            "seconds": round(time.perf_counter() - t0, 1)}
    return row


def markdown(rows: list[dict]) -> str:
    kinds = ["q", "k", "v", "mlp", "logits"]
    head = ("| model | outside edges | legacy share (val / fresh) | logit share (val / fresh) | "
            + " | ".join(kinds) + " | not moving: reasons (validation) |")
    lines = [head, "| --- | ---: | --- | --- | " + " | ".join("---:" for _ in kinds) + " | --- |"]
    for r in rows:
        v = r["validation"]
        f = r.get("fresh", v)
        cells = [f"{v['by_kind'].get(k, (0, 0))[0]}/{v['by_kind'].get(k, (0, 0))[1]}" if k in v["by_kind"] else "-"
                 for k in kinds]
        reasons = ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in v["reasons"].items()) or "none"
        lines.append(f"| {r['model']} | {v['outside']} | {v['legacy_share']:.2f} / {f['legacy_share']:.2f} | "
                     f"{v['share']:.2f} / {f['share']:.2f} | " + " | ".join(cells) + f" | {reasons} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="", help="comma-separated names (default: every dense-floor stress model)")
    ap.add_argument("--pairs", type=int, default=1000)
    ap.add_argument("--json", default="", help="also write the rows here")
    ap.add_argument("--validation-only", action="store_true", help="skip the fresh pairs")
    args = ap.parse_args(argv)
    from cbench.runtime.threads import use_cpu_threads

    use_cpu_threads()
    rows = []
    for name in [m for m in args.models.split(",") if m] or dense_floor_models():
        row = measure_model(name, args.pairs, ("validation",) if args.validation_only else ("validation", "fresh"))
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(markdown(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
