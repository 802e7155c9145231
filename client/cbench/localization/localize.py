"""Localize one causal variable: IIA of a featurizer at every candidate location.

For each location the featurizer is fitted on the train split and scored on the test split by
interchange-intervention accuracy (IIA): the share of labelled test positions where the model's
output under the interchange equals the high-level model's output with the variable interchanged
(argmax for categorical tasks, within 0.05 for numerical ones; cbench's SIIT convention).
``iia_changed`` is the same share over the positions where the interchange changes the
high-level output (the informative ones).

Scores (against the aligned location, the ground truth):

* ``iia_aligned`` -- IIA at the aligned location;
* ``localized`` -- the best node location (residual-stream locations are reported but not
  ranked: the residual stream after the aligned node carries the variable by construction) is
  made of the variable's nodes (the aligned ones; for Tracr every component of the op) and beats
  every node location disjoint from them;
* ``gap`` -- ``iia_aligned`` minus the best IIA of a node location disjoint from the variable's
  nodes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Sequence

import torch

from cbench.scoring.ablation import correct
from cbench.errors import UsageError
from cbench.localization.featurizers import FeaturizerSpec, fit
from cbench.localization.variables import (Location, Variable, VariableData, candidate_locations, parse_location,
                                           read_rows, variable, variable_data)

DEFAULT_TRAIN = 2048
DEFAULT_TEST = 1000


@torch.no_grad()
def iia(model, location: Location, ivs, data: VariableData, batch_size: int = 500) -> tuple[float, float]:
    """(IIA over labelled positions, IIA over positions whose label the interchange changes)."""
    from cbench.localization.pyvene_adapter import interchange, intervenable

    sites = [p.site for p in location.parts]
    iv = intervenable(model, sites, list(ivs))
    d = data.data
    hits = torch.zeros_like(d.valid)
    for start in range(0, d.n_examples, batch_size):
        sl = slice(start, start + batch_size)
        out = interchange(iv, sites, d.base[sl], d.source[sl])
        hits[sl] = correct(out, d.labels[sl], d.task_type)
    valid, changed = d.valid, data.changed
    all_ = float((hits & valid).sum()) / max(1, int(valid.sum()))
    ch = float((hits & changed).sum()) / int(changed.sum()) if int(changed.sum()) else float("nan")
    return all_, ch


@dataclass
class LocationScore:
    location: str
    iia: float
    iia_changed: float
    is_aligned: bool
    is_residual: bool
    info: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"location": self.location, "iia": round(self.iia, 6),
                "iia_changed": None if self.iia_changed != self.iia_changed else round(self.iia_changed, 6),
                "aligned": self.is_aligned, "residual": self.is_residual, **self.info}


def scores(rows: Sequence[LocationScore], aligned_nodes: frozenset[str], by_name: dict[str, Location]) -> dict:
    """``iia_aligned``, ``localized``, ``gap``, ``best_location`` from per-location IIA
    (``aligned_nodes``: the nodes that compute the variable)."""
    nodes = [r for r in rows if not r.is_residual]
    al = next((r for r in rows if r.is_aligned), None)
    disjoint = [r for r in nodes if not (by_name[r.location].nodes & aligned_nodes)]
    best_other = max((r.iia for r in disjoint), default=None)
    best = max(nodes, key=lambda r: r.iia, default=None)
    out: dict = {"iia_aligned": None if al is None else round(al.iia, 6),
                 "iia_changed_aligned": None if al is None or al.iia_changed != al.iia_changed else round(al.iia_changed, 6),
                 "best_location": None if best is None else best.location,
                 "best_non_aligned": None, "iia_best_non_aligned": None, "gap": None, "localized": None}
    if disjoint:
        b = max(disjoint, key=lambda r: r.iia)
        out["best_non_aligned"], out["iia_best_non_aligned"] = b.location, round(b.iia, 6)
    if al is not None and best_other is not None:
        out["gap"] = round(al.iia - best_other, 6)
        top = max(r.iia for r in nodes)
        winners = [r for r in nodes if r.iia == top]
        out["localized"] = bool(all(by_name[r.location].nodes <= aligned_nodes for r in winners) and top > best_other)
    return out


@dataclass
class Localization:
    case: str
    model_kind: str
    variable: Variable
    spec: FeaturizerSpec
    rows: list[LocationScore]
    scores: dict
    data: dict
    runtime_s: float

    def results(self) -> dict:
        return {"variable": self.variable.name, "op_type": self.variable.op_type, "model_kind": self.model_kind,
                "aligned_location": self.variable.aligned, "featurizer": self.spec.name,
                "hyperparameters": self.spec.hyperparameters(), "locations": [r.to_dict() for r in self.rows],
                "scores": self.scores}


def load_variable_data(artifact, var: Variable, dataset_dir=None, n_train: int = DEFAULT_TRAIN,
                       n_test: int = DEFAULT_TEST, need_train: bool = True) -> tuple[VariableData | None, VariableData]:
    revision = artifact.meta.get("dataset_revision")
    train = None
    if need_train:
        rows, where = read_rows(artifact.case, "train", dataset_dir, revision, n_train)
        train = variable_data(rows, var.name, artifact.meta, "train", where, n_train)
    rows, where = read_rows(artifact.case, "test", dataset_dir, revision, n_test)
    test = variable_data(rows, var.name, artifact.meta, "test", where, n_test)
    return train, test


def localize(artifact, var_name: str, spec: FeaturizerSpec, locations: Sequence[str] | None = None,
             dataset_dir=None, n_train: int = DEFAULT_TRAIN, n_test: int = DEFAULT_TEST, model=None,
             data: tuple | None = None, echo: Callable[[str], None] | None = None) -> Localization:
    """IIA of ``spec`` for variable ``var_name`` at each location (default: every candidate and
    the aligned location)."""
    t0 = time.perf_counter()
    var = variable(artifact, var_name)
    model = model if model is not None else artifact.load_model()
    cfg = model.cfg
    if spec.k is not None and spec.k > cfg.d_model:  # no location is wider than the residual stream
        raise UsageError(f"--k {spec.k} is larger than the model's d_model ({cfg.d_model}); "
                         f"give at most {cfg.d_model}")
    names = list(locations) if locations else candidate_locations(cfg)
    if var.aligned not in names and not locations:
        names.append(var.aligned)
    if len(set(names)) != len(names):
        raise UsageError("--locations names a location twice")
    locs = {n: parse_location(n, cfg) for n in names}
    aligned_nodes = parse_location(var.aligned, cfg).nodes | frozenset(var.nodes)
    train, test = data if data is not None else load_variable_data(
        artifact, var, dataset_dir, n_train, n_test, need_train=spec.name in ("das", "pca"))
    rows = []
    for n in names:
        loc = locs[n]
        ivs, info = fit(model, loc, spec, train, var.n_dims)
        a, c = iia(model, loc, ivs, test)
        rows.append(LocationScore(n, a, c, n == var.aligned, loc.is_residual, info))
        if echo:
            echo(f"  {n:<24} IIA {a:.4f}" + ("" if c != c else f"  (changed {c:.4f})") + ("  <- aligned" if n == var.aligned else ""))
    sc = scores(rows, aligned_nodes, locs)
    data_block = {"test": {"split": "test", "n_examples": test.n_examples, "n_positions": int(test.data.valid.sum()),
                           "n_changed": int(test.changed.sum()), "dataset": test.source}}
    if train is not None:
        data_block["train"] = {"split": "train", "n_examples": train.n_examples, "dataset": train.source}
    return Localization(artifact.case, artifact.model_kind, var, spec, rows, sc, data_block,
                        time.perf_counter() - t0)


def results_doc(loc: Localization, model_ref: dict) -> dict:
    from cbench.scoring.report import results_document

    return results_document("localization", loc.results(),
                            {"model": model_ref, "data": loc.data, "featurizer": loc.spec.name,
                             "hyperparameters": loc.spec.hyperparameters()},
                            case=loc.case, runtime_s=loc.runtime_s)
