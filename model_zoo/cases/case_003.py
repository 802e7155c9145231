"""Case 3 (InterpBench main case, paper appendix G, Table 10): Returns the fraction of 'x' in the input up to the i-th position for all i.

Numerical frac_prevs of tokens == 'x' (tracr.compiler.lib.make_frac_prevs): an MLP computes
is_x, one head averages it over the causal prefix (Select(indices, indices, LEQ)).
Vocabulary {a, b, c, x} and at most 4 tokens after BOS, as the original.

Program: InterpBench's case 3 (circuits_benchmark/benchmark/cases/case_3.py), written again in cbench's own code.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "3",
    "description": "Returns the fraction of 'x' in the input up to the i-th position for all i.",
    "task_type": "numerical",
    "vocab": [
        "a",
        "b",
        "c",
        "x"
    ],
    "min_seq_len": 3,
    "max_seq_len": 4,
    "bos": "BOS",
    "pad": "PAD",
    "causal": True,
    "label_positions": "all-but-bos",
    "source": "original",
    "seed": 42,
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index",
        "heads": {
            "a1.h0": "a1.h2"
        }
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
    from tracr.compiler import lib
    from tracr.rasp import rasp

    is_x = (rasp.tokens == "x").named("is_x")
    return lib.make_frac_prevs(is_x)
