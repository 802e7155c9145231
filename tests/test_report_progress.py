"""Progress of long jobs (cbench.scoring.progress): k of N and an ETA on standard error; one line
per finished unit when standard error is not a terminal; the caller's echo, unchanged, when off;
a redrawn status line on a terminal."""

from __future__ import annotations

import io

import pytest
from cbench.scoring.progress import Progress, clock


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_lines_mode_writes_one_line_per_finished_unit_with_k_of_n_and_eta(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("cbench.scoring.progress.time.perf_counter", lambda: now[0])
    out = io.StringIO()
    with Progress(4, "bench", stream=out) as p:
        assert p.mode == "lines"
        p.advance(1)  # a skipped case: no work, no ETA sample
        p.start("case 3, eap")
        now[0] += 10
        p.done("case 3, eap: edge AUROC 1.0000")
        p.start("case 3, acdc")
        now[0] += 20
        p.done("case 3, acdc: edge AUROC 0.9000")
        p.start("case 4, eap")  # left open: close() counts it
        p.note("case 4: a warning")
    assert out.getvalue().splitlines() == [
        "[2/4 · ETA 0:20] case 3, eap: edge AUROC 1.0000",  # 10 s per unit so far, 2 left
        "[3/4 · ETA 0:15] case 3, acdc: edge AUROC 0.9000",  # (10 + 20) / 2 s, 1 left
        "case 4: a warning",
    ]
    assert p.done_count == 4 and "\r" not in out.getvalue()


def test_resumed_units_count_as_done_but_not_in_the_eta(monkeypatch):
    now = [0.0]
    monkeypatch.setattr("cbench.scoring.progress.time.perf_counter", lambda: now[0])
    out = io.StringIO()
    p = Progress(3, "bench", stream=out)
    p.start("a")
    p.done("a: from an earlier run", worked=False)
    assert p.eta() is None and out.getvalue().startswith("[1/3 · ETA ?] a")
    p.start("b")
    now[0] += 6
    p.done("b")
    assert p.eta() == pytest.approx(6.0)
    p.close()


def test_off_mode_passes_lines_to_echo_and_writes_nothing():
    out, seen = io.StringIO(), []
    with Progress(2, "bench", mode="off", echo=seen.append, stream=out) as p:
        p.start("x")
        p.done("x: done")
        p.note("a note")
    assert seen == ["x: done", "a note"] and out.getvalue() == ""


def test_tty_mode_redraws_one_status_line_and_keeps_finished_lines():
    out = Tty()
    p = Progress(2, "bench", stream=out, tick=0.05)
    assert p.mode == "tty"
    p.start("case 3, acdc")
    status = out.getvalue()
    assert "\r[bench 0/2 0% · 0:00 · ETA ?] case 3, acdc (0:00)" in status
    p.done("case 3, acdc: edge AUROC 0.9")
    p.close()
    text = out.getvalue()
    assert "case 3, acdc: edge AUROC 0.9\n" in text and "[bench 1/2 50%" in text
    assert text.endswith("\r")  # the status line is cleared at the end


def test_clock():
    assert [clock(x) for x in (None, float("nan"), -1, 0, 59.6, 61, 3600 + 62)] == \
        ["?", "?", "?", "0:00", "1:00", "1:01", "1:01:02"]
