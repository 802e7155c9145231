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


def run_model_bench(rm, methods: list[str], out_dir: str, echo: Callable[[str], None] = print,
                    params: dict | None = None) -> dict:
    """Run ``methods`` on ``rm`` (a RealModel), measure CPR/CMD of each method's scores on its
    pairs, write the directory ``out_dir`` and return the results document. ``params``: method ->
    hyperparameters."""
    from cbench.api.discovering import discovery_hyperparameters
    from cbench.api.real_models import run_model_discovery
    from cbench.discovery import METHODS
    from cbench.files.safe_io import make_output_directory
    from cbench.scoring.mib_neurons import document_faithfulness
    from cbench.scoring.report import results_document, write_results

    t0 = time.perf_counter()
    out = make_output_directory(out_dir, "--out")
    (out / "scores").mkdir(exist_ok=True)
    sc, data = rm.scoring_inputs()
    rows: dict = {}
    for method in methods:
        hp = discovery_hyperparameters(method, (params or {}).get(method))
        run = run_model_discovery(rm, None, method, hp)
        write_results(out / "scores" / f"{method}.json", run.document)
        t1 = time.perf_counter()
        faith, _level = document_faithfulness(sc, data, run.document, construction=METHODS[method].construction)
        rows[method] = {"cpr": faith.cpr, "cmd": faith.cmd, "metric": faith.metric,
                        "discovery_s": round(run.seconds, 3), "faithfulness_s": round(time.perf_counter() - t1, 3)}
        echo(f"{method}: CPR {faith.cpr:.3f}, CMD {faith.cmd:.3f} ({faith.metric}); discovery {run.seconds:.2f} s")
    inputs = {"model": {"path": rm.path, "case": rm.label, "kind": "pretrained", "dtype": rm.dtype},
              "methods": list(methods), "data": rm.data.data_block()}
    doc = results_document("bench", {"faithfulness": rows}, inputs, case=rm.label, runtime_s=time.perf_counter() - t0)
    write_results(out / "results.json", doc)
    lines = [f"# {rm.label}: {rm.data.n_examples} pairs", "", "| method | CPR | CMD | metric | discovery s |",
             "| --- | --- | --- | --- | --- |"]
    lines += [f"| {m} | {r['cpr']:.3f} | {r['cmd']:.3f} | {r['metric']} | {r['discovery_s']:.2f} |" for m, r in rows.items()]
    (out / "table.md").write_text("\n".join(lines) + "\n")
    json.dumps(doc)  # (the document is plain JSON)
    return doc
