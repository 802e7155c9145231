"""What the low-level model must produce, the loss towards it and the agreement metrics.

Cross-entropy on the high-level model's class for categorical tasks, MSE on its value for
numerical ones; position 0 (BOS) is excluded everywhere. Positions where the high-level model
gives no class (RASP ``None``: Tracr's output there is all zeros, so every class ties; cases 13,
19, 21 have such positions) have no label: they are left out of losses and metrics, as the
client's task data leaves out ``None`` labels. Numerical outputs count as equal within ``atol``
(0.05). A trainer with an ``objective`` (IOI's :class:`cbench_builders.ioi.model.LastTokenObjective`)
takes its targets, loss and agreement from it instead.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from cbench.tasks.labels import NO_CLASS, high_level_classes


class Losses:
    """Targets, losses and agreement of :class:`cbench_builders.siit.trainer.SIITTrainer` (a mixin:
    it reads the trainer's ``objective``, ``numerical``, ``none_class`` and ``cfg``)."""

    def _target(self, hl_out: torch.Tensor, tokens: torch.Tensor | None = None) -> torch.Tensor:
        """What the low-level model must produce: classes (categorical; ``NO_CLASS`` where the
        high-level output ties, i.e. RASP ``None``) or values (numerical); the objective's
        targets when one is given (``tokens`` are the inputs behind ``hl_out``)."""
        if getattr(self, "objective", None) is not None:
            return self.objective.target(hl_out, tokens)
        if self.numerical:
            return hl_out[:, 1:, 0]
        return high_level_classes(hl_out[:, 1:], none_class=self.none_class)

    def _loss(self, ll_out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if getattr(self, "objective", None) is not None:
            return self.objective.loss(ll_out, target)
        if self.numerical:
            return F.mse_loss(ll_out[:, 1:, 0], target)
        flat = target.reshape(-1)
        n = (flat != NO_CLASS).sum()
        losses = F.cross_entropy(ll_out[:, 1:].reshape(-1, ll_out.shape[-1]), flat, ignore_index=NO_CLASS,
                                 reduction="sum")
        return losses / n.clamp(min=1)

    def _same(self, out: torch.Tensor, ref: torch.Tensor) -> float:
        """Share of positions after BOS where ``out`` gives the same output as ``ref`` (argmax, or
        within atol)."""
        if self.numerical:
            return float(((out[:, 1:, 0] - ref[:, 1:, 0]).abs() <= self.cfg.atol).float().mean())
        return float((out[:, 1:].argmax(-1) == ref[:, 1:].argmax(-1)).float().mean())

    def _agree(self, ll_out: torch.Tensor, target: torch.Tensor) -> float:
        """Share of labelled positions where the low-level output matches ``target``."""
        if getattr(self, "objective", None) is not None:
            return self.objective.agree(ll_out, target)
        if self.numerical:
            return float(((ll_out[:, 1:, 0] - target).abs() <= self.cfg.atol).float().mean())
        labelled = target != NO_CLASS
        n = int(labelled.sum())
        if n == 0:
            return 1.0
        return float(((ll_out[:, 1:].argmax(-1) == target) & labelled).sum()) / n


class DistributionObjective:
    """An ``objective`` for :class:`~cbench_builders.siit.trainer.SIITTrainer` that trains towards
    the high-level model's output *distribution* at every position after BOS, not only its class:
    the loss is KL(high-level || low-level) averaged over those positions; agreement is the share
    of positions whose argmax matches (positions where the high-level top two tie, within
    :data:`cbench.tasks.labels.TIE_GAP`, are left out). A high-level model whose mechanism lives in
    its logits' size (a component that pushes against the answer without flipping it, a variable
    spread over shares) passes it on this way; a class target would not."""

    def target(self, hl_out: torch.Tensor, tokens: torch.Tensor | None = None) -> torch.Tensor:
        return torch.log_softmax(hl_out[:, 1:].to(torch.float32), -1)

    def loss(self, ll_out: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        lq = torch.log_softmax(ll_out[:, 1:], -1)
        return (target.exp() * (target - lq)).sum(-1).mean()

    def agree(self, ll_out: torch.Tensor, target: torch.Tensor) -> float:
        from cbench.tasks.labels import NO_CLASS, high_level_classes

        classes = high_level_classes(target)
        labelled = classes != NO_CLASS
        n = int(labelled.sum())
        if n == 0:
            return 1.0
        return float(((ll_out[:, 1:].argmax(-1) == classes) & labelled).sum()) / n
