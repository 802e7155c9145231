"""``cbench bench``: every discovery method on every case, scored against the ground truth.

Layout of the results directory (``--out DIR``)::

    DIR/scores/<case>/<method>.json   edge-scores document of each run (written atomically)
    DIR/failures/<case>/<method>.txt  the one-line error of a run that failed
    DIR/results.json                  cbench/results/v1, kind "bench"
    DIR/table.md                      edge and node AUROC per case (and the model used) and method,
                                      mean and spread; Mann-Whitney U p-values and Vargha-Delaney A12
                                      between methods (InterpBench tables 8-9); method runtimes; per
                                      tier (main, appendix-h, ioi, tracr, stress) how far the real
                                      methods are apart (:mod:`cbench.scoring.discrimination`, also
                                      ``results.discrimination`` of results.json)
    DIR/auroc_boxplot.png             edge AUROC per method over the cases (box, cases, mean)
    DIR/diff_to_acdc.png              per case: each method's edge AUROC minus ACDC's
    DIR/roc_<case>.png                the case's edge ROC curves, one panel per method

Resumable: a (case, method) whose scores file exists, is valid for the case's graph and was made
the same way (same model kind, the hyperparameters the bench uses -- the defaults, the random
baseline seeded per case --, the same number of pairs, dataset or sampled pairs) is not run again, so a killed run continues where it stopped;
a file made another way is run again and replaced. Each scores file keeps the method's own
``runtime_s`` (the discovery itself, after the data and ablations are prepared); results.json
collects them per case and method (``method_runtime_s``) and table.md shows them.

Cases: ``main`` (InterpBench's 16 main cases) or a comma list of
case ids, case names or artifact directories; a case id resolves to the SIIT model ``case-<id>``
and falls back to the Tracr model ``tracr-case-<id>``.
"""

from __future__ import annotations

import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from cbench.errors import CbenchError, UsageError
from cbench.files.safe_io import make_output_directory, missing_directories, remove_empty_directories
from cbench.scoring.bench_summary import (
    PUBLISHED,
    RANDOM_SEEDS,
    _calibration,
    _case_key,
    _markdown,
    _method_stats,
    _plots,
)
from cbench.scoring.discrimination import by_tier
from cbench.scoring.discrimination import markdown as discrimination_markdown
from cbench.scoring.bench_summary import RESOLUTION_RULE, resolution_markdown
from cbench.scoring.mib_protocol import mib_auroc, random_mib_auroc, side_by_side, side_by_side_markdown
from cbench.scoring.random_baseline import random_aurocs, random_class_aurocs, random_draws, random_mean_roc  # noqa: F401
from cbench.scoring.resolution import RESOLUTION_FACTOR
from cbench.scoring.bench_tasks import (  # noqa: F401 - the bench's units of work, named here too
    _METHOD_COST,
    _WORKER_CASES,
    BenchTask,
    CaseFaithfulnessTask,
    _model_ref,
    _resolve,
    _worker_case,
    bench_hyperparameters,
    bench_task,
    case_marks,
    discover_task,
    faithfulness_task,
    model_sha256,
    random_row,
    task_cost,
)

MAIN_CASES = ("3", "4", "8", "11", "13", "18", "19", "20", "21", "26", "29", "33", "34", "35", "36", "37")


def released_siit_cases() -> list[str]:
    """Ids of every SIIT model (``cbench/case-<id>``) the embedded zoo releases, in numeric order."""
    from cbench.hub.zoo import zoo_releases

    ids = {ref.repo_id.split("/case-", 1)[1] for ref in zoo_releases()
           if ref.repo_type == "model" and "/case-" in ref.repo_id}
    return sorted((i for i in ids if i.isdigit()), key=int)


def released_stress_cases() -> list[str]:
    """Names of the stress tier's models (``cbench/stress-*``) the embedded zoo releases."""
    from cbench.hub.zoo import zoo_releases

    return sorted(ref.repo_id.split("/", 1)[1] for ref in zoo_releases()
                  if ref.repo_type == "model" and ref.repo_id.startswith("cbench/stress-"))


