"""Run untrusted interpreter code in a separate, limited process.

:func:`run_submissions` starts one supervisor process (``_sandbox_child.py``) per batch:
``python -I`` (no user site, no PYTHON* variables, no current directory on sys.path), inside a
new network namespace (``unshare -n``) when the system allows it, with an environment of only
PATH, LANG and single-thread BLAS settings, an empty temporary working directory (removed
afterwards) and RLIMIT_AS/RLIMIT_CORE set before it starts. The supervisor forks one process
per entry with the per-entry limits described in that module. What this guarantees, and what
it does not, is in the README ("FIND: the sandbox").

Nothing of the suite (no answers, no paths) is passed to the sandbox: only code and inputs.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, asdict
from pathlib import Path

CHILD = Path(__file__).with_name("_sandbox_child.py")


@dataclass(frozen=True)
class Limits:
    """Per-entry limits (a batch may use ``len(entries) * wall_s`` in all)."""

    wall_s: float = 10.0
    cpu_s: int = 5
    memory_mb: int = 1024
    print_bytes: int = 65536
    output_bytes: int = 1 << 20


@dataclass(frozen=True)
class Outcome:
    key: str
    ok: bool
    outputs: list | None = None
    reason: str | None = None
    errors: int = 0


@functools.lru_cache(maxsize=1)
def network_isolation() -> tuple[str, ...]:
    """The command prefix that gives the sandbox no network: ``unshare -n`` (as root) or
    ``unshare -rn`` (an unprivileged user namespace), whichever works here; () if neither."""
    exe = shutil.which("unshare")
    if not exe:
        return ()
    for prefix in ((exe, "-n"), (exe, "-rn")):
        try:
            if subprocess.run([*prefix, "true"], capture_output=True, timeout=10).returncode == 0:
                return prefix
        except (OSError, subprocess.SubprocessError):
            continue
    return ()


def guarantees() -> dict:
    net = network_isolation()
    return {"process": "separate (python -I, forked per entry)",
            "network": "new network namespace (" + " ".join(Path(net[0]).name if i == 0 else a
                                                        for i, a in enumerate(net)) + ")" if net
            else "no new file descriptors (RLIMIT_NOFILE) and socket calls refused",
            "files": "no new file descriptors (RLIMIT_NOFILE); open/listdir refused; empty working dir",
            "note": "CPython audit hooks are a second line, not a boundary; the kernel limits are the guarantee"}


def _preexec(memory_mb: int):
    def fn():
        os.setsid()
        mem = (memory_mb + 512) * 1024 * 1024
        for lim, val in ((resource.RLIMIT_AS, mem), (resource.RLIMIT_CORE, 0)):
            try:
                resource.setrlimit(lim, (val, val))
            except (ValueError, OSError):
                pass
    return fn


def _env() -> dict:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def _run_batch(entries: list[dict], numeric_inputs: list[float], limits: Limits) -> dict[str, Outcome]:
    payload = json.dumps({"entries": entries, "numeric_inputs": numeric_inputs, "limits": asdict(limits)})
    workdir = tempfile.mkdtemp(prefix="cbench-find-sandbox-")
    cmd = [*network_isolation(), sys.executable, "-I", str(CHILD)]
    budget = 30 + len(entries) * (limits.wall_s + 1)
    out: dict[str, Outcome] = {}
    try:
        proc = subprocess.run(cmd, input=payload.encode(), capture_output=True, cwd=workdir, env=_env(),
                              timeout=budget, preexec_fn=_preexec(limits.memory_mb))
        stdout = proc.stdout
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout or b""
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    for line in stdout.decode("utf-8", "replace").splitlines():
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if isinstance(r, dict) and r.get("key") in {e["key"] for e in entries}:
            out[r["key"]] = Outcome(key=r["key"], ok=bool(r.get("ok")), outputs=r.get("outputs"),
                                    reason=r.get("reason"), errors=int(r.get("errors") or 0))
    return out


def run_submissions(entries: list[dict], numeric_inputs: list[float], limits: Limits = Limits(),
                    batch_size: int = 200) -> dict[str, Outcome]:
    """Run every entry (``{"key", "kind": "numeric"|"strings", "code", "inputs"?}``) and return
    its outcome by key. Numeric entries are evaluated on ``numeric_inputs``. Entries run in
    order and answers stream back, so if a supervisor dies the first unanswered entry is the
    one it died on: that one is run again alone (a failure if it dies again), the rest go on
    in a new supervisor."""
    results: dict[str, Outcome] = {}
    for start in range(0, len(entries), batch_size):
        pending = entries[start:start + batch_size]
        while pending:
            results.update(_run_batch(pending, numeric_inputs, limits))
            missing = [e for e in pending if e["key"] not in results]
            if not missing:
                break
            first = missing[0]
            alone = _run_batch([first], numeric_inputs, limits)
            results[first["key"]] = alone.get(first["key"]) or Outcome(
                key=first["key"], ok=False, reason="the sandbox process died while running this code")
            pending = missing[1:]
    return results
