"""Performance at scale (issue 20): every discovery method on three model sizes, as time and
peak memory, each as a ratio to the floor and to auto-circuit, in one run.

Sizes (``--sizes``, comma-separated; default all three):

* ``siit``: the main SIIT case-3 model pulled from the embedded local hub (``cbench.pull``), 100
  sampled validation-style pairs of its task;
* ``6x4``: the IOI shape, 6 layers x 4 heads, d_model 64 (MLPs, layer norms), random weights,
  1,108 edges;
* ``gpt2``: the GPT-2-small shape, 12 layers x 12 heads, d_model 768, d_mlp 3072, random
  weights, 32,491 edges (a vocabulary of 1,024 tokens: the graph does not depend on it).

The two random shapes run on ``--n-examples`` (100) random (base, source) pairs of sequence
length 16, token 0 shared at position 0 (a BOS).

Each measurement runs in a fresh subprocess (``nice``-able, one torch thread, CBENCH_THREADS=1)
that loads the same weights and pairs, runs the method ``--repeat`` times and reports the wall
and CPU time of the call (the best of the repeats) and the process's peak resident memory
(``ru_maxrss``; on a GPU ``torch.cuda.max_memory_allocated``), once after loading and once at
the end. Memory is reported as the peak RSS of the whole process and as the part the method
added over the loaded process (the same baseline for every method of a size).

* **floor**: one forward and one backward pass of the plain HookedTransformer on the same batch
  (the loss: cross-entropy against the clean model's answers on the valid positions; backward
  to the parameters and the embeddings);
* **cbench**: ``cbench.discovery.discover`` of every registered method with its defaults (UGS,
  SP and edge SP with their default 100 steps);
* **auto-circuit** (PyPI ``auto-circuit==1.0.1``, installed by this script into its own venv,
  ``--ac-venv``, with ``torch==2.13.0`` first so it does not pull a CUDA build; never a
  dependency of cbench): EAP (``mask_gradient_prune_scores`` at the clean point), its EAP-IG
  (5 mask-interpolation samples, the closest it has to EAP-IG), ACDC (``acdc_prune_scores``,
  one threshold) and edge subnetwork probing (``circuit_probing_prune_scores``-free: its
  ``subnetwork_mask_prune_scores``, 100 epochs), on the same weights and pairs
  (``benchmarks/scale_autocircuit.py``).

Ratios are of CPU time (one thread: the wall time on an idle machine, and robust to the other
jobs on a shared one). Runs that exceed ``--timeout`` seconds are reported as such.

Run: ``nice -n 15 .venv/bin/python benchmarks/bench_scale.py [--sizes siit,6x4,gpt2]
[--methods eap,acdc] [--json out.json] [--markdown out.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
AC_VERSION = "1.0.1"
TORCH_VERSION = "2.13.0"
SIZES = ("siit", "6x4", "gpt2")
SEQ_LEN = 16
SHAPES = {
    "6x4": dict(n_layers=6, n_heads=4, d_model=64, d_head=16, d_mlp=256, d_vocab=512),
    "gpt2": dict(n_layers=12, n_heads=12, d_model=768, d_head=64, d_mlp=3072, d_vocab=1024),
}
# which auto-circuit run each cbench method is compared with (None: auto-circuit has no such method)
AC_OF = {"eap": "eap", "eap-ig-inputs": "eap-ig", "eap-ig-activations": "eap-ig", "acdc": "acdc",
         "edge-sp": "edge-sp"}
AC_METHODS = ("eap", "eap-ig", "acdc", "edge-sp")
SKIP = {"random"}  # no computation to measure


def env(threads: int = 1) -> dict:
    e = dict(os.environ)
    e.update(CBENCH_THREADS=str(threads), OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads),
             PYTHONHASHSEED="0")
    e.setdefault("TQDM_DISABLE", "1")
    return e


# ---------------------------------------------------------------------------- the inputs
def prepare_size(size: str, workdir: Path, n: int) -> Path:
    """Write the model (config.json + model.safetensors) and the pairs (pairs.safetensors) of
    ``size`` under ``workdir/size``; both cbench's and auto-circuit's runs load them."""
    import torch
    from safetensors.torch import save_file

    from cbench.transformer_lens_adapter import build_model, config_to_json

    out = workdir / size
    out.mkdir(parents=True, exist_ok=True)
    if size == "siit":
        from cbench.artifacts import read_model_artifact
        from cbench.pull import pull
        from cbench.task_data import sample_pairs

        snap = pull("case-3")
        art = read_model_artifact(snap.path)
        model = art.load_model()
        data = sample_pairs(art.meta, n, seed=0)
        task = data.task_type
    else:
        shape = SHAPES[size]
        cfg = dict(shape, n_ctx=SEQ_LEN, act_fn="gelu_new", attn_only=False, attention_dir="causal",
                   normalization_type="LN", seed=0, dtype="float32")
        model = build_model(cfg)
        g = torch.Generator().manual_seed(0)
        base = torch.randint(1, shape["d_vocab"], (n, SEQ_LEN), generator=g)
        source = torch.randint(1, shape["d_vocab"], (n, SEQ_LEN), generator=g)
        base[:, 0] = source[:, 0] = 0
        valid = torch.ones(n, SEQ_LEN, dtype=torch.bool)
        valid[:, 0] = False
        from cbench.task_data import TaskData

        data = TaskData(base, source, None, valid, "categorical")
        task = "categorical"
    with torch.no_grad():
        logits = model(data.base)
    answers = logits.argmax(-1) if task == "categorical" else torch.zeros(logits.shape[:2], dtype=torch.long)
    (out / "config.json").write_text(json.dumps(config_to_json(model.cfg), indent=1))
    save_file({k: v.detach().contiguous() for k, v in model.state_dict().items()}, out / "model.safetensors")
    save_file({"base": torch.as_tensor(data.base).contiguous(), "source": torch.as_tensor(data.source).contiguous(),
               "valid": torch.as_tensor(data.valid).contiguous(), "answers": answers.contiguous()},
              out / "pairs.safetensors")
    (out / "meta.json").write_text(json.dumps({"task_type": task, "n_edges": None}))
    return out


def load_size(d: Path, device: str):
    """(model, TaskData) of a prepared size, in cbench's types."""
    import torch
    from safetensors.torch import load_file

    from cbench.task_data import TaskData
    from cbench.transformer_lens_adapter import build_model

    cfg = json.loads((d / "config.json").read_text())
    model = build_model(cfg, state_dict=load_file(d / "model.safetensors"))
    pairs = load_file(d / "pairs.safetensors")
    task = json.loads((d / "meta.json").read_text())["task_type"]
    model = torch.nn.Module.to(model, device)
    return model, TaskData(pairs["base"], pairs["source"], None, pairs["valid"], task), pairs["answers"]


