"""``cbench score``, ``evaluate``, ``test-circuit``, ``adversarial`` and ``bench``.

CASE is a model artifact directory (e.g. ``build/tracr/tracr-case-3``) or a case name the hub
client resolves (``case-3``, ``tracr-case-3``, ``cbench/case-3@v1.0.0``). Every failure is one
``error:`` line (the CLI's main turns CbenchError into it); results go to ``--out`` as a
schema-valid ``cbench/results/v1`` document, written atomically; ``--out -`` or ``--json`` print it
on standard output instead (the text then goes to standard error; see :mod:`cbench.cli.output`).
"""

from __future__ import annotations

import sys
import time

import click

from cbench.api.scoring import model_input, scoring_data
from cbench.runtime.threads import use_cpu_threads
from cbench.cli.executor_opts import executor_options
from cbench.cli.options import (SEED_TYPE, FiniteFloatRange, check_not_empty, check_out,
                                 check_out_dir_parents,
                                 n_examples_option, split_option)
from cbench.cli.model_opts import case_and_circuit, check_model_args, model_options, resolve_cli_model
from cbench.cli.output import Output, json_option, out_option
from cbench.errors import GraphError, SchemaError, UsageError, did_you_mean
from cbench.files.safe_io import refuse_input_as_output

from cbench.cli.choices import ABLATION_CHOICE, METRIC_CHOICE  # noqa: E402


# ----------------------------------------------------------------------------- helpers
def _artifact(case: str):
    """The model artifact of CASE (a model artifact directory or a case name, pulled when not cached)."""
    from cbench.api.inputs import resolve_case

    return resolve_case(case).artifact


def _read(path: str):
    from cbench.schemas import read_json

    return read_json(path)


def _named_circuit(circuit: str) -> bool:
    """``truth`` or ``literature:<name>``: a circuit named, not a file."""
    return circuit in ("truth", "ground-truth") or circuit.startswith("literature:")


def _circuit_edges(path: str, artifact) -> list[str]:
    """Edges of a circuit file: a circuit document, an edge-scores document (its in_graph
    edges), a JSON list of edge names, the word ``truth`` for the case's own circuit, or
    ``literature:<name>`` for one of the literature's circuits (:mod:`cbench.graph.literature`)."""
    from cbench.graph.literature import check_shape, is_literature_ref, literature_circuit

    import cbench.schemas as validation
    from cbench.scoring.ground_truth import circuit_edge_names

    graph = artifact.graph
    if is_literature_ref(path):
        doc = literature_circuit(path)
        check_shape(doc, graph)
        edges = list(doc["edges"])
    elif path in ("truth", "ground-truth"):
        if not artifact.circuit:
            raise UsageError(f"case {artifact.case} has no ground-truth circuit")
        edges = circuit_edge_names(graph, artifact.circuit)
    else:
        doc = _read(path)
        if isinstance(doc, list):
            edges = doc
            bad = [e for e in edges if not isinstance(e, str)]
            if bad:
                raise SchemaError(f"{path}: a circuit list holds edge names (strings), found {bad[0]!r}")
        elif isinstance(doc, dict):
            kind = doc.get("schema")
            real = getattr(artifact, "model_kind", None) == "pretrained"  # a --model: the graph decides
            if isinstance(doc.get("case"), str) and str(doc["case"]) != artifact.case and not real:
                raise UsageError(f"{path} is for case {doc['case']!r}, not case {artifact.case!r}")
            if kind == "cbench/edge-scores/v1":
                from cbench.scoring.ground_truth import check_edge_scores

                check_edge_scores(doc, graph, case=artifact.case, source=path)
                edges = [n for n, e in doc["edges"].items() if e.get("in_graph")]
            else:
                violations = validation.validate(doc, "circuit")
                if violations:
                    v = violations[0]
                    more = f" (and {len(violations) - 1} more problems)" if len(violations) > 1 else ""
                    raise SchemaError(f"{path}: {v.path}: {v.message}{more}")
                edges = list(doc["edges"])
        else:
            raise SchemaError(f"{path}: a circuit file is a circuit document, an edge-scores document or a list of edge names")
    from cbench.runtime import edge_names_to_mask

    head_names = set(graph.head_edge_names)
    for e in edges:
        if not graph.has_edge(e) and e not in head_names:
            raise GraphError(f"circuit edge {e!r} is not in the model's graph ({graph.describe()})"
                             + did_you_mean(str(e), graph.edge_names))
    if not edges:
        raise UsageError(f"{path}: the circuit is empty (no edges); there is nothing to test")
    edge_names_to_mask(graph, edges)
    return list(edges)


