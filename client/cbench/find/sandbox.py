"""Run untrusted interpreter code behind an OS-level boundary (bubblewrap), or refuse.

:func:`run_submissions` starts one supervisor (``_sandbox_child.py``) per batch of entries,
inside ``bwrap`` (Debian's ``bubblewrap``; ``make setup`` installs it; the details are in
:mod:`cbench.find._bwrap`):

* fresh user, PID, mount, network, IPC, UTS and cgroup namespaces; uid/gid 65534 inside, no
  capabilities, no_new_privs; further user namespaces disabled. When cbench runs as root, the
  host side drops to uid/gid 65534 before starting bwrap (so the sandbox's uid maps to an
  unprivileged host uid, for which the kernel enforces RLIMIT_NPROC); the interpreter's files
  are first bound, read-only, into a staging directory of a private mount namespace so that
  uid can reach them wherever they are installed (e.g. under /root).
* a read-only root holding only the interpreter, the directories of the shared libraries it
  maps, its standard library (site-packages hidden), numpy at ``/sandbox/site`` and the
  supervisor at ``/sandbox/child.py``; a fresh /proc and a minimal /dev; an empty read-only
  tmpfs as working directory. The suite, its cache, the scorer's files are not there.
* a seccomp filter (``_seccomp.program("sandbox")``: no setns, unshare, mount, ptrace,
  bpf, keyctl, io_uring, SysV IPC, inotify, sockets other than AF_UNIX, ...), plus a second one
  per entry (no new processes, no exec, no signals to others, nothing aimed at the supervisor:
  its limits, priority, affinity, or a descriptor owned by it);
* kernel rlimits per entry (RLIMIT_CPU, AS, FSIZE = 0, NOFILE = 4, NPROC = 0) set by the
  supervisor, which verifies nothing else runs after each entry;
* the supervisor is the init of the PID namespace (``--as-pid-1``) and keeps each entry's
  wall-clock limit whatever the entry does; the host kills bwrap's process group when the batch's
  budget passes or no entry has been answered for ``wall_s + HOST_GRACE_S``,
  ``--die-with-parent`` kills the supervisor and with it the kernel kills every process of the
  namespace.

Nothing of the suite (no answers, no paths) is passed to the sandbox: code and inputs go on
stdin; argv (``bwrap --args FD``) and the environment hold nothing of the run. Before any code
is sent, the supervisor reports what the kernel says about it (namespaces, uid map, seccomp,
capabilities, sockets) and the host refuses to go on unless the boundary holds.

Where the boundary cannot be set up (no bwrap, no user namespaces) scoring refuses with
:class:`SandboxUnavailableError`; only with ``trust_code=True`` (``cbench find score
--trust-code``) does the supervisor then run without it (seccomp filters, rlimits and the
audit hook only), and results.json's ``sandbox.boundary`` says ``"none"``. SECURITY.md
at the repository root lists what is guaranteed and the tests that show it.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass

from cbench.errors import FindError
from cbench.find.limits import Limits, check_limits
from cbench.find._bwrap import (  # noqa: F401  (NAMESPACES, WORKDIR, check_status, _host_namespaces: for tests)
    CHILD, FIX, NAMESPACES, SANDBOX_ENV, SANDBOX_UID, SECCOMP, WORKDIR, SandboxUnavailableError, _bwrap_args,
    _bwrap_version, _check_layout, _command, _data_fd, _drop, _host_env, _host_namespaces, _host_uid_problems,
    _private_paths, _reachable_by_others, _stage_and_drop, bwrap_path, check_status, layout,
)


#: how long past an entry's wall-clock limit the host waits for the supervisor's answer on it
#: (the supervisor kills the entry at its limit; this only ends a supervisor that stopped answering)
HOST_GRACE_S = 10.0


@dataclass(frozen=True)
class Outcome:
    key: str
    ok: bool
    outputs: list | None = None
    reason: str | None = None
    errors: int = 0


# =========================================================================== the runner
class _Batch:
    """One supervisor process: started, its status checked, the payload sent, the results read."""

    def __init__(self, boundary: str, private: list[str]):
        self.trust_code = trust_code = boundary == NONE
        self.private = private
        self.cleanup: list = []
        self.pass_fds: tuple = ()
        self.preexec = None
        if trust_code:
            self.workdir = tempfile.mkdtemp(prefix="cbench-find-sandbox-")
            self.cleanup.append(lambda: shutil.rmtree(self.workdir, ignore_errors=True))
            self.cmd = [*network_isolation(), sys.executable, "-I", str(CHILD)]
            return
        bwrap = bwrap_path()
        if not bwrap:
            raise SandboxUnavailableError(f"cannot sandbox submitted code: bubblewrap (bwrap) is not on PATH; {FIX}")
        lay = layout(sys.executable)
        _check_layout(lay, private)
        from cbench.find import _seccomp

        try:
            seccomp = _seccomp.program("sandbox", arch=lay["machine"])
        except OSError as exc:
            raise SandboxUnavailableError(f"cannot sandbox submitted code: {exc}; pass --trust-code to run it "
                                          "without a sandbox (only for code you trust)") from None
        binds = list(lay["binds"])
        if os.geteuid() == 0:
            if all(_reachable_by_others(src) for src, _ in binds):
                self.preexec = _drop
            else:
                stage = tempfile.mkdtemp(prefix="cbench-find-stage-")
                self.cleanup.append(lambda: shutil.rmtree(stage, ignore_errors=True))
                self.preexec = _stage_and_drop(stage, [src for src, _ in binds])
                binds = [(f"{stage}/{i}", dest) for i, (_, dest) in enumerate(binds)]
        fds = []
        try:
            fds.append(_data_fd(CHILD.read_bytes()))
            fds.append(_data_fd(SECCOMP.read_bytes()))
            fds.append(_data_fd(seccomp))
            args = _bwrap_args(lay, binds, fds[0], fds[1], fds[2])
            fds.append(_data_fd(b"".join(a.encode() + b"\0" for a in args)))
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self.pass_fds = tuple(fds)
        self.workdir = "/"
        self.cmd = [bwrap, "--args", str(fds[3]), "--", *_command(lay)]
        self.bwrap = bwrap

    def close(self):
        self._close_fds()
        for fn in reversed(self.cleanup):
            try:
                fn()
            except OSError:
                pass
        self.cleanup = []

    def _close_fds(self):
        fds, self.pass_fds = self.pass_fds, ()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass

    def run(self, payload: bytes, budget: float, step: float | None = None) -> tuple[bytes, dict | None]:
        """Start, check the status line (or raise), send the payload; the supervisor's output
        after its status line and the status. The supervisor is killed (with everything in its
        sandbox) ``budget`` seconds after the payload is sent or, with ``step``, when no line
        has come for ``step`` seconds (each line answers one entry); what it wrote until then
        is returned."""
        try:
            proc = subprocess.Popen(self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=self.workdir, env=_host_env() if not self.trust_code else SANDBOX_ENV,
                                    pass_fds=self.pass_fds, start_new_session=True,
                                    preexec_fn=self.preexec or (_trusted_preexec if self.trust_code else None))
        except (OSError, subprocess.SubprocessError) as exc:
            if self.trust_code:
                raise FindError(f"the scoring process failed to start: {exc}") from None
            if isinstance(exc, subprocess.SubprocessError) and self.preexec not in (None, _drop):
                raise SandboxUnavailableError(
                    "cannot sandbox submitted code: as root, binding the interpreter's files (which uid 65534 cannot "
                    "reach) into a private mount namespace failed (this needs CAP_SYS_ADMIN); run cbench as an "
                    "unprivileged user, or install Python and numpy where every user can read them, or pass "
                    "--trust-code to run the code without a sandbox (only for code you trust)") from None
            raise SandboxUnavailableError(f"cannot sandbox submitted code: starting bubblewrap failed ({exc}); "
                                          f"{FIX}") from None
        finally:
            self._close_fds()  # the child has its copies
        try:
            head, st = self._status(proc, min(budget, 60.0))
            if not self.trust_code:
                problems = check_status(st) if st is not None else ["no status"]
                problems += _host_uid_problems(proc.pid)
                if problems:
                    raise SandboxUnavailableError("cannot sandbox submitted code: the sandbox did not hold ("
                                                  + "; ".join(problems) + "); nothing was run")
            return head + _exchange(proc, payload, budget, step), st
        finally:
            _kill(proc)
            proc.wait()

    def _status(self, proc, timeout: float) -> tuple[bytes, dict | None]:
        import select

        fd = proc.stdout.fileno()
        buf = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            buf += chunk
        line, _, rest = buf.partition(b"\n")
        try:
            st = json.loads(line)["status"]
        except (ValueError, KeyError, TypeError):
            _kill(proc)
            err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
            why = err[-1] if err else f"the sandbox exited with status {proc.wait()}"
            if self.trust_code:
                raise FindError(f"the scoring process failed to start: {why}") from None
            raise SandboxUnavailableError(f"cannot sandbox submitted code: {_explain(why)}") from None
        return rest, st


def _exchange(proc, payload: bytes, budget: float, step: float | None) -> bytes:
    """Write ``payload`` to the supervisor's stdin (then close it) while reading its stdout and
    stderr; kill it ``budget`` seconds after the payload is sent, or when ``step`` seconds pass
    without a new line on stdout. Its stdout, up to where it ended."""
    import selectors

    sel = selectors.DefaultSelector()
    out, err_tail = bytearray(), bytearray()
    view = memoryview(payload)
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    os.set_blocking(stdin.fileno(), False)
    sel.register(stdin.fileno(), selectors.EVENT_WRITE, "in")
    sel.register(stdout.fileno(), selectors.EVENT_READ, "out")
    sel.register(stderr.fileno(), selectors.EVENT_READ, "err")
    open_reads = 2
    end = last = None  # set once the payload is sent: the supervisor reads it all before it starts
    sent_at = time.monotonic()
    try:
        while open_reads:
            now = time.monotonic()
            if view is not None and now - sent_at > budget:
                break
            deadlines = [d for d in (end, None if step is None or last is None else last + step) if d is not None]
            if deadlines and now >= min(deadlines):
                break
            timeout = (min(deadlines) - now) if deadlines else max(0.0, budget - (now - sent_at))
            for key, _ in sel.select(timeout):
                if key.data == "in":
                    try:
                        n = os.write(key.fd, view[:65536])
                    except BlockingIOError:
                        continue
                    except (BrokenPipeError, OSError):
                        n = len(view)
                    view = view[n:]
                    if not view:
                        sel.unregister(key.fd)
                        stdin.close()
                        view = None
                        end = last = time.monotonic()
                        end += budget
                    continue
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    sel.unregister(key.fd)
                    open_reads -= 1
                elif key.data == "out":
                    if b"\n" in chunk:
                        last = time.monotonic()
                    out += chunk
                else:
                    err_tail = (err_tail + chunk)[-4096:]
    finally:
        sel.close()
        if open_reads:
            _kill(proc)
        if not stdin.closed:
            try:
                stdin.close()
            except OSError:
                pass
    return bytes(out)


def _explain(why: str) -> str:
    low = why.lower()
    if "namespace" in low or "operation not permitted" in low or "permission denied" in low:
        return (f"bubblewrap could not set up the sandbox ({why}); user namespaces must be available to this user "
                "(sysctl user.max_user_namespaces > 0, kernel.unprivileged_userns_clone = 1 where it exists, and no "
                "AppArmor/container policy forbidding them), or pass --trust-code to run the submitted code without "
                "a sandbox (only for code you trust)")
    return f"bubblewrap failed ({why}); {FIX}"


def _kill(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except OSError:
        pass


def _trusted_preexec():
    for lim, val in ((resource.RLIMIT_CORE, 0),):
        try:
            resource.setrlimit(lim, (val, val))
        except (ValueError, OSError):
            pass


@functools.lru_cache(maxsize=1)
def network_isolation() -> tuple[str, ...]:
    """For --trust-code only: ``unshare -n`` (as root) or ``unshare -rn``, whichever works; ()."""
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


BWRAP, NONE = "bubblewrap", "none"


@functools.lru_cache(maxsize=None)
def _boundary_check(bwrap: str | None, executable: str, private: tuple) -> str | None:
    """None when a sandbox starts here and its status holds; else why not (cached per process)."""
    if not bwrap:
        return f"cannot sandbox submitted code: bubblewrap (bwrap) is not on PATH; {FIX}"
    batch = None
    try:
        batch = _Batch(BWRAP, list(private))
        batch.run(json.dumps({"entries": [], "limits": asdict(Limits())}).encode(), 60.0)
    except SandboxUnavailableError as exc:
        return str(exc)
    finally:
        if batch is not None:
            batch.close()
    return None


def resolve_boundary(trust_code: bool = False, private_paths: list | None = None) -> str:
    """``"bubblewrap"`` when the OS boundary can be set up here; otherwise raise
    :class:`SandboxUnavailableError` (one line: why, and how to fix it), or, with
    ``trust_code``, ``"none"``: the code then runs without it."""
    why = _boundary_check(bwrap_path(), sys.executable, tuple(_private_paths(private_paths)))
    if why is None:
        return BWRAP
    if trust_code:
        return NONE
    raise SandboxUnavailableError(why)


def guarantees(boundary: str = BWRAP) -> dict:
    """What held for a run (results.json's ``sandbox``; ``boundary`` says which)."""
    if boundary == NONE:
        return {"boundary": NONE, "trusted": True,
                "network": "new network namespace (unshare)" if network_isolation() else "not isolated",
                "note": "--trust-code and no sandbox could be set up: the code ran without the OS boundary (seccomp "
                        "filters, rlimits and the CPython audit hook only)"}
    bwrap = bwrap_path()
    return {"boundary": BWRAP, "trusted": False,
            "tool": _bwrap_version(bwrap) if bwrap else "bwrap",
            "user": f"uid {SANDBOX_UID} in a fresh user namespace, host uid "
                    f"{SANDBOX_UID if os.geteuid() == 0 else os.geteuid()}; no capabilities; no_new_privs",
            "namespaces": "user, pid, mount, network, ipc, uts, cgroup (fresh); nested user namespaces disabled",
            "network": "fresh network namespace (loopback only); sockets other than AF_UNIX refused (seccomp)",
            "files": "read-only root: the interpreter, its libraries and numpy; working directory an empty "
                     "read-only tmpfs; fresh /proc (the scorer is not in the PID namespace)",
            "seccomp": "no setns, unshare, mount, ptrace, bpf, keyctl, io_uring, SysV IPC, inotify, non-AF_UNIX "
                       "sockets; per function no new processes, no exec, no signals to other processes, no limits, "
                       "priority, scheduling or affinity of another process, no descriptor owner (F_SETOWN, F_SETSIG)",
            "limits": "per function RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE=0, RLIMIT_NOFILE=4, RLIMIT_NPROC=0; the wall "
                      "clock kept by the supervisor whatever the function does (its process group killed at the "
                      "deadline) and by the host for the supervisor",
            "verified": "each supervisor's namespaces, uid, seccomp and capabilities are checked before code is sent",
            "note": "CPython audit hooks are a second line, not the boundary"}


def _outcomes(stdout: bytes, entries: list[dict], n_numeric: int) -> dict[str, Outcome]:
    from cbench.find._sandbox_child import clean_result

    by_key = {e["key"]: e for e in entries}
    out: dict[str, Outcome] = {}
    for line in stdout.decode("utf-8", "replace").splitlines():
        try:
            r = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(r, dict) or not isinstance(r.get("key"), str) or r["key"] not in by_key or r["key"] in out:
            continue
        e = by_key[r["key"]]
        n = n_numeric if e["kind"] == "numeric" else len(e.get("inputs") or [])
        c = clean_result(r, e["kind"], n) or {"ok": False, "reason": "returned malformed output"}
        out[r["key"]] = Outcome(key=r["key"], ok=c["ok"], outputs=c.get("outputs"), reason=c.get("reason"),
                                errors=c.get("errors", 0))
    return out


def _run_batch(entries: list[dict], numeric_inputs: list[float], limits: Limits, boundary: str = BWRAP,
               private: list[str] | None = None) -> dict[str, Outcome]:
    payload = json.dumps({"entries": entries, "numeric_inputs": numeric_inputs, "limits": asdict(limits)}).encode()
    budget = 30 + len(entries) * (limits.wall_s + 1)
    batch = _Batch(boundary, private or [])
    try:
        stdout, _ = batch.run(payload, budget, step=limits.wall_s + HOST_GRACE_S)
    finally:
        batch.close()
    return _outcomes(stdout, entries, len(numeric_inputs))


def run_submissions(entries: list[dict], numeric_inputs: list[float], limits: Limits = Limits(),
                    batch_size: int = 200, *, trust_code: bool = False, boundary: str | None = None,
                    private_paths: list | None = None) -> dict[str, Outcome]:
    """Run every entry (``{"key", "kind": "numeric"|"strings", "code", "inputs"?}``) and return
    its outcome by key. Numeric entries are evaluated on ``numeric_inputs``.

    ``boundary`` (default: :func:`resolve_boundary` ``(trust_code)``) is ``"bubblewrap"`` or,
    only with ``trust_code``, ``"none"``; where the boundary cannot be set up this raises
    :class:`SandboxUnavailableError` before running anything. ``private_paths`` (e.g. the
    suite's directory) must not be visible inside the sandbox: it refuses to start if they
    would be.

    Entries run in order and answers stream back, so if a supervisor dies the first unanswered
    entry is the one it died on: that one is run again alone (a failure if it dies again), the
    rest go on in a new supervisor."""
    check_limits(limits)
    if boundary is None:
        boundary = resolve_boundary(trust_code, private_paths)
    elif boundary == NONE and not trust_code:
        raise ValueError("boundary 'none' needs trust_code=True")
    private = _private_paths(private_paths)
    results: dict[str, Outcome] = {}
    for start in range(0, len(entries), batch_size):
        pending = entries[start:start + batch_size]
        while pending:
            results.update(_run_batch(pending, numeric_inputs, limits, boundary, private))
            missing = [e for e in pending if e["key"] not in results]
            if not missing:
                break
            first = missing[0]
            alone = _run_batch([first], numeric_inputs, limits, boundary, private)
            results[first["key"]] = alone.get(first["key"]) or Outcome(
                key=first["key"], ok=False, reason="the sandbox process died or stopped answering while running "
                                                    "this code")
            pending = missing[1:]
    return results
