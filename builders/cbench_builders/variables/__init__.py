"""The variables tier: models for the causal-variable track in which locating a variable is
hard and the answer is known -- variables sharing one component in separate subspaces, stored in
a rotated residual basis, or spread over several components -- with hand-set weights (the stress
tier's ``kit``), gates in ``cbench verify`` (:mod:`cbench.verify.variables`) and one small SAE per
hidden vector released beside each model.

``designs``: the nine models and their ground truth; ``build``: ``cbench build variables``.

May import: ``cbench`` (the client), ``cbench_builders.stress`` (the kit) and
``cbench_builders.release`` (cards).
"""
