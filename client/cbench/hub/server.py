"""olah on loopback over a hub directory: the Hugging Face protocol for a local hub.

:class:`HubServer` starts olah (>= 0.5, the ``hub`` extra) on 127.0.0.1 with offline mode on and
``mirrors-path`` set to the hub directory, behind :mod:`cbench.hub.api` (``python -m
cbench.hub.api``: the Hub API calls olah answers differently from huggingface.co, answered as
huggingface.co does), waits until it answers HTTP, and stops it (a context manager).
``cbench hub serve`` runs it in the foreground.

Facts about olah 0.5.4 this module relies on (read from its source, checked against a server):

* local repositories are found at ``<mirrors-path>/<models|datasets>/<org>/<name>`` (non-bare
  git); with ``[accessibility] offline = true`` it never contacts huggingface.co;
* ``/api/{type}/{org}/{name}/revision/{rev}``, ``/refs``, ``/tree/{rev}``, ``/resolve/{rev}/...``
  work for local repos; ``/api/{type}/{org}/{name}`` *without* a revision answers 401;
* a missing repository or a missing revision answers **401** ("Repository not found"), a
  missing file **500**, and ``/`` 500 (template bug): callers must pass explicit revisions and
  map errors themselves (:mod:`cbench.hub.pull` resolves names and tags before downloading);
* it imports FastAPI, pydantic and GitPython at start: about 1.5-2.5 s on this machine, which
  is why :meth:`HubServer.start` does not wait and :meth:`HubServer.wait_ready` is separate.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from cbench.errors import HubError, HubUnreachableError, UsageError

STARTUP_TIMEOUT_S = 60.0


def _die_with_parent() -> None:
    """In the olah child (Linux): get SIGTERM when the cbench process dies, even by SIGKILL, so a
    killed ``cbench pull`` leaves no server behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: stop() still runs on normal exits
        pass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def olah_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("olah") is not None and importlib.util.find_spec("olah.mirror") is not None


def _config_text(hub_dir: Path, port: int, cache_dir: Path) -> str:
    def q(p) -> str:
        return '"' + str(p).replace("\\", "\\\\").replace('"', '\\"') + '"'

    return (
        "[basic]\n"
        f'host = "127.0.0.1"\nport = {port}\n'
        f"repos-path = {q(cache_dir)}\n"
        f"mirrors-path = [{q(hub_dir)}]\n"
        f'mirror-scheme = "http"\nmirror-netloc = "127.0.0.1:{port}"\nmirror-lfs-netloc = "127.0.0.1:{port}"\n'
        "metadata-cache-ttl = 0\n"
        "\n[accessibility]\noffline = true\n"
    )


