"""The one output writer and the bounded reader (cbench.files.safe_io), directly and through --out/--plot."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

from cbench.errors import ArtifactError, SchemaError, UsageError
from cbench.files.safe_io import output_target, read_regular_file, write_output
from cli_inprocess import assert_one_clean_error, run_main
from hub_helpers import write_tiny_artifact


def test_new_file_honours_the_umask(tmp_path):
    for mask, mode in ((0o022, 0o644), (0o077, 0o600), (0o002, 0o664)):
        old = os.umask(mask)
        try:
            p = write_output(tmp_path / f"new-{mask:o}.json", b"{}\n")
        finally:
            os.umask(old)
        assert stat.S_IMODE(os.stat(p).st_mode) == mode
        assert p.read_bytes() == b"{}\n"


def test_replacing_a_regular_file_keeps_its_mode_and_leaves_no_temporary(tmp_path):
    p = tmp_path / "r.json"
    p.write_text("old")
    os.chmod(p, 0o640)
    write_output(p, b"new")
    assert p.read_text() == "new" and stat.S_IMODE(os.stat(p).st_mode) == 0o640
    assert sorted(os.listdir(tmp_path)) == ["r.json"]


@pytest.mark.parametrize("kind", ["dir", "fifo", "devnull"])
def test_devices_fifos_and_directories_are_refused_and_left_alone(tmp_path, kind):
    if kind == "dir":
        target = tmp_path / "d"
        target.mkdir()
    elif kind == "fifo":
        target = tmp_path / "f"
        os.mkfifo(target)
    else:
        target = "/dev/null"
    before = os.stat(target)
    with pytest.raises(UsageError, match="writes only new or regular files"):
        write_output(target, b"x")
    after = os.stat(target)
    assert (before.st_mode, before.st_ino) == (after.st_mode, after.st_ino)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path):
    target = tmp_path / "target.json"
    target.write_text("old")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    write_output(link, b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "made.json")
    write_output(dangling, b"made")
    assert (tmp_path / "made.json").read_text() == "made" and dangling.is_symlink()
    to_dev = tmp_path / "to-dev"
    to_dev.symlink_to("/dev/null")
    with pytest.raises(UsageError, match=r"/dev/null \(the target of the symlink .*to-dev\) is a character device"):
        write_output(to_dev, b"x")


def test_empty_path_and_missing_directory_are_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="--out is empty"):
        output_target("")
    with pytest.raises(UsageError, match="does not exist"):
        output_target(tmp_path / "no" / "such" / "f.json")


def test_a_temporary_left_by_a_killed_writer_is_removed(tmp_path):
    p = tmp_path / "f.json"
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    stale = tmp_path / f".f.json.{dead}.tmp-abcd1234"
    stale.write_text("half")
    mine = tmp_path / f".f.json.{os.getppid()}.tmp-live0000"  # a live process: kept
    mine.write_text("busy")
    write_output(p, b"done")
    assert not stale.exists() and mine.exists() and p.read_text() == "done"


def test_reader_refuses_fifos_devices_and_large_files_without_blocking(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(ArtifactError, match="is a FIFO"):
        read_regular_file(fifo, 100)
    with pytest.raises(SchemaError, match="is a character device"):
        read_regular_file("/dev/zero", 100, error=SchemaError)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(ArtifactError, match="more than cbench reads"):
        read_regular_file(big, 100)
    assert read_regular_file(big, 101) == b"x" * 101


def test_validate_on_a_fifo_answers_at_once(tmp_path):
    fifo = tmp_path / "scores.json"
    os.mkfifo(fifo)
    res = run_main(["validate", str(fifo)])
    assert res.code == 1 and "is a FIFO" in res.stdout + res.stderr


@pytest.fixture(scope="module")
def tiny_case(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny") / "case-3"
    write_tiny_artifact(d)
    return d


@pytest.mark.parametrize("target", ["/dev/null", "DIR", "FIFO", ""])
def test_discover_and_score_out_refuse_bad_targets_before_any_work(tiny_case, tmp_path, target, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    if target == "DIR":
        target = str(tmp_path)
    elif target == "FIFO":
        target = str(tmp_path / "fifo")
        os.mkfifo(target)
    res = run_main(["discover", str(tiny_case), "-m", "random", "--sampled", "--out", target])
    assert_one_clean_error(res, 2, "--out")
    scores = tmp_path / "s.json"
    scores.write_text("{}")
    for opt in ("--out", "--plot"):
        res = run_main(["score", str(tiny_case), str(scores), opt, target])
        assert_one_clean_error(res, 2, opt)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_discover_writes_through_the_shared_writer(tiny_case, tmp_path, monkeypatch):
    monkeypatch.setenv("CBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    link.symlink_to(target)
    old = os.umask(0o022)
    try:
        res = run_main(["discover", str(tiny_case), "-m", "random", "--sampled", "--out", str(link)])
    finally:
        os.umask(old)
    assert res.code == 0, res.stderr
    assert link.is_symlink() and json.loads(target.read_text())["schema"] == "cbench/edge-scores/v1"
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o644
