"""The memory plan in the real-model discovery path (``cbench.runtime.memory_plan``,
``cbench.discovery.chunked``, ``cbench.api.real_models.plan_model_run``): a run whose planned peak
is over the free memory is refused in one line before it starts; with a memory budget, EAP and
EAP-IG-inputs run in the plan's parts of the pairs and give the scores of one run over all pairs
(float32; tolerance 1e-5 of the largest score)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from cli_inprocess import run_main  # noqa: E402
from real_model_families import family_model, tokens  # noqa: E402

from cbench.api.discovering import discovery_hyperparameters  # noqa: E402
from cbench.api.real_models import resolve_model, run_model_discovery  # noqa: E402
from cbench.discovery import discover  # noqa: E402
from cbench.discovery.chunked import pairs_part  # noqa: E402
from cbench.errors import UsageError  # noqa: E402
from cbench.runtime import memory  # noqa: E402
from cbench.runtime.memory_plan import GB, check_budget, check_plan, plan_for  # noqa: E402
from cbench.tasks.data import TaskData  # noqa: E402

torch.set_num_threads(1)
N, P = 8, 7


@pytest.fixture(scope="module")
def llama():
    """Llama-3.1's architecture (GQA 4:1, SwiGLU, RMSNorm, scaled rotary), random weights."""
    model = family_model("llama3.1", seed=3)
    V = int(model.cfg.d_vocab)
    valid = torch.ones(N, P, dtype=torch.bool)
    valid[:, 0] = False
    data = TaskData(tokens(N, P, V, seed=1), tokens(N, P, V, seed=2), None, valid, "categorical")
    return resolve_model(model, data)


def test_a_plan_over_the_free_memory_is_refused_in_one_line(llama, monkeypatch):
    rt = llama.runtime
    plan = check_plan(rt, "eap", N, P, available=1e12)
    assert plan.chunk == N and plan.peak == plan.held + max(plan.clean_pass, plan.gradient_pass) + plan.scores
    # node outputs and outputs of base and source rows: 2 x (F D + V) floats per position
    assert plan.held == 2 * N * P * (rt.n_forward * 64 + 40) * 4
    with pytest.raises(UsageError) as e:
        check_plan(rt, "eap", N, P, available=plan.peak * 0.4)
    msg = str(e.value)
    assert "\n" not in msg and f"eap needs {plan.peak / GB:.1f} GB" in msg and "GB are free" in msg
    fit = plan_for(rt, "eap", N, P, budget=plan.peak * 0.4)
    assert 1 <= fit.chunk < N and f"runs in parts of {fit.chunk} pairs" in msg and "--memory-budget" in msg
    assert check_plan(rt, "nap", N, P, available=1.0) is None  # no plan for other methods
    with pytest.raises(UsageError, match="on one pair of 7 tokens needs .* over the memory budget"):
        check_budget(rt, "eap-ig-inputs", N, P, 1e-9, available=1e12)
    with pytest.raises(UsageError, match=r"--memory-budget 2: eap would use up to .* GB are free"):
        check_budget(rt, "eap", N, P, 2.0, available=plan.peak / 2)
    # through the CLI: one line and exit 2 (the device's free memory read as almost nothing)
    monkeypatch.setattr(memory, "available_bytes", lambda device: plan.peak * 0.4)
    with pytest.raises(UsageError, match="GB are free"):
        run_model_discovery(llama, None, "eap", discovery_hyperparameters("eap"))
    r = run_main(["discover", "--model", "x", "-m", "eap", "--memory-budget", "nan"])
    assert r.code == 2 and len(r.error_lines()) == 1
    r = run_main(["discover", "case-3", "-m", "eap", "--memory-budget", "1"])
    assert r.code == 2 and "go with --model" in r.stderr