# ---------------------------------------------------------------------------- one measurement (child)
def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(size_dir: Path, method: str, repeat: int, device: str) -> dict:
    import torch

    torch.set_num_threads(int(os.environ.get("CBENCH_THREADS", "1")))
    model, data, answers = load_size(size_dir, device)
    from cbench.runtime import CircuitRuntime

    rt = CircuitRuntime(model)
    import gc

    gc.collect()
    base_mb = peak_mb()
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    times = []
    out = {}
    for _ in range(repeat):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        if method == "floor":
            floor_pass(model, data)
        else:
            from cbench.discovery import discover

            res = discover(rt, data, method, {}, progress=False)
            out["n_edges"] = int(res.scores.size)
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t, time.process_time() - c))
    wall, cpu = min(times)
    out.update(wall_s=wall, cpu_s=cpu, base_mb=base_mb, peak_mb=peak_mb(), n_edges=rt.n_edges)
    if device.startswith("cuda"):
        out["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    return out


def floor_pass(model, data):
    """One forward and one backward pass of the plain model on the batch (see the docstring)."""
    import torch

    base = torch.as_tensor(data.base, device=next(model.parameters()).device)
    valid = torch.as_tensor(data.valid, device=base.device)
    model.zero_grad(set_to_none=True)
    with torch.enable_grad():
        logits = model(base)
        if logits.shape[-1] == 1:
            loss = logits[..., 0][valid].abs().mean()
        else:
            target = logits.detach().argmax(-1)
            loss = torch.nn.functional.cross_entropy(logits[valid], target[valid])
        loss.backward()
    model.zero_grad(set_to_none=True)


# ---------------------------------------------------------------------------- auto-circuit's venv
def ensure_ac_venv(venv: Path) -> Path:
    """The venv with auto-circuit from PyPI (created on first use); returns its python."""
    py = venv / "bin" / "python"
    ok = py.exists() and subprocess.run([str(py), "-c", "import auto_circuit"], capture_output=True).returncode == 0
    if ok:
        return py
    print(f"creating {venv} with auto-circuit=={AC_VERSION} from PyPI (torch=={TORCH_VERSION} first)", flush=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(py), "-m", "pip", "install", "--quiet"]
    subprocess.run(pip + [f"torch=={TORCH_VERSION}"], check=True)
    subprocess.run(pip + [f"auto-circuit=={AC_VERSION}", f"torch=={TORCH_VERSION}"], check=True)
    return py


# ---------------------------------------------------------------------------- the parent
def measure(cmd: list[str], timeout: float, nice: int) -> dict:
    full = (["nice", "-n", str(nice)] if nice else []) + cmd
    t = time.perf_counter()
    try:
        p = subprocess.run(full, capture_output=True, text=True, timeout=timeout, env=env())
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr or p.stdout).strip().splitlines()[-3:]
        return {"error": " | ".join(tail)[-300:] or f"exit {p.returncode}"}
    line = [x for x in p.stdout.splitlines() if x.startswith("{")][-1]
    r = json.loads(line)
    r["process_s"] = time.perf_counter() - t
    return r


