"""Case 110 (InterpBench appendix H, Table 11): Inserts zeros between each element, removing the latter half of the list.

Even positions 2k take token k, odd positions are 0 (so the latter half of the input is dropped): an
Aggregate with the selector key == query // 2, then a SequenceMap with the indices. Vocabulary 1..6
(non-zero, so inserted zeros are visible).

Program: InterpBench's original case 110, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_110.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "110",
    "description": "Inserts zeros between each element, removing the latter half of the list.",
    "task_type": "categorical",
    "vocab": [1, 2, 3, 4, 5, 6],
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
    "notes": "A vocabulary of 10 tokens does not compile with tracr 1.0: its assembler sizes every head by the widest query/key space (here indices, 7 dims) and fails when the token-moving head's value space is wider; 6 tokens fit.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    half_index = rasp.Select(rasp.indices, rasp.indices, lambda key, query: key == query // 2).named("half_index")
    spread = rasp.Aggregate(half_index, rasp.tokens).named("spread")
    return rasp.SequenceMap(lambda x, i: x if i % 2 == 0 else 0, spread, rasp.indices).named("insert_zeros")
