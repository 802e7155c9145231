"""A FIND interpreter that uses no language model: family search by parameter fitting.

Numeric functions: call the black box on a grid of [-128, 128] (three times, to see noise),
fit every atomic family (scale and bias by least squares, native parameters by grid search and
``scipy.optimize.least_squares``), every pair of composable families (sums and products share
the basis ``[1, f, g, f*g]``) and polynomials, and keep the model with the best BIC.
Discontinuities are located by bisection with extra calls. A long run of large residuals on
which the function is nearly constant is reported as the corrupted interval, and the model is
refitted without it.

String functions: call the black box on probe words, then search atomic operations and
compositions ``outer(inner(x))`` of the suite's operation vocabulary; parameters of ``replace``,
``append`` and ``prepend`` are inferred from input-output pairs (through the inverse of an
invertible outer operation when they are the inner step).

It knows the suite's family vocabulary (as an LM interpreter knows common functions) and
nothing else: it sees functions only through :class:`cbench.find.suite.BlackBox`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from cbench.find import functions as F

N_SAMPLES = 513
REPEATS = 3


# =========================================================================== numeric
@dataclass
class Fit:
    bic: float
    sse: float
    code: str            # numpy expression in x
    pred: np.ndarray     # on the sample grid
    k: int


def _fmt(v: float) -> str:
    return repr(float(v))


class _Data:
    def __init__(self, x, y, mask, sd):
        self.x, self.y, self.mask, self.sd = x, y, mask, sd
        self.xm, self.ym = x[mask], y[mask]
        self.n = int(mask.sum())
        self.floor = max(sd ** 2, 1e-12 * float(np.mean(self.ym ** 2)) if self.n else 1e-12, 1e-18)

    def bic(self, sse: float, k: int) -> float:
        return self.n * math.log(max(sse / max(self.n, 1), self.floor)) + k * math.log(max(self.n, 2))


def _lstsq(d: _Data, cols: list[np.ndarray], codes: list[str], k_native: int) -> Fit | None:
    """Least squares of y on [1, *cols] over the mask; cols are full-grid arrays."""
    A = np.column_stack([np.ones(d.n)] + [c[d.mask] for c in cols])
    if not np.all(np.isfinite(A)):
        return None
    coef, *_ = np.linalg.lstsq(A, d.ym, rcond=None)
    pred_m = A @ coef
    sse = float(np.sum((d.ym - pred_m) ** 2))
    full = np.column_stack([np.ones(len(d.x))] + list(cols)) @ coef
    terms = [_fmt(coef[0])] + [f"{_fmt(c)} * ({code})" for c, code in zip(coef[1:], codes)]
    k = len(coef) + k_native
    return Fit(d.bic(sse, k), sse, " + ".join(terms), full, k)


def _single_batch(d: _Data, G: np.ndarray, codes: list[str], k_native: int) -> Fit | None:
    """Best of y ~ a*g + b over the rows of G (vectorised closed form)."""
    Gm = G[:, d.mask]
    ok = np.all(np.isfinite(Gm), axis=1)
    if not ok.any():
        return None
    Gm = np.where(ok[:, None], Gm, 0.0)
    gm = Gm.mean(axis=1, keepdims=True)
    gc = Gm - gm
    yc = d.ym - d.ym.mean()
    var = np.sum(gc ** 2, axis=1)
    cov = gc @ yc
    with np.errstate(all="ignore"):
        a = np.where(var > 1e-300, cov / var, 0.0)
    sse = np.sum(yc ** 2) - a * cov
    sse = np.where(ok & (var > 1e-300), sse, np.inf)
    i = int(np.argmin(sse))
    if not np.isfinite(sse[i]):
        return None
    return _lstsq(d, [G[i]], [codes[i]], k_native)


def _jumps(box, d: _Data, max_jumps: int = 8) -> list[float]:
    """Locations of discontinuities: steps in the sampled curve much larger than their
    neighbours', each refined by bisection (extra calls, averaged over repeats)."""
    x, y, mask = d.x, d.y, d.mask
    dy = np.abs(np.diff(y))
    both = mask[:-1] & mask[1:]
    dy = np.where(both, dy, 0.0)
    base = np.median(dy[both]) if both.any() else 0.0
    cand = []
    for i in range(len(dy)):
        left = dy[i - 1] if i > 0 else 0.0
        right = dy[i + 1] if i + 1 < len(dy) else 0.0
        if dy[i] > 4 * max(left, right, base) + 6 * d.sd and dy[i] > 0:
            cand.append(i)
    cand = sorted(cand, key=lambda i: -dy[i])[:max_jumps]
    out = []
    for i in sorted(cand):
        lo, hi = x[i], x[i + 1]
        ylo, yhi = y[i], y[i + 1]
        for _ in range(12):
            mid = 0.5 * (lo + hi)
            vals = np.array([_num(v) for v in box([mid] * REPEATS)])
            ym = float(np.nanmean(vals)) if np.isfinite(vals).any() else np.nan
            if not np.isfinite(ym):
                break
            if abs(ym - ylo) <= abs(ym - yhi):
                lo, ylo = mid, ym
            else:
                hi, yhi = mid, ym
        out.append(round(0.5 * (lo + hi), 3))
    return out


