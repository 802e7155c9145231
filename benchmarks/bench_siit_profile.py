"""Where SIIT training's CPU goes: one case trained for a few epochs with its spec's settings, the
process CPU time split by part (high-level runs, low-level component runs, edge-strictness runs
through the graph runtime, backward passes, optimizer steps, per-epoch validation, the rest).

CPU time (``time.process_time``), not wall time: on a shared machine wall time counts the other
processes' load too. The parts are timed by wrapping the trainer's methods; a part called inside
another (a component run inside validation) is counted in the outer one only.

Usage::

    python benchmarks/bench_siit_profile.py --case 3 --tracr-dir build/tracr --epochs 2
    python benchmarks/bench_siit_profile.py --case 3 --tracr-dir build/tracr --epochs 2 --json out.json
    python benchmarks/bench_siit_profile.py --case ioi --epochs 2     # the IOI build's trainer
    python benchmarks/bench_siit_profile.py --case ioi --epochs 2 --algorithm summed --threads 2

``--algorithm`` and ``--threads`` override the settings (the variants of issue 49's IOI item).

The tracr dir holds ``tracr-case-<id>`` artifact directories (``cbench build tracr``, or the
released ``model_zoo/releases/models/cbench/tracr-case-<id>/<version>``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


class PartClock:
    """CPU seconds per part; nested parts are charged to the outermost one."""

    def __init__(self):
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        self._depth = 0

    def wrap(self, name: str, fn):
        def timed(*args, **kwargs):
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[name] = self.seconds.get(name, 0.0) + time.process_time() - t
                self.calls[name] = self.calls.get(name, 0) + 1
                self._depth -= 1
        return timed


class _Timed:
    """A component forward whose calls (``f(tokens, ...)``, ``f.acts(tokens)``) are charged to one part."""

    def __init__(self, inner, clock: PartClock, name: str):
        self._inner = inner
        self._call = clock.wrap(name, inner.forward)
        self.acts = clock.wrap(name, inner.acts)

    def __call__(self, *args, **kwargs):
        return self._call(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._inner, name)


def build_trainer(case: str, tracr_dir: Path, epochs: int):
    """The trainer ``cbench build siit`` makes for ``case`` (spec settings), for ``epochs`` epochs
    with no early stop and no time budget."""
    from cbench.artifacts.model import read_model_artifact
    from cbench.artifacts.transformer_lens_adapter import build_model
    from cbench_builders.cases.specs import load_case
    from cbench_builders.siit.architecture import (
        low_level_for_case,
        make_correspondence,
        map_circuit_edges,
    )
    from cbench_builders.siit.config import TrainingConfig
    from cbench_builders.siit.data import make_input_set
    from cbench_builders.siit.interventions import invariant_edges
    from cbench_builders.siit.trainer import SIITTrainer

    art = read_model_artifact(Path(tracr_dir) / f"tracr-case-{case}")
    spec = load_case(case)
    cfg = TrainingConfig.from_spec(spec.training, seed=int(spec.seed or 0), epochs=epochs, target=1.01,
                                   time_limit_s=None, cpu_limit_s=None)
    hl = art.load_model()
    low = spec.spec.get("low_level") or {}
    ll_cfg = low_level_for_case(art.config, case, low, seed=cfg.seed, model_name=f"profile-{case}")
    nodes = [n for n in art.circuit["nodes"] if n not in ("input", "logits")]
    mapping = make_correspondence(nodes, ll_cfg["n_heads"], seed=cfg.seed, policy=low.get("correspondence", "random"),
                                  heads=low.get("heads"))
    data = make_input_set(art.meta, cfg.train_size, cfg.seed)
    ll = build_model(ll_cfg)
    ll.train()
    truth = map_circuit_edges(art.circuit["edges"], mapping)
    inv = []
    if cfg.edge_strict and cfg.invariant_edges:
        inv = map_circuit_edges(invariant_edges(hl, art.circuit["edges"], data.train, art.meta["task_type"],
                                                seed=cfg.seed), mapping)
    trainer = SIITTrainer(hl, ll, mapping, art.meta["task_type"], cfg, truth_edges=truth, invariant_edges=inv)
    return trainer, data, cfg, ll_cfg


ZOO = Path(__file__).resolve().parents[1] / "model_zoo"


def build_ioi_trainer(epochs: int, zoo: Path = ZOO, **overrides):
    """The IOI trainer with the released IOI model's training settings (its meta.json), for ``epochs``."""
    import os

    from cbench_builders.ioi import model as ioi_model
    from cbench_builders.siit.config import TrainingConfig

    root = zoo / "releases" / "models" / "cbench" / "ioi"
    version = max(os.listdir(root), key=lambda v: [int(x) for x in v.lstrip("v").split(".")])
    meta = json.loads((root / version / "meta.json").read_text())
    known = set(TrainingConfig.__dataclass_fields__)
    values = {k: v for k, v in meta["training"].items() if k in known}
    values.update(epochs=epochs, target=1.01, time_limit_s=None, cpu_limit_s=None, lr_decay_epochs=epochs)
    if overrides.get("algorithm") and overrides["algorithm"] != values.get("algorithm"):
        for k in ("betas", "lr_end"):  # the other algorithm's defaults
            values.pop(k, None)
    values.update({k: v for k, v in overrides.items() if v is not None})
    cfg = TrainingConfig(**values)
    n_rows = meta["training"]["data"]["n_train"] // 8  # 8 counterfactual pairs per generator row
    s = ioi_model.setup(cfg, n_rows)
    return s.trainer, s.data, cfg, s.ll_config


