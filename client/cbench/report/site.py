"""``cbench report --html OUT``: bench results (and submitted edge-score files) as a static site.

Layout of OUT::

    index.html                 the leaderboard: one row per method (and submission), one column per case
    cases/<case>.html          ROC curves; the ground-truth circuit, and each entry's top edges on it
    methods/<slug>.html        one entry's AUROC per case, runtimes, tests against every other entry
    img/*.png                  the plots (the bench's own plotting code) and the circuit drawings
    assets/report.css, sort.js the only assets; no CDN, so the site works from file://
    submissions/<name>/<case>.json   files added by ``cbench submit`` (kept, rebuilt into the site)
    site.json                  what the site was built from (so ``cbench submit`` can rebuild it)

The leaderboard's AUROCs for the bench's methods are the bench's own (``results.json``); a
submission is scored here with the same routine. Rows of the oracle (``activation-patching``,
each edge's exact effect) and of the random baseline are marked as calibration rows when the
bench has them.
"""

from __future__ import annotations

import inspect
import json
import math
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from cbench.errors import CbenchError, UsageError

ORACLE_METHODS = ("activation-patching",)
RANDOM_METHODS = ("random",)
_HERE = Path(__file__).parent


@dataclass
class Entry:
    """A row of the leaderboard: a bench method or a submission."""

    name: str
    kind: str  # "method", "oracle", "random" or "submission"
    auroc: dict = field(default_factory=dict)  # case -> edge AUROC (None: failed)
    node_auroc: dict = field(default_factory=dict)
    runtime: dict = field(default_factory=dict)
    scores: dict = field(default_factory=dict)  # case -> edge-scores document

    @property
    def slug(self) -> str:
        return slug(self.name)

    def values(self) -> list[float]:
        return [v for v in self.auroc.values() if v is not None]

    @property
    def mean(self) -> float | None:
        v = self.values()
        return float(np.mean(v)) if v else None

    @property
    def std(self) -> float | None:
        v = self.values()
        return float(np.std(v)) if v else None

    @property
    def mean_runtime(self) -> float | None:
        v = [t for t in self.runtime.values() if t is not None]
        return float(np.mean(v)) if v else None


@dataclass
class CaseInfo:
    case: str
    model: str  # the model's name, e.g. case-3
    artifact: object
    truth: list


def slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("_") or "entry"


def _case_key(case: str):
    return (0, int(case), "") if str(case).isdigit() else (1, 0, str(case))


def read_bench(results_dir: Path) -> dict:
    """The bench's results.json (checked), with a message that says what to run when it is missing."""
    from cbench.schemas import check, read_json

    path = Path(results_dir) / "results.json"
    if not path.is_file():
        raise UsageError(f"{results_dir}: no results.json; run `cbench bench --out {results_dir}` first")
    doc = read_json(path)
    check(doc, "results", source=str(path))
    if doc.get("kind") != "bench":
        raise UsageError(f"{path}: a {doc.get('kind')!r} results document, not the results of `cbench bench`")
    return doc


def _load_case(case: str, model_path: str | None) -> CaseInfo:
    from cbench.artifacts.model import read_model_artifact
    from cbench.scoring.bench import _resolve
    from cbench.scoring.ground_truth import circuit_edge_names

    art = read_model_artifact(model_path) if model_path and Path(model_path).is_dir() else _resolve(case)[1]
    if not art.circuit:
        raise CbenchError(f"case {case}: the model has no ground-truth circuit")
    name = f"case-{case}" if art.model_kind == "siit" else f"{art.model_kind}-case-{case}"
    return CaseInfo(case, name, art, circuit_edge_names(art.graph, art.circuit))


def score_doc(info: CaseInfo, doc: dict, no_signal=None):
    """Score an edge-scores document against the case's truth (leaving out the bench's no-signal
    edges when this version of the scoring takes them)."""
    from cbench.scoring.ground_truth import score_against_truth

    kwargs = {}
    if no_signal and "no_signal" in inspect.signature(score_against_truth).parameters:
        kwargs["no_signal"] = no_signal
    return score_against_truth(info.artifact.graph, doc, info.truth, **kwargs)


