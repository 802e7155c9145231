"""SIIT training speed: wall time to reach the release gates per case on this machine.

The InterpBench paper trained each model for "usually around 1 to 8 hours" on one NVIDIA RTX
A6000 (section 4). cbench's goals: case 3 to the gates in under 3 minutes, the 16 main cases in
under 1 hour together, on 2 CPU cores.

Usage::

    python benchmarks/bench_siit.py                      # summarize build/siit and build/siit-failed
    python benchmarks/bench_siit.py --train 3            # train case 3 now (nothing kept) and time it
    python benchmarks/bench_siit.py --train main --workers 2 --out benchmarks/results/siit-main16-wall.md
        # the 16 main cases as `cbench build siit --main --executor ray --workers 2`: the whole run's wall time
    python benchmarks/bench_siit.py --out benchmarks/results/siit.md

"Time to gates" is the wall time (from the start of training) at the end of the first epoch whose
validation metrics meet the release gates: IIA and SIIA >= 99.5 %, every out-of-circuit node's
SIIA >= 99 % and (zoo v2, edge strictness) the output with every edge outside the ground truth
resample-ablated equal to the label on >= 99 % of positions (a node's resample effect is at most 1 - its SIIA up to sampling noise; the final
gate check on fresh pairs is in each model's meta.json). Training time is until early stopping
(the case spec's target), so it is at least the time to gates. CPU time is the process's CPU
seconds during training: on a shared machine wall time also counts other processes' load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PAPER = "1-8 h per model (RTX A6000, InterpBench section 4)"
GATE_IIA = GATE_SIIA = 0.995
GATE_NODE = 0.99


GATE_EDGE = 0.99  # zoo v2: the complement of the ground truth ablated, outputs still at the label


def time_to_gates(history: list[dict]) -> tuple[int | None, float | None]:
    for h in history:
        if (h["iia"] >= GATE_IIA and h["siia"] >= GATE_SIIA and h.get("min_siia_node", 1.0) >= GATE_NODE
                and h.get("edge_siia", 1.0) >= GATE_EDGE):
            return h["epoch"], h["elapsed_s"]
    return None, None


def row_from_meta(meta: dict) -> dict:
    epoch, t_gate = time_to_gates(meta.get("history") or [])
    m = meta.get("metrics") or {}
    v = meta.get("validation") or {}
    gates = meta.get("gates") or {}
    comp = gates.get("complement_edge_effect") or {}
    return {"case": meta["case"], "kind": meta["model_kind"], "epochs": (meta.get("training") or {}).get("epochs_trained"),
            "complement": max((v for k, v in comp.items() if k.startswith(("validation", "fresh"))), default=None),
            "gate_epoch": epoch, "time_to_gates_s": t_gate, "training_time_s": meta.get("training_time_s"),
            "cpu_s": (meta.get("training") or {}).get("training_cpu_s"), "iia": m.get("iia"), "siia": m.get("siia"),
            "max_out": v.get("max_out_of_circuit_resample_effect"), "released": meta.get("released")}


def _f(v, spec):
    return format(v, spec) if isinstance(v, (int, float)) else "–"


def render(rows: list[dict], note: str) -> str:
    lines = [f"SIIT training on this machine ({os.cpu_count()} cores) vs the paper's {PAPER}.", "", note, "",
             "| case | kind | time to gates (s) | gate epoch | training time (s) | CPU (s) | epochs | IIA | SIIA "
             "| max out-of-circuit effect | complement edge effect | released |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['kind']} | {_f(r['time_to_gates_s'], '.1f')} | {_f(r['gate_epoch'], 'd')} "
                     f"| {_f(r['training_time_s'], '.1f')} | {_f(r['cpu_s'], '.1f')} | {_f(r['epochs'], 'd')} "
                     f"| {_f(r['iia'], '.4f')} | {_f(r['siia'], '.4f')} | {_f(r['max_out'], '.4f')} "
                     f"| {_f(r['complement'], '.4f')} | {'yes' if r['released'] else 'no'} |")
    siit = [r for r in rows if r["kind"] == "siit"]
    if siit:
        tg = [r["time_to_gates_s"] for r in siit if r["time_to_gates_s"] is not None]
        tt = [r["training_time_s"] for r in siit if r["training_time_s"] is not None]
        lines += ["", f"SIIT: {len(tg)} of {len(siit)} case(s) reached the gates; total time to gates "
                      f"{sum(tg) / 60:.1f} min, total training time {sum(tt) / 60:.1f} min "
                      f"(paper: {len(siit)} x 1-8 h = {len(siit)}-{8 * len(siit)} GPU hours)."]
    return "\n".join(lines) + "\n"


def gates_table(metas: list[dict]) -> str:
    """Zoo v2's per-case table: node gates, edge gates, oracle AUROC (the worse of the pair sets),
    marked no-signal edges and architecture deviations, from the artifacts' meta.json."""
    def worst(g: dict, key: str):
        row = g.get(key) or {}
        vals = [v for k, v in row.items() if k.startswith(("validation", "fresh", "all"))]
        if not vals:
            return None
        return min(vals) if row.get("op") == ">=" else max(vals)

    lines = ["| case | d_model / d_head | accuracy | IIA | SIIA | max out-of-circuit node effect | complement edge effect "
             "| oracle edge AUROC | edges (no signal) | deviation | gates |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for m in sorted(metas, key=lambda m: int(m["case"])):
        g = m.get("gates") or {}
        signals = m.get("edge_signals") or []
        marked = [e["edge"] for e in signals if not e["signal"]]
        tr = m.get("training") or {}
        dev = tr.get("architecture_deviation") or tr.get("deviation")
        lines.append(
            f"| {m['case']} | {m.get('_d_model', '?')} / {m.get('_d_head', '?')} | {_f(worst(g, 'accuracy'), '.4f')} "
            f"| {_f(worst(g, 'iia'), '.4f')} | {_f(worst(g, 'siia'), '.4f')} "
            f"| {_f(worst(g, 'max_out_of_circuit_node_effect'), '.4f')} | {_f(worst(g, 'complement_edge_effect'), '.4f')} "
            f"| {_f(worst(g, 'oracle_edge_auroc'), '.4f')} | {len(signals)} ({', '.join(f'`{e}`' for e in marked) or 'none'}) "
            f"| {(dev.get('reason', dev) if isinstance(dev, dict) else dev) if dev else 'none'} | {'pass' if all(r.get('passed') for r in g.values()) else 'FAIL'} |")
    return "\n".join(lines) + "\n"


def _cases(spec: str) -> list[str]:
    from cbench_builders.cases.specs import resolve_case_ids  # main, appendix-h, all, or ids: as `cbench build siit`

    return [str(c) for c in resolve_case_ids(spec)]


def released_tracr_links(cases: list[str], into: Path) -> Path:
    """A directory of ``tracr-case-<id>`` links to the newest released compiled model of each case."""
    into.mkdir(parents=True, exist_ok=True)
    releases = Path(__file__).resolve().parents[1] / "model_zoo" / "releases" / "models" / "cbench"
    for case in cases:
        versions = sorted((releases / f"tracr-case-{case}").glob("v*"),
                          key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))
        if not versions:
            raise SystemExit(f"error: no released tracr-case-{case} in {releases}")
        (into / f"tracr-case-{case}").symlink_to(versions[-1], target_is_directory=True)
    return into


