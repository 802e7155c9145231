"""The typed results of the Python API: one frozen dataclass per call.

Each keeps the figures a user asks for as plain attributes, the full object the scoring code
computed (``ground_truth``, ``faithfulness``, ``report``) and, where the command line writes one,
the JSON ``document`` (the same ``cbench/results/v1`` or ``cbench/edge-scores/v1`` document that
``--json`` prints). Frozen means the attributes cannot be reassigned; the documents are plain
dicts, copied where they are handed out.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # names for the annotations only; nothing heavy is imported at run time
    from cbench.graph.graph import Graph
    from cbench.schemas.json_files import FileReport
    from cbench.scoring.faithfulness import FaithfulnessCurve, FaithfulnessResult
    from cbench.scoring.ground_truth import GroundTruthScore
    from cbench.verify.gates import Gate, VerifyReport


REPR_LIMIT = 480  #: a result prints as one short paragraph; the full data stays in its fields


def _summary(name: str, text: str) -> str:
    """``Name(text)``, cut to :data:`REPR_LIMIT` characters (printing a result printed 13,000-17,000)."""
    body = " ".join(str(text).split())
    limit = REPR_LIMIT - len(name) - 2
    if len(body) > limit:
        body = body[:limit - 3].rstrip(" ,;") + "..."
    return f"{name}({body})"


def _fmt(value, spec: str = ".3f") -> str:
    return "n/a" if value is None or (isinstance(value, float) and value != value) else format(value, spec)


def _short_path(path) -> str:
    text = str(path)
    return text if len(text) <= 60 else "..." + text[-57:]


def _write_json(path: str | os.PathLike, doc: Mapping) -> Path:
    from cbench.files.safe_io import write_output

    return write_output(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))


@dataclass(frozen=True, repr=False)
class PullResult:
    """A verified snapshot in the local cache (:func:`cbench.pull`)."""

    repo_id: str  #: e.g. ``cbench/case-3``
    repo_type: str  #: ``model`` or ``dataset``
    revision: str  #: the version tag (``v2.0.0``), or the commit when the snapshot has no tag
    commit: str  #: the 40-hex commit sha
    path: Path  #: the snapshot directory (a model artifact directory for a model)
    files: int
    size: int  #: bytes
    from_cache: bool  #: True when nothing had to be downloaded
    case: str | None = None  #: the case id of a model (``meta.json``), None for a dataset

    def to_dict(self) -> dict:
        return {"repo": self.repo_id, "type": self.repo_type, "revision": self.revision, "commit": self.commit,
                "path": str(self.path), "files": self.files, "size": self.size, "from_cache": self.from_cache,
                "case": self.case}

    def __repr__(self) -> str:
        where = "from the cache" if self.from_cache else "downloaded"
        return _summary("PullResult", f"{self.repo_id} {self.revision} ({self.commit[:7]}), {self.repo_type}, "
                                      f"{self.files} files, {self.size:,} bytes, {where}, path={_short_path(self.path)}")


@dataclass(frozen=True, repr=False)
class DiscoveryResult:
    """A discovery method's edge scores on a case (:func:`cbench.discover`).

    (The method-level :class:`cbench.discovery.DiscoveryResult`, which a method returns, holds the
    same scores as arrays; this one adds the case, the model it came from and the edge-scores
    document.)"""

    case: str
    method: str
    edge_scores: Mapping[str, float]  #: every edge of ``graph`` -> its score (its sign as the method defines it: docs/methods.md)
    circuit: tuple[str, ...]  #: the edges the method puts in its circuit (``in_graph``)
    graph: Graph
    metric: str
    hyperparameters: Mapping[str, Any]
    data: Mapping[str, Any]  #: split, number of pairs, dataset and revision
    runtime_s: float  #: the method's own time, after the data and ablations were prepared
    model: Mapping[str, Any]  #: ``{"repo", "revision", "kind"}`` (repo None for a local directory)
    model_path: Path  #: the model artifact directory the method ran on
    document: Mapping[str, Any]  #: the ``cbench/edge-scores/v1`` document (what ``cbench discover --out`` writes)

    def top(self, k: int = 10) -> list[tuple[str, float]]:
        """The ``k`` edges with the largest ``|score|``, largest first."""
        return sorted(self.edge_scores.items(), key=lambda kv: -abs(kv[1]))[:k]

    def write(self, path: str | os.PathLike) -> Path:
        """Write the edge-scores document to ``path`` (atomically); ``cbench score`` reads it."""
        return _write_json(path, self.document)

    def __repr__(self) -> str:
        top = ", ".join(f"{e} {v:.3g}" for e, v in self.top(3))
        return _summary("DiscoveryResult", f"case {self.case}, {self.method}: {len(self.edge_scores)} edges scored, "
                                           f"a circuit of {len(self.circuit)}, metric {self.metric}, "
                                           f"{self.data.get('n_examples', '?')} pairs, {self.runtime_s:.2f} s; "
                                           f"top |score|: {top}")


@dataclass(frozen=True, repr=False)
class ScoreResult:
    """Edge and node AUROC of edge scores against a case's ground-truth circuit (:func:`cbench.score`)."""

    case: str
    method: str
    edge_auroc: float  #: at q/k/v granularity (head level when the ground truth is)
    edge_auroc_promoted: float  #: q/k/v scores promoted to heads, as InterpBench scores them
    node_auroc: float  #: NaN when every (or no) node is in the circuit
    edge_precision: float  #: of the method's own circuit
    edge_recall: float
    node_precision: float
    node_recall: float
    n_edges: int  #: edges ranked
    n_true_edges: int  #: ground-truth edges among them
    no_signal_edges: tuple[str, ...]  #: ground-truth edges that cannot carry signal (left out unless included)
    ground_truth: GroundTruthScore  #: the full result: ROC curves, precision/recall counts
    document: Mapping[str, Any]  #: the ``cbench/results/v1`` document of kind ``auroc``
    mib_auroc: float | None = None  #: MIB's greedy-pruned edge AUROC (``protocol="mib"``), else None

    def write(self, path: str | os.PathLike) -> Path:
        return _write_json(path, self.document)

    def __repr__(self) -> str:
        mib = f", MIB AUROC {_fmt(self.mib_auroc)}" if self.mib_auroc is not None else ""
        return _summary("ScoreResult", f"case {self.case}, {self.method}: edge AUROC {_fmt(self.edge_auroc)} "
                                       f"(promoted {_fmt(self.edge_auroc_promoted)}), node AUROC "
                                       f"{_fmt(self.node_auroc)}{mib}; circuit precision "
                                       f"{_fmt(self.edge_precision, '.2f')}, recall {_fmt(self.edge_recall, '.2f')}; "
                                       f"{self.n_true_edges} of {self.n_edges} edges in the ground truth, "
                                       f"{len(self.no_signal_edges)} without signal left out")


