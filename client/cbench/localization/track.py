"""``cbench bench --track causal-variables``: every variable of every case, each featurizer.

For each case the SIIT model (``case-<id>``) and the compiled Tracr model (``tracr-case-<id>``,
the sanity row: each variable lives in a known subspace, so DAS and the identity must reach IIA
~1 at the aligned location) are localized variable by variable with each featurizer.

Layout of the results directory (``--out DIR``)::

    DIR/runs/<model>/<variable>/<featurizer>.json   cbench/results/v1, kind "localization"
    DIR/failures/<model>.txt                        the one-line error of a model that failed
    DIR/results.json                                cbench/results/v1, kind "causal-variables"
    DIR/table.md                                    per model kind and featurizer: mean IIA at
                                                    the aligned location, localization accuracy,
                                                    mean gap; then one row per variable
    DIR/iia_aligned.png                             IIA at the aligned location per featurizer

Resumable: a run whose file exists with the same featurizer hyperparameters and data sizes is
read back, not run again.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Callable, Sequence

from cbench.errors import CbenchError, UsageError
from cbench.localization.featurizers import FEATURIZERS, FeaturizerSpec

MODEL_KINDS = ("siit", "tracr")


def _names(value: str | None, allowed: Sequence[str], what: str) -> list[str]:
    if not value:
        return list(allowed)
    out = [v.strip() for v in value.split(",") if v.strip()]
    for v in out:
        if v not in allowed:
            raise UsageError(f"unknown {what} {v!r} (one of {', '.join(allowed)})")
    return out


def _load(name: str):
    from cbench.hub.loading import load

    return load(name)


def run_track(cases: Sequence[str], out_dir: str | Path, featurizers: str | None = None, kinds: str | None = None,
              n_train: int = 1024, n_test: int = 500, dataset_dir=None, loader: Callable | None = None,
              echo: Callable[[str], None] = print) -> dict:
    """Run the track and write the results directory; returns the results document."""
    from cbench.localization.localize import load_variable_data, localize, results_doc
    from cbench.localization.variables import variables
    from cbench.scoring.report import results_document, write_results

    feats = _names(featurizers, FEATURIZERS, "featurizer")
    kinds_ = _names(kinds, MODEL_KINDS, "model kind")
    loader = loader or _load
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    rows: list[dict] = []
    cases = [str(c).removeprefix("tracr-").removeprefix("case-") for c in cases]
    for case in cases:
        for kind in kinds_:
            name = f"case-{case}" if kind == "siit" else f"tracr-case-{case}"
            try:
                art = loader(name)
                model = art.load_model()
                vars_ = variables(art)
            except CbenchError as e:
                (out / "failures").mkdir(exist_ok=True)
                (out / "failures" / f"{name}.txt").write_text(str(e) + "\n")
                echo(f"{name}: skipped ({e})")
                continue
            for var in vars_:
                data = None
                for f in feats:
                    spec = FeaturizerSpec(f)
                    path = out / "runs" / name / var.name / f"{f}.json"
                    doc = _reuse(path, spec, n_train, n_test)
                    if doc is not None:  # scored again: the scoring may have changed since
                        doc["results"]["scores"] = rescore(doc["results"]["locations"], var, model.cfg)
                    else:
                        if data is None:
                            data = load_variable_data(art, var, dataset_dir, n_train, n_test)
                        loc = localize(art, var.name, spec, model=model, data=data)
                        doc = results_doc(loc, {"name": name, "case": art.case, "kind": art.model_kind})
                        doc["inputs"]["sizes"] = {"n_train": n_train, "n_test": n_test}
                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_results(path, doc)
                    r = dict(doc["results"], case=str(case), model=name, runtime_s=doc.get("runtime_s"))
                    rows.append(r)
                    s = r["scores"]
                    echo(f"{name} {var.name} {f}: IIA at {var.aligned} {_fmt(s['iia_aligned'])}, "
                         f"best {s['best_location']}, localized {s['localized']}, gap {_fmt(s['gap'])}")
    summary = summarize(rows)
    doc = results_document("causal-variables", {"rows": rows, "summary": summary},
                           {"featurizers": feats, "model_kinds": kinds_, "sizes": {"n_train": n_train, "n_test": n_test}},
                           cases=[str(c) for c in cases], runtime_s=time.perf_counter() - t0)
    write_results(out / "results.json", doc)
    (out / "table.md").write_text(table(rows, summary))
    if rows:
        plot(rows, out / "iia_aligned.png")
    echo(f"results written to {out}")
    return doc


def rescore(locations: Sequence[dict], var, cfg) -> dict:
    """The scores of stored per-location rows (``results.locations``)."""
    from cbench.localization.localize import LocationScore, scores
    from cbench.localization.variables import parse_location

    rows = [LocationScore(r["location"], r["iia"], float("nan") if r.get("iia_changed") is None else r["iia_changed"],
                          r["aligned"], bool(r.get("residual"))) for r in locations]
    by_name = {r.location: parse_location(r.location, cfg) for r in rows}
    return scores(rows, parse_location(var.aligned, cfg).nodes | frozenset(var.nodes), by_name)


def _reuse(path: Path, spec: FeaturizerSpec, n_train: int, n_test: int) -> dict | None:
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        same = (doc["results"]["hyperparameters"] == spec.hyperparameters()
                and doc["inputs"].get("sizes") == {"n_train": n_train, "n_test": n_test})
        return doc if same else None
    except (ValueError, KeyError, TypeError):
        return None


def _fmt(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def summarize(rows: Sequence[dict]) -> list[dict]:
    """Per (model kind, featurizer): variables, mean IIA at the aligned location, share with IIA
    >= 0.99 there, localization accuracy (over variables where it is defined), mean gap."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((r["model_kind"], r["featurizer"]), []).append(r)
    out = []
    for (kind, feat), rs in sorted(groups.items()):
        al = [r["scores"]["iia_aligned"] for r in rs if r["scores"]["iia_aligned"] is not None]
        loc = [r["scores"]["localized"] for r in rs if r["scores"]["localized"] is not None]
        gaps = [r["scores"]["gap"] for r in rs if r["scores"]["gap"] is not None]
        out.append({"model_kind": kind, "featurizer": feat, "variables": len(rs),
                    "mean_iia_aligned": round(sum(al) / len(al), 4) if al else None,
                    "share_iia_aligned_ge_0.99": round(sum(a >= 0.99 for a in al) / len(al), 4) if al else None,
                    "localization_accuracy": round(sum(loc) / len(loc), 4) if loc else None,
                    "mean_gap": round(sum(gaps) / len(gaps), 4) if gaps else None})
    return out


