"""Reading and writing the files a user names: only regular files, bounded, never clobbering.

Writing (:func:`write_output`, used by every ``--out``/``--plot`` and by
:func:`cbench.artifacts.serialization.write_json`):

* the path must be new or a **regular file**: a directory, device (``/dev/null``), FIFO or socket
  is refused with one line (a :class:`~cbench.errors.UsageError`, exit 2) and left as it is;
* a **symlink is written through**: its target is replaced (the link stays a link); a link whose
  target is not a regular file is refused like that target;
* the bytes go to a temporary file beside the target (``.NAME.<pid>.tmp-XXXX``), are flushed to
  disk and renamed over it: readers see the old or the new file, never half of one. A temporary
  left by a killed writer (its process gone) is removed by the next write to that path;
* a new file gets the usual permissions (``0666`` less the umask), a replaced file keeps its mode.

Reading (:func:`read_regular_file`): opened without blocking (a FIFO cannot hang cbench), refused
unless a regular file, refused above a size limit before anything is read.
"""

from __future__ import annotations

import errno
import os
import stat
import uuid
from pathlib import Path

from cbench.errors import ArtifactError, CbenchError, UsageError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"))


def describe_mode(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def output_target(path: str | os.PathLike, option: str = "--out") -> Path:
    """The file a write to ``path`` replaces (a symlink's final target), after checking that it is
    new or a regular file in an existing directory. UsageError otherwise."""
    text = os.fspath(path)
    if not str(text).strip():
        raise UsageError(f"{option} is empty; give a file name")
    if "\0" in str(text):
        raise UsageError(f"{option} {text!r} contains a NUL byte")
    p = Path(text)
    try:
        is_link = p.is_symlink()
        target = Path(os.path.realpath(p)) if is_link else p
        st = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise UsageError(f"{option} {p}: cannot use it ({exc.strerror or exc})") from None
    via = f" (the target of the symlink {p})" if is_link else ""
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{option} {target}{via} is {describe_mode(st.st_mode)}; cbench writes only new or "
                         "regular files")
    if str(text).endswith(("/", os.sep)) or (os.altsep and str(text).endswith(os.altsep)):
        raise UsageError(f"{option} {text}: ends in {os.sep!r}, so it names a directory; give a file name")
    parent = target.parent
    if not parent.is_dir():
        raise UsageError(f"{option} {p}: directory {parent} does not exist; create it first "
                         "(cbench does not create missing directories)")
    check_writable(parent, option, p)
    return target


def check_writable(directory: str | os.PathLike, option: str, given: str | os.PathLike) -> None:
    """UsageError unless a file can be created in ``directory`` (tried: an empty directory made and
    removed at once, so ``/proc``, a read-only mount or a directory of another user is refused
    before any work, whatever ``os.access`` says for root)."""
    import tempfile

    try:
        probe = tempfile.mkdtemp(prefix=f".cbench-probe-{os.getpid()}-", dir=directory)
    except OSError as exc:
        why = "it takes no new files" if exc.errno == errno.ENOENT else (exc.strerror or str(exc))
        raise UsageError(f"{option} {given}: cannot write in {directory} ({why})") from None
    try:
        os.rmdir(probe)
    except OSError:
        pass


def _directory_named(path: str | os.PathLike, option: str) -> tuple[Path, bool]:
    """(path, exists) for an output directory option: refused when empty, holding a NUL byte,
    unusable, or an existing thing that is not a writable directory."""
    text = os.fspath(path)
    if not str(text).strip():
        raise UsageError(f"{option} is empty; give a directory name")
    if "\0" in str(text):
        raise UsageError(f"{option} {text!r} contains a NUL byte")
    p = Path(text)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        return p, False
    except OSError as exc:
        raise UsageError(f"{option} {p}: cannot use it ({exc.strerror or exc})") from None
    if not stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{option} {p} is {describe_mode(st.st_mode)}, not a directory")
    check_writable(p, option, p)
    return p, True


def output_directory(path: str | os.PathLike, option: str = "--out", parents: bool = False) -> Path:
    """The directory a command writes its files into, checked before any work: not empty, new or
    an existing directory (a file, device or FIFO is refused), in an existing parent directory
    (cbench creates the last directory of the path, never missing parents), or with
    ``parents=True`` under a writable existing directory (the command creates the missing ones with
    :func:`make_output_directory`, which says so). UsageError otherwise."""
    if parents:
        return output_tree(path, option)
    p, exists = _directory_named(path, option)
    if exists:
        return p
    parent = Path(os.path.abspath(p)).parent
    if not parent.is_dir():
        raise UsageError(f"{option} {p}: directory {parent} does not exist; create it first "
                         "(cbench does not create missing directories)")
    check_writable(parent, option, p)
    return p


