"""The three-way exactness check: RASP evaluator vs Tracr's compiled model vs the converted model.

Test set: every input of the case (every sequence over the vocab with min_seq_len..max_seq_len
tokens) when there are at most 10,000, else 2,000 inputs sampled with the case's seed (length
uniform in [min, max], tokens uniform). Each input is prefixed with BOS; position 0 is excluded.

Agreement: exact equality of the decoded outputs for categorical programs, |a - b| <= 1e-4 for
numerical ones, on every (input, position) pair, for all three pairs of evaluators.

For a bidirectional case with a PAD token the converted model is also run on every input
right-padded with PAD to ``max_seq_len + 1`` at once, and its outputs at the input's positions
compared with the unpadded run (``pad_exact``; within ``ATOL`` on every output score). A model
exact on PAD-padded inputs can be given counterfactual pairs whose source is longer than the
base (the base padded to the source's length) and rows of different lengths in one batch.

One documented exception: where the RASP evaluator outputs ``None`` ("undefined": an aggregate
that selected nothing, or an operation whose input was undefined), Tracr's compiled model has no
None to produce unless ``None`` is one of its output classes, and writes whatever its weights
give. At such positions only the compiled model and the converted model are compared (exactly),
and the positions are counted (``n_undefined``). The benchmark's labels are the compiled
model's outputs (REFERENCE.md), so they are defined there too.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field

import numpy as np

from cbench_builders.cases.specs import CaseSpec
from cbench_builders.tracr.compile import CompiledCase
from cbench_builders.tracr.convert import ConvertedModel

EXHAUSTIVE_LIMIT = 10_000
N_SAMPLED = 2_000
ATOL = 1e-4


def count_inputs(case: CaseSpec) -> int:
    v = len(case.vocab)
    return sum(v ** n for n in range(case.min_seq_len, case.max_seq_len + 1))


def case_inputs(case: CaseSpec, limit: int = EXHAUSTIVE_LIMIT, n_sampled: int = N_SAMPLED) -> tuple[list[tuple], bool]:
    """The case's test inputs (without BOS) and whether they are every possible input."""
    vocab = list(case.vocab)
    if count_inputs(case) <= limit:
        seqs = [tuple(s) for n in range(case.min_seq_len, case.max_seq_len + 1)
                for s in itertools.product(vocab, repeat=n)]
        return seqs, True
    rng = np.random.default_rng(case.seed)
    lengths = rng.integers(case.min_seq_len, case.max_seq_len + 1, size=n_sampled)
    seqs = [tuple(vocab[i] for i in rng.integers(0, len(vocab), size=int(n))) for n in lengths]
    return seqs, False


