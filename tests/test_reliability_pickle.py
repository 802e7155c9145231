"""Crafted pickles: every one is refused with one line naming the file; nothing crashes cbench."""

from __future__ import annotations

import json
import pickle
import struct

import numpy as np
import pytest
import torch

from cbench.artifacts import legacy_pickle as legacy_pickle
from cbench.errors import ArtifactError, CbenchError, UnsafePickleError
from cli_inprocess import assert_one_clean_error, run_main

# numpy.dtype('f8') followed by BUILD with a structured-dtype state (names/fields): what crashed
# numpy's arraydescr_setstate in the old unpickler
DTYPE_BUILD = b"cnumpy\ndtype\n(S'f8'\nI00\nI01\ntR(I3\nS'<'\nN(S'a'\ntNI-1\nI-1\nI0\ntb."
CRAFTED = {
    "dtype-build-state": (DTYPE_BUILD, UnsafePickleError, "structured or sub-array numpy dtype"),
    "dtype-void": (b"cnumpy\ndtype\n(S'V8'\nI00\nI01\ntR.", UnsafePickleError, "not a plain number type"),
    "dtype-object": (b"cnumpy\ndtype\n(S'O8'\nI00\nI01\ntR.", UnsafePickleError, "not a plain number type"),
    "torch-device-bad": (b"ctorch\ndevice\n(S'cuda:-5xyz'\ntR.", UnsafePickleError, "not a device name"),
    "torch-device-int": (b"ctorch\ndevice\n(I99999999999\ntR.", UnsafePickleError, "not a device name"),
    "huge-frame": (b"\x80\x04\x95" + struct.pack("<Q", 2 ** 63) + b"N.", ArtifactError, "a frame of"),
    "bytearray-alloc": (b"c__builtin__\nbytearray\n(I999999999999\ntR.", UnsafePickleError, "other than on bytes"),
    "codecs-lookup": (b"c_codecs\nencode\n(S'x'\nS'rot13'\ntR.", UnsafePickleError, "_codecs.encode"),
    "build-on-list": (b"(lp0\n(dp1\nS'a'\nI1\nsb.", UnsafePickleError, "sets the state of a list"),
    "scalar-short": (b"cnumpy.core.multiarray\nscalar\n(cnumpy\ndtype\n(S'f8'\nI00\nI01\ntRC\x02abtR.",
                     UnsafePickleError, "from 2 bytes, not 8"),
    "truncated": (pickle.dumps({"a": [1, 2, 3]})[:-5], ArtifactError, "not a readable pickle"),
    "empty": (b"", ArtifactError, "not a readable pickle"),
    "reconstructor": (b"ccopyreg\n_reconstructor\n(cbuiltins\nset\ncbuiltins\nobject\nNtR.", UnsafePickleError,
                      "_reconstructor"),
}


def _laughs(levels: int = 40) -> bytes:
    x = [1]
    for _ in range(levels):
        x = [x, x]  # 2**40 leaves once expanded
    return pickle.dumps(x, protocol=4)


def _deep(levels: int = 100_000) -> bytes:
    return b"\x80\x02" + b"]" * levels + b"a" * (levels - 1) + b"."  # lists nested 100,000 deep


@pytest.mark.parametrize("name", sorted(CRAFTED))
def test_crafted_pickles_are_refused_in_process(name):
    data, cls, needle = CRAFTED[name]
    with pytest.raises(cls, match=needle) as info:
        legacy_pickle.loads(data, source=f"{name}.pkl")
    assert str(info.value).startswith(f"{name}.pkl: ") and "\n" not in str(info.value)


def test_expanding_and_deep_pickles_are_bounded():
    with pytest.raises(ArtifactError, match="more than 2000000 values"):
        legacy_pickle.loads(_laughs(), "laughs.pkl")
    with pytest.raises(ArtifactError, match="levels deep"):
        legacy_pickle.loads(_deep(), "deep.pkl")


def test_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(legacy_pickle, "MAX_MEMO", 10)
    with pytest.raises(ArtifactError, match="memo entries"):
        legacy_pickle.loads(pickle.dumps(list(range(100)) + [str(i) for i in range(20)], protocol=4), "memo.pkl")


def test_dtypes_devices_and_scalars_are_rebuilt_from_values():
    doc = {"dtype": torch.float16, "dev": torch.device("cuda:1"), "cpu": torch.device("cpu"),
           "nd": np.dtype(">i4"), "s": np.float32(1.5), "big": 2 ** 80, "inf": float("inf")}
    for protocol in (0, 2, 4, 5):
        out = legacy_pickle.loads_isolated(pickle.dumps(doc, protocol=protocol), "ok.pkl")
        assert out == doc
        assert out["nd"].byteorder == ">" and out["dev"].index == 1 and out["dtype"] is torch.float16


