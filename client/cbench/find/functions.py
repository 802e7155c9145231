"""The FIND function families: a JSON spec in, a callable (and its ground-truth code) out.

A function of the suite is a *spec*, a small JSON tree (stored in the dataset's ``spec``
column). The same module evaluates specs for the builder (which samples them and computes the
test sets) and for the black-box runner (which hides them), so both agree by construction.

Numeric specs (``x`` is a float64 numpy array; undefined points give NaN)::

    {"kind": "atomic", "family": "sin", "params": {...}, "a": 3, "b": -2}   # a * g(x; params) + b
    {"kind": "polynomial", "coef": [c0, c1, ...]}                             # sum c_i x^i
    {"kind": "compose", "op": "+" | "*", "left": spec, "right": spec}
    {"kind": "noisy", "base": spec, "noise": {"dist": "normal", "scale": s}}  # + fresh noise per call
    {"kind": "corrupted", "base": spec, "interval": [lo, hi], "mu": m, "sigma": s}
    {"kind": "mlp", "key": "n0851", "target": spec}                          # a trained 1-H-1 ReLU MLP

String specs::

    {"kind": "atomic", "op": "replace", "params": {"old": "a", "new": "b"}}
    {"kind": "compose", "inner": spec, "outer": spec}                         # outer(inner(x))
"""

from __future__ import annotations

import math
from typing import Callable, Mapping

import numpy as np

# --------------------------------------------------------------------------- numeric families
#: the test grid of every numeric function: [-128, 128] in steps of 0.25
GRID_LO, GRID_HI, GRID_N = -128.0, 128.0, 1025


def test_grid() -> np.ndarray:
    return np.linspace(GRID_LO, GRID_HI, GRID_N)


def _where_defined(cond, value):
    with np.errstate(all="ignore"):
        return np.where(cond, value, np.nan)


def _g(family: str, x: np.ndarray, p: Mapping) -> np.ndarray:
    with np.errstate(all="ignore"):
        if family == "linear":
            return x
        if family == "absolute":
            return np.abs(x)
        if family == "relu":
            return np.maximum(x, 0.0)
        if family == "leaky_relu":
            return np.where(x > 0, x, p["alpha"] * x)
        if family == "sigmoid":
            return 1.0 / (1.0 + np.exp(-(x - p["c"]) / p["s"]))
        if family == "tanh":
            return np.tanh((x - p["c"]) / p["s"])
        if family == "sin":
            return np.sin(2 * np.pi * (x - p["c"]) / p["p"])
        if family == "gaussian":
            return np.exp(-0.5 * ((x - p["c"]) / p["w"]) ** 2)
        if family == "exp":
            return np.exp(x / p["s"])
        if family == "log":
            return _where_defined(x > 0, np.log(np.abs(x)))
        if family == "sqrt":
            return _where_defined(x >= 0, np.sqrt(np.abs(x)))
        if family == "reciprocal":
            return _where_defined(x != 0, 1.0 / x)
        if family == "rational":
            return _where_defined(x != -p["c"], x / (x + p["c"]))
        if family == "constant":
            return np.zeros_like(x)
        if family == "step":
            return (x >= p["t"]).astype(float)
        if family == "floor":
            return np.floor(x / p["s"])
        if family == "ceil":
            return np.ceil(x / p["s"])
        if family == "rectangle":
            return ((x >= p["lo"]) & (x <= p["hi"])).astype(float)
        if family == "square_wave":
            return np.where(np.sin(2 * np.pi * (x - p["c"]) / p["p"]) >= 0, 1.0, -1.0)
    raise ValueError(f"unknown numeric family {family!r}")


def _g_code(family: str, p: Mapping) -> str:
    """numpy code for g(x) (``x`` an array)."""
    return {
        "linear": "x",
        "absolute": "np.abs(x)",
        "relu": "np.maximum(x, 0)",
        "leaky_relu": f"np.where(x > 0, x, {p.get('alpha')!r} * x)",
        "sigmoid": f"1 / (1 + np.exp(-(x - {p.get('c')!r}) / {p.get('s')!r}))",
        "tanh": f"np.tanh((x - {p.get('c')!r}) / {p.get('s')!r})",
        "sin": f"np.sin(2 * np.pi * (x - {p.get('c')!r}) / {p.get('p')!r})",
        "gaussian": f"np.exp(-0.5 * ((x - {p.get('c')!r}) / {p.get('w')!r}) ** 2)",
        "exp": f"np.exp(x / {p.get('s')!r})",
        "log": "np.where(x > 0, np.log(np.abs(x)), np.nan)",
        "sqrt": "np.where(x >= 0, np.sqrt(np.abs(x)), np.nan)",
        "reciprocal": "np.where(x != 0, 1 / x, np.nan)",
        "rational": f"np.where(x != {-p.get('c', 0)!r}, x / (x + {p.get('c')!r}), np.nan)",
        "constant": "0 * x",
        "step": f"np.where(x >= {p.get('t')!r}, 1.0, 0.0)",
        "floor": f"np.floor(x / {p.get('s')!r})",
        "ceil": f"np.ceil(x / {p.get('s')!r})",
        "rectangle": f"np.where((x >= {p.get('lo')!r}) & (x <= {p.get('hi')!r}), 1.0, 0.0)",
        "square_wave": f"np.where(np.sin(2 * np.pi * (x - {p.get('c')!r}) / {p.get('p')!r}) >= 0, 1.0, -1.0)",
    }[family]


