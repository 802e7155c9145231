"""``cbench build tracr``: compile cases with Tracr, check them, write model artifacts and the
Tracr-programs dataset.

Per case (:func:`build_case`): compile (:mod:`cbench_builders.tracr.compile`), convert to
TransformerLens (:mod:`~cbench_builders.tracr.convert`), the three-way exactness check
(:mod:`~cbench_builders.tracr.exactness`; a failing case is not written), the ground-truth circuit
from the craft graph and its patching check (:mod:`~cbench_builders.tracr.circuit`), then the
artifact ``<out>/tracr-case-<id>/`` (config.json, model.safetensors, meta.json with model_kind
"tracr", circuit.json, README.md from ``cards/tracr_model.md.j2``). Afterwards
``<out>/tracr-programs/`` gets one row per written case.

Cases run in a pool of worker processes (``--jobs``, default 2: the work per case is small, and
most of it is jax's XLA compilation, which is single-threaded per compile). Workers are spawned,
not forked (jax does not survive a fork), and each imports jax/torch once.
"""

from __future__ import annotations

import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

import click

from cbench.cli.executor_opts import executor_options
from cbench.cli.options import check_out_tree
from cbench.errors import BuildError, CbenchError, UsageError

DEFAULT_OUT = "build/tracr"


@dataclass
class CaseResult:
    case: str
    ok: bool
    layers: int | None = None
    heads: int | None = None
    d_model: int | None = None
    n_edges: int | None = None
    exactness: str = ""
    error: str | None = None
    time_s: float = 0.0
    row: dict | None = field(default=None, repr=False)


def _tracr_version() -> str:
    try:
        from importlib.metadata import version

        return version("tracr-pypi")
    except Exception:  # pragma: no cover - metadata missing
        return "unknown"


def _meta(compiled, converted, exact, check) -> dict:
    case = compiled.case
    return {
        "schema": "cbench/model-meta/v1",
        "case": case.id,
        "model_kind": "tracr",
        "task_type": case.task_type,
        "description": case.description,
        "input_tokens": converted.input_tokens,
        "bos_token": case.bos,
        "pad_token": case.pad,
        "output_classes": converted.output_classes,
        "min_seq_len": case.min_seq_len,
        "max_seq_len": case.max_seq_len,
        "causal": case.causal,
        "seed": case.seed,
        "training": None,
        "metrics": None,
        "dataset_revision": None,
        "training_time_s": None,
        "hardware": None,
        "source": case.source,
        "tracr": {"package": f"tracr-pypi {_tracr_version()}", "mlp_exactness": 100,
                  "jax_default_matmul_precision": "float32", "compile_time_s": round(compiled.compile_time_s, 3),
                  "residual_labels": compiled.residual_labels, "output_op": compiled.output_label},
        "exactness": exact.as_dict(),
        "circuit_check": check.as_dict(),
        "files": {},
    }


def build_case(case_id: str, out_dir: str | os.PathLike, *, write: bool = True) -> CaseResult:
    """Compile, check and (when it passes) write one case. Never raises for a case's own
    problems: they come back as ``CaseResult(ok=False, error=...)``."""
    t0 = time.perf_counter()
    result = CaseResult(str(case_id), False)
    try:
        return _build_case(case_id, Path(out_dir), write, t0, result)
    except CbenchError as exc:
        msg = str(exc).splitlines()[0]
        if not msg.startswith(f"case {case_id}"):
            msg = f"case {case_id}: {msg}"
        result.error = msg
    except Exception as exc:  # a bug, reported as one line naming the case
        result.error = f"case {case_id}: internal error: {type(exc).__name__}: {exc}"
    result.ok = False
    result.time_s = time.perf_counter() - t0
    return result


