"""What every model-based score needs: the model as a runtime, its case metadata and
ground-truth circuit, (base, source) input pairs with labels, and circuit masks.

* :class:`ScoringCase` — one case ready for scoring: a :class:`~cbench.runtime.CircuitRuntime`,
  the graph, ``meta.json`` and ``circuit.json`` contents. :func:`resolve_case` accepts a model
  artifact directory or a case name (resolved with ``cbench.hub.loading.load`` when the hub client
  provides it).
* :func:`pair_data` — (base, source) pairs as :class:`cbench.tasks.data.TaskData` (the runtime's
  data type): the case's counterfactual dataset (pulled when not cached), or pairs sampled from
  meta.json only when asked for (``sampled``). Without labels, scores compare against the full model's own outputs (for Tracr
  models that *is* the program's output).
* :func:`circuit_mask` — a boolean vector over the graph's edges from q/k/v- or head-level names
  (a head-level name means its q, k and v edges).
* :func:`random_path` and :func:`random_circuit` — random input→logits paths by a random walk
  (each step picks uniformly among the current node's outgoing edges, optionally restricted to
  allowed edges), and circuits as unions of such paths until they have at least ``k`` edges —
  the reference distribution of the circuit-hypothesis-tests paper.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from cbench.errors import ArtifactError, GraphError
from cbench.graph.graph import Graph

__all__ = ["ScoringCase", "resolve_case", "case_from_model", "pair_data", "circuit_mask",
           "random_path", "random_circuit", "outgoing_edges"]


@dataclass
class ScoringCase:
    """A case ready for scoring (see the module docstring)."""

    case: str
    runtime: "object"  # cbench.runtime.CircuitRuntime (imported lazily: torch is heavy)
    meta: dict
    circuit: dict | None = None
    artifact: object | None = None
    source: str = ""  # where it came from (path or repo), for results documents

    @property
    def graph(self) -> Graph:
        return self.runtime.graph

    @property
    def task_type(self) -> str:
        return str(self.meta.get("task_type", "categorical"))

    @property
    def d_model(self) -> int:
        return int(self.runtime.d_model)

    def truth_edges(self) -> list[str]:
        """The ground-truth circuit's edges (raises if the case has none)."""
        from cbench.scoring.ground_truth import circuit_edge_names

        if not self.circuit:
            raise ArtifactError(f"case {self.case} has no ground-truth circuit (circuit.json)")
        return circuit_edge_names(self.graph, self.circuit)


def case_from_model(model, meta: Mapping, circuit: Mapping | None = None, case: str | None = None) -> ScoringCase:
    """A :class:`ScoringCase` from an in-memory HookedTransformer (tests, notebooks)."""
    from cbench.runtime import CircuitRuntime

    return ScoringCase(case=str(case if case is not None else meta.get("case", "?")), runtime=CircuitRuntime(model),
                       meta=dict(meta), circuit=dict(circuit) if circuit else None, source="<model>")


def case_from_artifact(artifact) -> ScoringCase:
    from cbench.runtime import CircuitRuntime

    return ScoringCase(case=artifact.case, runtime=CircuitRuntime(artifact), meta=dict(artifact.meta),
                       circuit=dict(artifact.circuit) if artifact.circuit else None, artifact=artifact,
                       source=str(artifact.path))


def resolve_case(case_or_path: str | os.PathLike, verify: bool = True) -> ScoringCase:
    """A model artifact directory, or a case name the hub client can load (``cbench.hub.loading``)."""
    from cbench.artifacts.model import read_model_artifact

    p = Path(case_or_path)
    if p.is_dir():
        return case_from_artifact(read_model_artifact(p, verify=verify))
    from cbench.hub.loading import load

    return case_from_artifact(load(str(case_or_path), verify=verify))


# ----------------------------------------------------------------------------- data
def pair_data(case: ScoringCase, split: str = "validation", n: int | None = 200, seed: int = 0,
              sampled: bool = False):
    """(base, source) pairs as a :class:`cbench.tasks.data.TaskData`: the case's counterfactual
    dataset (pulled when not cached; an error when it cannot be had), or pairs sampled from
    meta.json when ``sampled``."""
    from cbench.tasks.data import load_task_data, sample_pairs

    if sampled:
        return sample_pairs(case.meta, n or 200, seed)
    return load_task_data(case.case, case.meta, split=split, n_examples=n, seed=seed)


# ----------------------------------------------------------------------------- circuits
def circuit_mask(graph: Graph, edges: Iterable[str]) -> np.ndarray:
    """Boolean vector over ``graph.edges``; head-level names select their q, k and v edges."""
    from cbench.runtime import edge_names_to_mask

    return edge_names_to_mask(graph, edges)


def outgoing_edges(graph: Graph) -> dict[str, np.ndarray]:
    """Edge indices leaving each node (every node but ``logits``)."""
    out: dict[str, list[int]] = {}
    for e in graph.edges:
        out.setdefault(e.src, []).append(e.index)
    return {k: np.asarray(v, dtype=np.int64) for k, v in out.items()}


def random_path(graph: Graph, rng: np.random.Generator, allowed: np.ndarray | None = None,
                max_tries: int = 1000, _out: dict | None = None) -> list[int]:
    """Edge indices of one random input→logits path (uniform choice among outgoing edges at
    each node; only ``allowed`` edges when given). Dead ends restart the walk."""
    out = _out if _out is not None else outgoing_edges(graph)
    for _ in range(max_tries):
        node, path = "input", []
        while node != "logits":
            choices = out.get(node, np.empty(0, dtype=np.int64))
            if allowed is not None:
                choices = choices[allowed[choices]]
            if choices.size == 0:
                break
            idx = int(rng.choice(choices))
            path.append(idx)
            node = graph.edges[idx].dst
        else:
            return path
    raise GraphError("no input->logits path exists among the allowed edges")


def random_circuit(graph: Graph, k: int, rng: np.random.Generator, allowed: np.ndarray | None = None,
                   _out: dict | None = None) -> np.ndarray:
    """Boolean edge mask: a union of random input→logits paths with at least ``k`` edges (or all
    the allowed edges when fewer exist)."""
    out = _out if _out is not None else outgoing_edges(graph)
    mask = np.zeros(graph.n_edges, dtype=bool)
    limit = graph.n_edges if allowed is None else int(allowed.sum())
    k = min(int(k), limit)
    stale = 0
    while mask.sum() < k:
        before = int(mask.sum())
        mask[random_path(graph, rng, allowed, _out=out)] = True
        stale = stale + 1 if int(mask.sum()) == before else 0
        if stale > 10_000:  # the walk cannot reach the remaining edges
            break
    return mask
