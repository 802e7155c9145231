"""IOI model training: wall and CPU time to the release gates (issue 16's goal: under 1 hour on 2 cores).

Summarizes a `cbench build ioi-model` run from its checkpoint directory: `ioi.runs.json` (wall and
CPU seconds of each finished training run, resumed runs included) and `ioi.log.jsonl` (validation
metrics after every epoch, with the wall time since the run's start). "Time to gates" is the wall
time at the end of the first epoch whose validation accuracy, IIA, SIIA, every node's SIIA and the
edge-strictness agreement all reach 99.5 % (the final gates, on the dataset's validation and test
rows, are in the artifact's meta.json); "not reached" when no epoch did.

MIB trained its InterpBench IOI model for 70 hours on an H100 (MIB appendix F).

Usage::

    python benchmarks/bench_ioi.py [--dir build/ioi-model/ioi-train] [--out benchmarks/results/ioi.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

GATE = 0.995
KEYS = ("accuracy", "iia", "siia", "min_siia_node", "edge_siia")


def summarize(directory: Path) -> str:
    runs_path, log_path = directory / "ioi.runs.json", directory / "ioi.log.jsonl"
    runs = json.loads(runs_path.read_text()) if runs_path.is_file() else []
    log = [json.loads(line) for line in log_path.read_text().splitlines()] if log_path.is_file() else []
    lines = ["# IOI model: training time to the gates", "",
             "Model: 6 layers x 4 heads, d_model 64, d_head 16, d_mlp 256 (InterpBench's IOI size), SIIT "
             "with node and edge strictness, last token x10; per-epoch validation on 96 pairs. Each run's "
             "recipe (algorithm, Adam learning rate, batch, pairs per epoch) is in the runs table.", ""]
    if not log:
        return "\n".join(lines + ["No training log found.", ""])
    reached = next((r for r in log if all(r.get(k, 0.0) >= GATE for k in KEYS)), None)
    wall = sum(r["wall_s"] for r in runs)
    timed = [r for r in runs if r.get("cpu_s") is not None]  # runs before session 8 recorded no CPU time
    cpu, timed_wall = sum(r["cpu_s"] for r in timed), sum(r["wall_s"] for r in timed)
    lines += ["| runs | epochs logged | wall s | CPU s (runs that recorded it) | CPU / wall (those runs) "
              "| time to gates |",
              "|---|---|---|---|---|---|",
              f"| {len(runs)} | {len(log)} | {wall:.0f} | {cpu:.0f} of {len(timed)} runs | "
              f"{cpu / timed_wall if timed_wall else float('nan'):.2f} | "
              + (f"{reached['elapsed_s']:.0f} s (epoch {reached['epoch']})" if reached else "not reached") + " |", "",
              "Validation metrics by epoch (every fifth, and the last):", "",
              "| epoch | wall s | accuracy | IIA | SIIA | min node SIIA | edge SIIA | loss (IIT) | loss (behaviour) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for r in log:
        if r["epoch"] % 5 == 0 or r is log[-1]:
            lines.append(f"| {r['epoch']} | {r['elapsed_s']:.0f} | " + " | ".join(f"{r[k]:.3f}" for k in KEYS)
                         + f" | {r['loss_iit']:.2f} | {r['loss_behavior']:.2f} |")
    if runs:
        lines += ["", "| run | epochs | wall s | CPU s | recipe |", "|---|---|---|---|---|"]
        for i, r in enumerate(runs, 1):
            rec = r.get("recipe")
            desc = (f"{rec['algorithm']}, lr {rec['lr']:g}, batch {rec['batch_size']}, {rec['pairs_per_epoch']} "
                    f"pairs/epoch, edge weight {rec['edge_weight']:g}, IIT weight {rec.get('iit_weight', 1.0):g}, "
                    "source gradients "
                    f"{'on' if rec['source_gradients'] else 'off'}") if rec else (
                "no training" if r.get("averaged") else "not recorded (before session 8)")
            cpu_s = "not recorded" if r.get("cpu_s") is None else f"{r['cpu_s']:.0f}"
            note = f" ({r['note']})" if r.get("note") else ""
            lines.append(f"| {i} | {r['epochs']} | {r['wall_s']:.0f} | {cpu_s} | {desc}{note} |")
        lines += ["", f"Hardware: {runs[-1].get('hardware', '?')}."]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="build/ioi-model/ioi-train", type=Path)
    ap.add_argument("--out", default=None, type=Path)
    args = ap.parse_args()
    text = summarize(args.dir)
    if args.out:
        args.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
