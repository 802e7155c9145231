"""FIND: build the function-interpretation suite (``cbench/find``, Schwettmann et al., 2023).

Owns: sampling numeric and string functions with their ground-truth specs, writing the suite
with its card, and the command ``cbench build find`` (``suite``); training the MLPs that
approximate some of the numeric ones as FIND trains them, and measuring their fit (``mlp``). The client's ``cbench.find`` loads and scores the suite.

May import: ``cbench_builders.release`` and the client (``cbench.find.functions`` evaluates
the specs).
"""
