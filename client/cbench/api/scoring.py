"""``cbench.score`` and ``cbench.evaluate``: edge scores against a case's ground truth, and a
submission's faithfulness, as ``cbench score`` and ``cbench evaluate`` compute them.

Each step is written once here: the ``cbench score`` and ``cbench evaluate`` commands call
:func:`score_edges`, :func:`load_submission`, :func:`run_evaluation` and the document builders,
and print between them; the two public calls wrap the same steps in their results."""

from __future__ import annotations

import functools
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cbench.api import arguments as check
from cbench.api.results import EvaluationResult, ScoreResult
from cbench.errors import SchemaError, UsageError

ABLATIONS = ("resample", "mean", "zero")
CONSTRUCTIONS = ("auto", "top-n", "greedy")


def _nan(x) -> float:
    return math.nan if x is None else float(x)


def scoring_data(artifact, split: str, n_examples: int | None, sampled: bool, seed: int):
    """(the :class:`~cbench.scoring.task.ScoringCase`, its :class:`~cbench.tasks.data.TaskData`):
    the model as a graph and ``n_examples`` pairs of ``split`` (sampled from meta.json when ``sampled``)."""
    from cbench.scoring.task import case_from_artifact, pair_data

    if hasattr(artifact, "scoring_inputs"):  # a real model (api/real_models.RealModel): its own pairs
        return artifact.scoring_inputs(n_examples)
    case = case_from_artifact(artifact)
    return case, pair_data(case, split=split, n=n_examples, seed=seed, sampled=sampled)


def model_input(artifact) -> dict:
    """The ``model`` entry of a results document's inputs."""
    return {"path": str(artifact.path), "case": artifact.case, "kind": artifact.model_kind}


def scores_input(scores: Any, source: str) -> dict:
    """Where scores came from, for a results document: a file's path and sha256, else their label."""
    if isinstance(scores, (str, os.PathLike)):
        from cbench.scoring.report import file_input

        return file_input(scores)
    return {"path": source}


# ----------------------------------------------------------------------------- AUROC
@dataclass(frozen=True)
class TruthScore:
    """Edge scores against the ground truth (:func:`ground_truth_auroc`)."""

    result: Any  #: the :class:`~cbench.scoring.ground_truth.GroundTruthScore`
    no_signal: dict  #: ground-truth edges that cannot carry signal -> why
    origin: str  #: where those marks come from: ``circuit``, or how they were derived


def ground_truth_auroc(artifact, doc: dict, source: str, *, signed: bool | None = None,
                       include_no_signal: bool = False, data_fn: Callable | None = None) -> TruthScore:
    """Check ``doc`` against the model's graph and score it against the ground-truth circuit.
    ``data_fn()`` gives (ScoringCase, TaskData) for deriving the ground-truth edges that carry no
    signal when the circuit does not mark them (not called otherwise)."""
    from cbench.scoring.edge_signal import marked_no_signal, no_signal_edges
    from cbench.scoring.ground_truth import check_edge_scores, circuit_edge_names, score_against_truth

    check_edge_scores(doc, artifact.graph, case=artifact.case, d_model=artifact.config.get("d_model"), source=source)
    if not artifact.circuit:
        raise UsageError(f"case {artifact.case} has no ground-truth circuit to score against")
    truth = circuit_edge_names(artifact.graph, artifact.circuit)
    marks, origin = marked_no_signal(artifact.circuit), "circuit"
    if marks is None and not include_no_signal and data_fn is not None:
        sc, data = data_fn()
        marks, _origin = no_signal_edges(None, sc.runtime, data, truth)
        origin = f"derived from the model's behaviour on {data.n_examples} pairs ({data.split})"
    marks = marks or {}
    res = score_against_truth(artifact.graph, doc, truth, signed=signed, no_signal=marks,
                              include_no_signal=include_no_signal)
    return TruthScore(res, marks, origin)


def mib_ground_truth_auroc(artifact, doc: dict):
    """MIB's greedy-pruned edge AUROC (``protocol="mib"``) of a checked edge-scores document: a
    :class:`~cbench.scoring.mib_protocol.MibRoc`."""
    from cbench.scoring.faithfulness import edge_score_vector
    from cbench.scoring.ground_truth import circuit_edge_names
    from cbench.scoring.mib_protocol import mib_auroc

    truth = circuit_edge_names(artifact.graph, artifact.circuit)
    return mib_auroc(artifact.graph, edge_score_vector(artifact.graph, doc), truth)


