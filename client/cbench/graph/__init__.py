"""The canonical computational graph: nodes ``input``, ``a{L}.h{H}``, ``m{L}``, ``logits`` and
their edges (``graph``, the compact tensor-backed :class:`Graph` every method shares), and
circuits as sets of its edges (``circuits``).

May import: ``cbench.errors`` only. Everything above uses it; it uses nothing of cbench.
"""

from cbench.about import moved_attributes as _moved

__getattr__ = _moved(__name__, {name: "cbench.graph.graph" for name in (
    "QKV", "Node", "Edge", "edge_name", "parse_edge_name", "promote_edge_name", "MAX_EDGES", "Graph")})
