"""Discovery on a real model: :func:`discover_model` (a ``HookedTransformer``, a Hugging Face
checkpoint directory or a hub name, with pairs as data in the EAP-IG library's CSV layout or as
:class:`~cbench.tasks.data.TaskData`); ``cbench discover --model`` runs it."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Any, Mapping

from cbench.api.discovering import Discovery, discovery_hyperparameters
from cbench.errors import UsageError


def model_label(model) -> str:
    """A short name for a model in documents and messages: the directory or hub name."""
    if isinstance(model, (str, os.PathLike)):
        name = Path(str(model).rstrip("/")).name or str(model)
    else:
        name = str(getattr(getattr(model, "cfg", None), "model_name", None) or type(model).__name__)
    return re.sub(r"[^0-9A-Za-z_.-]", "-", name)[:64] or "model"


def run_model_discovery(model, data, method: str, hp: Mapping[str, Any], metric: str | None = None, *,
                        dtype: str = "float32", device: str | None = None, n_examples: int | None = None,
                        progress: bool = False) -> Discovery:
    """Run ``method`` (hyperparameters from :func:`discovery_hyperparameters`) on ``model`` with
    the pairs ``data`` (a CSV path or TaskData). The document is an edge-scores document whose
    ``case`` is the model's name and whose model kind is ``pretrained`` (outside the released
    schema's kinds, which name cbench's own models)."""
    from cbench.artifacts.pretrained import load_model
    from cbench.discovery import discover as run_discover
    from cbench.discovery import to_edge_scores_document
    from cbench.runtime import CircuitRuntime
    from cbench.tasks.data import TaskData
    from cbench.tasks.pairs_csv import read_pairs_csv

    tl_model = load_model(model, dtype=dtype)
    rt = CircuitRuntime(tl_model, device=device)  # refuses what the runtime cannot run, in one line
    if not isinstance(data, TaskData):
        if data is None:
            raise UsageError("a real model needs its pairs: --data PAIRS.csv (EAP-IG's layout: clean, corrupted"
                             "[, correct_idx, incorrect_idx])")
        data = read_pairs_csv(data, getattr(tl_model, "tokenizer", None), n_examples)
    elif n_examples is not None:
        data = data.subset(n_examples)
    from cbench.runtime.memory import check_fits

    check_fits(rt, data.n_examples, int(data.base.shape[1]))  # refuses in one line what cannot fit
    if metric is None and data.labels is not None and data.labels.dim() == 2 and data.labels.shape[1] == 2:
        metric = "logit_diff"
    t0 = time.perf_counter()
    result = run_discover(rt, data, method, hp, metric, progress=progress)
    hub_name = isinstance(model, str) and not Path(model).exists()
    ref = {"repo": model if hub_name else None, "revision": None, "kind": "pretrained"}
    doc = to_edge_scores_document(result, model_label(model), ref, d_model=int(tl_model.cfg.d_model))
    return Discovery(result, data, rt.n_edges, doc, time.perf_counter() - t0)


def discover_model(model, method: str, data, *, params: Mapping[str, Any] | None = None, metric: str | None = None,
                   ablation: str | None = None, dtype: str = "float32", device: str | None = None,
                   n_examples: int | None = None, seed: int = 0, progress: bool = False) -> Discovery:
    """Run the discovery ``method`` on a real ``model`` (a ``HookedTransformer``, a Hugging Face
    checkpoint directory or a hub name; offline as ``HF_HUB_OFFLINE`` says) with pairs ``data``
    (an EAP-IG-layout CSV file or :class:`~cbench.tasks.data.TaskData`). Returns the run: its
    ``result`` (edge scores, circuit), ``data``, ``n_edges``, ``document`` and ``seconds``.

    >>> from cbench.api.real_models import discover_model                          # doctest: +SKIP
    >>> run = discover_model("path/to/checkpoint", "eap-ig-inputs", "ioi.csv")     # doctest: +SKIP
    """
    hp = discovery_hyperparameters(method, params, ablation=ablation, seed=seed)
    return run_model_discovery(model, data, method, hp, metric, dtype=dtype, device=device,
                               n_examples=n_examples, progress=progress)
