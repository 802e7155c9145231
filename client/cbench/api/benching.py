"""``cbench.bench``: every discovery method on every case, scored (``cbench bench``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from types import MappingProxyType

from cbench.api.results import BenchResult
from cbench.errors import UsageError


def _names(value: str | Iterable[str] | None, what: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if not isinstance(value, Iterable) or isinstance(value, (bytes, bytearray)):
        raise UsageError(f"{what} must be a string or a list of strings (got {type(value).__name__})")
    items = [str(v) for v in value]
    if not items:
        raise UsageError(f"{what} is empty; leave it out for the default")
    return ",".join(items)


def bench(cases: str | Iterable[str] = "main", methods: str | Iterable[str] | None = None, *,
          out: str | os.PathLike, n_examples: int = 100, sampled: bool = False, seed: int = 0,
          include_no_signal: bool = False, echo: Callable[[str], None] | None = None) -> BenchResult:
    """Run discovery methods on cases, score each against the ground truth and write the results
    directory ``out`` (results.json, table.md, the scores, plots) as ``cbench bench --out`` does.
    Resumable: a (case, method) already scored the same way in ``out`` is not run again.

    ``cases``: ``"main"``, ``"appendix-h"``, ``"all"``, ``"stress"``, or case ids, names or artifact
    directories (a comma-separated string or a list). ``methods``: default every method of the
    bench; name others (an installed method, or one added with :func:`cbench.register_method`)
    to run them beside the built-in ones. ``echo``: where progress lines go (default: nowhere).

    >>> cbench.bench(["3"], ["eap", "random"], out="results/b").auroc["3"]   # doctest: +SKIP
    """
    from cbench.api import arguments as check
    from cbench.files.safe_io import output_directory
    from cbench.scoring.bench import run_bench

    check.n_examples("n_examples", n_examples, low=2)
    check.flag("sampled", sampled)
    check.seed("seed", seed)
    check.flag("include_no_signal", include_no_signal)
    if echo is not None and not callable(echo):
        raise UsageError(f"echo must be a function of one line (got {type(echo).__name__})")
    cases_arg = _names(cases, "cases")
    methods_arg = _names(methods, "methods")
    if out is None:
        raise UsageError("out: give the results directory")
    if not isinstance(out, (str, os.PathLike)):
        raise UsageError(f"out must be a directory path (got {type(out).__name__})")
    output_directory(str(out), "out", parents=True)
    doc = run_bench(cases_arg, methods_arg, str(out), n_examples=n_examples, sampled=sampled, seed=seed,
                    echo=echo or (lambda _line: None), include_no_signal=include_no_signal)
    res = doc["results"]
    table_path = Path(out) / "table.md"
    return BenchResult(out=Path(out), cases=tuple(res["auroc"]), methods=tuple(doc["inputs"]["methods"]),
                       auroc=MappingProxyType(res["auroc"]), auroc_promoted=MappingProxyType(res["auroc_promoted"]),
                       failures=MappingProxyType(res.get("failures") or {}),
                       table=table_path.read_text() if table_path.is_file() else "", document=doc)
