"""Run the real ``cbench`` entry point (:func:`cbench.cli.main`) in this process, capturing output."""

from __future__ import annotations

from dataclasses import dataclass

from click.testing import CliRunner


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str
    exception: BaseException | None = None

    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.startswith("error:")]


def run_main(args: list[str], env: dict | None = None) -> Outcome:
    """``cbench ARGS`` through the real ``main`` (its error handling included); an exception that
    escapes ``main`` is returned in ``exception`` (the caller decides; a clean CLI never lets one out)."""
    from cbench.cli import main

    runner = CliRunner()
    with runner.isolation(env=env) as streams:
        out, err = streams[0], streams[1]
        exc = None
        try:
            main(list(args))
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        except BaseException as e:  # noqa: BLE001 - a traceback the user would see
            code, exc = -1, e
        stdout = out.getvalue().decode("utf-8", "replace")
        stderr = err.getvalue().decode("utf-8", "replace") if err is not None else ""
    return Outcome(code, stdout, stderr, exc)


def assert_one_clean_error(res: Outcome, code: int | None = None, *needles: str) -> str:
    """Non-zero exit (``code`` when given), exactly one ``error:`` line, no traceback."""
    assert res.exception is None, f"exception escaped: {res.exception!r}"
    assert res.code != 0, (res.stdout, res.stderr)
    if code is not None:
        assert res.code == code, (res.code, res.stderr)
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.error_lines()
    assert len(lines) == 1, res.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]