def _num(v):
    return np.nan if v is None else float(v)


def _atomic_fits(d: _Data, jumps: list[float]) -> list[Fit]:
    x = d.x
    fits: list[Fit | None] = []
    with np.errstate(all="ignore"):
        fits.append(_lstsq(d, [], [], 0))  # constant
        for deg in range(1, 5):  # linear and polynomials
            fits.append(_lstsq(d, [x ** p for p in range(1, deg + 1)], [f"x**{p}" for p in range(1, deg + 1)], 0))
        fits.append(_lstsq(d, [np.abs(x)], ["np.abs(x)"], 0))
        fits.append(_lstsq(d, [np.maximum(x, 0)], ["np.maximum(x, 0)"], 0))
        al = np.round(np.arange(0.01, 0.51, 0.01), 2)
        fits.append(_single_batch(d, np.stack([np.where(x > 0, x, a * x) for a in al]),
                                  [f"np.where(x > 0, x, {a!r} * x)" for a in al], 1))
        ss = np.round(np.arange(15, 70.01, 0.25), 2)
        fits.append(_single_batch(d, np.stack([np.exp(x / s) for s in ss]), [f"np.exp(x / {s!r})" for s in ss], 1))
        pos, nonneg, nz = x > 0, x >= 0, x != 0
        fits.append(_lstsq(d, [np.where(pos, np.log(np.abs(x)), np.nan)], ["np.log(x)"], 0)
                    if not (d.mask & ~pos).any() else None)
        fits.append(_lstsq(d, [np.where(nonneg, np.sqrt(np.abs(x)), np.nan)], ["np.sqrt(x)"], 0)
                    if not (d.mask & ~nonneg).any() else None)
        fits.append(_lstsq(d, [np.where(nz, 1 / np.where(nz, x, 1), np.nan)], ["1 / x"], 0))
        cs = [c for c in range(-50, 51) if c]
        fits.append(_single_batch(d, np.stack([x / (x + c) for c in cs]), [f"x / (x + {c!r})" for c in cs], 1))
        for s in (1.0, 2.0, 5.0, 10.0, 20.0):
            fits.append(_lstsq(d, [np.floor(x / s)], [f"np.floor(x / {s!r})"], 1))
            fits.append(_lstsq(d, [np.ceil(x / s)], [f"np.ceil(x / {s!r})"], 1))
        for t in jumps:
            fits.append(_lstsq(d, [(x >= t).astype(float)], [f"np.where(x >= {t!r}, 1.0, 0.0)"], 1))
        for i, lo in enumerate(jumps):
            for hi in jumps[i + 1:]:
                fits.append(_lstsq(d, [((x >= lo) & (x <= hi)).astype(float)],
                                   [f"np.where((x >= {lo!r}) & (x <= {hi!r}), 1.0, 0.0)"], 2))
        sq = _square_from_jumps(jumps)
        if sq:
            p, c = sq
            fits.append(_lstsq(d, [np.where(np.sin(2 * np.pi * (x - c) / p) >= 0, 1.0, -1.0)],
                               [f"np.where(np.sin(2 * np.pi * (x - {c!r}) / {p!r}) >= 0, 1.0, -1.0)"], 2))
        fits += _smooth_fits(d)
    return [f for f in fits if f is not None]


def _square_from_jumps(jumps):
    if len(jumps) < 2:
        return None
    gaps = np.diff(sorted(jumps))
    half = float(np.median(gaps))
    if half <= 0 or np.max(np.abs(gaps - half)) > 0.05 * half + 0.01:
        return None
    return round(2 * half, 3), round(sorted(jumps)[0], 3)


