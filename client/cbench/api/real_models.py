"""Discovery on a real model: :func:`discover_model` (a ``HookedTransformer``, a Hugging Face
checkpoint directory or a hub name, with one of MIB's tasks, pairs as data in the EAP-IG library's
CSV layout (or JSONL, Parquet, a saved dataset) or :class:`~cbench.tasks.data.TaskData`); ``cbench discover --model`` runs it."""

from __future__ import annotations

import math
import os
import re
import time
from dataclasses import dataclass
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


@dataclass
class RealModel:
    """A real model resolved once for every command (``--model``/``--data``/``--dtype``/``--device``):
    the loaded ``HookedTransformer``, its runtime, the pairs, and what documents say about it. It
    stands where a case's model artifact stands in scoring (``case``, ``graph``, ``circuit``
    (none), ``path``, ``model_kind``, ``meta``), so ``evaluate``, ``test-circuit``,
    ``adversarial``, ``ablate`` and ``bench`` take it in place of a case (:func:`resolve_model`)."""

    label: str  #: the model's short name (a document's ``case``)
    given: Any  #: what the caller passed (a directory, a hub name, a model object)
    model: Any  #: the HookedTransformer
    runtime: Any  #: its CircuitRuntime
    data: Any  #: the pairs (TaskData)
    dtype: str = "float32"

    @property
    def case(self) -> str:
        return self.label

    @property
    def graph(self):
        return self.runtime.graph

    circuit = None  # a real model has no ground-truth circuit
    model_kind = "pretrained"

    @property
    def path(self) -> str:
        return str(self.given) if isinstance(self.given, (str, os.PathLike)) else f"<{type(self.given).__name__}>"

    @property
    def meta(self) -> dict:
        return {"case": self.label, "task_type": "categorical"}

    @property
    def task_type(self) -> str:
        return "categorical"

    @property
    def ref(self) -> dict:
        """The ``model`` entry of its documents: a hub name as ``repo``, kind ``pretrained``."""
        hub_name = isinstance(self.given, str) and not Path(self.given).exists()
        return {"repo": self.given if hub_name else None, "revision": None, "kind": "pretrained"}

    @property
    def answer_metric(self) -> str | None:
        """``logit_diff`` when the pairs carry (correct, incorrect) answers, else None."""
        lab = self.data.labels
        return "logit_diff" if lab is not None and lab.dim() == 2 and lab.shape[1] == 2 else None

    def scoring_inputs(self, n_examples: int | None = None):
        """``(ScoringCase, TaskData)`` for the scoring functions (the first ``n_examples`` pairs)."""
        from cbench.scoring.task import ScoringCase

        sc = ScoringCase(case=self.label, runtime=self.runtime, meta=self.meta, circuit=None, artifact=self,
                         source=self.path)
        data = self.data if n_examples is None else self.data.subset(n_examples)
        return sc, data


def resolve_model(model, data, *, dtype: str = "float32", device: str | None = None,
                  n_examples: int | None = None, check_memory: bool = True) -> RealModel:
    """Load ``model`` (a ``HookedTransformer``, a TransformerLens 4.x ``TransformerBridge``, a
    checkpoint directory or a hub name), build its
    runtime (refusing in one line what it cannot run) and read the pairs ``data`` (a task name or a
    file, see :func:`read_task`, or TaskData); ``check_memory``: refuse in
    one line a run that cannot fit the device."""
    from cbench.artifacts.pretrained import load_model
    from cbench.runtime import CircuitRuntime
    from cbench.tasks.data import TaskData

    tl_model = load_model(model, dtype=dtype)
    rt = CircuitRuntime(tl_model, device=device)  # refuses what the runtime cannot run, in one line
    if not isinstance(data, TaskData):
        if data is None:
            raise UsageError("a real model needs its pairs: --task ioi|mcqa|arithmetic|arc|FILE (or --data FILE; a "
                             "file: EAP-IG's CSV layout clean, corrupted[, correct_idx, incorrect_idx], or those "
                             "fields as JSONL)")
        data = read_task(data, getattr(tl_model, "tokenizer", None), n_examples,
                         vocab_size=int(tl_model.cfg.d_vocab))
    elif n_examples is not None:
        data = data.subset(n_examples)
    if check_memory:
        from cbench.runtime.memory import check_fits

        check_fits(rt, data.n_examples, int(data.base.shape[1]))  # refuses in one line what cannot fit
    return RealModel(model_label(model), model, tl_model, rt, data, str(dtype))


def read_task(task, tokenizer, n_examples: int | None = None, *, vocab_size: int | None = None):
    """The pairs ``task`` names as TaskData: one of MIB's tasks (``ioi``, ``mcqa``, ``arithmetic``,
    ``arc``, optionally ``:SPLIT[:COUNTERFACTUAL]``; :mod:`cbench.tasks.mib_tasks`) unless a file
    or directory of that name exists, else a file of pairs (:mod:`cbench.tasks.pairs_file`)."""
    from cbench.tasks.mib_tasks import load_mib_task, parse_task_spec
    from cbench.tasks.pairs_file import read_pairs_file

    spec = None if Path(str(task)).exists() else parse_task_spec(str(task))
    if spec is not None:
        return load_mib_task(spec, tokenizer, n_examples, vocab_size=vocab_size)
    return read_pairs_file(task, tokenizer, n_examples, vocab_size=vocab_size)


