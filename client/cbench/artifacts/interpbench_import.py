"""Import an original InterpBench case folder as a cbench model artifact.

An InterpBench release (REFERENCE.md) has, per case: ``ll_model.pth`` (a state dict),
``ll_model_cfg.pkl`` (the TransformerLens config as a dict, sometimes a pickled
``HookedTransformerConfig``), ``meta.json`` (training arguments), ``edges.pkl`` (the ground-truth
circuit as ``(parent, child)`` hook-name pairs), and at the release root
``benchmark_metadata.json`` (per case: task description, vocab, sequence lengths).

Safety: weights are read with ``torch.load(weights_only=True)``; the pickles through
:mod:`cbench.artifacts.legacy_pickle` (an allowlist; a config object becomes a dict of its field values
without running the class's code). Nothing the files contain is executed.

Choices where the release is silent (written into the card and ``meta.json``'s ``imported_from``):

* tokens: with ``benchmark_metadata.json``'s vocab of the case, ``input_tokens`` is ``BOS``, the
  vocab in its listed order, then ``PAD`` if the model has one more slot (the Tracr
  tokenizer's order); without it, placeholders ``BOS, tok1, tok2, ...``;
* output classes of a categorical model: the output indices as strings (``"0"``, ``"1"``...), as
  the release does not name them;
* task type: numerical when ``d_vocab_out == 1``, else categorical;
* edges internal to a head (``hook_q_input -> attn.hook_q``) are dropped (the canonical graph
  has none); every other edge must map onto the model's graph.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from pathlib import Path
from typing import Any

from cbench.errors import ArtifactError, GraphError, UnsafePickleError, UsageError

REQUIRED = ("ll_model.pth", "ll_model_cfg.pkl", "edges.pkl")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _json_safe(value: Any) -> Any:
    """Plain JSON values only (numpy scalars -> numbers, torch dtypes -> names, others dropped)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        return _json_safe(value.item())
    if type(value).__module__ == "torch" and type(value).__name__ == "dtype":
        return str(value).replace("torch.", "")
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            v2 = _json_safe(v)
            if v2 is not None or v is None:
                out[str(k)] = v2
        return out
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if type(value).__name__ == "device":
        return str(value)
    return None


