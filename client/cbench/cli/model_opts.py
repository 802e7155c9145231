"""``--model``, ``--task`` (alias ``--data``), ``--dtype`` and ``--device``: a real model in place of a case, for
``evaluate``, ``test-circuit``, ``adversarial``, ``ablate`` and ``bench`` (``discover`` has its
own, the same). The model is resolved once (:func:`cbench.api.real_models.resolve_model`) and the
resolved object is passed where the case's artifact would go. Importing this module imports no
torch (``--help`` stays fast)."""

from __future__ import annotations

import click

from cbench.errors import UsageError

DTYPES = ("float32", "bfloat16", "float16")
TASK_HELP = ("with --model: the pairs, one of MIB's tasks ioi, mcqa, arithmetic, arc (NAME[:SPLIT[:COUNTERFACTUAL]], "
             "from $CBENCH_MIB_DATA or the Hugging Face cache) or a file: EAP-IG's CSV layout (clean, corrupted"
             "[, correct_idx, incorrect_idx | correct, incorrect]), the same as JSONL, Parquet or a saved dataset "
             "directory; --data is the same option (docs/real-models.md)")


def model_options(f):
    """The four options, in this order in ``--help``."""
    f = click.option("--device", default=None, metavar="DEVICE", help="with --model: cpu, cuda, cuda:N or auto")(f)
    f = click.option("--dtype", type=click.Choice(DTYPES), default="float32", show_default=True,
                     help="with --model: the weights' dtype")(f)
    f = click.option("--task", "--data", "data_file", default=None, metavar="TASK",
                     help=TASK_HELP)(f)
    f = click.option("--model", "model", default=None, metavar="NAME_OR_DIR",
                     help="instead of CASE: a real model, a Hugging Face checkpoint directory or hub name "
                          "(offline as HF_HUB_OFFLINE says; docs/real-models.md), with --task")(f)
    return f


def check_model_args(case, model, data_file, dtype, device, *, case_name: str = "CASE") -> None:
    """One of CASE and --model; --task/--dtype/--device only with --model."""
    if case is not None and model is not None:
        raise UsageError(f"give a {case_name} or --model NAME_OR_DIR, not both")
    if case is None and model is None:
        raise UsageError(f"give a {case_name} or --model NAME_OR_DIR (one of them)")
    if model is None and (data_file or device or dtype != "float32"):
        raise UsageError("--task/--data, --dtype and --device go with --model")


def case_and_circuit(first: str | None, second: str | None, model) -> tuple[str | None, str]:
    """``[CASE] CIRCUIT``: with --model the one argument is the circuit."""
    if model is not None:
        if second is not None:
            raise UsageError("with --model give only the CIRCUIT (no CASE)")
        if first is None:
            raise UsageError("missing argument CIRCUIT")
        return None, first
    if second is None:
        raise UsageError("missing argument CIRCUIT (give CASE CIRCUIT, or --model M --task TASK CIRCUIT)")
    return first, second


def resolve_cli_model(model, data_file, dtype, device, n_examples=None):
    """The :class:`~cbench.api.real_models.RealModel` (loads torch and the model)."""
    from cbench.api.real_models import resolve_model

    return resolve_model(model, data_file, dtype=dtype, device=device, n_examples=n_examples)
