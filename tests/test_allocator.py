"""cbench.runtime.allocator: the CLI sets glibc's malloc for many large short-lived tensors, and
``CBENCH_MALLOC=default`` leaves it alone. Run in subprocesses: the settings are per process."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import ctypes, os, sys
from cbench.runtime.allocator import tune
applied = tune()
class Info(ctypes.Structure):  # struct mallinfo2: arena, ordblks, smblks, hblks, hblkhd, ...
    _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks",
                                                "fsmblks", "uordblks", "fordblks", "keepcost")]
libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
before = libc.mallinfo2().hblks
p = libc.malloc(8 << 20)  # 8 MB: mmapped under glibc's defaults, from the heap once tuned
mapped = libc.mallinfo2().hblks - before
libc.free(p)
print(int(applied), mapped)
"""


def _run(env_extra: dict) -> tuple[int, int]:
    import os

    env = {**os.environ, **env_extra}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    applied, mapped = out.stdout.split()
    return int(applied), int(mapped)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_tune_serves_large_tensors_from_the_heap():
    assert _run({"CBENCH_MALLOC": ""}) == (1, 0)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_cbench_malloc_default_leaves_the_allocator_alone():
    assert _run({"CBENCH_MALLOC": "default"}) == (0, 1)


def test_the_cli_tunes_before_any_command(monkeypatch):
    import cbench.runtime.allocator as allocator
    from cbench.cli import main

    calls = []
    monkeypatch.setattr(allocator, "tune", lambda: calls.append(1) or True)
    try:
        code = main(["--version"])
    except SystemExit as e:
        code = e.code
    assert code == 0 and calls == [1]