def read_pth_state_dict(path: Path) -> dict:
    """The state dict of a ``.pth`` file (``ll_model.pth``): ``torch.load(weights_only=True)`` in a child process (a
    crash in torch's reader becomes one line), handed back as safetensors bytes."""
    import json
    import signal
    import subprocess
    import sys

    from safetensors import SafetensorError
    from safetensors.torch import load as st_load

    from cbench.artifacts.legacy_pickle import _client_root
    from cbench.files.safe_io import read_regular_file

    read_regular_file(path, MAX_WEIGHTS_BYTES, what="a torch state dict")  # regular file, bounded size
    try:
        proc = subprocess.run([sys.executable, "-I", "-c", _WEIGHTS_CHILD, str(path), _client_root()],
                              capture_output=True, timeout=600,
                              env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore"))
    except subprocess.TimeoutExpired:
        raise ArtifactError(f"{path}: reading it took more than 600 s; refused") from None
    if proc.returncode < 0:
        try:
            sig = signal.Signals(-proc.returncode).name
        except ValueError:
            sig = f"signal {-proc.returncode}"
        raise UnsafePickleError(f"{path}: refused: torch's reader crashed ({sig}) on it; nothing was imported")
    if proc.returncode != 0:
        try:
            reply = json.loads(proc.stderr.decode("utf-8").strip().splitlines()[-1])
        except (ValueError, IndexError, UnicodeDecodeError):
            reply = {"kind": "unreadable", "error": f"exit {proc.returncode}"}
        if reply.get("kind") == "unsafe":
            what = reply.get("error") or "an object outside torch's weights-only allowlist"
            raise UnsafePickleError(f"{path}: refused: it asks for {what}, which weights-only loading does not "
                                    "allow; nothing in it was run")
        if reply.get("kind") == "shape":
            raise ArtifactError(f"{path}: expected a state dict (parameter name -> tensor)")
        raise ArtifactError(f"{path}: not a readable torch state dict ({reply.get('error')})")
    try:
        return st_load(proc.stdout)
    except (SafetensorError, ValueError, RuntimeError) as exc:
        raise ArtifactError(f"{path}: the weights came back unreadable ({exc})") from None


MAX_WEIGHTS_BYTES = 2 * 1024 ** 3
_WEIGHTS_CHILD = r"""
import json, pickle, re, sys
sys.path.insert(0, sys.argv[2])
def fail(kind, msg=""):
    sys.stderr.write(chr(10) + json.dumps({"kind": kind, "error": msg}) + chr(10))
    sys.exit(3)
import torch
try:
    state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
except pickle.UnpicklingError as exc:
    m = re.search(r"GLOBAL ([\w.]+)", str(exc))
    fail("unsafe", m[1] if m else "")
except Exception as exc:
    fail("unreadable", f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}")
if isinstance(state, dict) and isinstance(state.get("state_dict"), dict):
    state = state["state_dict"]
if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
    fail("shape")
from safetensors.torch import save
sys.stdout.buffer.write(save({k: v.detach().clone().contiguous() for k, v in state.items()}))
"""


def _config_json(cfg: Any, path: Path) -> dict:
    if not isinstance(cfg, dict):
        raise ArtifactError(f"{path}: expected a TransformerLens config (a dict or config object), "
                            f"got {type(cfg).__name__}")
    out = _json_safe(cfg)
    for k in ("device", "n_params", "tokenizer_name", "original_architecture", "checkpoint_index",
              "checkpoint_label_type", "checkpoint_value", "from_checkpoint"):
        out.pop(k, None)
    if "dtype" in out and isinstance(out["dtype"], str):
        out["dtype"] = out["dtype"].replace("torch.", "")
    return out


def _case_metadata(directory: Path, case_id: str) -> dict:
    for candidate in (directory / "benchmark_metadata.json", directory.parent / "benchmark_metadata.json"):
        if candidate.exists():
            from cbench.errors import SchemaError
            from cbench.schemas import read_json

            try:
                data = read_json(candidate)  # bounded: regular files, 64 MB, 64 levels of nesting
            except SchemaError as exc:
                raise ArtifactError(f"{str(exc).splitlines()[0]} (benchmark_metadata.json of the release)") from None
            for case in data.get("cases", []) if isinstance(data, dict) else []:
                if isinstance(case, dict) and str(case.get("case_id")).removeprefix("case-") == case_id:
                    return case
    return {}


def _tokens(vocab: Any, d_vocab: int) -> tuple[list, str | None, bool]:
    """(input_tokens, pad_token, from_metadata)."""
    if isinstance(vocab, list) and vocab:
        vocab = [v if isinstance(v, (str, int, float, bool)) else str(v) for v in vocab]
        if len(vocab) + 1 == d_vocab and "BOS" not in vocab:
            return ["BOS", *vocab], None, True
        if len(vocab) + 2 == d_vocab and "BOS" not in vocab and "PAD" not in vocab:
            return ["BOS", *vocab, "PAD"], "PAD", True
    return ["BOS"] + [f"tok{i}" for i in range(1, d_vocab)], None, False


def import_interpbench(directory: str | os.PathLike, case_id: str, out_dir: str | os.PathLike):
    """Convert ``directory`` (one InterpBench case) into a cbench artifact at ``out_dir``; return
    the verified :class:`~cbench.artifacts.model.ModelArtifact`."""
    from cbench.artifacts import legacy_pickle as legacy_pickle

    d = Path(directory)
    case_id = str(case_id).strip().removeprefix("case-")
    if not re.match(r"^[0-9A-Za-z][0-9A-Za-z_.-]{0,63}$", case_id):
        raise UsageError(f"--case {case_id!r} is not a case id (e.g. 3, 33)")
    if not d.is_dir():
        raise UsageError(f"{d}: no such directory (give an InterpBench case folder with {', '.join(REQUIRED)})")
    missing = [f for f in REQUIRED if not (d / f).is_file()]
    if missing:
        raise ArtifactError(f"{d}: not an InterpBench case folder ({', '.join(missing)} missing)")
    out = Path(out_dir)
    if out.exists():
        raise UsageError(f"{out} already exists; choose another --out")

    # 1. the pickles, restricted (a refused pickle stops everything before torch is touched)
    cfg_raw = legacy_pickle.load(d / "ll_model_cfg.pkl")
    edges_raw = legacy_pickle.load(d / "edges.pkl")
    training = {}
    if (d / "meta.json").is_file():
        from cbench.schemas import read_json

        training = _json_safe(read_json(d / "meta.json"))
        if not isinstance(training, dict):
            training = {"value": training}

    # 2. config and weights
    from cbench.artifacts.model import write_model_artifact
    from cbench.graph.graph import Graph
    from cbench.artifacts.transformer_lens_adapter import build_model, config_to_json

    cfg = _config_json(cfg_raw, d / "ll_model_cfg.pkl")
    state = read_pth_state_dict(d / "ll_model.pth")
    model = build_model(cfg, state, strict_config=False)
    config = config_to_json(model.cfg)

    # 3. the circuit in canonical names
    graph = Graph.from_config(config)
    if not isinstance(edges_raw, (list, tuple, set)):
        raise ArtifactError(f"{d / 'edges.pkl'}: expected a list of (parent, child) pairs")
    names = set()
    for i, pair in enumerate(edges_raw):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2):
            raise ArtifactError(f"{d / 'edges.pkl'}: entry {i} is not a (parent, child) pair: {pair!r:.80}")
        parent, child = (_hook_name(x) for x in pair)
        try:
            name = graph.from_hook_edge(parent, child)
        except GraphError as exc:
            raise ArtifactError(f"{d / 'edges.pkl'}: entry {i}: {exc}") from None
        if name is not None:
            names.add(name)
    if not names:
        raise ArtifactError(f"{d / 'edges.pkl'}: no edge maps onto the model's graph")
    edges = [e.name for e in graph.edges if e.name in names]
    nodes = [n for n in graph.node_names if n in graph.nodes_of(edges)]
    circuit = {"schema": "cbench/circuit/v1", "case": case_id, "model_kind": "siit", "granularity": "qkv",
               "graph": {"n_layers": graph.n_layers, "n_heads": graph.n_heads, "has_mlp": graph.has_mlp,
                         "parallel_attn_mlp": graph.parallel_attn_mlp},
               "nodes": nodes, "edges": edges}

    # 4. metadata
    case_meta = _case_metadata(d, case_id)
    d_vocab_out = config.get("d_vocab_out", -1)
    if d_vocab_out in (-1, None):
        d_vocab_out = config["d_vocab"]
    task_type = "numerical" if d_vocab_out == 1 else "categorical"
    tokens, pad, from_meta = _tokens(case_meta.get("vocab"), config["d_vocab"])
    max_len = case_meta.get("max_seq_len") if isinstance(case_meta.get("max_seq_len"), int) else config["n_ctx"]
    min_len = case_meta.get("min_seq_len") if isinstance(case_meta.get("min_seq_len"), int) else 1
    seed = cfg.get("seed") if isinstance(cfg.get("seed"), int) and cfg.get("seed") >= 0 else None
    description = case_meta.get("task_description") or f"InterpBench case {case_id} (imported)"
    sources = {f: _sha256(d / f) for f in (*REQUIRED, "meta.json") if (d / f).is_file()}
    meta = {
        "schema": "cbench/model-meta/v1", "case": case_id, "model_kind": "siit", "task_type": task_type,
        "description": str(description), "input_tokens": tokens, "bos_token": "BOS", "pad_token": pad,
        "output_classes": None if task_type == "numerical" else [str(i) for i in range(d_vocab_out)],
        "min_seq_len": min(min_len, max_len), "max_seq_len": min(max_len, config["n_ctx"]),
        "causal": config.get("attention_dir", "causal") == "causal", "seed": seed,
        "training": training or None, "metrics": None, "dataset_revision": None, "training_time_s": None,
        "hardware": None,
        "imported_from": {"format": "interpbench", "directory": d.name, "sha256": sources,
                          "tokens_from_metadata": from_meta},
    }
    readme = (f"---\nlicense: cc-by-4.0\ntags: [cbench, interpbench, siit]\n---\n# InterpBench case {case_id} "
              "(imported)\n\n"
              f"{description}. Converted from the original InterpBench release files by "
              "`cbench import-interpbench`: weights read with weights-only loading, pickles through "
              "cbench's restricted unpickler, hook-style edges mapped to canonical edge names"
              f" ({len(edges)} edges). "
              + ("Input tokens come from benchmark_metadata.json. " if from_meta else
                 "Input tokens are placeholders (no benchmark_metadata.json vocab matched). ")
              + ("Output classes are output indices." if task_type == "categorical" else "") + "\n")
    return write_model_artifact(out, model, meta, circuit=circuit, readme=readme)


def _hook_name(x: Any) -> str:
    """Hook names come as strings, or (name, index) pairs in some ACDC versions."""
    if isinstance(x, str):
        return x
    if isinstance(x, (list, tuple)) and len(x) == 2 and isinstance(x[0], str):
        idx = x[1]
        if isinstance(idx, (list, tuple)):
            idx = next((i for i in idx if isinstance(i, int)), None)
        return f"{x[0]}[{idx}]" if isinstance(idx, int) else x[0]
    raise ArtifactError(f"edges.pkl: {x!r:.80} is not a hook name")