def auroc_results(truth: TruthScore, mib, curves: bool = True) -> dict:
    """The ``auroc`` results of a results document, with MIB's AUROC under ``mib`` when measured."""
    body = truth.result.to_dict(curves=curves)
    return body if mib is None else dict(body, mib=mib.to_dict())


def auroc_document(artifact, doc: dict, truth: TruthScore, mib, scores_in: dict, t0: float | None = None) -> dict:
    """The ``cbench/results/v1`` document of kind ``auroc`` (``cbench score --out``)."""
    from cbench.scoring.report import results_document

    return results_document("auroc", auroc_results(truth, mib),
                            {"scores": scores_in, "model": model_input(artifact), "method": doc.get("method")},
                            case=artifact.case, runtime_s=None if t0 is None else time.perf_counter() - t0)


def _score_result(artifact, doc: dict, res, rdoc: dict, mib=None) -> ScoreResult:
    return ScoreResult(
        case=artifact.case, method=str((doc.get("method") or {}).get("name", "?")),
        edge_auroc=float(res.edge_auroc), edge_auroc_promoted=float(res.edge_auroc_promoted),
        node_auroc=float(res.node_auroc), edge_precision=_nan(res.edge_pr.precision),
        edge_recall=_nan(res.edge_pr.recall), node_precision=_nan(res.node_pr.precision),
        node_recall=_nan(res.node_pr.recall), n_edges=int(res.n_edges), n_true_edges=int(res.n_true_edges),
        no_signal_edges=tuple(res.no_signal_edges), ground_truth=res, document=rdoc,
        mib_auroc=None if mib is None else _nan(mib.auroc))


def score_edges(artifact, scores: Any, *, signed: bool | None, include_no_signal: bool, protocol: str, split: str,
                n_examples: int | None, sampled: bool, seed: int) -> tuple[dict, str, TruthScore, Any]:
    """``cbench score``'s figures: (the edge-scores document of ``scores``, its label, the scores
    against the ground truth, MIB's AUROC under ``protocol="mib"`` else None)."""
    from cbench.api.inputs import scores_document

    doc, source = scores_document(scores, artifact)
    truth = ground_truth_auroc(artifact, doc, source, signed=signed, include_no_signal=include_no_signal,
                               data_fn=lambda: scoring_data(artifact, split, n_examples, sampled, seed))
    mib = mib_ground_truth_auroc(artifact, doc) if protocol == "mib" else None
    return doc, source, truth, mib


def _check_data_arguments(split: Any, n_examples: Any, sampled: Any, seed: Any) -> None:
    """The pairs a scoring call draws: as ``cbench score``'s and ``cbench evaluate``'s options."""
    check.choice("split", split, check.SPLITS)
    check.n_examples("n_examples", n_examples, low=2, none_ok=True)
    check.flag("sampled", sampled)
    check.seed("seed", seed)


def score(case: Any, scores: Any, *, signed: bool | None = None, include_no_signal: bool = False,
          protocol: str = "cbench", split: str = "validation", n_examples: int | None = 200, sampled: bool = False,
          seed: int = 0, revision: str | None = None, endpoint: str | None = None,
          hub: str | os.PathLike | None = None) -> ScoreResult:
    """Edge- and node-level AUROC of ``scores`` against ``case``'s ground-truth circuit, at q/k/v
    granularity and promoted to heads as InterpBench does (``cbench score``).

    ``scores``: a :class:`~cbench.api.results.DiscoveryResult`, an edge-scores document or the path
    of an edge-scores or MIB graph file. ``signed``: rank by signed score or by ``|score|``
    (default: by the method). Ground-truth edges that cannot carry signal (marked in the
    circuit, else derived from the model's behaviour on ``n_examples`` pairs of ``split``) are left
    out unless ``include_no_signal``. ``protocol``: ``"cbench"`` (default), or ``"mib"`` to also
    measure MIB's greedy-pruned edge AUROC (``ScoreResult.mib_auroc``; docs/mib-parity.md), as
    ``cbench score --protocol mib``.

    >>> cbench.score("case-3", found).edge_auroc                      # doctest: +SKIP
    """
    from cbench.api.inputs import check_protocol, resolve_case

    check_protocol(protocol)
    _check_data_arguments(split, n_examples, sampled, seed)
    if signed is not None:
        check.flag("signed", signed)
    check.flag("include_no_signal", include_no_signal)
    t0 = time.perf_counter()
    artifact = resolve_case(case, revision=revision, endpoint=endpoint, hub=hub).artifact
    doc, source, truth, mib = score_edges(artifact, scores, signed=signed, include_no_signal=include_no_signal,
                                          protocol=protocol, split=split, n_examples=n_examples, sampled=sampled,
                                          seed=seed)
    rdoc = auroc_document(artifact, doc, truth, mib, scores_input(scores, source), t0)
    return _score_result(artifact, doc, truth.result, rdoc, mib)