@dataclass(frozen=True, repr=False)
class EvaluationResult:
    """A submission scored as ``cbench evaluate`` scores it (:func:`cbench.evaluate`): faithfulness
    (CPR, CMD) and, for edge scores on a case with a ground truth, the AUROC."""

    case: str
    method: str | None
    kind: str  #: ``edge-scores`` or ``circuits-at-sizes``
    cpr: float | None  #: area under f of the signed-score circuits (None when not measured)
    cmd: float | None  #: area between f and 1 of the absolute-score circuits
    ablation: str
    construction: str | None  #: how circuits were built from the scores (``top-n`` or ``greedy``)
    n_examples: int
    auroc: ScoreResult | None  #: None for circuits-at-sizes files and cases without a ground truth
    faithfulness: FaithfulnessResult | FaithfulnessCurve  #: the curves f(k)
    document: Mapping[str, Any]  #: the ``cbench/results/v1`` document of kind ``evaluation``
    protocol: str = "cbench"  #: ``cbench``, or ``mib``: MIB's reference code's procedure

    def write(self, path: str | os.PathLike) -> Path:
        return _write_json(path, self.document)

    def __repr__(self) -> str:
        auroc = f"; edge AUROC {_fmt(self.auroc.edge_auroc)}" if self.auroc is not None else ""
        return _summary("EvaluationResult", f"case {self.case}, {self.method or 'submission'} ({self.kind}): "
                                            f"CPR {_fmt(self.cpr)}, CMD {_fmt(self.cmd)}{auroc}; ablation "
                                            f"{self.ablation}, circuits {self.construction or 'given'}, "
                                            f"{self.n_examples} pairs, protocol {self.protocol}")


