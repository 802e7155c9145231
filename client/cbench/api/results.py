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


def _write_json(path: str | os.PathLike, doc: Mapping) -> Path:
    from cbench.files.safe_io import write_output

    return write_output(path, (json.dumps(doc, indent=2) + "\n").encode("utf-8"))


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class DiscoveryResult:
    """A discovery method's edge scores on a case (:func:`cbench.discover`).

    (The method-level :class:`cbench.discovery.DiscoveryResult`, which a method returns, holds the
    same scores as arrays; this one adds the case, the model it came from and the edge-scores
    document.)"""

    case: str
    method: str
    edge_scores: Mapping[str, float]  #: every edge of ``graph`` -> its score (positive: the edge helps)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class VerifyResult:
    """A released model's gates recomputed on fresh pairs (:func:`cbench.verify`)."""

    case: str
    model_kind: str
    passed: bool  #: every gate holds
    gates: tuple[Gate, ...]
    failures: tuple[Gate, ...]
    report: VerifyReport  #: the full report (per-edge signal, ``format()`` for the text)
    document: Mapping[str, Any]  #: ``cbench/verify-report/v1``


@dataclass(frozen=True)
class ValidationResult:
    """Files checked against their schemas (:func:`cbench.validate`)."""

    valid: bool  #: every file is valid
    files: tuple[FileReport, ...]  #: per file: ``path``, ``kind``, ``valid``, ``violations``, ``error``
    document: Mapping[str, Any]  #: what ``cbench validate --json`` prints

    @property
    def violations(self) -> dict[str, list[str]]:
        """File -> its problems as ``"<json path>: <message>"`` lines (valid files left out)."""
        return {r.path: [f"{v['path']}: {v['message']}" for v in r.to_dict()["violations"]]
                for r in self.files if not r.valid}
