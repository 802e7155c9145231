"""Case 13 (InterpBench main case, paper appendix G, Table 10): Analyzes the trend (increasing, decreasing, constant) of numeric tokens.

Compares each token with the next one: next = Aggregate(Select(indices, indices, q == k - 1),
tokens) (shift_by(-1)), then SequenceMap(token, next) -> 'increasing' / 'decreasing' / 'constant'.
The next token lies to the right, so attention is bidirectional. Vocabulary {0, 1, 2}.

Program: InterpBench's case 13 (circuits_benchmark/benchmark/cases/case_13.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "13",
    "description": "Analyzes the trend (increasing, decreasing, constant) of numeric tokens.",
    "task_type": "categorical",
    "vocab": [
        0,
        1,
        2
    ],
    "min_seq_len": 3,
    "max_seq_len": 9,
    "bos": "BOS",
    "pad": "PAD",
    "causal": False,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index"
    },
    "training": {
        "algorithm": "algorithm-1",
        "lr": 0.001,
        "batch_size": 512,
        "epochs": 60,
        "iit_weight": 1.0,
        "siit_weight": 1.0,
        "behavior_weight": 1.0,
        "edge_weight": 1.0,
        "edge_sampling": "mixed",
        "edge_target": 0.999,
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True,
        "time_limit_s": 1200
    },
    "training_v1": {
        "algorithm": "summed",
        "lr": 0.001,
        "lr_end": 0.0002,
        "lr_decay_epochs": 30,
        "betas": [
            0.9,
            0.9
        ],
        "batch_size": 512,
        "epochs": 80,
        "iit_weight": 1.0,
        "siit_weight": 3.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True
    }
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.compiler import lib
    from tracr.rasp import rasp

    def trend(current, nxt):
        if current < nxt:
            return "increasing"
        if current > nxt:
            return "decreasing"
        return "constant"

    next_token = lib.shift_by(-1, rasp.tokens).named("next_token")
    return rasp.SequenceMap(trend, rasp.tokens, next_token).named("trend")
