"""Wall times of the hub path: a cold ``cbench pull`` (olah start included) and a cached ``cbench info``.

Targets (issue 3): cold pull of one case from the local hub, server start included, < 3 s;
``cbench info`` of a cached case < 0.5 s. Each figure is the wall time of the real command in a
fresh process (``python -m cbench.cli ...``), so interpreter start and imports count too.

Usage: ``python benchmarks/bench_pull.py [--repeat 3] [--hub DIR --case NAME]``. Without
``--hub`` a temporary hub is made: from ``model_zoo/releases`` if it holds a case, else from a
tiny random model written with ``cbench.artifacts.model.write_model_artifact``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CLI = [sys.executable, "-m", "cbench.cli"]


def _tiny_case(tmp: Path) -> tuple[Path, str]:
    from cbench.artifacts.model import write_model_artifact
    from cbench.hub.publishing import publish
    from cbench.artifacts.transformer_lens_adapter import build_model

    model = build_model({"n_layers": 2, "d_model": 16, "n_heads": 4, "d_head": 4, "d_mlp": 64, "d_vocab": 6,
                         "d_vocab_out": 1, "n_ctx": 5, "act_fn": "relu", "normalization_type": None, "seed": 0})
    meta = {"schema": "cbench/model-meta/v1", "case": "3", "model_kind": "siit", "task_type": "numerical",
            "description": "benchmark model", "input_tokens": ["BOS", "a", "b", "c", "x", "PAD"],
            "bos_token": "BOS", "pad_token": "PAD", "output_classes": None, "min_seq_len": 2, "max_seq_len": 5,
            "causal": True, "seed": 0, "training": None, "metrics": None, "dataset_revision": None,
            "training_time_s": None, "hardware": None, "cbench_version": "0.1.0"}
    circuit = {"schema": "cbench/circuit/v1", "case": "3", "model_kind": "siit", "granularity": "qkv",
               "graph": {"n_layers": 2, "n_heads": 4, "has_mlp": True, "parallel_attn_mlp": False},
               "nodes": ["input", "a0.h0", "m1", "logits"], "edges": ["input->a0.h0<q>", "a0.h0->m1", "m1->logits"]}
    write_model_artifact(tmp / "art", model, meta, circuit=circuit, readme="# case-3\n\nbenchmark model\n")
    hub = tmp / "hub"
    publish(tmp / "art", "cbench/case-3", "model", "v1.0.0", hub=hub)
    return hub, "case-3"


def _zoo_case(tmp: Path) -> tuple[Path, str] | None:
    from cbench.hub.seeding import ensure_seeded
    from cbench.hub.zoo import zoo_releases

    releases = {r: v for r, v in zoo_releases().items() if r.repo_type == "model"}
    if not releases:
        return None
    ref = sorted(releases, key=lambda r: r.repo_id)[0]
    hub = tmp / "hub"
    ensure_seeded(hub)
    return hub, ref.repo_id


CPU: dict[str, list[float]] = {}


def _run(args: list[str], env: dict, label: str | None = None) -> float:
    """Wall time of one command; its CPU time (user+sys, olah's included) goes to CPU[label]."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(CLI + args, env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"`cbench {' '.join(args)}` failed: {proc.stderr.strip()}")
    if label:
        CPU.setdefault(label, []).append((r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime))
    return dt


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--hub", default=None)
    ap.add_argument("--case", default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="cbench-bench-") as tmp:
        tmp = Path(tmp)
        if args.hub:
            hub, case = Path(args.hub), args.case or "case-3"
        else:
            hub, case = _zoo_case(tmp) or _tiny_case(tmp)
        base_env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "CBENCH_ENDPOINT")}

        from cbench.hub.server import HubServer

        starts = []
        for _ in range(args.repeat):
            with HubServer(hub) as s:
                starts.append(s.startup_s)

        cold, info, info_off = [], [], []
        for i in range(args.repeat):
            env = dict(base_env, CBENCH_HOME=str(tmp / f"home{i}"), CBENCH_HUB=str(hub))
            cold.append(_run(["pull", case], env, "cold"))
            for _ in range(3):
                info.append(_run(["info", case], env, "info"))
                info_off.append(_run(["info", case], dict(env, HF_HUB_OFFLINE="1"), "info_offline"))
        py = _run(["--version"], dict(base_env))

        def fmt(xs):
            return f"median {statistics.median(xs):.2f} s (min {min(xs):.2f}, max {max(xs):.2f}, n={len(xs)})"

        report = {
            "case": case, "hub": str(hub), "cpus": os.cpu_count(), "load_avg_1m": os.getloadavg()[0],
            "olah_startup_s": starts, "cold_pull_s": cold, "cached_info_s": info, "offline_info_s": info_off,
            "cli_startup_s": py, "cpu_s": CPU,
        }
        print(f"case {case} from {hub}  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cpus)")
        print(f"olah startup (in-process measure)      {fmt(starts)}")
        print(f"cold `cbench pull` (server included)   {fmt(cold)}   target < 3 s")
        print(f"cached `cbench info`                   {fmt(info)}   target < 0.5 s")
        print(f"cached `cbench info`, HF_HUB_OFFLINE=1 {fmt(info_off)}")
        print(f"`cbench --version` (CLI floor)         {py:.2f} s")
        print("CPU time (user+sys, all processes; what the wall time approaches on an idle machine):")
        for label, xs in CPU.items():
            print(f"  {label:<14} median {statistics.median(xs):.2f} s")
        print(json.dumps(report))


if __name__ == "__main__":
    main()