@pytest.mark.parametrize("method", ["eap", "eap-ig-inputs"])
def test_a_budget_runs_parts_of_the_pairs_with_the_scores_of_one_run(llama, method):
    rt = llama.runtime
    hp = discovery_hyperparameters(method)
    whole = run_model_discovery(llama, None, method, hp)
    assert "parts" not in whole.result.extra
    budget = plan_for(rt, method, N // 2, P, batch=1).peak / GB  # half the pairs, one row per pass
    plan = plan_for(rt, method, N, P, budget=budget * GB)
    assert plan.peak <= budget * GB and 1 <= plan.chunk < N  # fewer rows per pass, then half the pairs
    parts = run_model_discovery(llama, None, method, hp, memory_budget=budget)
    extra = parts.result.extra
    assert extra["pairs_per_part"] == plan.chunk and extra["parts"] == -(-N // plan.chunk) >= 2
    a, b = whole.result.scores, parts.result.scores
    scale = np.abs(a).max()
    assert scale > 1e-4 and np.abs(b - a).max() <= 1e-5 * scale
    np.testing.assert_array_equal(parts.result.in_graph, whole.result.in_graph)
    assert parts.result.data["n_examples"] == N and parts.document["data"]["n_examples"] == N
    # the parts' weights matter: one part alone is not the whole run
    one = discover(rt, pairs_part(llama.data, 0, plan.chunk), method, hp, progress=False).scores
    assert np.abs(one - a).max() > 1e-3 * scale


def test_a_budget_with_an_ablation_over_all_pairs_is_refused(llama):
    hp = discovery_hyperparameters("eap", ablation="mean")
    budget = plan_for(llama.runtime, "eap", 2, P).peak / GB
    with pytest.raises(UsageError, match="mean ablation is computed over all pairs: use --ablation resample"):
        run_model_discovery(llama, None, "eap", hp, memory_budget=budget)
    with pytest.raises(UsageError, match="applies to eap, eap-ig-inputs"):
        run_model_discovery(llama, None, "nap", discovery_hyperparameters("nap"), memory_budget=1.0)
    with pytest.raises(UsageError, match="positive number of GB"):
        run_model_discovery(llama, None, "eap", discovery_hyperparameters("eap"), memory_budget=float("inf"))


def test_a_llama_3_1_8b_sized_graph_is_within_the_cap():
    from cbench.errors import GraphError
    from cbench.graph import MAX_EDGES, Graph

    assert Graph.edge_count(32, 32) == 1_592_881 <= MAX_EDGES  # Llama-3.1-8B: 32 layers x 32 query heads
    with pytest.raises(GraphError, match="more than the 2000000 cbench builds a graph for"):
        Graph(80, 64)  # Llama-3.1-70B's graph (about 40 M edges) is refused before it is built


def test_near_tie_rows_are_rerun_after_the_gradient_pass_not_during_it(llama):
    """EAP's metric against the clean argmax (ce without labels) reruns the rows whose two largest
    logits nearly tie in the model's own arithmetic, a full forward (TransformerLens copies W_U: 2 GB
    at Llama-3.1-8B's vocabulary). It runs once the gradient pass's graph (and the weight copies it
    saved) is gone, then the pass again: nothing autograd saved is alive during the rerun, and the
    scores are those of the reference the rerun gives."""
    import copy

    from cbench.runtime import CircuitRuntime
    from cbench.runtime.clean_pass import near_tie_rows
    from cbench.discovery.base import prepare

    model = copy.deepcopy(llama.model)
    with torch.no_grad():  # token 5 made to lead often, and token 7's unembedding made token 5's: they tie
        model.unembed.b_U[5] += 3.0 * model.unembed.b_U.std()
        model.unembed.W_U[:, 7] = model.unembed.W_U[:, 5]
        model.unembed.b_U[7] = model.unembed.b_U[5]
    rt = CircuitRuntime(model)
    data = llama.data
    with torch.no_grad():
        assert len(near_tie_rows(rt.clean(data.base), data.valid)) > 0
    live, at_rerun = [0], []

    class Saved:
        def __init__(self, t):
            self.t = t.detach()  # (the tensor itself may be the saving node's output: a cycle)
            live[0] += 1

        def __del__(self):
            live[0] -= 1

    real = CircuitRuntime.clean_for_reference

    def watched(self, *a, **k):
        at_rerun.append(live[0])
        return real(self, *a, **k)

    CircuitRuntime.clean_for_reference = watched
    try:
        with torch.autograd.graph.saved_tensors_hooks(Saved, lambda p: p.t):
            got = discover(rt, data, "eap", {}, metric="ce", progress=False)
    finally:
        CircuitRuntime.clean_for_reference = real
    assert at_rerun == [0]  # one rerun, with nothing of the gradient pass alive
    # the scores: -(clean - ablated) . d metric / d input with the exact argmax as the reference,
    # against the same with the reference from a separate clean pass (its near-tie rows rerun too)
    ctx = prepare(rt, data, "eap", "ce")
    grad, _ = rt.edge_mask_gradient(data.base, ctx.metric, data.source)
    want = -grad.detach().double().cpu().numpy()
    scale = np.abs(want).max()
    assert scale > 1e-4 and np.abs(got.scores - want).max() <= 1e-4 * scale
