"""The sandbox supervisor: run untrusted interpreter code, one forked process per entry.

:mod:`cbench.find.sandbox` starts this file as ``python -I -S /sandbox/child.py --sandboxed``
inside bubblewrap (fresh user, PID, mount, network, IPC, UTS and cgroup namespaces; uid 65534
with no capabilities and no_new_privs; a read-only root holding only the interpreter, its
libraries and numpy; the seccomp filter of :mod:`cbench.find._seccomp`, bound beside this
file as ``/sandbox/_seccomp.py``). It imports nothing else from cbench and never sees an
answer; it is the init of the sandbox's PID namespace. It writes one status line (what the kernel says
about this process: namespaces, uid map, seccomp, capabilities), then reads the code and the
inputs on stdin and writes one JSON line per entry (outputs or a failure reason) on stdout.

Each entry runs in a fork of this process that, before the user's code runs,
  * keeps exactly four file descriptors (0-2 -> /dev/null, 3 -> the result pipe) and lowers
    RLIMIT_NOFILE to 4, so the kernel refuses every new file, socket or pipe (EMFILE);
  * sets RLIMIT_CPU, RLIMIT_AS, RLIMIT_FSIZE = 0, RLIMIT_NPROC = 0, RLIMIT_CORE = 0;
  * moves to its own process group and installs a second seccomp filter
    (``_seccomp.program("entry", pid)``): no new processes (fork, vfork, clone without CLONE_THREAD), no exec,
    no signals to any process but itself, no setpgid/setsid, no memfd; prlimit64, setpriority and
    sched_set* on itself only, no ioprio_set, no F_SETOWN/F_SETOWN_EX/F_SETSIG/F_NOTIFY;
  * installs an audit hook that refuses opening files, sockets, new imports, subprocesses,
    exec, fork, kill, ctypes and setrlimit (and remembers the first attempt, so catching the
    PermissionError does not help: the entry fails with that reason). The hook is a second
    line only: the code can switch it off, the kernel limits above stay;
  * counts what the code prints; past the limit the entry fails.
The supervisor is not dumpable (entries cannot read its memory, descriptors or environment),
kills an entry's process group at its wall-clock deadline (waiting for it with SIGCHLD blocked
and ``sigtimedwait``, never without a timeout, so a closed pipe or a stopped entry changes
nothing) and, as the init of the sandbox's PID
namespace, kills every other process (``kill(-1, SIGKILL)``) after each entry. Results an entry writes
are checked (:func:`clean_result`) before they are passed on, and again by the host.

``--probe`` (run outside the sandbox by the host, never on user code) prints the files this
process maps once everything is imported, from which the host builds the sandbox's root.
Without ``--sandboxed`` (``cbench find score --trust-code``) the same supervisor runs without
the OS boundary; it still installs both seccomp filters itself.
"""

import json
import math
import os
import resource
import select
import signal
import sys
import time

if __name__ == "__main__" and "--site" in sys.argv:  # numpy, bound read-only by the host
    sys.path.insert(0, sys.argv[sys.argv.index("--site") + 1])

# what user code may use without importing anything new
import bisect  # noqa: F401,E402
import cmath  # noqa: F401,E402
import collections  # noqa: F401,E402
import functools  # noqa: F401,E402
import heapq  # noqa: F401,E402
import itertools  # noqa: F401,E402
import operator  # noqa: F401,E402
import random  # noqa: F401,E402
import re  # noqa: F401,E402
import statistics  # noqa: F401,E402
import string  # noqa: F401,E402

import numpy  # noqa: E402

if __name__ == "__main__":  # /sandbox/_seccomp.py beside /sandbox/child.py (or this package's folder)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import _seccomp as seccomp  # noqa: E402

    del sys.path[0]
else:
    from cbench.find import _seccomp as seccomp  # noqa: E402


# =========================================================================== the entry
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
    for name in [m for m in sys.modules if m == "ctypes" or m.startswith("ctypes.")]:
        del sys.modules[name]  # importing it again goes through the hook
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


#: the largest integer output accepted (beyond it a float loses whole numbers; JSON may hold any)
MAX_INT = 2 ** 53


