"""Task metrics for discovery, ablation and scoring; position 0 (BOS) is always excluded.

Every metric is a *loss* (lower is better) computed from model outputs ``[..., B, P, V]`` (any
leading dimensions, e.g. one per mask in a batch of masks) and returns one value per leading
index: the mean over examples of the mean over that example's valid positions. Valid positions
are ``valid[B, P]`` (default: every position but 0); labels of padded positions should be
excluded through ``valid``.

* ``kl``: KL(clean || patched) of the categorical output distributions (ACDC's metric);
* ``l2``: squared difference to the clean outputs, (y - y_clean)^2 (numerical; mean over
  positions, so it is the mean squared L2 distance per position);
* ``ce``: cross-entropy against integer class labels (or the clean model's argmax);
* ``mae``: mean absolute error against numerical labels (or the clean outputs);
* ``mse``: mean squared error against labels;
* ``logit_diff``: minus the logit difference ``logit[correct] - logit[wrong]`` at the last valid
  position (IOI-like tasks; ``labels`` then holds ``[B, 2]`` (correct, wrong) class ids).

:func:`default_metric` gives the metric appendix D of the InterpBench paper uses per method and
task type (ACDC/SP: KL or L2; EAP/EAP-IG: CE or MAE); every command lets the user override it.
:func:`make_metric` binds a metric to its reference (clean outputs or labels) and returns a
callable ``outputs -> per-leading-index values``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from cbench.errors import UsageError
from cbench.tasks.metric_names import METRICS, TASK_TYPES  # the names without torch, for --help

_CATEGORICAL_ONLY = {"kl", "ce", "logit_diff"}
_NUMERICAL_ONLY = {"l2", "mae", "mse"}

_DEFAULTS = {
    # method family -> (categorical, numerical)
    "acdc": ("kl", "l2"),
    "sp": ("kl", "l2"),
    "edge-sp": ("kl", "l2"),
    "activation-patching": ("kl", "l2"),
    "random": ("kl", "l2"),
    "ablation": ("kl", "l2"),
    "eap": ("ce", "mae"),
    "eap-ig-inputs": ("ce", "mae"),
    "eap-ig-activations": ("ce", "mae"),
    "nap": ("ce", "mae"),
    "nap-ig": ("ce", "mae"),
    "atp-star": ("ce", "mae"),
}


def default_metric(method: str, task_type: str) -> str:
    """The metric InterpBench appendix D uses for ``method`` on a ``task_type`` task."""
    if task_type not in TASK_TYPES:
        raise UsageError(f"task type must be one of {', '.join(TASK_TYPES)} (got {task_type!r})")
    pair = _DEFAULTS.get(method, _DEFAULTS["acdc"])
    return pair[0] if task_type == "categorical" else pair[1]


def check_metric(name: str, task_type: str) -> str:
    """``name`` if it is a metric usable for ``task_type``, else a one-line UsageError."""
    if name not in METRICS:
        raise UsageError(f"unknown metric {name!r}; choose one of: {', '.join(METRICS)}")
    if task_type == "numerical" and name in _CATEGORICAL_ONLY:
        raise UsageError(f"metric {name!r} needs a categorical task; use one of: l2, mae, mse")
    if task_type == "categorical" and name in _NUMERICAL_ONLY:
        raise UsageError(f"metric {name!r} needs a numerical task; use one of: kl, ce, logit_diff")
    return name


def default_valid(shape, device=None) -> torch.Tensor:
    """Valid positions ``[B, P]``: everything but position 0."""
    B, P = shape
    v = torch.ones(B, P, dtype=torch.bool, device=device)
    v[:, 0] = False
    return v


def _reduce(per_pos: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Mean over valid positions, then over examples: ``[..., B, P] -> [...]``."""
    w = valid.to(per_pos.dtype)
    n = w.sum(-1).clamp(min=1.0)
    per_example = (per_pos * w).sum(-1) / n
    return per_example.mean(-1)


