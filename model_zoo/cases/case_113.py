"""Case 113 (InterpBench appendix H, Table 11): Inverts the sequence if it is sorted in ascending order, otherwise leaves it unchanged.

If the tokens are non-decreasing the output is the reversed sequence, otherwise the input. As in the
original: compare each token with its predecessor, count the breaks with a SelectorWidth, turn the
count into a direction +1/-1, reflect each index about the centre (n-1)/2 when the direction is -1,
and move tokens with an index-equality Aggregate. Vocabulary 0..5 so that sorted inputs are common.

Program: InterpBench's original case 113, re-expressed in our own code:
https://github.com/FlyingPumba/InterpBench/blob/main/circuits_benchmark/benchmark/cases/case_113.py
Collected from TracrBench in InterpBench.
"""

SPEC = {
    "schema": "cbench/case/v1",
    "id": "113",
    "description": "Inverts the sequence if it is sorted in ascending order, otherwise leaves it unchanged.",
    "task_type": "categorical",
    "vocab": [0, 1, 2, 3, 4, 5],
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

    previous = rasp.Select(
        rasp.indices, rasp.indices, lambda key, query: key == query - 1 or (key == 0 and query == 0)
    ).named("previous_selector")
    prev_token = rasp.Aggregate(previous, rasp.tokens).named("previous_token")
    in_order = rasp.SequenceMap(lambda p, x: 1 if p <= x else 0, prev_token, rasp.tokens).named("in_order")
    out_of_order = rasp.Select(in_order, in_order, lambda key, query: key == 0).named("out_of_order_selector")
    n_breaks = rasp.SelectorWidth(out_of_order).named("n_breaks")
    direction = rasp.Map(lambda n: 1 if n > 0 else -1, n_breaks).named("direction")
    everything = rasp.Select(rasp.tokens, rasp.tokens, rasp.Comparison.TRUE).named("all_true")
    length = rasp.SelectorWidth(everything).named("length")
    centre = rasp.Map(lambda n: n / 2 - 0.5, length).named("centre")
    offset = rasp.SequenceMap(lambda i, c: i - c, rasp.indices, centre).named("offset")
    signed_offset = rasp.SequenceMap(lambda d, o: d * o, direction, offset).named("signed_offset")
    target = rasp.SequenceMap(lambda c, s: c + s, centre, signed_offset).named("target_index")
    place = rasp.Select(target, rasp.indices, rasp.Comparison.EQ).named("invert_selector")
    return rasp.Aggregate(place, rasp.tokens).named("invert_if_sorted")
