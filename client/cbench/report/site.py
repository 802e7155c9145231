"""``cbench report --html OUT``: bench results (and submitted edge-score files) as a static site.

Layout of OUT::

    index.html                 the leaderboard: entries over every case of the bench, ranked by mean
                               edge AUROC, then entries over fewer cases, each ranked only against
                               the entries over the same cases; the box plot and the difference plot
    stress.html                the stress tier (when the bench ran it): method x mechanism tables,
                               per-class AUROC, the cards' predictions, the discrimination statistics
    featurizers.html           with ``--variables DIR``: the causal-variable track's featurizer
                               leaderboard, read from DIR/results.json (report/featurizers.py)
    cases/<case>.html          ROC curves; the ground-truth circuit, and each entry's top edges on it
    methods/<slug>.html        one entry's AUROC, CPR and CMD per case, runtimes, tests against the others
    img/*.svg                  the circuit drawings
    assets/report.css, report.js   the only assets; no CDN, so the site works from file://
    submissions/<name>/<case>.json   files added by ``cbench submit`` (kept, rebuilt into the site)
    site.json                  what the site was built from (so ``cbench submit`` can rebuild it)

Every figure is drawn from the numbers its page's table shows (the ROC panels' AUROCs are the
table's cells; the random row's curve is the mean curve of the draws its mean AUROC comes from),
and every name is escaped wherever it appears. The leaderboard's AUROCs for the bench's methods
are the bench's own (``results.json``); a submission is scored here with the same routine.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np

from cbench.errors import UsageError
from cbench.report.entries import (  # noqa: F401 - the site's names, as `cbench submit` uses them
    CaseInfo,
    Entry,
    _load_case,
    _no_signal,
    comparisons,
    fmt,
    fmt_p,
    gather,
    read_bench,
    score_doc,
    slug,
    split_by_coverage,
)

_HERE = Path(__file__).parent
ASSETS = ("report.css", "report.js")


def json_for_script(doc) -> str:
    """JSON safe inside ``<script type="application/json">``: ``<``, ``>``, ``&`` escaped, so no
    name can close the element."""
    text = json.dumps(doc, sort_keys=True, allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def build_report(results_dir: str | Path, out_dir: str | Path, against: str | None = None,
                 echo: Callable[[str], None] = print, progress: str = "off",
                 variables: str | Path | None = None) -> Path:
    """Write the site into ``out_dir``; the path of its index.html. ``progress``: ``auto`` shows
    k of N pages and an ETA on standard error (:mod:`cbench.scoring.progress`). ``variables``: the
    results of ``cbench bench --track causal-variables`` (adds the featurizer leaderboard)."""
    from cbench.files.safe_io import output_directory
    from cbench.report.featurizers import read_track
    from cbench.report.figures import case_figures, circuits, leaderboard_data
    from cbench.scoring.progress import Progress
    from cbench.scoring.report import write_bytes_atomic

    results_dir, out = Path(results_dir), output_directory(out_dir, "--html", parents=True)
    check_report_directory(out)
    fb = read_track(variables) if variables is not None else None
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
    from cbench.files.safe_io import make_output_directory

    make_output_directory(out, "--html", echo=echo)
    for sub in ("img", "cases", "methods", "assets"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    for asset in ASSETS:
        shutil.copyfile(_HERE / "static" / asset, out / "assets" / asset)
    stress = bench["results"].get("stress") or {}
    prog = Progress(len(cases) + len(entries) + 1 + bool(stress) + bool(fb), "report", mode=progress,
                    echo=lambda _s: None)
    try:
        stats = comparisons(entries)
        full, partial = split_by_coverage(entries, cases)
        env = _jinja()
        env.globals["has_variables"] = fb is not None
        common = {"fmt": fmt, "fmt_p": fmt_p, "bench": bench, "cases": cases, "entries": entries,
                  "infos": infos, "against": against, "stats": stats, "results_dir": str(results_dir),
                  "n_submissions": sum(e.kind == "submission" for e in entries), "has_stress": bool(stress),
                  "calibration": bench["results"].get("calibration") or {},
                  "discrimination": bench["results"].get("discrimination") or {}}
        pages = {}
        for c in cases:
            prog.start(f"case {c}")
            panels = case_figures(c, infos.get(c), entries, bench) if c in infos else []
            if c in infos:
                circuits(out, c, infos[c], entries, bench, write_bytes_atomic)
            pages[out / "cases" / f"{slug(c)}.html"] = env.get_template("case.html.j2").render(
                root="../", case=c, info=infos.get(c), panels=panels, **common)
            prog.done(f"case {c}")
        prog.start("leaderboard")
        data = leaderboard_data(entries, cases, full)
        pages[out / "index.html"] = env.get_template("leaderboard.html.j2").render(
            root="", ranked=full, partial=partial, stats_json=json_for_script(stats),
            data_json=json_for_script(data["table"]), boxplot=data["boxplot"], **common)
        prog.done("leaderboard")
        if stress:
            prog.start("stress tier")
            pages[out / "stress.html"] = env.get_template("stress.html.j2").render(
                root="", stress=stress_view(stress, entries), **common)
            prog.done("stress tier")
        if fb is not None:
            prog.start("featurizers")
            pages[out / "featurizers.html"] = env.get_template("featurizers.html.j2").render(root="", fb=fb, **common)
            prog.done("featurizers")
        for e in entries:
            prog.start(f"method {e.name}")
            pages[out / "methods" / f"{e.slug}.html"] = env.get_template("method.html.j2").render(
                root="../", entry=e, **common)
            prog.done(f"method {e.name}")
        for path, html in pages.items():
            write_bytes_atomic(path, html.encode())
    finally:
        prog.close()
    site = {"schema": SITE_SCHEMA, "results": str(results_dir.resolve()), "against": against,
            "entries": names, "cases": cases,
            "variables": None if variables is None else str(Path(variables).resolve())}
    write_bytes_atomic(out / "site.json", (json.dumps(site, indent=1) + "\n").encode())
    return out / "index.html"


def stress_view(stress: dict, entries: list[Entry]) -> dict:
    """What the stress page shows, from ``results.stress`` (scoring/stress_tier.py)."""
    order = [e.name for e in entries]
    per_class = stress.get("per_class") or {}
    classes = sorted({cls for per in per_class.values() for m in per.values() for cls in m})
    methods = [m for m in order if any(m in per for per in per_class.values())]
    class_means = {cls: {m: _mean([per[m].get(cls) for per in per_class.values() if m in per]) for m in methods}
                   for cls in classes}
    predictions = stress.get("predictions") or {}
    rows = [dict(r, case=c) for c, rs in predictions.items() for r in rs]
    by_mech = stress.get("by_mechanism") or {}
    cols = [m for m in order if any(m in row for row in by_mech.values())]
    return {"methods": cols, "by_mechanism": by_mech, "mechanisms": stress.get("mechanisms") or {},
            "faithfulness_by_mechanism": stress.get("faithfulness_by_mechanism") or {},
            "defeats": stress.get("defeats") or {}, "classes": classes, "class_means": class_means,
            "class_methods": methods, "per_class": per_class, "predictions": rows,
            "held": sum(bool(r.get("held")) for r in rows)}


def _mean(values) -> float | None:
    v = [x for x in values if x is not None]
    return float(np.mean(v)) if v else None


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


def _jinja():
    import jinja2

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(_HERE / "templates")),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), trim_blocks=True,
                             lstrip_blocks=True, undefined=jinja2.StrictUndefined)
    env.filters["slug"] = slug
    return env