_SHAPES = {
    "sigmoid": (lambda x, c, s: 1 / (1 + np.exp(-(x - c) / s)), "1 / (1 + np.exp(-(x - {c!r}) / {s!r}))",
                [(c, s) for c in np.arange(-60.0, 61, 3) for s in (0.5, 1, 2, 3, 5, 8, 12, 16, 20, 25)]),
    "tanh": (lambda x, c, s: np.tanh((x - c) / s), "np.tanh((x - {c!r}) / {s!r})",
             [(c, s) for c in np.arange(-60.0, 61, 3) for s in (0.5, 1, 2, 3, 5, 8, 12, 16, 20, 25)]),
    "gaussian": (lambda x, c, s: np.exp(-0.5 * ((x - c) / s) ** 2), "np.exp(-0.5 * ((x - {c!r}) / {s!r}) ** 2)",
                 [(c, s) for c in np.arange(-90.0, 91, 2) for s in (2, 3, 4, 6, 8, 11, 15, 20, 25, 32)]),
    "sin": (lambda x, c, s: np.sin(2 * np.pi * (x - c) / s), "np.sin(2 * np.pi * (x - {c!r}) / {s!r})",
            [(c, p) for p in np.geomspace(4, 110, 160) for c in np.linspace(0, p, 8, endpoint=False)]),
}
_GRIDS: dict = {}


def _shape_grid(name: str, x: np.ndarray) -> np.ndarray:
    key = (name, len(x), float(x[0]), float(x[-1]))
    if key not in _GRIDS:
        fn, _, grid = _SHAPES[name]
        with np.errstate(all="ignore"):
            _GRIDS[key] = np.stack([fn(x, c, s) for c, s in grid])
    return _GRIDS[key]


def _smooth_fits(d: _Data) -> list[Fit]:
    """sigmoid, tanh, gaussian, sin: coarse grids over native parameters (cached per sample
    grid); the family whose grid fits best is refined by ``least_squares``."""
    from scipy.optimize import least_squares

    x = d.x
    out, starts = [], []
    with np.errstate(all="ignore"):
        for name, (fn, code, grid) in _SHAPES.items():
            G = _shape_grid(name, x)
            Gm = G[:, d.mask]
            yc = d.ym - d.ym.mean()
            gc = Gm - Gm.mean(axis=1, keepdims=True)
            var = np.sum(gc ** 2, axis=1)
            sse = np.sum(yc ** 2) - np.where(var > 1e-300, (gc @ yc) ** 2 / np.where(var > 1e-300, var, 1), 0)
            i = int(np.argmin(sse))
            c0, s0 = grid[i]
            fit = _lstsq(d, [G[i]], [code.format(c=float(c0), s=float(s0))], 2)
            if fit is not None:
                out.append(fit)
                starts.append((fit.bic, name, c0, s0))
        if not starts:
            return out
        _, name, c0, s0 = min(starts)
        fn, code, _ = _SHAPES[name]

        def resid(p):
            return p[0] * fn(x[d.mask], p[2], p[3]) + p[1] - d.ym

        A = np.column_stack([fn(x[d.mask], c0, s0), np.ones(d.n)])
        ab, *_ = np.linalg.lstsq(A, d.ym, rcond=None)
        try:
            r = least_squares(resid, [ab[0], ab[1], c0, s0], method="lm", max_nfev=300)
            c1, s1 = float(r.x[2]), float(r.x[3])
            if np.isfinite(c1) and np.isfinite(s1) and s1 != 0:
                refined = _lstsq(d, [fn(x, c1, s1)], [code.format(c=c1, s=s1)], 2)
                if refined is not None:
                    out.append(refined)
        except (ValueError, np.linalg.LinAlgError):
            pass
    return out


def _composable_features(d: _Data, jumps) -> list[tuple[np.ndarray, str, int]]:
    x = d.x
    feats = [(np.maximum(x, 0), "np.maximum(x, 0)", 0)]
    for s in (1.0, 2.0, 5.0, 10.0, 20.0):
        feats.append((np.floor(x / s), f"np.floor(x / {s!r})", 1))
        feats.append((np.ceil(x / s), f"np.ceil(x / {s!r})", 1))
    for t in jumps:
        feats.append(((x >= t).astype(float), f"np.where(x >= {t!r}, 1.0, 0.0)", 1))
    for i, lo in enumerate(jumps):
        for hi in jumps[i + 1:]:
            feats.append((((x >= lo) & (x <= hi)).astype(float), f"np.where((x >= {lo!r}) & (x <= {hi!r}), 1.0, 0.0)", 2))
    sq = _square_from_jumps(jumps)
    if sq:
        p, c = sq
        feats.append((np.where(np.sin(2 * np.pi * (x - c) / p) >= 0, 1.0, -1.0),
                      f"np.where(np.sin(2 * np.pi * (x - {c!r}) / {p!r}) >= 0, 1.0, -1.0)", 2))
    return feats


