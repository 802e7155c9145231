"""Every stress model's design by name (``or-1`` ... ``deep-2``): the sixteen of
:mod:`cbench_builders.stress.designs`, conditional routing (:mod:`~cbench_builders.stress.routing`)
and the large, deep circuits (:mod:`~cbench_builders.stress.deep`)."""

from __future__ import annotations

from cbench_builders.stress import deep, designs, routing

DESIGNS = {**designs.DESIGNS,
           **{f.__name__.replace("_", "-"): f for f in (routing.route_1, routing.route_2, deep.deep_1, deep.deep_2)}}
