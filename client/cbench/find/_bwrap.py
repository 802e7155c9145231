"""bubblewrap, the OS boundary of the FIND sandbox: where things are, what the sandbox's root
holds, bwrap's arguments, the root-only staging of the interpreter's files, and the check of
what the supervisor reports about its own confinement. Used by :mod:`cbench.find.sandbox`.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import struct
import subprocess
from pathlib import Path

from cbench.errors import FindError

CHILD = Path(__file__).with_name("_sandbox_child.py")
SECCOMP = Path(__file__).with_name("_seccomp.py")
SECCOMP_PATH = "/sandbox/_seccomp.py"
SANDBOX_UID = SANDBOX_GID = 65534  # inside the sandbox, and on the host when cbench runs as root
SITE = "/sandbox/site"
CHILD_PATH = "/sandbox/child.py"
WORKDIR = "/cbench-find-sandbox"
NAMESPACES = ("user", "pid", "mnt", "net", "ipc", "uts")
FIX = ("install bubblewrap (as root: `apt-get install bubblewrap`, which `make setup` does), or pass --trust-code "
       "to run the submitted code without a sandbox (only for code you trust)")


class SandboxUnavailableError(FindError):
    """The OS boundary for submitted code cannot be set up (or did not hold): nothing was run."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


@functools.lru_cache(maxsize=None)
def _bwrap_version(path: str) -> str:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "bwrap"


@functools.lru_cache(maxsize=None)
def _probe(executable: str, site: str) -> dict:
    """What the supervisor needs: run outside the sandbox, on no user code, exactly as it runs
    inside (``python -I -S`` with numpy's directory on sys.path)."""
    try:
        proc = subprocess.run([executable, "-I", "-S", str(CHILD), "--probe", "--site", site], capture_output=True,
                              text=True, timeout=120, env=_host_env(), cwd="/")
        info = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        raise SandboxUnavailableError(
            f"cannot sandbox submitted code: the interpreter's probe failed ({exc})") from None
    return info


def _elf_interpreter(path: str) -> str | None:
    """The program interpreter (PT_INTERP) of an ELF executable, e.g. /lib64/ld-linux-x86-64.so.2."""
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or head[4] != 2:
                return None
            end = "<" if head[5] == 1 else ">"
            phoff, = struct.unpack_from(end + "Q", head, 0x20)
            phentsize, phnum = struct.unpack_from(end + "HH", head, 0x36)
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                ph = f.read(phentsize)
                if struct.unpack_from(end + "I", ph, 0)[0] == 3:  # PT_INTERP
                    offset, = struct.unpack_from(end + "Q", ph, 8)
                    size, = struct.unpack_from(end + "Q", ph, 32)
                    f.seek(offset)
                    return f.read(size).rstrip(b"\0").decode()
    except (OSError, struct.error, UnicodeDecodeError):
        return None
    return None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


@functools.lru_cache(maxsize=None)
def layout(executable: str) -> dict:
    """The sandbox's read-only root: ``binds`` [(host source, sandbox path)], ``hidden``
    (site-packages directories inside bound trees, covered by an empty read-only tmpfs) and
    the interpreter to run (``executable`` resolved; numpy is the one this process imports)."""
    import numpy

    info = _probe(os.path.realpath(executable), os.path.dirname(os.path.dirname(os.path.realpath(numpy.__file__))))
    exe, numpy_dir = info["executable"], info["numpy"]
    stdlib = [d for d in info["stdlib"] if os.path.isdir(d)]
    numpy_libs = os.path.join(os.path.dirname(numpy_dir), "numpy.libs")
    site_roots = [numpy_dir] + ([numpy_libs] if os.path.isdir(numpy_libs) else [])
    dirs = set(stdlib)
    files = {exe}
    interp = _elf_interpreter(exe)
    if interp:
        files.add(interp)
    for m in info["maps"]:
        if m == exe or any(_under(m, r) for r in site_roots) or not os.path.exists(m):
            continue
        dirs.add(os.path.dirname(m))
    if os.path.isfile("/etc/ld.so.cache"):
        files.add("/etc/ld.so.cache")
    dirs = sorted(d for d in dirs if not any(d != o and _under(d, o) for o in dirs))
    files = sorted(f for f in files if not any(_under(f, d) for d in dirs))
    binds = [(d, d) for d in dirs] + [(f, f) for f in files]
    binds += [(r, f"{SITE}/{os.path.basename(r)}") for r in site_roots]
    hidden = []
    for d in dirs:
        for sub in ("site-packages", "dist-packages", "*/site-packages", "*/dist-packages"):
            for p in sorted(Path(d).glob(sub)):
                if p.is_dir():
                    hidden.append(str(p))
    return {"binds": binds, "hidden": hidden, "executable": exe, "machine": info.get("machine")}


def _host_env() -> dict:
    return {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}


SANDBOX_ENV = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}