def clean_result(res, kind, n_inputs):
    """The result an entry reported, checked: ``{"ok": False, "reason": str}`` or ``{"ok": True,
    "outputs": [n_inputs of float|None (numeric) or str|None (strings)], "errors": int}``;
    None for anything else (an entry writes what it likes on its pipe): only finite floats and
    integers within +-2**53 are numbers here, so no value can make the check itself fail."""
    if not isinstance(res, dict) or not isinstance(res.get("ok"), bool):
        return None
    if not res["ok"]:
        reason = res.get("reason")
        return {"ok": False, "reason": reason[:1000] if isinstance(reason, str) and reason else "failed"}
    outs, errors = res.get("outputs"), res.get("errors", 0)
    if not isinstance(outs, list) or len(outs) != n_inputs:
        return None
    if type(errors) is not int or not 0 <= errors <= n_inputs:
        return None
    clean = []
    for y in outs:
        if y is None:
            clean.append(None)
        elif kind == "numeric" and type(y) is float and math.isfinite(y):
            clean.append(y)
        elif kind == "numeric" and type(y) is int and -MAX_INT <= y <= MAX_INT:
            clean.append(float(y))
        elif kind == "strings" and type(y) is str:
            clean.append(y)
        else:
            return None
    return {"ok": True, "outputs": clean, "errors": errors}


def _child(entry, numeric_inputs, limits, wfd):
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the supervisor blocks SIGCHLD; user code gets a clean mask
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    if wfd != 3:
        os.dup2(wfd, 3)
    os.closerange(4, 65536)
    os.setpgid(0, 0)
    cpu = int(limits["cpu_s"])
    mem = int(limits["memory_mb"]) * 1024 * 1024
    for lim, soft, hard in ((resource.RLIMIT_NOFILE, 4, 4), (resource.RLIMIT_CPU, cpu, cpu + 1),
                            (resource.RLIMIT_FSIZE, 0, 0), (resource.RLIMIT_NPROC, 0, 0), (resource.RLIMIT_CORE, 0, 0),
                            (resource.RLIMIT_MSGQUEUE, 0, 0), (resource.RLIMIT_AS, mem, mem)):
        try:
            resource.setrlimit(lim, (soft, hard))
        except (ValueError, OSError):
            if lim in (resource.RLIMIT_NOFILE, resource.RLIMIT_CPU, resource.RLIMIT_AS, resource.RLIMIT_FSIZE):
                raise
    seccomp.install(seccomp.program("entry", os.getpid()))
    result = _run_entry(entry, numeric_inputs, limits)
    data = json.dumps(result).encode()
    view = memoryview(data)
    while view:
        n = os.write(3, view)
        view = view[n:]


def _supervise(entry, numeric_inputs, limits):
    """Run one entry in a fork and return its checked result. The entry's wall-clock limit is
    kept whatever it does to its descriptors or signals: the pipe is read until the deadline,
    and then the process itself is waited for only until the same deadline (SIGCHLD is blocked
    in the supervisor, so ``sigtimedwait`` sees every exit). At the deadline its process group
    is killed; time it spends stopped counts like any other."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            _child(entry, numeric_inputs, limits, w)
        except BaseException as exc:  # noqa: BLE001 - report it as this entry's failure, never go on
            try:
                msg = json.dumps({"ok": False, "reason": _State.violation or f"sandbox error: {type(exc).__name__}"})
                os.write(3, msg.encode())
            except BaseException:  # noqa: BLE001
                pass
        finally:
            os._exit(0)
    os.close(w)
    try:
        os.setpgid(pid, pid)  # also done by the child; whichever runs first
    except OSError:
        pass
    deadline = time.monotonic() + float(limits["wall_s"])
    cap = int(limits["output_bytes"])
    chunks, size, reason = [], 0, None
    too_long = f"ran longer than {limits['wall_s']} s (stopped)"
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            reason = too_long
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
    os.close(r)
    if reason is None:
        done = _wait_until(pid, deadline)
        if done is None:
            reason = too_long
    if reason is not None:
        _kill_entry(pid)
        done = os.wait4(pid, 0)
    _, status, usage = done
    if reason:
        return {"ok": False, "reason": reason}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= limits["cpu_s"]):
            return {"ok": False, "reason": f"used more than {limits['cpu_s']} s of CPU time (stopped)"}
        return {"ok": False, "reason": f"crashed with signal {signal.Signals(sig).name}"}
    try:
        res = json.loads(b"".join(chunks) or b"null")
    except (ValueError, RecursionError):
        return {"ok": False, "reason": "returned malformed output"}
    if res is None:
        return {"ok": False, "reason": "returned nothing"}
    n = len(numeric_inputs) if entry["kind"] == "numeric" else len(entry.get("inputs") or [])
    return clean_result(res, entry["kind"], n) or {"ok": False, "reason": "returned malformed output"}


def _wait_until(pid, deadline):
    """``os.wait4(pid)``'s answer once the entry has exited, or None if it has not by the
    deadline (stopped, asleep, spinning: whatever it does, this returns then)."""
    while True:
        done = os.wait4(pid, os.WNOHANG)
        if done[0] == pid:
            return done
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        signal.sigtimedwait([signal.SIGCHLD], left)


def _kill_entry(pid):
    """SIGKILL to the entry's process group and to the entry (a stopped process dies too)."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


