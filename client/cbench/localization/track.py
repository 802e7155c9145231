"""``cbench bench --track causal-variables``: every variable of every case, each featurizer.

For each case the SIIT model (``case-<id>``) and the compiled Tracr model (``tracr-case-<id>``,
the sanity row: each variable lives in a known subspace, so DAS and the identity must reach IIA
~1 at the aligned location) are localized variable by variable with each featurizer. The
variables tier's models (``var-*``; ``--cases variables`` names all nine) are localized as they
are: their variables share a component, sit in a rotated basis or are spread over components.

IIA is MIB's (per example) unless ``iia_unit="position"``. Variables that cannot separate
featurizers (their nodes compute nothing else, or no test pair's output changes: ``separates``
false in each row, with why) are left out of the summary and the leaderboard unless
``include_trivial``; the rows keep them.

Layout of the results directory (``--out DIR``)::

    DIR/runs/<model>/<variable>/<featurizer>.json   cbench/results/v1, kind "localization"
    DIR/failures/<model>.txt                        the one-line error of a model that failed
    DIR/results.json                                cbench/results/v1, kind "causal-variables"
    DIR/table.md                                    per model kind and featurizer: mean IIA at
                                                    the aligned location, localization accuracy,
                                                    mean gap; then one row per variable
    DIR/iia_aligned.png                             IIA at the aligned location per featurizer
    DIR/leaderboard.png                             mean IIA at the true location, featurizer x
                                                    variable kind

Resumable: a run whose file exists with the same featurizer hyperparameters and data sizes is
read back, not run again.
"""

from __future__ import annotations

import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from cbench.errors import CbenchError, UsageError
from cbench.files.safe_io import make_output_directory
from cbench.localization.featurizers import FEATURIZERS, FeaturizerSpec

MODEL_KINDS = ("siit", "tracr")
VARIABLES_MODELS = tuple(f"var-{k}-{i}" for k in ("shared", "rotated", "spread") for i in (1, 2, 3))


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


def _models(cases: Sequence[str], kinds: Sequence[str]) -> list[tuple[str, str]]:
    """(case, model name) to run: ``variables`` and ``var-*`` are the variables tier's models, any
    other case gives its SIIT and Tracr models (``kinds``)."""
    out = []
    for c in cases:
        c = str(c)
        if c == "variables":
            out += [(n, n) for n in VARIABLES_MODELS]
        elif c.startswith("var-"):
            out.append((c, c))
        else:
            c = c.removeprefix("tracr-").removeprefix("case-")
            out += [(c, f"case-{c}" if k == "siit" else f"tracr-case-{c}") for k in kinds]
    return out