def by_length(seqs: list[tuple]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, s in enumerate(seqs):
        groups.setdefault(len(s), []).append(i)
    return groups


@dataclass
class ExactnessResult:
    ok: bool
    n_inputs: int
    exhaustive: bool
    n_positions: int
    n_undefined: int
    max_abs_err: float | None  # numerical: largest |difference| among the three pairs
    failure: str | None = None
    time_s: float = 0.0
    counts: dict = field(default_factory=dict)
    pad_exact: bool | None = None  # bidirectional cases with PAD: padded outputs equal unpadded ones
    pad_max_abs_err: float | None = None

    def summary(self) -> str:
        if not self.ok:
            return f"FAIL: {self.failure}"
        kind = "all" if self.exhaustive else "sampled"
        return f"exact on {self.n_inputs} inputs ({kind})"

    def as_dict(self) -> dict:
        return {"ok": self.ok, "n_inputs": self.n_inputs, "exhaustive": self.exhaustive,
                "n_positions": self.n_positions, "n_undefined_positions": self.n_undefined,
                "max_abs_err": self.max_abs_err, "failure": self.failure, "atol": ATOL,
                **({} if self.pad_exact is None else {"pad_exact": self.pad_exact,
                                                       "pad_max_abs_err": self.pad_max_abs_err})}


def _padded_ids(seqs: list[tuple], enc: dict, bos, pad, width: int) -> np.ndarray:
    ids = np.full((len(seqs), width), enc[pad], dtype=np.int32)
    for i, s in enumerate(seqs):
        ids[i, 0] = enc[bos]
        ids[i, 1:len(s) + 1] = [enc[t] for t in s]
    return ids


def tracr_outputs(compiled: CompiledCase, seqs: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """Run Tracr's compiled model on every input at once.

    Inputs are padded to max_seq_len + 1 with Tracr's PAD token and Tracr's own pad masking
    (``CompiledTransformerModel.pad_token``) keeps pads out of every attention, so one jitted
    call serves all lengths. Returns (outputs [N, T], output-space projection [N, T, C]): the
    output is the class index (categorical, Tracr's argmax) or the value (numerical).
    """
    import haiku as hk
    import jax
    from tracr.craft import vectorspace_fns

    asm = compiled.assembled
    enc = asm.input_encoder.encoding_map
    pad_id = enc[compiled.compiler_pad]

    def forward(tokens):
        model = asm.get_compiled_model()
        model.pad_token = pad_id
        return model(tokens, use_dropout=False)

    apply = jax.jit(hk.without_apply_rng(hk.transform(forward)).apply)
    ids = _padded_ids(seqs, enc, compiled.case.bos, compiled.compiler_pad, compiled.case.max_seq_len + 1)
    res = apply(asm.params, ids)
    w_u = vectorspace_fns.project(compiled.residual_space, compiled.output_space).matrix
    proj = np.asarray(res.transformer_output.output, dtype=np.float64) @ w_u
    return np.asarray(res.unembedded_output), proj


def tl_outputs(converted: ConvertedModel, seqs: list[tuple], categorical: bool) -> tuple[np.ndarray, np.ndarray]:
    """Run the converted HookedTransformer, one batch per length; same layout as tracr_outputs
    (positions past an input's end are zero)."""
    import torch

    tid = converted.token_to_id
    bos = tid[converted.input_tokens[0]]
    width = max(len(s) for s in seqs) + 1
    n_out = converted.model.cfg.d_vocab_out
    preds = np.zeros((len(seqs), width), dtype=np.float64)
    logits_all = np.zeros((len(seqs), width, n_out), dtype=np.float64)
    with torch.no_grad():
        for n, idx in sorted(by_length(seqs).items()):
            ids = torch.tensor([[bos] + [tid[t] for t in seqs[i]] for i in idx], dtype=torch.long)
            logits = converted.model(ids)
            res = logits.argmax(-1) if categorical else logits[..., 0]
            preds[idx, : n + 1] = res.numpy()
            logits_all[idx, : n + 1] = logits.double().numpy()
    return preds, logits_all


def pad_error(converted: ConvertedModel, seqs: list[tuple], logits_unpadded: np.ndarray, pad) -> float:
    """Largest |output score| difference, at the inputs' own positions, between the converted
    model on PAD-padded inputs (all at one width) and ``logits_unpadded`` (:func:`tl_outputs`)."""
    import torch

    tid = converted.token_to_id
    width = max(len(s) for s in seqs) + 1
    ids = torch.as_tensor(_padded_ids(seqs, tid, converted.input_tokens[0], pad, width), dtype=torch.long)
    err = 0.0
    with torch.no_grad():
        for start in range(0, len(seqs), 4096):
            logits = converted.model(ids[start:start + 4096]).double().numpy()
            for j, s in enumerate(seqs[start:start + 4096]):
                n = len(s) + 1
                err = max(err, float(np.max(np.abs(logits[j, :n] - logits_unpadded[start + j, :n]))))
    return err


def check_exactness(compiled: CompiledCase, converted: ConvertedModel,
                    seqs: list[tuple] | None = None, exhaustive: bool | None = None) -> ExactnessResult:
    """Compare the three evaluators on the case's test set (or ``seqs``)."""
    t0 = time.perf_counter()
    case = compiled.case
    if seqs is None:
        seqs, exhaustive = case_inputs(case)
    categorical = compiled.categorical
    program = compiled.program
    rasp_out = [program(list(s)) for s in seqs]
    tr, tr_logits = tracr_outputs(compiled, seqs)
    tl, tl_logits = tl_outputs(converted, seqs, categorical)

    n_pos = n_undef = 0
    max_err = 0.0
    failure = None
    values = converted.output_values
    for i, s in enumerate(seqs):
        for p in range(len(s)):
            r, a, b = rasp_out[i][p], tr[i][p + 1], tl[i][p + 1]
            n_pos += 1
            if categorical:
                a_val, b_val = values[int(a)], values[int(b)]
                undefined = r is None and None not in values
                if undefined:
                    # no class is meant to win here: compare the output scores, not their argmax
                    n_undef += 1
                    err = float(np.max(np.abs(tr_logits[i, p + 1] - tl_logits[i, p + 1])))
                    if err > ATOL:
                        failure = (f"input {list(s)!r} position {p + 1} (undefined in RASP): Tracr's and "
                                   f"the converted model's output scores differ by {err:.3g}")
                elif int(a) != int(b):
                    failure = (f"input {list(s)!r} position {p + 1}: Tracr gives {a_val!r}, "
                               f"the converted model {b_val!r}")
                elif r != a_val:
                    failure = (f"input {list(s)!r} position {p + 1}: RASP gives {r!r}, "
                               f"Tracr and the converted model {a_val!r}")
            else:
                fa, fb = float(a), float(b)
                err_ab = abs(fa - fb)
                if r is None:
                    n_undef += 1
                    errs = [err_ab]
                else:
                    errs = [err_ab, abs(float(r) - fa), abs(float(r) - fb)]
                max_err = max(max_err, *errs)
                if max(errs) > ATOL:
                    failure = (f"input {list(s)!r} position {p + 1}: RASP {r!r}, Tracr {fa:.6g}, "
                               f"converted {fb:.6g} differ by more than {ATOL}")
            if failure:
                break
        if failure:
            break
    pad_exact = pad_err = None
    if not case.causal and case.pad is not None:
        pad_err = pad_error(converted, seqs, tl_logits, case.pad)
        pad_exact = pad_err <= ATOL
    return ExactnessResult(ok=failure is None, n_inputs=len(seqs), exhaustive=bool(exhaustive), n_positions=n_pos,
                           n_undefined=n_undef, max_abs_err=None if categorical else max_err, failure=failure,
                           time_s=time.perf_counter() - t0, pad_exact=pad_exact, pad_max_abs_err=pad_err)