# ----------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class Submission:
    """A submission read, checked against its schema and paired with its case (:func:`load_submission`)."""

    doc: dict  #: an edge-scores or circuits-at-sizes document
    source: str  #: its label in messages (a file's path)
    kind: str  #: ``edge-scores`` or ``circuits-at-sizes``
    artifact: Any  #: the case's ModelArtifact
    given: Any  #: what the caller passed (a path, a document, a DiscoveryResult)


def load_submission(submission: Any, case: Any = None, *, case_option: str = "case=", revision: str | None = None,
                    endpoint: str | None = None, hub: str | os.PathLike | None = None,
                    model: Any = None) -> Submission:
    """Read ``submission`` (a path, a document or a DiscoveryResult), check it against its schema
    and resolve its case: ``case``, else the model the document names. A MIB/EAP-IG graph file
    needs ``case`` for cbench's metadata. ``case_option`` is how messages tell the caller to pass
    a case (``case=`` or ``--case``)."""
    import cbench.schemas as validation
    from cbench.api.inputs import resolve_case, scores_document
    from cbench.api.results import DiscoveryResult

    def resolve(spec):
        if model is not None:  # a real model (api/real_models.RealModel) stands for the case
            return model
        return resolve_case(spec, revision=revision, endpoint=endpoint, hub=hub).artifact

    if case is None and isinstance(submission, DiscoveryResult):
        case = submission.model_path
    artifact = None
    if isinstance(submission, (str, os.PathLike)):
        from cbench.artifacts.mib_format import is_mib_graph, read_graph_json

        doc, source = read_graph_json(submission), str(submission)
        if is_mib_graph(doc):  # MIB/EAP-IG's own file: the case gives the cbench metadata
            if case is None and model is None:
                raise UsageError(f"{source} is a MIB/EAP-IG graph file without cbench's metadata; pass {case_option} "
                                 "(a model artifact directory or case name)")
            artifact = resolve(case)
            doc, source = scores_document(submission, artifact)
    else:
        doc, source = scores_document(submission, None)
    kind = "circuits-at-sizes" if isinstance(doc, dict) and doc.get("schema") == "cbench/circuits-at-sizes/v1" \
        else "edge-scores"
    violations = validation.validate(doc, kind)
    if violations:
        v = violations[0]
        more = f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""
        raise SchemaError(f"{source}: {v.path}: {v.message}{more}")
    if artifact is None and model is not None:
        artifact = model
    if artifact is None:
        if case is None:
            case = _case_of_model(doc.get("model") or {})
            if case is None:
                raise UsageError(f"{source} names no model repo; pass {case_option} (an artifact directory or case name)")
        artifact = resolve(case)
    if str(doc.get("case")) != artifact.case:
        raise UsageError(f"{source} is for case {doc.get('case')!r}, not case {artifact.case!r}")
    return Submission(doc, source, kind, artifact, submission)


def _case_of_model(model) -> str | None:
    repo, rev = model.get("repo"), model.get("revision")
    if not repo:
        return None
    return f"{repo}@{rev}" if rev else str(repo)


def metric_note(used: str, asked: str | None, protocol: str) -> str | None:
    """Under ``protocol="mib"`` without a metric asked for: which metric MIB's procedure scored
    with, and why (None otherwise)."""
    if protocol != "mib" or asked is not None:
        return None
    from cbench.scoring.mib_protocol import METRIC_NOTES

    return METRIC_NOTES.get(used)


@dataclass(frozen=True)
class SubmissionFaithfulness:
    """CPR/CMD of a submission (:func:`submission_faithfulness`)."""

    faithfulness: Any  #: FaithfulnessResult (edge scores) or FaithfulnessCurve (circuits at sizes)
    cpr: float | None
    cmd: float | None
    construction: str | None  #: edge scores: how circuits were built (``top-n`` or ``greedy``)
    level: str | None  #: edge scores: ``edge``, or ``neuron`` (MIB's NAP documents under protocol mib)
    selection: str | None  #: circuits at sizes: ``signed``, ``absolute`` or None (not stated)
    metric: str  #: the metric f was measured with
    note: str | None  #: :func:`metric_note`
    results: dict  #: the results document's ``faithfulness`` entry


