"""Option checks shared by the commands: every value is checked before any work starts, and an
unusable one is a usage error (exit 2), never a silent fall-back."""

from __future__ import annotations

import click

# the splits of cbench/counterfactuals (whether a case's config has the split is checked on load)
SPLITS = ("train", "validation", "test")
MAX_EXAMPLES = 100_000


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
