"""The FIND sandbox against escapes: one hostile submission per class (issue 33).

Every submission first switches the CPython audit hook off (escape 1 of the issue: it replaces
the hook's code object), frees descriptor slots (escape 2: closes 0-2) and then tries its
escape, so what is tested is the OS boundary (bubblewrap, seccomp, rlimits), not the hook.
Each must fail to escape, leave the host unchanged (planted files, no stray processes, no
connection to a server on the host's 127.0.0.1, no secret of the scorer in any output) and
score as a failed function. A submission reports what it tried by returning a JSON report
from ``f`` (a strings function, so it fails its 10 test outputs) or in its failure reason.
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from cbench.find import sandbox as S
from cbench.find import scoring
from cbench.find.sandbox import Limits, SandboxUnavailableError, run_submissions
from cbench.find.suite import FindSuite
from cbench.schemas import validate

ROOT = Path(__file__).resolve().parents[1]
LIMITS = Limits(wall_s=4.0, cpu_s=2, memory_mb=256, print_bytes=4096)
N_STRINGS = 14
MARK = "cbx" + uuid.uuid4().hex[:10]  # the comm name a process that outlived its entry would carry

# ------------------------------------------------------------------ a tiny suite on disk
STRING_WORDS = ["apple", "banana", "cherry", "delta", "echo", "fox", "golf", "hotel", "india", "julia"]


def _write_suite(root: Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"id": f"s{i:04d}", "subcategory": "atomic", "family": "reverse",
             "spec": json.dumps({"kind": "atomic", "op": "reverse"}), "code": "def f(x):\n    return x[::-1]\n",
             "domain": None, "corrupted": False, "interval_lo": None, "interval_hi": None,
             "test_inputs": STRING_WORDS, "test_outputs": [w[::-1] for w in STRING_WORDS]} for i in range(N_STRINGS)]
    (root / "strings").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), root / "strings" / "test-00000-of-00001.parquet")
    rows = [{"id": "n0000", "subcategory": "atomic", "family": "polynomial",
             "spec": json.dumps({"kind": "polynomial", "coef": [1.0, 2.0]}), "code": "1.0 + 2.0 * x",
             "domain": None, "corrupted": False, "interval_lo": None, "interval_hi": None,
             "test_inputs": [], "test_outputs": []}]
    (root / "numeric").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), root / "numeric" / "test-00000-of-00001.parquet")
    return root


@pytest.fixture(scope="module")
def suite_dir(tmp_path_factory) -> Path:
    return _write_suite(tmp_path_factory.mktemp("cbench-escape-suite") / "find")


# ------------------------------------------------------------------ the host's side
def _digest(path: Path) -> tuple:
    st = path.stat()
    return hashlib.sha256(path.read_bytes()).hexdigest(), st.st_ino, st.st_mtime_ns, st.st_size, st.st_mode


def _tree(root: Path) -> dict:
    return {str(p.relative_to(root)): _digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def sandbox_processes() -> list[tuple[int, str]]:
    """Live (not zombie) processes on the host that belong to a sandbox: bwrap, the supervisor,
    or anything named MARK."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                stat = f.read()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            continue
        argv0 = os.path.basename(cmd.split(b"\0")[0])
        if b"/sandbox/child.py" in cmd or argv0 == b"bwrap" or comm == MARK:
            out.append((int(d), cmd.replace(b"\0", b" ").decode("utf-8", "replace")))
    return out


