"""Seccomp filters of the FIND sandbox, in classic BPF, with no dependency.

:func:`program` builds the filter bubblewrap loads for everything in the sandbox
(``"sandbox"``) and the one the supervisor adds to each entry (``"entry"``); :func:`install`
loads one into the calling thread. Standalone (imported by the supervisor inside the sandbox,
where it is ``/sandbox/_seccomp.py``, and by :mod:`cbench.find.sandbox` on the host).
System-call numbers are checked against ``<asm/unistd_64.h>`` (x86_64) and
``<asm-generic/unistd.h>`` (aarch64); other architectures get no filter, and the sandbox refuses
to start there.
"""

import ctypes
import os
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X86_64 = {
    "ptrace": 101, "setns": 308, "unshare": 272, "mount": 165, "umount2": 166, "pivot_root": 155, "chroot": 161,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_tree_attr": 467, "statmount": 457, "listmount": 458, "bpf": 321, "keyctl": 250,
    "add_key": 248, "request_key": 249, "perf_event_open": 298, "process_vm_readv": 310, "process_vm_writev": 311,
    "kcmp": 312, "pidfd_getfd": 438, "pidfd_open": 434, "pidfd_send_signal": 424, "userfaultfd": 323,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176, "reboot": 169,
    "swapon": 167, "swapoff": 168, "acct": 163, "syslog": 103, "quotactl": 179, "quotactl_fd": 443,
    "open_by_handle_at": 304, "name_to_handle_at": 303, "iopl": 172, "ioperm": 173, "settimeofday": 164,
    "clock_settime": 227, "adjtimex": 159, "clock_adjtime": 305, "sethostname": 170, "setdomainname": 171,
    "lookup_dcookie": 212, "vhangup": 153, "personality": 135, "uselib": 134, "fanotify_init": 300,
    "process_madvise": 440, "process_mrelease": 448, "move_pages": 279, "migrate_pages": 256,
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71,
    "clone": 56, "clone3": 435, "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "socket": 41,
    "socketpair": 53, "ioctl": 16, "kill": 62, "tkill": 200, "tgkill": 234, "rt_sigqueueinfo": 129,
    "rt_tgsigqueueinfo": 297, "setsid": 112, "setpgid": 109, "memfd_create": 319,
    "inotify_init": 253, "inotify_init1": 294, "inotify_add_watch": 254, "prlimit64": 302, "setpriority": 141,
    "sched_setparam": 142, "sched_setscheduler": 144, "sched_setaffinity": 203, "sched_setattr": 314,
    "ioprio_set": 251, "fcntl": 72,
}
_AARCH64 = {
    "ptrace": 117, "setns": 268, "unshare": 97, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
    "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
    "mount_setattr": 442, "open_tree_attr": 467, "statmount": 457, "listmount": 458, "bpf": 280, "keyctl": 219,
    "add_key": 217, "request_key": 218, "perf_event_open": 241, "process_vm_readv": 270, "process_vm_writev": 271,
    "kcmp": 272, "pidfd_getfd": 438, "pidfd_open": 434, "pidfd_send_signal": 424, "userfaultfd": 282,
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "kexec_load": 104,
    "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106, "reboot": 142,
    "swapon": 224, "swapoff": 225, "acct": 89, "syslog": 116, "quotactl": 60, "quotactl_fd": 443,
    "open_by_handle_at": 265, "name_to_handle_at": 264, "settimeofday": 170, "clock_settime": 112,
    "adjtimex": 171, "clock_adjtime": 266, "sethostname": 161, "setdomainname": 162, "lookup_dcookie": 18,
    "vhangup": 58, "personality": 92, "fanotify_init": 262, "process_madvise": 440, "process_mrelease": 448,
    "move_pages": 239, "migrate_pages": 238, "shmget": 194, "shmat": 196, "shmctl": 195, "shmdt": 197,
    "semget": 190, "semop": 193, "semctl": 191, "semtimedop": 192, "msgget": 186, "msgsnd": 189, "msgrcv": 188,
    "msgctl": 187, "clone": 220, "clone3": 435, "execve": 221, "execveat": 281, "socket": 198, "socketpair": 199,
    "ioctl": 29, "kill": 129, "tkill": 130, "tgkill": 131, "rt_sigqueueinfo": 138, "rt_tgsigqueueinfo": 240,
    "setsid": 157, "setpgid": 154, "memfd_create": 279,
    "inotify_init1": 26, "inotify_add_watch": 27, "prlimit64": 261, "setpriority": 140, "sched_setparam": 118,
    "sched_setscheduler": 119, "sched_setaffinity": 122, "sched_setattr": 274, "ioprio_set": 30, "fcntl": 25,
}
SYSCALLS = {"x86_64": _X86_64, "aarch64": _AARCH64}

