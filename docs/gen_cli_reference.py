"""Write docs/cli.md, the CLI reference, from the click commands themselves.

    .venv/bin/python docs/gen_cli_reference.py          # rewrite docs/cli.md
    .venv/bin/python docs/gen_cli_reference.py --check  # exit 1 if docs/cli.md is out of date

Walks the ``cbench`` group (``cbench.cli.cli``, its lazily loaded commands and the ``build``
command the builders add through the ``cbench.commands`` entry point) and writes each command's
usage, help and options as click prints them for ``--help``, at a fixed width so the file does
not depend on the terminal. ``tests/test_docs.py`` checks that the committed file is what this
script writes.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import click

OUT = Path(__file__).resolve().parent / "cli.md"
WIDTH = 100

HEADER = """\
# CLI reference

Every `cbench` command with its usage, help and options, as `cbench COMMAND --help` prints them.
Generated from the click commands by `docs/gen_cli_reference.py`; do not edit by hand
(`tests/test_docs.py` fails when this file and the commands disagree: rerun the script).
Walkthroughs of the commands are in the [user guide](user-guide.md).
"""


def _walk(cmd: click.Command, path: list[str], parent: click.Context | None):
    """(path, command, context) for ``cmd`` and every subcommand below it, in name order."""
    settings = {**cmd.context_settings, "terminal_width": WIDTH, "max_content_width": WIDTH}
    ctx = click.Context(cmd, info_name=path[-1], parent=parent, **settings)
    yield path, cmd, ctx
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is None or getattr(sub, "hidden", False):
                continue
            yield from _walk(sub, path + [name], ctx)


def _anchor(path: list[str]) -> str:
    return "-".join(path).lower()


def render() -> str:
    """The whole of docs/cli.md."""
    from cbench.cli import cli

    entries = list(_walk(cli, ["cbench"], None))
    lines = [HEADER, "## Commands", ""]
    for path, cmd, _ctx in entries[1:]:
        indent = "  " * (len(path) - 2)
        short = cmd.get_short_help_str(limit=90)
        lines.append(f"{indent}- [`{' '.join(path)}`](#{_anchor(path)}): {short}")
    lines.append("")
    for path, cmd, ctx in entries:
        level = "#" * min(2 + max(len(path) - 2, 0), 4)
        lines += [f"{level} {' '.join(path)}", "", "```text", cmd.get_help(ctx).rstrip(), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Write docs/cli.md from the click commands.")
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md differs from what would be written")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != text:
            print(f"{args.out} is out of date: run python docs/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
