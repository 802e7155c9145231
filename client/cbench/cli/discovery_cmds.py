"""``cbench discover`` and ``cbench ablate``.

CASE is a pulled case (``case-3``, ``tracr-case-3``, ``case-3@v1.0.0``; read from the local
cache, never downloaded here: ``cbench pull CASE`` first) or a model artifact directory. Inputs
are the case's counterfactual pairs when the counterfactuals dataset is available, else
deterministic pairs sampled from meta.json (``--seed``).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from cbench.cli.choices import METHOD_CHOICE, METRIC_CHOICE

from cbench.runtime.threads import use_cpu_threads
from cbench.cli.options import SEED_TYPE, floats, n_examples_option, split_option
from cbench.cli.model_opts import TASK_HELP, check_model_args, model_options, resolve_cli_model
from cbench.cli.output import STDOUT, Output, json_option, out_option
from cbench.errors import CacheDamagedError, CbenchError, UsageError


def resolve_case(case: str):
    """(ModelArtifact, model_ref dict) for a pulled case or an artifact directory."""
    from cbench.artifacts.model import read_model_artifact

    p = Path(case)
    if p.is_dir():
        art = read_model_artifact(p)
        return art, {"repo": None, "revision": None, "kind": art.model_kind}
    from cbench.hub.cache import Cache
    from cbench.hub.pull import from_cache, parse_spec

    name, rev = parse_spec(case)
    try:
        snap = from_cache(name, rev, "model", Cache(), reason="not pulled")
    except CacheDamagedError:
        raise  # says what is wrong and how to repair it
    except CbenchError:
        from cbench.hub.cache_verify import index_damage_message

        damage = index_damage_message(Cache(), name)  # on disk, but the index does not vouch for it
        if damage is not None:
            raise CacheDamagedError(damage) from None
        raise UsageError(f"case {case!r} is not pulled; run `cbench pull {case}` first "
                         f"(or pass a model artifact directory)") from None
    art = read_model_artifact(snap.path)
    revision = snap.tag or snap.sha
    return art, {"repo": snap.repo_id, "revision": revision, "kind": art.model_kind}


def _parse_params(items) -> dict:
    out = {}
    for item in items:
        if "=" not in item:
            raise UsageError(f"--param takes key=value (got {item!r})")
        k, v = item.split("=", 1)
        out[k.strip().replace("-", "_")] = v.strip()
    return out




def _data_for(art, split, n_examples, seed, use_dataset):
    """The one data rule: the counterfactuals dataset (pulled when not cached), sampled pairs only
    with --sampled; the output's ``data`` block says which."""
    from cbench.tasks.data import load_task_data

    return load_task_data(art.case, art.meta, split=split, n_examples=n_examples, seed=seed,
                          use_dataset=use_dataset)


@click.command()
@click.argument("case", required=False)
@click.option("--method", "-m", required=True, type=METHOD_CHOICE, help="the discovery method")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="a hyperparameter (repeatable)")
@click.option("--model", "model", default=None, metavar="NAME_OR_DIR",
              help="instead of CASE: a real model, a Hugging Face checkpoint directory or hub name "
                   "(offline as HF_HUB_OFFLINE says; docs/real-models.md), with --task")
@click.option("--task", "--data", "data_csv", default=None, metavar="TASK", help=TASK_HELP)
@click.option("--dtype", type=click.Choice(["float32", "bfloat16", "float16"]), default="float32", show_default=True,
              help="with --model: the weights' dtype")
@click.option("--device", default=None, metavar="DEVICE", help="with --model: cpu, cuda, cuda:N or auto")
@click.option("--memory-budget", "memory_budget", type=floats(1e-6, 1e6, low_open=True), default=None, metavar="GB",
              help="with --model, eap and eap-ig-inputs: keep the planned peak memory within GB by running "
                   "parts of the pairs (same scores; docs/real-models.md)")