def kl(outputs: torch.Tensor, clean: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(outputs, -1)
    logq = torch.log_softmax(clean, -1)
    per_pos = (logq.exp() * (logq - logp)).sum(-1)
    return _reduce(per_pos, valid)


def l2(outputs: torch.Tensor, clean: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    per_pos = ((outputs - clean) ** 2).sum(-1)
    return _reduce(per_pos, valid)


def ce(outputs: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(outputs, -1)
    idx = labels.long().clamp(min=0).expand(outputs.shape[:-1])[..., None]
    per_pos = -logp.gather(-1, idx)[..., 0]
    return _reduce(per_pos, valid)


def mae(outputs: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    per_pos = (outputs[..., 0] - labels.to(outputs.dtype)).abs()
    return _reduce(per_pos, valid)


def mse(outputs: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    per_pos = (outputs[..., 0] - labels.to(outputs.dtype)) ** 2
    return _reduce(per_pos, valid)


def logit_diffs(outputs: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """Per example ``[..., B]``: ``logit[correct] - logit[wrong]`` at its last valid position
    (``labels [B, 2]``: (correct, wrong) class ids)."""
    B, P = valid.shape
    last = (torch.arange(P, device=valid.device) * valid).argmax(-1)  # [B]
    out = outputs[..., torch.arange(B, device=outputs.device), last, :]  # [..., B, V]
    lab = labels.long()
    correct = out.gather(-1, lab[:, :1].expand(out.shape[:-1] + (1,)))[..., 0]
    wrong = out.gather(-1, lab[:, 1:2].expand(out.shape[:-1] + (1,)))[..., 0]
    return correct - wrong


def logit_diff(outputs: torch.Tensor, labels: torch.Tensor, valid: torch.Tensor) -> torch.Tensor:
    """``labels [B, 2]``: (correct, wrong) class ids, read at each example's last valid position."""
    return -logit_diffs(outputs, labels, valid).mean(-1)


_FUNCS = {"kl": kl, "l2": l2, "ce": ce, "mae": mae, "mse": mse, "logit_diff": logit_diff}


@dataclass
class Metric:
    """A metric bound to its reference: ``metric(outputs) -> [...]`` (mean over examples)."""

    name: str
    reference: torch.Tensor  # clean outputs or labels
    valid: torch.Tensor

    def __call__(self, outputs: torch.Tensor) -> torch.Tensor:
        return _FUNCS[self.name](outputs, self.reference, self.valid)

    def bound(self) -> Callable[[torch.Tensor], torch.Tensor]:
        """The same function (the same arithmetic) with the terms that depend only on the
        reference and the valid positions computed once, for callers that evaluate it many times."""
        w = self.valid.to(self.reference.dtype)
        n = w.sum(-1).clamp(min=1.0)
        if self.name == "kl":
            logq = torch.log_softmax(self.reference, -1)
            q = logq.exp()

            def kl_bound(outputs: torch.Tensor) -> torch.Tensor:
                per_pos = (q * (logq - torch.log_softmax(outputs, -1))).sum(-1)
                return ((per_pos * w).sum(-1) / n).mean(-1)
            return kl_bound
        if self.name == "l2":
            clean = self.reference

            def l2_bound(outputs: torch.Tensor) -> torch.Tensor:
                per_pos = ((outputs - clean) ** 2).sum(-1)
                return ((per_pos * w).sum(-1) / n).mean(-1)
            return l2_bound
        return self

    def same_pass(self, outputs: torch.Tensor, reference_outputs: torch.Tensor) -> torch.Tensor:
        """The metric of ``outputs`` against ``reference_outputs`` (detached outputs of the clean
        point *of the same pass*) instead of the bound reference, for metrics that compare with
        the clean model (kl, l2, and mae/mse without labels). ``|y - y_clean|`` has its kink at the
        clean point: a reference from another pass differs by rounding (~1e-7) and makes the
        gradient there +-1 at random; from the same pass the difference is exactly 0, and so is
        the gradient (as in the EAP-IG reference library). Other metrics: unchanged."""
        ref = reference_outputs.detach()
        if self.name in ("kl", "l2"):
            return _FUNCS[self.name](outputs, ref, self.valid)
        if self.name in ("mae", "mse"):
            return _FUNCS[self.name](outputs, ref[..., 0], self.valid)
        return self(outputs)

    def per_example(self, outputs: torch.Tensor) -> torch.Tensor:
        """Values per example ``[..., B]`` (not averaged over examples)."""
        if self.name == "logit_diff":  # minus each example's logit difference
            return -logit_diffs(outputs, self.reference, self.valid)
        f = _FUNCS[self.name]
        # evaluate with each example as its own 1-example batch by adding a dimension
        return f(outputs.unsqueeze(-3), _unsq(self.reference), self.valid[:, None, :])


def _unsq(ref: torch.Tensor) -> torch.Tensor:
    return ref.unsqueeze(-3) if ref.dim() >= 3 else ref.unsqueeze(-2)


def make_metric(name: str, task_type: str, clean_outputs: torch.Tensor | None = None,
                labels: torch.Tensor | None = None, valid: torch.Tensor | None = None) -> Metric:
    """Bind metric ``name`` to its reference.

    ``kl``/``l2`` compare with ``clean_outputs`` ``[B, P, V]``. ``ce``/``mae``/``mse`` compare
    with ``labels`` ``[B, P]`` when given, else with the clean model (argmax class / values).
    ``logit_diff`` needs ``labels [B, 2]``.
    """
    check_metric(name, task_type)
    if name in ("kl", "l2"):
        if clean_outputs is None:
            raise UsageError(f"metric {name!r} needs the clean model's outputs")
        ref = clean_outputs.detach()
    elif name == "logit_diff":
        if labels is None:
            raise UsageError("metric 'logit_diff' needs (correct, wrong) label pairs")
        ref = torch.as_tensor(labels)
    elif labels is not None:
        ref = torch.as_tensor(labels)
    else:
        if clean_outputs is None:
            raise UsageError(f"metric {name!r} needs labels or the clean model's outputs")
        ref = clean_outputs.detach().argmax(-1) if name == "ce" else clean_outputs.detach()[..., 0]
    if valid is None:
        shape = (clean_outputs if clean_outputs is not None else ref).shape[:2]
        valid = default_valid(shape, ref.device)
    else:
        valid = torch.as_tensor(valid, dtype=torch.bool).clone()
        valid[:, 0] = False
    if clean_outputs is not None:  # labels and positions live where the outputs do (e.g. a GPU)
        ref, valid = ref.to(clean_outputs.device), valid.to(clean_outputs.device)
    return Metric(name, ref, valid)


def metric_slice(metric: Metric, start: int, stop: int) -> Metric:
    """The same metric restricted to examples ``start:stop`` (for chunked evaluation)."""
    ref = metric.reference
    return Metric(metric.name, ref[start:stop], metric.valid[start:stop])