def profile(case: str, tracr_dir: Path, epochs: int, algorithm: str | None = None, threads: int | None = None) -> dict:
    import torch

    if case == "ioi":
        trainer, data, cfg, ll_cfg = build_ioi_trainer(epochs, algorithm=algorithm, threads=threads)
    else:
        trainer, data, cfg, ll_cfg = build_trainer(case, tracr_dir, epochs)
        if algorithm or threads:
            import dataclasses

            over = {k: v for k, v in {"algorithm": algorithm, "threads": threads}.items() if v is not None}
            if algorithm and algorithm != cfg.algorithm:
                over.update(betas=None, lr_end=None)
            trainer.cfg = cfg = dataclasses.replace(cfg, **over)
    clock = PartClock()
    trainer.evaluate_pairs = clock.wrap("validation (per epoch)", trainer.evaluate_pairs)
    trainer._edge_run = clock.wrap("edge-strictness runs (graph runtime)", trainer._edge_run)
    trainer.hl_f = _Timed(trainer.hl_f, clock, "high-level runs")
    trainer.ll_f = _Timed(trainer.ll_f, clock, "low-level component runs (forward)")
    backward = torch.Tensor.backward
    torch.Tensor.backward = clock.wrap("backward passes", backward)
    step = torch.optim.Adam.step
    torch.optim.Adam.step = clock.wrap("optimizer steps", step)
    try:
        t0, w0 = time.process_time(), time.perf_counter()
        result = trainer.train(data, progress=False)
        total, wall = time.process_time() - t0, time.perf_counter() - w0
    finally:
        torch.Tensor.backward = backward
        torch.optim.Adam.step = step
    parts = dict(sorted(clock.seconds.items(), key=lambda kv: -kv[1]))
    parts["other (masks, data, Python)"] = total - sum(parts.values())
    return {"case": case, "algorithm": cfg.algorithm, "threads": cfg.threads, "source_gradients": cfg.source_gradients,
            "edge_strict": cfg.edge_strict, "d_model": ll_cfg["d_model"], "n_layers": ll_cfg["n_layers"],
            "epochs": result.epochs, "cpu_s": round(total, 2), "wall_s": round(wall, 2),
            "cpu_per_epoch_s": round(total / max(1, result.epochs), 2),
            "wall_per_epoch_s": round(wall / max(1, result.epochs), 2),
            "history": [{k: h.get(k) for k in ("epoch", "accuracy", "iia", "siia", "edge_siia", "loss_iit", "loss_edge",
                                               "elapsed_s")} for h in result.history],
            "parts": {k: round(v, 2) for k, v in parts.items()}, "calls": clock.calls}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--case", required=True, help="a case id, or ioi (the IOI model's settings)")
    ap.add_argument("--tracr-dir", type=Path, default=Path("build/tracr"))
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("--algorithm", choices=["algorithm-1", "summed"], default=None, help="override the algorithm")
    ap.add_argument("--threads", type=int, default=None, help="override the torch thread count")
    args = ap.parse_args(argv)
    if args.case != "ioi" and not (args.tracr_dir / f"tracr-case-{args.case}").is_dir():
        print(f"error: no tracr-case-{args.case} in {args.tracr_dir}", file=sys.stderr)
        return 2
    r = profile(args.case, args.tracr_dir, args.epochs, args.algorithm, args.threads)
    print(f"case {r['case']} ({r['algorithm']}, {r['threads']} thread(s), source gradients {r['source_gradients']}, edge strictness "
          f"{r['edge_strict']}, d_model {r['d_model']}, {r['n_layers']} layers): {r['epochs']} epochs, "
          f"{r['cpu_s']} s CPU ({r['cpu_per_epoch_s']} s per epoch), {r['wall_s']} s wall ({r['wall_per_epoch_s']} s per epoch)")
    for name, s in r["parts"].items():
        print(f"  {name:<40} {s:>8.2f} s  {100 * s / r['cpu_s']:5.1f} %")
    if args.json:
        args.json.write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
