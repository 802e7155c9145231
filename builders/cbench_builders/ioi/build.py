"""``cbench build ioi-model``: train the IOI model with SIIT (resumable), verify its gates, write the artifact.

Training (:mod:`cbench_builders.ioi.model`) saves the weights to ``--checkpoint`` (safetensors)
at most every minute and logs every epoch to ``<checkpoint>.log.jsonl``; ``--resume`` starts from
the saved weights, and ``--time-limit`` ends training after the epoch that crosses it (the best
validation epoch's weights are kept). ``--no-train`` skips training and verifies / writes the
checkpoint as it is. The artifact ``<out>/ioi`` is written when every release gate holds, or with
``--keep-failed`` (marked ``released: false``).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict
from pathlib import Path

import click

from cbench.cli.options import FiniteFloatRange
import torch

from cbench.errors import BuildError, UsageError


def _training_config(**kw):
    from cbench_builders.siit.config import TrainingConfig

    try:
        return TrainingConfig(**{k: v for k, v in kw.items() if v is not None})
    except (TypeError, ValueError) as e:
        raise UsageError(f"bad IOI training hyperparameters: {e}") from None


def mean_weights(paths: list[Path]) -> dict[str, torch.Tensor]:
    """The element-wise mean of several checkpoints of one model (stochastic weight averaging of the
    weights a run saved along its way: Izmailov et al., 2018), in float64 then cast back."""
    from safetensors.torch import load_file

    states = []
    for p in paths:
        if not Path(p).is_file():
            raise UsageError(f"--average: no checkpoint at {p}")
        try:
            states.append(load_file(str(p)))
        except Exception as e:  # noqa: BLE001 - safetensors raises its own error types
            raise UsageError(f"--average: {p} is not a safetensors checkpoint ({e})") from None
    keys = set(states[0])
    for p, st in zip(paths[1:], states[1:]):
        if set(st) != keys or any(st[k].shape != states[0][k].shape for k in keys):
            raise UsageError(f"--average: {p} holds other tensors than {paths[0]}")
    return {k: (sum(st[k].double() for st in states) / len(states)).to(states[0][k].dtype).contiguous()
            for k in sorted(keys)}


def train(cfg, n_rows: int, checkpoint: Path, resume: bool, arch: dict | None = None, progress: bool = False,
          init: str = "default", average: list[Path] | None = None):
    """Train (or, with ``cfg.epochs == 0``, only load) the IOI model; returns (setup, result or None, times).
    With ``average`` (and no training) the weights are :func:`mean_weights` of those checkpoints."""
    from safetensors.torch import load_file

    from cbench_builders.ioi import model as ioi_model

    checkpoint = Path(checkpoint)
    if resume and not checkpoint.is_file():
        raise UsageError(f"--resume: no checkpoint at {checkpoint}")
    weights = mean_weights(list(average)) if average else None
    s = ioi_model.setup(cfg, n_rows, arch, init_weights=checkpoint if resume else None, init=init)
    if cfg.epochs == 0:
        if weights is None and not checkpoint.is_file():
            raise UsageError(f"--no-train: no checkpoint at {checkpoint}")
        s.ll_model.load_state_dict(weights if weights is not None else load_file(str(checkpoint)), strict=False)
        s.ll_model.eval()
        return s, None, {"wall_s": 0.0, "cpu_s": 0.0}
    log = ioi_model.checkpointer(checkpoint, s.ll_model)
    wall, cpu = time.perf_counter(), time.process_time()
    result = s.trainer.train(s.data, progress=progress, log=log)
    times = {"wall_s": round(time.perf_counter() - wall, 1), "cpu_s": round(time.process_time() - cpu, 1)}
    from safetensors.torch import save_file

    state = {k: v.detach().contiguous() for k, v in result.model.state_dict().items()
             if not k.endswith((".attn.mask", ".attn.IGNORE"))}
    save_file(state, str(checkpoint))  # the kept (best) epoch
    return s, result, times


def _prior_times(checkpoint: Path) -> dict:
    """Wall and CPU seconds spent by earlier (resumed-from) runs, from ``<checkpoint>.runs.json``."""
    p = Path(checkpoint).with_suffix(".runs.json")
    runs = json.loads(p.read_text()) if p.is_file() else []
    return {"runs": runs, "wall_s": sum(r["wall_s"] for r in runs),
            "cpu_s": sum(r["cpu_s"] for r in runs if r.get("cpu_s") is not None)}


def _record_run(checkpoint: Path, times: dict, result) -> None:
    p = Path(checkpoint).with_suffix(".runs.json")
    runs = json.loads(p.read_text()) if p.is_file() else []
    c = result.config
    runs.append({**times, "epochs": result.epochs, "reached_target": result.reached_target,
                 "metrics": result.metrics, "hardware": result.hardware,
                 "recipe": {"algorithm": c.algorithm, "lr": c.lr, "batch_size": c.batch_size,
                            "pairs_per_epoch": c.pairs_per_epoch, "edge_weight": c.edge_weight,
                            "iit_weight": c.iit_weight,
                            "source_gradients": c.source_gradients}})
    p.write_text(json.dumps(runs, indent=1) + "\n")


def averaging_record(paths: list[Path]) -> dict:
    """The runs-list entry of a weight average: no training, the averaged files and their sha256."""
    import hashlib

    files = [{"name": Path(p).name, "sha256": hashlib.sha256(Path(p).read_bytes()).hexdigest()} for p in paths]
    return {"wall_s": 0.0, "cpu_s": 0.0, "epochs": 0, "reached_target": None, "metrics": None, "recipe": None,
            "averaged": files, "note": f"weights: the mean of {len(paths)} checkpoints of the run before"}


@click.command("ioi-model")
@click.option("--out", default="build/ioi-model", type=click.Path(path_type=Path), show_default=True,
              help="where the artifact <out>/ioi is written")
@click.option("--checkpoint", default="build/ioi-train/ioi.safetensors", type=click.Path(path_type=Path),
              show_default=True)
@click.option("--resume", is_flag=True, help="start from the checkpoint's weights")
@click.option("--no-train", "no_train", is_flag=True, help="verify and write the checkpoint without training")
@click.option("--time-limit", type=click.FloatRange(min=0, min_open=True), default=None,
              help="seconds of training (ends after the epoch crossing it)")
@click.option("--epochs", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--rows", type=click.IntRange(min=1), default=3000, show_default=True, help="generator rows (8 pairs each)")
@click.option("--batch-size", type=click.IntRange(min=1), default=64, show_default=True)
@click.option("--pairs-per-epoch", type=click.IntRange(min=1), default=1024, show_default=True)
@click.option("--eval-pairs", type=click.IntRange(min=1), default=96, show_default=True)
@click.option("--lr", type=FiniteFloatRange(min=0, min_open=True), default=1e-3, show_default=True)
@click.option("--algorithm", type=click.Choice(["summed", "algorithm-1"]), default="algorithm-1", show_default=True,
              help="algorithm-1 (InterpBench's SIIT: each example resample-ablates one non-aligned node) or summed "
                   "(half of them at once); on IOI, summed left one node's SIIA at 0.2 for 280 epochs, "
                   "algorithm-1 took it to 0.99 (benchmarks/results/ioi.md)")
@click.option("--edge-weight", type=float, default=1.0, show_default=True)
@click.option("--iit-weight", type=float, default=1.0, show_default=True,
              help="weight of the IIT loss (the interchanged node's target) against strictness and behaviour")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--source-gradients/--no-source-gradients", default=True, show_default=True,
              help="differentiate the strictness losses through the source run too (lets them reach the "
                   "ablated node's own weights)")
@click.option("--init", "init", type=click.Choice(["default", "zero-outputs"]), default="default",
              show_default=True, help="zero-outputs: every MLP's W_out and every head's W_O start at zero")
@click.option("--target", type=float, default=0.995, show_default=True)
@click.option("--verify-pairs", type=int, default=1000, show_default=True,
              help="pairs per gate set: `cbench verify`'s default, so a release passes what its users rerun")
@click.option("--keep-failed", is_flag=True, help="write the artifact even when a gate fails (marked so)")
@click.option("--average", "average", multiple=True, type=click.Path(path_type=Path),
              help="with --no-train: verify and write the mean of these checkpoints' weights (stochastic "
                   "weight averaging of checkpoints one run saved; repeat the option); --checkpoint's "
                   "runs.json still gives the runs before them. The checkpoint files are not changed")
@click.option("--progress/--no-progress", default=False)
def build_ioi_cmd(out, checkpoint, resume, no_train, time_limit, epochs, rows, batch_size, pairs_per_epoch,
                  eval_pairs, lr, algorithm, edge_weight, iit_weight, seed, source_gradients, init, target,
                  verify_pairs, keep_failed, average, progress):
    """Train the IOI model (SIIT, InterpBench section 4), verify it and write build/ioi-model/ioi."""
    import os

    threads = int(os.environ.get("CBENCH_THREADS", "1"))
    cfg = _training_config(algorithm=algorithm, lr=lr, batch_size=batch_size, epochs=0 if no_train else epochs,
                           pairs_per_epoch=pairs_per_epoch, eval_pairs=eval_pairs, seed=seed, threads=threads,
                           edge_weight=edge_weight, iit_weight=iit_weight, time_limit_s=time_limit, target=target,
                           train_size=rows * 8, source_gradients=source_gradients)
    if average and not no_train:
        raise UsageError("--average needs --no-train (it verifies and writes averaged weights; it does not train)")
    prior = _prior_times(checkpoint) if (resume or no_train) else {"runs": [], "wall_s": 0.0, "cpu_s": 0.0}
    try:
        s, result, times = train(cfg, rows, checkpoint, resume, progress=progress, init=init, average=list(average))
    except BuildError as e:
        raise click.ClickException(str(e)) from None
    if result is not None:
        _record_run(checkpoint, times, result)
        prior = _prior_times(checkpoint)
        click.echo(f"trained {result.epochs} epochs in {times['wall_s']:.0f} s wall / {times['cpu_s']:.0f} s CPU; "
                   f"validation {result.metrics}; target reached: {result.reached_target}")
    if average:
        prior["runs"] = prior["runs"] + [averaging_record(list(average))]
    from cbench_builders.ioi.artifact import write_ioi_artifact

    outcome = write_ioi_artifact(s, Path(out), prior, verify_pairs_n=verify_pairs, keep_failed=keep_failed)
    click.echo(outcome.report.format())
    if outcome.path is not None:
        click.echo(f"wrote {outcome.path}" + ("" if outcome.released else " (gates fail: not releasable)"))
    if not outcome.released:
        raise SystemExit(1)