def assert_no_sandbox_process_left(timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while sandbox_processes() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sandbox_processes() == []


class TcpServer:
    """A TCP server on the host's 127.0.0.1 that records every connection it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted: list = []
        self._stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while not self._stop:
            try:
                conn, addr = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.accepted.append(addr)
            conn.close()

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


# ------------------------------------------------------------------ the submissions
PRELUDE = '''
import sys as _sys, os as _os, json as _json
REPORT = {}
try:  # escape 1 of issue 33: switch the in-process hook off by replacing its code object
    _main = _sys.modules["__main__"]
    _main._hook.__code__ = (lambda event, args: None).__code__
    _main._State.violation = None
    REPORT["hook_off"] = True
except Exception as _e:
    REPORT["hook_off"] = repr(_e)
for _fd in (0, 1, 2):  # escape 2: free descriptor slots under RLIMIT_NOFILE
    try:
        _os.close(_fd)
    except OSError:
        pass

def _try(name, fn):
    try:
        REPORT[name] = "OK " + repr(fn())[:200]
    except BaseException as _e:
        REPORT[name] = "ERR " + type(_e).__name__ + " " + str(getattr(_e, "errno", "") or "")

import ctypes as _ctypes
_libc = _ctypes.CDLL(None, use_errno=True)

def _sys_call(nr, *args):
    r = _libc.syscall(nr, *[_ctypes.c_long(a) for a in args])
    if r < 0:
        raise OSError(_ctypes.get_errno(), "syscall %d" % nr)
    return r
'''
EPILOGUE = '''
_OUT = _json.dumps(REPORT)

def f(x):
    return _OUT
'''


def _sub(body: str) -> str:
    return PRELUDE + body + EPILOGUE


def hooks_code() -> str:
    return _sub('''
_try("read_etc_passwd", lambda: open("/etc/passwd").read())
_try("list_root", lambda: sorted(_os.listdir("/")))
_try("import_subprocess", lambda: __import__("subprocess").run(["/bin/sh", "-c", "id"]))
_try("exec_shell", lambda: _os.execv("/bin/sh", ["sh", "-c", "id"]))
''')


def files_code(planted: Path, planted_dir: Path, suite: Path, stdlib_os: str, numpy_init: str) -> str:
    return _sub(f'''
_targets = {[str(planted), str(planted_dir / "inner.txt"), str(suite / "strings" / "test-00000-of-00001.parquet"),
             stdlib_os, numpy_init]!r}
_prefixes = ["", "/proc/1/root", "/proc/self/root", "/proc/1/cwd/.."]
for _t in _targets:
    for _p in _prefixes:
        _path = _p + _t
        _try("read " + _path, lambda: open(_path, "rb").read(64))
        _try("append " + _path, lambda: open(_path, "ab").write(b"escaped"))
        _try("truncate " + _path, lambda: _os.truncate(_path, 0))
        _try("chmod " + _path, lambda: _os.chmod(_path, 0o777))
        _try("rename " + _path, lambda: _os.rename(_path, _path + ".moved"))
        _try("unlink " + _path, lambda: _os.unlink(_path))
_try("rmtree", lambda: __import__("shutil").rmtree({str(planted_dir)!r}))
''')


def fork_bomb_code() -> str:
    return _sub('''
_n = 0
for _i in range(2000):
    try:
        if _os.fork() == 0:
            while True:
                _os.fork()
        _n += 1
    except OSError:
        pass
REPORT["forks"] = _n
_try("raw_fork", lambda: _sys_call(57))
_try("raw_vfork", lambda: _sys_call(58))
_try("raw_clone", lambda: _sys_call(56, 17, 0, 0, 0, 0))
_try("raw_clone3", lambda: _sys_call(435, 0, 0))
import _thread
_try("thread", lambda: _thread.start_new_thread(lambda: None, ()))
_try("posix_spawn", lambda: _os.posix_spawn("/bin/sh", ["sh"], {}))
''')


def outlive_code() -> str:
    return _sub(f'''
import time as _time
def _become_survivor():
    _libc.prctl(15, _ctypes.c_char_p({MARK!r}.encode()), 0, 0, 0)  # PR_SET_NAME
    _time.sleep(120)
_try("fork", lambda: _os.fork() or _become_survivor())
_try("clone_sibling", lambda: _sys_call(56, 0x00008000 | 17, 0, 0, 0, 0))  # CLONE_PARENT
_try("setsid", lambda: _os.setsid())
_try("setpgid", lambda: _os.setpgid(0, 1))
_try("kill_supervisor", lambda: _os.kill(1, 9))
_try("kill_all", lambda: _os.kill(-1, 9))
_try("stop_supervisor", lambda: _os.kill(_os.getppid(), 19))
_become_survivor()  # and outlive the wall-clock limit itself
''')


def network_code(port: int) -> str:
    return _sub(f'''
import _socket
for _path in ("/proc/1/ns/net", "/proc/self/ns/net", "/proc/2/ns/net"):
    def _setns():
        _fd = _os.open(_path, _os.O_RDONLY)
        try:
            if _libc.setns(_fd, 0x40000000) != 0:
                raise OSError(_ctypes.get_errno(), "setns")
        finally:
            _os.close(_fd)
    _try("setns " + _path, _setns)
_try("unshare_net", lambda: _sys_call(272, 0x40000000 | 0x10000000))
def _connect(fam, addr):
    _s = _socket.socket(fam, _socket.SOCK_STREAM)
    _s.settimeout(1)
    try:
        _s.connect(addr)
        return "CONNECTED"
    finally:
        _s.close()
_try("connect_ipv4", lambda: _connect(_socket.AF_INET, ("127.0.0.1", {port})))
_try("connect_ipv6", lambda: _connect(_socket.AF_INET6, ("::1", {port})))
_try("raw_socket_inet", lambda: _sys_call(41, 2, 1, 0))
_try("raw_socket_netlink", lambda: _sys_call(41, 16, 3, 0))
_try("io_uring", lambda: _sys_call(425, 8, 0))
_try("unix_abstract", lambda: _connect(_socket.AF_UNIX, "\\0/tmp/.X11-unix/X0"))
''')


def memory_code() -> str:
    return _sub('''
_try("shmget_1g", lambda: _sys_call(29, 0, 1 << 30, 0o1000 | 0o600))
_try("memfd", lambda: _sys_call(319, 0, 0))
_chunks = []
while True:
    _chunks.append(bytearray(64 << 20))
''')


def disk_code() -> str:
    return _sub('''
for _d in (".", "/tmp", "/dev/shm", "/sandbox", "/", "/dev", "/proc/self/cwd"):
    def _fill():
        with open(_d + "/cbench-fill", "wb") as _f:
            for _ in range(64):
                _f.write(b"x" * (1 << 20))
    _try("fill " + _d, _fill)
    _try("mkdir " + _d, lambda: _os.mkdir(_d + "/cbench-fill-dir"))
''')


def print_flood_code() -> str:
    return "import sys\nsys.__stdout__.write('z' * 100000)\nprint('y' * 100000)\n\ndef f(x):\n    return x\n"


def tamper_code(victim: str, truth: list[str]) -> str:
    forged = {"key": victim, "ok": True, "outputs": truth, "errors": 0}
    return _sub(f'''
_forged = _json.dumps({forged!r}).encode()
_try("supervisor_stdout", lambda: _os.write(_os.open("/proc/1/fd/1", _os.O_WRONLY), _forged + b"\\n"))
_try("supervisor_mem", lambda: open("/proc/1/mem", "rb"))
_try("supervisor_environ", lambda: open("/proc/1/environ", "rb").read())
_os.write(3, _json.dumps({{"ok": True, "outputs": {truth!r}, "errors": 0}}).encode() + b"\\n" + _forged + b"\\n")
_os._exit(0)
''')


def secrets_code(secret_prefix: str, suite_name: str) -> str:
    return _sub(f'''
import time as _time
_found, _seen = [], 0
_needles = [{secret_prefix!r}.encode(), {suite_name!r}.encode(), b"test-00000-of-00001.parquet"]
def _look(name, data):
    global _seen
    _seen += 1
    for _n in _needles:
        if _n in data:
            _found.append(name)
for _pid in [p for p in _os.listdir("/proc") if p.isdigit()]:
    for _what in ("cmdline", "environ", "mountinfo", "maps"):
        try:
            with open("/proc/%s/%s" % (_pid, _what), "rb") as _f:
                _look(_pid + "/" + _what, _f.read())
        except OSError:
            pass
    for _link in ("cwd", "root", "exe"):
        try:
            _look(_pid + "/" + _link, _os.readlink("/proc/%s/%s" % (_pid, _link)).encode())
        except OSError:
            pass
_look("self/environ", repr(dict(_os.environ)).encode())
_look("argv", repr(_sys.argv).encode())
_t0 = _time.monotonic()
for _dir, _subdirs, _files in _os.walk("/"):
    if _dir.startswith(("/proc", "/sys", "/dev")) or _time.monotonic() - _t0 > 3:
        _subdirs[:] = []
        continue
    for _name in _files + _subdirs:
        _look(_dir + "/" + _name, (_dir + "/" + _name).encode())
    for _name in _files:
        if _name.endswith((".so", ".py", ".pyc")) or ".so." in _name:
            continue
        try:
            with open(_dir + "/" + _name, "rb") as _f:
                _look(_dir + "/" + _name, _f.read(1 << 16))
        except OSError:
            pass
raise RuntimeError(("FOUND " + ",".join(_found)) if _found else "NOTHING FOUND (%d places)" % _seen)
''')


# ------------------------------------------------------------------ the escape suite
@pytest.fixture(scope="module")
def escape_run(suite_dir, tmp_path_factory):
    """Every class in one scoring run (one sandbox, the real scorer), with the host's state
    recorded before and after."""
    import numpy

    host = tmp_path_factory.mktemp("host")
    planted = host / "planted.txt"
    planted.write_text("planted by the test; must survive\n")
    planted_dir = host / "dir"
    planted_dir.mkdir()
    (planted_dir / "inner.txt").write_text("inner\n")
    watched = {"planted": planted, "inner": planted_dir / "inner.txt", "os.py": Path(os.__file__),
               "numpy": Path(numpy.__file__)}
    before = {k: _digest(p) for k, p in watched.items()}
    suite_before = _tree(suite_dir)
    free_before = shutil.disk_usage(tempfile_dir()).free
    assert sandbox_processes() == []
    server = TcpServer()
    suite = FindSuite.load(suite_dir)
    victim = "s0009"
    classes = {
        "hooks": ("s0000", hooks_code()),
        "files": ("s0001", files_code(planted, planted_dir, suite_dir, os.__file__, numpy.__file__)),
        "fork_bomb": ("s0002", fork_bomb_code()),
        "outlive": ("s0003", outlive_code()),
        "network": ("s0004", network_code(server.port)),
        "memory": ("s0005", memory_code()),
        "disk": ("s0006", disk_code()),
        "print_flood": ("s0007", print_flood_code()),
        "tamper": ("s0008", tamper_code(victim, list(suite.functions[victim].test_outputs))),
        "victim": (victim, "def f(x):\n    return 'nothing'\n"),
    }
    seen = {}
    real = scoring.run_submissions

    def spy(*args, **kwargs):
        seen.update(real(*args, **kwargs))
        return seen

    mp = pytest.MonkeyPatch()
    mp.setattr(scoring, "run_submissions", spy)
    t0 = time.monotonic()
    try:
        results = scoring.score(suite, {"schema": "cbench/find-submission/v1",
                                        "entries": [{"id": fid, "code": code} for fid, code in classes.values()]},
                                limits=LIMITS)
    finally:
        mp.undo()
        server.close()
    elapsed = time.monotonic() - t0
    time.sleep(0.2)
    return {"results": results, "rows": {r["id"]: r for r in results["functions"]}, "outcomes": seen,
            "classes": classes, "before": before, "after": {k: _digest(p) for k, p in watched.items()},
            "suite_before": suite_before, "suite_after": _tree(suite_dir), "server": server, "host": host,
            "free_before": free_before, "free_after": shutil.disk_usage(tempfile_dir()).free, "elapsed": elapsed}


def tempfile_dir() -> str:
    import tempfile

    return tempfile.gettempdir()


def _report(run, cls) -> dict:
    out = run["outcomes"][run["classes"][cls][0]]
    assert out.ok and out.outputs, (cls, out)
    return json.loads(out.outputs[0])


def _failed_attempts(report: dict) -> dict:
    return {k: v for k, v in report.items() if isinstance(v, str) and v.startswith("ERR")}


def test_every_class_scores_as_a_failed_function_and_the_host_is_unchanged(escape_run):
    rows = escape_run["rows"]
    assert len(rows) == len(escape_run["classes"])
    assert all(not r["success"] for r in rows.values()), [r for r in rows.values() if r["success"]]
    assert validate(escape_run["results"], "find-results") == []
    assert escape_run["results"]["sandbox"]["boundary"] == "bubblewrap"
    assert escape_run["before"] == escape_run["after"]
    assert escape_run["suite_before"] == escape_run["suite_after"]
    assert escape_run["server"].accepted == []
    assert_no_sandbox_process_left()
    assert escape_run["elapsed"] < 40, escape_run["elapsed"]


def test_switching_the_hook_off_leaves_the_kernel_boundary(escape_run):
    rep = _report(escape_run, "hooks")
    assert rep["hook_off"] is True  # the hook is a second line: it can be switched off
    assert rep["read_etc_passwd"].startswith("ERR")
    assert rep["import_subprocess"].startswith("ERR") and rep["exec_shell"].startswith("ERR")
    root = ast.literal_eval(rep["list_root"][3:])
    assert "sandbox" in root and "tmp" not in root and "home" not in root and "var" not in root


def test_files_outside_cannot_be_read_written_truncated_or_deleted(escape_run):
    rep = _report(escape_run, "files")
    assert rep["hook_off"] is True
    changes = ("append", "truncate", "chmod", "rename", "unlink", "rmtree")
    opened = {k: v for k, v in rep.items() if k.startswith(changes) and not v.startswith("ERR")}
    assert opened == {}
    read = {k: v for k, v in rep.items() if k.startswith("read ") and not v.startswith("ERR")}
    # only the interpreter's own files are there, read-only; nothing of the host's, the suite or the test
    assert all(k.endswith(("os.py", "__init__.py")) for k in read), read
    assert escape_run["before"] == escape_run["after"] and escape_run["suite_before"] == escape_run["suite_after"]


def test_a_fork_bomb_starts_no_process(escape_run):
    rep = _report(escape_run, "fork_bomb")
    assert rep["forks"] == 0
    for k in ("raw_fork", "raw_vfork", "raw_clone", "raw_clone3", "thread", "posix_spawn"):
        assert rep[k].startswith("ERR"), (k, rep[k])
    assert_no_sandbox_process_left()


def test_nothing_outlives_its_entry(escape_run):
    out = escape_run["outcomes"][escape_run["classes"]["outlive"][0]]
    assert not out.ok and "ran longer than" in out.reason
    assert_no_sandbox_process_left()
    # the entries after it ran normally: the supervisor was neither killed nor stopped
    assert escape_run["outcomes"]["s0004"].ok and escape_run["outcomes"]["s0009"].ok


def test_no_network_not_even_through_setns_into_pid_1(escape_run):
    rep = _report(escape_run, "network")
    for k, v in rep.items():
        if k != "hook_off":
            assert v.startswith("ERR"), (k, v)
    assert escape_run["server"].accepted == []


def test_a_memory_bomb_runs_out_of_memory(escape_run):
    out = escape_run["outcomes"][escape_run["classes"]["memory"][0]]
    assert not out.ok and out.reason in ("ran out of memory", "crashed with signal SIGKILL") or \
        "CPU time" in out.reason, out.reason


def test_a_disk_fill_writes_nothing(escape_run):
    rep = _report(escape_run, "disk")
    assert [k for k, v in rep.items() if k.startswith(("fill", "mkdir")) and not v.startswith("ERR")] == []
    assert escape_run["free_before"] - escape_run["free_after"] < 64 << 20
    assert not list(Path(tempfile_dir()).glob("cbench-fill*"))


def test_a_print_flood_is_cut(escape_run):
    out = escape_run["outcomes"][escape_run["classes"]["print_flood"][0]]
    assert not out.ok and "printed more than" in out.reason


def test_tampering_with_results_forges_nothing(escape_run):
    rows = escape_run["rows"]
    tamper, victim = escape_run["classes"]["tamper"][0], escape_run["classes"]["victim"][0]
    assert rows[tamper]["reason"] == "returned malformed output"
    assert rows[victim]["reason"] == "0 of 10 test outputs match"
    assert escape_run["outcomes"][victim].outputs == ["nothing"] * 10


# ------------------------------------------------------------------ the scorer's secrets
SCORER = r"""
import json, sys
from cbench.find.scoring import read_submission_file, score
from cbench.find.suite import FindSuite
from cbench.find.sandbox import Limits
suite, sub, out = sys.argv[1:4]  # argv[4] is the secret, planted where the sandbox could look
res = score(FindSuite.load(suite), read_submission_file(sub), limits=Limits(wall_s=10.0))
open(out, "w").write(json.dumps(res))
print(json.dumps(res["functions"]))
"""


def test_the_scorers_argv_environment_and_files_are_out_of_reach(suite_dir, tmp_path):
    """Escapes 5-7 of issue 33 read the scorer's /proc/<pid>/cmdline and environ, found the
    suite's path and so the answers. Here the scorer has a secret and the suite's path in its
    argv and environment, and a file holding the secret lies next to the answers; the
    submission searches every /proc entry it can see and every file it can read."""
    secret = "cbench-secret-" + uuid.uuid4().hex
    (suite_dir.parent / "answers-note.txt").write_text(secret)
    (tmp_path / "secret.txt").write_text(secret)
    sub = tmp_path / "sub.jsonl"
    sub.write_text(json.dumps({"id": "s0000", "code": secrets_code("cbench-secret-", suite_dir.parent.name)}) + "\n")
    env = {**os.environ, "CBENCH_ESCAPE_SECRET": secret, "CBENCH_SUITE_HINT": str(suite_dir)}
    res = tmp_path / "res.json"
    proc = subprocess.run([sys.executable, "-c", SCORER, str(suite_dir), str(sub), str(res), secret],
                          capture_output=True, text=True, timeout=120, env=env, cwd=str(suite_dir))
    assert proc.returncode == 0, proc.stderr
    text = res.read_text()
    assert secret not in text and secret not in proc.stdout and secret not in proc.stderr
    row = json.loads(text)["functions"][0]
    assert not row["success"] and "NOTHING FOUND" in row["reason"], row["reason"]
    assert suite_dir.parent.name not in row["reason"]


# ------------------------------------------------------------------ the whole tree dies
def test_on_timeout_the_whole_sandbox_dies():
    code = "import time\n\ndef f(x):\n    time.sleep(60)\n"
    payload = json.dumps({"entries": [{"key": "a", "kind": "numeric", "code": code}], "numeric_inputs": [0.0],
                          "limits": {**Limits(wall_s=60.0).__dict__}}).encode()
    batch = S._Batch(S.BWRAP, S._private_paths(None))
    t0 = time.monotonic()
    try:
        out, status = batch.run(payload, 2.0)
    finally:
        batch.close()
    assert time.monotonic() - t0 < 15 and status is not None and out == b""
    assert_no_sandbox_process_left()


# ------------------------------------------------------------------ fail closed
def _cli(args: list, env: dict, timeout=120):
    return subprocess.run([sys.executable, "-m", "cbench.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(ROOT))


def _no_bwrap_env(tmp_path) -> dict:
    empty = tmp_path / "bin"
    empty.mkdir(exist_ok=True)
    return {**os.environ, "PATH": str(empty)}


def test_without_bubblewrap_scoring_refuses_in_one_line(suite_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SandboxUnavailableError, match="bwrap.*not on PATH.*--trust-code"):
        run_submissions([{"key": "a", "kind": "numeric", "code": "def f(x):\n    return x\n"}], [0.0], LIMITS)
    sub = tmp_path / "sub.jsonl"
    sub.write_text(json.dumps({"id": "s0000", "code": "def f(x):\n    return x[::-1]\n"}) + "\n")
    proc = _cli(["find", "score", sub, "--suite", suite_dir], _no_bwrap_env(tmp_path))
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: cannot sandbox submitted code: bubblewrap (bwrap) is not")
    assert "--trust-code" in lines[0] and "apt-get install bubblewrap" in lines[0]


def test_trust_code_runs_without_the_boundary_and_says_so(suite_dir, tmp_path, monkeypatch):
    from click.testing import CliRunner

    from cbench.cli.find_cmds import find

    monkeypatch.setenv("PATH", str(tmp_path))
    sub = tmp_path / "sub.jsonl"
    sub.write_text(json.dumps({"id": "s0000", "code": "def f(x):\n    return x[::-1]\n"}) + "\n")
    res = tmp_path / "res.json"
    got = CliRunner().invoke(find, ["score", str(sub), "--suite", str(suite_dir), "--out", str(res)])
    assert isinstance(got.exception, SandboxUnavailableError) and not res.exists()
    got = CliRunner().invoke(find, ["score", str(sub), "--suite", str(suite_dir), "--out", str(res), "--trust-code"])
    assert got.exit_code == 0, got.output
    doc = json.loads(res.read_text())
    assert validate(doc, "find-results") == []
    assert doc["sandbox"]["boundary"] == "none" and doc["sandbox"]["trusted"] is True
    assert doc["functions"][0]["success"]


def test_a_bwrap_that_cannot_make_namespaces_is_refused(monkeypatch):
    import tempfile

    fake = Path(tempfile.mkdtemp(prefix="cbench-fake-bwrap-"))  # reachable by uid 65534 when run as root
    try:
        fake.chmod(0o755)
        (fake / "bwrap").write_text("#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely "
                                    "because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n")
        (fake / "bwrap").chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
        with pytest.raises(SandboxUnavailableError, match="user namespaces must be available.*--trust-code") as err:
            run_submissions([{"key": "a", "kind": "numeric", "code": "def f(x):\n    return x\n"}], [0.0], LIMITS)
        assert "\n" not in str(err.value)
    finally:
        shutil.rmtree(fake, ignore_errors=True)


def test_a_status_that_does_not_hold_is_refused():
    good = {"NoNewPrivs": ["1"], "Seccomp": ["2"], "CapInh": ["0"], "CapPrm": ["0"], "CapEff": ["0"], "CapAmb": ["0"],
            "Uid": ["65534"] * 4, "ns": {ns: f"{ns}:[1]" for ns in S.NAMESPACES}, "inet_socket": "refused (errno 97)",
            "net_devices": ["lo"], "cwd": S.WORKDIR, "cwd_writable": False, "root_writable": False}
    assert S.check_status(good) == []
    for change, why in (({"Seccomp": ["0"]}, "seccomp"), ({"CapEff": ["1"]}, "CapEff"), ({"Uid": ["0"] * 4}, "uid"),
                        ({"ns": S._host_namespaces()}, "namespace"), ({"inet_socket": "allowed"}, "sockets"),
                        ({"net_devices": ["lo", "eth0"]}, "eth0"), ({"root_writable": True}, "writable")):
        problems = S.check_status({**good, **change})
        assert problems and any(why in p for p in problems), (change, problems)


def test_the_suite_inside_the_sandboxs_root_is_refused():
    import numpy

    inside = os.path.join(os.path.dirname(numpy.__file__), "some-suite")
    with pytest.raises(SandboxUnavailableError, match="would see it"):
        run_submissions([{"key": "a", "kind": "numeric", "code": "def f(x):\n    return x\n"}], [0.0], LIMITS,
                        private_paths=[inside])


# ------------------------------------------------------------------ as an unprivileged user
UNPRIV_UID = 4242

UNPRIV_SCRIPT = r'''
import json, sys, time
from cbench.find import sandbox as S
from cbench.find.sandbox import Limits, run_submissions, guarantees
entries = [{"key": k, "kind": "numeric", "code": c} for k, c in json.loads(sys.argv[1]).items()]
batches, real = [], S._run_batch
S._run_batch = lambda entries, *a, **kw: batches.append(len(entries)) or real(entries, *a, **kw)
t0 = time.monotonic()
out = run_submissions(entries, [0.0, 1.0], Limits(wall_s=3.0, cpu_s=2, memory_mb=256))
print(json.dumps({"outcomes": {k: [o.ok, o.outputs, o.reason] for k, o in out.items()}, "sandbox": guarantees(),
                  "batches": batches, "elapsed": time.monotonic() - t0}))
'''


def _unprivileged_preexec(paths: list[str], stages: list[str]):
    """As root: in a private mount namespace, make each path reachable for UNPRIV_UID (cover a
    non-searchable ancestor such as /root with a tmpfs holding binds of the parts needed),
    then become UNPRIV_UID with no groups. ``stages`` gets the empty directories to remove."""
    import tempfile

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    blocked: dict[str, set] = {}
    for p in paths:
        parts = Path(p).parts
        for i in range(1, len(parts)):
            anc = str(Path(*parts[:i]))
            if not os.stat(anc).st_mode & 0o001:
                blocked.setdefault(anc, set()).add(parts[i])
                break
    stage_of = {anc: tempfile.mkdtemp(prefix="cbench-unpriv-") for anc in blocked}
    stages.extend(stage_of.values())

    def check(rc, what):
        if rc != 0:
            raise OSError(ctypes.get_errno(), what)

    def fn():
        check(libc.unshare(0x00020000), "unshare")
        check(libc.mount(None, b"/", None, 16384 | (1 << 18), None), "private")
        for anc, children in blocked.items():
            stage = stage_of[anc]
            check(libc.mount(anc.encode(), stage.encode(), None, 4096 | 16384, None), "stage")
            check(libc.mount(b"tmpfs", anc.encode(), b"tmpfs", 0, b"mode=0755"), "tmpfs")
            for c in children:
                src, dst = f"{stage}/{c}", f"{anc}/{c}"
                if os.path.isdir(src):
                    os.mkdir(dst)
                else:
                    open(dst, "w").close()
                check(libc.mount(src.encode(), dst.encode(), None, 4096 | 16384, None), "bind back")
        os.setgroups([])
        os.setresgid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID)
        os.setresuid(UNPRIV_UID, UNPRIV_UID, UNPRIV_UID)
    return fn


@pytest.mark.skipif(os.geteuid() != 0, reason="this run already is unprivileged: the tests above cover it")
def test_the_same_boundary_holds_for_an_unprivileged_user():
    import numpy

    codes = {"good": "def f(x):\n    return 2 * x + 1\n",
             "hooks": hooks_code().replace("_OUT = _json.dumps(REPORT)", "_OUT = float(len(REPORT))")
             .replace("return _OUT", "return 0.0 if REPORT.get('read_etc_passwd', '').startswith('ERR') else 1.0"),
             "fork": "import os\n\ndef f(x):\n    os.fork()\n    return x\n",
             "escape": fork_bomb_code().replace("return _OUT", "return float(REPORT['forks'])"),
             # issue 44: hanging entries, reaching the supervisor, a result it cannot compare
             "hang_closed": hang_code("closed_then_sleep"), "hang_stopped": hang_code("closed_then_stopped"),
             "reach": reach_code(os.path.dirname(os.__file__)).replace(
                 "return _OUT", f"return float(sum(not REPORT[k].startswith('ERR') for k in {REACHED!r}))"),
             "bigint": _sub("_os.write(3, b'{\"ok\": true, \"outputs\": [' + b'9' * 400 + b', 1.0], \"errors\": 0}')\n"
                            "_os._exit(0)\n"),
             "after": "def f(x):\n    return 3 * x\n"}
    paths = [os.path.realpath(sys.executable), sys.executable, str(ROOT), os.path.dirname(numpy.__file__)]
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8", "HOME": "/nonexistent"}
    stages: list[str] = []
    try:
        proc = subprocess.run([sys.executable, "-c", UNPRIV_SCRIPT, json.dumps(codes)], capture_output=True,
                              text=True, timeout=120, env=env, cwd="/", preexec_fn=_unprivileged_preexec(paths, stages))
    finally:
        for d in stages:
            os.rmdir(d)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.strip().splitlines()[-1])
    got = doc["outcomes"]
    assert got["good"][0] and got["good"][1] == [1.0, 3.0]
    assert got["hooks"][0] and got["hooks"][1] == [0.0, 0.0]
    assert not got["fork"][0] and "tried to start a process" in got["fork"][2]
    assert got["escape"][0] and got["escape"][1] == [0.0, 0.0]
    assert got["hang_closed"][2] == got["hang_stopped"][2] == "ran longer than 3.0 s (stopped)"
    assert got["reach"][0] and got["reach"][1] == [0.0, 0.0], got["reach"]
    assert got["bigint"][2] == "returned malformed output"
    assert got["after"][0] and got["after"][1] == [0.0, 3.0]
    assert doc["batches"] == [len(codes)] and doc["elapsed"] < 40, (doc["batches"], doc["elapsed"])
    assert doc["sandbox"]["boundary"] == "bubblewrap" and f"host uid {UNPRIV_UID}" in doc["sandbox"]["user"]
    assert_no_sandbox_process_left()


# ================================================================== issue 44: round two
# ------------------------------------------------------------------ deadlines that always hold
def hang_code(how: str) -> str:
    """An entry that tries to keep the supervisor waiting: its result descriptor (3) closed,
    then asleep or stopped; or stopped with it open; or spinning with SIGXCPU ignored."""
    body = {
        "closed_then_sleep": "_os.close(3)\nimport time as _time\n_time.sleep(1000)\n",
        "closed_then_stopped": "_os.close(3)\n_os.kill(_os.getpid(), 19)\n_os.kill(_os.getpid(), 19)\n",
        "stopped": "_os.kill(_os.getpid(), 19)\n",
        "closed_then_spin": "_os.close(3)\nimport signal as _signal\n_signal.signal(_signal.SIGXCPU, _signal.SIG_IGN)\n"
                            "while True:\n    pass\n",
    }[how]
    return _sub(body)


HANG_WAYS = ("closed_then_sleep", "closed_then_stopped", "stopped", "closed_then_spin")


def _count_batches(monkeypatch) -> list:
    """Every supervisor started by run_submissions (a rerun after a supervisor died shows here)."""
    calls: list = []
    real = S._run_batch

    def spy(entries, *args, **kwargs):
        calls.append([e["key"] for e in entries])
        return real(entries, *args, **kwargs)

    monkeypatch.setattr(S, "_run_batch", spy)
    return calls


def test_hanging_entries_cost_their_wall_time_and_the_others_score_as_if_alone(suite_dir, tmp_path, monkeypatch):
    """Issue 44, finding 1: four entries that hang in each way, at --wall-s 2 (default CPU and
    memory limits), interleaved with ordinary ones: scored in under 15 s, each hanging one
    stopped at its wall-clock limit, every other one scored as if alone, one supervisor."""
    from click.testing import CliRunner

    from cbench.cli.find_cmds import find

    suite = FindSuite.load(suite_dir)
    ordinary = {"s0000": "def f(x):\n    return x[::-1]\n", "s0002": "def f(x):\n    return x.upper()\n",
                "s0004": "def f(x):\n    return x[::-1]\n", "s0006": "def f(x):\n    return x[1:]\n"}
    hanging = dict(zip(("s0001", "s0003", "s0005", "s0007"), (hang_code(h) for h in HANG_WAYS)))
    alone = {fid: scoring.score(suite, {"schema": "cbench/find-submission/v1", "entries": [{"id": fid, "code": c}]},
                                limits=Limits(wall_s=2.0))["functions"][0] for fid, c in ordinary.items()}
    sub = tmp_path / "hang.jsonl"
    sub.write_text("".join(json.dumps({"id": fid, "code": (ordinary | hanging)[fid]}) + "\n"
                           for fid in sorted(ordinary | hanging)))
    res = tmp_path / "res.json"
    batches = _count_batches(monkeypatch)
    t0 = time.monotonic()
    got = CliRunner().invoke(find, ["score", str(sub), "--suite", str(suite_dir), "--wall-s", "2", "--out", str(res)])
    elapsed = time.monotonic() - t0
    assert got.exit_code == 0, got.output
    rows = {r["id"]: r for r in json.loads(res.read_text())["functions"]}
    for fid in hanging:
        assert rows[fid]["reason"] == "ran longer than 2.0 s (stopped)", (fid, rows[fid])
    for fid in ordinary:
        assert rows[fid] == alone[fid], (fid, rows[fid], alone[fid])
    assert rows["s0000"]["success"] and not rows["s0002"]["success"]
    assert len(batches) == 1, batches  # the supervisor never died nor was stopped by the host
    assert elapsed < 15, elapsed
    assert_no_sandbox_process_left()


def test_the_host_stops_a_supervisor_that_stops_answering(tmp_path, monkeypatch):
    """Issue 44, finding 1 (the host's side): whatever keeps the supervisor itself from
    answering (here a supervisor changed to sleep on one entry), the host gives it the entry's
    wall time and a grace period, not the batch's budget; the entry is retried alone once and
    the others go on in a new supervisor."""
    child = S.CHILD.read_text()
    head = "def _supervise(entry, numeric_inputs, limits):\n"
    assert head in child
    wedged = tmp_path / "child.py"
    wedged.write_text(child.replace(head, head + "    if entry['key'] == 'wedge':\n        time.sleep(1000)\n"))
    monkeypatch.setattr(S, "CHILD", wedged)
    monkeypatch.setattr(S, "HOST_GRACE_S", 5.0)  # the same rule with half the grace (10 s): two waits of 6 s, not 11
    batches = _count_batches(monkeypatch)
    entries = [{"key": k, "kind": "numeric", "code": "def f(x):\n    return x + 1\n"} for k in ("a", "wedge", "b")]
    limits = Limits(wall_s=1.0, cpu_s=1, memory_mb=256)
    t0 = time.monotonic()
    out = run_submissions(entries, [1.0], limits)
    elapsed = time.monotonic() - t0
    assert out["a"].ok and out["b"].ok and out["b"].outputs == [2.0]
    assert not out["wedge"].ok and "stopped answering" in out["wedge"].reason, out["wedge"]
    assert batches == [["a", "wedge", "b"], ["wedge"], ["b"]]
    step = limits.wall_s + S.HOST_GRACE_S
    assert elapsed < 2 * step + 15, elapsed  # the batch's budget would be 30 + 3 * 2 s, twice
    assert_no_sandbox_process_left()


# ------------------------------------------------------------------ entries cannot reach the supervisor
WITNESS = ("import os, resource, json\n\n"
           "def f(x):\n"
           "    return json.dumps({'nice': os.getpriority(os.PRIO_PROCESS, 0),\n"
           "                       'affinity': sorted(os.sched_getaffinity(0)),\n"
           "                       'policy': os.sched_getscheduler(0),\n"
           "                       'limits': [resource.getrlimit(r) for r in (\n"
           "                           resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NOFILE,\n"
           "                           resource.RLIMIT_FSIZE, resource.RLIMIT_NPROC)]})\n")


def reach_code(watch_dir: str) -> str:
    """With the hook off: lower the supervisor's limits, priority, CPU affinity and scheduling,
    have the kernel signal it (F_SETOWN/F_SETOWN_EX/FIOSETOWN + F_SETSIG + O_ASYNC), watch the
    read-only system directories (inotify, dnotify); and, to show the filter is exact, the same
    calls on itself."""
    return _sub(f'''
import signal as _signal
class _Rlimit(_ctypes.Structure):
    _fields_ = [("cur", _ctypes.c_uint64), ("max", _ctypes.c_uint64)]
_libc.prlimit.argtypes = [_ctypes.c_int, _ctypes.c_int, _ctypes.c_void_p, _ctypes.c_void_p]
def _prlimit(pid, res, cur):
    _new = _Rlimit(cur, cur)
    if _libc.prlimit(pid, res, _ctypes.byref(_new), None) != 0:
        raise OSError(_ctypes.get_errno(), "prlimit")
    return "lowered"
def _check(rc, what):
    if rc < 0:
        raise OSError(_ctypes.get_errno(), what)
    return rc
_sup = _os.getppid()
REPORT["supervisor_pid"] = _sup
for _res, _cur in ((9, 1 << 20), (7, 0), (0, 0), (1, 0)):  # RLIMIT_AS, NOFILE, CPU, FSIZE
    _try("prlimit supervisor %d" % _res, lambda: _prlimit(_sup, _res, _cur))
_try("prlimit pid 1", lambda: _prlimit(1, 9, 1 << 20))
_try("setpriority supervisor", lambda: _os.setpriority(_os.PRIO_PROCESS, _sup, 19))
_try("setpriority user", lambda: _os.setpriority(_os.PRIO_USER, 0, 19))
_try("setpriority group", lambda: _os.setpriority(_os.PRIO_PGRP, _sup, 19))
_try("sched_setaffinity supervisor", lambda: _os.sched_setaffinity(_sup, {{0}}))
_try("sched_setscheduler supervisor", lambda: _os.sched_setscheduler(_sup, _os.SCHED_IDLE, _os.sched_param(0)))
_try("sched_setparam supervisor", lambda: _os.sched_setparam(_sup, _os.sched_param(0)))
_try("ioprio_set user", lambda: _sys_call(251, 3, 0, (3 << 13) | 7))
_try("ioprio_set supervisor", lambda: _sys_call(251, 1, _sup, (3 << 13) | 7))
_pair = (_ctypes.c_int * 2)()
_try("socketpair", lambda: _check(_libc.socketpair(1, 1, 0, _pair), "socketpair"))
_a, _b = _pair[0], _pair[1]
_try("F_SETOWN", lambda: _check(_libc.fcntl(_a, 8, _sup), "fcntl"))
_try("F_SETOWN pipe", lambda: _check(_libc.fcntl(3, 8, _sup), "fcntl"))
class _Owner(_ctypes.Structure):
    _fields_ = [("type", _ctypes.c_int), ("pid", _ctypes.c_int)]
_owner = _Owner(1, _sup)
_try("F_SETOWN_EX", lambda: _check(_libc.fcntl(_a, 15, _ctypes.byref(_owner)), "fcntl"))
_try("FIOSETOWN", lambda: _check(_libc.ioctl(_a, 0x8901, _ctypes.byref(_ctypes.c_int(_sup))), "ioctl"))
_try("SIOCSPGRP", lambda: _check(_libc.ioctl(_a, 0x8902, _ctypes.byref(_ctypes.c_int(_sup))), "ioctl"))
_try("F_SETSIG", lambda: _check(_libc.fcntl(_a, 10, int(_signal.SIGINT)), "fcntl"))
_try("O_ASYNC", lambda: _check(_libc.fcntl(_a, 4, 0o20000 | 0o4000), "fcntl"))
_try("deliver", lambda: _os.write(_b, b"wake the supervisor"))
_try("inotify_init1", lambda: _check(_libc.inotify_init1(0), "inotify_init1"))
_try("inotify_init", lambda: _sys_call(253))
_try("inotify_add_watch", lambda: _check(_libc.inotify_add_watch(_check(_sys_call(294, 0), "init"),
                                                                 {watch_dir!r}.encode(), 0xfff), "watch"))
_try("dnotify", lambda: _check(_libc.fcntl(_os.open({watch_dir!r}, _os.O_RDONLY), 1026, 0x80000000 | 0x3f), "fcntl"))
_try("own prlimit", lambda: _prlimit(0, 7, 4))
_try("own setpriority", lambda: _os.setpriority(_os.PRIO_PROCESS, 0, 19))
_try("own sched_setaffinity", lambda: _os.sched_setaffinity(0, _os.sched_getaffinity(0)))
_try("own F_SETFL", lambda: _check(_libc.fcntl(_a, 4, 0o4000), "fcntl"))
''')


REACHED = ("prlimit supervisor 9", "setpriority user", "sched_setaffinity supervisor", "F_SETOWN", "F_SETOWN_EX",
           "F_SETSIG", "inotify_init1", "dnotify")
SUPERVISOR_REACH = ("prlimit supervisor 9", "prlimit supervisor 7", "prlimit supervisor 0", "prlimit supervisor 1",
                    "prlimit pid 1", "setpriority supervisor", "setpriority user", "setpriority group",
                    "sched_setaffinity supervisor", "sched_setscheduler supervisor", "sched_setparam supervisor",
                    "ioprio_set user", "ioprio_set supervisor", "F_SETOWN", "F_SETOWN pipe", "F_SETOWN_EX",
                    "FIOSETOWN", "SIOCSPGRP", "F_SETSIG")


@pytest.fixture(scope="module")
def reach_run():
    """A hostile entry between two witnesses (which report their priority, affinity, scheduling
    policy and rlimits) and a correct entry; the witness also alone, for comparison."""
    watch = os.path.dirname(os.__file__)
    mp = pytest.MonkeyPatch()
    batches = _count_batches(mp)
    try:
        alone = run_submissions([{"key": "witness", "kind": "strings", "code": WITNESS, "inputs": ["x"]}], [], LIMITS)
        del batches[:]
        entries = [{"key": "witness_before", "kind": "strings", "code": WITNESS, "inputs": ["x"]},
                   {"key": "hostile", "kind": "strings", "code": reach_code(watch), "inputs": ["x"]},
                   {"key": "witness_after", "kind": "strings", "code": WITNESS, "inputs": ["x"]},
                   {"key": "correct", "kind": "strings", "code": "def f(x):\n    return x[::-1]\n",
                    "inputs": ["abc", "de"]}]
        out = run_submissions(entries, [], LIMITS)
    finally:
        mp.undo()
    return {"alone": alone["witness"], "out": out, "batches": list(batches)}


def test_an_entry_cannot_reach_the_supervisor_or_a_later_entry(reach_run):
    """Issue 44, finding 2: prlimit64, setpriority, sched_set*, ioprio_set aimed at the
    supervisor and F_SETOWN/F_SETOWN_EX/FIOSETOWN/SIOCSPGRP/F_SETSIG are refused (EPERM); the
    same calls on the entry itself still work; the entries after it see exactly what an entry
    alone sees, the correct one scores correct, and no supervisor was restarted."""
    out = reach_run["out"]
    assert out["hostile"].ok, out["hostile"]
    rep = json.loads(out["hostile"].outputs[0])
    assert rep["hook_off"] is True
    for k in SUPERVISOR_REACH:
        assert rep[k] == "ERR OSError 1" or rep[k] == "ERR PermissionError 1", (k, rep[k])
    for k in ("own prlimit", "own setpriority", "own sched_setaffinity", "own F_SETFL"):
        assert rep[k].startswith("OK"), (k, rep[k])
    assert out["witness_before"].ok and out["witness_after"].ok
    assert out["witness_after"].outputs == out["witness_before"].outputs == reach_run["alone"].outputs
    assert out["correct"].ok and out["correct"].outputs == ["cba", "ed"]
    assert reach_run["batches"] == [["witness_before", "hostile", "witness_after", "correct"]]
    assert_no_sandbox_process_left()


def test_inotify_and_dnotify_on_the_system_directories_are_refused(reach_run):
    """Issue 44, finding 4: watching the read-only system directories (which the host writes)
    would show host processes' file activity; inotify and dnotify are refused."""
    rep = json.loads(reach_run["out"]["hostile"].outputs[0])
    for k in ("inotify_init1", "inotify_init", "inotify_add_watch", "dnotify"):
        assert rep[k] in ("ERR OSError 1", "ERR PermissionError 1"), (k, rep[k])


# ------------------------------------------------------------------ results the supervisor cannot compare
def test_a_result_the_supervisor_cannot_compare_is_that_entrys_failure(monkeypatch):
    """Issue 44, finding 3: a 400-digit integer (or an infinity, a NaN, a huge float literal)
    among an entry's outputs is refused as that entry's malformed output; the supervisor goes
    on (no rerun) and the next entry scores as usual."""
    from cbench.find._sandbox_child import clean_result

    forged = {"bigint": b"9" * 400, "neg_bigint": b"-" + b"9" * 400, "inf": b"Infinity", "nan": b"NaN",
              "huge_float": b"1e999", "big_errors": None}
    entries = []
    for key, value in forged.items():
        if value is None:
            doc = b'{"ok": true, "outputs": [1.0], "errors": ' + b"9" * 400 + b"}"
        else:
            doc = b'{"ok": true, "outputs": [' + value + b'], "errors": 0}'
        entries.append({"key": key, "kind": "numeric", "code": _sub(f"_os.write(3, {doc!r})\n_os._exit(0)\n")})
    entries.append({"key": "after", "kind": "numeric", "code": "def f(x):\n    return x * 3\n"})
    batches = _count_batches(monkeypatch)
    out = run_submissions(entries, [2.0], LIMITS)
    for key in forged:
        assert not out[key].ok and out[key].reason == "returned malformed output", (key, out[key])
    assert out["after"].ok and out["after"].outputs == [6.0]
    assert len(batches) == 1, batches
    # the host's own check of the supervisor's lines refuses them the same way
    for bad in ([10 ** 400], [-(10 ** 400)], [float("inf")], [float("nan")], [True]):
        assert clean_result({"ok": True, "outputs": bad, "errors": 0}, "numeric", 1) is None, bad
    assert clean_result({"ok": True, "outputs": [2 ** 53], "errors": 0}, "numeric", 1)["outputs"] == [2.0 ** 53]
    assert clean_result({"ok": True, "outputs": [1.0], "errors": 10 ** 400}, "numeric", 1) is None
    line = b'{"key": "k", "ok": true, "outputs": [' + b"9" * 400 + b'], "errors": 0}\n'
    got = S._outcomes(line, [{"key": "k", "kind": "numeric", "code": ""}], 1)
    assert not got["k"].ok and got["k"].reason == "returned malformed output"


# ------------------------------------------------------------------ the hash of what was scored
def test_results_record_the_hash_of_the_bytes_that_were_scored(suite_dir, tmp_path, monkeypatch):
    """Issue 44, finding 5: the submissions file replaced while its code runs; results.json
    names the sha256 of the bytes that were read and scored, not of the replacement."""
    from click.testing import CliRunner

    from cbench.cli.find_cmds import find

    sub = tmp_path / "sub.jsonl"
    scored = (json.dumps({"id": "s0000", "code": "def f(x):\n    return x[::-1]\n"}) + "\n").encode()
    sub.write_bytes(scored)
    replacement = (json.dumps({"id": "s0000", "code": "def f(x):\n    return 'other'\n"}) + "\n").encode()
    real = scoring.run_submissions

    def replace_during_the_run(*args, **kwargs):
        out = real(*args, **kwargs)
        sub.write_bytes(replacement)
        return out

    monkeypatch.setattr(scoring, "run_submissions", replace_during_the_run)
    res = tmp_path / "res.json"
    got = CliRunner().invoke(find, ["score", str(sub), "--suite", str(suite_dir), "--out", str(res)])
    assert got.exit_code == 0, got.output
    doc = json.loads(res.read_text())
    assert sub.read_bytes() == replacement
    assert doc["submission"]["sha256"] == hashlib.sha256(scored).hexdigest()
    assert doc["submission"]["bytes"] == len(scored)
    assert doc["functions"][0]["success"] is True  # what was scored is what the hash names
    assert validate(doc, "find-results") == []


# ------------------------------------------------------------------ numeric limits with bounds
BAD_NUMBERS = ("0", "-1", "nan", "inf", "-inf", "1e300", str(10 ** 20), "9223372036854775807", "2.5e-400")


def _cbench(args: list, capsys) -> tuple[int, list[str]]:
    from cbench.cli import main

    capsys.readouterr()
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    err = capsys.readouterr().err
    return code, err.strip().splitlines()


@pytest.mark.parametrize("command,option,valid", [
    (["find", "score", "sub.jsonl"], "--wall-s", ()),
    (["find", "score", "sub.jsonl"], "--cpu-s", ()),
    (["find", "score", "sub.jsonl"], "--memory-mb", ()),
    (["find", "baseline"], "--limit", ()),
    (["find", "baseline"], "--seed", ("0",)),
    (["find", "call", "n0000", "1"], "--seed", ("0",)),
])
def test_find_numeric_options_are_bounded_at_parse_time(command, option, valid, capsys, tmp_path, monkeypatch):
    """Issue 44, finding 6: every numeric option of find score/baseline/call refuses 0,
    negatives, NaN, infinities, 1e300, 10**20 and the largest int64 with one `error:` line and
    exit 2, before anything runs (no suite is loaded: CBENCH_HOME points nowhere useful)."""
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("CBENCH_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    for value in BAD_NUMBERS:
        if value in valid:
            continue
        code, lines = _cbench([*command, f"{option}={value}"], capsys)
        assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and option in lines[0], \
            (option, value, code, lines)


@pytest.mark.parametrize("field,value", [
    ("wall_s", 0.0), ("wall_s", -1.0), ("wall_s", float("nan")), ("wall_s", float("inf")), ("wall_s", 1e300),
    ("cpu_s", 0), ("cpu_s", 10 ** 20), ("cpu_s", 2.5), ("cpu_s", True), ("memory_mb", 0), ("memory_mb", 2 ** 63 - 1),
    ("memory_mb", 10 ** 20), ("print_bytes", -1), ("print_bytes", 10 ** 20), ("output_bytes", 0),
    ("output_bytes", 10 ** 20),
])
def test_the_sandbox_api_refuses_limits_out_of_range(field, value):
    """Issue 44, finding 6 (the Python API): run_submissions refuses such limits with one
    UsageError line before any sandbox starts."""
    from dataclasses import replace

    from cbench.errors import UsageError

    with pytest.raises(UsageError) as err:
        run_submissions([{"key": "a", "kind": "numeric", "code": "def f(x):\n    return x\n"}], [0.0],
                        replace(LIMITS, **{field: value}))
    assert "\n" not in str(err.value) and field.replace("_", "-") in str(err.value), str(err.value)
