"""The stress tier: models that plant, one each, the mechanisms that make real models hard for
circuit discovery (redundancy, backup, negative components, cancellation, attention saturation,
a steep AND, decoys, distributed variables), with hand-set weights so that each mechanism is exact
and the ground truth is proved by gates (``cbench verify``), and with predictions of which
methods should fail, written before any bench run.

``kit``: hand-set transformers (named residual subspaces, heads, neurons); ``designs``: the
sixteen models, their ground truth, gates and predictions; ``build``: ``cbench build stress``.

May import: ``cbench`` (the client) and ``cbench_builders.release`` (cards).
"""