def _private_paths(extra) -> list[str]:
    """Paths the sandbox must never see: the suite, the hub cache, this package."""
    out = [str(Path(__file__).resolve().parents[1])]
    cache = os.environ.get("CBENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "cbench")
    out.append(os.path.realpath(cache))
    out += [os.path.realpath(p) for p in extra or ()]
    return out


def _check_layout(lay: dict, private: list[str]) -> None:
    for src, _ in lay["binds"]:
        src = os.path.realpath(src)
        for p in private:
            if _under(p, src):
                raise SandboxUnavailableError(
                    f"cannot sandbox submitted code: the interpreter's files are in {src}, which holds {p}; the "
                    f"sandbox would see it (install Python and numpy outside the suite and the cbench checkout)")


def _data_fd(data: bytes) -> int:
    """A descriptor to read ``data`` from, at offset 0 (an anonymous memory file; bwrap reads
    ``--args``, ``--seccomp`` and ``--ro-bind-data`` to the end)."""
    fd = os.memfd_create("cbench-sandbox", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _bwrap_args(lay: dict, binds: list[tuple[str, str]], child_fd: int, module_fd: int, seccomp_fd: int) -> list[str]:
    a = ["--unshare-user", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
         "--disable-userns", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID), "--hostname", "cbench-sandbox",
         "--as-pid-1", "--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
    for k, v in SANDBOX_ENV.items():
        a += ["--setenv", k, v]
    for src, dest in binds:
        a += ["--ro-bind", src, dest]
    for h in lay["hidden"]:
        a += ["--tmpfs", h, "--remount-ro", h]
    a += ["--proc", "/proc", "--dev", "/dev",
          "--ro-bind-data", str(child_fd), CHILD_PATH, "--ro-bind-data", str(module_fd), SECCOMP_PATH,
          "--tmpfs", WORKDIR, "--remount-ro", WORKDIR, "--remount-ro", "/dev", "--remount-ro", "/",
          "--chdir", WORKDIR, "--seccomp", str(seccomp_fd)]
    return a


def _command(lay: dict) -> list[str]:
    return [lay["executable"], "-I", "-S", CHILD_PATH, "--sandboxed", "--site", SITE]


# ----------------------------------------------------------------- root: stage, then drop
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_REMOUNT, _MS_BIND, _MS_REC, _MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_CLONE_NEWNS = 0x00020000


@functools.lru_cache(maxsize=1)
def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
    libc.unshare.argtypes = [ctypes.c_int]
    return libc


def _reachable_by_others(path: str) -> bool:
    """Whether a uid with no relation to the file's owner can reach and read ``path``."""
    p = Path(path)
    try:
        for anc in reversed(p.parents):
            if not anc.stat().st_mode & 0o001:
                return False
        mode = p.stat().st_mode
    except OSError:
        return False
    return bool(mode & 0o004) and (not p.is_dir() or bool(mode & 0o001))


def _drop():
    """preexec_fn when cbench runs as root: become uid/gid 65534 with no supplementary groups."""
    os.setgroups([])
    os.setresgid(SANDBOX_GID, SANDBOX_GID, SANDBOX_GID)
    os.setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID)


def _stage_and_drop(stage: str, sources: list[str]):
    """preexec_fn when cbench runs as root: in a private mount namespace of the bwrap process,
    bind each source read-only at ``stage/<i>`` (reachable by uid 65534 wherever the source
    is), then drop to uid/gid 65534 with no supplementary groups. The host's mounts are not
    touched; the namespace ends with the sandbox."""
    import ctypes

    libc = _libc()

    def check(rc, what):
        if rc != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"{what}: {os.strerror(err)}")

    def fn():
        check(libc.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "make / private")
        check(libc.mount(b"tmpfs", stage.encode(), b"tmpfs", _MS_NOSUID | _MS_NODEV, b"mode=0755,size=65536"),
              "tmpfs on the staging directory")
        for i, src in enumerate(sources):
            dst = f"{stage}/{i}"
            if os.path.isdir(src):
                os.mkdir(dst)
            else:
                os.close(os.open(dst, os.O_CREAT | os.O_WRONLY, 0o644))
            check(libc.mount(src.encode(), dst.encode(), None, _MS_BIND | _MS_REC, None), f"bind {src}")
            check(libc.mount(None, dst.encode(), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY, None), f"read-only {src}")
        _drop()
    return fn


# ----------------------------------------------------------------- the status check
def _host_namespaces() -> dict:
    out = {}
    for ns in NAMESPACES:
        try:
            out[ns] = os.readlink(f"/proc/self/ns/{ns}")
        except OSError:
            out[ns] = None
    return out


def check_status(st: dict) -> list[str]:
    """What is wrong with the supervisor's own report of its confinement ([] when it holds)."""
    problems = []
    host = _host_namespaces()
    try:
        if st.get("NoNewPrivs") != ["1"]:
            problems.append("no_new_privs is not set")
        if st.get("Seccomp") != ["2"]:
            problems.append("no seccomp filter")
        for cap in ("CapInh", "CapPrm", "CapEff", "CapAmb"):
            if int((st.get(cap) or ["1"])[0], 16) != 0:
                problems.append(f"{cap} is not empty")
        if any(u != str(SANDBOX_UID) for u in st.get("Uid") or ["?"]):
            problems.append(f"runs as uid {st.get('Uid')}, not {SANDBOX_UID}")
        for ns in NAMESPACES:
            inside = (st.get("ns") or {}).get(ns)
            if inside is None or inside == host.get(ns):
                problems.append(f"shares the host's {ns} namespace")
        if not str(st.get("inet_socket", "")).startswith("refused"):
            problems.append("may open internet sockets")
        if [d for d in st.get("net_devices") or ["?"] if d != "lo"]:
            problems.append(f"sees network devices {st.get('net_devices')}")
        if st.get("cwd") != WORKDIR or st.get("cwd_writable") or st.get("root_writable"):
            problems.append("the root or working directory is writable")
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        problems.append(f"unreadable status ({type(exc).__name__})")
    return problems


def _descendants(pid: int) -> list[int]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo += kids.get(p, [])
    return out


def _host_uid_problems(pid: int) -> list[str]:
    """Seen from the host: bwrap and everything under it run as a non-root uid."""
    problems = []
    for p in _descendants(pid):
        try:
            with open(f"/proc/{p}/status") as f:
                uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
        except (OSError, StopIteration):
            continue
        if "0" in uids:
            problems.append(f"process {p} of the sandbox runs as root on the host")
    return problems
