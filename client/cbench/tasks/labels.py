"""Labels of a categorical high-level (Tracr) output, and RASP ``None`` as a class.

Tracr writes a categorical program's value ``None`` as an all-zero output row, so every class
ties. :func:`high_level_classes` reads a Tracr output as class indices and gives such positions
either ``NO_CLASS`` (no label: left out of losses and metrics, as zoo v1 did) or, for models
trained with an explicit ``None`` class (zoo v2), that class's index, which is one past the
Tracr model's classes (``meta.json``'s ``none_class``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # no import of torch here: `cbench build --help` reads these constants
    import torch

NO_CLASS = -100  # the label of a position without a class (cross_entropy's ignore_index)
TIE_GAP = 1e-3  # a categorical output whose top two logits are closer than this has no class
NONE_LABEL = "None"  # how the explicit None class is listed in a model's output_classes


def high_level_classes(logits: torch.Tensor, none_class: int | None = None) -> torch.Tensor:
    """Argmax classes of high-level logits ``[..., n_classes]``; where the top two logits tie
    (within ``TIE_GAP``), ``none_class`` when given, else ``NO_CLASS``."""
    if logits.shape[-1] < 2:
        return logits.argmax(-1)
    top = logits.topk(2, dim=-1).values
    classes = logits.argmax(-1)
    fill = NO_CLASS if none_class is None else int(none_class)
    return classes.masked_fill(top[..., 0] - top[..., 1] < TIE_GAP, fill)


def none_class_of(meta) -> int | None:
    """The index of a model's explicit ``None`` output class (``meta.json`` ``none_class``), or None."""
    v = meta.get("none_class") if hasattr(meta, "get") else None
    return int(v) if isinstance(v, int) and not isinstance(v, bool) else None
