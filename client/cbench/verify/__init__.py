"""``cbench verify``: recompute a released model's claims on fresh pairs, by a path that does not
share the trainer's (``gates``: node, edge and calibration gates).

May import everything below it: scoring, discovery, runtime, tasks, artifacts, hub, schemas,
graph, files, errors.
"""

from cbench.about import moved_attributes as _moved

__getattr__ = _moved(__name__, {name: "cbench.verify.gates" for name in (
    "MIN_ACCURACY", "MIN_IIA", "MIN_SIIA", "MAX_OUT_NODE_EFFECT", "MAX_COMPLEMENT_EFFECT", "MIN_EDGE_CHANGED",
    "MIN_ORACLE_AUROC", "ATOL", "GATES", "Gate", "EdgeSignal", "VerifyReport", "node_gates", "edge_gates",
    "program_edge_changes", "hand_written_edges_used", "oracle_scores", "oracle_gate", "verify_model",
    "verify_artifact")})