@dataclass(frozen=True, repr=False)
class BenchResult:
    """A ``cbench bench`` run (:func:`cbench.bench`): every method on every case, scored."""

    out: Path  #: the results directory (results.json, table.md, scores/, plots)
    cases: tuple[str, ...]  #: the cases scored
    methods: tuple[str, ...]
    auroc: Mapping[str, Mapping[str, float | None]]  #: case -> method -> edge AUROC
    auroc_promoted: Mapping[str, Mapping[str, float | None]]
    failures: Mapping[str, Mapping[str, str]]  #: case -> method (``*``: the whole case) -> why
    table: str  #: table.md
    document: Mapping[str, Any]  #: results.json (``cbench/results/v1`` of kind ``bench``)

    def __repr__(self) -> str:
        means = []
        for m in self.methods:
            vals = [row[m] for row in self.auroc.values() if row.get(m) is not None]
            if vals:
                means.append(f"{m} {sum(vals) / len(vals):.3f}")
        failed = sum(len(v) for v in self.failures.values())
        return _summary("BenchResult", f"{len(self.cases)} cases x {len(self.methods)} methods, {failed} failed, "
                                       f"out={_short_path(self.out)}; mean edge AUROC: {', '.join(means)}")


@dataclass(frozen=True, repr=False)
class VerifyResult:
    """A released model's gates recomputed on fresh pairs (:func:`cbench.verify`)."""

    case: str
    model_kind: str
    passed: bool  #: every gate holds
    gates: tuple[Gate, ...]
    failures: tuple[Gate, ...]
    report: VerifyReport  #: the full report (per-edge signal, ``format()`` for the text)
    document: Mapping[str, Any]  #: ``cbench/verify-report/v1``

    def __repr__(self) -> str:
        failed = ", ".join(getattr(g, "name", "?") for g in self.failures)
        return _summary("VerifyResult", f"case {self.case} ({self.model_kind}): "
                                        f"{'passed' if self.passed else 'FAILED'}, {len(self.gates)} gates"
                                        + (f", failed: {failed}" if failed else ""))


@dataclass(frozen=True, repr=False)
class ValidationResult:
    """Files checked against their schemas (:func:`cbench.validate`)."""

    valid: bool  #: every file is valid
    files: tuple[FileReport, ...]  #: per file: ``path``, ``kind``, ``valid``, ``violations``, ``error``
    document: Mapping[str, Any]  #: what ``cbench validate --json`` prints

    def __repr__(self) -> str:
        bad = [r.path for r in self.files if not r.valid]
        return _summary("ValidationResult", f"{'valid' if self.valid else 'invalid'}: {len(self.files)} files"
                                            + (f", {len(bad)} invalid ({', '.join(map(str, bad))})" if bad else ""))

    @property
    def violations(self) -> dict[str, list[str]]:
        """File -> its problems as ``"<json path>: <message>"`` lines (valid files left out)."""
        return {r.path: [f"{v['path']}: {v['message']}" for v in r.to_dict()["violations"]]
                for r in self.files if not r.valid}