def test_the_child_process_refuses_what_the_parent_would(tmp_path):
    p = tmp_path / "cfg.pkl"
    p.write_bytes(DTYPE_BUILD)
    with pytest.raises(UnsafePickleError, match=f"^{p}: refused: .*structured"):
        legacy_pickle.load(p)


def test_a_crash_in_the_child_is_one_message(monkeypatch):
    """A native crash (simulated: the child kills itself with SIGSEGV) becomes an error, not a dead cbench."""
    monkeypatch.setattr(legacy_pickle, "_CHILD", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(UnsafePickleError, match=r"^x\.pkl: refused: the unpickler crashed \(SIGSEGV\)"):
        legacy_pickle.loads_isolated(b"N.", "x.pkl")
    monkeypatch.setattr(legacy_pickle, "_CHILD", "import time; time.sleep(30)")
    with pytest.raises(ArtifactError, match="took more than 1 s"):
        legacy_pickle.loads_isolated(b"N.", "x.pkl", timeout=1)


def test_non_regular_and_large_pickle_files_are_refused(tmp_path, monkeypatch):
    import os

    fifo = tmp_path / "edges.pkl"
    os.mkfifo(fifo)
    with pytest.raises(ArtifactError, match="is a FIFO"):
        legacy_pickle.load(fifo)
    monkeypatch.setattr(legacy_pickle, "MAX_PICKLE_BYTES", 10)
    big = tmp_path / "big.pkl"
    big.write_bytes(pickle.dumps(list(range(100))))
    with pytest.raises(ArtifactError, match="more than cbench reads"):
        legacy_pickle.read_limited(big, legacy_pickle.MAX_PICKLE_BYTES)


def _folder(tmp_path):
    from test_hub_interpbench import _interpbench_folder

    d, _ = _interpbench_folder(tmp_path)
    return d


@pytest.mark.parametrize("which", ["ll_model_cfg.pkl", "edges.pkl"])
def test_import_interpbench_with_a_crafted_pickle_is_one_line_and_writes_nothing(tmp_path, which):
    d = _folder(tmp_path)
    (d / which).write_bytes(DTYPE_BUILD)
    out = tmp_path / "out"
    res = run_main(["import-interpbench", str(d), "--case", "3", "--out", str(out)])
    line = assert_one_clean_error(res, 1, which, "refused")
    assert len(DTYPE_BUILD) < 70 and "structured" in line
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["ib"]


def test_a_deep_benchmark_metadata_is_one_line(tmp_path):
    d = _folder(tmp_path)
    (d.parent / "benchmark_metadata.json").write_text("[" * 100_000 + "]" * 100_000)
    res = run_main(["import-interpbench", str(d), "--case", "3", "--out", str(tmp_path / "out")])
    assert_one_clean_error(res, 1, "benchmark_metadata.json", "nested")
    assert not (tmp_path / "out").exists()


def test_plain_configs_survive_the_round_trip():
    cfg = {"n_layers": 2, "act_fn": "gelu", "dtype": torch.float32, "device": "cpu", "seed": 42,
           "t": (1, "a"), "s": {1, 2}, "b": b"\x00\x01", "c": complex(1, -2)}
    out = legacy_pickle.loads_isolated(pickle.dumps(cfg, protocol=2), "cfg.pkl")
    assert out == cfg
    assert json.dumps({k: v for k, v in out.items() if k in ("n_layers", "act_fn", "seed")})
    assert issubclass(UnsafePickleError, CbenchError)


def test_weights_are_read_in_a_child_and_a_crash_there_is_one_line(tmp_path, monkeypatch):
    from cbench.artifacts import interpbench_import as interpbench_import

    d = _folder(tmp_path)
    (d / "ll_model.pth").write_bytes(b"PK\x03\x04" + bytes(range(256)) * 3)
    res = run_main(["import-interpbench", str(d), "--case", "3", "--out", str(tmp_path / "out")])
    assert_one_clean_error(res, 1, "ll_model.pth", "not a readable torch state dict")
    monkeypatch.setattr(interpbench_import, "_WEIGHTS_CHILD", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    res = run_main(["import-interpbench", str(d), "--case", "3", "--out", str(tmp_path / "out")])
    assert_one_clean_error(res, 1, "ll_model.pth", "crashed (SIGSEGV)")
    assert not (tmp_path / "out").exists()