def _parse_cases(cases: str) -> list[str]:
    """Case ids from ``main``, ``appendix-h`` (released SIIT models outside the main 16), ``all``
    (every released SIIT model), ``stress`` (the stress tier's models) or a comma-separated list;
    the names may be mixed with ids."""
    out: list[str] = []
    for c in (c.strip() for c in cases.split(",")):
        if c == "main":
            out += MAIN_CASES
        elif c == "all":
            out += released_siit_cases()
        elif c == "stress":
            st = released_stress_cases()
            if not st:
                raise UsageError("--cases stress: no stress-tier model is released yet")
            out += st
        elif c == "appendix-h":
            h = [i for i in released_siit_cases() if i not in MAIN_CASES]
            if not h:
                raise UsageError("--cases appendix-h: no SIIT model of an appendix-H case is released yet")
            out += h
        elif c:
            out.append(c)
    if not out:
        raise UsageError("--cases is empty; give 'main', 'appendix-h', 'all', 'stress' or a list like 3,33")
    return list(dict.fromkeys(out))


def _parse_methods(methods: str | None) -> list[str]:
    from cbench.discovery import method_spec

    if methods is None:
        from cbench.discovery import bench_methods

        return list(bench_methods())  # every registered method marked for the bench
    out = [m.strip() for m in methods.split(",") if m.strip()]
    if not out:
        raise UsageError("--methods is empty; leave it out for every method of the bench")
    for m in out:
        method_spec(m)  # one clear line for an unknown method
    return out


def _atomic_json(path: Path, doc) -> None:
    from cbench.scoring.report import write_bytes_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_bytes_atomic(path, (json.dumps(doc, indent=1) + "\n").encode())


def _mib_auroc(graph, doc, truth, method: str) -> float | None:
    """MIB's greedy-pruned edge AUROC of a scores document (the random row: the mean over draws)."""
    from cbench.scoring.faithfulness import edge_score_vector

    if method == "random":
        v = random_mib_auroc(graph, truth, int(doc["method"]["hyperparameters"].get("seed", 0)))
    else:
        v = mib_auroc(graph, edge_score_vector(graph, doc), truth).auroc
    return None if math.isnan(v) else float(v)


def _load_existing(path: Path, graph, case: str, method: str, kind: str, n_ok: Callable[[int], bool],
                   sampled: bool, seed: int = 0, weights: str | None = None, protocol: str | None = None):
    """The scores document at ``path`` if it can be reused: valid for this case and graph, from
    the same model kind and weights (``weights``: :func:`model_sha256`), with the hyperparameters the bench uses and the same data
    (sampled or not -- sampled with the same ``seed`` --, as many pairs: ``n_ok(n)`` says whether
    this run's data has ``n`` pairs).
    None otherwise (missing, half-written or stale: run again)."""
    from cbench.discovery import validate_hyperparameters
    from cbench.schemas import read_json
    from cbench.scoring.ground_truth import check_edge_scores

    if not path.is_file():
        return None
    try:
        doc = read_json(path)
        check_edge_scores(doc, graph, case=case, source=str(path))
    except CbenchError:
        return None
    if doc.get("model", {}).get("kind") != kind or doc.get("method", {}).get("name") != method:
        return None
    if doc.get("model_sha256") != weights:  # another version of the case (or a file from before this check)
        return None
    hp = doc["method"].get("hyperparameters", {})
    wanted = validate_hyperparameters(method, bench_hyperparameters(method, case, protocol))
    if any(v is not None and hp.get(k) != v for k, v in wanted.items()):
        return None
    data = doc.get("data", {})
    if (data.get("split") == "sampled") != sampled or not n_ok(data.get("n_examples")):
        return None
    if sampled and data.get("seed") != seed:  # other sampled pairs
        return None
    return doc


