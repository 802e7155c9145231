"""The whole real-model path on the small language model trained here (``cbench_builders.lm``):
for its IOI-like and greater-than-like tasks, every method through ``cbench bench --model DIR
--task PAIRS`` (CPR and CMD per method), then the hypothesis tests and the adversarial evaluation
of the circuit one method finds (its top edges), each step timed. The commands run as a user runs
them (``cbench`` in a subprocess, one torch thread).

    python benchmarks/bench_lm_end_to_end.py --lm $(cbench pull lm-tiny | tail -1) --out build/lm-e2e

``--lm``: the repository (a pulled snapshot or ``cbench build lm``'s output) or a training
directory (its checkpoint in ``model/``).

Writes ``benchmarks/results/lm-end-to-end.json``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results" / "lm-end-to-end.json"
CBENCH = str(Path(sys.executable).with_name("cbench"))


def _run(args: list[str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    proc = subprocess.run([CBENCH, *args], capture_output=True, text=True)
    return time.perf_counter() - t0, proc


def top_edges(scores_path: Path, share: float) -> list[str]:
    """The ``share`` of the graph's edges with the largest |score| (at least 5)."""
    doc = json.loads(scores_path.read_text())
    ranked = sorted(doc["edges"].items(), key=lambda kv: -abs(kv[1]["score"]))
    return [name for name, _ in ranked[:max(5, round(share * len(ranked)))]]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lm", type=Path, default=Path("build/lm-release/lm-tiny"))
    ap.add_argument("--out", type=Path, default=Path("build/lm-e2e"))
    ap.add_argument("--n-examples", type=int, default=100)
    ap.add_argument("--workers", type=int, default=2, help="bench worker processes (the methods side by side)")
    ap.add_argument("--circuit-method", default="eap-ig-inputs")
    ap.add_argument("--circuit-share", type=float, default=0.1, help="share of the edges in the tested circuit")
    args = ap.parse_args(argv)
    model = str(args.lm if (args.lm / "config.json").is_file() else args.lm / "model")
    report: dict = {"model": model, "n_examples": args.n_examples, "workers": args.workers, "tasks": {}}
    t_all = time.perf_counter()
    for task in ("ioi", "greater-than"):
        data = str(args.lm / f"{task}.csv")
        out = args.out / task
        row: dict = {}
        s, proc = _run(["bench", "--model", model, "--task", data, "--n-examples", str(args.n_examples),
                        "--workers", str(args.workers), "--out", str(out)])
        if proc.returncode != 0:
            raise SystemExit(f"bench on {task} failed: {proc.stderr[-2000:]}")
        row["bench_s"] = round(s, 1)
        row["faithfulness"] = json.loads((out / "results.json").read_text())["results"]["faithfulness"]
        circuit = out / "circuit.json"
        circuit.write_text(json.dumps(top_edges(out / "scores" / f"{args.circuit_method}.json", args.circuit_share)))
        s, proc = _run(["test-circuit", "--model", model, "--task", data, "--n-examples", str(args.n_examples),
                        str(circuit), "--test", "all", "--n-random", "50", "--n-reference", "200",
                        "--n-permutations", "200", "--json"])
        if proc.returncode not in (0, 1):
            raise SystemExit(f"test-circuit on {task} failed: {proc.stderr[-2000:]}")
        row["hypothesis_tests_s"] = round(s, 1)
        row["hypothesis_tests"] = {k: {"decision": v["decision"], "statistic": v["statistic"], "p_value": v["p_value"]}
                                   for k, v in json.loads(proc.stdout)["results"]["tests"].items()}
        s, proc = _run(["adversarial", "--model", model, "--task", data, "--n-examples", str(args.n_examples),
                        str(circuit), "--k", "3", "--json"])
        if proc.returncode != 0:
            raise SystemExit(f"adversarial on {task} failed: {proc.stderr[-2000:]}")
        row["adversarial_s"] = round(s, 1)
        row["adversarial"] = json.loads(proc.stdout)["results"]["summary"]
        row["circuit"] = {"method": args.circuit_method, "share": args.circuit_share,
                          "edges": len(json.loads(circuit.read_text()))}
        report["tasks"][task] = row
        print(task, json.dumps({k: v for k, v in row.items() if k.endswith("_s")}))
    report["total_s"] = round(time.perf_counter() - t_all, 1)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")
    print(f"total {report['total_s']} s -> {RESULTS}")


if __name__ == "__main__":
    main()