@split_option()
@n_examples_option(help="number of input pairs [default: the smallest that keeps the method's scores stable "
                        "(docs/performance.md): activation-patching 500, acdc 1000; other methods: the whole split]")
@click.option("--metric", default=None, type=METRIC_CHOICE, help="default per method and task")
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True,
              help="seed for sampled inputs, and the method's own seed (ugs, sp, edge-sp, random) "
                   "unless --param seed=... gives one")
@click.option("--ablation", type=click.Choice(["resample", "mean", "zero", "optimal"]), default=None,
              help="how ablated edges are replaced, for methods that ablate (same as --param ablation=...; "
                   "optimal: vectors learned on the data, cached per model)")
@click.option("--sampled", is_flag=True, help="use inputs sampled from meta.json, not the counterfactuals dataset")
@out_option("write the edge-scores JSON here (default: print a summary)")
@json_option
@click.option("--quiet", "-q", is_flag=True, help="no progress bars")
@click.option("--protocol", type=click.Choice(["cbench", "mib"]), default="cbench", show_default=True,
              help="cbench: the method as its paper defines it; mib: as MIB's reference code runs it (nap, nap-ig, "
                   "ifr, ugs; docs/mib-parity.md)")
def discover(case, method, params, split, n_examples, metric, seed, ablation, sampled, out, as_json, quiet,
             protocol="cbench", model=None, data_csv=None, dtype="float32", device=None, memory_budget=None):
    """Run a circuit-discovery METHOD on CASE (or a real --model) and write its edge scores
    (cbench/edge-scores/v1)."""
    from cbench.api.discovering import discovery_hyperparameters, run_discovery
    from cbench.api.inputs import COMMAND_SPELLING

    if (case is None) == (model is None):
        raise UsageError("give a CASE or --model NAME_OR_DIR (one of them)")
    if model is None and (data_csv or device or dtype != "float32" or memory_budget is not None):
        raise UsageError("--task/--data, --dtype, --device and --memory-budget go with --model")
    hp = discovery_hyperparameters(method, _parse_params(params), ablation=ablation, seed=seed, protocol=protocol,
                                   spelling=COMMAND_SPELLING)
    use_cpu_threads()
    if model is not None:  # a real model (cbench.api.real_models)
        from cbench.api.real_models import model_label, run_model_discovery

        run = run_model_discovery(model, data_csv, method, hp, metric, dtype=dtype, device=device,
                                  n_examples=n_examples, progress=not (quiet or as_json), memory_budget=memory_budget)
        label = model_label(model)
    else:
        art, model_ref = resolve_case(case)
        run = run_discovery(art, model_ref, method, hp, metric, split=split, n_examples=n_examples, seed=seed,
                            sampled=sampled, progress=not (quiet or as_json))
        label = art.case
    result, data = run.result, run.data
    o = Output(as_json, out)
    if o.wants_document:
        o.emit(run.document, written="")
        o.echo(f"{method}: {result.in_graph.sum()} of {run.n_edges} edges in the circuit, "
               f"{data.n_examples} examples ({data.split}), {run.seconds:.2f} s"
               + (f" -> {out}" if out not in (None, STDOUT) else ""))
    else:
        top = sorted(result.edge_scores().items(), key=lambda kv: -abs(kv[1]))[:10]
        click.echo(f"{method} on {label} ({result.metric}, {data.n_examples} examples, {data.split}): "
                   f"{int(result.in_graph.sum())} of {run.n_edges} edges in the circuit, {result.runtime_s:.2f} s")
        for name, score in top:
            click.echo(f"  {score:+.5f}  {name}")
    say = o.echo if o.wants_document else click.echo
    note = (result.extra or {}).get("protocol")
    if note:  # MIB's code departs from its paper here: say which one this run follows
        say(f"protocol {note}")
    if (result.extra or {}).get("parts"):  # --memory-budget: the plan split the pairs
        say(f"ran in {result.extra['parts']} parts of at most {result.extra['pairs_per_part']} pairs "
            f"(--memory-budget; scores weighted by part size)")
    if (result.extra or {}).get("optimal_ablation"):  # --ablation optimal --protocol mib: how, and what could not apply
        say((result.extra or {})["optimal_ablation"])