def _composition_fits(d: _Data, jumps) -> list[Fit]:
    x = d.x
    xs = [x, x ** 2, x ** 3]
    xc = ["x", "x**2", "x**3"]
    fits = [_lstsq(d, [x ** p for p in range(1, 7)], [f"x**{p}" for p in range(1, 7)], 0)]
    feats = _composable_features(d, jumps)
    with np.errstate(all="ignore"):
        for g, gc, k in feats:  # polynomial (deg <= 3) with a feature: sum or product
            fits.append(_lstsq(d, xs + [g] + [g * p for p in xs], xc + [gc] + [f"({gc}) * {c}" for c in xc], k))
        for i, (g1, c1, k1) in enumerate(feats):
            for g2, c2, k2 in feats[i + 1:]:
                fits.append(_lstsq(d, [g1, g2, g1 * g2], [c1, c2, f"({c1}) * ({c2})"], k1 + k2))
    return [f for f in fits if f is not None]


def _best(d: _Data, jumps) -> Fit:
    fits = _atomic_fits(d, jumps) + _composition_fits(d, jumps)
    return min(fits, key=lambda f: f.bic)


def _runs(flags: np.ndarray, max_gap: int = 2) -> list[tuple[int, int]]:
    runs, start, gap = [], None, 0
    for i, f in enumerate(flags):
        if f:
            if start is None:
                start = i
            end, gap = i, 0
        elif start is not None:
            gap += 1
            if gap > max_gap:
                runs.append((start, end))
                start, gap = None, 0
    if start is not None:
        runs.append((start, end))
    return runs


def _interval_of_run(x: np.ndarray, a: int, b: int) -> list:
    lo = None if a == 0 else float(x[a] - 0.25)
    hi = None if b == len(x) - 1 else float(x[b] + 0.25)
    return [lo, hi]


def _noise_only_on_an_interval(x, Y, mask):
    """Corruption shows as per-call noise on one interval of an otherwise repeatable function:
    the points whose repeated calls differ, when they form one run that is not everything."""
    spread = np.where(mask, np.ptp(np.where(np.isfinite(Y), Y, 0.0), axis=0), 0.0)
    scale = np.abs(np.where(mask, Y[0], 0.0)) + 1.0
    varying = mask & (spread > 1e-9 * scale)  # repeated calls differ (beyond float rounding)
    n_var = int(varying.sum())
    if n_var < 4 or n_var > 0.97 * int(mask.sum()):
        return None, None, None
    runs = _runs(varying, max_gap=3)
    a, b = max(runs, key=lambda ab: ab[1] - ab[0])
    span = int(mask[a:b + 1].sum())
    if int(varying[a:b + 1].sum()) < max(0.9 * n_var, 0.97 * span) or b - a + 1 < 4 or span > 0.97 * int(mask.sum()):
        return None, None, None  # not one dense run of noise on part of the domain
    inside = np.zeros_like(mask)
    inside[a:b + 1] = True
    return _interval_of_run(x, a, b), None, inside


def _residual_interval(x, y, mask, sd, d, fit, jumps):
    """A long run of large residuals on which the function is nearly constant: report it as
    corrupted and refit without it."""
    r = np.where(mask, y - fit.pred, 0.0)
    scale = 1.4826 * float(np.median(np.abs(r[mask])))
    thr = max(5 * scale, 4 * sd, 1e-6 * float(np.sqrt(np.mean(d.ym ** 2))), 1e-9)
    runs = [(a, b) for a, b in _runs(mask & (np.abs(r) > thr)) if b - a + 1 >= 4]
    if not runs:
        return None, None, fit
    a, b = max(runs, key=lambda ab: ab[1] - ab[0])
    inside = np.zeros_like(mask)
    inside[a:b + 1] = True
    yr = y[inside & mask]
    if not yr.size or float(np.std(yr)) >= 0.5 + 0.02 * abs(float(np.mean(yr))):
        return None, None, fit
    d2 = _Data(x, y, mask & ~inside, sd)
    fit2 = _best(d2, [j for j in jumps if not (x[a] - 0.5 <= j <= x[b] + 0.5)])
    return _interval_of_run(x, a, b), float(np.mean(yr)), fit2