def _no_signal(bench: dict, case: str):
    marks = ((bench["results"].get("no_signal_edges") or {}).get(case) or {}).get("edges")
    return marks or None


def gather(results_dir: Path, out: Path, echo: Callable[[str], None] = print):
    """(entries, cases, bench document): the bench's methods and the submissions kept in ``out``."""
    from cbench.scoring.ground_truth import check_edge_scores
    from cbench.schemas import read_json

    bench = read_bench(results_dir)
    res, inputs = bench["results"], bench["inputs"]
    methods = list(inputs.get("methods") or [])
    auroc = res.get("auroc") or {}
    cases = sorted(auroc, key=_case_key)
    infos: dict[str, CaseInfo] = {}
    for case in cases:
        try:
            infos[case] = _load_case(case, (inputs.get("models") or {}).get(case))
        except CbenchError as exc:
            echo(f"case {case}: left out of the per-case pages ({exc})")
    entries = []
    for m in methods:
        kind = "oracle" if m in ORACLE_METHODS else "random" if m in RANDOM_METHODS else "method"
        e = Entry(m, kind)
        for case in cases:
            e.auroc[case] = auroc[case].get(m)
            e.node_auroc[case] = (res.get("node_auroc") or {}).get(case, {}).get(m)
            e.runtime[case] = (res.get("method_runtime_s") or {}).get(case, {}).get(m)
            p = Path(results_dir) / "scores" / case / f"{m}.json"
            if case in infos and p.is_file() and e.auroc[case] is not None:
                e.scores[case] = read_json(p)
        entries.append(e)
    sub_dir = out / "submissions"
    for d in sorted(p for p in sub_dir.glob("*") if p.is_dir()) if sub_dir.is_dir() else []:
        e = Entry(d.name, "submission")
        for f in sorted(d.glob("*.json")):
            case = f.stem
            if case not in infos:
                echo(f"submission {d.name}: case {case} is not in the bench results; left out")
                continue
            try:
                doc = read_json(f)
                check_edge_scores(doc, infos[case].artifact.graph, case=case, source=str(f))
                r = score_doc(infos[case], doc, _no_signal(bench, case))
            except CbenchError as exc:
                echo(f"submission {d.name}, case {case}: left out ({exc})")
                continue
            e.auroc[case] = r.edge_auroc
            e.node_auroc[case] = None if math.isnan(r.node_auroc) else r.node_auroc
            e.runtime[case] = doc.get("runtime_s")
            e.scores[case] = doc
        if e.auroc:
            entries.append(e)
    return entries, cases, infos, bench


def comparisons(entries: list[Entry]) -> dict:
    """{against: {entry: {"p": Mann-Whitney U p-value, "a12": Vargha-Delaney A12 of entry vs against}}}."""
    from cbench.scoring.statistics import mann_whitney

    out: dict = {}
    for b in entries:
        row = out.setdefault(b.name, {})
        for a in entries:
            if a is b or not a.values() or not b.values():
                continue
            r = mann_whitney(a.values(), b.values())
            row[a.name] = {"p": r.p_value, "a12": r.a12}
    return out


def fmt(x, d=3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{d}f}"


def fmt_p(x) -> str:
    return "–" if x is None else (f"{x:.4f}" if x >= 1e-3 else f"{x:.1e}")