def _names(value: str | None) -> list[str]:
    if not value:
        return []
    return [v.strip() for v in value.replace(";", ",").split(",") if v.strip()]


@click.command()
@click.argument("case", required=False)
@click.option("--nodes", default=None, metavar="N1,N2", help="nodes to ablate, e.g. a0.h1,m1")
@click.option("--edges", default=None, metavar="E1,E2", help="edges to ablate, e.g. 'input->a0.h0<v>,a0.h0->logits'")
@click.option("--kind", type=click.Choice(["resample", "mean", "zero"]), default="resample", show_default=True)
@click.option("--complement", is_flag=True, help="ablate everything except the named nodes/edges (run the circuit)")
@click.option("--node-effects", "effects", is_flag=True, help="instead: the effect of ablating each head and MLP "
                                                              "alone under resample, mean and zero ablation")
@click.option("--metric", default=None, type=METRIC_CHOICE, help="default: kl or l2")
@split_option()
@n_examples_option()
@click.option("--seed", type=SEED_TYPE, default=0, show_default=True)
@click.option("--sampled", is_flag=True, help="use inputs sampled from meta.json")
@click.option("--json", "as_json", is_flag=True, help="print JSON")
@model_options
def ablate(case, nodes, edges, kind, complement, effects, metric, split, n_examples, seed, sampled, as_json,
           model=None, data_file=None, dtype="float32", device=None):
    """Output, accuracy and metric of CASE (or a real --model on its --task pairs) with nodes or
    edges ablated (or per-node effects)."""
    node_list, edge_list = _names(nodes), _names(edges)
    check_model_args(case, model, data_file, dtype, device)
    if not effects and not node_list and not edge_list and not complement:
        raise UsageError("name what to ablate with --nodes or --edges (or use --node-effects)")
    if model is not None:
        art = resolve_cli_model(model, data_file, dtype, device, n_examples)
    else:
        art, _ref = resolve_case(case)
    g = art.graph
    for n in node_list:
        g.node(n)
    for e in edge_list:
        from cbench.runtime import edge_names_to_mask

        edge_names_to_mask(g, [e])
    if metric is not None:
        from cbench.tasks.metrics import check_metric

        check_metric(metric, art.task_type)
    use_cpu_threads()
    from cbench.scoring.ablation import ablate as run_ablate, node_effects
    from cbench.runtime import CircuitRuntime

    if model is not None:
        rt, data = art.runtime, art.data
    else:
        data = _data_for(art, split, n_examples, seed, not sampled)
        rt = CircuitRuntime(art)
    if effects:
        res = node_effects(rt, data, nodes=node_list or None)
        if as_json:
            click.echo(json.dumps([r.to_dict() for r in res], indent=1))
            return
        click.echo(f"node effects on {art.case} ({data.n_examples} examples, {data.split})")
        click.echo(f"  {'node':<8} {'kind':<9} {'effect':>7} {'norm. KL':>9}")
        for r in res:
            click.echo(f"  {r.node:<8} {r.kind:<9} {r.effect:7.3f} {r.normalized_kl:9.3f}")
        return
    res = run_ablate(rt, data, node_list, edge_list, kind, metric, complement)
    if as_json:
        click.echo(json.dumps(res.to_dict(), indent=1))
        return
    what = "everything but " if complement else ""
    click.echo(f"{art.case}: {kind} ablation of {what}{len(node_list)} node(s), {len(edge_list)} edge(s) "
               f"({len(res.ablated_edges)} edges ablated), {data.n_examples} examples")
    click.echo(f"  accuracy {res.accuracy:.4f} (clean {res.clean_accuracy:.4f}); {res.metric} {res.metric_value:.6g}")