def _build_case(case_id: str, out_dir: Path, write: bool, t0: float, result: CaseResult) -> CaseResult:
    from cbench.artifacts.model import write_model_artifact

    from cbench_builders.cases.specs import load_case
    from cbench_builders.release.cards import render_card
    from cbench_builders.tracr.circuit import check_circuit, derive_circuit
    from cbench_builders.tracr.compile import compile_case
    from cbench_builders.tracr.convert import NONE_CLASS, convert
    from cbench_builders.tracr.exactness import check_exactness, case_inputs
    from cbench_builders.tracr.programs import dataset_row

    case = load_case(case_id)
    compiled = compile_case(case)
    converted = convert(compiled)
    cfg = converted.config
    seqs, exhaustive = case_inputs(case)
    exact = check_exactness(compiled, converted, seqs, exhaustive)
    result.case = case.id
    result.layers, result.heads, result.d_model = cfg["n_layers"], cfg["n_heads"], cfg["d_model"]
    result.exactness = exact.summary()
    if not exact.ok:
        result.error = f"case {case.id}: not exact, not written: {exact.failure}"
        result.time_s = time.perf_counter() - t0
        return result
    circuit = derive_circuit(compiled)
    result.n_edges = len(circuit["edges"])
    check = check_circuit(converted.model, circuit, seqs, converted.token_to_id, case.bos, compiled.categorical,
                          case.seed)
    if not check.ok:
        result.error = f"case {case.id}: circuit check failed, not written: {check.failure}"
        result.time_s = time.perf_counter() - t0
        return result
    meta = _meta(compiled, converted, exact, check)
    if write:
        readme = render_card("tracr_model", {
            "repo": f"cbench/tracr-case-{case.id}", "case": case.id, "meta": meta, "config": cfg,
            "source": case.source, "program_source": case.program_source().rstrip(),
            "ops": circuit["high_level"]["ops"], "edges": circuit["edges"],
            "exactness": exact.as_dict(), "circuit_check": check.as_dict(), "tracr_version": _tracr_version(),
            "none_class": bool(converted.output_classes) and NONE_CLASS in converted.output_classes,
        })
        write_model_artifact(out_dir / f"tracr-case-{case.id}", converted.model, meta, circuit=circuit,
                             readme=readme, overwrite=True)
    result.row = dataset_row(compiled, converted, circuit, exact.as_dict())
    result.ok = True
    result.time_s = time.perf_counter() - t0
    return result


def _worker_init() -> None:
    import torch

    torch.set_num_threads(1)
    from cbench_builders.tracr.compile import configure_jax

    configure_jax()


def _estimated_cost(case_id: str) -> float:
    """A rough cost of building a case, to start the long ones first (the pool's long pole)."""
    from cbench_builders.cases.specs import load_case
    from cbench_builders.tracr.exactness import EXHAUSTIVE_LIMIT, N_SAMPLED, count_inputs

    try:
        case = load_case(case_id)
    except CbenchError:
        return 0.0
    n = count_inputs(case)
    n = n if n <= EXHAUSTIVE_LIMIT else N_SAMPLED
    return float(n * case.max_seq_len)


def build_cases(case_ids: list[str], out_dir: str | os.PathLike, *, jobs: int = 2, progress: bool = True,
                write: bool = True) -> list[CaseResult]:
    """Build ``case_ids`` (in a pool of ``jobs`` processes when jobs > 1); results in input order."""
    from tqdm import tqdm

    results: dict[str, CaseResult] = {}
    bar = tqdm(total=len(case_ids), desc="tracr", unit="case", disable=not progress, file=sys.stderr)
    try:
        if jobs <= 1 or len(case_ids) == 1:
            _worker_init()
            for cid in case_ids:
                bar.set_postfix_str(f"case {cid}")
                results[cid] = build_case(cid, out_dir, write=write)
                bar.update(1)
        else:
            import multiprocessing as mp

            ctx = mp.get_context("spawn")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init) as pool:
                futures = {pool.submit(build_case, cid, str(out_dir), write=write): cid
                           for cid in sorted(case_ids, key=_estimated_cost, reverse=True)}
                for fut in as_completed(futures):
                    cid = futures[fut]
                    try:
                        results[cid] = fut.result()
                    except Exception as exc:  # the worker died
                        results[cid] = CaseResult(cid, False, error=f"case {cid}: worker failed: "
                                                                     f"{type(exc).__name__}: {exc}")
                    bar.set_postfix_str(f"case {cid}")
                    bar.update(1)
    finally:
        bar.close()
    return [results[c] for c in case_ids]


@dataclass(frozen=True)
class TracrTask:
    """One case to compile, as an executor task (``cbench build tracr --executor ray``)."""

    case: str
    out_dir: str
    write: bool = True


def tracr_task(task: TracrTask) -> CaseResult:
    """Compile one case in an executor worker (a fresh process: JAX and torch set up first)."""
    _worker_init()
    return build_case(task.case, task.out_dir, write=task.write)


