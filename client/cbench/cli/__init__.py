"""The ``cbench`` command line.

Commands are loaded lazily (``cbench info`` must answer fast, without importing torch), each
from the module named in ``COMMANDS``; ``cbench build`` comes from the builders through the
``cbench.commands`` entry point, so the client never imports the builders by name.

Every :class:`~cbench.errors.CbenchError` becomes one line on stderr and a non-zero exit.

May import every package of the client (it is the top layer); nothing imports it.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys

import click

from cbench.errors import CbenchError

# command name -> "module:attribute"; each module holds one family of commands
COMMANDS = {
    "validate": "cbench.cli.validate_cmd:validate",
    "publish": "cbench.cli.hub_cmds:publish",
    "hub": "cbench.cli.hub_cmds:hub",
    "pull": "cbench.cli.hub_cmds:pull",
    "list": "cbench.cli.hub_cmds:list_cmd",
    "info": "cbench.cli.hub_cmds:info",
    "import-interpbench": "cbench.cli.hub_cmds:import_interpbench",
    "ablate": "cbench.cli.discovery_cmds:ablate",
    "discover": "cbench.cli.discovery_cmds:discover",
    "score": "cbench.cli.scoring_cmds:score",
    "evaluate": "cbench.cli.scoring_cmds:evaluate",
    "test-circuit": "cbench.cli.scoring_cmds:test_circuit",
    "adversarial": "cbench.cli.scoring_cmds:adversarial",
    "bench": "cbench.cli.scoring_cmds:bench",
    "verify": "cbench.cli.verify_cmd:verify",
    "demo": "cbench.cli.demo_cmd:demo",
    # FIND function interpretation (issue 22)
    "find": "cbench.cli.find_cmds:find",
    # causal-variable track (issue 19)
    "localize": "cbench.cli.localize_cmd:localize",
    # the static HTML leaderboard (issue 21)
    "report": "cbench.cli.report_cmds:report",
    "submit": "cbench.cli.report_cmds:submit",
    # ecosystem (issue 18)
    "export": "cbench.cli.export_cmd:export",
    "cache": "cbench.cli.cache_cmds:cache",
}


# commands that load torch, a model or pairs before they can say anything: at a terminal each says
# what it is loading as soon as its arguments are read (a user saw nothing for 12-17 s), on standard
# error; piped or captured output gets no such line, so a bad argument is still one line
LOADING = {
    "discover": "torch, the model and its pairs", "score": "torch, the model and the scores",
    "evaluate": "torch, the model and its pairs", "test-circuit": "torch, the model and its pairs",
    "adversarial": "torch, the model and its pairs", "ablate": "torch, the model and its pairs",
    "verify": "torch, the model and its pairs", "bench": "torch and the cases",
    "demo": "torch and the main cases", "localize": "torch, the model and its dataset",
}


def _announced(cmd: click.Command, name: str) -> click.Command:
    """``cmd`` whose invocation (after its options parsed) first tells a terminal what it loads."""
    if getattr(cmd, "_cbench_announces", False):
        return cmd
    invoke = cmd.invoke

    def announce_then_invoke(ctx):
        if sys.stderr.isatty():
            click.echo(f"cbench {name}: loading {LOADING[name]} ...", err=True)
        return invoke(ctx)

    cmd.invoke = announce_then_invoke
    cmd._cbench_announces = True
    return cmd


@functools.lru_cache(maxsize=1)
def _plugin_commands() -> dict:
    """The ``cbench.commands`` entry points, read once per process (reading them takes ~0.1 s)."""
    from importlib import metadata

    try:
        eps = metadata.entry_points(group="cbench.commands")
    except Exception:  # pragma: no cover - broken metadata
        return {}
    return {ep.name: ep for ep in eps}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        names = set(super().list_commands(ctx))
        names |= {n for n, target in COMMANDS.items() if _module_exists(target)}
        names |= set(_plugin_commands())
        return sorted(names)

    def get_command(self, ctx, name):
        cmd = super().get_command(ctx, name)
        if cmd is not None:
            return cmd
        if name in COMMANDS and _module_exists(COMMANDS[name]):
            module, attr = COMMANDS[name].split(":")
            cmd = getattr(importlib.import_module(module), attr)
            return _announced(cmd, name) if name in LOADING else cmd
        ep = _plugin_commands().get(name)
        if ep is not None:
            try:
                return ep.load()
            except ImportError as exc:
                raise click.UsageError(
                    f"`cbench {name}` needs the builders' dependencies ({exc.name or exc}); "
                    "install them with: pip install -e '.[build]'") from None
        return None

    def resolve_command(self, ctx, args):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            if args and not args[0].startswith("-"):
                from cbench.errors import did_you_mean

                raise click.UsageError(f"no command {args[0]!r}" + did_you_mean(args[0], self.list_commands(ctx))
                                       + "; see `cbench --help`") from None
            raise exc


def _module_exists(target: str) -> bool:
    module = target.split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="cbench", prog_name="cbench")
def cli():
    """cbench: mechanistic-interpretability benchmark artifacts with known circuits."""


def main(argv=None) -> int:
    """Entry point: run the CLI, turning every cbench error into one line and an exit code."""
    args = sys.argv[1:] if argv is None else list(argv)
    if any("\0" in str(a) for a in args):  # no file name or value can hold one; Python would raise
        click.echo("error: an argument contains a NUL byte", err=True)
        sys.exit(2)
    if not args:  # bare `cbench`: the help, as an answer (exit 0), not as a usage error
        with click.Context(cli, info_name="cbench") as ctx:
            click.echo(cli.get_help(ctx))
        return 0
    from cbench.runtime.allocator import tune

    tune()  # glibc: reuse freed tensor memory instead of faulting it in again (cbench.runtime.allocator)
    try:
        cli.main(args=argv, prog_name="cbench", standalone_mode=False)
        return 0
    except CbenchError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.ClickException as exc:
        click.echo(f"error: {exc.format_message()}", err=True)
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except KeyboardInterrupt:
        click.echo("error: interrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
    except RuntimeError as exc:
        if "Symlink loop" not in str(exc):  # pathlib's answer to a link loop; anything else is a bug
            raise
        click.echo(f"error: {str(exc)[:300]}", err=True)
        sys.exit(1)
    except OSError as exc:  # a file-system answer no command mapped (name too long, loop, ...): one line
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        click.echo(f"error: {str(where)[:300]}{exc.strerror or exc}", err=True)
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