def table(rows: Sequence[dict], summary: Sequence[dict]) -> str:
    lines = ["# Causal-variable localization", "",
             "IIA: interchange-intervention accuracy on the test split (labelled positions). Localized: the best "
             "node location is made of the variable's nodes and beats every other node (residual-stream locations "
             "are not ranked). Gap: IIA at the aligned location minus the best IIA at a node location disjoint from "
             "the variable's nodes.", "",
             "| model | featurizer | variables | mean IIA (aligned) | IIA >= 0.99 | localization accuracy | mean gap |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in summary:
        lines.append(f"| {s['model_kind']} | {s['featurizer']} | {s['variables']} | {_fmt(s['mean_iia_aligned'])} | "
                     f"{_fmt(s['share_iia_aligned_ge_0.99'])} | {_fmt(s['localization_accuracy'])} | {_fmt(s['mean_gap'])} |")
    lines += ["", "| model | variable | aligned | featurizer | IIA (aligned) | best node location | localized | gap |",
              "| --- | --- | --- | --- | ---: | --- | --- | ---: |"]
    for r in rows:
        s = r["scores"]
        lines.append(f"| {r['model']} | {r['variable']} | {r['aligned_location']} | {r['featurizer']} | "
                     f"{_fmt(s['iia_aligned'])} | {s['best_location']} | {s['localized']} | {_fmt(s['gap'])} |")
    return "\n".join(lines) + "\n"


def plot(rows: Sequence[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({r["model_kind"] for r in rows})
    feats = [f for f in FEATURIZERS if any(r["featurizer"] == f for r in rows)]
    fig, axes = plt.subplots(1, len(kinds), figsize=(4.5 * len(kinds), 3.6), squeeze=False)
    for ax, kind in zip(axes[0], kinds):
        data = [[r["scores"]["iia_aligned"] for r in rows if r["model_kind"] == kind and r["featurizer"] == f
                 and r["scores"]["iia_aligned"] is not None] for f in feats]
        for i, vals in enumerate(data):
            ax.scatter([i + 1] * len(vals), vals, s=12, alpha=0.6)
        ax.boxplot([d if d else [float("nan")] for d in data], tick_labels=feats)
        ax.set_ylim(-0.02, 1.02)
        ax.set_title(f"{kind}: IIA at the aligned location")
        ax.set_ylabel("IIA")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_from_cli(cases: str, featurizers: str | None, out_dir: str, n_examples: int, echo=print) -> dict:
    """``cbench bench --track causal-variables``: ``--cases`` as for the circuit track,
    ``--methods`` names featurizers, ``--n-examples`` the test pairs (train: twice as many)."""
    from cbench.scoring.bench import _parse_cases

    return run_track(_parse_cases(cases), out_dir, featurizers, n_train=2 * n_examples, n_test=n_examples, echo=echo)