def run_track(cases: Sequence[str], out_dir: str | Path, featurizers: str | None = None, kinds: str | None = None,
              n_train: int = 1024, n_test: int = 500, dataset_dir=None, loader: Callable | None = None,
              echo: Callable[[str], None] = print, iia_unit: str = "example", include_trivial: bool = False,
              seed: int = 0, steps: int = 64, locations: str = "all") -> dict:
    """Run the track and write the results directory; returns the results document.

    ``locations``: ``"all"`` (every candidate location and the true one: MIB's search, and the
    best location against the true one) or ``"true"`` (only the locations that hold the variable:
    IIA at the true location at a fraction of the cost; the best location is then not searched)."""
    if locations not in ("all", "true"):
        raise UsageError(f"unknown locations {locations!r} (all or true)")
    from cbench.localization.localize import load_variable_data, localize, results_doc
    from cbench.localization.sae import artifact_saes
    from cbench.localization.variables import variables
    from cbench.scoring.report import results_document, write_results

    feats = _names(featurizers, FEATURIZERS, "featurizer")
    kinds_ = _names(kinds, MODEL_KINDS, "model kind")
    loader = loader or _load
    out = Path(out_dir)
    t0 = time.perf_counter()
    models = _models(cases, kinds_)
    found: dict[str, object] = {}  # every model looked up before anything is written
    missing: dict[str, CbenchError] = {}
    for _case, name in models:
        try:
            found[name] = loader(name)
        except CbenchError as e:
            missing[name] = e
    if not found:
        first = next(iter(missing.items()), None)
        raise UsageError("no model to localize" + (f": {first[0]}: {first[1]}" if first else "")
                         + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""))
    make_output_directory(out, "--out", echo=lambda s: print(s, file=sys.stderr))
    rows: list[dict] = []
    for case, name in models:
        try:
            if name in missing:
                raise missing[name]
            art = found[name]
            model = art.load_model()
            vars_ = variables(art)
            saes = artifact_saes(art) if "dbm-sae" in feats else {}
        except CbenchError as e:
            (out / "failures").mkdir(exist_ok=True)
            (out / "failures" / f"{name}.txt").write_text(str(e) + "\n")
            echo(f"{name}: skipped ({e})")
            continue
        for var in vars_:
            data = None
            for f in feats:
                spec = FeaturizerSpec(f, seed=seed, steps=steps)
                path = out / ("runs" if locations == "all" else "runs-true") / name / var.name / f"{f}.json"
                doc = _reuse(path, spec, n_train, n_test, iia_unit)
                if doc is not None:  # scored again: the scoring may have changed since
                    doc["results"]["scores"] = rescore(doc["results"]["locations"], var, model.cfg)
                else:
                    if data is None:
                        data = load_variable_data(art, var, dataset_dir, n_train, n_test)
                    loc = localize(art, var.name, spec, model=model, data=data, iia_unit=iia_unit, saes=saes,
                                   locations=list(var.holds) if locations == "true" else None)
                    doc = results_doc(loc, {"name": name, "case": art.case, "kind": art.model_kind})
                    doc["inputs"]["sizes"] = {"n_train": n_train, "n_test": n_test}
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_results(path, doc)
                r = dict(doc["results"], case=str(case), model=name, runtime_s=doc.get("runtime_s"),
                         locations_searched=locations)
                rows.append(r)
                s = r["scores"]
                echo(f"{name} {var.name} {f}: IIA at {var.aligned} {_fmt(s['iia_aligned'])}, "
                     f"best {s['mib']['best_location']} ({'true' if s['mib']['best_is_true'] else 'not true'}), "
                     f"mean {_fmt(s['mib']['mean_iia'])}" + ("" if r.get("separates") is not False else "  [trivial]"))
    if not rows:
        raise CbenchError(f"no variable was localized (every model failed; see {out / 'failures'})")
    summary = summarize(rows, include_trivial)
    board = leaderboard(rows, include_trivial)
    doc = results_document("causal-variables", {"rows": rows, "summary": summary, "leaderboard": board},
                           {"featurizers": feats, "model_kinds": kinds_, "sizes": {"n_train": n_train, "n_test": n_test},
                            "iia_unit": iia_unit, "include_trivial": include_trivial, "seed": seed,
                            "locations": locations, "steps": steps},
                           cases=[str(c) for c in cases], runtime_s=time.perf_counter() - t0)
    write_results(out / "results.json", doc)
    (out / "table.md").write_text(table(rows, summary, board, iia_unit, include_trivial))
    if rows:
        plot(rows, out / "iia_aligned.png")
    if board:
        plot_leaderboard(board, out / "leaderboard.png")
    echo(f"results written to {out}")
    return doc


def _counted(r: Mapping, include_trivial: bool) -> bool:
    return include_trivial or r.get("separates") is not False


def leaderboard(rows: Sequence[dict], include_trivial: bool = False) -> list[dict]:
    """Featurizer x variable kind (a variables model's kind of variable, else the model kind):
    variables, mean IIA at the true location, share whose best location is a true one (only where
    every location was searched), MIB's mean IIA over locations and best-location IIA."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if _counted(r, include_trivial):
            groups.setdefault((r.get("variable_kind") or r["model_kind"], r["featurizer"]), []).append(r)
    order = {f: i for i, f in enumerate(FEATURIZERS)}
    out = []
    for (kind, feat), rs in sorted(groups.items(), key=lambda kv: (kv[0][0], order.get(kv[0][1], 99))):
        m = [r["scores"]["mib"] for r in rs]
        searched = [r.get("locations_searched", "all") == "all" for r in rs]

        def mean(xs):
            xs = [x for x in xs if x is not None]
            return round(sum(xs) / len(xs), 4) if xs else None

        out.append({"variable_kind": kind, "featurizer": feat, "variables": len(rs),
                    "mean_iia_true": mean([x["iia_true"] for x in m]),
                    "best_is_true": mean([None if x["best_is_true"] is None or not full else float(x["best_is_true"])
                                          for x, full in zip(m, searched)]),
                    "mean_iia": mean([x["mean_iia"] for x in m]), "mean_best_iia": mean([x["best_iia"] for x in m])})
    return out


def rescore(locations: Sequence[dict], var, cfg) -> dict:
    """The scores of stored per-location rows (``results.locations``)."""
    from cbench.localization.localize import LocationScore, scores
    from cbench.localization.variables import parse_location

    rows = [LocationScore(r["location"], r["iia"], float("nan") if r.get("iia_changed") is None else r["iia_changed"],
                          r["aligned"], bool(r.get("residual"))) for r in locations]
    by_name = {r.location: parse_location(r.location, cfg) for r in rows}
    return scores(rows, parse_location(var.aligned, cfg).nodes | frozenset(var.nodes), by_name, var.holds)


def _reuse(path: Path, spec: FeaturizerSpec, n_train: int, n_test: int, iia_unit: str = "example") -> dict | None:
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text())
        same = (doc["results"]["hyperparameters"] == spec.hyperparameters()
                and doc["inputs"].get("sizes") == {"n_train": n_train, "n_test": n_test}
                and doc["results"].get("iia_unit") == iia_unit)
        return doc if same else None
    except (ValueError, KeyError, TypeError):
        return None


def _fmt(x) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.3f}"


def summarize(rows: Sequence[dict], include_trivial: bool = False) -> list[dict]:
    """Per (model kind, featurizer): variables, mean IIA at the aligned location, share with IIA
    >= 0.99 there, localization accuracy (over variables where it is defined), mean gap; the
    variables that cannot separate featurizers left out unless ``include_trivial``."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if _counted(r, include_trivial):
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