def submission_faithfulness(sub: Submission, data_fn: Callable, *, ablation: str, metric: str | None,
                            construction: str, protocol: str) -> SubmissionFaithfulness:
    """Faithfulness of an edge-scores document (CPR of signed-score circuits, CMD of absolute-score
    ones over MIB's sizes) or of each circuit of a circuits-at-sizes document, on ``data_fn()``'s pairs."""
    doc, artifact = sub.doc, sub.artifact
    if sub.kind == "edge-scores":
        from cbench.scoring.mib_neurons import document_faithfulness

        if construction == "auto":
            from cbench.discovery import METHODS

            spec = METHODS.get(str((doc.get("method") or {}).get("name")))
            construction = spec.construction if spec is not None else "top-n"
        sc, data = data_fn()
        faith, level = document_faithfulness(sc, data, doc, protocol=protocol, ablation=ablation, metric=metric,
                                             construction=construction)
        note = metric_note(faith.metric, metric, protocol)
        results = dict(faith.to_dict(), construction=construction, protocol=protocol, level=level,
                       **({"metric_note": note} if note else {}))
        return SubmissionFaithfulness(faith, faith.cpr, faith.cmd, construction, level, None, faith.metric, note,
                                      results)
    import numpy as np

    import cbench.schemas as validation
    from cbench.scoring.faithfulness import faithfulness_of_circuits
    from cbench.scoring.mib_protocol import mib_metric

    problems = validation.check_against_graph(doc, artifact.graph, case=artifact.case, kind="circuits-at-sizes")
    if problems:
        raise SchemaError(f"{sub.source}: {problems[0].path}: {problems[0].message}")
    circuits = sorted(doc["circuits"], key=lambda c: c["fraction"])
    grid = [float(c["fraction"]) for c in circuits]
    masks = np.stack([artifact.graph.mask(c["edges"]) for c in circuits])
    if protocol == "mib":  # MIB's evaluate_graph prunes every circuit before running it
        masks = np.stack([artifact.graph.prune_dangling(m) for m in masks])
    sc, data = data_fn()
    selection = doc.get("selection")
    curve = faithfulness_of_circuits(sc, data, masks, grid, ablation=ablation, metric=metric,
                                     absolute=selection == "absolute", protocol=protocol)
    used = metric or (mib_metric(data) if protocol == "mib" else None) or (
        "kl" if sc.task_type == "categorical" else "l2")
    note = metric_note(used, metric, protocol)
    cpr = curve.area if selection != "absolute" else None
    cmd = curve.distance if selection != "signed" else None
    results = {"curve": curve.to_dict(), "ablation": ablation, "selection": selection, "cpr": cpr, "cmd": cmd,
               "metric": used, **({"metric_note": note} if note else {})}
    return SubmissionFaithfulness(curve, cpr, cmd, None, None, selection, used, note, results)


@dataclass(frozen=True)
class Evaluation:
    """Every figure of one evaluation (:func:`run_evaluation`)."""

    submission: Submission
    truth: TruthScore | None  #: None for circuits-at-sizes documents and cases without a ground truth
    mib: Any  #: MIB's AUROC (a MibRoc) under protocol mib, else None
    faithfulness: SubmissionFaithfulness
    n_examples: int
    document: dict  #: the ``cbench/results/v1`` document of kind ``evaluation``


