"""``cbench bench --model M --data PAIRS``: every method on one real model, each scored by
faithfulness (CPR and CMD, MIB's integrals; a real model has no ground truth, so no AUROC), with
its wall time, into a results directory: ``results.json`` (``cbench/results/v1``, kind ``bench``),
``table.md`` and each method's edge scores (``scores/<method>.json``).

Separate from the case bench (:mod:`cbench.scoring.bench`): it takes a resolved
:class:`~cbench.api.real_models.RealModel`."""

from __future__ import annotations

import json
import time
from typing import Callable


_RUN: dict = {}  # the run's RealModel, set before the workers fork (they inherit it)


def _method_task(task: tuple) -> dict:
    """One method on the run's model: its scores document and faithfulness row (a module-level
    function, as the executors need)."""
    from cbench.api.real_models import run_model_discovery
    from cbench.discovery import METHODS
    from cbench.runtime.threads import use_cpu_threads
    from cbench.scoring.mib_neurons import document_faithfulness

    method, hp = task
    use_cpu_threads()  # the driver's CBENCH_THREADS in a worker too: the serial run's numbers
    rm, protocol = _RUN["rm"], _RUN["protocol"]
    sc, data = rm.scoring_inputs()
    run = run_model_discovery(rm, None, method, hp)
    t1 = time.perf_counter()
    # mib: MIB's metric for the task (the logit difference where the pairs carry answers) and NAP's
    # figures at MIB's neuron level; cbench: KL, as before
    faith, level = document_faithfulness(sc, data, run.document, protocol=protocol,
                                         construction=METHODS[method].construction)
    return {"document": run.document,
            "row": {"cpr": faith.cpr, "cmd": faith.cmd, "metric": faith.metric, "discovery_s": round(run.seconds, 3),
                    "faithfulness_s": round(time.perf_counter() - t1, 3), **({"level": level} if level != "edge" else {})}}


def run_model_bench(rm, methods: list[str], out_dir: str, echo: Callable[[str], None] = print,
                    params: dict | None = None, workers: int = 1, protocol: str = "cbench") -> dict:
    """Run ``methods`` on ``rm`` (a RealModel), measure CPR/CMD of each method's scores on its
    pairs, write the directory ``out_dir`` and return the results document. ``params``: method ->
    hyperparameters. ``workers`` > 1: the methods run on that many forked local processes, the
    longest first, with the numbers of a serial run (one torch thread each). ``protocol="mib"``:
    the methods as MIB's code runs them (nap, nap-ig, ifr, ugs) and CPR/CMD by MIB's metric for the
    task (the logit difference on pairs with answers; NAP at the neuron level); ``"cbench"``: by KL."""
    from cbench.api.discovering import discovery_hyperparameters
    from cbench.discovery import METHODS
    from cbench.errors import CbenchError
    from cbench.files.safe_io import make_output_directory
    from cbench.scoring.executor import make_executor
    from cbench.scoring.mib_protocol import check_protocol
    from cbench.scoring.report import results_document, write_results

    t0 = time.perf_counter()
    out = make_output_directory(out_dir, "--out")
    (out / "scores").mkdir(exist_ok=True)
    rm.scoring_inputs()  # loaded once here, before any fork
    check_protocol(protocol)
    # a method MIB's code runs as cbench does (eap, acdc, ...) takes no protocol of its own
    tasks = [(m, discovery_hyperparameters(m, (params or {}).get(m),
                                           protocol=protocol if METHODS[m].has_mib_variant else "cbench"))
             for m in methods]
    if workers > 1:
        tasks.sort(key=lambda t: -task_cost_of(t[0]))
    rows: dict = {}
    failures: list[str] = []

    def on_result(task, outcome, _done, _total):
        method = task[0]
        if not outcome.ok:
            failures.append(f"{method}: {outcome.error}")
            return
        write_results(out / "scores" / f"{method}.json", outcome.value["document"])
        r = rows[method] = outcome.value["row"]
        echo(f"{method}: CPR {r['cpr']:.3f}, CMD {r['cmd']:.3f} ({r['metric']}); discovery {r['discovery_s']:.2f} s")

    _RUN.update(rm=rm, protocol=protocol)
    executor = make_executor("local", workers=workers)
    try:
        executor.map(_method_task, tasks, on_result)
    finally:
        executor.close()
        _RUN.clear()
    if failures:
        raise CbenchError(f"{len(failures)} method(s) failed: " + "; ".join(failures[:3]))
    rows = {m: rows[m] for m in methods}  # the order asked for, whatever order they finished in
    inputs = {"model": {"path": rm.path, "case": rm.label, "kind": "pretrained", "dtype": rm.dtype},
              "methods": list(methods), "data": rm.data.data_block(), "protocol": protocol}
    doc = results_document("bench", {"faithfulness": rows}, inputs, case=rm.label, runtime_s=time.perf_counter() - t0)
    write_results(out / "results.json", doc)
    lines = [f"# {rm.label}: {rm.data.n_examples} pairs", "", "| method | CPR | CMD | metric | discovery s |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {m} | {r['cpr']:.3f} | {r['cmd']:.3f} | {r['metric']} | {r['discovery_s']:.2f} |" for m, r in rows.items()]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    return doc


def task_cost_of(method: str) -> float:
    """The relative CPU cost of a method (the case bench's weights), for ordering longest first."""
    from cbench.scoring.bench import _METHOD_COST

    return _METHOD_COST.get(method, 1.0)