def build_cases_on(ex, case_ids: list[str], out_dir: str | os.PathLike, *, write: bool = True,
                   echo=None) -> list[CaseResult]:
    """:func:`build_cases` through an executor (:mod:`cbench.scoring.executor`): one task per case, the
    costliest first, results in input order; a task that fails becomes a failed CaseResult."""
    from cbench.scoring.executor import progress_line

    results: dict[str, CaseResult] = {}
    tasks = [TracrTask(c, str(Path(out_dir).resolve()), write) for c in sorted(case_ids, key=_estimated_cost,
                                                                                reverse=True)]
    t0 = time.perf_counter()

    def on_result(task, outcome, n, total):
        results[task.case] = outcome.value if outcome.ok else CaseResult(task.case, False, error=f"case {task.case}: "
                                                                                          f"{outcome.error}")
        if echo is not None:
            echo(progress_line(n, total, f"case {task.case}", outcome, t0))

    ex.map(tracr_task, tasks, on_result)
    return [results[c] for c in case_ids]


def _status(r: CaseResult) -> str:
    if r.ok:
        return r.exactness
    if r.exactness and not r.exactness.startswith("FAIL"):
        return f"{r.exactness}; circuit check FAIL"
    return r.exactness.split(":")[0] if r.exactness else "FAIL (not compiled)"


def format_table(results: list[CaseResult]) -> str:
    head = ("case", "layers", "heads", "d_model", "circuit edges", "time (s)", "exactness")
    rows = [(r.case, str(r.layers or "-"), str(r.heads or "-"), str(r.d_model or "-"),
             str(r.n_edges) if r.n_edges is not None else "-", f"{r.time_s:.1f}", _status(r)) for r in results]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(head)]

    def line(cells):
        return "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()

    return "\n".join([line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


@click.command("tracr")
@click.option("--cases", "cases", metavar="IDS", help="comma-separated case ids, e.g. 3,33")
@click.option("--all", "all_cases", is_flag=True, help="every case in model_zoo/cases")
@click.option("--main", "main_cases", is_flag=True, help="the 16 main cases of the InterpBench paper")
@click.option("--out", "out", default=DEFAULT_OUT, show_default=True, type=click.Path(file_okay=False), callback=check_out_tree,
              help="output directory (tracr-case-<id>/ and tracr-programs/)")
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 64),
              help="worker processes")
@click.option("--no-dataset", is_flag=True, help="do not write the tracr-programs dataset")
@executor_options
def build_tracr_cmd(cases, all_cases, main_cases, out, jobs, no_dataset, executor, ray_address, workers):
    """Compile cases with Tracr, check exactness and circuits, write tracr-case-<id> artifacts and
    the tracr-programs dataset."""
    from cbench_builders.cases.specs import MAIN_CASES, list_cases, resolve_case_ids

    chosen = [bool(cases), all_cases, main_cases]
    if sum(chosen) != 1:
        raise UsageError("choose the cases with exactly one of --cases IDS, --all or --main")
    if cases:
        ids = resolve_case_ids(cases)
    elif all_cases:
        ids = list_cases()
        if not ids:
            raise BuildError("no case specs found in model_zoo/cases (or $CBENCH_ZOO/cases)")
    else:
        ids = list(MAIN_CASES)
        resolve_case_ids(",".join(ids))
    t0 = time.perf_counter()
    if executor == "local" and ray_address is None and workers is None:
        results = build_cases(ids, out, jobs=jobs)  # --jobs worker processes, as before
    else:
        from cbench.cli.executor_opts import make_cli_executor

        ex = make_cli_executor(executor, ray_address, workers)
        try:
            results = build_cases_on(ex, ids, out, echo=lambda line: click.echo(line, err=True))
        finally:
            ex.close()
    wall = time.perf_counter() - t0
    click.echo(format_table(results))
    ok = [r for r in results if r.ok]
    if ok and not no_dataset:
        from cbench_builders.tracr.programs import write_dataset

        path = write_dataset([r.row for r in ok], out)
        click.echo(f"tracr-programs: {len(ok)} rows -> {path}")
    how = f"{jobs} job{'s' if jobs > 1 else ''}" if executor == "local" else f"{executor} executor"
    click.echo(f"{len(ok)} of {len(results)} cases written to {out} in {wall:.1f} s ({how})")
    failed = [r for r in results if not r.ok]
    for r in failed:
        click.echo(f"error: {r.error}", err=True)
    if failed:
        raise BuildError(f"{len(failed)} of {len(results)} cases failed: {', '.join(r.case for r in failed)}")