def _finish(doc: dict, out: str | None, output: Output | None = None) -> None:
    output = output or Output(out=out)
    if output.wants_document:
        output.emit(doc)


def _data_options(f):
    f = n_examples_option(default=200, low=2)(f)
    f = split_option(help="dataset split")(f)
    f = click.option("--sampled", is_flag=True, help="sample inputs from meta.json instead of loading the dataset")(f)
    f = click.option("--seed", type=SEED_TYPE, default=0, show_default=True)(f)
    return f


protocol_option = click.option(
    "--protocol", type=click.Choice(["cbench", "mib"]), default="cbench", show_default=True,
    help="cbench: the paper-faithful procedure; mib: also MIB's reference-code procedure (greedy-pruned AUROC, "
         "pruned int(k*n)-edge CPR/CMD circuits; docs/mib-parity.md)")


def _mib_auroc_lines(mib) -> list[str]:
    """MIB's greedy-pruned edge AUROC (a MibRoc), for people."""
    from cbench.scoring.report import fmt

    sizes = ", ".join(f"{k:g}:{n}" for k, n in zip(mib.grid, mib.n_edges))
    return [f"MIB edge AUROC (greedy |score| circuits, pruned; protocol mib): {fmt(mib.auroc)}",
            f"  edges left after pruning at k = {sizes}"]


# ----------------------------------------------------------------------------- score
def _echo_truth(echo, artifact, doc, truth, mib=None, include_no_signal: bool = False) -> None:
    """The lines of edge scores against the ground truth: the edges that carry no signal, the
    AUROCs and precision/recall, and MIB's AUROC when measured."""
    from cbench.scoring.edge_signal import signal_summary

    if truth.no_signal:
        echo(signal_summary(truth.no_signal, truth.origin) + ("; counted as positives (--include-no-signal)"
                                                              if include_no_signal else "; left out of the edge ROC"))
    for line in _auroc_lines(artifact, doc, truth.result) + (_mib_auroc_lines(mib) if mib is not None else []):
        echo(line)


def _auroc_lines(artifact, doc, res) -> list[str]:
    from cbench.scoring.report import fmt

    method = (doc.get("method") or {}).get("name", "?")
    ep, np_ = res.edge_pr, res.node_pr
    what = "q/k/v-level" if res.granularity == "qkv" else "head-level"
    return [
        f"case {artifact.case} ({artifact.model_kind}), method {method}: {res.n_true_edges} of {res.n_edges} "
        f"{what} edges and {res.n_true_nodes} of {res.n_nodes} nodes in the ground truth",
        f"edge AUROC: {fmt(res.edge_auroc)} ({what})",
        f"edge AUROC promoted to heads (InterpBench-compatible): {fmt(res.edge_auroc_promoted)}",
        f"node AUROC: {fmt(res.node_auroc)}",
        f"edge precision/recall at the method's circuit: {fmt(ep.precision, 3)} / {fmt(ep.recall, 3)} "
        f"(tp {ep.tp}, fp {ep.fp}, fn {ep.fn})",
        f"node precision/recall at the method's circuit: {fmt(np_.precision, 3)} / {fmt(np_.recall, 3)} "
        f"(tp {np_.tp}, fp {np_.fp}, fn {np_.fn})",
    ]


@click.command("score")
@click.argument("case")
@click.argument("scores", type=click.Path(dir_okay=False))
@out_option()
@json_option
@click.option("--plot", callback=check_out, help="draw the edge and node ROC curves to this PNG")
@click.option("--signed/--absolute", "signed", default=None,
              help="rank edges by signed score or by |score| (default: signed for mask-logit methods "
                   "such as sp and edge-sp, |score| otherwise)")
@click.option("--include-no-signal", is_flag=True,
              help="count ground-truth edges that cannot carry signal as positives (default: left out)")
