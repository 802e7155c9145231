"""Performance at scale (issue 20): every discovery method on three model sizes, as time and
peak memory, each as a ratio to the floor and to auto-circuit, in one run.

Sizes (``--sizes``, comma-separated; default all three):

* ``siit``: the main SIIT case-3 model pulled from the embedded local hub (``cbench.hub.pull``), 100
  sampled validation-style pairs of its task;
* ``6x4``: the IOI shape, 6 layers x 4 heads, d_model 64 (MLPs, layer norms), random weights,
  1,108 edges;
* ``gpt2``: the GPT-2-small shape, 12 layers x 12 heads, d_model 768, d_mlp 3072, random
  weights, 32,491 edges (a vocabulary of 1,024 tokens: the graph does not depend on it).
* ``gpt2-20``: the same model on the first 20 of its pairs, EAP and EAP-IG-inputs only: a ratio
  to auto-circuit where it cannot hold 100 pairs (auto-circuit runs under an address-space
  limit, ``--ac-memory-gb``, 14 GB by default, so that it fails on its own allocation rather
  than bring the kernel's out-of-memory killer onto the machine).

The two random shapes run on ``--n-examples`` (100) random (base, source) pairs of sequence
length 16, token 0 shared at position 0 (a BOS).

Per size, one subprocess (``nice``, one torch thread, CBENCH_THREADS=1) loads the weights and
pairs once and measures the floor and then every cbench method in turn; a second one, in
auto-circuit's venv, measures auto-circuit's methods on the same weights and pairs. Each call
is timed (wall and CPU, the best of ``--repeat``) and its peak memory measured on its own
(``scale_measure.py``: the resident high-water mark reset before the call; "added" is the
peak minus the resident memory before it, "peak RSS" the whole process's; on a GPU also
``torch.cuda.max_memory_allocated``). A call past ``--timeout`` seconds is interrupted and
reported as such, with the peak memory it reached until then (``--gpt2-timeout`` sets the limit
on the GPT-2 sizes apart).

* **floor**: one forward and one backward pass of the plain HookedTransformer on the same batch
  (the loss: cross-entropy against the clean model's answers on the valid positions; backward
  to the parameters and the embeddings);
* **cbench**: ``cbench.discovery.discover`` of every registered method with its defaults (UGS,
  SP and edge SP with their default 100 steps);
* **auto-circuit** (PyPI ``auto-circuit==1.0.1``, installed by this script into its own venv,
  ``--ac-venv``, with ``torch==2.13.0`` first so it does not pull a CUDA build; never a
  dependency of cbench): EAP (``mask_gradient_prune_scores`` at the clean point), its EAP-IG
  (5 mask-interpolation samples, the closest it has to EAP-IG), ACDC (``acdc_prune_scores``,
  one threshold) and edge subnetwork probing (``subnetwork_probing_prune_scores``, ~100
  steps of 32 pairs), on the same weights and pairs (``benchmarks/scale_autocircuit.py``).
  auto-circuit 1.0.1 needs TransformerLens 2.x and attrs, which its package does not pin:
  the venv gets ``transformer-lens>=2,<3``, ``attrs``, ``numpy<2`` and ``pyarrow<20`` with it.

Ratios are of CPU time (one thread: the wall time on an idle machine, and robust to the other
jobs on a shared one). Runs that exceed ``--timeout`` seconds are reported as such.

Run: ``nice -n 15 .venv/bin/python benchmarks/bench_scale.py [--sizes siit,6x4,gpt2]
[--methods eap,acdc] [--json out.json] [--markdown out.md]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
AC_VERSION = "1.0.1"
TORCH_VERSION = "2.13.0"
SIZES = ("siit", "6x4", "gpt2", "gpt2-20")
# gpt2-20: the GPT-2 shape on the first 20 of the pairs, EAP and EAP-IG-inputs only, for a ratio
# to auto-circuit where it cannot hold 100 pairs (its EAP passed 20 GB there)
SMALL_N = {"gpt2-20": 20}
SMALL_METHODS = ("eap", "eap-ig-inputs")
SEQ_LEN = 16
SHAPES = {
    "6x4": dict(n_layers=6, n_heads=4, d_model=64, d_head=16, d_mlp=256, d_vocab=512),
    "gpt2": dict(n_layers=12, n_heads=12, d_model=768, d_head=64, d_mlp=3072, d_vocab=1024),
}
# which auto-circuit run each cbench method is compared with (None: auto-circuit has no such method)
# (auto-circuit's EAP-IG interpolates every edge mask at once, Z passes: the closest to EAP-IG-inputs;
# it has nothing like EAP-IG-activations' Z x depth passes, which is therefore not compared)
AC_OF = {"eap": "eap", "eap-ig-inputs": "eap-ig", "acdc": "acdc", "edge-sp": "edge-sp"}
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

    from cbench.artifacts.transformer_lens_adapter import build_model, config_to_json

    out = workdir / size
    out.mkdir(parents=True, exist_ok=True)
    if size == "siit":
        from cbench.artifacts.model import read_model_artifact
        from cbench.hub.pull import pull
        from cbench.tasks.data import sample_pairs

        snap = pull("case-3")
        art = read_model_artifact(snap.path)
        model = art.load_model()
        data = sample_pairs(art.meta, n, seed=0)
        task = data.task_type
    else:
        shape = SHAPES[size.split("-")[0]]
        cfg = dict(shape, n_ctx=SEQ_LEN, act_fn="gelu_new", attn_only=False, attention_dir="causal",
                   normalization_type="LN", seed=0, dtype="float32")
        model = build_model(cfg)
        g = torch.Generator().manual_seed(0)
        full = max(n, 100)  # drawn for 100 pairs, so a smaller size holds the first of the same pairs
        base = torch.randint(1, shape["d_vocab"], (full, SEQ_LEN), generator=g)[:n]
        source = torch.randint(1, shape["d_vocab"], (full, SEQ_LEN), generator=g)[:n]
        base[:, 0] = source[:, 0] = 0
        valid = torch.ones(n, SEQ_LEN, dtype=torch.bool)
        valid[:, 0] = False
        from cbench.tasks.data import TaskData

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

    from cbench.tasks.data import TaskData
    from cbench.artifacts.transformer_lens_adapter import build_model

    cfg = json.loads((d / "config.json").read_text())
    model = build_model(cfg, state_dict=load_file(d / "model.safetensors"))
    pairs = load_file(d / "pairs.safetensors")
    task = json.loads((d / "meta.json").read_text())["task_type"]
    model = torch.nn.Module.to(model, device)
    return model, TaskData(pairs["base"], pairs["source"], None, pairs["valid"], task), pairs["answers"]


# ---------------------------------------------------------------------------- the measurements (child)
def child(size_dir: Path, methods: list[str], repeat: int, device: str, timeout: float) -> None:
    """The floor, then every method, in this one process; one JSON line each."""
    import torch

    from scale_measure import emit, measure

    torch.set_num_threads(int(os.environ.get("CBENCH_THREADS", "1")))
    model, data, _answers = load_size(size_dir, device)
    from cbench.discovery import discover
    from cbench.runtime import CircuitRuntime

    rt = CircuitRuntime(model)
    cuda = device.startswith("cuda")
    floor_pass(model, data.subset(2))  # warm-up on two pairs: first-call costs are not the floor's
    emit("floor", dict(measure(lambda: floor_pass(model, data), repeat, timeout, cuda), n_edges=rt.n_edges))
    for m in methods:
        emit(m, dict(measure(lambda m=m: discover(rt, data, m, {}, progress=False), repeat, timeout, cuda),
                     n_edges=rt.n_edges))


def floor_pass(model, data):
    """One forward and one backward pass of the plain model on the batch (see the docstring)."""
    import torch

    base = torch.as_tensor(data.base, device=next(model.parameters()).device)
    valid = torch.as_tensor(data.valid, device=base.device)
    model.zero_grad(set_to_none=True)
    # the plain model: without the per-head q/k/v inputs and head results cbench's loader turns on
    # for hook-based edge patching (they cost 4 x n_heads x d_model floats per token and layer)
    flags = {k: getattr(model.cfg, k) for k in ("use_split_qkv_input", "use_attn_result", "use_hook_mlp_in")}
    for k in flags:
        setattr(model.cfg, k, False)
    try:
        _floor_loss(model, base, valid)
    finally:
        for k, v in flags.items():
            setattr(model.cfg, k, v)
    model.zero_grad(set_to_none=True)


def _floor_loss(model, base, valid):
    import torch

    with torch.enable_grad():
        logits = model(base)
        if logits.shape[-1] == 1:
            loss = logits[..., 0][valid].abs().mean()
        else:
            target = logits.detach().argmax(-1)
            loss = torch.nn.functional.cross_entropy(logits[valid], target[valid])
        loss.backward()


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
    # auto-circuit 1.0.1 imports attr and transformer_lens.past_key_value_caching (TransformerLens 2.x)
    # without requiring them so: pinned here, with the numpy 1.x and pyarrow that TransformerLens 2.x
    # and its datasets import need
    subprocess.run(pip + [f"auto-circuit=={AC_VERSION}", f"torch=={TORCH_VERSION}", "transformer-lens>=2.0,<3",
                          "attrs", "numpy<2", "pyarrow<20"], check=True)
    return py


# ---------------------------------------------------------------------------- the parent
def run_child(cmd: list[str], n_calls: int, timeout: float, nice: int, memory_gb: float | None = None) -> dict[str, dict]:
    """Run a measuring child, return ``{method: result}`` from its JSON lines (what it printed
    before a failure too; a method it never reached gets the failure's message). ``memory_gb``:
    the child's address-space limit, so a tool that needs more fails on its own allocation
    (reported) instead of bringing the kernel's out-of-memory killer onto the machine."""
    full = (["nice", "-n", str(nice)] if nice else []) + cmd
    err = None

    def limit():
        import resource

        cap = int(memory_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    try:
        p = subprocess.run(full, capture_output=True, text=True, timeout=timeout * n_calls * 40 + 3600, env=env(),
                           preexec_fn=limit if memory_gb else None)
        out, code, stderr = p.stdout, p.returncode, p.stderr
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        code, stderr, err = -1, "", "the measuring process ran out of time"
    res = {}
    for line in out.splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            if memory_gb and "can't allocate memory" in r.get("error", ""):
                r["error"] = f"out of memory (its {memory_gb:g} GB address-space limit)"
            res[r.pop("method")] = r
    if code != 0 and err is None:
        tail = [x for x in (stderr or "").strip().splitlines() if x.strip()][-1:]
        err = (tail[0][-200:] if tail else f"exit {code}")
    if err:
        res["_error"] = {"error": err}
    return res


def fmt_t(s):
    return "—" if s is None else (f"{s:.3f}" if s < 1 else f"{s:.2f}" if s < 100 else f"{s:.0f}")


def markdown(rows: list[dict], header: str) -> str:
    out = [header, "",
           "| size | method | time (s) | × floor | peak RSS (MB) | added memory (MB) | auto-circuit (s) "
           "| auto-circuit added (MB) | speed-up vs auto-circuit |",
           "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if "error" in r:
            mem = (f"{r['peak_mb']:.0f} | {r['added_mb']:.0f}" if "peak_mb" in r else " | ")
            out.append(f"| {r['size']} | {r['method']} | {r['error']} | | {mem} | | | |")
            continue
        ac = r.get("ac")
        if ac is None:
            ac_cell, ac_mem, speed = "—", "—", "—"
        elif "error" in ac:
            ac_cell, ac_mem, speed = ac["error"], "—", "—"
        else:
            ac_cell, ac_mem, speed = fmt_t(ac["cpu_s"]), f"{ac['added_mb']:.0f}", f"{ac['cpu_s'] / r['cpu_s']:.1f}×"
        out.append(f"| {r['size']} | {r['method']} | {fmt_t(r['cpu_s'])} | {r['x_floor']:.2f} | {r['peak_mb']:.0f} "
                   f"| {r['added_mb']:.0f} | {ac_cell} | {ac_mem} | {speed} |")
    return "\n".join(out) + "\n"


def measure_size(size: str, d: Path, methods: list[str], args, device: str, ac_py) -> list[dict]:
    """The rows of one size: auto-circuit's process, then cbench's (floor and every method)."""
    big = size.startswith("gpt2")
    repeat = args.repeat or (1 if big else 3)
    timeout = args.gpt2_timeout if big and args.gpt2_timeout else args.timeout
    ac: dict = {}
    ac_methods = [m for m in AC_METHODS if any(AC_OF.get(x) == m for x in methods)]

    def run_ac():
        if ac_py is not None and ac_methods:
            ac.update(run_child([str(ac_py), str(HERE / "scale_autocircuit.py"), str(d), ",".join(ac_methods),
                                 str(repeat), device, str(timeout)], len(ac_methods), timeout, args.nice,
                                memory_gb=args.ac_memory_gb))
            print(f"[{size}] auto-circuit: {ac}", flush=True)

    import threading

    t_ac = threading.Thread(target=run_ac)
    t_ac.start()
    if not args.parallel:
        t_ac.join()
    res = run_child([sys.executable, __file__, "--device", device, "--child", str(d), ",".join(methods),
                     str(repeat), str(timeout)], len(methods) + 1, timeout, args.nice)
    print(f"[{size}] cbench: {res}", flush=True)
    t_ac.join()
    failed = res.get("_error", {"error": "not reached"})
    floor = res.get("floor", failed)
    if "error" in floor:
        return [dict(size=size, method="floor", error=floor["error"])]
    rows = []
    for m in ["floor"] + methods:
        r = res.get(m, failed)
        row = dict(size=size, method="floor (1 fwd + 1 bwd)" if m == "floor" else m, **r)
        if "error" not in r:
            row["x_floor"] = r["cpu_s"] / floor["cpu_s"]
            row["ac"] = ac.get(AC_OF.get(m), ac.get("_error")) if AC_OF.get(m) else None
        rows.append(row)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default=",".join(SIZES), help="comma-separated: " + ", ".join(SIZES))
    ap.add_argument("--methods", default=None, help="comma-separated cbench methods (default: all but random)")
    ap.add_argument("--n-examples", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=None, help="runs per measurement (default 3; 1 for gpt2)")
    ap.add_argument("--gpt2-methods", default=None, help="methods on the gpt2 size (default: --methods)")
    ap.add_argument("--parallel", action="store_true", help="measure the sizes, and auto-circuit next to cbench, at the same time (CPU "
                    "times per process stay comparable; a loaded machine gives each process its own share)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="CPU seconds per measured call")
    ap.add_argument("--gpt2-timeout", type=float, default=None, help="CPU seconds per call on the gpt2 size "
                    "(default: --timeout); a call cut there still reports its peak memory so far")
    ap.add_argument("--ac-memory-gb", type=float, default=14.0, help="auto-circuit's address-space limit "
                    "(its GPT-2-shape EAP on 100 pairs passed 20 GB; past the limit it fails on an allocation)")
    ap.add_argument("--nice", type=int, default=15)
    ap.add_argument("--device", default=None, help="cpu or cuda (default: cuda when available)")
    ap.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench-scale")
    ap.add_argument("--ac-venv", type=Path, default=ROOT / "build" / "autocircuit-venv")
    ap.add_argument("--no-autocircuit", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--markdown", type=Path, default=None)
    ap.add_argument("--child", nargs=4, metavar=("SIZE_DIR", "METHODS", "REPEAT", "TIMEOUT"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if args.child:
        d, methods, repeat, timeout = args.child
        child(Path(d), methods.split(","), int(repeat), device, float(timeout))
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
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load0 = os.getloadavg()[0]
    per_size = {size: [m for m in methods if m in SMALL_METHODS] if size in SMALL_N else methods for size in sizes}
    if args.gpt2_methods and "gpt2" in per_size:
        per_size["gpt2"] = args.gpt2_methods.split(",")
    results: dict[str, list[dict]] = {}

    def one_size(size):
        d = prepare_size(size, args.workdir, SMALL_N.get(size, args.n_examples))
        results[size] = measure_size(size, d, per_size[size], args, device, ac_py)

    if args.parallel:  # one thread per size, each waiting on its own measuring processes
        import threading

        threads = [threading.Thread(target=one_size, args=(s,)) for s in sizes]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for size in sizes:
            one_size(size)
    rows = [r for size in sizes for r in results[size]]
    load1 = os.getloadavg()[0]
    header = (f"bench_scale.py, {started}, device {device}, {args.n_examples} pairs (gpt2-20: the first 20), one "
              f"torch thread per "
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
