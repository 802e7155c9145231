"""A submission to MIB's circuit-track leaderboard, written from and read back into cbench.

MIB's layout (its circuit-track README, "Submitting to the MIB Leaderboard", and the names its
``run_evaluation.py`` reads): one folder per task and model, named ``<task>_<model>`` with the
task's underscores as hyphens (``ioi_gpt2``, ``arithmetic-addition_llama3``, ``arc-easy_gemma2``),
each holding the importance scores of every edge of that model's graph as an EAP-IG graph file,
``importances.json`` (``cfg``, ``nodes``, ``edges``; :mod:`cbench.artifacts.mib_format`). MIB
scores twelve task/model pairs (:data:`LEADERBOARD`) and asks for at least two models and two
tasks. Its models' graphs follow from their published shapes (:data:`MIB_MODELS`): grouped-query
models have one q, k and v input per query head, as MIB's code ungroups them.

MIB also accepts nine binary circuits per folder instead of scores; cbench writes and reads the
importance-scores variant only, and names the other when it finds one.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from cbench.errors import SchemaError, UsageError

IMPORTANCES = "importances.json"

# MIB's model names and the shape of each published model's config (layers, query heads, key/value
# heads, width); the graph has a node per query head, grouped-query key/value heads shared by several
MIB_MODELS: dict[str, dict] = {
    "gpt2": {"hub": "gpt2", "n_layers": 12, "n_heads": 12, "n_kv_heads": 12, "d_model": 768},
    "qwen2.5": {"hub": "Qwen/Qwen2.5-0.5B", "n_layers": 24, "n_heads": 14, "n_kv_heads": 2, "d_model": 896},
    "gemma2": {"hub": "google/gemma-2-2b", "n_layers": 26, "n_heads": 8, "n_kv_heads": 4, "d_model": 2304},
    "llama3": {"hub": "meta-llama/Llama-3.1-8B", "n_layers": 32, "n_heads": 32, "n_kv_heads": 8, "d_model": 4096},
}
MIB_TASKS = ("ioi", "mcqa", "arithmetic-addition", "arithmetic-subtraction", "arc-easy", "arc-challenge")
# the task/model folders MIB's leaderboard scores (its COL_MAPPING)
LEADERBOARD = ("ioi_gpt2", "ioi_qwen2.5", "ioi_gemma2", "ioi_llama3", "mcqa_qwen2.5", "mcqa_gemma2", "mcqa_llama3",
               "arithmetic-addition_llama3", "arithmetic-subtraction_llama3", "arc-easy_gemma2", "arc-easy_llama3",
               "arc-challenge_llama3")
MIN_MODELS = MIN_TASKS = 2


@dataclass(frozen=True)
class SubmissionEntry:
    """One task/model folder of a submission, as read back."""
    task: str
    model: str
    path: Path
    n_edges: int
    n_scored: int  # edges with a non-zero score
    document: dict  # the cbench edge-scores document the file converts to

    @property
    def folder(self) -> str:
        return f"{self.task}_{self.model}"


def folder_name(task: str, model: str) -> str:
    """``<task>_<model>`` for a pair MIB scores (task underscores as hyphens); refused otherwise."""
    task = str(task).replace("_", "-")
    if model not in MIB_MODELS:
        raise UsageError(f"MIB model {model!r}: MIB's models are {', '.join(MIB_MODELS)}")
    if task not in MIB_TASKS:
        raise UsageError(f"MIB task {task!r}: MIB's tasks are {', '.join(MIB_TASKS)}")
    name = f"{task}_{model}"
    if name not in LEADERBOARD:
        raise UsageError(f"MIB's leaderboard does not score {task} on {model}; it scores "
                         + ", ".join(LEADERBOARD))
    return name


def mib_graph(model: str):
    """cbench's graph of MIB's ``model`` (from its published shape; no weights needed)."""
    from cbench.graph import Graph

    shape = MIB_MODELS[model]
    return Graph.from_config({**{k: shape[k] for k in ("n_layers", "n_heads", "d_model")}, "parallel_attn_mlp": False})


def _check_shape(cfg: Mapping, model: str, where: str, error=SchemaError) -> None:
    shape = MIB_MODELS[model]
    for key in ("n_layers", "n_heads", "d_model"):
        if cfg.get(key) != shape[key]:
            raise error(f"{where}: {key} is {cfg.get(key)!r} but {model} ({shape['hub']}) has {shape[key]}; "
                              "these are scores of another model")


def write_entry(doc: Mapping, task: str, model: str, out_dir: str | os.PathLike) -> Path:
    """Write a cbench edge-scores document of a run on MIB's ``model`` as the folder
    ``out_dir/<task>_<model>/importances.json``; the document must be of that model's graph."""
    from cbench.artifacts.mib_format import to_mib
    from cbench.files.safe_io import write_output

    folder = folder_name(task, model)
    cfg = doc.get("cfg") if isinstance(doc, Mapping) else None
    if not isinstance(cfg, Mapping):
        raise UsageError("exporting to MIB needs an edge-scores document (with cfg, nodes and edges)")
    _check_shape(cfg, model, "the scores", UsageError)  # a wrong --mib-model
    graph_doc = to_mib(doc)
    _check_against_graph(graph_doc, model, "the scores")
    path = Path(out_dir) / folder / IMPORTANCES
    path.parent.mkdir(parents=True, exist_ok=True)
    write_output(path, (json.dumps(graph_doc) + "\n").encode())
    return path