def run_evaluation(sub: Submission, *, ablation: str, metric: str | None, construction: str, protocol: str,
                   split: str, n_examples: int | None, sampled: bool, seed: int, t0: float | None = None,
                   on_auroc: Callable[[TruthScore, Any], None] | None = None) -> Evaluation:
    """Score a loaded submission as ``cbench evaluate`` does: edge scores against the ground truth
    (when the case has one; ``on_auroc(truth, mib)`` is called with it before the faithfulness is
    measured), then faithfulness; the pairs are drawn once."""
    from cbench.scoring.report import results_document

    t0 = time.perf_counter() if t0 is None else t0
    artifact = sub.artifact
    data_fn = functools.cache(lambda: scoring_data(artifact, split, n_examples, sampled, seed))
    results: dict = {}
    truth = mib = None
    if sub.kind == "edge-scores":
        if artifact.circuit:
            truth = ground_truth_auroc(artifact, sub.doc, sub.source, data_fn=data_fn)
            mib = mib_ground_truth_auroc(artifact, sub.doc) if protocol == "mib" else None
            results["auroc"] = auroc_results(truth, mib, curves=False)
            if on_auroc is not None:
                on_auroc(truth, mib)
        else:
            from cbench.scoring.ground_truth import check_edge_scores

            check_edge_scores(sub.doc, artifact.graph, case=artifact.case, source=sub.source)
    faith = submission_faithfulness(sub, data_fn, ablation=ablation, metric=metric, construction=construction,
                                    protocol=protocol)
    results["faithfulness"] = faith.results
    data = data_fn()[1]
    inputs = {"submission": scores_input(sub.given, sub.source), "model": model_input(artifact),
              "method": sub.doc.get("method"), "data": {"split": split, "n_examples": data.n_examples}}
    rdoc = results_document("evaluation", results, inputs, case=artifact.case, runtime_s=time.perf_counter() - t0)
    return Evaluation(sub, truth, mib, faith, int(data.n_examples), rdoc)


def evaluate(submission: Any, case: Any = None, *, ablation: str = "resample", metric: str | None = None,
             construction: str = "auto", protocol: str = "cbench", split: str = "validation",
             n_examples: int | None = 200, sampled: bool = False, seed: int = 0, revision: str | None = None,
             endpoint: str | None = None, hub: str | os.PathLike | None = None) -> EvaluationResult:
    """Score a submission as ``cbench evaluate`` does: for edge scores, the AUROC against the
    ground truth (when the case has one) and faithfulness, CPR (signed-score circuits) and CMD
    (absolute-score circuits) over MIB's circuit sizes; for a ``circuits-at-sizes`` document, the
    faithfulness of each given circuit.

    ``submission``: a :class:`~cbench.api.results.DiscoveryResult`, a document (dict) or a file
    path. ``case``: as for :func:`cbench.discover`; default the model the submission names.
    ``ablation``: how edges outside a circuit are replaced (``resample``, ``mean``, ``zero``);
    ``construction``: ``top-n``, ``greedy`` or ``auto`` (what the method needs). ``protocol``:
    ``"cbench"`` (default: the papers' procedure) or ``"mib"`` (also MIB's reference code's, as
    ``cbench evaluate --protocol mib``: its greedy-pruned edge AUROC in ``auroc.mib_auroc``,
    pruned ``int(k*n)``-edge CPR/CMD circuits, NAP documents with neuron scores at the neuron
    level, and MIB's metric per task unless ``metric`` is given; docs/mib-parity.md).

    >>> cbench.evaluate(found, n_examples=100).cpr                    # doctest: +SKIP
    >>> cbench.evaluate(found, protocol="mib").cmd                    # doctest: +SKIP
    """
    from cbench.api.inputs import check_protocol

    t0 = time.perf_counter()
    if ablation not in ABLATIONS:
        raise UsageError(f"ablation must be resample, mean or zero (got {ablation!r})")
    if construction not in CONSTRUCTIONS:
        raise UsageError(f"construction must be auto, top-n or greedy (got {construction!r})")
    check_protocol(protocol)
    _check_data_arguments(split, n_examples, sampled, seed)
    sub = load_submission(submission, case, revision=revision, endpoint=endpoint, hub=hub)
    ev = run_evaluation(sub, ablation=ablation, metric=metric, construction=construction, protocol=protocol,
                        split=split, n_examples=n_examples, sampled=sampled, seed=seed, t0=t0)
    artifact, doc = sub.artifact, sub.doc
    auroc = None
    if ev.truth is not None:
        auroc = _score_result(artifact, doc, ev.truth.result,
                              auroc_document(artifact, doc, ev.truth, ev.mib, scores_input(submission, sub.source)),
                              ev.mib)
    faith = ev.faithfulness
    finite = lambda x: None if x is None or not math.isfinite(x) else float(x)
    return EvaluationResult(case=artifact.case, method=(doc.get("method") or {}).get("name"), kind=sub.kind,
                            cpr=finite(faith.cpr), cmd=finite(faith.cmd), ablation=ablation,
                            construction=faith.construction, n_examples=ev.n_examples, auroc=auroc,
                            faithfulness=faith.faithfulness, document=ev.document, protocol=protocol)
