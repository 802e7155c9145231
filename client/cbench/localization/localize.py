"""Localize one causal variable: IIA of a featurizer at every candidate location.

For each location the featurizer is fitted on the train split (the union of the variable's
counterfactual datasets) and scored on each counterfactual dataset's test split by
interchange-intervention accuracy (IIA). MIB's definition is the default (``iia_unit
"example"``): the share of examples whose intervened output equals the high-level model's output
with the variable interchanged at every labelled position (argmax for categorical tasks, within
0.05 for numerical ones); ``iia_unit "position"`` counts labelled positions instead (cbench's
earlier convention). ``iia_changed`` is the same share over the examples (positions) whose label
the interchange changes (the informative ones). A location's ``iia`` is the mean over the
counterfactual datasets (each dataset's in ``datasets``).

Scores (against the aligned location, the ground truth):

* ``iia_aligned`` -- IIA at the aligned location;
* ``localized`` -- the best node location (residual-stream locations are not ranked here: the
  residual stream after the aligned node carries the variable by construction) is made of the
  variable's nodes and beats every node location disjoint from them;
* ``gap`` -- ``iia_aligned`` minus the best IIA of a node location disjoint from the variable's
  nodes;
* ``mib`` -- MIB's aggregates: the mean IIA over counterfactual datasets and locations, the best
  location's IIA and name (every location ranked, ties to the earlier one; ``best_locations``: all
  tied for best), the IIA at the true location, the locations that hold the variable (the aligned
  one and the residual stream after it, or a variables model's declared ones) and whether the best
  location is one of them (``best_is_true``: every location tied for best holds the variable, so a
  featurizer that scores a true and a wrong location alike has not found it).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from cbench.errors import UsageError
from cbench.localization.featurizers import FeaturizerSpec, fit_many
from cbench.localization.variables import (
    Location,
    Variable,
    VariableData,
    candidate_locations,
    parse_location,
    read_rows,
    variable,
    variable_data,
)
from cbench.scoring.ablation import correct

DEFAULT_TRAIN = 2048
DEFAULT_TEST = 1000
IIA_UNITS = ("example", "position")


@torch.no_grad()
def iia(model, location: Location, ivs, data: VariableData, batch_size: int = 500,
        unit: str = "example") -> tuple[float, float]:
    """(IIA, IIA over the examples -- or positions -- whose label the interchange changes)."""
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
    if unit == "position":
        all_ = float((hits & valid).sum()) / max(1, int(valid.sum()))
        ch = float((hits & changed).sum()) / int(changed.sum()) if int(changed.sum()) else float("nan")
        return all_, ch
    ok = (hits | ~valid).all(1)
    has, ch_ex = valid.any(1), changed.any(1)
    all_ = float((ok & has).sum()) / max(1, int(has.sum()))
    ch = float((ok & ch_ex).sum()) / int(ch_ex.sum()) if int(ch_ex.sum()) else float("nan")
    return all_, ch


def _r(x: float) -> float | None:
    return None if math.isnan(x) else round(x, 6)


@dataclass
class LocationScore:
    location: str
    iia: float
    iia_changed: float
    is_aligned: bool
    is_residual: bool
    info: dict = field(default_factory=dict)
    datasets: dict = field(default_factory=dict)  # counterfactual dataset -> (iia, iia_changed)

    def to_dict(self) -> dict:
        out = {"location": self.location, "iia": round(self.iia, 6), "iia_changed": _r(self.iia_changed),
               "aligned": self.is_aligned, "residual": self.is_residual, **self.info}
        if self.datasets:
            out["datasets"] = {k: {"iia": round(a, 6), "iia_changed": _r(c)} for k, (a, c) in self.datasets.items()}
        return out


def scores(rows: Sequence[LocationScore], aligned_nodes: frozenset[str], by_name: dict[str, Location],
           holds: Sequence[str] = ()) -> dict:
    """``iia_aligned``, ``localized``, ``gap``, ``best_location`` and MIB's aggregates (``mib``)
    from per-location IIA (``aligned_nodes``: the nodes that compute the variable; ``holds``: the
    locations that hold it)."""
    nodes = [r for r in rows if not r.is_residual]
    al = next((r for r in rows if r.is_aligned), None)
    disjoint = [r for r in nodes if not (by_name[r.location].nodes & aligned_nodes)]
    best_other = max((r.iia for r in disjoint), default=None)
    best = max(nodes, key=lambda r: r.iia, default=None)
    out: dict = {"iia_aligned": None if al is None else round(al.iia, 6),
                 "iia_changed_aligned": None if al is None else _r(al.iia_changed),
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
    out["mib"] = mib_scores(rows, holds)
    return out


def mib_scores(rows: Sequence[LocationScore], holds: Sequence[str]) -> dict:
    """MIB's aggregates over every location (nodes and residual layers)."""
    if not rows:
        return {"mean_iia": None, "best_iia": None, "best_location": None, "iia_true": None,
                "true_locations": list(holds), "best_is_true": None}
    best = max(rows, key=lambda r: r.iia)  # max keeps the first of equals: the earlier location
    tied = [r.location for r in rows if r.iia == best.iia]
    al = next((r for r in rows if r.is_aligned), None)
    return {"mean_iia": round(sum(r.iia for r in rows) / len(rows), 6), "best_iia": round(best.iia, 6),
            "best_location": best.location, "best_locations": tied, "iia_true": None if al is None else round(al.iia, 6),
            "true_locations": list(holds),
            "best_is_true": bool(all(t in holds for t in tied)) if holds else None}


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
    iia_unit: str = "example"

    def results(self) -> dict:
        v = self.variable
        return {"variable": v.name, "op_type": v.op_type, "model_kind": self.model_kind, "variable_kind": v.kind,
                "aligned_location": v.aligned, "true_locations": list(v.holds), "separates": v.separates,
                "separation": v.why, "shares_with": list(v.shares_with), "featurizer": self.spec.name,
                "hyperparameters": self.spec.hyperparameters(), "iia_unit": self.iia_unit,
                "counterfactual_datasets": list(self.data.get("test", {})),
                "locations": [r.to_dict() for r in self.rows], "scores": self.scores}


