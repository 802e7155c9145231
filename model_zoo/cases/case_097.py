"""Case 97 (InterpBench appendix H, Table 11): Scale a sequence by its maximum element.

Each token divided by the sequence maximum (0 when the maximum is 0). The maximum is found as in the
original: tokens made unique by a tiny index offset, a SelectorWidth counts the keys not above each
query, the position whose count equals the length is the maximum and is broadcast by an Aggregate.
Needs bidirectional attention.

Program: InterpBench's original case 97, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_97.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "97",
    "description": "Scale a sequence by its maximum element.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": False,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "dataset": {"train_size": 5000},  # counterfactual pairs (validation and test 1,000 each): keeps the repo small
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index"
    },
    "training": {
        "algorithm": "summed",
        "lr": 0.001,
        "lr_end": 0.0002,
        "lr_decay_epochs": 100,
        "betas": [0.9, 0.9],
        "batch_size": 512,
        "epochs": 200,
        "iit_weight": 1.0,
        "siit_weight": 3.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "edge_weight": 1.0,
        "edge_sampling": "mixed",
        "edge_target": 0.999,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True,
        "cpu_limit_s": 300,
        "time_limit_s": 3600
    },
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true")
    length = rasp.SelectorWidth(everything).named("length")
    # Break ties between equal tokens by a tiny index offset so exactly one position is the maximum.
    unique_key = rasp.SequenceMap(lambda x, i: x + i * 1e-6, rasp.tokens, rasp.indices).named("unique_key")
    not_above = rasp.Select(unique_key, unique_key, rasp.Comparison.LEQ).named("leq_selector")
    n_not_above = rasp.SelectorWidth(not_above).named("leq_count")
    is_max = rasp.Select(n_not_above, length, rasp.Comparison.EQ).named("max_element_selector")
    max_token = rasp.Aggregate(is_max, rasp.tokens).named("max_element")
    return rasp.SequenceMap(lambda x, mx: x / mx if mx > 0 else 0, rasp.tokens, max_token).named("scale_by_max")
