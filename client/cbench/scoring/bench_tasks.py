"""The bench's units of work, as the serial loop and every executor's workers run them: a method
on a case (:class:`BenchTask`: its edge-scores document, and for the random row the baseline's
many draws) and the faithfulness of every method's scores on a case (:class:`CaseFaithfulnessTask`:
CPR and CMD, each distinct circuit of the case run once), with each case's model and pairs loaded
once per process and the case resolved from the hub."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cbench.errors import CbenchError


def _resolve(case: str):
    """(label, artifact) for a case id, case name or artifact directory."""
    from cbench.artifacts.model import read_model_artifact

    p = Path(case)
    # a directory is taken as an artifact when it is one, or when the name has a path in it; a bare
    # name such as `ioi` that only happens to name a folder here (the --out of `bench --cases ioi
    # --out ioi`) is the hub's case
    if p.is_dir() and ((p / "meta.json").is_file() or len(p.parts) > 1 or case.startswith(".")):
        art = read_model_artifact(p)
        return art.case, art
    from cbench.hub.loading import load

    if case.isdigit():
        errors = []
        for name in (f"case-{case}", f"tracr-case-{case}"):
            try:
                return case, load(name)
            except CbenchError as exc:
                errors.append(f"{name}: {exc}")
        raise CbenchError(f"case {case}: no model could be loaded ({'; '.join(errors)})")
    art = load(case)
    return art.case, art


def bench_hyperparameters(method: str, case: str, protocol: str | None = None) -> dict:
    """What the bench passes to ``method`` on ``case``: the defaults, except that the random
    baseline draws with a seed of its own per case (one seed everywhere would give every graph of
    the same shape the same scores, and the baseline would be one sample, not sixteen).
    ``protocol="mib"``: the methods that MIB's code runs differently (nap, nap-ig, ifr, ugs) run that way."""
    from cbench.discovery import METHODS

    if protocol == "mib" and METHODS[method].has_mib_variant:
        return {"protocol": "mib"}
    if method == "random":
        import zlib

        return {"seed": zlib.crc32(f"cbench-bench-random:{case}".encode()) % (2**31)}
    return {}


def model_sha256(artifact) -> str | None:
    """The sha256 of the model's weights (meta.json's file list): what a bench scores file was
    computed on, so a resumed run never reuses scores of another version of the same case."""
    return ((artifact.meta or {}).get("files") or {}).get("model.safetensors")


def _model_ref(artifact) -> dict:
    """``model`` of a bench scores document: the hub repository and commit when the artifact is a
    snapshot in the Hugging Face cache (``models--<org>--<name>/snapshots/<sha>``), else null."""
    from cbench.hub.cache import snapshot_of_path

    repo, revision = snapshot_of_path(artifact.path) or (None, None)
    return {"repo": repo, "revision": revision, "kind": artifact.model_kind}


@dataclass(frozen=True)
class BenchTask:
    """One unit of work of the bench: a method on a case's model, with the bench's hyperparameters
    and data. The serial loop and every executor's worker run it through :func:`discover_task`."""

    case: str  # the case label (the scores file's directory)
    model: str  # the model's artifact directory (a worker that lacks it resolves ``case`` itself)
    method: str
    n_examples: int
    sampled: bool
    seed: int
    protocol: str | None = None  # mib: MIB's code's variant of the methods that have one
    faithfulness: bool = False  # also CPR and CMD of the scores (:func:`bench_task`), in the same worker
    random_row: bool = False  # the random method: also the baseline's draws as the bench reports them
    include_no_signal: bool = False  # (for the random row) no-signal edges counted as positives


@dataclass(frozen=True, eq=False)
class CaseFaithfulnessTask:
    """CPR and CMD of several methods' scores on one case (``docs``: (method, edge-scores document)
    pairs), run by :func:`faithfulness_task`."""

    case: str
    model: str
    n_examples: int
    sampled: bool
    seed: int
    protocol: str | None
    docs: tuple


_WORKER_CASES: dict = {}  # per worker process: the last cases' artifacts and data, reused across their methods
_WORKER_CASES_KEPT = 32  # the main tier's 16 cases and their pairs take a few MB

# relative CPU cost of each method on a case, per edge (the demo's measured runtimes, seconds over its
# 16 cases on a quiet machine, UGS after its lean pass): parallel runs hand out the longest tasks first
# so that no worker starts a long one last
_METHOD_COST = {"edge-sp": 28.0, "sp": 21.0, "ugs": 20.0, "activation-patching": 18.0}


def task_cost(task: "BenchTask", n_edges: int) -> float:
    """The expected CPU cost of a bench task, for ordering (longest first): method weight x edges."""
    return _METHOD_COST.get(task.method, 1.0) * max(n_edges, 1)


