"""Where a batch of independent tasks runs: in this process (``local``, the default), in a pool of
local worker processes (``local`` with ``workers`` > 1), or on Ray.

Both executors take the same task function and the same tasks and hand every outcome back to the
caller, in this process, through one callback; the caller writes the results. So a run on Ray
writes its files through exactly the code of a serial run, and both give the same files.

Ray is an optional extra (``pip install 'cbench[ray]'``). With no address Ray starts a private
local instance with ``workers`` CPUs (default: all of them) and stops it afterwards; with
``--ray-address`` (``auto``, ``ray://host:10001``, ``host:6379``) the tasks go to that cluster,
whose workers need cbench installed and the hub (or the artifacts' paths) reachable.

A task function must be importable by name (a module-level function): Ray ships it to the
workers by reference. It must not rely on state left by earlier tasks in the same process.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from cbench.errors import CbenchError, UsageError

EXECUTORS = ("local", "ray")
# what every task that runs a model imports: loaded once before local workers fork
_MODEL_MODULES = ("torch", "cbench.artifacts.transformer_lens_adapter")
# environment passed to Ray workers so they use the same hub, cache and thread count as the driver
_FORWARDED_ENV = ("CBENCH_HOME", "CBENCH_HUB", "CBENCH_ENDPOINT", "CBENCH_ZOO", "CBENCH_THREADS", "HF_HUB_OFFLINE",
                  "OMP_NUM_THREADS")


@dataclass(frozen=True)
class Outcome:
    """What one task gave: ``value`` when ``ok``, else ``error`` (one line) and whether it was a
    :class:`CbenchError` (a user-facing failure) or an internal one; ``where`` names the process."""

    ok: bool
    value: Any = None
    error: str = ""
    cbench_error: bool = False
    where: str = ""


def run_task(fn: Callable[[Any], Any], task: Any) -> Outcome:
    """Run ``fn(task)`` and turn any exception into a failed :class:`Outcome` (in a worker, too:
    exceptions never have to travel between processes)."""
    import socket

    where = f"{socket.gethostname()}:{os.getpid()}"
    try:
        return Outcome(True, fn(task), where=where)
    except CbenchError as exc:
        return Outcome(False, error=str(exc), cbench_error=True, where=where)
    except Exception as exc:  # noqa: BLE001 - one failed task must not end a batch
        return Outcome(False, error=f"internal error: {type(exc).__name__}: {exc}", where=where)


OnResult = Callable[[Any, Outcome, int, int], None]  # (task, outcome, number done, total)


class LocalExecutor:
    """Runs the tasks one after another in this process, in the order given."""

    name = "local"

    def map(self, fn: Callable[[Any], Any], tasks: Sequence, on_result: OnResult) -> None:
        for i, task in enumerate(tasks, start=1):
            on_result(task, run_task(fn, task), i, len(tasks))

    def close(self) -> None:
        pass


class ProcessExecutor:
    """Runs the tasks on ``workers`` local processes forked from this one (so they start without
    importing torch again), handing each outcome back here as it finishes; tasks are submitted in
    the order given (put the longest first). Each worker runs one torch thread per task the way the
    serial loop does (``CBENCH_THREADS``), so the results are those of a serial run.

    ``preload``: modules imported here before the workers fork, so that they inherit them instead
    of each importing them again (TransformerLens takes about 8 s of CPU to import)."""

    name = "processes"

    def __init__(self, workers: int, preload: Sequence[str] = ()):
        import multiprocessing

        self.workers = int(workers)
        self.preload = tuple(preload)
        # fork: a worker inherits the imported modules (about 8 s of imports saved per worker) and
        # the environment; the parent has run no torch operation yet when the pool starts
        self._context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                                    else "spawn")

    def map(self, fn: Callable[[Any], Any], tasks: Sequence, on_result: OnResult) -> None:
        from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
        from concurrent.futures.process import BrokenProcessPool

        import importlib

        if not tasks:
            return
        for module in self.preload:
            importlib.import_module(module)
        pool = ProcessPoolExecutor(max_workers=min(self.workers, len(tasks)), mp_context=self._context)
        pending = {}
        try:
            pending = {pool.submit(run_task, fn, task): task for task in tasks}
            done = 0
            while pending:
                finished, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in finished:
                    task = pending.pop(fut)
                    try:
                        outcome = fut.result()
                    except BrokenProcessPool as exc:  # a worker died (killed, out of memory)
                        outcome = Outcome(False, error=f"the worker process died: {exc}")
                    done += 1
                    on_result(task, outcome, done, len(tasks))
        finally:
            for fut in pending:  # interrupted: run nothing more
                fut.cancel()
            pool.shutdown(wait=True, cancel_futures=True)

    def close(self) -> None:
        pass


class RayExecutor:
    """Runs each task as a Ray task (one CPU each) and reports outcomes as they finish."""

    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, echo: Callable[[str], None] = print):
        try:
            import ray
        except ImportError:
            raise UsageError("--executor ray needs Ray: pip install 'cbench[ray]' (or pip install ray)") from None
        self._ray, self._echo = ray, echo
        env = {k: os.environ[k] for k in _FORWARDED_ENV if k in os.environ}
        env.setdefault("CBENCH_THREADS", "1")
        kwargs: dict = {"runtime_env": {"env_vars": env}, "log_to_driver": True, "logging_level": "ERROR",
                        "configure_logging": True}
        if address:
            if workers is not None:
                raise UsageError("--workers sets the CPUs of a local Ray instance; a cluster (--ray-address) "
                                 "has its own")
            kwargs["address"] = address
        else:
            # "local": always a new private instance, never a cluster that `ray start` left running
            kwargs.update(address="local", num_cpus=workers or os.cpu_count() or 1, include_dashboard=False)
        # Ray lowers its workers' priority by 15 by default; on a shared machine that starves them
        # behind every other job (the driver already runs at the priority the user chose)
        os.environ.setdefault("RAY_worker_niceness", "0")
        self._started = not ray.is_initialized()
        t0 = time.perf_counter()
        try:
            if self._started:
                ray.init(**kwargs)
        except Exception as exc:  # noqa: BLE001 - Ray's own error types vary by version
            where = f"the Ray cluster at {address}" if address else "a local Ray instance"
            raise CbenchError(f"could not start or reach {where}: {str(exc).splitlines()[0] if str(exc) else exc}") \
                from None
        cpus = ray.cluster_resources().get("CPU", 0)
        echo(f"ray: {'connected to ' + address if address else 'local instance'} with {cpus:g} CPUs "
             f"({time.perf_counter() - t0:.1f} s to start)")
        self._remote = ray.remote(num_cpus=1, max_retries=0)(run_task)

    def map(self, fn: Callable[[Any], Any], tasks: Sequence, on_result: OnResult) -> None:
        ray = self._ray
        pending = {self._remote.remote(fn, task): task for task in tasks}
        done = 0
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                for ref in ready:
                    task = pending.pop(ref)
                    try:
                        outcome = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - a worker died (killed, out of memory)
                        outcome = Outcome(False, error=f"the Ray worker failed: {str(exc).splitlines()[0]}")
                    done += 1
                    on_result(task, outcome, done, len(tasks))
        finally:
            for ref in pending:  # interrupted: do not leave tasks running on the cluster
                ray.cancel(ref, force=True)

    def close(self) -> None:
        if self._started and self._ray.is_initialized():
            self._ray.shutdown()


def make_executor(name: str = "local", address: str | None = None, workers: int | None = None,
                  echo: Callable[[str], None] = print):
    """The executor called ``name``; ``address`` only applies to Ray; ``workers``: the processes of
    the local executor (None or 1: this process), the CPUs of a private local Ray instance."""
    if name not in EXECUTORS:
        raise UsageError(f"--executor must be one of {', '.join(EXECUTORS)}, not {name!r}")
    if name == "local":
        if address:
            raise UsageError("--ray-address needs --executor ray")
        if workers is not None and workers < 1:
            raise UsageError("--workers must be at least 1")
        return LocalExecutor() if workers in (None, 1) else ProcessExecutor(workers, preload=_MODEL_MODULES)
    if workers is not None and workers < 1:
        raise UsageError("--workers must be at least 1")
    return RayExecutor(address=address, workers=workers, echo=echo)


def progress_line(done: int, total: int, what: str, outcome: Outcome, t0: float) -> str:
    """``[3/32 12.4 s] case 3, acdc: ok (host:pid)``: one line per finished task."""
    state = "ok" if outcome.ok else f"failed ({outcome.error})"
    where = f" ({outcome.where})" if outcome.where else ""
    return f"[{done}/{total} {time.perf_counter() - t0:.1f} s] {what}: {state}{where}"