def train_parallel(spec: str, tracr_dir: str | None, workers: int, iit: bool) -> tuple[list[dict], str]:
    """Train the cases with ``cbench build siit --executor ray --workers N`` in a subprocess; the rows
    of every trained model, and a note with the whole run's wall time and the models' training CPU."""
    cases = _cases(spec)
    with tempfile.TemporaryDirectory() as tmp:
        tracr = Path(tracr_dir) if tracr_dir else released_tracr_links(cases, Path(tmp) / "tracr")
        out, failed = Path(tmp) / "out", Path(tmp) / "failed"
        cmd = [str(Path(sys.executable).with_name("cbench")), "build", "siit", "--cases", ",".join(cases),
               "--tracr-dir", str(tracr), "--out", str(out), "--keep-failed", "--failed-dir", str(failed),
               "--executor", "ray", "--workers", str(workers), "--no-progress"] + (["--iit"] if iit else [])
        t0 = time.perf_counter()
        proc = subprocess.run(cmd)
        wall = time.perf_counter() - t0
        rows = [row_from_meta(json.loads(p.read_text())) for d in (out, failed) for p in sorted(d.glob("*case-*/meta.json"))]
    trained = sum(r["cpu_s"] or 0.0 for r in rows)
    note = (f"Trained now by `cbench build siit --executor ray --workers {workers}` ({len(cases)} cases, exit code "
            f"{proc.returncode}; the cases start longest first by their specs' time budgets): **wall time of the "
            f"whole run {wall / 60:.1f} min** ({wall:.0f} s, Ray's start and every gate included); training CPU "
            f"{trained / 60:.1f} min summed over the models (their meta.json); {os.cpu_count()} cores, load average at the end "
            f"{os.getloadavg()[0]:.1f}.")
    return rows, note


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", nargs="+", default=["build/siit", "build/siit-failed"],
                    help="directories of trained artifacts to summarize")
    ap.add_argument("--train", default=None, help="comma-separated cases to train now, or main (timed; nothing kept)")
    ap.add_argument("--tracr-dir", default=None,
                    help="compiled Tracr models (tracr-case-<id>/); default: the released ones in model_zoo/releases")
    ap.add_argument("--workers", type=int, default=1,
                    help="with --train: N > 1 runs `cbench build siit --executor ray --workers N` and times the whole run")
    ap.add_argument("--iit", action="store_true", help="with --train: IIT instead of SIIT")
    ap.add_argument("--out", default=None, help="also write the markdown table here")
    ap.add_argument("--gates", action="store_true", help="print the release-gates table of the SIIT models instead")
    args = ap.parse_args(argv)
    if args.gates:
        metas = []
        for d in args.models:
            for meta_path in sorted(Path(d).glob("case-*/meta.json")):
                meta = json.loads(meta_path.read_text())
                cfg = json.loads((meta_path.parent / "config.json").read_text())
                meta["_d_model"], meta["_d_head"] = cfg["d_model"], cfg["d_head"]
                metas.append(meta)
        sys.stdout.write(gates_table(metas))
        return 0
    rows = []
    if args.train and args.workers > 1:
        rows, note = train_parallel(args.train, args.tracr_dir, args.workers, args.iit)
    elif args.train:
        from cbench_builders.siit.build import train_case

        with tempfile.TemporaryDirectory() as tmp:
            tracr_dir = Path(args.tracr_dir) if args.tracr_dir else released_tracr_links(_cases(args.train), Path(tmp) / "tracr")
            for case in _cases(args.train):
                t0 = time.perf_counter()
                train_case(case, tracr_dir, Path(tmp), iit=args.iit, keep_failed=True, progress=True)
                name = f"{'iit-' if args.iit else ''}case-{case}"
                meta = json.loads((Path(tmp) / name / "meta.json").read_text())
                row = row_from_meta(meta)
                row["total_s"] = time.perf_counter() - t0
                rows.append(row)
        note = "Trained now by this script (the case specs' hyperparameters)."
    else:
        for d in args.models:
            for meta_path in sorted(Path(d).glob("*case-*/meta.json")):
                rows.append(row_from_meta(json.loads(meta_path.read_text())))
        note = f"Read from the trained artifacts in {', '.join(f'`{d}`' for d in args.models)} (meta.json history)."
    rows.sort(key=lambda r: (r["kind"], int(r["case"]) if str(r["case"]).isdigit() else 0))
    text = render(rows, note)
    sys.stdout.write(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    from cbench.errors import CbenchError

    try:
        sys.exit(main())
    except CbenchError as e:  # an unknown case, a missing Tracr model: one line, not a traceback
        sys.exit(f"error: {e}")
