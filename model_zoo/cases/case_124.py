"""Case 124 (InterpBench appendix H, Table 11): Check if all elements in a list are equal.

Every position outputs 1 if all tokens are equal, else 0: a SelectorWidth counts, for each position,
the tokens different from its own (zero everywhere exactly when all tokens are equal) and a Map
tests the count for zero. Vocabulary 0..2 so that all-equal inputs are not too rare. Needs
bidirectional attention.

Program: written by cbench from the paper's Table 11 description; InterpBench's case 124, read for
reference:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_124.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "124",
    "description": "Check if all elements in a list are equal.",
    "task_type": "categorical",
    "vocab": [0, 1, 2],
    "min_seq_len": 3,
    "max_seq_len": 5,
    "bos": "BOS",
    "pad": "PAD",
    "causal": False,
    "label_positions": "all-but-bos",
    "source": "cbench",
    "seed": 42,
    "dataset": {"train_size": 5000},  # counterfactual pairs (validation and test 1,000 each): keeps the repo small
    "low_level": {
        "architecture": "interpbench",
        "correspondence": "same-index",
        "deviation": {
            "d_model": 48,
            "d_head": 12,
            "reason": "at d_model 8 the value input of the SelectorWidth head carried 7 % of outputs alone; at 32 the build's gates held on its own sampled pairs (complement 0.0087) but not on the counterfactuals validation split that cbench verify uses (0.029)"
        }
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
        "time_limit_s": 3600,
        "length_weighting": "inputs",
        "label_balance": 0.5,
        "deviation": "pairs shared out over lengths 3-5 in proportion to their inputs (27, 81, 243), not equally: the counterfactuals validation split that cbench verify gates on holds length-5 inputs only (856 pairs), where an equally weighted model at d_model 32 left the complement at 0.029 while its average over the three lengths read 0.0087; and half of each length's bases and sources drawn with equal weight per label sequence (label_balance 0.5): the all-equal inputs (label 1) are 3 of 243 at length 5 (1.2 %, against 3.2 % of the validation split's pairs), drawn uniformly they reached training almost never, and the complement effects of the models before (0.02-0.06) were of the size of the all-equal share"
    },
    "notes": "The original adds a second SelectorWidth that counts positions whose n_different is 0. tracr 1.0's compiled model does not mask PAD (PAD is an ordinary token to it), and at PAD positions n_different is 0, so with padded inputs that second count is wrong; cbench drops it (the first count is already 0 everywhere exactly when all tokens are equal), which computes the same function.",
}


def program():
    """Return the RASP program (an SOp) for this case."""
    from tracr.rasp import rasp

    different = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.NEQ).named("different_selector")
    n_different = rasp.SelectorWidth(different).named("n_different")
    return rasp.Map(lambda n: 1 if n == 0 else 0, n_different).named("all_equal")
