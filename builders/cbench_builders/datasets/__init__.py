"""Datasets: the ``cbench/counterfactuals``, ``cbench/circuits`` and ``cbench/ioi`` repositories.

Owns: counterfactual (base, source) pairs labelled by the compiled Tracr model with one
operation interchanged at a time (``counterfactuals``, through ``high_level``), the
ground-truth edge labels of every case (``circuits``), and the command ``cbench build datasets``
(``build``), which also writes the IOI dataset and every dataset card.

May import: ``cbench_builders.ioi`` (the IOI generator and vocabulary), ``cbench_builders.cases``,
``cbench_builders.release`` and the client. Tracr and SIIT models are read as artifacts from
disk, never through ``tracr/`` or ``siit/``. (Imports are absolute: ``import datasets`` anywhere
in the builders is Hugging Face's library, never this package.)
"""
