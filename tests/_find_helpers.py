"""A small FIND suite built once per test session (by the real builder) for the FIND tests."""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

SMALL = {"seed": 7, "n_numeric": 20, "n_strings": 20}


@functools.lru_cache(maxsize=None)
def small_suite_dir() -> Path:
    from cbench_builders.find.suite import build_suite

    out = Path(tempfile.mkdtemp(prefix="cbench-find-test-"))
    atexit.register(shutil.rmtree, out, True)
    build_suite(out, **SMALL)
    return out / "find"


def small_suite():
    from cbench.find.suite import FindSuite

    return FindSuite.load(small_suite_dir())