#: every atomic family; the last four have points where they are undefined
NUMERIC_FAMILIES = ("linear", "polynomial", "absolute", "relu", "leaky_relu", "sigmoid", "tanh", "sin",
                    "gaussian", "exp", "constant", "step", "floor", "ceil", "rectangle", "square_wave",
                    "log", "sqrt", "reciprocal", "rational")
#: the families compositions are drawn from (the paper's appendix B)
COMPOSABLE = ("linear", "polynomial", "step", "relu", "constant", "ceil", "floor", "rectangle", "square_wave")

DOMAINS = {"log": "x > 0", "sqrt": "x >= 0", "reciprocal": "x != 0"}


def mlp_forward(weights: Mapping[str, np.ndarray], key: str, x: np.ndarray) -> np.ndarray:
    w1 = np.asarray(weights[f"{key}.w1"], dtype=np.float64)  # (H, 1)
    b1 = np.asarray(weights[f"{key}.b1"], dtype=np.float64)  # (H,)
    w2 = np.asarray(weights[f"{key}.w2"], dtype=np.float64)  # (1, H)
    b2 = np.asarray(weights[f"{key}.b2"], dtype=np.float64)  # (1,)
    h = np.maximum(np.outer(x, w1[:, 0]) + b1, 0.0)
    return h @ w2[0] + b2[0]


def numeric_mean(spec: Mapping, x, weights: Mapping | None = None) -> np.ndarray:
    """The noise-free value of a numeric spec at ``x`` (what code submissions are scored against)."""
    x = np.asarray(x, dtype=np.float64)
    kind = spec["kind"]
    if kind == "atomic":
        return spec["a"] * _g(spec["family"], x, spec.get("params", {})) + spec["b"]
    if kind == "polynomial":
        return np.polynomial.polynomial.polyval(x, spec["coef"])
    if kind == "compose":
        left, right = numeric_mean(spec["left"], x, weights), numeric_mean(spec["right"], x, weights)
        return left + right if spec["op"] == "+" else left * right
    if kind == "noisy":
        return numeric_mean(spec["base"], x, weights)
    if kind == "corrupted":
        base = numeric_mean(spec["base"], x, weights)
        return np.where(in_interval(x, spec["interval"]), spec["mu"], base)
    if kind == "mlp":
        if weights is None:
            raise ValueError("an MLP function needs the suite's weights")
        return mlp_forward(weights, spec["key"], x)
    raise ValueError(f"unknown numeric spec kind {kind!r}")


def numeric_call(spec: Mapping, x, rng: np.random.Generator, weights: Mapping | None = None) -> np.ndarray:
    """One black-box call: the mean value plus this call's noise (fresh draws every call, as in
    the paper: observation noise for noisy functions, N(mu, sigma) on a corrupted interval)."""
    x = np.asarray(x, dtype=np.float64)
    kind = spec["kind"]
    if kind == "noisy":
        y = numeric_call(spec["base"], x, rng, weights)
        n = spec["noise"]
        if n["dist"] == "normal":
            return y + rng.normal(0.0, n["scale"], size=x.shape)
        if n["dist"] == "uniform":
            return y + rng.uniform(-n["scale"], n["scale"], size=x.shape)
        if n["dist"] == "poisson":
            return y + n["scale"] * rng.poisson(n["lam"], size=x.shape)
        raise ValueError(f"unknown noise {n['dist']!r}")
    if kind == "corrupted":
        base = numeric_call(spec["base"], x, rng, weights)
        return np.where(in_interval(x, spec["interval"]), rng.normal(spec["mu"], spec["sigma"], size=x.shape), base)
    if kind == "compose":
        left, right = numeric_call(spec["left"], x, rng, weights), numeric_call(spec["right"], x, rng, weights)
        return left + right if spec["op"] == "+" else left * right
    return numeric_mean(spec, x, weights)


