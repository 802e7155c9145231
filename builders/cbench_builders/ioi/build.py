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

from cbench.api.arguments import MAX_EXAMPLES, MAX_SECONDS
from cbench.cli.options import SEED_TYPE, check_out_tree, counts, floats
from cbench.errors import BuildError, UsageError

#: where the checkpoint goes when --checkpoint is not given: under --out, never the working directory
CHECKPOINT_IN_OUT = Path("ioi-train") / "ioi.safetensors"


def _training_config(**kw):
    from cbench_builders.siit.config import TrainingConfig

    try:
        return TrainingConfig(**{k: v for k, v in kw.items() if v is not None})
    except (TypeError, ValueError) as e:
        raise UsageError(f"bad IOI training hyperparameters: {e}") from None


def check_checkpoint_file(path: Path, option: str, arch: dict | None = None) -> None:
    """Before any model code loads (no torch): ``path`` is a safetensors file with the weights of
    the model of architecture ``arch`` (default the paper's;
    :func:`cbench_builders.ioi.architecture.checkpoint_problem`); UsageError otherwise."""
    from cbench.artifacts.serialization import read_safetensors_header
    from cbench.errors import ArtifactError
    from cbench_builders.ioi.architecture import checkpoint_problem

    if not Path(path).is_file():
        raise UsageError(f"{option}: no checkpoint at {path}")
    try:
        header = read_safetensors_header(path)
    except ArtifactError as e:
        raise UsageError(f"{option}: {e}") from None
    problem = checkpoint_problem(header, arch)
    if problem:
        raise UsageError(f"{option} {path}: not a checkpoint of this IOI model ({problem})")


def read_checkpoint(path: Path, option: str) -> dict:
    """The tensors of a checkpoint file; one UsageError naming ``option`` and the file otherwise
    (missing, empty, not safetensors)."""
    from cbench.errors import ArtifactError
    from cbench.files.readers import read_safetensors

    try:
        return read_safetensors(path, what="a safetensors checkpoint")
    except ArtifactError as e:
        raise UsageError(f"{option}: {e}") from None


def check_fits(state: dict, model, path: Path, option: str) -> None:
    """UsageError unless ``state`` holds this model's weights: every parameter, each of its shape
    (another model's file would load nothing under ``strict=False``, or fail on a size mismatch)."""
    want = {k: tuple(v.shape) for k, v in model.state_dict().items() if not k.endswith((".attn.mask", ".attn.IGNORE"))}
    missing = sorted(set(want) - set(state))
    extra = sorted(set(state) - set(want) - {k for k in state if k.endswith((".attn.mask", ".attn.IGNORE"))})
    wrong = sorted(k for k in set(want) & set(state) if tuple(state[k].shape) != want[k])
    if missing or extra or wrong:
        what = (f"{len(missing)} of the model's tensors missing (e.g. {missing[0]})" if missing else
                f"tensors the model does not have (e.g. {extra[0]})" if extra else
                f"{wrong[0]} of shape {list(state[wrong[0]].shape)}, not {list(want[wrong[0]])}")
        raise UsageError(f"{option} {path}: not a checkpoint of this IOI model ({what})")


def mean_weights(paths: list[Path]) -> dict:
    """The element-wise mean of several checkpoints of one model (stochastic weight averaging of the
    weights a run saved along its way: Izmailov et al., 2018), in float64 then cast back."""
    states = [read_checkpoint(Path(p), "--average") for p in paths]
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
    checkpoint = Path(checkpoint)
    if resume and not checkpoint.is_file():
        raise UsageError(f"--resume: no checkpoint at {checkpoint}")
    if cfg.epochs == 0 and not average and not checkpoint.is_file():
        raise UsageError(f"--no-train: no checkpoint at {checkpoint}")
    for p in list(average or ()):
        check_checkpoint_file(Path(p), "--average", arch)
    if resume or (cfg.epochs == 0 and not average):
        check_checkpoint_file(checkpoint, "--checkpoint", arch)
    from cbench_builders.ioi import model as ioi_model

    weights = mean_weights(list(average)) if average else None
    if cfg.epochs == 0 and weights is None:
        weights = read_checkpoint(checkpoint, "--checkpoint")
    start = read_checkpoint(checkpoint, "--checkpoint") if resume else None
    s = ioi_model.setup(cfg, n_rows, arch, init_weights=start, init=init,
                        check_weights=lambda state, model: check_fits(state, model, checkpoint, "--checkpoint"))
    if cfg.epochs == 0:
        check_fits(weights, s.ll_model, Path(average[0]) if average else checkpoint,
                   "--average" if average else "--checkpoint")
        s.ll_model.load_state_dict(weights, strict=False)
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
    from cbench.files.readers import read_json_file

    p = Path(checkpoint).with_suffix(".runs.json")
    runs = read_json_file(p, what="a list of training runs", error=UsageError) if p.is_file() else []
    if not isinstance(runs, list) or not all(isinstance(r, dict) and isinstance(r.get("wall_s"), (int, float))
                                             for r in runs):
        raise UsageError(f"{p}: not a list of training runs (each with wall_s); move it aside to start a new record")
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
              callback=check_out_tree, help="where the artifact <out>/ioi is written")
