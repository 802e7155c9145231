"""Tracr: compile the case programs with Tracr into TransformerLens model artifacts.

Owns: compiling a case's RASP program while keeping the intermediate results (``compile``),
converting the assembled model to TransformerLens (``convert``), the three-way exactness check
(``exactness``), the ground-truth circuit read from the craft graph and its patching check
(``circuit``), the ``tracr-programs`` dataset (``programs``), and the command
``cbench build tracr`` (``build``).

With ``cases/`` (whose specs return RASP programs) the only package that imports the
third-party ``tracr`` (and jax, haiku). Imports are absolute, so ``from tracr...`` in a module
here is that package, never this one. May import: ``cbench_builders.cases``,
``cbench_builders.release`` and the client.
"""