@protocol_option
@_data_options
def score(case, scores, out, as_json, plot, signed, include_no_signal, protocol, n_examples, split, sampled, seed):
    """Edge- and node-level ROC/AUROC of SCORES against CASE's ground-truth circuit: at q/k/v
    granularity, and promoted to heads (head score = max |score| over q/k/v) as InterpBench does.
    Ground-truth edges that cannot carry signal (marked in the circuit, else derived from the
    model's behaviour on the case's data) are left out unless --include-no-signal."""
    from cbench.api.scoring import auroc_document, score_edges
    from cbench.scoring.report import file_input, plot_roc

    refuse_input_as_output([("--out", out), ("--plot", plot)], [("SCORES", scores)])
    t0 = time.perf_counter()
    o = Output(as_json, out)
    artifact = _artifact(case)
    doc, _source, truth, mib = score_edges(artifact, scores, signed=signed, include_no_signal=include_no_signal,
                                           protocol=protocol, split=split, n_examples=n_examples, sampled=sampled,
                                           seed=seed)
    _echo_truth(o.echo, artifact, doc, truth, mib, include_no_signal)
    res = truth.result
    if plot:
        plot_roc(plot, {"edges": (res.edge_roc.fpr, res.edge_roc.tpr, res.edge_auroc),
                        "nodes": (res.node_roc.fpr, res.node_roc.tpr, res.node_auroc)},
                 f"case {artifact.case}: {(doc.get('method') or {}).get('name', '?')} vs ground truth")
        o.echo(f"ROC plot written to {plot}")
    if o.wants_document:
        _finish(auroc_document(artifact, doc, truth, mib, file_input(scores), t0), out, o)


# ----------------------------------------------------------------------------- evaluate
@click.command("evaluate")
@click.argument("submission", type=click.Path(dir_okay=False))
@click.option("--case", "case_arg", help="model artifact directory or case name (default: the submission's model repo)")
@click.option("--ablation", type=ABLATION_CHOICE, default="resample", show_default=True)
@click.option("--metric", default=None, type=METRIC_CHOICE, help="loss for faithfulness: kl/l2 against the model (default), or ce/mae/mse against the labels")
@out_option()
@json_option
@click.option("--construction", type=click.Choice(["auto", "top-n", "greedy"]), default="auto", show_default=True,
              help="how CPR/CMD circuits are built from the scores: top-n, or greedy search from the logits "
                   "(MIB E.1); auto: what the submission's method needs (greedy for ifr, else top-n)")
@protocol_option
@_data_options
@model_options
def evaluate(submission, case_arg, ablation, metric, out, as_json, construction, protocol, n_examples, split, sampled,
             seed, model=None, data_file=None, dtype="float32", device=None):
    """Validate SUBMISSION against its schema and the case's graph, then score it: edge/node
    AUROC, CPR and CMD for an edge-scores file; faithfulness at each size (CPR for signed
    selections, CMD for absolute ones) for a circuits-at-sizes file."""
    refuse_input_as_output([("--out", out)], [("SUBMISSION", submission)])
    use_cpu_threads()
    from cbench.api.scoring import load_submission, run_evaluation
    from cbench.scoring.report import fmt

    t0 = time.perf_counter()
    o = Output(as_json, out)
    rm = None
    if model is not None or data_file or device or dtype != "float32":
        check_model_args(case_arg, model, data_file, dtype, device, case_name="--case")
        rm = resolve_cli_model(model, data_file, dtype, device)
    sub = load_submission(submission, case_arg, case_option="--case", model=rm)
    ev = run_evaluation(sub, ablation=ablation, metric=metric, construction=construction, protocol=protocol,
                        split=split, n_examples=n_examples, sampled=sampled, seed=seed, t0=t0,
                        on_auroc=lambda truth, mib: _echo_truth(o.echo, sub.artifact, sub.doc, truth, mib))
    f = ev.faithfulness
    if sub.kind == "edge-scores":
        faith = f.faithfulness
        o.echo(f"CPR: {fmt(faith.cpr)}")
        o.echo(f"CMD: {fmt(faith.cmd)}")
        if f.level == "neuron":
            o.echo(f"  ({faith.metric}, {ablation} ablation, {faith.n_examples} examples, MIB protocol at the neuron "
                   "level: top int(k*n) of the document's neurons_scores, neuron ablation)")
        else:
            o.echo(f"  ({faith.metric}, {ablation} ablation, {faith.n_examples} examples, {f.construction} circuits"
                   + (", MIB protocol: int(k*n) edges, pruned)" if protocol == "mib" else ")"))
        if f.note:
            o.echo(f"  metric: {f.metric} ({f.note})")
        for label, curve in (("signed", faith.cpr_curve), ("absolute", faith.cmd_curve)):
            o.echo(f"  f ({label} top-k) at k = " + ", ".join(f"{k:g}:{fmt(v, 2)}" for k, v in zip(curve.grid, curve.f)))
    else:
        curve, selection = f.faithfulness, f.selection
        if selection != "absolute":
            o.echo(f"CPR: {fmt(curve.area)}" + ("" if selection else " (area under f; selection not stated)"))
        if selection != "signed":
            o.echo(f"CMD: {fmt(curve.distance)}" + ("" if selection else " (area between f and 1)"))
        o.echo("  f at k = " + ", ".join(f"{k:g}:{fmt(v, 2)}" for k, v in zip(curve.grid, curve.f)))
        if f.note:
            o.echo(f"  metric: {f.metric} ({f.note})")
    _finish(ev.document, out, o)