@click.option("--checkpoint", default=None, type=click.Path(path_type=Path, dir_okay=False),
              help=f"the training checkpoint (safetensors) [default: <out>/{CHECKPOINT_IN_OUT.as_posix()}]")
@click.option("--resume", is_flag=True, help="start from the checkpoint's weights")
@click.option("--no-train", "no_train", is_flag=True, help="verify and write the checkpoint without training")
@click.option("--time-limit", type=floats(0, MAX_SECONDS, low_open=True), default=None,
              help="seconds of training (ends after the epoch crossing it)")
@click.option("--epochs", type=counts(1, 1_000_000), default=2000, show_default=True)
@click.option("--rows", type=counts(1, 1_000_000), default=3000, show_default=True, help="generator rows (8 pairs each)")
@click.option("--batch-size", type=counts(1, 1_000_000), default=64, show_default=True)
@click.option("--pairs-per-epoch", type=counts(1, 10_000_000), default=1024, show_default=True)
@click.option("--eval-pairs", type=counts(1, MAX_EXAMPLES), default=96, show_default=True)
@click.option("--lr", type=floats(0, 10, low_open=True), default=1e-3, show_default=True)
@click.option("--algorithm", type=click.Choice(["summed", "algorithm-1"]), default="algorithm-1", show_default=True,
              help="algorithm-1 (InterpBench's SIIT: each example resample-ablates one non-aligned node) or summed "
                   "(half of them at once); on IOI, summed left one node's SIIA at 0.2 for 280 epochs, "
                   "algorithm-1 took it to 0.99 (benchmarks/results/ioi.md)")
@click.option("--edge-weight", type=floats(0, 1e6), default=1.0, show_default=True)
@click.option("--iit-weight", type=floats(0, 1e6), default=1.0, show_default=True,
              help="weight of the IIT loss (the interchanged node's target) against strictness and behaviour")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--source-gradients/--no-source-gradients", default=True, show_default=True,
              help="differentiate the strictness losses through the source run too (lets them reach the "
                   "ablated node's own weights)")
@click.option("--init", "init", type=click.Choice(["default", "zero-outputs"]), default="default",
              show_default=True, help="zero-outputs: every MLP's W_out and every head's W_O start at zero")
@click.option("--target", type=floats(0, 1, low_open=True), default=0.995, show_default=True,
              help="validation accuracy, IIA and SIIA that end training early")
@click.option("--verify-pairs", type=counts(10, MAX_EXAMPLES), default=1000, show_default=True,
              help="pairs per gate set: `cbench verify`'s default, so a release passes what its users rerun")
@click.option("--keep-failed", is_flag=True, help="write the artifact even when a gate fails (marked so)")
@click.option("--average", "average", multiple=True, type=click.Path(path_type=Path, dir_okay=False),
              help="with --no-train: verify and write the mean of these checkpoints' weights (stochastic "
                   "weight averaging of checkpoints one run saved; repeat the option); --checkpoint's "
                   "runs.json still gives the runs before them. The checkpoint files are not changed")
@click.option("--progress/--no-progress", default=False)
def build_ioi_cmd(out, checkpoint, resume, no_train, time_limit, epochs, rows, batch_size, pairs_per_epoch,
                  eval_pairs, lr, algorithm, edge_weight, iit_weight, seed, source_gradients, init, target,
                  verify_pairs, keep_failed, average, progress):
    """Train the IOI model (SIIT, InterpBench section 4), verify it and write build/ioi-model/ioi."""
    import os

    from cbench.files.safe_io import output_target

    if checkpoint is None:
        checkpoint = Path(out) / CHECKPOINT_IN_OUT
    elif not (resume or no_train):  # written by training: a file cbench may create or replace
        from cbench.files.safe_io import output_tree

        output_tree(Path(checkpoint).parent, "--checkpoint")
        if Path(checkpoint).parent.is_dir():
            output_target(checkpoint, "--checkpoint")
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