def _store_outcome(out: Path, task: BenchTask, outcome, failures: dict, echo: Callable[[str], None]):
    """Write one task's outcome: its scores file, or its one-line failure. The scores document, or
    None for a failure (recorded in ``failures``)."""
    path = out / "scores" / task.case / f"{task.method}.json"
    fp = out / "failures" / task.case / f"{task.method}.txt"
    if outcome.ok:
        doc = outcome.value["scores"] if "scores" in outcome.value else outcome.value
        _atomic_json(path, doc)
        fp.unlink(missing_ok=True)
        return doc
    echo(f"case {task.case}, {task.method}: failed ({outcome.error})")
    failures.setdefault(task.case, {})[task.method] = outcome.error
    fp.parent.mkdir(parents=True, exist_ok=True)
    fp.write_text(outcome.error + "\n")
    return None


def _run_remote(executor, case_list, method_list, out: Path, n_examples, sampled, seed, echo, protocol=None,
                faithfulness: bool = False, measured: dict | None = None, resolve=None,
                include_no_signal: bool = False, produced: dict | None = None) -> dict:
    """With a parallel executor: run every unfinished (case, method) task on it, longest first,
    each result written here as it arrives (so a killed run resumes; the random row's task also
    makes the baseline's draws, kept in ``measured[(case, "random", "row")]``); then, with
    ``faithfulness``, one task per case measures CPR and CMD of every method's scores
    (``measured[(case, method)]``; each distinct circuit of the case runs once) for the scoring
    loop. ``produced``: filled with ``{(case, method): document}`` of the tasks run here (the
    scoring loop scores them as the serial loop scores its own, without reading the files back).
    {(case, method): error} of the failed."""
    from cbench.scoring.executor import progress_line

    if executor is None:  # the serial loop runs each task itself
        return {}
    resolve = resolve or _resolve
    tasks, cost, docs, models = [], {}, {}, {}
    for case_arg in case_list:
        try:
            label, artifact = resolve(case_arg)
        except CbenchError:
            continue  # the scoring loop reports it
        if not artifact.circuit:
            continue
        models[label] = artifact
        for method in method_list:
            path = out / "scores" / label / f"{method}.json"
            doc = _load_existing(path, artifact.graph, label, method, artifact.model_kind,
                                 lambda n: n == n_examples or (not sampled and n is not None and n < n_examples),
                                 sampled, seed, model_sha256(artifact), protocol)
            if doc is None:
                task = BenchTask(label, str(artifact.path), method, n_examples, sampled, seed, protocol,
                                 random_row=method == "random", include_no_signal=include_no_signal)
                tasks.append(task)
                cost[task] = task_cost(task, len(artifact.graph.edges))
            else:
                docs.setdefault(label, {})[method] = doc
    tasks.sort(key=lambda t: -cost[t])  # stable: equal costs keep the case and method order
    if getattr(executor, "name", "") == "processes":  # forked workers inherit each case's model and pairs
        for task in {(t.case, t.model): t for t in tasks}.values():
            try:
                _worker_case(task, models.get(task.case))
            except Exception:  # noqa: BLE001 - the task itself reports it
                pass
    echo(f"{len(tasks)} discovery task(s) to run on {executor.name} "
         f"({len(case_list) * len(method_list) - len(tasks)} finished before)")
    failed: dict = {}
    t0 = time.perf_counter()

    def on_result(task, outcome, done, total):
        echo(progress_line(done, total, f"case {task.case}, {task.method}", outcome, t0))
        doc = _store_outcome(out, task, outcome, {}, lambda _: None)
        if doc is None:
            failed[(task.case, task.method)] = outcome.error
            return
        docs.setdefault(task.case, {})[task.method] = doc
        if produced is not None:
            produced[(task.case, task.method)] = doc
        if measured is not None and "random" in outcome.value:
            measured[(task.case, task.method, "row")] = outcome.value["random"]

    executor.map(bench_task, tasks, on_result)
    if not faithfulness or measured is None:
        return failed
    ftasks = [CaseFaithfulnessTask(label, str(models[label].path), n_examples, sampled, seed, protocol,
                                   tuple((m, per[m]) for m in method_list if m in per))
              for label, per in docs.items() if label in models]
    ftasks.sort(key=lambda t: -len(models[t.case].graph.edges) * len(t.docs))
    t0 = time.perf_counter()

    def on_faith(task, outcome, done, total):
        echo(progress_line(done, total, f"case {task.case}, CPR and CMD", outcome, t0))
        if outcome.ok:
            measured.update({(task.case, m): v for m, v in outcome.value.items()})

    executor.map(faithfulness_task, ftasks, on_faith)
    return failed


