"""The whole causal-variable track with all of MIB's featurizers, on 2 CPU threads.

Runs ``run_track`` (what ``cbench bench --track causal-variables`` runs) on the variables tier's
nine models (every variable, every candidate location, featurizers identity, dbm, dbm-pca,
dbm-sae and das; MIB's IIA per example) and reports the wall time and this process's CPU time,
in total and per featurizer (the sum of the fit times, ``train_s``), and the identity-vs-DAS
figures of the leaderboard. ``--cases`` adds cases of the SIIT/Tracr track (e.g. ``3,21``).

The reference, in the same process: one forward pass of each model over the same test pairs
(``ratio`` = track wall time / reference), so the figure can be compared across machines.

The machine's load average is sampled every 30 s while the track runs (``load_avg``: at the
start, the mean of the samples, the maximum, at the end): on a shared machine the wall time
depends on it, the CPU time much less.

Run: ``.venv/bin/python benchmarks/bench_causal_track.py [--out DIR] [--n-train 1024] [--n-test 500]``.
Resumable: runs already in ``--out`` are read back (pass a fresh directory to time it; a resumed
run's wall and CPU times count only what it ran).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "model_zoo" / "releases" / "models" / "cbench"
DATASET = ROOT / "model_zoo" / "releases" / "datasets" / "cbench" / "counterfactuals" / "v1.1.0"
FEATS = "identity,dbm,dbm-pca,dbm-sae,das"


def _art(name: str):
    from cbench.artifacts.model import read_model_artifact

    return read_model_artifact(MODELS / name / "v1.0.0")


def reference_s(names, n_test: int) -> float:
    """Wall seconds of one forward pass of each model over ``n_test`` pairs' bases and sources."""
    from cbench.tasks.variables import variables_pairs

    t0 = time.perf_counter()
    for n in names:
        art = _art(n)
        model = art.load_model()
        d = variables_pairs(art.meta, "test", n_test)
        with torch.no_grad():
            model(d.base)
            model(d.source)
    return time.perf_counter() - t0


class LoadSampler:
    """The 1-minute load average every ``every`` seconds, in a daemon thread."""

    def __init__(self, every: float = 30.0):
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self._thread.start()

    def _run(self, every: float) -> None:
        while not self._stop.wait(every):
            self.samples.append(os.getloadavg()[0])

    def stop(self) -> dict:
        self._stop.set()
        end = os.getloadavg()[0]
        xs = self.samples + [end]
        return {"start": round(xs[0], 2), "mean": round(sum(xs) / len(xs), 2), "max": round(max(xs), 2),
                "end": round(end, 2), "samples": len(xs)}


def _f(x) -> str:
    return "-" if x is None else f"{x:.3f}"


def markdown(doc: dict) -> str:
    """The per-kind means and every featurizer on every variable, as docs/causal-variables.md
    shows them: per variable and featurizer, IIA at the true location, the best location found
    and whether it is a true one (yes/no)."""
    res = doc["results"]
    feats = list(doc["inputs"]["featurizers"])
    lines = [("| variable kind | featurizer | variables | IIA at the true location | best is true | "
              "mean IIA over locations | best IIA |"), "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for b in res["leaderboard"]:
        lines.append(f"| {b['variable_kind']} | {b['featurizer']} | {b['variables']} | {_f(b['mean_iia_true'])} | "
                     f"{_f(b['best_is_true'])} | {_f(b['mean_iia'])} | {_f(b['mean_best_iia'])} |")
    cells: dict[tuple, dict] = {}
    for r in res["rows"]:
        cells.setdefault((r["model"], r["variable"], r.get("variable_kind") or r["model_kind"], r["aligned_location"]),
                         {})[r["featurizer"]] = r["scores"]["mib"]
    lines += ["", "| model | variable | kind | true location | " + " | ".join(feats) + " |",
              "| --- | --- | --- | --- |" + " --- |" * len(feats)]
    for (model, var, kind, true), per in cells.items():
        out = []
        for f in feats:
            m = per.get(f)
            if m is None:
                out.append("-")
                continue
            found = {True: "yes", False: "no", None: "-"}[m.get("best_is_true")]
            out.append(f"{_f(m['iia_true'])} · `{m['best_location']}` {found}")
        lines.append(f"| {model} | {var} | {kind} | `{true}` | " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from cbench.localization.track import VARIABLES_MODELS, run_track

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, default=None, help="results directory (default: a fresh temporary one)")
    p.add_argument("--featurizers", default=FEATS)
    p.add_argument("--models", default=None, help="variables models to run (default: all nine)")
    p.add_argument("--cases", default="", help="SIIT/Tracr cases to add, e.g. 3,21")
    p.add_argument("--n-train", type=int, default=1024)
    p.add_argument("--n-test", type=int, default=500)
    p.add_argument("--steps", type=int, default=64, help="optimiser steps of the trained featurizers")
    p.add_argument("--threads", type=int, default=1,
                   help="torch threads (default 1: the models are too small for a second thread to help, and "
                        "on a loaded machine two threads spin: 20x the CPU time of one, measured)")
    p.add_argument("--json", type=Path, default=None, help="also write the figures here")
    p.add_argument("--markdown", type=Path, default=None,
                   help="also write the per-kind means and every featurizer on every variable here")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    out = args.out or Path(tempfile.mkdtemp(prefix="cbench-track-"))
    models = args.models.split(",") if args.models else list(VARIABLES_MODELS)
    cases = models + [c for c in args.cases.split(",") if c]
    load = LoadSampler()
    t0, c0 = time.perf_counter(), time.process_time()
    doc = run_track(cases, out, args.featurizers, n_train=args.n_train, n_test=args.n_test, dataset_dir=DATASET,
                    loader=_art, echo=lambda s: print(s, flush=True), steps=args.steps)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    load_avg = load.stop()
    ref = reference_s(models, args.n_test)
    rows = doc["results"]["rows"]
    fit_s: dict[str, float] = {}
    for r in rows:
        fit_s[r["featurizer"]] = fit_s.get(r["featurizer"], 0.0) + sum(x.get("train_s", 0.0) for x in r["locations"])
    board = doc["results"]["leaderboard"]
    res = {"models": models, "cases": args.cases or None, "runs": len(rows),
           "locations_scored": sum(len(r["locations"]) for r in rows),
           "runs_wall_s": round(sum(r.get("runtime_s") or 0.0 for r in rows), 1), "featurizers": args.featurizers.split(","),
           "n_train": args.n_train, "n_test": args.n_test, "steps": args.steps, "threads": torch.get_num_threads(),
           "cpus": os.cpu_count(), "nice": os.nice(0), "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
           "load_avg": load_avg, "reference_wall_s": round(ref, 3),
           "ratio": round(wall / ref, 1), "fit_s_per_featurizer": {k: round(v, 1) for k, v in fit_s.items()},
           "leaderboard": board, "out": str(out)}
    print(json.dumps(res, indent=1))
    if args.json:
        args.json.write_text(json.dumps(res, indent=1) + "\n")
    if args.markdown:
        args.markdown.write_text(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
