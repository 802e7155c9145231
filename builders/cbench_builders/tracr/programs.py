"""The Tracr-programs dataset (``<org>/tracr-programs``): one row per compiled case.

Written by ``cbench build tracr`` to ``<out>/tracr-programs/``: ``data/train.parquet`` (zstd)
and a README.md dataset card whose ``configs:`` block makes ``datasets.load_dataset(dir)``
return it (one config, ``default``, one split, ``train``).

Columns (JSON-valued ones are JSON strings, so every row has the same Arrow schema):

============== ============ ==========================================================
case_id        string       the case id ("3")
description    string       what the program computes
task_type      string       categorical | numerical
source         string       original (InterpBench's program) | cbench (written from the paper)
vocab          string       JSON list of input tokens (without BOS/PAD)
min_seq_len    int32        tokens after BOS
max_seq_len    int32        tokens after BOS (Tracr's compile max_seq_len)
causal         bool         causal or bidirectional attention
bos, pad       string       special tokens (pad may be null)
program_source string       source text of the spec's program()
op_graph       string       JSON list of ops: name, type, parents, encoding, value_set
op_assignment  string       JSON map op -> {components, component, hidden_neurons, residual_dims}
residual_labels list<string> Tracr's residual-stream direction labels, in order
output_classes string       JSON list of output classes, or null (numerical)
model_config   string       JSON HookedTransformerConfig of the converted model
n_layers, n_heads, d_model int32
circuit_nodes  list<string> ground-truth circuit nodes (canonical names)
circuit_edges  list<string> ground-truth circuit edges (canonical names, q/k/v granularity)
exactness      string       JSON result of the three-way exactness check
============== ============ ==========================================================
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

from cbench.errors import BuildError

DATA_FILE = "data/train.parquet"
DATASET_DIR = "tracr-programs"


def _json(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def dataset_row(compiled, converted, circuit: dict, exactness: dict) -> dict:
    """The dataset row of one compiled case (plain Python values only, so it can cross processes)."""
    from cbench_builders.tracr.circuit import value_set

    case = compiled.case
    ops = circuit["high_level"]["ops"]
    op_graph = [{"name": op["name"], "type": op["type"], "parents": op["parents"],
                 "encoding": op.get("encoding"), "value_set": value_set(compiled, op["name"])} for op in ops]
    assignment = {op["name"]: {k: op[k] for k in ("components", "component", "hidden_neurons",
                                                    "hidden_neuron_indices", "residual_dims") if k in op}
                  for op in ops}
    cfg = converted.config
    return {
        "case_id": case.id,
        "description": case.description,
        "task_type": case.task_type,
        "source": case.source,
        "vocab": _json(list(case.vocab)),
        "min_seq_len": case.min_seq_len,
        "max_seq_len": case.max_seq_len,
        "causal": case.causal,
        "bos": case.bos,
        "pad": case.pad,
        "program_source": case.program_source(),
        "op_graph": _json(op_graph),
        "op_assignment": _json(assignment),
        "residual_labels": list(compiled.residual_labels),
        "output_classes": _json(converted.output_classes),
        "model_config": _json(cfg),
        "n_layers": cfg["n_layers"],
        "n_heads": cfg["n_heads"],
        "d_model": cfg["d_model"],
        "circuit_nodes": list(circuit["nodes"]),
        "circuit_edges": list(circuit["edges"]),
        "exactness": _json(exactness),
    }


def _schema():
    import pyarrow as pa

    s, i, b, ls = pa.string(), pa.int32(), pa.bool_(), pa.list_(pa.string())
    return pa.schema([
        ("case_id", s), ("description", s), ("task_type", s), ("source", s), ("vocab", s),
        ("min_seq_len", i), ("max_seq_len", i), ("causal", b), ("bos", s), ("pad", s),
        ("program_source", s), ("op_graph", s), ("op_assignment", s), ("residual_labels", ls),
        ("output_classes", s), ("model_config", s), ("n_layers", i), ("n_heads", i), ("d_model", i),
        ("circuit_nodes", ls), ("circuit_edges", ls), ("exactness", s),
    ])


def write_dataset(rows: list[dict], out_dir: str | os.PathLike, repo: str = "cbench/tracr-programs") -> Path:
    """Write ``rows`` (sorted by case id) as ``<out_dir>/tracr-programs/``; returns that path.

    Built beside the target and renamed into place, so a failed build leaves the old one."""
    import pyarrow as pa

    from cbench_builders.release.cards import render_card, size_category
    from cbench_builders.release.parquet import write_parquet

    if not rows:
        raise BuildError("no case compiled, so there is no Tracr-programs dataset to write")
    rows = sorted(rows, key=lambda r: (not r["case_id"].isdigit(), int(r["case_id"]) if r["case_id"].isdigit() else 0,
                                       r["case_id"]))
    schema = _schema()
    table = pa.Table.from_pylist(rows, schema=schema)
    target = Path(out_dir) / DATASET_DIR
    tmp = Path(out_dir) / f".{DATASET_DIR}.tmp-{uuid.uuid4().hex[:12]}"
    try:
        tmp.mkdir(parents=True)
        write_parquet(table, tmp / DATA_FILE)
        card = render_card("dataset_tracr_programs", {
            "repo": repo, "data_file": DATA_FILE, "size_category": size_category(len(rows)),
            "rows": [{"case_id": r["case_id"], "task_type": r["task_type"], "source": r["source"],
                      "n_layers": r["n_layers"], "n_heads": r["n_heads"], "d_model": r["d_model"],
                      "n_edges": len(r["circuit_edges"]), "description": r["description"]} for r in rows],
        }, data_root=tmp)
        (tmp / "README.md").write_text(card, encoding="utf-8")
        if target.exists():
            backup = Path(out_dir) / f".{DATASET_DIR}.old-{uuid.uuid4().hex[:12]}"
            os.rename(target, backup)
            os.rename(tmp, target)
            shutil.rmtree(backup, ignore_errors=True)
        else:
            os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