#: refused for everything in the sandbox (EPERM): namespaces, mounts, tracing, kernel keyrings,
#: BPF, io_uring (which bypasses seccomp), SysV IPC (memory outside RLIMIT_AS), modules, clocks
SANDBOX_DENY = (
    "ptrace", "setns", "unshare", "mount", "umount2", "pivot_root", "chroot", "open_tree", "move_mount", "fsopen",
    "fsconfig", "fsmount", "fspick", "mount_setattr", "open_tree_attr", "statmount", "listmount", "bpf", "keyctl",
    "add_key", "request_key", "perf_event_open", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    "pidfd_open", "pidfd_send_signal", "userfaultfd", "io_uring_setup", "io_uring_enter", "io_uring_register",
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon", "swapoff",
    "acct", "syslog", "quotactl", "quotactl_fd", "open_by_handle_at", "name_to_handle_at", "iopl", "ioperm",
    "settimeofday", "clock_settime", "adjtimex", "clock_adjtime", "sethostname", "setdomainname", "lookup_dcookie",
    "vhangup", "personality", "uselib", "fanotify_init", "process_madvise", "process_mrelease", "move_pages",
    "migrate_pages", "shmget", "shmat", "shmctl", "shmdt", "semget", "semop", "semctl", "semtimedop", "msgget",
    "msgsnd", "msgrcv", "msgctl", "inotify_init", "inotify_init1", "inotify_add_watch",
)
#: refused to an entry on top of SANDBOX_DENY: new processes, exec, process groups, memfd, I/O priorities
ENTRY_DENY = ("fork", "vfork", "execve", "execveat", "setsid", "setpgid", "memfd_create", "ioprio_set")
#: allowed to an entry only on itself (first argument 0 or its own pid): another process's limits,
#: scheduling or CPU affinity are out of its reach
ENTRY_SELF_ONLY = ("prlimit64", "sched_setparam", "sched_setscheduler", "sched_setaffinity", "sched_setattr")
#: fcntl commands refused to an entry: who gets a descriptor's signals (F_SETOWN, F_SETOWN_EX),
#: which signal (F_SETSIG), directory notifications (F_NOTIFY: host file activity), leases
F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY = 8, 10, 15, 1024, 1026
ENTRY_FCNTL_DENY = (F_SETOWN, F_SETSIG, F_SETOWN_EX, F_SETLEASE, F_NOTIFY)
#: ioctls refused to an entry: a socket's owner, as F_SETOWN
FIOSETOWN, SIOCSPGRP = 0x8901, 0x8902
PRIO_PROCESS = 0

EPERM, ENOSYS, EAFNOSUPPORT = 1, 38, 97
AF_UNIX = 1
CLONE_THREAD = 0x00010000
CLONE_NS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
_RET_KILL_PROCESS, _RET_ERRNO, _RET_ALLOW = 0x80000000, 0x00050000, 0x7FFF0000
_LD_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_NR, _ARCH = 0, 4


def _arg(i):  # offset of the low 32 bits of syscall argument i in struct seccomp_data (little-endian)
    return 16 + 8 * i


def machine() -> str:
    m = os.uname().machine
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(m, m)