def interpret_numeric(box: Callable) -> dict:
    """A submission entry (``code``, ``interval``, ``description``, ``calls``) for one numeric function."""
    x = np.linspace(F.GRID_LO, F.GRID_HI, N_SAMPLES)
    calls = [0]

    def counted(inputs):
        calls[0] += len(inputs)
        return box(list(map(float, inputs)))

    Y = np.array([[_num(v) for v in counted(x)] for _ in range(REPEATS)])
    mask = np.all(np.isfinite(Y), axis=0)
    y = np.where(mask, np.nanmean(np.where(np.isfinite(Y), Y, 0), axis=0), np.nan)
    sd = float(np.median(np.std(Y[:, mask], axis=0))) if mask.any() else 0.0
    if not mask.any():
        return {"code": "def f(x):\n    return float('nan')\n", "interval": None,
                "description": "undefined everywhere sampled", "calls": calls[0]}
    interval, mu, inside = _noise_only_on_an_interval(x, Y, mask)
    if interval is not None:  # noiseless outside, noisy inside: fit the function outside only
        mu = float(np.mean(y[inside & mask]))
        keep = mask & ~inside
        d = _Data(x, y, keep, float(np.median(np.std(Y[:, keep], axis=0))) if keep.any() else 0.0)
        fit = _best(d, _jumps(counted, d)) if keep.sum() >= 8 else _lstsq(d, [], [], 0)
    else:
        d = _Data(x, y, mask, sd)
        jumps = _jumps(counted, d)
        fit = _best(d, jumps)
        interval, mu, fit = _residual_interval(x, y, mask, sd, d, fit, jumps)
    body = f"    y = {fit.code}\n"
    if interval is not None:
        cond = " and ".join(c for c in ((f"x >= {interval[0]!r}" if interval[0] is not None else ""),
                                        (f"x <= {interval[1]!r}" if interval[1] is not None else "")) if c)
        body += f"    if {cond}:\n        y = {mu!r}\n"
    code = f"import numpy as np\n\n\ndef f(x):\n    x = float(x)\n{body}    return float(y)\n"
    desc = f"best fit (BIC) y = {fit.code}" + (f"; nearly constant {mu:.3g} on {interval}" if interval else "")
    return {"code": code, "interval": interval, "description": desc[:2000], "calls": calls[0]}


# =========================================================================== strings
PROBES = ("apple", "banana", "kitten", "zebra", "xylophone", "queen", "python", "hello", "ocean", "jumpy",
          "abcdefghijklmnopqrstuvwxyz", "a", "ab")


def _atom(op, **params):
    return {"kind": "atomic", "op": op, "params": params}


def _instances() -> list[dict]:
    out = [_atom(op) for op in ("reverse", "uppercase", "capitalize", "double_letters", "sort_letters",
                                "remove_vowels", "alternate_case", "swap_first_last", "mirror", "successor_chain")]
    out += [_atom("repeat", n=n) for n in (2, 3)]
    out += [_atom("take_first", k=k) for k in range(2, 6)]
    out += [_atom(op, k=k) for op in ("drop_first", "drop_last", "rotate_left") for k in (1, 2, 3)]
    out += [_atom(op, k=k) for op in ("shift_last", "shift_first") for k in (1, 2, -1)]
    out += [_atom("caesar", k=k) for k in range(1, 26)]
    out += [_atom("interleave", char=c) for c in "-_.*|"]
    out += [_atom("remove_char", char=c) for c in F.ALPHABET]
    return out


