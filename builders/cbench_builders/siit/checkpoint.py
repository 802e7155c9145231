"""A SIIT training's state between epochs, saved so that a stopped run continues where it was.

:func:`save_state` writes, after an epoch, everything the next epoch depends on: the low-level
model's weights, Adam's state, the random generator's state, the step and epoch counters, the
history, the best epoch so far (its weights too) and the wall and CPU seconds spent; the file is
written beside the target and renamed into place, so a run killed while saving leaves the
previous epoch's state. :func:`load_state` restores it, so an interrupted run resumed from a
checkpoint draws the same batches as an uninterrupted one would have.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch

from cbench.errors import BuildError

FORMAT = "cbench/siit-checkpoint/v1"


@dataclass
class TrainState:
    """The loop's counters and records after an epoch (the tensors travel beside it)."""

    step: int
    epoch: int
    history: list[dict]
    best: tuple | None  # (score, epoch, state_dict) of the best validation epoch so far
    reached: bool  # the targets were reached at ``epoch``: nothing left to train
    wall_s: float
    cpu_s: float


def save_state(path: Path, state: TrainState, model, opt, gen: torch.Generator) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # the history as JSON text: its numbers may be numpy scalars, which a weights-only load refuses
    doc = {"format": FORMAT, "step": state.step, "epoch": state.epoch, "history": json.dumps(state.history),
           "best": [float(state.best[0]), int(state.best[1]), state.best[2]] if state.best is not None else None,
           "reached": bool(state.reached),
           "wall_s": state.wall_s, "cpu_s": state.cpu_s, "model": model.state_dict(),
           "optimizer": opt.state_dict(), "generator": gen.get_state()}
    tmp = path.with_name(path.name + ".tmp")
    torch.save(doc, tmp)
    os.replace(tmp, path)


def load_state(path: Path, model, opt, gen: torch.Generator) -> TrainState | None:
    """The state saved at ``path`` loaded into ``model``, ``opt`` and ``gen``; None when there is no file."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a truncated or foreign file: say which, do not train from scratch silently
        why = str(exc).strip().splitlines()[0][:100] if str(exc).strip() else type(exc).__name__
        raise BuildError(f"cannot read the SIIT checkpoint {path} (truncated, or not written by cbench build siit: "
                         f"{why}); delete it to start afresh") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise BuildError(f"{path} is not a SIIT checkpoint ({FORMAT}); delete it to start afresh")
    try:
        model.load_state_dict(doc["model"])
        opt.load_state_dict(doc["optimizer"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise BuildError(f"the SIIT checkpoint {path} belongs to another model or optimizer ({exc}); "
                         "delete it to start afresh") from None
    gen.set_state(doc["generator"])
    best = tuple(doc["best"]) if doc["best"] is not None else None
    return TrainState(doc["step"], doc["epoch"], json.loads(doc["history"]), best, bool(doc["reached"]),
                      float(doc["wall_s"]), float(doc["cpu_s"]))