def output_tree(path: str | os.PathLike, option: str = "--out") -> Path:
    """The directory a build writes into, creating it and its missing parents later: checked
    now, before any work, that it is new or a directory, and that the nearest existing directory
    above it is a directory cbench can write in. UsageError otherwise."""
    p, exists = _directory_named(path, option)
    if exists:
        return p
    above = Path(os.path.abspath(p)).parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UsageError(f"{option} {p}: {above} is not a directory")
    check_writable(above, option, p)
    return p


def missing_directories(path: str | os.PathLike) -> list[Path]:
    """The directories of ``path`` (itself included) that do not exist yet, deepest first: what
    :func:`make_output_directory` creates, and what :func:`remove_empty_directories` may take back."""
    missing = []
    above = Path(os.path.abspath(path))
    while not above.exists() and above != above.parent:
        missing.append(above)
        above = above.parent
    return missing


def remove_empty_directories(dirs) -> None:
    """Remove each of ``dirs`` (deepest first) that is an empty directory: a command that created
    its output directory and then wrote nothing leaves nothing behind."""
    for d in dirs:
        try:
            Path(d).rmdir()
        except OSError:
            return


def make_output_directory(path: str | os.PathLike, option: str = "--out", echo=None) -> Path:
    """Create the output directory ``path`` checked by :func:`output_directory` and its missing
    parents, telling ``echo`` which directories it created (none when they all existed)."""
    p = Path(path)
    missing = missing_directories(p)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{option} {p}: cannot create the directory ({exc.strerror or exc})") from None
    if missing and echo is not None:
        made = ", ".join(os.path.relpath(m) if not os.path.isabs(os.fspath(path)) else str(m) for m in reversed(missing))
        echo(f"created {made} for {option} {p}")
    return p


def refuse_input_as_output(outputs, inputs) -> None:
    """UsageError when an output names one of the command's input files (the same file after
    symlinks, hard links and ``..``), or two outputs name one file: writing it would destroy what
    the user had. ``outputs`` and ``inputs`` are ``(option, path)`` pairs; ``None`` and ``-``
    (standard output) are skipped, as are paths that do not exist yet."""
    outs = [(o, p) for o, p in outputs if p is not None and os.fspath(p) != "-"]
    ins = [(o, p) for o, p in inputs if p is not None and os.fspath(p) != "-"]
    for i, (opt, out) in enumerate(outs):
        for what, other in ins + outs[i + 1:]:
            if _same_file(out, other):
                raise UsageError(f"{opt} {out} is the same file as {what} {other}; cbench does not overwrite "
                                 "what a command reads or writes twice: give another file name")


def _same_file(a, b) -> bool:
    try:
        if os.path.samefile(a, b):
            return True
    except (OSError, ValueError):
        pass
    try:  # neither exists yet: the same name after resolving
        return os.path.realpath(a) == os.path.realpath(b)
    except (OSError, ValueError):
        return False


def write_output(path: str | os.PathLike, data: bytes, option: str = "--out") -> Path:
    """Write ``data`` to ``path`` (see the module docstring); return the path written."""
    target = output_target(path, option)
    _remove_stale_temporaries(target)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp-{uuid.uuid4().hex[:8]}")
    try:
        try:
            mode = stat.S_IMODE(os.stat(target).st_mode)
        except FileNotFoundError:
            mode = None
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
                if mode is not None:
                    os.fchmod(fh.fileno(), mode)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        try:
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ArtifactError(f"{path}: cannot write it ({exc.strerror or exc})") from None
    return Path(path)


def _remove_stale_temporaries(target: Path) -> None:
    """Remove ``.NAME.<pid>.tmp-*`` files beside ``target`` whose writer process is gone."""
    prefix = f".{target.name}."
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return
    for entry in entries:
        name = entry.name
        if not name.startswith(prefix) or ".tmp-" not in name:
            continue
        pid_text = name[len(prefix):].split(".tmp-", 1)[0]
        if pid_text.isdigit() and int(pid_text) != os.getpid() and not pid_alive(int(pid_text)):
            try:
                if entry.is_file(follow_symlinks=False):
                    os.unlink(entry.path)
            except OSError:
                pass


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def read_regular_file(path: str | os.PathLike, limit: int, what: str = "a file",
                      error: type[CbenchError] = ArtifactError) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; ``error`` with one line otherwise
    (missing, a directory, a FIFO or device, too large, unreadable). Never blocks on a FIFO."""
    p = Path(path)
    try:
        fd = os.open(p, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise error(f"{p}: no such file") from None
    except IsADirectoryError:
        raise error(f"{p}: is a directory, not {what}") from None
    except OSError as exc:
        raise error(f"{p}: cannot read it ({exc.strerror or exc})") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{p}: is {describe_mode(st.st_mode)}, not {what}; cbench reads only regular files")
        if st.st_size > limit:
            raise error(f"{p}: {st.st_size} bytes is more than cbench reads for {what} ({limit} bytes)")
        chunks, total = [], 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise error(f"{p}: more than {limit} bytes, more than cbench reads for {what}")
        return b"".join(chunks)
    except OSError as exc:
        raise error(f"{p}: cannot read it ({exc.strerror or exc})") from None
    finally:
        os.close(fd)