# ----------------------------------------------------------------------------- test-circuit
TEST_NAMES = ("equivalence", "independence", "minimality", "sufficiency", "partial-necessity")


@click.command("test-circuit")
@click.argument("case", metavar="[CASE]")
@click.argument("circuit", required=False)
@click.option("--test", "tests", multiple=True, required=True,
              type=click.Choice(TEST_NAMES + ("all",)), help="which test (repeatable; 'all' runs the five)")
@click.option("--alpha", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.05, show_default=True)
@click.option("--q-star", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.9, show_default=True)
@click.option("--epsilon", type=FiniteFloatRange(0, 0.5, min_open=True, max_open=True), default=0.1, show_default=True)
@click.option("--n-random", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--n-permutations", type=click.IntRange(1, 1_000_000), default=1000, show_default=True)
@click.option("--n-reference", type=click.IntRange(1, 1_000_000), default=1000, show_default=True,
              help="reference edges drawn for minimality")
@click.option("--reference", type=click.Choice(["model", "complement"]), default="model", show_default=True,
              help="where partial necessity draws random circuits from")
@click.option("--ablation", type=ABLATION_CHOICE, default=None,
              help="how edges outside the circuit are ablated (default: zero for Tracr models, as the paper "
                   "does for its Tracr circuits; resample otherwise)")
@click.option("--metric", default=None, type=METRIC_CHOICE, help="per-example score: ce (categorical), mae or mse (numerical)")
@out_option()
@json_option
@_data_options
@model_options
def test_circuit(case, circuit, tests, alpha, q_star, epsilon, n_random, n_permutations, n_reference, reference,
                 ablation, metric, out, as_json, n_examples, split, sampled, seed, model=None, data_file=None,
                 dtype="float32", device=None):
    """Hypothesis tests (Shi et al.) of CIRCUIT (a circuit file, an edge-scores file's in_graph
    edges, a list of edge names, 'truth', or a literature circuit such as literature:ioi) on CASE,
    or on a real --model with --task."""
    case, circuit = case_and_circuit(case, circuit, model)
    check_model_args(case, model, data_file, dtype, device)
    refuse_input_as_output([("--out", out)], [("CIRCUIT", circuit)])
    use_cpu_threads()
    from cbench.scoring import hypothesis_tests as H
    from cbench.scoring.report import file_input, fmt, results_document

    t0 = time.perf_counter()
    o = Output(as_json, out)
    artifact = _artifact(case) if model is None else resolve_cli_model(model, data_file, dtype, device)
    edges = _circuit_edges(circuit, artifact)
    if metric is None and model is not None:
        metric = artifact.answer_metric  # logit_diff with answer ids (the hypothesis-test paper's IOI score)
    if ablation is None:
        ablation = "zero" if artifact.model_kind == "tracr" else "resample"
        o.echo(f"ablation: {ablation} (default for {artifact.model_kind} models; --ablation to change)")
    names = TEST_NAMES if "all" in tests else tuple(dict.fromkeys(tests))
    sc_case, data = scoring_data(artifact, split, n_examples, sampled, seed)
    scorer = H._Scorer(sc_case, data, ablation, metric)
    options = {
        "equivalence": dict(epsilon=epsilon, alpha=alpha, ablation=ablation, metric=metric),
        "independence": dict(n_permutations=n_permutations, alpha=alpha, ablation=ablation, metric=metric, seed=seed),
        "minimality": dict(q_star=q_star, alpha=alpha, n_reference=n_reference, ablation=ablation, metric=metric, seed=seed),
        "sufficiency": dict(q_star=q_star, alpha=alpha, n_random=n_random, ablation=ablation, metric=metric, seed=seed),
        "partial-necessity": dict(q_star=q_star, alpha=alpha, n_random=n_random, reference=reference, ablation=ablation,
                                  metric=metric, seed=seed),
    }
    results = {}
    for name in names:
        r = H._FUNCS[name](sc_case, data, edges, _scorer=scorer, **options[name])
        results[name] = r.to_dict()
        o.echo(f"{name}: {r.decision} (statistic {fmt(r.statistic)}, p-value {fmt(r.p_value, 4)}, "
                   f"null {'rejected' if r.null_rejected else 'retained'} at alpha {alpha}; "
                   + ", ".join(f"{k} {v}" for k, v in r.sizes.items() if not isinstance(v, dict)) + ")")
        if name == "minimality" and r.details.get("unnecessary_edges"):
            o.echo("  unnecessary edges: " + ", ".join(r.details["unnecessary_edges"][:10]))
    if o.wants_document:
        circuit_input = {"path": circuit} if _named_circuit(circuit) else file_input(circuit)
        rdoc = results_document("hypothesis-test", {"tests": results},
                                {"circuit": circuit_input, "model": model_input(artifact),
                                 "data": {"split": split, "n_examples": data.n_examples}},
                                case=artifact.case, runtime_s=time.perf_counter() - t0)
        _finish(rdoc, out, o)
    failed = [name for name, r in results.items() if r["decision"] != "pass"]
    if failed:
        # a failed test is the command's answer, not an error: say which, exit 1 (2 is for usage errors)
        o.echo(f"failed: {', '.join(failed)}")
        sys.exit(1)  # (click's Exit would be turned into a return value by main's standalone_mode=False)


# ----------------------------------------------------------------------------- adversarial
@click.command("adversarial")
@click.argument("case", metavar="[CASE]")
@click.argument("circuit", required=False)
@click.option("--k", "k_worst", type=click.IntRange(0, 1000), default=10, show_default=True, help="worst pairs to show")
@click.option("--percentile", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.99, show_default=True)
@click.option("--confidence", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.95, show_default=True)
@click.option("--margin", type=FiniteFloatRange(0, 1, min_open=True, max_open=True), default=0.005, show_default=True)
@click.option("--metric", default=None, type=METRIC_CHOICE, help="kl (categorical) or l2 (numerical)")
@out_option()
@json_option
@_data_options
@model_options
def adversarial(case, circuit, k_worst, percentile, confidence, margin, metric, out, as_json, n_examples, split, sampled,
                seed, model=None, data_file=None, dtype="float32", device=None):
    """Distribution of KL(model || circuit) over every base x source pair of a split (or of a real
    --model's --task pairs), its percentiles (raw and z-scores), the worst pairs, and the sample
    size for a percentile bound."""
    case, circuit = case_and_circuit(case, circuit, model)
    check_model_args(case, model, data_file, dtype, device)
    refuse_input_as_output([("--out", out)], [("CIRCUIT", circuit)])
    use_cpu_threads()
    from cbench.scoring.adversarial import adversarial_evaluation
    from cbench.scoring.report import file_input, fmt, results_document
    from cbench.scoring.task import circuit_mask

    t0 = time.perf_counter()
    o = Output(as_json, out)
    if percentile + margin >= 1:
        raise UsageError(f"--percentile + --margin must be below 1 (got {percentile} + {margin})")
    artifact = _artifact(case) if model is None else resolve_cli_model(model, data_file, dtype, device)
    edges = _circuit_edges(circuit, artifact)
    sc_case, data = scoring_data(artifact, split, n_examples, sampled, seed)
    res = adversarial_evaluation(sc_case, data, circuit_mask(artifact.graph, edges), k_worst=k_worst, metric=metric,
                                 percentile=percentile, confidence=confidence, margin=margin)
    raw, z = res.summary["raw"], res.summary["z"]
    o.echo(f"{res.metric} over {raw['count']} pairs ({res.n_base} bases x {res.n_source} sources)")
    o.echo(f"{'':>8} {'value':>12} {'z-score':>9}")
    for key in raw:
        zv = z.get(key)
        o.echo(f"{key:>8} {format(raw[key], '.6g') if isinstance(raw[key], float) else raw[key]:>12} "
                   f"{fmt(zv, 2) if key in z else '':>9}")
    for w in res.worst:
        tops = (f"model {w.get('model_top')} / circuit {w.get('circuit_top')}" if "model_top" in w
                else f"model {w.get('model_output')} / circuit {w.get('circuit_output')}")
        o.echo(f"#{w['rank']} {w['value']:.6g}: base {w['base']} source {w['source']}: {tops}")
    ss = res.sample_size
    o.echo(f"sample size: {ss['n']} i.i.d. inputs bound the {ss['percentile']:g} quantile with confidence "
               f"{ss['confidence']:g} at margin {ss['margin']:g} (order statistic #{ss['order_statistic']})")
    if o.wants_document:
        circuit_input = {"path": circuit} if _named_circuit(circuit) else file_input(circuit)
        rdoc = results_document("adversarial", res.to_dict(), {"circuit": circuit_input, "model": model_input(artifact),
                                                               "data": {"split": split, "n_examples": data.n_examples}},
                                case=artifact.case, runtime_s=time.perf_counter() - t0)
        _finish(rdoc, out, o)


# ----------------------------------------------------------------------------- bench
@click.command("bench")
@click.option("--cases", default="main", show_default=True, help="'main', 'appendix-h', 'all' (every released SIIT model), 'stress' (the stress tier) or a comma-separated list like 3,33")
@click.option("--methods", default=None, callback=check_not_empty, help="comma-separated methods (default: all)")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True, callback=check_out_dir_parents,
              help="results directory (created with its missing parents, which the command names)")
