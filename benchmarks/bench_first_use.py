"""First use on a fresh home: lazy seeding and config-only dataset downloads (issue 18).

Measures, each in a fresh process on a fresh ``CBENCH_HOME`` with the default hub seeded from
this repository's ``model_zoo``:

* ``cbench pull case-3`` (the hub seeded lazily: one repository) against the reference of the
  same pull after seeding the whole zoo (what the first command did before);
* ``cbench.load_dataset("counterfactuals", "case-3")`` (card + that config's files) against a
  full snapshot of the dataset (every config), with the bytes each downloads.

Usage: ``python benchmarks/bench_first_use.py [--repeat 3]``; prints a table, writes
``benchmarks/results/first_use.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "cbench.cli"]


CPU: dict[str, list[float]] = {}


def _run(args: list[str], home: Path, label: str = "", offline: bool = False) -> float:
    """Wall time of one command; its CPU time (the process and its children, e.g. git and olah)
    goes to ``CPU[label]`` (on a shared, loaded machine the CPU time is the steadier figure)."""
    import resource

    env = dict(os.environ, CBENCH_HOME=str(home), HF_HUB_DISABLE_PROGRESS_BARS="1")
    for k in ("CBENCH_HUB", "CBENCH_ENDPOINT", "HF_ENDPOINT", "HF_HUB_OFFLINE"):
        env.pop(k, None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {proc.stderr.strip()}")
    if label:
        CPU.setdefault(label, []).append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return dt


def _bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows: dict[str, list[float]] = {k: [] for k in ("lazy_pull", "seed_all", "pull_after_seed_all",
                                                     "config_dataset", "config_dataset_offline", "full_dataset")}
    sizes = {}
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="cbench-first-") as tmp:
            tmp = Path(tmp)
            rows["lazy_pull"].append(_run(CLI + ["pull", "case-3"], tmp / "a", "lazy_pull"))
            seed = [sys.executable, "-c", "from cbench.hub.seeding import ensure_seeded; ensure_seeded()"]
            rows["seed_all"].append(_run(seed, tmp / "b", "seed_all"))
            rows["pull_after_seed_all"].append(_run(CLI + ["pull", "case-3"], tmp / "b", "pull_after_seed_all"))
            code = "import cbench; cbench.load_dataset('counterfactuals', 'case-3')"
            rows["config_dataset"].append(_run([sys.executable, "-c", code], tmp / "c", "config_dataset"))
            sizes["config_dataset_bytes"] = _bytes(tmp / "c" / "cache")
            rows["config_dataset_offline"].append(_run([sys.executable, "-c", code], tmp / "c",
                                                       "config_dataset_offline", offline=True))
            rows["full_dataset"].append(_run(CLI + ["pull", "counterfactuals", "--type", "dataset"], tmp / "d",
                                             "full_dataset"))
            sizes["full_dataset_bytes"] = _bytes(tmp / "d" / "cache")
    med = {k: statistics.median(v) for k, v in rows.items()}
    cpu = {k: statistics.median(v) for k, v in CPU.items()}
    out = {"median_s": med, "runs_s": rows, "median_cpu_s": cpu, **sizes, "load": os.getloadavg(),
           "first_use_reference_s": med["seed_all"] + med["pull_after_seed_all"],
           "first_use_ratio": (med["seed_all"] + med["pull_after_seed_all"]) / med["lazy_pull"],
           "dataset_bytes_ratio": sizes["full_dataset_bytes"] / max(1, sizes["config_dataset_bytes"])}
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "benchmarks" / "results" / "first_use.json").write_text(json.dumps(out, indent=2) + "\n")
    print(f"cold `cbench pull case-3`, lazy seeding:      {med['lazy_pull']:.2f} s, {cpu['lazy_pull']:.2f} s CPU "
          "(goal < 3 s)")
    print(f"reference: seed the whole zoo + pull:         {out['first_use_reference_s']:.2f} s "
          f"({out['first_use_ratio']:.1f}x)")
    print(f"load_dataset('counterfactuals', 'case-3'):   {med['config_dataset']:.2f} s, "
          f"{cpu['config_dataset']:.2f} s CPU, {sizes['config_dataset_bytes'] / 1e6:.2f} MB")
    print(f"  the same call again, offline:               {med['config_dataset_offline']:.2f} s")
    print(f"reference: full dataset snapshot:            {med['full_dataset']:.2f} s, "
          f"{sizes['full_dataset_bytes'] / 1e6:.2f} MB ({out['dataset_bytes_ratio']:.0f}x the bytes)")
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
