"""Option checks shared by the commands: every value is checked before any work starts, and an
unusable one is a usage error (exit 2), never a silent fall-back.

Every numeric option has a type with two bounds (:func:`counts`, :func:`floats`,
:data:`SEED_TYPE`, :func:`n_examples_option`; the bounds are :mod:`cbench.api.arguments`', which
the Python API checks with), so ``0``, ``-1``, ``nan``, ``inf``, ``1e300`` and ``10**20`` are
refused at parse time with one line (tests/test_bad_input_sweep.py holds every option of every
command to it). Every output option is checked by :func:`check_out` or :func:`check_out_dir`
before any work: a new path in a writable directory, or a file/directory cbench may replace."""

from __future__ import annotations

import click

from cbench.api.arguments import MAX_COUNT, MAX_EXAMPLES, MAX_SECONDS, MAX_SEED, MAX_WEIGHT, SPLITS  # noqa: F401


def counts(low: int = 1, high: int = MAX_COUNT) -> click.IntRange:
    """An integer option's type: both bounds always (a missing upper bound let ``10**20`` through
    to code that overflowed or ran for days)."""
    return click.IntRange(low, high)


def floats(low: float, high: float, *, low_open: bool = False, high_open: bool = False) -> "FiniteFloatRange":
    """A float option's type: finite (no ``nan``/``inf``) and within both bounds."""
    return FiniteFloatRange(low, high, min_open=low_open, max_open=high_open)


SEED_TYPE = click.IntRange(0, MAX_SEED)


def split_option(**kw):
    return click.option("--split", type=click.Choice(SPLITS), default="validation", show_default=True,
                        help=kw.pop("help", "counterfactuals dataset split"), **kw)


def n_examples_option(default=None, low: int = 1, **kw):
    return click.option("--n-examples", type=click.IntRange(low, MAX_EXAMPLES), default=default,
                        show_default=default is not None,
                        help=kw.pop("help", f"number of (base, source) pairs (at most {MAX_EXAMPLES})"), **kw)


def check_out(ctx, param, value):
    """Click callback for ``--out``/``--plot``: the path must be new or a regular file in an existing
    directory (see :func:`cbench.files.safe_io.output_target`)."""
    if value is None:
        return None
    if value == "-":  # commands whose --out can be standard output use cbench.cli.output
        from cbench.errors import UsageError

        raise UsageError(f"{param.opts[0] if param.opts else param.name} -: this output cannot go to standard "
                         "output; give a file name")
    from cbench.files.safe_io import output_target

    output_target(value, param.opts[0] if param.opts else str(param.name))
    return value


class FiniteFloatRange(click.FloatRange):
    """A :class:`click.FloatRange` that also refuses ``nan`` and ``inf`` (a plain FloatRange lets
    ``nan`` through every bound, since no comparison with it is true)."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        import math

        rv = super().convert(value, param, ctx)
        if not math.isfinite(rv):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return rv


def check_out_dir(ctx, param, value):
    """Click callback for a directory ``--out``/``--html``: not empty, new or a directory, in an
    existing parent (see :func:`cbench.files.safe_io.output_directory`)."""
    if value is None:
        return None
    from cbench.files.safe_io import output_directory

    output_directory(value, param.opts[0] if param.opts else str(param.name))
    return value


def check_out_dir_parents(ctx, param, value):
    """:func:`check_out_dir` for a results directory the command creates with its missing parents
    (``cbench bench --out results/bench`` in a fresh directory), saying which it created."""
    if value is None:
        return None
    from cbench.files.safe_io import output_directory

    output_directory(value, param.opts[0] if param.opts else str(param.name), parents=True)
    return value


def check_out_tree(ctx, param, value):
    """Click callback for a build's output directory, which the build creates with its parents:
    not empty, new or a directory, under a writable existing directory (see
    :func:`cbench.files.safe_io.output_tree`)."""
    if value is None:
        return None
    from cbench.files.safe_io import output_tree

    output_tree(value, param.opts[0] if param.opts else str(param.name))
    return value


def check_not_empty(ctx, param, value):
    """Click callback: a given string value (or comma-separated list) must name something; an empty
    one is a usage error, never a silent fall-back to the default."""
    if value is None:
        return None
    if not any(part.strip() for part in str(value).split(",")):
        from cbench.errors import UsageError

        raise UsageError(f"{param.opts[0] if param.opts else param.name} is empty; leave the option out for "
                         "the default")
    return value