def _concat(parts: Sequence[VariableData], split: str) -> VariableData:
    from cbench.tasks.data import TaskData

    ds = [p.data for p in parts]
    td = TaskData(torch.cat([d.base for d in ds]), torch.cat([d.source for d in ds]), torch.cat([d.labels for d in ds]),
                  torch.cat([d.valid for d in ds]), ds[0].task_type, split, ds[0].dataset, ds[0].revision,
                  dict(ds[0].info))
    return VariableData(td, torch.cat([p.changed for p in parts]), split, "+".join(p.source for p in parts))


def load_variable_data(artifact, var: Variable, dataset_dir=None, n_train: int = DEFAULT_TRAIN,
                       n_test: int = DEFAULT_TEST, need_train: bool = True
                       ) -> tuple[VariableData | None, dict[str, VariableData]]:
    """(train pairs, {counterfactual dataset: test pairs}). A variables model's pairs are drawn
    from its high-level model (``random`` and ``differs``; the train split is their union, half
    each); every other model's come from ``cbench/counterfactuals`` (one dataset)."""
    if artifact.model_kind == "variables":
        from cbench.tasks.variables import DATASETS, variable_pairs

        def vd(ds, split, n):
            data, changed = variable_pairs(artifact.meta, var.name, ds, split, n)
            return VariableData(data, changed, split, f"variables:{ds}")

        train = _concat([vd(ds, "train", -(-n_train // len(DATASETS))) for ds in DATASETS], "train") if need_train else None
        return train, {ds: vd(ds, "test", n_test) for ds in DATASETS}
    revision = artifact.meta.get("dataset_revision")
    train = None
    if need_train:
        rows, where = read_rows(artifact.case, "train", dataset_dir, revision, n_train)
        train = variable_data(rows, var.name, artifact.meta, "train", where, n_train)
    rows, where = read_rows(artifact.case, "test", dataset_dir, revision, n_test)
    return train, {"counterfactuals": variable_data(rows, var.name, artifact.meta, "test", where, n_test)}


def localize(artifact, var_name: str, spec: FeaturizerSpec, locations: Sequence[str] | None = None,
             dataset_dir=None, n_train: int = DEFAULT_TRAIN, n_test: int = DEFAULT_TEST, model=None,
             data: tuple | None = None, echo: Callable[[str], None] | None = None, iia_unit: str = "example",
             saes: Mapping | None = None) -> Localization:
    """IIA of ``spec`` for variable ``var_name`` at each location (default: every candidate and
    the aligned location)."""
    from cbench.localization.sae import artifact_saes

    if iia_unit not in IIA_UNITS:
        raise UsageError(f"unknown IIA unit {iia_unit!r} (one of {', '.join(IIA_UNITS)})")
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
    train, tests = data if data is not None else load_variable_data(
        artifact, var, dataset_dir, n_train, n_test, need_train=spec.name not in ("identity", "random"))
    if not isinstance(tests, Mapping):
        tests = {"counterfactuals": tests}
    if not any(int(t.changed.sum()) for t in tests.values()):  # vacuous: no pair changes the output
        var = dataclasses.replace(var, separates=False, why="the interchange changes no test pair's output")
    if spec.name == "dbm-sae" and saes is None:
        saes = artifact_saes(artifact)
    rows = []
    fitted = fit_many(model, [locs[n] for n in names], spec, train, var.n_dims, saes=saes)  # side by side
    for n, (ivs, info) in zip(names, fitted):
        loc = locs[n]
        per = {ds: iia(model, loc, ivs, t, unit=iia_unit) for ds, t in tests.items()}
        a = sum(x[0] for x in per.values()) / len(per)
        chs = [x[1] for x in per.values() if x[1] == x[1]]
        c = sum(chs) / len(chs) if chs else float("nan")
        rows.append(LocationScore(n, a, c, n == var.aligned, loc.is_residual, info, per if len(per) > 1 else {}))
        if echo:
            echo(f"  {n:<24} IIA {a:.4f}" + ("" if math.isnan(c) else f"  (changed {c:.4f})")
                 + ("  <- aligned" if n == var.aligned else ""))
    sc = scores(rows, aligned_nodes, locs, var.holds)
    data_block: dict = {"test": {ds: {"split": "test", "n_examples": t.n_examples,
                                      "n_positions": int(t.data.valid.sum()), "n_changed": int(t.changed.sum()),
                                      "dataset": t.source} for ds, t in tests.items()}}
    if train is not None:
        data_block["train"] = {"split": "train", "n_examples": train.n_examples, "dataset": train.source}
    return Localization(artifact.case, artifact.model_kind, var, spec, rows, sc, data_block,
                        time.perf_counter() - t0, iia_unit)


def results_doc(loc: Localization, model_ref: dict, reproducible: bool = False) -> dict:
    """The ``localization`` results document. ``reproducible``: without wall-clock fields (the
    fit times, the run time, and ``created`` set to the Unix epoch), so that the same command
    with the same seed writes the same bytes."""
    from cbench.scoring.report import results_document

    results = loc.results()
    if reproducible:
        for r in results["locations"]:
            r.pop("train_s", None)
    doc = results_document("localization", results,
                           {"model": model_ref, "data": loc.data, "featurizer": loc.spec.name,
                            "hyperparameters": loc.spec.hyperparameters(), "iia_unit": loc.iia_unit},
                           case=loc.case, runtime_s=None if reproducible else loc.runtime_s)
    if reproducible:
        doc["created"] = "1970-01-01T00:00:00Z"
    return doc