def table(rows: Sequence[dict], summary: Sequence[dict], board: Sequence[dict] = (), iia_unit: str = "example",
          include_trivial: bool = False) -> str:
    lines = ["# Causal-variable localization", "",
             f"IIA: interchange-intervention accuracy on the test split, per {iia_unit} "
             + ("(MIB's definition: the intervened output is right at every labelled position)" if iia_unit == "example"
                else "(labelled positions)") + ", the mean over the counterfactual datasets. "
             "Localized: the best node location is made of the variable's nodes and beats every other node "
             "(residual-stream locations are not ranked). Gap: IIA at the aligned location minus the best IIA at a "
             "node location disjoint from the variable's nodes. "
             + ("Every variable counts." if include_trivial else
                "Variables that cannot separate featurizers (marked trivial below) are left out of both summaries."),
             "", "## Leaderboard: featurizer x variable kind", "",
             ("IIA true: mean IIA at the variable's true location. Best is true: share of variables whose best location "
              "(every node and residual layer ranked, MIB's best layer) holds the variable. Mean over locations: MIB's "
              "mean over counterfactual datasets and locations."), "",
             "| variable kind | featurizer | variables | IIA true | best is true | mean over locations | best IIA |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for b in board:
        lines.append(f"| {b['variable_kind']} | {b['featurizer']} | {b['variables']} | {_fmt(b['mean_iia_true'])} | "
                     f"{_fmt(b['best_is_true'])} | {_fmt(b['mean_iia'])} | {_fmt(b['mean_best_iia'])} |")
    lines += ["", "## Per model kind", "",
              "| model | featurizer | variables | mean IIA (aligned) | IIA >= 0.99 | localization accuracy | mean gap |",
              "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for s in summary:
        lines.append(f"| {s['model_kind']} | {s['featurizer']} | {s['variables']} | {_fmt(s['mean_iia_aligned'])} | "
                     f"{_fmt(s['share_iia_aligned_ge_0.99'])} | {_fmt(s['localization_accuracy'])} | {_fmt(s['mean_gap'])} |")
    lines += ["", "## Every variable", "",
              ("| model | variable | kind | aligned | featurizer | IIA (aligned) | best location | best is true | "
               "localized | gap |"), "| --- | --- | --- | --- | --- | ---: | --- | --- | --- | ---: |"]
    for r in rows:
        s = r["scores"]
        m = s.get("mib") or {}
        kind = (r.get("variable_kind") or r["model_kind"]) + ("" if r.get("separates") is not False else " (trivial)")
        lines.append(f"| {r['model']} | {r['variable']} | {kind} | {r['aligned_location']} | {r['featurizer']} | "
                     f"{_fmt(s['iia_aligned'])} | {m.get('best_location')} | {m.get('best_is_true')} | "
                     f"{s['localized']} | {_fmt(s['gap'])} |")
    return "\n".join(lines) + "\n"


def plot_leaderboard(board: Sequence[dict], path: Path) -> None:
    """Mean IIA at the true location, one group of bars per variable kind, one bar per featurizer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({b["variable_kind"] for b in board})
    feats = [f for f in FEATURIZERS if any(b["featurizer"] == f for b in board)]
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(kinds) * max(1, len(feats)) / 3, 3.6))
    w = 0.8 / max(1, len(feats))
    for j, f in enumerate(feats):
        ys = [next((b["mean_iia_true"] or 0.0 for b in board if b["variable_kind"] == k and b["featurizer"] == f), 0.0)
              for k in kinds]
        ax.bar([i + j * w for i in range(len(kinds))], ys, width=w, label=f)
    ax.set_xticks([i + 0.4 - w / 2 for i in range(len(kinds))], kinds)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("mean IIA at the true location")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


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