def run_bench(cases: str, methods: str | None, out_dir: str, n_examples: int = 100, sampled: bool = False,
              protocol: str | None = None,
              seed: int = 0, echo: Callable[[str], None] = print, executor=None,
              include_no_signal: bool = False, progress: str = "off", faithfulness: bool = True,
              figures: bool = True) -> dict:
    """Run and score every (case, method). ``executor`` (:mod:`cbench.scoring.executor`) runs the discovery
    tasks that are not finished yet, each result written as it arrives, before the loop below
    scores them; None: the loop runs each task itself (the serial default). ``progress``: how
    the finished (case, method) lines are shown (:mod:`cbench.scoring.progress`: ``auto`` k of N
    and an ETA on standard error; ``off``: each line to ``echo``). ``faithfulness``: CPR and CMD
    of every (case, method) (MIB's faithfulness integrals, ``results.faithfulness``; with an executor,
    measured in its tasks). ``figures``: write the PNG figures (``cbench report`` draws its own:
    the demo leaves them to it)."""
    from cbench.hub.loading import snapshots_checked_once

    with snapshots_checked_once():  # the cases' pairs come from one dataset snapshot: checked once
        return _run_bench(cases, methods, out_dir, n_examples, sampled, protocol, seed, echo, executor,
                          include_no_signal, progress, faithfulness, figures)


