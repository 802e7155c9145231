"""Time and peak memory of one call inside a long-lived process, for ``bench_scale.py`` and
``scale_autocircuit.py`` (no cbench import: the auto-circuit venv runs it too).

Peak memory: before each call the C heap's free lists are returned to the system
(``malloc_trim``), then Linux keeps a process's resident high-water mark (``VmHWM``); writing ``5`` to
``/proc/self/clear_refs`` resets it to the current RSS, so each call's peak is measured on its
own after the previous calls freed their tensors (torch returns large blocks to the system).
``added`` is that peak minus the RSS before the call. A GPU run reports
``torch.cuda.max_memory_allocated`` as well. A call past its time limit is interrupted
(``SIGPROF`` after that much CPU time of the process, so the limit does not depend on how
loaded the machine is; the methods loop in Python, so it lands between tensor operations)."""

from __future__ import annotations

import gc
import json
import signal
import time
from pathlib import Path

STATUS = Path("/proc/self/status")


def _status_mb(key: str) -> float:
    for line in STATUS.read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def trim_heap() -> None:
    """Return the C heap's free memory to the system (glibc ``malloc_trim``), so the resident
    size before a call is what is alive, not what earlier calls freed into the allocator's free
    lists (blocks under glibc's mmap threshold are otherwise kept: the floor left ~2.9 GB)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class TimeLimit(Exception):
    pass


def _alarm(_sig, _frame):
    raise TimeLimit()


def measure(fn, repeat: int = 1, timeout: float | None = None, cuda: bool = False) -> dict:
    """``{wall_s, cpu_s, rss_mb, peak_mb, added_mb[, gpu_peak_mb]}`` of ``fn()`` (times: the
    best of ``repeat`` calls; memory: the peak over all of them), or ``{"error": ...}``."""
    import torch

    gc.collect()
    trim_heap()
    rss0 = _status_mb("VmRSS")
    resettable = reset_peak()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = []
    old = signal.signal(signal.SIGPROF, _alarm)
    if timeout:
        signal.setitimer(signal.ITIMER_PROF, float(timeout))
    try:
        for _ in range(repeat):
            t, c = time.perf_counter(), time.process_time()
            fn()
            if cuda:
                torch.cuda.synchronize()
            times.append((time.perf_counter() - t, time.process_time() - c))
    except TimeLimit:  # the peak so far still tells how much memory the method holds
        peak = _status_mb("VmHWM")
        return {"error": f"not done in {timeout:.0f} s of CPU", "cpu_s_limit": timeout, "peak_mb": peak,
                "added_mb": max(0.0, peak - rss0) if resettable else float("nan")}
    except Exception as e:  # noqa: BLE001 - reported in the table, the run goes on
        return {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"}
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.signal(signal.SIGPROF, old)
    peak = _status_mb("VmHWM")
    wall, cpu = min(times)
    out = {"wall_s": wall, "cpu_s": cpu, "rss_mb": rss0, "peak_mb": peak,
           "added_mb": max(0.0, peak - rss0) if resettable else float("nan")}
    if cuda:
        out["gpu_peak_mb"] = torch.cuda.max_memory_allocated() / 2**20
    gc.collect()
    return out


def emit(name: str, result: dict) -> None:
    """One JSON line on stdout (the parent reads them as they come)."""
    print(json.dumps({"method": name, **result}), flush=True)