# =========================================================================== the supervisor
def _in_sandbox_pid_namespace():
    """True when this process is the init of its PID namespace (bwrap --as-pid-1), so
    ``kill(-1)`` reaches only the sandbox's own processes."""
    return os.getpid() == 1


def _sweep():
    """As the init of the sandbox's PID namespace only: kill every other process (nothing but
    the current entry should exist), then reap them."""
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass


def status() -> dict:
    """What the kernel says about this process (checked by the host before it sends any code)."""
    st = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("Uid", "Gid", "NoNewPrivs", "Seccomp", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                       "NSpid"):
                st[key] = val.split()
    for name in ("uid_map", "gid_map"):
        try:
            with open(f"/proc/self/{name}") as f:
                st[name] = [line.split() for line in f if line.strip()]
        except OSError:
            st[name] = None
    st["ns"] = {}
    for ns in ("user", "pid", "mnt", "net", "ipc", "uts"):
        try:
            st["ns"][ns] = os.readlink(f"/proc/self/ns/{ns}")
        except OSError:
            st["ns"][ns] = None
    try:
        import _socket

        s = _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM)
        s.close()
        st["inet_socket"] = "allowed"
    except OSError as exc:
        st["inet_socket"] = f"refused (errno {exc.errno})"
    sys.modules.pop("_socket", None)  # importing it again goes through the hook
    try:
        with open("/proc/net/dev") as f:
            st["net_devices"] = sorted(line.split(":")[0].strip() for line in f if ":" in line)
    except OSError:
        st["net_devices"] = None
    st["pid"] = os.getpid()
    st["cwd"] = os.getcwd()
    st["cwd_writable"] = os.access(".", os.W_OK) and _writable(".")
    st["root_writable"] = _writable("/")
    return st


def _writable(d):
    try:
        fd = os.open(os.path.join(d, ".cbench-write-test"), os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o600)
    except OSError:
        return False
    os.close(fd)
    os.unlink(os.path.join(d, ".cbench-write-test"))
    return True


def _probe():
    """Outside the sandbox, on no user code: the files this interpreter maps with everything
    the supervisor imports, and where its standard library and numpy live."""
    import sysconfig

    import _socket  # noqa: F401  (the status line uses it)

    maps = set()
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) == 6 and parts[5].startswith("/"):
                maps.add(parts[5].rstrip("\n").removesuffix(" (deleted)"))
    paths = sysconfig.get_paths()
    print(json.dumps({"executable": os.path.realpath(sys.executable), "maps": sorted(maps),
                      "stdlib": sorted({os.path.realpath(paths["stdlib"]), os.path.realpath(paths["platstdlib"])}),
                      "numpy": os.path.realpath(os.path.dirname(numpy.__file__)), "machine": seccomp.machine()}))


def main():
    args = sys.argv[1:]
    if "--probe" in args:
        _probe()
        return
    sandboxed = "--sandboxed" in args
    seccomp.prctl(seccomp.PR_SET_DUMPABLE, 0)
    seccomp.prctl(seccomp.PR_SET_CHILD_SUBREAPER, 1)
    notes = []
    if not sandboxed:  # --trust-code: no bubblewrap; the filters are what is left
        try:
            seccomp.install(seccomp.program("sandbox"))
        except OSError as exc:
            notes.append(f"seccomp filter not installed: {exc}")
    out = sys.stdout
    st = status()
    st["notes"] = notes
    out.write(json.dumps({"status": st}) + "\n")
    out.flush()
    payload = json.loads(sys.stdin.buffer.read())
    limits = payload["limits"]
    numeric_inputs = payload.get("numeric_inputs") or []
    entries = payload["entries"]
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    mem = (int(limits["memory_mb"]) + 512) * 1024 * 1024
    own = [(resource.RLIMIT_FSIZE, 0), (resource.RLIMIT_CORE, 0), (resource.RLIMIT_MSGQUEUE, 0),
           (resource.RLIMIT_NOFILE, 64), (resource.RLIMIT_AS, mem)]
    if sandboxed:  # counted per user namespace: only this sandbox's processes
        own.append((resource.RLIMIT_NPROC, 8))
    for lim, val in own:
        try:
            resource.setrlimit(lim, (val, val))
        except (ValueError, OSError):
            pass
    sweep = sandboxed and _in_sandbox_pid_namespace()
    signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGCHLD])  # waited for with sigtimedwait (_wait_until)
    for entry in entries:
        try:
            res = _supervise(entry, numeric_inputs, limits)
        except Exception as exc:  # noqa: BLE001 - this entry's failure, never the end of the batch
            res = {"ok": False, "reason": f"sandbox error: {type(exc).__name__}"}
        if sweep:
            _sweep()
        res["key"] = entry["key"]
        out.write(json.dumps(res) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
