"""The sandbox supervisor: run untrusted interpreter code, one forked process per entry.

Started by :mod:`cbench.find.sandbox` as ``python -I _sandbox_child.py`` (inside ``unshare -n``
when available) with a stripped environment, an empty temporary working directory and resource
limits. It imports nothing from cbench and never sees any answer: it reads the code and the
inputs on stdin and writes one JSON line per entry (outputs or a failure reason) on stdout.

Each entry runs in a fork of this process that, before the user's code runs,
  * keeps exactly four file descriptors (0-2 -> /dev/null, 3 -> the result pipe) and lowers
    RLIMIT_NOFILE to 4, so the kernel refuses every new file, socket or pipe (EMFILE);
  * sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE = 0 and RLIMIT_NPROC = 0;
  * installs an audit hook that refuses opening files, sockets, new imports, subprocesses,
    exec, fork, kill, ctypes and setrlimit (and remembers the first attempt, so catching the
    PermissionError does not help: the entry fails with that reason);
  * counts what the code prints; past the limit the entry fails.
The supervisor kills an entry that outlives its wall-clock limit.
"""

import json
import os
import resource
import select
import signal
import sys
import time

# what user code may use without importing anything new
import bisect  # noqa: F401
import cmath  # noqa: F401
import collections  # noqa: F401
import functools  # noqa: F401
import heapq  # noqa: F401
import itertools  # noqa: F401
import math  # noqa: F401
import operator  # noqa: F401
import random  # noqa: F401
import re  # noqa: F401
import statistics  # noqa: F401
import string  # noqa: F401

import numpy  # noqa: F401

BLOCKED = {
    "open": "tried to open a file", "os.listdir": "tried to list a directory", "os.scandir": "tried to list a directory",
    "import": "tried to import a module that is not preloaded", "socket.": "tried to open a socket",
    "subprocess.": "tried to start a process", "os.system": "tried to start a process",
    "os.exec": "tried to start a process", "os.posix_spawn": "tried to start a process",
    "os.spawn": "tried to start a process", "os.fork": "tried to start a process",
    "os.forkpty": "tried to start a process", "os.kill": "tried to send a signal",
    "os.killpg": "tried to send a signal", "signal.pthread_kill": "tried to send a signal",
    "ctypes.": "tried to use ctypes", "resource.setrlimit": "tried to change resource limits",
    "resource.prlimit": "tried to change resource limits", "os.chdir": "tried to change directory",
    "os.remove": "tried to change files", "os.rename": "tried to change files", "os.rmdir": "tried to change files",
    "os.mkdir": "tried to change files", "os.symlink": "tried to change files", "os.link": "tried to change files",
    "os.truncate": "tried to change files", "os.chmod": "tried to change files", "os.chown": "tried to change files",
    "os.putenv": "tried to change the environment", "mmap.": "tried to map memory from a file",
    "urllib.": "tried to use the network", "http.": "tried to use the network",
}


class _State:
    violation = None
    printed = 0
    print_limit = 0
    print_over = False


NETWORK_MODULES = {"socket", "_socket", "ssl", "_ssl", "select", "selectors", "asyncio", "http", "urllib", "ftplib",
                   "smtplib", "socketserver", "xmlrpc", "requests", "urllib3"}


def _hook(event, args):
    if event == "import":
        name = str(args[0]) if args else "?"
        why = ("tried to open a socket" if name.split(".")[0] in NETWORK_MODULES
               else "tried to import a module that is not preloaded")
        if _State.violation is None:
            _State.violation = f"{why} (import {name})"
        raise PermissionError(f"blocked by the cbench sandbox: import {name}")
    for prefix, why in BLOCKED.items():
        if event == prefix or (prefix.endswith(".") and event.startswith(prefix)):
            if _State.violation is None:
                _State.violation = f"{why} ({event})"
            raise PermissionError(f"blocked by the cbench sandbox: {event}")


class _Counter:
    """Stands in for sys.stdout/sys.stderr: counts characters, keeps none."""

    encoding = "utf-8"

    def write(self, s):
        _State.printed += len(s)
        if _State.printed > _State.print_limit:
            _State.print_over = True
            raise _TooMuchOutput()
        return len(s)

    def flush(self):
        pass

    def isatty(self):
        return False


class _TooMuchOutput(BaseException):
    pass


