"""``cbench verify``: recompute a released model's claims on fresh pairs, by a path that does not
share the trainer's: ``artifact`` picks the pairs and gates a model's kind calls for; ``gates``:
node, edge and calibration gates; ``mechanisms``: the stress tier's gates (a planted mechanism
proved numerically, each circuit edge necessary in its context, a floor below the circuit);
``edge_patching``: every edge ablated alone, as a forward from its destination on (the floor
gate's pass).

May import everything below it: scoring, discovery, runtime, tasks, artifacts, hub, schemas,
graph, files, errors.
"""

from cbench.about import moved_attributes as _moved

_SURFACE = {
    "cbench.verify.gates": ("MIN_ACCURACY", "MIN_IIA", "MIN_SIIA", "MAX_OUT_NODE_EFFECT", "MAX_COMPLEMENT_EFFECT",
                            "MIN_EDGE_CHANGED", "MIN_ORACLE_AUROC", "ATOL", "GATES", "Gate", "EdgeSignal",
                            "VerifyReport", "node_gates", "edge_gates", "program_edge_changes",
                            "hand_written_edges_used", "oracle_scores", "oracle_gate", "verify_model"),
    "cbench.verify.artifact": ("verify_artifact",),
    "cbench.verify.mechanisms": ("verify_stress", "stress_gates"),
}
__getattr__ = _moved(__name__, {name: module for module, names in _SURFACE.items() for name in names})
