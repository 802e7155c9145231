"""``cbench.score`` and ``cbench.evaluate``: edge scores against a case's ground truth, and a
submission's faithfulness, as ``cbench score`` and ``cbench evaluate`` compute them."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

from cbench.api.results import EvaluationResult, ScoreResult
from cbench.errors import SchemaError, UsageError


def _nan(x) -> float:
    return math.nan if x is None else float(x)


def _pair_data(artifact, split: str, n_examples: int | None, sampled: bool, seed: int):
    from cbench.scoring.task import case_from_artifact, pair_data

    case = case_from_artifact(artifact)
    return case, pair_data(case, split=split, n=n_examples, seed=seed, sampled=sampled)


def _ground_truth_score(artifact, doc: dict, source: str, signed: bool | None, include_no_signal: bool,
                        data_fn: Callable):
    from cbench.scoring.edge_signal import marked_no_signal, no_signal_edges
    from cbench.scoring.ground_truth import (
        check_edge_scores,
        circuit_edge_names,
        score_against_truth,
    )

    check_edge_scores(doc, artifact.graph, case=artifact.case, d_model=artifact.config.get("d_model"), source=source)
    if not artifact.circuit:
        raise UsageError(f"case {artifact.case} has no ground-truth circuit to score against")
    truth = circuit_edge_names(artifact.graph, artifact.circuit)
    marks = marked_no_signal(artifact.circuit)
    if marks is None and not include_no_signal:  # not marked in the circuit: derived from the model's behaviour
        sc, data = data_fn()
        marks, _origin = no_signal_edges(None, sc.runtime, data, truth)
    return score_against_truth(artifact.graph, doc, truth, signed=signed, no_signal=marks or {},
                               include_no_signal=include_no_signal)


def _score_result(artifact, doc: dict, res, rdoc: dict) -> ScoreResult:
    return ScoreResult(
        case=artifact.case, method=str((doc.get("method") or {}).get("name", "?")),
        edge_auroc=float(res.edge_auroc), edge_auroc_promoted=float(res.edge_auroc_promoted),
        node_auroc=float(res.node_auroc), edge_precision=_nan(res.edge_pr.precision),
        edge_recall=_nan(res.edge_pr.recall), node_precision=_nan(res.node_pr.precision),
        node_recall=_nan(res.node_pr.recall), n_edges=int(res.n_edges), n_true_edges=int(res.n_true_edges),
        no_signal_edges=tuple(res.no_signal_edges), ground_truth=res, document=rdoc)


def score(case: Any, scores: Any, *, signed: bool | None = None, include_no_signal: bool = False,
          split: str = "validation", n_examples: int | None = 200, sampled: bool = False, seed: int = 0,
          revision: str | None = None, endpoint: str | None = None,
          hub: str | os.PathLike | None = None) -> ScoreResult:
    """Edge- and node-level AUROC of ``scores`` against ``case``'s ground-truth circuit, at q/k/v
    granularity and promoted to heads as InterpBench does (``cbench score``).

    ``scores``: a :class:`~cbench.api.results.DiscoveryResult`, an edge-scores document or the path
    of an edge-scores or MIB graph file. ``signed``: rank by signed score or by ``|score|``
    (default: by the method). Ground-truth edges that cannot carry signal (marked in the
    circuit, else derived from the model's behaviour on ``n_examples`` pairs of ``split``) are left
    out unless ``include_no_signal``.

    >>> cbench.score("case-3", found).edge_auroc                      # doctest: +SKIP
    """
    from cbench.api.inputs import resolve_case, scores_document
    from cbench.scoring.report import results_document

    t0 = time.perf_counter()
    resolved = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub)
    artifact = resolved.artifact
    doc, source = scores_document(scores, artifact)
    res = _ground_truth_score(artifact, doc, source, signed, include_no_signal,
                              lambda: _pair_data(artifact, split, n_examples, sampled, seed))
    inputs = {"scores": {"path": source}, "model": _model_input(artifact), "method": doc.get("method")}
    rdoc = results_document("auroc", res.to_dict(), inputs, case=artifact.case, runtime_s=time.perf_counter() - t0)
    return _score_result(artifact, doc, res, rdoc)


def _model_input(artifact) -> dict:
    return {"path": str(artifact.path), "case": artifact.case, "kind": artifact.model_kind}


def evaluate(submission: Any, case: Any = None, *, ablation: str = "resample", metric: str | None = None,
             construction: str = "auto", split: str = "validation", n_examples: int | None = 200,
             sampled: bool = False, seed: int = 0, revision: str | None = None, endpoint: str | None = None,
             hub: str | os.PathLike | None = None) -> EvaluationResult:
    """Score a submission as ``cbench evaluate`` does: for edge scores, the AUROC against the
    ground truth (when the case has one) and faithfulness, CPR (signed-score circuits) and CMD
    (absolute-score circuits) over MIB's circuit sizes; for a ``circuits-at-sizes`` document, the
    faithfulness of each given circuit.

    ``submission``: a :class:`~cbench.api.results.DiscoveryResult`, a document (dict) or a file
    path. ``case``: as for :func:`cbench.discover`; default the model the submission names.
    ``ablation``: how edges outside a circuit are replaced (``resample``, ``mean``, ``zero``);
    ``construction``: ``top-n``, ``greedy`` or ``auto`` (what the method needs).

    >>> cbench.evaluate(found, n_examples=100).cpr                    # doctest: +SKIP
    """
    import numpy as np

    import cbench.schemas as validation
    from cbench.api.inputs import resolve_case, scores_document
    from cbench.api.results import DiscoveryResult
    from cbench.scoring.report import results_document

    t0 = time.perf_counter()
    if ablation not in ("resample", "mean", "zero"):
        raise UsageError(f"ablation must be resample, mean or zero (got {ablation!r})")
    if construction not in ("auto", "top-n", "greedy"):
        raise UsageError(f"construction must be auto, top-n or greedy (got {construction!r})")
    if case is None and isinstance(submission, DiscoveryResult):
        case = submission.model_path
    resolved = None
    if isinstance(submission, (str, os.PathLike)):
        from cbench.artifacts.mib_format import is_mib_graph, read_graph_json

        raw = read_graph_json(str(submission))
        if is_mib_graph(raw):
            if case is None:
                raise UsageError(f"{submission} is a MIB/EAP-IG graph file without cbench's metadata; pass case=")
            resolved = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub)
            doc, source = scores_document(submission, resolved.artifact)
        else:
            doc, source = raw, str(submission)
    else:
        doc, source = scores_document(submission, None)
    kind = "circuits-at-sizes" if isinstance(doc, dict) and doc.get("schema") == "cbench/circuits-at-sizes/v1" \
        else "edge-scores"
    violations = validation.validate(doc, kind)
    if violations:
        v = violations[0]
        more = f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""
        raise SchemaError(f"{source}: {v.path}: {v.message}{more}")
    if resolved is None:
        if case is None:
            case = _case_of_model(doc.get("model") or {})
            if case is None:
                raise UsageError(f"{source} names no model repo; pass case= (a case name or an artifact directory)")
        resolved = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub)
    artifact = resolved.artifact
    if str(doc.get("case")) != artifact.case:
        raise UsageError(f"{source} is for case {doc.get('case')!r}, not case {artifact.case!r}")
    sc, data = _pair_data(artifact, split, n_examples, sampled, seed)
    method = (doc.get("method") or {}).get("name")
    results: dict = {}
    auroc = None
    if kind == "edge-scores":
        from cbench.scoring.faithfulness import edge_score_vector, evaluate_faithfulness

        if artifact.circuit:
            res = _ground_truth_score(artifact, doc, source, None, False, lambda: (sc, data))
            results["auroc"] = res.to_dict(curves=False)
            adoc = results_document("auroc", res.to_dict(), {"scores": {"path": source}, "model": _model_input(artifact),
                                                             "method": doc.get("method")}, case=artifact.case)
            auroc = _score_result(artifact, doc, res, adoc)
        else:
            from cbench.scoring.ground_truth import check_edge_scores

            check_edge_scores(doc, artifact.graph, case=artifact.case, source=source)
        if construction == "auto":
            from cbench.discovery import METHODS

            spec = METHODS.get(str(method))
            construction = spec.construction if spec is not None else "top-n"
        faith = evaluate_faithfulness(sc, data, edge_score_vector(artifact.graph, doc), ablation=ablation,
                                      metric=metric, construction=construction)
        results["faithfulness"] = dict(faith.to_dict(), construction=construction)
        cpr, cmd, faithfulness = faith.cpr, faith.cmd, faith
    else:
        from cbench.scoring.faithfulness import faithfulness_of_circuits

        problems = validation.check_against_graph(doc, artifact.graph, case=artifact.case, kind="circuits-at-sizes")
        if problems:
            raise SchemaError(f"{source}: {problems[0].path}: {problems[0].message}")
        circuits = sorted(doc["circuits"], key=lambda c: c["fraction"])
        grid = [float(c["fraction"]) for c in circuits]
        masks = np.stack([artifact.graph.mask(c["edges"]) for c in circuits])
        selection = doc.get("selection")
        curve = faithfulness_of_circuits(sc, data, masks, grid, ablation=ablation, metric=metric,
                                         absolute=selection == "absolute")
        cpr = curve.area if selection != "absolute" else None
        cmd = curve.distance if selection != "signed" else None
        results["faithfulness"] = {"curve": curve.to_dict(), "ablation": ablation, "selection": selection,
                                   "cpr": cpr, "cmd": cmd}
        construction, faithfulness = None, curve
    inputs = {"submission": {"path": source}, "model": _model_input(artifact), "method": doc.get("method"),
              "data": {"split": split, "n_examples": data.n_examples}}
    rdoc = results_document("evaluation", results, inputs, case=artifact.case, runtime_s=time.perf_counter() - t0)
    finite = lambda x: None if x is None or not math.isfinite(x) else float(x)
    return EvaluationResult(case=artifact.case, method=method, kind=kind, cpr=finite(cpr), cmd=finite(cmd),
                            ablation=ablation, construction=construction, n_examples=int(data.n_examples),
                            auroc=auroc, faithfulness=faithfulness, document=rdoc)


def _case_of_model(model) -> str | None:
    repo, rev = model.get("repo"), model.get("revision")
    if not repo:
        return None
    return f"{repo}@{rev}" if rev else str(repo)