def bench_task(task: BenchTask) -> dict:
    """What a worker hands back for one task: ``{"scores": document}``, with ``"faithfulness": {cpr,
    cmd, ..}`` when the task asks for them (measured beside the discovery, on the same data) and
    ``"random": ...`` (:func:`random_row`) for the random row."""
    from cbench.scoring.mib_neurons import faithfulness_figures

    artifact, case_data = _worker_case(task)
    doc = discover_task(task, artifact, case_data)
    out = {"scores": doc}
    if task.faithfulness:
        out["faithfulness"] = faithfulness_figures(*case_data(), doc, task.protocol)
    if task.random_row and artifact.circuit:
        from cbench.scoring.ground_truth import circuit_edge_names

        truth = circuit_edge_names(artifact.graph, artifact.circuit)
        out["random"] = random_row(artifact, truth, case_marks(artifact, case_data, truth)[0],
                                   int(doc["method"]["hyperparameters"].get("seed", 0)), task.include_no_signal)
    return out


def faithfulness_task(task: CaseFaithfulnessTask) -> dict:
    """``{method: {cpr, cmd, ..}}``: CPR and CMD of every document of ``task`` on its case, their
    circuits in one batch (:func:`cbench.scoring.mib_neurons.faithfulness_figures_of`)."""
    from cbench.scoring.mib_neurons import faithfulness_figures_of

    _artifact, case_data = _worker_case(task)
    return faithfulness_figures_of(*case_data(), dict(task.docs), task.protocol)


def case_marks(artifact, case_data, truth) -> tuple[dict, str]:
    """The case's no-signal edges and where they come from (:func:`cbench.scoring.edge_signal.no_signal_edges`;
    ``({}, "not derived (why)")`` when the data cannot be had)."""
    from cbench.scoring.edge_signal import no_signal_edges

    try:
        sc, data = case_data()
        return no_signal_edges(artifact.circuit, sc.runtime, data, truth)
    except Exception as exc:  # noqa: BLE001 - no data: every method fails with the reason
        return {}, f"not derived ({exc})"


def random_row(artifact, truth, marks, seed: int, include_no_signal: bool = False) -> dict:
    """The random row's figures on one case, as the bench reports them: the means over the same
    many seeded draws (:mod:`cbench.scoring.random_baseline`) of the edge and promoted AUROC, MIB's
    greedy-pruned AUROC (100 draws), the ROC curve and, on a stress model, the per-class AUROC."""
    import math

    from cbench.scoring.mib_protocol import random_mib_auroc
    from cbench.scoring.random_baseline import random_aurocs, random_class_aurocs, random_mean_roc
    from cbench.scoring.stress_tier import is_stress

    graph = artifact.graph
    qkv, promoted = (float(x) for x in random_aurocs(graph, truth, seed, no_signal=marks,
                                                     include_no_signal=include_no_signal).mean(0))
    mib = random_mib_auroc(graph, truth, seed)
    fpr, tpr = random_mean_roc(graph, truth, seed, no_signal=marks, include_no_signal=include_no_signal)
    return {"auroc": qkv, "promoted": promoted, "mib": None if math.isnan(mib) else float(mib), "fpr": fpr, "tpr": tpr,
            "per_class": random_class_aurocs(graph, artifact.circuit, seed) if is_stress(artifact.circuit) else None}


def discover_task(task: BenchTask, artifact=None, case_data=None) -> dict:
    """The edge-scores document of one task. ``artifact`` and ``case_data`` (a callable giving the
    case's scoring task and pair data) come from the serial loop; a worker loads them itself."""
    from cbench.discovery import discover, to_edge_scores_document

    if artifact is None:
        artifact, case_data = _worker_case(task)
    sc, data = case_data()
    result = discover(sc.runtime, data, task.method, bench_hyperparameters(task.method, task.case, task.protocol),
                      progress=False)
    doc = to_edge_scores_document(result, task.case, _model_ref(artifact), d_model=artifact.config.get("d_model"))
    doc["model_sha256"] = model_sha256(artifact)
    return doc


def _worker_case(task, artifact=None):
    """``(artifact, case_data)`` of ``task``'s case, loaded once per process (``artifact``: the case's
    model artifact when the caller has resolved it already, else read from the task's model directory)."""
    from cbench.artifacts.model import read_model_artifact
    from cbench.runtime.threads import use_cpu_threads
    from cbench.scoring.task import case_from_artifact, pair_data

    key = (task.case, task.model, task.n_examples, task.sampled, task.seed)
    if key not in _WORKER_CASES:
        use_cpu_threads()  # the driver's CBENCH_THREADS: results depend on the thread count
        if artifact is None or str(artifact.path) != task.model:
            artifact = read_model_artifact(task.model) if Path(task.model).is_dir() else _resolve(task.case)[1]
        sc = case_from_artifact(artifact)
        data = pair_data(sc, n=task.n_examples, seed=task.seed, sampled=task.sampled)
        while len(_WORKER_CASES) >= _WORKER_CASES_KEPT:
            _WORKER_CASES.pop(next(iter(_WORKER_CASES)))
        _WORKER_CASES[key] = (artifact, (sc, data))
    artifact, prepared = _WORKER_CASES[key]
    return artifact, lambda: prepared
