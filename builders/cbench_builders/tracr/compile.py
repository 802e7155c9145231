"""Compile a case's RASP program with Tracr (tracr-pypi), keeping what later steps need.

This runs the same passes as ``tracr.compiler.compiling.compile_rasp_to_model`` (RASP graph,
basis inference, craft blocks, layer allocation, assembly) but keeps the intermediate results:
the RASP graph with its craft blocks, the craft model and the vector spaces. The ground-truth
circuit and the op-to-component map are read from them (see :mod:`cbench_builders.tracr.circuit`),
never written by hand.

Choices, as the design asks: jax's default matmul precision is float32 (otherwise compiled
outputs can disagree with the program); the BOS token is the case's ``bos`` (``"BOS"``) and the
PAD token the case's ``pad`` (Tracr always reserves a PAD embedding; when a case has
``pad: null`` it is called ``compiler_pad`` and dropped from the converted model's vocabulary).

Bad input gives one BuildError naming the case: a vocabulary the program cannot evaluate
("the vocab does not fit the program") or a program Tracr cannot compile ("Tracr rejects the
program").
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cbench.errors import BuildError, CbenchError

from cbench_builders.cases.specs import CaseSpec

DEFAULT_PAD = "compiler_pad"
_JAX_CONFIGURED = False


def configure_jax() -> None:
    """float32 matmuls on CPU (Tracr's compiled weights need it to match the program exactly),
    and a persistent compilation cache (``$CBENCH_JAX_CACHE``, default ``~/.cache/cbench/jax``):
    XLA compilation, not arithmetic, is most of a build's time on a small CPU machine."""
    global _JAX_CONFIGURED
    if _JAX_CONFIGURED:
        return
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    import jax

    jax.config.update("jax_default_matmul_precision", "float32")
    cache = os.environ.get("CBENCH_JAX_CACHE") or str(Path.home() / ".cache" / "cbench" / "jax")
    if cache.lower() not in ("", "0", "off", "none"):
        try:
            Path(cache).mkdir(parents=True, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
        except (OSError, AttributeError, ValueError):
            pass  # no cache: slower, same results
    _JAX_CONFIGURED = True


@contextlib.contextmanager
def _jitted_haiku_init():
    """Make Tracr's assembly initialise its haiku model with one jitted call.

    ``tracr.compiler.assemble`` runs ``forward.init`` eagerly only to get parameter shapes (it
    then zeroes every transformer parameter and fills in the compiled weights), and eager jax
    compiles each primitive separately: dozens of XLA compilations per case. Jitting the init
    gives the same parameters with one compilation. Only ``assemble``'s module-level ``hk`` name
    is swapped, and only for the duration of the call.
    """
    import haiku as hk
    import jax
    from tracr.compiler import assemble

    class _Haiku:
        def __getattr__(self, name):
            return getattr(hk, name)

        @staticmethod
        def transform(fn, *args, **kwargs):
            t = hk.transform(fn, *args, **kwargs)
            return hk.Transformed(init=jax.jit(t.init), apply=t.apply)

    real = assemble.hk
    assemble.hk = _Haiku()
    try:
        yield
    finally:
        assemble.hk = real


@dataclass
class CompiledCase:
    """A case compiled by Tracr, with the compiler's intermediate results."""

    case: CaseSpec
    program: Any  # rasp.SOp
    assembled: Any  # tracr AssembledTransformerModel
    graph: Any  # networkx.DiGraph of RASP exprs (nodes carry EXPR, VALUE_SET, OUTPUT_BASIS, MODEL_BLOCK)
    sink: dict
    craft_model: Any  # craft SeriesWithResiduals (the blocks, in layer order)
    residual_space: Any  # bases.VectorSpaceWithBasis (the model's full residual stream)
    tokens_space: Any
    indices_space: Any
    output_space: Any
    module_names: list[str]  # tracr module of each craft block: "transformer/layer_L/attn|mlp"
    compiler_pad: str
    compile_time_s: float
    categorical: bool = field(init=False)

    def __post_init__(self):
        from tracr.rasp import rasp

        self.categorical = bool(rasp.is_categorical(self.sink["EXPR"]))

    @property
    def residual_labels(self) -> list[str]:
        return list(self.assembled.residual_labels)

    @property
    def output_label(self) -> str:
        return self.sink["EXPR"].label


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().replace("\n", " | ")
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _check_vocab_fits(case: CaseSpec, program) -> None:
    """Evaluate the program on a few inputs over the vocab; failure means the vocab does not fit."""
    vocab = list(case.vocab)
    n = case.max_seq_len
    probes = [[vocab[(i + s) % len(vocab)] for i in range(n)] for s in range(len(vocab))]
    probes.append(vocab[: max(case.min_seq_len, 1)] if len(vocab) >= case.min_seq_len else vocab[:1] * case.min_seq_len)
    for seq in probes:
        try:
            program(seq)
        except CbenchError:
            raise
        except Exception as exc:
            raise BuildError(f"case {case.id}: the vocab does not fit the program: evaluating it on "
                             f"{seq!r} raised {_first_line(exc)}") from None


def compile_case(case: CaseSpec, *, mlp_exactness: int = 100) -> CompiledCase:
    """Compile ``case`` with Tracr. Raises BuildError (naming the case) when it cannot."""
    configure_jax()
    import networkx  # noqa: F401  (tracr's graph type; imported here so a missing dep fails clearly)
    from tracr.compiler import (assemble, basis_inference, craft_graph_to_model,
                                craft_model_to_transformer, expr_to_craft_graph, rasp_to_graph,
                                validating)
    from tracr.craft import bases
    from tracr.rasp import rasp

    t0 = time.perf_counter()
    program = case.program()
    pad = case.pad if case.pad is not None else DEFAULT_PAD
    for special in (case.bos, pad):
        if special in case.vocab:
            raise BuildError(f"case {case.id}: the vocab contains the special token {special!r}")
    _check_vocab_fits(case, program)

    unsupported = validating.static_validate(program)
    if unsupported:
        reasons = "; ".join(f"{u.expr.label}: {u.reason}" for u in unsupported[:3])
        raise BuildError(f"case {case.id}: Tracr rejects the program: {reasons}")

    stage = "building the RASP graph"
    try:
        extracted = rasp_to_graph.extract_rasp_graph(program)
        graph, sources, sink = extracted.graph, extracted.sources, extracted.sink
        if rasp.tokens.label not in graph.nodes:
            raise BuildError(f"case {case.id}: Tracr rejects the program: it does not read rasp.tokens")
        stage = "inferring value sets (does the vocab fit the program?)"
        basis_inference.infer_bases(graph, sink, set(case.vocab), case.max_seq_len)
        stage = "building craft blocks"
        expr_to_craft_graph.add_craft_components_to_rasp_graph(
            graph, bos_dir=bases.BasisDirection(rasp.tokens.label, case.bos), mlp_exactness=mlp_exactness)
        stage = "allocating layers"
        craft_model = craft_graph_to_model.craft_graph_to_model(graph, sources)
        stage = "assembling the transformer"
        with _jitted_haiku_init():
            assembled = craft_model_to_transformer.craft_model_to_transformer(
                craft_model=craft_model, graph=graph, sink=sink, max_seq_len=case.max_seq_len,
                causal=case.causal, compiler_bos=case.bos, compiler_pad=pad)
        _, module_names = assemble._get_model_config_and_module_names(craft_model)
    except CbenchError:
        raise
    except NotImplementedError as exc:
        raise BuildError(f"case {case.id}: Tracr rejects the program ({stage}): {_first_line(exc)}") from None
    except Exception as exc:
        raise BuildError(f"case {case.id}: Tracr failed while {stage}: {_first_line(exc)}") from None

    tokens_value_set = graph.nodes[rasp.tokens.label]["VALUE_SET"].union({case.bos, pad})
    tokens_space = bases.VectorSpaceWithBasis.from_values(rasp.tokens.label, tokens_value_set)
    indices_space = bases.VectorSpaceWithBasis.from_values(rasp.indices.label, range(case.max_seq_len))
    output_space = bases.VectorSpaceWithBasis(sink["OUTPUT_BASIS"])
    residual_space = bases.join_vector_spaces(craft_model.residual_space, tokens_space, indices_space, output_space)
    if [str(d) for d in residual_space.basis] != list(assembled.residual_labels):
        raise BuildError(f"case {case.id}: internal error: the residual space cbench rebuilt differs from Tracr's")
    return CompiledCase(
        case=case, program=program, assembled=assembled, graph=graph, sink=sink, craft_model=craft_model,
        residual_space=residual_space, tokens_space=tokens_space, indices_space=indices_space,
        output_space=output_space, module_names=list(module_names), compiler_pad=pad,
        compile_time_s=time.perf_counter() - t0)
