"""``--executor local|ray``, ``--ray-address``, ``--workers``: the options every batch command
shares (``cbench bench``, ``cbench build siit``), and the executor they select."""

from __future__ import annotations

import click


def executor_options(f):
    """Add the executor options to a click command (parameters ``executor``, ``ray_address``, ``workers``)."""
    f = click.option("--workers", type=click.IntRange(1, 4096), default=None,
                     help="local: worker processes (default 1: this process); ray without an address: CPUs of the "
                          "local Ray instance [default: all]")(f)
    f = click.option("--ray-address", default=None, metavar="ADDRESS",
                     help="with --executor ray: a running cluster ('auto', 'ray://host:10001'); "
                          "without it a private local Ray instance is started")(f)
    f = click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
                     help="run the tasks in this process, or as Ray tasks (pip install 'cbench[ray]')")(f)
    return f


def make_cli_executor(executor: str, ray_address: str | None, workers: int | None):
    from cbench.scoring.executor import make_executor

    return make_executor(executor, address=ray_address, workers=workers, echo=lambda s: click.echo(s, err=True))