def program(kind: str, pid: int = 0, arch: str | None = None) -> bytes:
    """A seccomp classic-BPF program (``struct sock_filter[]``, host byte order).

    ``"sandbox"``: everything in the sandbox. Kills a process of another architecture (and, on
    x86_64, x32 system calls); refuses SANDBOX_DENY with EPERM, clone with a namespace flag,
    clone3 with ENOSYS (glibc falls back to clone, whose flags can be checked), sockets of
    every family but AF_UNIX, and the terminal ioctls TIOCSTI/TIOCLINUX.
    ``"entry"``: one entry (stacked on the first). Refuses ENTRY_DENY, clone without
    CLONE_THREAD, kill/tkill/tgkill/rt_(tg)sigqueueinfo aimed at any process but ``pid``;
    ENTRY_SELF_ONLY (prlimit64, sched_set*) and setpriority on any process but itself (0 or
    ``pid``); the fcntl commands ENTRY_FCNTL_DENY and the ioctls FIOSETOWN/SIOCSPGRP.
    """
    arch = arch or machine()
    if arch not in SYSCALLS:
        raise OSError(f"no seccomp policy for the {arch} architecture (x86_64 and aarch64 have one)")
    nr = SYSCALLS[arch]
    out = []

    def ins(code, k=0, jt=0, jf=0):
        out.append(struct.pack("=HBBI", code, jt, jf, k & 0xFFFFFFFF))

    def ret(action, errno=0):
        ins(_RET, action | errno)

    def block(name, body):
        """if nr == name: body (which must end in a return) else skip it."""
        if name not in nr:
            return
        ins(_JEQ, nr[name], 0, len(body))
        out.extend(body)

    def sub(build):
        saved = len(out)
        build()
        body = out[saved:]
        del out[saved:]
        return body

    ins(_LD_ABS, _ARCH)
    ins(_JEQ, AUDIT_ARCH[arch], 1, 0)
    ret(_RET_KILL_PROCESS)
    ins(_LD_ABS, _NR)
    if arch == "x86_64":
        ins(_JGE, 0x40000000, 0, 1)  # x32 ABI
        ret(_RET_KILL_PROCESS)
    if kind == "sandbox":
        for name in SANDBOX_DENY:
            block(name, sub(lambda: ret(_RET_ERRNO, EPERM)))
        block("clone3", sub(lambda: ret(_RET_ERRNO, ENOSYS)))
        block("clone", sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JSET, CLONE_NS, 0, 1), ret(_RET_ERRNO, EPERM),
                                    ret(_RET_ALLOW))))
        for name in ("socket", "socketpair"):
            block(name, sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JEQ, AF_UNIX, 0, 1), ret(_RET_ALLOW),
                                     ret(_RET_ERRNO, EAFNOSUPPORT))))
        block("ioctl", sub(lambda: (ins(_LD_ABS, _arg(1)), ins(_JEQ, TIOCSTI, 1, 0), ins(_JEQ, TIOCLINUX, 0, 1),
                                    ret(_RET_ERRNO, EPERM), ret(_RET_ALLOW))))
    elif kind == "entry":
        for name in ENTRY_DENY:
            block(name, sub(lambda: ret(_RET_ERRNO, EPERM)))
        block("clone", sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JSET, CLONE_THREAD, 0, 1), ret(_RET_ALLOW),
                                    ret(_RET_ERRNO, EPERM))))
        block("kill", sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JEQ, 0, 1, 0), ins(_JEQ, pid, 0, 1),
                                   ret(_RET_ALLOW), ret(_RET_ERRNO, EPERM))))
        for name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
            block(name, sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JEQ, pid, 0, 1), ret(_RET_ALLOW),
                                     ret(_RET_ERRNO, EPERM))))
        for name in ENTRY_SELF_ONLY:
            block(name, sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JEQ, 0, 1, 0), ins(_JEQ, pid, 0, 1),
                                     ret(_RET_ALLOW), ret(_RET_ERRNO, EPERM))))
        # setpriority(which, who, prio): only PRIO_PROCESS on itself (PRIO_USER would reach every
        # process of the sandbox's uid, the supervisor included)
        block("setpriority", sub(lambda: (ins(_LD_ABS, _arg(0)), ins(_JEQ, PRIO_PROCESS, 0, 4),
                                          ins(_LD_ABS, _arg(1)), ins(_JEQ, 0, 1, 0), ins(_JEQ, pid, 0, 1),
                                          ret(_RET_ALLOW), ret(_RET_ERRNO, EPERM))))
        n = len(ENTRY_FCNTL_DENY)
        block("fcntl", sub(lambda: (ins(_LD_ABS, _arg(1)),
                                    *[ins(_JEQ, cmd, n - i, 0) for i, cmd in enumerate(ENTRY_FCNTL_DENY)],
                                    ret(_RET_ALLOW), ret(_RET_ERRNO, EPERM))))
        block("ioctl", sub(lambda: (ins(_LD_ABS, _arg(1)), ins(_JEQ, FIOSETOWN, 1, 0), ins(_JEQ, SIOCSPGRP, 0, 1),
                                    ret(_RET_ERRNO, EPERM), ret(_RET_ALLOW))))
    else:
        raise ValueError(kind)
    ret(_RET_ALLOW)
    return b"".join(out)


PR_SET_DUMPABLE, PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP = 4, 36, 38, 22
SECCOMP_MODE_FILTER = 2


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


def prctl(option, arg2=0, arg3=0):
    if _libc.prctl(option, arg2, arg3, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


def install(prog: bytes) -> None:
    """Load a seccomp filter into this thread (no_new_privs must be set, or is set here)."""
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = _SockFprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    prctl(PR_SET_NO_NEW_PRIVS, 1)
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"seccomp: {os.strerror(err)}")
