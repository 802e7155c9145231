"""Tasks: what a case asks of a model and the data to ask it with.

Owns: the task data of a case (``data``: counterfactual base/source pairs, labels, positions),
the IOI task's data and its hand-written high-level model (``ioi_data``, ``ioi_high_level``),
interchange interventions at node granularity (``interchange``), the label classes of
classification cases (``labels``), and the metrics a method optimises or a score reports
(``metrics``). Task kinds whose pairs come from elsewhere register a loader with ``kinds.register_task_kind``; the
built-in ones (IOI) register when this package is imported.

May import: ``cbench.artifacts``, ``cbench.hub``, ``cbench.schemas``, ``cbench.graph``,
``cbench.files``, ``cbench.errors``.
"""

from cbench.tasks.kinds import register_task_kind  # noqa: E402

# the built-in task kinds (their modules import torch only when a model of that kind is loaded)
register_task_kind("ioi", "cbench.tasks.ioi_data:kind_loader")
register_task_kind("stress", "cbench.tasks.stress:kind_loader")
register_task_kind("variables", "cbench.tasks.variables:kind_loader")
