"""Progress of a long job (models x methods of a bench, the pages of a report): k of N and an ETA.

Three modes, chosen once per job:

* ``tty`` (standard error is a terminal): one status line on standard error, redrawn in place
  every second while a unit runs (``[bench 5/208 2% · 0:41 · ETA 27:10] case 3, acdc (12 s)``);
  a finished unit's line is printed above it, so the finished lines stay on screen;
* ``lines`` (standard error is a file or a pipe: logs, CI): one line per finished unit on
  standard error, prefixed with k of N and the ETA (``[5/208 · ETA 27:10] case 3, acdc: ...``),
  nothing redrawn, so logs stay readable;
* ``off`` (``--json``, or a caller that wants no progress): finished units' lines go to the
  caller's ``echo`` as before, with no count and no ETA.

The ETA is the mean time of the units run so far times the units left; units that took no work
(a resumed bench's finished runs) count as done but not in that mean.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable
from typing import TextIO

MODES = ("auto", "tty", "lines", "off")


def clock(seconds: float | None) -> str:
    """``m:ss`` (``h:mm:ss`` from an hour on); ``?`` when unknown."""
    if seconds is None or math.isnan(seconds) or seconds < 0:
        return "?"
    s = round(seconds)
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def resolve_mode(mode: str, stream: TextIO) -> str:
    if mode not in MODES:
        raise ValueError(f"progress mode must be one of {MODES}, not {mode!r}")
    if mode != "auto":
        return mode
    try:
        return "tty" if stream.isatty() else "lines"
    except (AttributeError, ValueError):
        return "lines"


class Progress:
    """k of ``total`` units of ``what`` (see the module docstring). Use as a context manager, or
    call :meth:`close` at the end."""

    def __init__(self, total: int, what: str, mode: str = "auto", echo: Callable[[str], None] = print,
                 stream: TextIO | None = None, tick: float = 1.0):
        self.total, self.what, self.echo = max(0, int(total)), what, echo
        self.stream = stream if stream is not None else sys.stderr
        self.mode = resolve_mode(mode, self.stream)
        self.done_count, self.worked, self.work_s = 0, 0, 0.0
        self.t0 = time.perf_counter()
        self.label: str | None = None
        self.unit_t0 = self.t0
        self._lock = threading.Lock()
        self._shown = 0  # width of the status line on screen (tty)
        self._stop = threading.Event()
        self._ticker = None
        if self.mode == "tty":
            self._ticker = threading.Thread(target=self._tick, args=(tick,), daemon=True)
            self._ticker.start()

    # ------------------------------------------------------------------ the job's side
    def start(self, label: str) -> None:
        """A unit begins (shown on the status line of a terminal). A unit still open (its job
        left it without a line, e.g. a failure already reported) is counted as finished first."""
        if self.label is not None:
            self.done(None)
        with self._lock:
            self.label, self.unit_t0 = label, time.perf_counter()
            self._draw()

    def advance(self, n: int = 1) -> None:
        """``n`` units that need no work (a case skipped before any method ran)."""
        with self._lock:
            self.done_count = min(self.total, self.done_count + n)
            self._draw()

    def done(self, line: str | None = None, worked: bool = True) -> None:
        """A unit finished: ``line`` says how (printed above the status line, or as one log
        line); ``worked=False`` for a unit that took no work (kept out of the ETA's mean)."""
        with self._lock:
            now = time.perf_counter()
            self.done_count = min(self.total, self.done_count + 1) if self.total else self.done_count + 1
            if worked:
                self.worked += 1
                self.work_s += now - self.unit_t0
            self.label = None
            if line is not None:
                self._print(line, counted=True)
            self._draw()

    def note(self, line: str) -> None:
        """A line that is not a finished unit (a skipped case, a warning)."""
        with self._lock:
            self._print(line, counted=False)
            self._draw()

    def eta(self) -> float | None:
        left = self.total - self.done_count
        if left <= 0:
            return 0.0
        if not self.worked:
            return None
        return self.work_s / self.worked * left

    def close(self) -> None:
        if self.label is not None:
            self.done(None)
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=2)
        with self._lock:
            self._clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ------------------------------------------------------------------ drawing
    def prefix(self) -> str:
        return f"[{self.done_count}/{self.total} · ETA {clock(self.eta())}]"

    def status(self) -> str:
        pct = 100 * self.done_count / self.total if self.total else 100
        head = (f"[{self.what} {self.done_count}/{self.total} {pct:.0f}% · {clock(time.perf_counter() - self.t0)} · "
                f"ETA {clock(self.eta())}]")
        if self.label:
            head += f" {self.label} ({clock(time.perf_counter() - self.unit_t0)})"
        return head

    def _print(self, line: str, counted: bool) -> None:
        if self.mode == "off":
            self.echo(line)
        elif self.mode == "lines":
            self.stream.write((f"{self.prefix()} {line}" if counted else line) + "\n")
            self.stream.flush()
        else:
            self._clear()
            self.stream.write(line + "\n")
            self.stream.flush()

    def _clear(self) -> None:
        if self.mode == "tty" and self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self.stream.flush()
            self._shown = 0

    def _draw(self) -> None:
        if self.mode != "tty" or self._stop.is_set():
            return
        text = self.status()
        width = _terminal_width() - 1
        text = text if len(text) <= width else text[:max(1, width - 1)] + "…"
        self.stream.write("\r" + text + " " * max(0, self._shown - len(text)))
        self.stream.flush()
        self._shown = len(text)

    def _tick(self, every: float) -> None:
        while not self._stop.wait(every):
            with self._lock:
                self._draw()


def _terminal_width() -> int:
    import shutil

    return shutil.get_terminal_size((100, 24)).columns