def in_interval(x: np.ndarray, interval) -> np.ndarray:
    lo, hi = interval
    lo = -math.inf if lo is None else lo
    hi = math.inf if hi is None else hi
    return (x >= lo) & (x <= hi)


def numeric_code(spec: Mapping) -> str:
    """The ground-truth implementation as a numpy expression in ``x`` (noise left out)."""
    kind = spec["kind"]
    if kind == "atomic":
        return f"{spec['a']!r} * ({_g_code(spec['family'], spec.get('params', {}))}) + {spec['b']!r}"
    if kind == "polynomial":
        terms = [f"{c!r} * x**{i}" if i else f"{c!r}" for i, c in enumerate(spec["coef"])]
        return "(" + " + ".join(reversed(terms)) + ")"
    if kind == "compose":
        return f"({numeric_code(spec['left'])}) {spec['op']} ({numeric_code(spec['right'])})"
    if kind == "noisy":
        n = spec["noise"]
        what = {"normal": f"rng.normal(0, {n['scale']!r})", "uniform": f"rng.uniform(-{n['scale']!r}, {n['scale']!r})",
                "poisson": f"{n.get('scale')!r} * rng.poisson({n.get('lam')!r})"}[n["dist"]]
        return f"{numeric_code(spec['base'])}  # + {what} per call"
    if kind == "corrupted":
        lo, hi = spec["interval"]
        cond = " & ".join(c for c in (f"(x >= {lo!r})" if lo is not None else "",
                                      f"(x <= {hi!r})" if hi is not None else "") if c)
        return f"np.where({cond}, {spec['mu']!r}, {numeric_code(spec['base'])})  # N(mu, {spec['sigma']!r}) per call"
    if kind == "mlp":
        return (f"relu(x * w1 + b1) @ w2 + b2  # 1-{spec.get('hidden', '?')}-1 ReLU MLP '{spec['key']}' "
                f"trained on {numeric_code(spec['target'])}")
    raise ValueError(f"unknown numeric spec kind {kind!r}")


def numeric_family(spec: Mapping) -> str:
    kind = spec["kind"]
    if kind == "atomic":
        return spec["family"]
    if kind == "polynomial":
        return "polynomial"
    if kind == "compose":
        return f"{numeric_family(spec['left'])}{spec['op']}{numeric_family(spec['right'])}"
    if kind in ("noisy", "corrupted"):
        return numeric_family(spec["base"])
    return numeric_family(spec["target"])


def numeric_domain(spec: Mapping) -> str:
    fam = spec.get("family") if spec["kind"] == "atomic" else None
    if fam == "rational":
        return f"x != {-spec['params']['c']!r}"
    if fam in DOMAINS:
        return DOMAINS[fam]
    for sub in ("base", "target"):
        if sub in spec:
            return numeric_domain(spec[sub])
    return "all real numbers"


# --------------------------------------------------------------------------- string operations
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
VOWELS = set("aeiou")


def _shift(c: str, k: int) -> str:
    if c in ALPHABET:
        return ALPHABET[(ALPHABET.index(c) + k) % 26]
    if c.lower() in ALPHABET:
        return ALPHABET[(ALPHABET.index(c.lower()) + k) % 26].upper()
    return c


def _op(op: str, p: Mapping) -> Callable[[str], str]:
    if op == "reverse":
        return lambda s: s[::-1]
    if op == "uppercase":
        return lambda s: s.upper()
    if op == "capitalize":
        return lambda s: s[:1].upper() + s[1:]
    if op == "replace":
        return lambda s: s.replace(p["old"], p["new"])
    if op == "remove_char":
        return lambda s: s.replace(p["char"], "")
    if op == "append":
        return lambda s: s + p["text"]
    if op == "prepend":
        return lambda s: p["text"] + s
    if op == "double_letters":
        return lambda s: "".join(c + c for c in s)
    if op == "repeat":
        return lambda s: s * p["n"]
    if op == "take_first":
        return lambda s: s[: p["k"]]
    if op == "drop_first":
        return lambda s: s[p["k"]:]
    if op == "drop_last":
        return lambda s: s[: -p["k"]] if len(s) > p["k"] else ""
    if op == "rotate_left":
        return lambda s: s[p["k"] % len(s):] + s[: p["k"] % len(s)] if s else s
    if op == "sort_letters":
        return lambda s: "".join(sorted(s))
    if op == "remove_vowels":
        return lambda s: "".join(c for c in s if c.lower() not in VOWELS)
    if op == "interleave":
        return lambda s: p["char"].join(s)
    if op == "alternate_case":
        return lambda s: "".join(c.upper() if i % 2 == 0 else c.lower() for i, c in enumerate(s))
    # copycat-style operations (Hofstadter et al. 1995): successor/predecessor letter moves
    if op == "shift_last":
        return lambda s: s[:-1] + _shift(s[-1], p["k"]) if s else s
    if op == "shift_first":
        return lambda s: _shift(s[0], p["k"]) + s[1:] if s else s
    if op == "caesar":
        return lambda s: "".join(_shift(c, p["k"]) for c in s)
    if op == "swap_first_last":
        return lambda s: s[-1] + s[1:-1] + s[0] if len(s) > 1 else s
    if op == "mirror":
        return lambda s: s + s[::-1]
    if op == "successor_chain":
        return lambda s: s + _shift(s[-1], 1) if s else s
    raise ValueError(f"unknown string operation {op!r}")