class HubServer:
    """olah serving ``hub_dir`` on ``http://127.0.0.1:<port>``.

    >>> with HubServer(hub_dir) as server:      # doctest: +SKIP
    ...     snapshot_download("cbench/case-3", endpoint=server.endpoint, revision=sha)
    """

    def __init__(self, hub_dir: str | os.PathLike, port: int | None = None, quiet: bool = True):
        self.hub_dir = Path(hub_dir).expanduser().resolve()
        self.port = port
        self.quiet = quiet
        self.process: subprocess.Popen | None = None
        self.startup_s: float | None = None
        self._tmp: str | None = None
        self._log = None
        self._t0 = 0.0

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -------------------------------------------------------------- lifecycle
    def start(self) -> "HubServer":
        """Launch olah (returns at once; :meth:`wait_ready` waits for it)."""
        if not self.hub_dir.is_dir():
            raise HubUnreachableError(f"hub directory {self.hub_dir} does not exist; publish into it first "
                                      "(cbench publish DIR --repo ORG/NAME --version v1.0.0 --hub DIR)")
        if not olah_available():
            raise HubError("serving a local hub needs olah >= 0.5 (the 'hub' extra): pip install 'olah>=0.5.4'")
        if self.port is None:
            self.port = free_port()
        elif not (0 < int(self.port) < 65536):
            raise UsageError(f"port {self.port} is not a TCP port (1-65535)")
        remove_stale_server_dirs()
        self._tmp = tempfile.mkdtemp(prefix=f"cbench-olah-{os.getpid()}-")
        tmp = Path(self._tmp)
        cfg = tmp / "olah.toml"
        cfg.write_text(_config_text(self.hub_dir, self.port, tmp / "repos"))
        # olah logs every request; in quiet mode into a file (a pipe nobody reads would fill up)
        self._log = open(tmp / "olah.out", "wb") if self.quiet else None
        self._t0 = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "cbench.hub.api", "--config", str(cfg), "--hub", str(self.hub_dir),
             "--port", str(self.port), "--log-path", str(tmp / "logs")],
            cwd=str(tmp), stdout=self._log, stderr=subprocess.STDOUT if self.quiet else None,
            stdin=subprocess.DEVNULL, env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True,
            preexec_fn=_die_with_parent)
        return self

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT_S) -> float:
        """Block until the server answers HTTP; return the startup time in seconds."""
        assert self.process is not None, "start() first"
        deadline = time.perf_counter() + timeout
        while True:
            if self.process.poll() is not None:
                err = self._log_text()
                last = [l for l in err.strip().splitlines() if l.strip()][-1:] or ["no output"]
                self._cleanup()
                raise HubError(f"the hub server (olah) exited at start (code {self.process.returncode}): {last[0]}"
                               + (f"; is port {self.port} in use?" if "address" in err.lower() else ""))
            if self._answers():
                self.startup_s = time.perf_counter() - self._t0
                return self.startup_s
            if time.perf_counter() > deadline:
                self.stop()
                raise HubError(f"the hub server (olah) did not answer within {timeout:.0f} s")
            time.sleep(0.03)

    def _answers(self) -> bool:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
            conn.request("GET", "/api/models/cbench/-/refs")
            conn.getresponse().read()
            conn.close()
            return True
        except (OSError, http.client.HTTPException):
            return False

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s) and remove its temporary files."""
        p = self.process
        if p is not None and p.poll() is None:
            try:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=5)
            except ProcessLookupError:  # pragma: no cover
                pass
        self._cleanup()

    def _log_text(self) -> str:
        try:
            return (Path(self._tmp) / "olah.out").read_text(errors="replace") if self._tmp else ""
        except OSError:
            return ""

    def _cleanup(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def serve_forever(self) -> None:
        """Run until interrupted (Ctrl-C or SIGTERM; ``cbench hub serve``)."""
        def _terminate(signum, frame):
            raise KeyboardInterrupt

        previous = signal.signal(signal.SIGTERM, _terminate)
        try:
            code = self.process.wait()
            if code:
                raise HubError(f"the hub server (olah) stopped with exit code {code}")
        finally:
            signal.signal(signal.SIGTERM, previous)
            self.stop()

    def __enter__(self) -> "HubServer":
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def remove_stale_server_dirs() -> None:
    """Remove ``cbench-olah-<pid>-*`` directories whose process is gone (a pull killed while olah
    ran leaves its configuration and logs behind; the next start cleans them up)."""
    import shutil

    from cbench.files.safe_io import pid_alive

    base = Path(tempfile.gettempdir())
    try:
        entries = list(base.glob("cbench-olah-*-*"))
    except OSError:
        return
    for d in entries:
        pid = d.name.split("-")[2]
        if pid.isdigit() and not pid_alive(int(pid)) and d.is_dir() and not d.is_symlink():
            try:
                if d.stat().st_uid == os.getuid():
                    shutil.rmtree(d, ignore_errors=True)
            except OSError:
                pass


# ---------------------------------------------------------------------------- one server per process
#: seconds an embedded server stays up after its last pull ends, so that consecutive pulls (a bench
#: over 57 models, the demo's 17) start olah once instead of once each (about 2.5 s a start)
SHARED_IDLE_S = 10.0

_shared_lock = threading.Lock()
_shared: dict[Path, "_Shared"] = {}


class _Shared:
    def __init__(self, server: HubServer):
        self.server, self.pid, self.users, self.timer = server, os.getpid(), 0, None


@contextlib.contextmanager
def shared_server(hub_dir: str | os.PathLike) -> Iterator[HubServer]:
    """A started server over ``hub_dir`` that this process's pulls share (the caller waits for it
    with :meth:`HubServer.wait_ready`, so work can overlap olah's start). It is started on first
    use, kept for :data:`SHARED_IDLE_S` seconds after the last user leaves, and stopped then or at
    exit. A forked child never uses (or stops) its parent's server, and a server that died (olah
    gets SIGTERM when the thread that started it ends) is replaced."""
    key = Path(hub_dir).expanduser().resolve()
    with _shared_lock:
        entry = _shared.get(key)
        if entry is not None and (entry.pid != os.getpid() or entry.server.process is None
                                  or entry.server.process.poll() is not None):
            if entry.pid == os.getpid():
                entry.server.stop()
            entry = None
        if entry is None:
            entry = _shared[key] = _Shared(HubServer(key).start())
            _register_exit_hook()
        if entry.timer is not None:
            entry.timer.cancel()
            entry.timer = None
        entry.users += 1
    try:
        yield entry.server
    except BaseException:
        with _shared_lock:  # a failed pull may have left the server in any state: do not keep it
            entry.users -= 1
            if _shared.get(key) is entry and entry.users == 0:
                del _shared[key]
                entry.server.stop()
        raise
    with _shared_lock:
        entry.users -= 1
        if _shared.get(key) is entry and entry.users == 0:
            entry.timer = threading.Timer(SHARED_IDLE_S, _stop_idle, (key, entry))
            entry.timer.daemon = True
            entry.timer.start()


def _stop_idle(key: Path, entry: _Shared) -> None:
    with _shared_lock:
        if _shared.get(key) is not entry or entry.users:
            return
        del _shared[key]
    entry.server.stop()


def stop_shared_servers() -> None:
    """Stop every shared server this process started (at exit; tests call it too)."""
    with _shared_lock:
        mine = [e for e in _shared.values() if e.pid == os.getpid()]
        _shared.clear()
    for entry in mine:
        if entry.timer is not None:
            entry.timer.cancel()
        entry.server.stop()


_exit_hook = False


def _register_exit_hook() -> None:
    global _exit_hook
    if not _exit_hook:
        atexit.register(stop_shared_servers)
        _exit_hook = True