def graph_names(model: str) -> tuple[list[str], list[str]]:
    """The node and edge names of MIB's graph of ``model``, in EAP-IG's order and spelling,
    enumerated from its shape (Llama-3.1-8B's 1.6 M edges are more than cbench builds a
    :class:`~cbench.graph.Graph` for)."""
    shape = MIB_MODELS[model]
    L, H = shape["n_layers"], shape["n_heads"]
    nodes, edges = ["input"], []
    for layer in range(L):
        heads = [f"a{layer}.h{h}" for h in range(H)]
        edges += [f"{src}->{dst}<{qkv}>" for dst in heads for qkv in "qkv" for src in nodes]
        mlp = f"m{layer}"
        edges += [f"{src}->{mlp}" for src in nodes + heads]
        nodes += heads + [mlp]
    edges += [f"{src}->logits" for src in nodes]
    return nodes + ["logits"], edges


def _check_names(graph_doc: Mapping, model: str, where: str) -> None:
    """Every node and edge of MIB's graph of ``model`` present, nothing else, each score a finite
    number (the check for graphs too large for cbench's Graph)."""
    import math

    nodes, edges = graph_names(model)
    for what, want, have in (("nodes", nodes, graph_doc["nodes"]), ("edges", edges, graph_doc["edges"])):
        extra = set(have) - set(want)
        if extra:
            raise SchemaError(f"{where}: $.{what}: {sorted(extra)[0]!r} is not a {what[:-1]} of {model}'s graph"
                              + (f" (and {len(extra) - 1} more)" if len(extra) > 1 else ""))
        missing = [n for n in want if n not in have]
        if missing:
            raise SchemaError(f"{where}: $.{what} lacks {len(missing)} of {model}'s {len(want)} ({missing[0]!r}, ...)")
    for name, e in graph_doc["edges"].items():
        score = e.get("score") if isinstance(e, Mapping) else None
        if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
            raise SchemaError(f"{where}: $.edges[{name!r}].score is {score!r}, not a finite number")


def _check_against_graph(graph_doc: Mapping, model: str, where: str) -> dict:
    """The file as a cbench edge-scores document, every node and edge checked against ``model``'s
    graph (by name alone for a graph over cbench's graph size limit: the document is then the
    file's scores without conversion)."""
    from cbench.artifacts.mib_format import from_mib
    from cbench.errors import GraphError
    from cbench.schemas import check_against_graph

    try:
        graph = mib_graph(model)
    except GraphError:
        _check_names(graph_doc, model, where)
        return {"cfg": dict(graph_doc["cfg"]), "nodes": dict(graph_doc["nodes"]),
                "edges": {k: {"score": float(v["score"]), "in_graph": v.get("in_graph")}
                          for k, v in graph_doc["edges"].items()}}
    doc = from_mib(graph_doc, graph, f"mib:{model}", {"repo": None, "revision": None,
                                                       "kind": "pretrained"}, source=where)
    problems = check_against_graph(doc, graph, kind="edge-scores")
    if problems:
        p = problems[0]
        raise SchemaError(f"{where}: {p.path}: {p.message}"
                          + (f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""))
    return doc


def read_submission(directory: str | os.PathLike, require_coverage: bool = True) -> list[SubmissionEntry]:
    """Every task/model folder of a submission directory, each file checked as MIB's loader and
    cbench's schema check it; the first problem is one :class:`SchemaError` naming the folder or
    file. ``require_coverage``: MIB's rule of at least two models and two tasks."""
    from cbench.artifacts.mib_format import is_mib_graph, read_graph_json

    root = Path(directory)
    if not root.is_dir():
        raise UsageError(f"{root}: not a directory (a MIB submission is one folder per task and model)")
    folders = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    stray = sorted(p.name for p in root.iterdir() if p.is_file() and not p.name.startswith("."))
    if stray:
        raise SchemaError(f"{root}: {stray[0]} is a file beside the task/model folders; MIB expects only folders "
                          "named <task>_<model> (e.g. ioi_gpt2)")
    if not folders:
        raise SchemaError(f"{root}: no task/model folders (e.g. ioi_gpt2)")
    entries = []
    for folder in folders:
        task, _, model = folder.name.partition("_")
        if folder.name not in LEADERBOARD:
            raise SchemaError(f"{folder}: {folder.name!r} is not a task/model pair MIB scores; its folders are "
                              + ", ".join(LEADERBOARD))
        path = folder / IMPORTANCES
        if not path.is_file():
            others = sorted(p.name for p in folder.iterdir())
            kind = ("nine binary circuits, which cbench does not read; " if len(others) >= 9 else "")
            raise SchemaError(f"{folder}: no {IMPORTANCES} ({kind}found {', '.join(others[:4]) or 'nothing'})")
        doc = read_graph_json(path)
        if not is_mib_graph(doc):
            raise SchemaError(f"{path}: not an EAP-IG graph file (a JSON object with cfg, nodes and edges)")
        cfg = doc["cfg"] if isinstance(doc["cfg"], Mapping) else {}
        _check_shape(cfg, model, str(path))
        converted = _check_against_graph(doc, model, str(path))
        scores = [e["score"] for e in converted["edges"].values()]
        entries.append(SubmissionEntry(task, model, path, len(scores), sum(1 for s in scores if s), converted))
    if require_coverage:
        models, tasks = {e.model for e in entries}, {e.task for e in entries}
        if len(models) < MIN_MODELS or len(tasks) < MIN_TASKS:
            raise SchemaError(f"{root}: MIB asks for at least {MIN_MODELS} models and {MIN_TASKS} tasks; this has "
                              f"{len(models)} model(s) ({', '.join(sorted(models))}) and {len(tasks)} task(s) "
                              f"({', '.join(sorted(tasks))})")
    return entries