@click.option("--n-examples", type=click.IntRange(2, 100_000), default=100, show_default=True)
@click.option("--sampled", is_flag=True, help="sample inputs from meta.json instead of loading the datasets")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--track", type=click.Choice(["circuits", "causal-variables"]), default="circuits", show_default=True,
              help="causal-variables: localize every variable with each featurizer (--methods names featurizers)")
@click.option("--include-no-signal", is_flag=True,
              help="count ground-truth edges that cannot carry signal as positives (default: left out)")
@json_option
@executor_options
@click.option("--protocol", type=click.Choice(["cbench", "mib"]), default="cbench", show_default=True,
              help="mib: run nap, nap-ig, ifr and ugs as MIB's reference code does and build CPR/CMD circuits as it "
                   "does (both AUROC kinds are reported either way; docs/mib-parity.md); with --model, CPR/CMD by "
                   "MIB's metric for the task (logit difference where the pairs carry answers), else by KL")
@model_options
def bench(cases, methods, out_dir, n_examples, sampled, seed, track, include_no_signal, as_json, executor, ray_address,
          workers, protocol="cbench", model=None, data_file=None, dtype="float32", device=None):
    """Run discovery methods on cases, score them against the ground truth and write a report
    directory (results JSON, markdown table, Mann-Whitney/A12 tables, plots). Resumable; with
    --executor ray the (case, method) tasks run on Ray workers and the files are the same.
    With --model and --task: the methods on that real model, scored by CPR/CMD (no ground truth)."""
    from cbench.cli.executor_opts import make_cli_executor
    from cbench.scoring.bench import run_bench

    use_cpu_threads()
    o = Output(as_json)
    if model is not None or data_file or device or dtype != "float32":
        if executor not in (None, "local") or ray_address:
            raise UsageError("--executor ray and --ray-address run the case bench; with --model the methods run "
                             "in this process or on --workers local processes")
        _bench_model(o, methods, out_dir, n_examples, model, data_file, dtype, device, as_json, workers, protocol)
        return
    if track == "causal-variables":
        from cbench.localization.track import run_from_cli

        doc = run_from_cli(cases, methods, out_dir, n_examples, echo=o.echo)
    else:
        ex = make_cli_executor(executor, ray_address, workers)
        try:
            doc = run_bench(cases, methods, out_dir, n_examples=n_examples, sampled=sampled, seed=seed, echo=o.echo,
                            executor=None if ex.name == "local" else ex, include_no_signal=include_no_signal,
                            protocol=None if protocol == "cbench" else protocol,
                            progress="off" if as_json else "auto")  # k of N and an ETA on stderr
        finally:
            ex.close()
    if as_json:
        o.emit(doc)


def _bench_model(o, methods, out_dir, n_examples, model, data_file, dtype, device, as_json, workers=None,
                 protocol="cbench") -> None:
    """``bench --model``: every method (or --methods) on the real model, CPR/CMD and wall time."""
    from cbench.discovery import METHODS
    from cbench.api.model_bench import run_model_bench

    check_model_args(None, model, data_file, dtype, device)
    names = [m.strip() for m in methods.split(",") if m.strip()] if methods else sorted(METHODS)
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise UsageError(f"unknown method {unknown[0]!r}" + did_you_mean(unknown[0], sorted(METHODS)))
    rm = resolve_cli_model(model, data_file, dtype, device, n_examples)
    doc = run_model_bench(rm, names, out_dir, echo=o.echo, workers=workers or 1, protocol=protocol)
    if as_json:
        o.emit(doc)
