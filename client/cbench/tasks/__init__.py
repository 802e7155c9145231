"""Tasks: what a case asks of a model and the data to ask it with.

Owns: the task data of a case (``data``: counterfactual base/source pairs, labels, positions),
the IOI task's data and its hand-written high-level model (``ioi_data``, ``ioi_high_level``),
interchange interventions at node granularity (``interchange``), the label classes of
classification cases (``labels``), and the metrics a method optimises or a score reports
(``metrics``).

May import: ``cbench.artifacts``, ``cbench.hub``, ``cbench.schemas``, ``cbench.graph``,
``cbench.files``, ``cbench.errors``.
"""
