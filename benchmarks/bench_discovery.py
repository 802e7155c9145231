"""ACDC and EAP-IG: cbench's batched runtime against a straightforward hook-based reference.

Both implementations run in this process on the same model and the same (base, source) pairs;
the results are asserted identical (same ACDC circuit, scores within float tolerance) and the
time ratios printed. Goals (issue 7): ACDC >= 20x faster, EAP-IG >= 5x faster.

Models: the largest main-case Tracr artifact (case 21) from ``build/tracr/`` or else the zoo's release
(or given with ``--artifact DIR``), the SIIT case-3 artifact from ``build/siit/`` or else the zoo's
release (``--siit DIR``),
and a random model of SIIT-like size (3 layers x 4 heads, d_model 48, MLPs). Inputs are
deterministic sampled pairs (100 by default).

Timing: both implementations are timed the same way: the best of ``--repeat`` runs each
(default 5; cbench and reference runs alternate, with a garbage collection before each) of the
CPU time of this process (``time.process_time``). Torch runs with one thread, so on an idle
machine this is the wall time, and on a loaded one it leaves out the time other processes hold
the core. cbench's time is the whole ``discover`` call (its clean and ablated runs included);
the reference's is its whole function (its own clean and ablated runs included).
Run: ``.venv/bin/python benchmarks/bench_discovery.py [--n-examples 100] [--repeat 5]``.
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from hook_reference import reference_acdc, reference_eap_ig_inputs  # noqa: E402

from cbench.discovery import discover  # noqa: E402
from cbench.discovery.base import prepare  # noqa: E402
from cbench.runtime import CircuitRuntime  # noqa: E402
from cbench.tasks.data import TaskData, sample_pairs  # noqa: E402
from cbench.artifacts.transformer_lens_adapter import build_model  # noqa: E402


def siit_like_model(seed: int = 0):
    cfg = dict(n_layers=3, n_heads=4, d_model=48, d_head=12, d_mlp=192, n_ctx=10, d_vocab=12, d_vocab_out=8,
               act_fn="relu", attn_only=False, attention_dir="causal", normalization_type=None, seed=seed,
               dtype="float32")
    return build_model(cfg)


def random_pairs(n: int, p: int, d_vocab: int, seed: int = 0) -> TaskData:
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(1, d_vocab, (n, p), generator=g)
    source = torch.randint(1, d_vocab, (n, p), generator=g)
    base[:, 0] = source[:, 0] = 0
    valid = torch.ones(n, p, dtype=torch.bool)
    valid[:, 0] = False
    return TaskData(base, source, None, valid, "categorical")


ZOO_MODELS = HERE.parent / "model_zoo" / "releases" / "models" / "cbench"


def released(name: str) -> Path:
    """The newest released version of a zoo model (e.g. ``case-3``)."""
    versions = sorted((ZOO_MODELS / name).glob("v*"), key=lambda p: tuple(int(x) for x in p.name[1:].split(".")))
    return versions[-1] if versions else ZOO_MODELS / name / "v1.0.0"


def find_tracr_artifact() -> Path | None:
    root = HERE.parent / "build" / "tracr"
    best, best_edges = None, -1
    if not root.is_dir():
        fallback = released("tracr-case-21")
        return fallback if (fallback / "meta.json").is_file() else None
    from cbench.artifacts.model import read_model_artifact

    for d in sorted(root.iterdir()):
        if (d / "meta.json").is_file():
            try:
                art = read_model_artifact(d, verify=False)
            except Exception:
                continue
            if art.graph.n_edges > best_edges:
                best, best_edges = d, art.graph.n_edges
    return best


def timed_pair(fast, ref, repeat: int):
    """((fast result, best CPU time), (reference result, best CPU time)) over ``repeat`` runs of
    each, alternating fast and reference runs so that a change in machine load hits both alike."""
    best = [float("inf"), float("inf")]
    outs = [None, None]
    for _ in range(repeat):
        for i, fn in enumerate((fast, ref)):
            gc.collect()
            t0 = time.process_time()
            outs[i] = fn()
            best[i] = min(best[i], time.process_time() - t0)
    return (outs[0], best[0]), (outs[1], best[1])


def bench_one(label: str, model, data: TaskData, threshold: float, steps: int, repeat: int) -> dict:
    rt = CircuitRuntime(model)
    g = rt.graph
    print(f"\n== {label}: {g.describe()}, {g.n_edges} edges, {data.n_examples} pairs of length {data.base.shape[1]}, "
          f"{data.task_type}")
    # ACDC
    ctx = prepare(rt, data, "acdc")
    (res, t_fast), ((ref_scores, ref_kept), t_ref) = timed_pair(
        lambda: discover(rt, data, "acdc", {"threshold": threshold}, progress=False),
        lambda: reference_acdc(model, data.base, data.source, ctx.metric, threshold), repeat)
    ref = np.array([ref_scores[e.name] for e in g.edges])
    same = set(res.circuit_edges()) == ref_kept
    err = float(np.abs(ref - res.scores).max())
    assert same, f"ACDC circuits differ: {sorted(set(res.circuit_edges()) ^ ref_kept)[:5]}"
    assert err < 1e-4, f"ACDC scores differ by {err}"
    acdc_ratio = t_ref / t_fast
    print(f"ACDC (tau={threshold}, metric {ctx.metric_name}): kept {len(ref_kept)} edges, identical circuit, "
          f"max |score diff| {err:.1e}; reference {t_ref:.2f} s, cbench {t_fast:.3f} s "
          f"({res.extra['n_passes']} batched passes) -> {acdc_ratio:.1f}x")
    # EAP-IG (inputs)
    ctx2 = prepare(rt, data, "eap-ig-inputs")
    (res2, t_fast2), (ref_s, t_ref2) = timed_pair(
        lambda: discover(rt, data, "eap-ig-inputs", {"steps": steps}, progress=False),
        lambda: reference_eap_ig_inputs(model, data.base, data.source, ctx2.metric, steps), repeat)
    ref2 = np.array([ref_s[e.name] for e in g.edges])
    err2 = float(np.abs(ref2 - res2.scores).max() / max(np.abs(ref2).max(), 1e-12))
    assert err2 < 1e-3, f"EAP-IG scores differ (relative {err2})"
    same_rank = bool(np.array_equal(np.argsort(-np.abs(ref2))[:10], np.argsort(-np.abs(res2.scores))[:10]))
    ig_ratio = t_ref2 / t_fast2
    print(f"EAP-IG-inputs (Z={steps}, metric {ctx2.metric_name}): max relative score diff {err2:.1e}, "
          f"same top-10: {same_rank}; reference {t_ref2:.2f} s, cbench {t_fast2:.3f} s -> {ig_ratio:.1f}x")
    return {"model": label, "n_edges": g.n_edges, "n_examples": data.n_examples,
            "acdc": {"threshold": threshold, "kept": len(ref_kept), "reference_s": round(t_ref, 4),
                     "cbench_s": round(t_fast, 4), "ratio": round(acdc_ratio, 2)},
            "eap_ig_inputs": {"steps": steps, "reference_s": round(t_ref2, 4), "cbench_s": round(t_fast2, 4),
                              "ratio": round(ig_ratio, 2)}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-examples", type=int, default=100)
    ap.add_argument("--artifact", type=Path, default=None, help="a Tracr case artifact directory")
    ap.add_argument("--siit", type=Path, default=None, help="a SIIT case artifact directory (default build/siit/case-3, else the zoo's release)")
    ap.add_argument("--threshold", type=float, default=None, help="ACDC tau for the random model")
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=5,
                    help="runs per measurement, for cbench and the reference alike (best CPU time)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    results = []
    art_dir = args.artifact or find_tracr_artifact()
    if art_dir is not None:
        from cbench.artifacts.model import read_model_artifact

        art = read_model_artifact(art_dir)
        data = sample_pairs(art.meta, args.n_examples, seed=0)
        thr = 1e-3
        results.append(bench_one(f"tracr case {art.case} ({art_dir.name})", art.load_model(), data, thr,
                                 args.steps, args.repeat))
    else:
        print("(no Tracr artifact under build/tracr/; pass --artifact DIR to include one)")
    siit_dir = args.siit or (HERE.parent / "build" / "siit" / "case-3")
    if args.siit is None and not (siit_dir / "meta.json").is_file():
        siit_dir = released("case-3")
    if siit_dir is not None and (Path(siit_dir) / "meta.json").is_file():
        from cbench.artifacts.model import read_model_artifact

        try:
            art = read_model_artifact(siit_dir)
        except Exception as exc:  # e.g. being rebuilt right now
            print(f"(skipping {siit_dir}: {exc})")
        else:
            data = sample_pairs(art.meta, args.n_examples, seed=0)
            results.append(bench_one(f"SIIT case {art.case} ({Path(siit_dir).name})", art.load_model(), data, 1e-3,
                                     args.steps, args.repeat))
    model = siit_like_model()
    data = random_pairs(args.n_examples, 8, model.cfg.d_vocab, seed=1)
    results.append(bench_one("random SIIT-like model", model, data, args.threshold or 0.003, args.steps,
                             args.repeat))
    print("\nsummary (reference time / cbench time):")
    for r in results:
        print(f"  {r['model']}: ACDC {r['acdc']['ratio']}x (goal 20x), EAP-IG {r['eap_ig_inputs']['ratio']}x (goal 5x)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
