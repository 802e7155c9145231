"""Tasks: what a case asks of a model and the data to ask it with.

Owns: the task data of a case (``data``: counterfactual base/source pairs, labels, positions),
the IOI task's data and its hand-written high-level model (``ioi_data``, ``ioi_high_level``),
interchange interventions at node granularity (``interchange``), the label classes of
classification cases (``labels``), and the metrics a method optimises or a score reports
(``metrics``). Task kinds whose pairs come from elsewhere register a loader with ``data.register_task_kind``; the
built-in ones (IOI) register when this package is imported.

May import: ``cbench.artifacts``, ``cbench.hub``, ``cbench.schemas``, ``cbench.graph``,
``cbench.files``, ``cbench.errors``.
"""

from cbench.tasks import ioi_data as _ioi_data  # noqa: E402,F401  (registers the "ioi" task kind)
from cbench.tasks import stress as _stress  # noqa: E402,F401  (registers the "stress" task kind)
