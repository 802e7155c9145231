"""``click.Choice`` types read from cbench's registries, so ``--help`` lists the values, a typo
gets click's usage error (exit 2), and shell completion offers them.

The values are read when click first needs them, from registries that do not import torch (every
``--help`` must answer without it; tests/test_help_fast.py), so a method added to
:data:`cbench.discovery.METHODS` is offered without touching the CLI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import click


class RegistryChoice(click.Choice):
    """A Choice whose values come from ``load()`` when first asked for."""

    def __init__(self, load: Callable[[], Iterable[str]], what: str, case_sensitive: bool = True):
        self._load = load
        self._what = what
        self._values: tuple[str, ...] | None = None
        self.case_sensitive = case_sensitive

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        from cbench.errors import did_you_mean

        self.fail(f"unknown {self._what} {value!r}{did_you_mean(str(value), self.choices)}; "
                  f"{self._what}s: {', '.join(self.choices)}", param, ctx)

    @property
    def choices(self) -> tuple[str, ...]:  # type: ignore[override]
        if self._values is not None:
            return self._values
        return tuple(self._load())  # read every time: a method registered or installed later is offered

    @choices.setter
    def choices(self, values) -> None:
        self._values = tuple(values)


def _methods():
    from cbench.discovery import METHODS

    return METHODS


def _metrics():
    from cbench.tasks.metric_names import METRICS  # not tasks.metrics: --help must not import torch

    return METRICS


METHOD_CHOICE = RegistryChoice(_methods, "method")
METRIC_CHOICE = RegistryChoice(_metrics, "metric")
ABLATION_CHOICE = click.Choice(["resample", "mean", "zero"])