def _run_entry(entry, numeric_inputs, limits):
    _State.print_limit = int(limits["print_bytes"])
    sys.stdout = sys.stderr = _Counter()
    code = entry["code"]
    try:
        compiled = compile(code, "<submission>", "exec")
    except (SyntaxError, ValueError) as exc:
        return {"ok": False, "reason": f"code does not compile: {type(exc).__name__}: {exc}"}
    sys.addaudithook(_hook)
    ns = {"__name__": "submission", "np": numpy, "numpy": numpy, "math": math}
    try:
        exec(compiled, ns)
    except _TooMuchOutput:
        return {"ok": False, "reason": f"printed more than {_State.print_limit} characters"}
    except MemoryError:
        return {"ok": False, "reason": "ran out of memory"}
    except BaseException as exc:  # noqa: BLE001 - the user's code, anything goes
        if _State.violation:
            return {"ok": False, "reason": _State.violation}
        return {"ok": False, "reason": f"code raised {type(exc).__name__}: {str(exc)[:200]}"}
    fn = ns.get("f") or ns.get("function")
    if _State.violation:
        return {"ok": False, "reason": _State.violation}
    if not callable(fn):
        return {"ok": False, "reason": "code defines no function `f(x)`"}
    inputs = numeric_inputs if entry["kind"] == "numeric" else entry["inputs"]
    outs = []
    errors = 0
    for x in inputs:
        try:
            y = fn(x)
            if entry["kind"] == "numeric":
                y = float(numpy.asarray(y, dtype=float).reshape(-1)[0]) if numpy.ndim(y) else float(y)
                y = y if math.isfinite(y) else None
            else:
                y = y if isinstance(y, str) else None
        except _TooMuchOutput:
            return {"ok": False, "reason": f"printed more than {_State.print_limit} characters"}
        except MemoryError:
            return {"ok": False, "reason": "ran out of memory"}
        except BaseException:  # noqa: BLE001
            y = None
            errors += 1
        if _State.violation:
            return {"ok": False, "reason": _State.violation}
        if _State.print_over:
            return {"ok": False, "reason": f"printed more than {_State.print_limit} characters"}
        outs.append(y)
    return {"ok": True, "outputs": outs, "errors": errors}


def _child(entry, numeric_inputs, limits, wfd):
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if wfd != 3:
        os.dup2(wfd, 3)
    os.closerange(4, 65536)
    cpu = int(limits["cpu_s"])
    mem = int(limits["memory_mb"]) * 1024 * 1024
    for lim, soft, hard in ((resource.RLIMIT_NOFILE, 4, 4), (resource.RLIMIT_CPU, cpu, cpu + 1),
                            (resource.RLIMIT_FSIZE, 0, 0), (resource.RLIMIT_NPROC, 0, 0), (resource.RLIMIT_CORE, 0, 0),
                            (resource.RLIMIT_AS, mem, mem)):
        try:
            resource.setrlimit(lim, (soft, hard))
        except (ValueError, OSError):
            pass
    try:
        result = _run_entry(entry, numeric_inputs, limits)
    except BaseException as exc:  # noqa: BLE001
        result = {"ok": False, "reason": _State.violation or f"sandbox error: {type(exc).__name__}"}
    data = json.dumps(result).encode()
    view = memoryview(data)
    while view:
        n = os.write(3, view)
        view = view[n:]


def _supervise(entry, numeric_inputs, limits):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _child(entry, numeric_inputs, limits, w)
        finally:
            os._exit(0)
    os.close(w)
    deadline = time.monotonic() + float(limits["wall_s"])
    cap = int(limits["output_bytes"])
    chunks, size, reason = [], 0, None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = f"ran longer than {limits['wall_s']} s (stopped)"
            break
        ready, _, _ = select.select([r], [], [], left)
        if not ready:
            continue
        chunk = os.read(r, 65536)
        if not chunk:
            break
        size += len(chunk)
        if size > cap:
            reason = f"returned more than {cap} bytes of output"
            break
        chunks.append(chunk)
    if reason:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    os.close(r)
    _, status, usage = os.wait4(pid, 0)
    if reason:
        return {"ok": False, "reason": reason}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= limits["cpu_s"]):
            return {"ok": False, "reason": f"used more than {limits['cpu_s']} s of CPU time (stopped)"}
        return {"ok": False, "reason": f"crashed with signal {signal.Signals(sig).name}"}
    try:
        return json.loads(b"".join(chunks) or b"null") or {"ok": False, "reason": "returned nothing"}
    except ValueError:
        return {"ok": False, "reason": "returned malformed output"}


def main():
    payload = json.loads(sys.stdin.buffer.read())
    limits = payload["limits"]
    numeric_inputs = payload.get("numeric_inputs") or []
    out = sys.stdout
    for entry in payload["entries"]:
        res = _supervise(entry, numeric_inputs, limits)
        res["key"] = entry["key"]
        out.write(json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