#: atomic string operations and copycat-style ones, with their parameter names
STRING_OPS = ("reverse", "uppercase", "capitalize", "replace", "remove_char", "append", "prepend",
              "double_letters", "repeat", "take_first", "drop_first", "drop_last", "rotate_left",
              "sort_letters", "remove_vowels", "interleave", "alternate_case")
COPYCAT_OPS = ("shift_last", "shift_first", "caesar", "swap_first_last", "mirror", "successor_chain")


def string_callable(spec: Mapping) -> Callable[[str], str]:
    if spec["kind"] == "atomic":
        return _op(spec["op"], spec.get("params", {}))
    if spec["kind"] == "compose":
        inner, outer = string_callable(spec["inner"]), string_callable(spec["outer"])
        return lambda s: outer(inner(s))
    raise ValueError(f"unknown string spec kind {spec['kind']!r}")


def string_call(spec: Mapping, s: str) -> str:
    return string_callable(spec)(s)


_STR_CODE = {
    "reverse": "x[::-1]", "uppercase": "x.upper()", "capitalize": "x[:1].upper() + x[1:]",
    "replace": "x.replace({old!r}, {new!r})", "remove_char": "x.replace({char!r}, '')",
    "append": "x + {text!r}", "prepend": "{text!r} + x", "double_letters": "''.join(c + c for c in x)",
    "repeat": "x * {n!r}", "take_first": "x[:{k!r}]", "drop_first": "x[{k!r}:]",
    "drop_last": "(x[:-{k!r}] if len(x) > {k!r} else '')",
    "rotate_left": "(x[{k!r} % len(x):] + x[:{k!r} % len(x)] if x else x)",
    "sort_letters": "''.join(sorted(x))", "remove_vowels": "''.join(c for c in x if c.lower() not in 'aeiou')",
    "interleave": "{char!r}.join(x)",
    "alternate_case": "''.join(c.upper() if i % 2 == 0 else c.lower() for i, c in enumerate(x))",
    "shift_last": "(x[:-1] + shift(x[-1], {k!r}) if x else x)",
    "shift_first": "(shift(x[0], {k!r}) + x[1:] if x else x)",
    "caesar": "''.join(shift(c, {k!r}) for c in x)",
    "swap_first_last": "(x[-1] + x[1:-1] + x[0] if len(x) > 1 else x)",
    "mirror": "x + x[::-1]", "successor_chain": "(x + shift(x[-1], 1) if x else x)",
}

SHIFT_CODE = ("def shift(c, k):\n"
              "    a = 'abcdefghijklmnopqrstuvwxyz'\n"
              "    if c.lower() not in a:\n"
              "        return c\n"
              "    out = a[(a.index(c.lower()) + k) % 26]\n"
              "    return out.upper() if c.isupper() else out\n")


def string_code(spec: Mapping) -> str:
    """The ground truth as a Python function ``f(x: str) -> str``."""
    steps = []

    def walk(s):
        if s["kind"] == "compose":
            walk(s["inner"])
            walk(s["outer"])
        else:
            steps.append(_STR_CODE[s["op"]].format(**s.get("params", {})))

    walk(spec)
    body = "".join(f"    x = {e}\n" for e in steps)
    helper = SHIFT_CODE + "\n\n" if "shift(" in body else ""
    return f"{helper}def f(x):\n{body}    return x\n"


def string_family(spec: Mapping) -> str:
    if spec["kind"] == "compose":
        return f"{string_family(spec['outer'])}({string_family(spec['inner'])})"
    return spec["op"]
