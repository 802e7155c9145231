"""Case 33 (InterpBench main case, paper appendix G, Table 10): Checks if each token's length is odd or even.

Map(len(word) % 2 == 0): one MLP, outputs True for even length.
Vocabulary: InterpBench's random word vocabulary (8 words of 1-8 ASCII letters drawn with Python's random.seed(42)), written out literally.

Program: InterpBench's case 33 (circuits_benchmark/benchmark/cases/case_33.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "33",
    "description": "Checks if each token's length is odd or even.",
    "task_type": "categorical",
    "vocab": [
        "J",
        "LB",
        "TPSI",
        "V",
        "b",
        "no",
        "oCLrZaW",
        "poiVg"
    ],
    "min_seq_len": 3,
    "max_seq_len": 9,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
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
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.997,
        "eval_pairs": 1000,
        "source_gradients": True,
        "time_limit_s": 1200
    },
    "training_v1": {
        "algorithm": "summed",
        "lr": 0.003,
        "lr_end": 0.0002,
        "lr_decay_epochs": 15,
        "betas": [
            0.9,
            0.9
        ],
        "batch_size": 512,
        "epochs": 40,
        "iit_weight": 1.0,
        "siit_weight": 1.0,
        "behavior_weight": 1.0,
        "strict_prob": 0.5,
        "train_size": 20000,
        "target": 0.997,
        "node_target": 0.993,
        "eval_pairs": 1000
    }
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    return rasp.Map(lambda w: len(w) % 2 == 0, rasp.tokens).named("length_is_even")