def build_report(results_dir: str | Path, out_dir: str | Path, against: str | None = None,
                 echo: Callable[[str], None] = print) -> Path:
    """Write the site into ``out_dir``; the path of its index.html."""
    from cbench.scoring.bench_summary import _plots
    from cbench.scoring.report import write_bytes_atomic

    from cbench.files.safe_io import output_directory

    results_dir, out = Path(results_dir), output_directory(out_dir, "--html")
    check_report_directory(out)
    entries, cases, infos, bench = gather(results_dir, out, echo)
    if not entries or not cases:
        raise UsageError(f"{results_dir}: the bench results have no scored case")
    names = [e.name for e in entries]
    if against is None:
        against = "acdc" if "acdc" in names else names[0]
    elif against not in names:
        from cbench.errors import did_you_mean

        raise UsageError(f"--against {against!r} is not a method or submission of the report"
                         + did_you_mean(against, names) + f" (there are: {', '.join(names)})")
    for sub in ("img", "cases", "methods", "assets"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for asset in ("report.css", "sort.js"):
        shutil.copyfile(_HERE / "static" / asset, out / "assets" / asset)

    # plots: the bench's own plotting code over every entry (submissions included)
    auroc = {c: {e.name: e.auroc.get(c) for e in entries} for c in cases}
    rocs: dict = {}
    tops: dict = {}
    for c in cases:
        if c not in infos:
            continue
        for e in entries:
            if c in e.scores:
                r = score_doc(infos[c], e.scores[c], _no_signal(bench, c))
                rocs.setdefault(c, {})[e.name] = (r.edge_roc.fpr, r.edge_roc.tpr, r.edge_roc.auroc)
                tops.setdefault(c, {})[e.name] = r.signed
    plots = set(_plots(out / "img", auroc, rocs, names))
    _circuits(out, entries, infos, tops, write_bytes_atomic)

    stats = comparisons(entries)
    env = _jinja()
    common = {"fmt": fmt, "fmt_p": fmt_p, "bench": bench, "cases": cases, "entries": entries,
              "infos": infos, "against": against, "stats": stats, "plots": plots, "results_dir": str(results_dir),
              "n_submissions": sum(e.kind == "submission" for e in entries),
              "calibration": bench["results"].get("calibration") or {},
              "discrimination": bench["results"].get("discrimination") or {}}
    ranked = sorted(entries, key=lambda e: (-(e.mean if e.mean is not None else -1), e.name))
    pages = {out / "index.html": env.get_template("leaderboard.html.j2").render(
        root="", ranked=ranked, stats_json=json.dumps(stats, sort_keys=True), **common)}
    for c in cases:
        pages[out / "cases" / f"{slug(c)}.html"] = env.get_template("case.html.j2").render(
            root="../", case=c, info=infos.get(c), has_roc=f"roc_{c}.png" in plots, **common)
    for e in entries:
        pages[out / "methods" / f"{e.slug}.html"] = env.get_template("method.html.j2").render(
            root="../", entry=e, **common)
    for path, html in pages.items():
        write_bytes_atomic(path, html.encode())
    site = {"schema": SITE_SCHEMA, "results": str(results_dir.resolve()), "against": against,
            "entries": names, "cases": cases}
    write_bytes_atomic(out / "site.json", (json.dumps(site, indent=1) + "\n").encode())
    return out / "index.html"


SITE_SCHEMA = "cbench/report-site/v1"


def check_report_directory(out: Path) -> None:
    """UsageError unless ``out`` is new, empty, or an earlier report of cbench (its ``site.json``
    says ``cbench/report-site/v1``): the site's files are never written among someone else's."""
    try:
        names = os.listdir(out)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise UsageError(f"--html {out}: cannot list it ({exc.strerror or exc})") from None
    if not names:
        return
    try:
        site = json.loads((out / "site.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        site = None
    if not (isinstance(site, dict) and site.get("schema") == SITE_SCHEMA):
        raise UsageError(f"--html {out}: a directory that is not empty and holds no earlier cbench report "
                         "(no site.json); give a new or empty directory")


def _circuits(out: Path, entries, infos, signed, write) -> None:
    """img/circuit_<case>.png (the ground truth) and img/circuit_<case>_<entry>.png (its top edges)."""
    from cbench.report.circuit_plot import draw_circuit, top_edges

    for c, info in infos.items():
        graph = info.artifact.graph
        write(out / "img" / f"circuit_{slug(c)}.png",
              draw_circuit(graph, info.truth, None, f"{info.model}: ground-truth circuit"))
        k = len({e.split("<")[0] for e in info.truth})
        for e in entries:
            if c in e.scores:
                top = top_edges(graph, e.scores[c], k, signed=signed.get(c, {}).get(e.name, False))
                write(out / "img" / f"circuit_{slug(c)}_{e.slug}.png",
                      draw_circuit(graph, info.truth, top, f"{info.model}: top {k} edges of {e.name}"))


def _jinja():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["slug"] = slug
    return env
