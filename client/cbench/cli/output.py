"""Machine-readable output of the commands that report something.

* ``--json`` prints the command's document (a ``cbench/results/v1`` document, an edge-scores
  document, ...) as JSON on standard output;
* ``--out -`` writes that document to standard output instead of a file (``--out FILE`` writes
  the file, as before).

Either way standard output then holds that JSON only: the lines written for people go to
standard error. ``cbench score case-3 s.json --json | jq .results.edge_auroc`` works.
"""

from __future__ import annotations

import json

import click

STDOUT = "-"


def check_out_or_stdout(ctx, param, value):
    """Click callback for ``--out``: ``-`` (standard output), else a writable file path."""
    if value is None or value == STDOUT:
        return value
    from cbench.cli.options import check_out

    return check_out(ctx, param, value)


def out_option(what: str = "write the results document here", **kw):
    if not kw.get("required"):  # click 8.3 counts an explicit default=None as given: required needs none
        kw.setdefault("default", None)
    return click.option("--out", "out", callback=check_out_or_stdout, metavar="FILE|-",
                        help=f"{what} ('-': standard output)", **kw)


def json_option(f):
    return click.option("--json", "as_json", is_flag=True,
                        help="print the document as JSON on standard output (the text goes to standard error)")(f)


class Output:
    """Where a command's lines and its document go, given ``--json`` and ``--out``."""

    def __init__(self, as_json: bool = False, out: str | None = None):
        self.as_json = bool(as_json)
        self.out = out

    @property
    def machine(self) -> bool:
        """Standard output is reserved for the JSON document."""
        return self.as_json or self.out == STDOUT

    @property
    def wants_document(self) -> bool:
        return self.machine or self.out is not None

    def echo(self, message: str = "") -> None:
        click.echo(message, err=self.machine)

    def emit(self, doc, written: str = "results written to {out}") -> None:
        """Write ``doc`` to ``--out FILE`` (atomically) and/or print it on standard output."""
        text = json.dumps(doc, indent=2, sort_keys=False) + "\n"
        if self.out is not None and self.out != STDOUT:
            from cbench.files.safe_io import write_output

            write_output(self.out, text.encode("utf-8"))
            if written:
                self.echo(written.format(out=self.out))
        if self.machine:
            click.echo(text, nl=False)