def _run_bench(cases: str, methods: str | None, out_dir: str, n_examples: int = 100, sampled: bool = False,
               protocol: str | None = None,
               seed: int = 0, echo: Callable[[str], None] = print, executor=None,
               include_no_signal: bool = False, progress: str = "off", faithfulness: bool = True,
               figures: bool = True) -> dict:
    """:func:`run_bench`'s work, inside its block of snapshots checked once."""
    from cbench.scoring.executor import run_task
    from cbench.scoring.mib_neurons import faithfulness_figures_of
    from cbench.scoring.progress import Progress
    from cbench.scoring.stress_tier import class_aurocs, class_sub_resolution, is_stress
    from cbench.scoring.ground_truth import circuit_edge_names, score_against_truth
    from cbench.scoring.report import results_document, write_results
    from cbench.scoring.task import case_from_artifact, pair_data

    t0 = time.perf_counter()
    case_list, method_list = _parse_cases(cases), _parse_methods(methods)
    created = missing_directories(out_dir)  # taken back when nothing could be scored
    out = make_output_directory(out_dir, "--out", echo=lambda s: print(s, file=sys.stderr))
    measured_faith: dict = {}  # (case, method) -> CPR and CMD measured in the executor's tasks
    resolved: dict = {}  # case argument -> (label, artifact) or the error: each case resolved once

    def resolve(case_arg):
        if case_arg not in resolved:
            try:
                resolved[case_arg] = _resolve(case_arg)
            except CbenchError as exc:
                resolved[case_arg] = exc
        if isinstance(resolved[case_arg], CbenchError):
            raise resolved[case_arg]
        return resolved[case_arg]

    produced: dict = {}  # (case, method) -> scores document a worker made in this run (and this loop wrote)
    remote_failures = _run_remote(executor, case_list, method_list, out, n_examples, sampled, seed, echo, protocol,
                                  faithfulness, measured_faith, resolve, include_no_signal, produced)
    prog = Progress(len(case_list) * len(method_list), "bench", mode=progress, echo=echo)
    auroc: dict[str, dict[str, float | None]] = {}
    per_class: dict = {}
    per_class_raw: dict = {}  # per class, the raw scores ranked (sub-resolution scores not tied with 0)
    per_class_sub: dict = {}  # per class, ground-truth edges lifted only by sub-resolution scores
    auroc_raw: dict[str, dict[str, float | None]] = {}  # the raw scores ranked (the figures before issue 45)
    sub_resolution: dict[str, dict[str, int]] = {}  # ground-truth edges lifted only by sub-resolution scores
    stress_meta: dict = {}
    faith: dict = {}  # CPR and CMD per case and method
    random_roc: dict = {}  # the random row's mean ROC: its true positive rate at each false positive step
    promoted: dict[str, dict[str, float | None]] = {}
    auroc_mib: dict[str, dict[str, float | None]] = {}  # MIB's greedy-pruned AUROC (scoring/mib_protocol.py)
    signal: dict[str, dict] = {}
    node_auroc: dict[str, dict[str, float | None]] = {}
    rocs: dict[str, dict[str, tuple]] = {}
    failures: dict[str, dict[str, str]] = {}
    timings: dict[str, dict[str, float | None]] = {}
    models: dict[str, str] = {}
    kinds: dict[str, str] = {}
    for case_arg in case_list:
        try:
            label, artifact = resolve(case_arg)
        except CbenchError as exc:
            echo(f"case {case_arg}: skipped ({exc})")
            failures.setdefault(case_arg, {})["*"] = str(exc)
            prog.advance(len(method_list))
            continue
        models[label] = str(artifact.path)
        kinds[label] = artifact.model_kind
        if not artifact.circuit:
            echo(f"case {label}: skipped (no ground-truth circuit)")
            failures.setdefault(label, {})["*"] = "no ground-truth circuit"
            prog.advance(len(method_list))
            continue
        graph = artifact.graph
        truth = circuit_edge_names(graph, artifact.circuit)
        prepared: dict = {}

        def case_data(artifact=artifact, prepared=prepared, label=label):
            if not prepared:
                loaded = _WORKER_CASES.get((label, str(artifact.path), n_examples, sampled, seed))
                if loaded is not None:  # loaded for the worker processes before they forked
                    prepared["sc"], prepared["data"] = loaded[1]
                else:
                    prepared["sc"] = sc = case_from_artifact(artifact)
                    prepared["data"] = pair_data(sc, n=n_examples, seed=seed, sampled=sampled)
            return prepared["sc"], prepared["data"]

        def n_ok(n, requested=n_examples, case_data=case_data):
            # the data holds the pairs asked for, or all there are when the dataset has fewer
            return n == requested or (not sampled and n == case_data()[1].n_examples)

        marks, origin = case_marks(artifact, case_data, truth)
        signal[label] = {"edges": marks, "from": origin}
        pending_faith: dict = {}  # method -> scores document whose CPR and CMD are still to be measured

        for method in method_list:
            prog.start(f"case {label}, {method}")  # a unit left by `continue` is finished by the next start
            path = out / "scores" / label / f"{method}.json"
            doc = produced.pop((label, method), None)  # made by a worker just now: no need to read it back
            try:
                if doc is None:
                    doc = _load_existing(path, graph, label, method, artifact.model_kind, n_ok, sampled, seed,
                                         model_sha256(artifact), protocol)
            except Exception:  # noqa: BLE001 - the data could not be loaded: the run below says why
                doc = None
            ran = doc is None
            if doc is None and (label, method) in remote_failures:  # failed on a worker just now
                failures.setdefault(label, {})[method] = remote_failures[(label, method)]
                continue
            if doc is None:
                measured_faith.pop((label, method), None)  # measured on another document
                measured_faith.pop((label, method, "row"), None)
                task = BenchTask(label, str(artifact.path), method, n_examples, sampled, seed, protocol)
                doc = _store_outcome(out, task, run_task(lambda t: discover_task(t, artifact, case_data), task),
                                     failures, echo)
                if doc is None:
                    continue
            try:
                res = score_against_truth(graph, doc, truth, no_signal=marks, include_no_signal=include_no_signal)
            except CbenchError as exc:
                echo(f"case {label}, {method}: not scored ({exc})")
                failures.setdefault(label, {})[method] = str(exc)
                continue
            row = None
            if method == "random":  # the row at chance: means over many draws, not one draw's figures
                row = measured_faith.pop((label, method, "row"), None) or random_row(
                    artifact, truth, marks, int(doc["method"]["hyperparameters"].get("seed", 0)), include_no_signal)
            auroc.setdefault(label, {})[method] = res.edge_auroc
            auroc_raw.setdefault(label, {})[method] = score_against_truth(
                graph, doc, truth, no_signal=marks, include_no_signal=include_no_signal, floor=False).edge_auroc
            sub_resolution.setdefault(label, {})[method] = res.n_truth_sub_resolution
            if is_stress(artifact.circuit):  # every labelled edge, per class (scoring/stress_tier.py)
                if method == "random":  # the mean over the same draws as the random row's overall figure
                    per_class.setdefault(label, {})[method] = per_class_raw.setdefault(label, {})[method] = \
                        row["per_class"]
                else:
                    per_class.setdefault(label, {})[method] = class_aurocs(graph, doc, artifact.circuit)
                    per_class_raw.setdefault(label, {})[method] = class_aurocs(graph, doc, artifact.circuit,
                                                                               floor=False)
                per_class_sub.setdefault(label, {})[method] = class_sub_resolution(graph, doc, artifact.circuit)
                stress_meta[label] = (artifact.circuit["mechanism"]["kind"], artifact.meta.get("predictions") or {})
            if faithfulness:  # CPR and CMD, every case (the report's columns; the stress tier's tables)
                faith.setdefault(label, {})[method] = measured_faith.get((label, method))
                if faith[label][method] is None:
                    pending_faith[method] = doc
            promoted.setdefault(label, {})[method] = res.edge_auroc_promoted
            auroc_mib.setdefault(label, {})[method] = row["mib"] if row else _mib_auroc(graph, doc, truth, method)
            if row:
                auroc[label][method], promoted[label][method] = row["auroc"], row["promoted"]
                auroc_raw[label][method] = auroc[label][method]
            node_auroc.setdefault(label, {})[method] = None if math.isnan(res.node_auroc) else res.node_auroc
            timings.setdefault(label, {})[method] = doc.get("runtime_s")
            # the panel's number is the table's; the random row's curve is the mean of its draws' curves
            fpr, tpr = (row["fpr"], row["tpr"]) if row else (res.edge_roc.fpr, res.edge_roc.tpr)
            rocs.setdefault(label, {})[method] = (fpr, tpr, auroc[label][method])
            if method == "random":  # kept, so that the report draws the same curve without redrawing
                random_roc[label] = [round(float(v), 6) for v in tpr[1:-1:2]]
            mib_v = auroc_mib[label][method]
            prog.done(f"case {label}, {method}: edge AUROC {auroc[label][method]:.4f} "
                 f"(promoted {promoted[label][method]:.4f}; MIB greedy-pruned "
                 f"{'–' if mib_v is None else format(mib_v, '.4f')})", worked=ran)
        if pending_faith:  # every method's circuits on this case in one batch, each distinct circuit once
            faith[label].update(faithfulness_figures_of(*case_data(), pending_faith, protocol))
    prog.close()
    order = sorted(auroc, key=_case_key)
    auroc = {c: auroc[c] for c in order}
    promoted = {c: promoted[c] for c in order}
    node_auroc = {c: node_auroc[c] for c in sorted(node_auroc, key=_case_key)}
    rocs = {c: rocs[c] for c in sorted(rocs, key=_case_key)}
    stats = _method_stats(auroc, method_list)
    timings = {c: timings[c] for c in sorted(timings, key=_case_key)}
    if not auroc:  # nothing written (a directory this run created and left empty is removed)
        remove_empty_directories(created)
        raise CbenchError("no case could be scored: " + "; ".join(
            f"{c}: {m if m != '*' else 'case'}: {msg}" for c, per in failures.items() for m, msg in per.items())[:2000])
    plots = _plots(out, auroc, rocs, method_list) if figures else []
    wall = time.perf_counter() - t0
    discrimination = by_tier(auroc, kinds, MAIN_CASES, method_list)  # per tier: do the real methods differ?
    table = _markdown(auroc, node_auroc, method_list, stats, wall, kinds, timings, promoted, signal)
    auroc_raw = {c: auroc_raw[c] for c in sorted(auroc_raw, key=_case_key)}
    sub_resolution = {c: sub_resolution[c] for c in sorted(sub_resolution, key=_case_key)}
    table += "\n" + resolution_markdown(auroc, auroc_raw, sub_resolution, method_list)
    both = side_by_side(auroc, auroc_mib, kinds, method_list)
    table += "\n" + side_by_side_markdown(both, method_list)
    if discrimination:
        table += "\n" + discrimination_markdown(discrimination)
    stress = _stress_block(auroc, per_class, stress_meta, method_list,
                           {c: faith[c] for c in stress_meta if c in faith})
    if stress:
        stress["per_class_unfloored"] = per_class_raw
        stress["per_class_sub_resolution"] = per_class_sub
    if stress:
        from cbench.scoring.stress_tier import markdown as stress_markdown

        table += "\n" + stress_markdown(stress["by_mechanism"], method_list, stress["predictions"],
                                        stress.get("faithfulness_by_mechanism"), stress.get("defeats"))
    (out / "table.md").write_text(table)
    doc = results_document("bench", {"auroc": auroc, "auroc_promoted": promoted, "granularity": "qkv",
                                     "auroc_mib": {c: auroc_mib[c] for c in sorted(auroc_mib, key=_case_key)},
                                     "auroc_by_tier": both,
                                     "auroc_unfloored": auroc_raw,
                                     "resolution": {"rule": RESOLUTION_RULE, "factor": RESOLUTION_FACTOR,
                                                    "truth_edges_sub_resolution": sub_resolution},
                                     "calibration": _calibration(auroc, method_list),
                                     "no_signal_edges": {c: signal[c] for c in sorted(signal, key=_case_key)},
                                     "no_signal": "included as positives" if include_no_signal
                                     else "left out of the edge ROC",
                                     "random": f"mean edge AUROC over {RANDOM_SEEDS} seeds",
                                     "node_auroc": node_auroc, "method_runtime_s": timings,
                                     "model_kind": {c: kinds[c] for c in sorted(kinds, key=_case_key)},
                                     "summary": stats["summary"], "mann_whitney_p": stats["p"], "a12": stats["a12"],
                                     "discrimination": discrimination,
                                     **({"stress": stress} if stress else {}),
                                     "published": {c: {"source": PUBLISHED[c][0], "edge_auroc": PUBLISHED[c][1]}
                                                   for c in auroc if c in PUBLISHED},
                                     "faithfulness": {c: faith[c] for c in sorted(faith, key=_case_key)},
                                     "random_roc": {c: random_roc[c] for c in sorted(random_roc, key=_case_key)},
                                     "failures": failures, "plots": plots, "wall_time_s": wall},
                           {"methods": method_list, "cases": case_list, "models": models, "n_examples": n_examples,
                            "sampled": sampled, "seed": seed, "include_no_signal": include_no_signal,
                            "protocol": protocol or "cbench"},
                           cases=list(auroc), runtime_s=wall)
    write_results(out / "results.json", doc)
    echo(table)
    echo(f"bench results written to {out} ({wall:.1f} s)")
    return doc


def _stress_block(auroc: dict, per_class: dict, stress_meta: dict, methods: list[str],
                  faith: dict | None = None) -> dict | None:
    """Per-class AUROC, the method x mechanism tables (edge AUROC, CPR, CMD), which methods each
    mechanism defeats, and the cards' predictions against the run."""
    if not stress_meta:
        return None
    from cbench.scoring.stress_tier import defeats, mechanism_table, predictions_held, robustness_table

    mechanisms = {c: kind for c, (kind, _p) in stress_meta.items()}
    faith = faith or {}
    by_metric = {m: {c: {meth: v.get(m) for meth, v in per.items()} for c, per in faith.items()}
                 for m in ("cpr", "cmd")}
    return {"per_class": per_class, "mechanisms": mechanisms,
            "by_mechanism": mechanism_table(auroc, mechanisms, methods),
            "robustness": robustness_table(auroc, mechanisms, methods),
            "faithfulness": faith,
            "faithfulness_by_mechanism": {m: mechanism_table(by_metric[m], mechanisms, methods) for m in by_metric},
            "defeats": defeats(auroc, by_metric["cpr"], mechanisms, methods),
            "predictions": {c: predictions_held(preds, auroc.get(c, {})) for c, (_k, preds) in stress_meta.items()}}