def _inverse(spec) -> Callable[[str], str | None] | None:
    op, p = spec["op"], spec.get("params", {})
    if op in ("reverse", "swap_first_last"):
        return F.string_callable(spec)
    if op in ("uppercase", "alternate_case", "capitalize"):
        return lambda s: s.lower()
    if op == "caesar":
        return F.string_callable(_atom("caesar", k=-p["k"]))
    if op in ("shift_last", "shift_first"):
        return F.string_callable(_atom(op, k=-p["k"]))
    if op == "rotate_left":
        return lambda s: (s[-(p["k"] % len(s)):] + s[:-(p["k"] % len(s))]) if s and p["k"] % len(s) else s
    if op == "double_letters":
        return lambda s: s[::2]
    if op == "interleave":
        return lambda s: s[::2]
    if op == "mirror":
        return lambda s: s[: len(s) // 2]
    if op == "repeat":
        return lambda s: s[: len(s) // p["n"]]
    return None


def _infer(ins: list[str], outs: list[str]) -> list[dict]:
    """replace / append / prepend instances consistent with every (in, out) pair."""
    found = []
    if all(o.startswith(i) for i, o in zip(ins, outs)):
        tails = {o[len(i):] for i, o in zip(ins, outs)}
        if len(tails) == 1 and next(iter(tails)):
            found.append(_atom("append", text=next(iter(tails))))
    if all(o.endswith(i) for i, o in zip(ins, outs)):
        heads = {o[: len(o) - len(i)] for i, o in zip(ins, outs)}
        if len(heads) == 1 and next(iter(heads)):
            found.append(_atom("prepend", text=next(iter(heads))))
    if all(len(i) == len(o) for i, o in zip(ins, outs)):
        pairs = {(a, b) for i, o in zip(ins, outs) for a, b in zip(i, o) if a != b}
        if len(pairs) == 1:
            old, new = next(iter(pairs))
            found.append(_atom("replace", old=old, new=new))
    return [s for s in found if [F.string_call(s, i) for i in ins] == outs]


def interpret_string(box: Callable) -> dict:
    """A submission entry for one string function: the first atomic operation or composition
    (atomic first) that reproduces every probe."""
    probes = list(PROBES)
    targets = list(box(probes))
    insts = _instances()
    funcs = [F.string_callable(s) for s in insts]

    def matches(fn, ins=probes, outs=targets):
        for i, o in zip(ins, outs):
            try:
                if fn(i) != o:
                    return False
            except (IndexError, ValueError):
                return False
        return True

    spec = None
    for s, fn in zip(insts, funcs):
        if matches(fn):
            spec = s
            break
    if spec is None:
        inferred = _infer(probes, targets)
        spec = inferred[0] if inferred else None
    if spec is None:
        for si, fi in zip(insts, funcs):
            try:
                mids = [fi(p) for p in probes]
            except (IndexError, ValueError):
                continue
            for so, fo in zip(insts, funcs):
                if matches(fo, mids, targets):
                    spec = {"kind": "compose", "inner": si, "outer": so}
                    break
            if spec is None:
                inferred = _infer(mids, targets)
                if inferred:
                    spec = {"kind": "compose", "inner": si, "outer": inferred[0]}
            if spec is not None:
                break
    if spec is None:  # inner replace/append/prepend under an invertible outer operation
        for so in insts:
            inv = _inverse(so)
            if inv is None:
                continue
            pre = [inv(t) for t in targets]
            for si in _infer(probes, pre):
                cand = {"kind": "compose", "inner": si, "outer": so}
                if matches(F.string_callable(cand)):
                    spec = cand
                    break
            if spec is not None:
                break
    if spec is None:  # affix/replace on both sides
        for si in _infer(probes, [t[:len(p)] if len(t) >= len(p) else t for p, t in zip(probes, targets)]):
            mids = [F.string_call(si, p) for p in probes]
            for so in _infer(mids, targets):
                spec = {"kind": "compose", "inner": si, "outer": so}
                break
            if spec:
                break
    if spec is None:
        return {"code": "def f(x):\n    return x\n", "description": "no operation in the search space fits; identity",
                "calls": len(probes)}
    return {"code": F.string_code(spec), "description": F.string_family(spec), "calls": len(probes)}


# =========================================================================== the run
def run_baseline(suite, ids: list[str] | None = None, seed: int = 0, progress=None) -> list[dict]:
    """Interpret every function (or ``ids``) through black boxes; returns submission entries."""
    ids = list(ids) if ids is not None else list(suite.functions)
    entries = []
    for n, fid in enumerate(ids):
        fn = suite.get(fid)
        box = suite.black_box(fid, seed=seed + n)
        entry = interpret_numeric(box) if fn.config == "numeric" else interpret_string(box)
        if fn.config != "numeric":
            entry.pop("interval", None)
        entries.append({"id": fid, **entry})
        if progress:
            progress(n + 1, len(ids))
    return entries
