"""Every stress model's design by name (``or-1`` ... ``deep-2``): the sixteen of
:mod:`cbench_builders.stress.designs`, conditional routing (:mod:`~cbench_builders.stress.routing`)
the large, deep circuits (:mod:`~cbench_builders.stress.deep`), and the dense-floor designs and
combinations of :mod:`~cbench_builders.stress.variants`, its two rounds of held-out designs included."""

from __future__ import annotations

from cbench_builders.stress import deep, designs, routing, variants

DESIGNS = {**designs.DESIGNS,
           **{f.__name__.replace("_", "-"): f for f in (routing.route_1, routing.route_2, deep.deep_1, deep.deep_2)},
           **variants.DESIGNS, **variants.HELD_OUT, **variants.HELD_OUT_2}
