"""What a pass of the runtime returns: :class:`RunResult`."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class RunResult:
    """What :meth:`CircuitRuntime.run` returns.

    ``output``: the model outputs ``[batch, pos, d_vocab_out]``; ``acts``: every node's output
    in this run ``[n_forward, batch, pos, d_model]`` (only with ``keep_acts=True``);
    ``probe``: the zero tensor added to destination inputs (only with ``input_probe=True``),
    whose ``.grad`` after backward is the gradient w.r.t. each destination input
    ``[n_backward, batch, pos, d_model]``.
    """

    output: torch.Tensor
    acts: torch.Tensor | None = None
    probe: torch.Tensor | None = None