def run_model_discovery(model, data, method: str, hp: Mapping[str, Any], metric: str | None = None, *,
                        dtype: str = "float32", device: str | None = None, n_examples: int | None = None,
                        progress: bool = False, memory_budget: float | None = None) -> Discovery:
    """Run ``method`` (hyperparameters from :func:`discovery_hyperparameters`) on ``model`` (or a
    :class:`RealModel`) with the pairs ``data`` (a file or TaskData). The document is an
    edge-scores document whose ``case`` is the model's name and whose model kind is
    ``pretrained``. EAP and EAP-IG-inputs are planned first (:func:`plan_model_run`): refused in
    one line when they cannot fit the device, run in parts of their pairs within
    ``memory_budget`` (GB) when one is given."""
    from cbench.discovery import to_edge_scores_document
    from cbench.discovery.chunked import discover_in_parts
    from cbench.runtime.memory_plan import PLANNED

    planned = method in PLANNED
    if memory_budget is not None:
        if isinstance(memory_budget, bool) or not isinstance(memory_budget, (int, float)) \
                or not math.isfinite(memory_budget) or memory_budget <= 0:
            raise UsageError(f"memory_budget (--memory-budget) must be a positive number of GB (got {memory_budget!r})")
        if not planned:
            raise UsageError(f"memory_budget (--memory-budget) applies to {', '.join(PLANNED)}, whose memory is "
                             f"planned, not to {method}")
    rm = model if isinstance(model, RealModel) else resolve_model(model, data, dtype=dtype, device=device,
                                                                   n_examples=n_examples, check_memory=not planned)
    if metric is None:
        metric = rm.answer_metric
    chunk = rm.data.n_examples
    if planned:
        plan, hp = plan_model_run(rm, method, hp, memory_budget)
        chunk = plan.chunk
    t0 = time.perf_counter()
    result = discover_in_parts(rm.runtime, rm.data, method, hp, metric, chunk, progress=progress)
    doc = to_edge_scores_document(result, rm.label, rm.ref, d_model=int(rm.model.cfg.d_model))
    return Discovery(result, rm.data, rm.runtime.n_edges, doc, time.perf_counter() - t0)


def plan_model_run(rm: RealModel, method: str, hp: Mapping[str, Any], memory_budget: float | None = None):
    """``(plan, hyperparameters)`` of a planned method (:mod:`cbench.runtime.memory_plan`) on ``rm``'s
    pairs: without a budget, the whole run's plan, refused in one line when its peak is over the
    device's free memory; with ``memory_budget`` (GB), the plan that stays within it (parts of
    ``plan.chunk`` pairs, ``plan.rows_per_pass`` rows per pass, written into the hyperparameters)."""
    from cbench.runtime.memory_plan import check_budget, check_plan

    N, P = rm.data.n_examples, int(rm.data.base.shape[1])
    steps = int(hp.get("steps", 5))
    key = "batch_size" if method == "eap" else "batch_rows"
    batch = int(hp.get(key) or 4096)
    if memory_budget is None:
        return check_plan(rm.runtime, method, N, P, steps=steps, batch=batch), dict(hp)
    plan = check_budget(rm.runtime, method, N, P, float(memory_budget), steps=steps, batch=batch)
    return plan, dict(hp, **{key: min(batch, plan.rows_per_pass)})


def discover_model(model, method: str, data, *, params: Mapping[str, Any] | None = None, metric: str | None = None,
                   ablation: str | None = None, dtype: str = "float32", device: str | None = None,
                   n_examples: int | None = None, seed: int = 0, progress: bool = False,
                   memory_budget: float | None = None) -> Discovery:
    """Run the discovery ``method`` on a real ``model`` (a ``HookedTransformer``, a TransformerLens 4.x
    ``TransformerBridge``, a Hugging Face checkpoint directory or a hub name; offline as
    ``HF_HUB_OFFLINE`` says) with pairs ``data``
    (one of MIB's tasks ``ioi``, ``mcqa``, ``arithmetic``, ``arc``; a file of pairs, CSV, JSONL,
    Parquet or a saved dataset; or :class:`~cbench.tasks.data.TaskData`: :func:`read_task`). Returns the run: its
    ``result`` (edge scores, circuit), ``data``, ``n_edges``, ``document`` and ``seconds``.
    ``memory_budget`` (GB; EAP and EAP-IG-inputs): run in parts of the pairs so the planned peak
    stays within it (the same scores; :mod:`cbench.runtime.memory_plan`).

    >>> from cbench.api.real_models import discover_model                          # doctest: +SKIP
    >>> run = discover_model("path/to/checkpoint", "eap-ig-inputs", "ioi.csv")     # doctest: +SKIP
    >>> run = discover_model("gpt2", "eap-ig-inputs", "ioi:validation")            # doctest: +SKIP
    """
    hp = discovery_hyperparameters(method, params, ablation=ablation, seed=seed)
    return run_model_discovery(model, data, method, hp, metric, dtype=dtype, device=device,
                               n_examples=n_examples, progress=progress, memory_budget=memory_budget)