def fmt_t(s):
    return "—" if s is None else (f"{s:.3f}" if s < 1 else f"{s:.2f}" if s < 100 else f"{s:.0f}")


def markdown(rows: list[dict], header: str) -> str:
    out = [header, "",
           "| size | method | time (s) | peak RSS (MB) | added (MB) | × floor (time) | × floor (added memory) "
           "| auto-circuit (s) | auto-circuit added (MB) | speed-up vs auto-circuit |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['size']} | {r['method']} | {r['error']} | | | | | | | |")
            continue
        ac = r.get("ac") or {}
        ac_t = ac.get("cpu_s")
        ac_cell = ac.get("error") or fmt_t(ac_t) if ac else "—"
        ac_mem = f"{ac['peak_mb'] - ac['base_mb']:.0f}" if "peak_mb" in ac else "—"
        speed = f"{ac_t / r['cpu_s']:.1f}×" if ac_t else "—"
        out.append(f"| {r['size']} | {r['method']} | {fmt_t(r['cpu_s'])} | {r['peak_mb']:.0f} | {r['added_mb']:.0f} "
                   f"| {r['x_floor']:.2f} | {r['x_floor_mem']:.2f} | {ac_cell} | {ac_mem} | {speed} |")
    return "\n".join(out) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--methods", default=None, help="comma-separated cbench methods (default: all but random)")
    ap.add_argument("--n-examples", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=None, help="runs per measurement (default 3; 1 for gpt2)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per measurement")
    ap.add_argument("--nice", type=int, default=15)
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench-scale")
    ap.add_argument("--ac-venv", type=Path, default=ROOT / "build" / "autocircuit-venv")
    ap.add_argument("--no-autocircuit", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--child", nargs=3, metavar=("SIZE_DIR", "METHOD", "REPEAT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.child:
        d, method, repeat = args.child
        print(json.dumps(child(Path(d), method, int(repeat), device)), flush=True)
        return
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        ap.error(f"unknown size {bad[0]!r}; choose from {', '.join(SIZES)}")
    from cbench.discovery import METHODS

    methods = [m for m in METHODS if m not in SKIP] if args.methods is None else args.methods.split(",")
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        ap.error(f"unknown method {unknown[0]!r}")
    ac_py = None if args.no_autocircuit else ensure_ac_venv(args.ac_venv)
    rows = []
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    for size in sizes:
        d = prepare_size(size, args.workdir, args.n_examples)
        repeat = args.repeat or (1 if size == "gpt2" else 3)

        def ours(method):
            return measure([sys.executable, __file__, "--device", device, "--child", str(d), method, str(repeat)],
                           args.timeout, args.nice)

        floor = ours("floor")
        print(f"[{size}] floor: {floor}", flush=True)
        if "error" in floor:
            raise SystemExit(f"the floor run failed on {size}: {floor['error']}")
        ac = {}
        if ac_py is not None:
            for m in AC_METHODS:
                if not any(AC_OF.get(x) == m for x in methods):
                    continue
                ac[m] = measure([str(ac_py), str(HERE / "scale_autocircuit.py"), str(d), m, str(repeat), device],
                                args.timeout, args.nice)
                print(f"[{size}] auto-circuit {m}: {ac[m]}", flush=True)
        floor_added = max(floor["peak_mb"] - floor["base_mb"], 1.0)
        rows.append(dict(size=size, method="floor (1 fwd + 1 bwd)", **floor, added_mb=floor_added,
                         x_floor=1.0, x_floor_mem=1.0))
        for m in methods:
            r = ours(m)
            print(f"[{size}] {m}: {r}", flush=True)
            row = dict(size=size, method=m, **r)
            if "error" not in r:
                row["added_mb"] = r["peak_mb"] - r["base_mb"]
                row["x_floor"] = r["cpu_s"] / floor["cpu_s"]
                row["x_floor_mem"] = row["added_mb"] / floor_added
                row["ac"] = ac.get(AC_OF.get(m))
            rows.append(row)
    load1 = os.getloadavg()[0]
    header = (f"bench_scale.py, {started}, device {device}, {args.n_examples} pairs, one torch thread per "
              f"process, nice {args.nice}; load average {load0:.1f} at the start, {load1:.1f} at the end "
              f"(a shared machine: CPU times, ratios within this run)")
    md = markdown(rows, header)
    print(md)
    if args.markdown:
        args.markdown.write_text(md)
    if args.json:
        args.json.write_text(json.dumps({"header": header, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
