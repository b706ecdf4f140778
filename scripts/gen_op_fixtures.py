#!/usr/bin/env python3
"""Generate PyTorch reference fixtures for thunder-rs ltorch ops.

Run from the repository root (CPU only, takes a few seconds):

    python scripts/gen_op_fixtures.py

Needs torch, safetensors and numpy (e.g. ``pip install torch safetensors numpy``).

What it produces (the folder is wiped and regenerated from scratch every run;
running it twice gives byte-identical files):

* ``tests/fixtures/ops/<op>.safetensors`` -- one file per op.  Tensors are named
  ``c<i>.in<j>`` (inputs, in the program's parameter order) and ``c<i>.out<k>``
  (expected outputs, in return order), stored with their real dtypes.  0-d and
  zero-size tensors are stored as such.
* ``tests/fixtures/ops/manifest.json`` -- a JSON list with one object per case,
  one case per line::

      {"op": "add", "case": "c3", "file": "add.safetensors",
       "program": "def computation(a, b):\\n  # a: \\"cpu f32[2, 3]\\"\\n ...",
       "inputs": ["c3.in0", "c3.in1"], "outputs": ["c3.out0"],
       "dtype": "f32", "rtol": 1.3e-06, "atol": 1e-05, "equal_nan": false,
       "note": "..."}

  ``dtype`` is the dtype of the (first) output, which is what the tolerances
  are chosen for.  ``equal_nan`` is true when the expected output contains NaN
  (special-value cases, mean of an empty tensor): compare NaN == NaN there.
  Integer and bool outputs have rtol = atol = 0 (exact).

Each program is a one-op thunder program in the thunder-rs text format, e.g.::

    def computation(a, b):
      # a: "cpu f32[2, 3]"
      # b: "cpu f32[3]"
      t0 = ltorch.add(a, b)
      return (t0,)

The reference output is what PyTorch (CPU) computes for the same call.  Cases
for which PyTorch raises (e.g. ``neg`` of a bool tensor, ``mean`` of an int
tensor) are skipped and listed in the printed summary.

Inputs are deterministic: every op draws from its own ``torch.Generator``
seeded from a CRC32 of the op name (plus ``torch.manual_seed(0)`` globally),
so adding cases to one op does not change the data of another.
"""

import json
import operator
import os
import shutil
import sys
import zlib
from collections import OrderedDict, defaultdict

import torch
import torch.nn.functional as F

import sdpa_reference

try:
    from safetensors.torch import load_file, save_file
except ImportError:  # pragma: no cover
    sys.exit("safetensors is required: pip install safetensors")

torch.manual_seed(0)
torch.set_num_threads(1)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT_DIR = os.path.join(REPO, "tests", "fixtures", "ops")

# ----------------------------------------------------------------------------
# dtypes and tolerances
# ----------------------------------------------------------------------------
DTYPES = OrderedDict(
    [
        ("b8", torch.bool),
        ("u8", torch.uint8),
        ("i8", torch.int8),
        ("i16", torch.int16),
        ("i32", torch.int32),
        ("i64", torch.int64),
        ("f16", torch.float16),
        ("bf16", torch.bfloat16),
        ("f32", torch.float32),
        ("f64", torch.float64),
    ]
)
DTYPE_NAME = {v: k for k, v in DTYPES.items()}
ALL = list(DTYPES)
FLOATS = ["f16", "bf16", "f32", "f64"]
INTS = ["u8", "i8", "i16", "i32", "i64"]

# torch.testing.assert_close defaults
DEFAULT_TOL = {
    "f16": (1e-3, 1e-5),
    "bf16": (1.6e-2, 1e-5),
    "f32": (1.3e-6, 1e-5),
    "f64": (1e-7, 1e-7),
}
# Looser tolerances for low-precision ops that accumulate (reductions,
# matmul) or chain several roundings (softmax, gelu).  PyTorch CPU computes
# these in f32 and rounds once; an implementation that rounds intermediates
# to f16/bf16 (or sums in another order) can differ by ~1% relative, and by
# a few 1e-3 absolute where sums cancel to near zero.
LOOSE_TOL = {
    "accum": {"f16": (1e-2, 1e-2), "bf16": (1.6e-2, 1e-2)},
    "smooth": {"f16": (1e-2, 1e-3), "bf16": (1.6e-2, 1e-3)},
}


def tol_for(dt_name, loose=None):
    if dt_name not in DEFAULT_TOL:
        return 0.0, 0.0, False
    if loose and dt_name in LOOSE_TOL[loose]:
        r, a = LOOSE_TOL[loose][dt_name]
        return r, a, True
    r, a = DEFAULT_TOL[dt_name]
    return r, a, False


# ----------------------------------------------------------------------------
# literals in the program text
# ----------------------------------------------------------------------------
class DT:
    """A dtype literal: printed as dtypes.<name>, passed to torch as torch.dtype."""

    def __init__(self, name):
        self.name = name


class Device:
    """The cpu device literal."""


CPU = Device()


def fmt_lit(v):
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        assert v == v, v
        if abs(v) == float("inf"):
            return "inf" if v > 0 else "-inf"  # the trace text's infinity literals
        s = repr(v)
        assert "." in s or "e" in s, s
        return s
    if v is None:
        return "None"
    if isinstance(v, str):
        assert '"' not in v and "\\" not in v
        return '"' + v + '"'
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt_lit(x) for x in v) + "]"
    if isinstance(v, DT):
        return "dtypes." + v.name
    if isinstance(v, Device):
        return "devices.cpu"
    raise TypeError(v)


def resolve(v):
    if isinstance(v, DT):
        return DTYPES[v.name]
    if isinstance(v, Device):
        return "cpu"
    return v


def ttype(t):
    return "%s[%s]" % (DTYPE_NAME[t.dtype], ", ".join(str(d) for d in t.shape))


# ----------------------------------------------------------------------------
# deterministic inputs
# ----------------------------------------------------------------------------
class Gen:
    def __init__(self, op):
        self.g = torch.Generator().manual_seed(zlib.crc32(op.encode()))

    def rand(self, shape):
        return torch.rand(shape, generator=self.g, dtype=torch.float64)

    def randint(self, lo, hi, shape):  # inclusive
        return torch.randint(lo, hi + 1, shape, generator=self.g, dtype=torch.int64)

    def __call__(self, shape, dt, kind="any"):
        """kind: any | pos | nonzero | grid | pexp (pow exponent) | wide
        | unit (inside (-1, 1)) | ge1 (at least 1)"""
        shape = tuple(shape)
        dtype = DTYPES[dt]
        if dt == "b8":
            if kind in ("pos", "nonzero"):
                return torch.ones(shape, dtype=torch.bool)
            x = self.randint(0, 1, shape).to(torch.bool)
            if x.numel() >= 2 and bool((x == x.reshape(-1)[0]).all()):
                x.view(-1)[0] = ~x.view(-1)[0]  # always mix True and False
            return x
        if dt in INTS:
            lo = {
                "any": -5, "grid": -5, "wide": -5,
                "pos": 1, "nonzero": 1, "pexp": 0,
                "unit": -1, "ge1": 1,
            }[kind]
            hi = {"pos": 3, "pexp": 3, "unit": 1}.get(kind, 5)
            if dt == "u8":
                lo = max(lo, 0)
            x = self.randint(lo, hi, shape)
            if kind == "nonzero" and dt != "u8":
                x = x * (self.randint(0, 1, shape) * 2 - 1)
            return x.to(dtype)
        # floats
        u = self.rand(shape)
        if kind == "any" or kind == "pexp":
            x = u * 4 - 2
        elif kind == "wide":
            x = u * 12 - 6
        elif kind == "grid":  # multiples of 0.5 in [-2, 2]: ties for comparisons
            x = torch.round(u * 8 - 4) / 2
        elif kind == "pos":
            x = 0.5 + 1.5 * u
        elif kind == "unit":
            x = u * 1.9 - 0.95
        elif kind == "ge1":
            x = 1.0 + 3.0 * u
        elif kind == "nonzero":
            s = self.randint(0, 1, shape) * 2 - 1
            x = (0.5 + 1.5 * u) * s
        else:
            raise ValueError(kind)
        return x.to(dtype)


INF = float("inf")
NAN = float("nan")
SPECIAL = [0.0, -0.0, 1.0, -1.5, INF, -INF, NAN]
SPECIAL_A = [NAN, 1.0, INF, -INF, 0.0, -0.0, INF, 2.0]
SPECIAL_B = [1.0, NAN, INF, INF, -0.0, 0.0, -INF, 0.0]

# ----------------------------------------------------------------------------
# case collection
# ----------------------------------------------------------------------------
CASES = OrderedDict()  # op -> list of case dicts
TENSORS = OrderedDict()  # op -> {name: tensor}
SKIPS = defaultdict(list)  # op -> [str]


def sig(op, args):
    parts = []
    for a in args:
        parts.append(ttype(a) if isinstance(a, torch.Tensor) else fmt_lit(a))
    return "%s(%s)" % (op, ", ".join(parts))


def program(op, args, n_out=1):
    names = []
    call_args = []
    ann = []
    for a in args:
        if isinstance(a, torch.Tensor):
            n = "abcdefghijklmnopqrstuvwxyz"[len(names)]
            names.append(n)
            call_args.append(n)
            ann.append('  # %s: "cpu %s"' % (n, ttype(a)))
        else:
            call_args.append(fmt_lit(a))
    lines = ["def computation(%s):" % ", ".join(names)]
    lines += ann
    targets = ", ".join("t%d" % i for i in range(n_out))
    lines.append("  %s = ltorch.%s(%s)" % (targets, op, ", ".join(call_args)))
    lines.append("  return (%s,)" % targets)
    return "\n".join(lines) + "\n"


def case(op, args, ref, note="", loose=None, skip_key=None):
    """Add one case.  ``ref`` is called with the args (literals resolved)."""
    args = list(args)
    s = sig(op, args)
    try:
        out = ref(*[resolve(a) for a in args])
    except Exception as e:  # torch does not support this case
        msg = str(e).strip().splitlines()[0][:90] if str(e).strip() else type(e).__name__
        SKIPS[op].append("%s: %s: %s" % (skip_key or s, type(e).__name__, msg))
        return
    outs = out if isinstance(out, (tuple, list)) else (out,)
    cases = CASES.setdefault(op, [])
    tens = TENSORS.setdefault(op, OrderedDict())
    cid = "c%d" % len(cases)
    in_names, out_names = [], []
    for a in args:
        if isinstance(a, torch.Tensor):
            n = "%s.in%d" % (cid, len(in_names))
            tens[n] = a.detach().clone().contiguous()
            in_names.append(n)
    equal_nan = False
    for o in outs:
        n = "%s.out%d" % (cid, len(out_names))
        o = o.detach().clone().contiguous()
        tens[n] = o
        out_names.append(n)
        if o.dtype.is_floating_point and bool(torch.isnan(o).any()):
            equal_nan = True
    odt = DTYPE_NAME[outs[0].dtype]
    rtol, atol, was_loose = tol_for(odt, loose)
    full_note = "%s -> %s" % (s, ", ".join(ttype(o) for o in outs))
    if note:
        full_note = note + "; " + full_note
    if was_loose:
        full_note += "; loose low-precision tolerance (%s)" % (
            "accumulation in f16/bf16" if loose == "accum" else "several roundings in f16/bf16"
        )
    if equal_nan:
        full_note += "; expected output contains NaN (equal_nan)"
    cases.append(
        OrderedDict(
            [
                ("op", op),
                ("case", cid),
                ("file", op + ".safetensors"),
                ("program", program(op, args, len(outs))),
                ("inputs", in_names),
                ("outputs", out_names),
                ("dtype", odt),
                ("rtol", rtol),
                ("atol", atol),
                ("equal_nan", equal_nan),
                ("note", full_note),
            ]
        )
    )


# ----------------------------------------------------------------------------
# unary elementwise
# ----------------------------------------------------------------------------
UNARY = OrderedDict(
    [
        ("neg", (torch.neg, "any")),
        ("abs", (torch.abs, "any")),
        ("exp", (torch.exp, "any")),
        ("log", (torch.log, "pos")),
        ("sqrt", (torch.sqrt, "pos")),
        ("rsqrt", (torch.rsqrt, "pos")),
        ("tanh", (torch.tanh, "any")),
        ("sin", (torch.sin, "any")),
        ("cos", (torch.cos, "any")),
        ("erf", (torch.erf, "any")),
        ("reciprocal", (torch.reciprocal, "nonzero")),
        ("exp2", (torch.exp2, "any")),
        ("expm1", (torch.expm1, "any")),
        ("log1p", (torch.log1p, "pos")),
        ("log2", (torch.log2, "pos")),
        ("log10", (torch.log10, "pos")),
        ("tan", (torch.tan, "any")),
        ("asin", (torch.asin, "unit")),
        ("acos", (torch.acos, "unit")),
        ("atan", (torch.atan, "wide")),
        ("sinh", (torch.sinh, "any")),
        ("cosh", (torch.cosh, "any")),
        ("asinh", (torch.asinh, "wide")),
        ("acosh", (torch.acosh, "ge1")),
        ("atanh", (torch.atanh, "unit")),
        ("erfc", (torch.erfc, "any")),
        ("erfinv", (torch.erfinv, "unit")),
        ("lgamma", (torch.lgamma, "wide")),
        ("digamma", (torch.digamma, "wide")),
        ("floor", (torch.floor, "wide")),
        ("ceil", (torch.ceil, "wide")),
        ("round", (torch.round, "wide")),
        ("trunc", (torch.trunc, "wide")),
        ("sign", (torch.sign, "any")),
        ("signbit", (torch.signbit, "any")),
        ("isnan", (torch.isnan, "any")),
        ("isfinite", (torch.isfinite, "any")),
        ("logical_not", (torch.logical_not, "grid")),
        ("bitwise_not", (torch.bitwise_not, "any")),
        ("relu", (torch.relu, "any")),
    ]
)


def gen_unary():
    for op, (fn, kind) in UNARY.items():
        g = Gen(op)
        ref = lambda a, fn=fn: fn(a)
        for dt in ALL:
            case(op, [g((2, 3), dt, kind)], ref, "dtype sweep", skip_key="dtype " + dt)
        for shape, dt, note in [
            ((), "f32", "0-d"),
            ((), "f64", "0-d"),
            ((), "f16", "0-d"),
            ((), "i64", "0-d int"),
            ((0,), "f32", "empty"),
            ((2, 0), "f32", "empty 2-D"),
            ((0,), "i32", "empty int"),
            ((2, 3, 2), "f32", "3-D"),
            ((2, 3, 2), "bf16", "3-D"),
        ]:
            case(op, [g(shape, dt, kind)], ref, note)
        for dt in ["f32", "f64"]:
            case(op, [torch.tensor(SPECIAL, dtype=DTYPES[dt])], ref,
                 "special values 0, -0, 1, -1.5, inf, -inf, nan")
        if op == "exp":
            case(op, [torch.tensor([10.0, 11.0, 12.0], dtype=torch.float16)], ref,
                 "f16 overflow to inf")
        if op in ("expm1", "log1p"):
            case(op, [torch.tensor([1e-10, -3e-8, 1e-20, 5e-5], dtype=torch.float32)], ref,
                 "tiny arguments (where exp(x) - 1 and log(1 + x) lose every digit)")
        if op == "erfc":
            case(op, [torch.tensor([3.0, 5.0, 9.0, 26.0, -4.0], dtype=torch.float32)], ref,
                 "tail (1 - erf would be 0)")
        if op in ("asin", "acos", "atanh", "erfinv"):
            case(op, [torch.tensor([-1.0, 1.0, 1.5, -2.0, 0.999999, -0.9999999], dtype=torch.float32)],
                 ref, "domain edges")
            case(op, [torch.tensor([1 - 2**-52, -(1 - 2**-40), 1e-300, 0.5], dtype=torch.float64)],
                 ref, "f64 near the edges")
        if op in ("floor", "ceil", "round", "trunc"):
            for dt in ["f32", "f16", "bf16", "f64"]:
                case(op, [torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, -0.2, 0.49999997, 1e20, -3.0],
                                       dtype=DTYPES[dt])], ref, "ties, -0 results and large values")
        if op in ("sign", "signbit", "isnan", "isfinite", "logical_not"):
            case(op, [torch.tensor([NAN, -NAN, -0.0, 0.0, INF, -INF, 1e-40, -1e-40], dtype=torch.float32)],
                 ref, "NaNs of both signs, zeros, infinities, subnormals")
            case(op, [torch.tensor([NAN, -NAN, -0.0, 65504.0, -INF], dtype=torch.float16)], ref,
                 "f16 NaNs of both signs, -0, max, -inf")
        if op in ("bitwise_not", "sign", "signbit", "logical_not"):
            case(op, [torch.tensor([0, 1, 5, 127, 255], dtype=torch.uint8)], ref, "u8 extremes")
            case(op, [torch.tensor([-128, -5, 0, 5, 127], dtype=torch.int8)], ref, "i8 extremes")
            case(op, [torch.tensor([-(2**63), -1, 0, 2**63 - 1], dtype=torch.int64)], ref,
                 "i64 extremes")
        if op in ("lgamma", "digamma"):
            case(op, [torch.tensor([0.0, -1.0, -2.5, 1.0, 2.0, 0.5, 1e-30, 171.5, 1e30, -0.0],
                                   dtype=torch.float64)], ref, "poles, 1, 2, tiny and huge")
        if op in ("neg", "abs"):
            case(op, [torch.tensor([0, 1, 5, 127, 255], dtype=torch.uint8)], ref,
                 "u8 wrap-around")
            case(op, [torch.tensor([-128, -5, 0, 5, 127], dtype=torch.int8)], ref,
                 "i8 extremes (wrap-around at -128)")


# ----------------------------------------------------------------------------
# binary elementwise
# ----------------------------------------------------------------------------
def _scalar_via_result_type(fn):
    """torch.maximum/minimum accept tensors only; emulate a Python scalar
    operand with PyTorch's own scalar type promotion (torch.result_type)."""

    def f(x, y):
        if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor):
            return fn(x, y)
        rt = torch.result_type(x, y)
        cv = lambda v: v.to(rt) if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=rt)
        return fn(cv(x), cv(y))

    return f


def _binary(fn, rfn):
    def f(x, y):
        if isinstance(x, torch.Tensor):
            return fn(x, y)
        return rfn(x, y)  # Python scalar first: use the reflected operator

    return f


# op -> (ref, kind of a, kind of b, (int literal, float literal, bool literal))
BINARY = OrderedDict(
    [
        ("add", (_binary(torch.add, operator.add), "any", "any", (3, 2.5, True))),
        # bool literals are not meaningful for sub (torch raises for bool - and - bool)
        ("sub", (_binary(torch.sub, operator.sub), "any", "any", (3, 2.5, None))),
        ("mul", (_binary(torch.mul, operator.mul), "any", "any", (3, 2.5, True))),
        ("div", (_binary(torch.div, operator.truediv), "any", "nonzero", (3, 2.5, True))),
        ("pow", (_binary(torch.pow, operator.pow), "pos", "pexp", (2, 0.5, True))),
        ("maximum", (_scalar_via_result_type(torch.maximum), "grid", "grid", (1, 0.5, True))),
        ("minimum", (_scalar_via_result_type(torch.minimum), "grid", "grid", (1, 0.5, True))),
        ("eq", (_binary(torch.eq, operator.eq), "grid", "grid", (1, 0.5, True))),
        ("ne", (_binary(torch.ne, operator.ne), "grid", "grid", (1, 0.5, True))),
        ("lt", (_binary(torch.lt, operator.lt), "grid", "grid", (1, 0.5, True))),
        ("le", (_binary(torch.le, operator.le), "grid", "grid", (1, 0.5, True))),
        ("gt", (_binary(torch.gt, operator.gt), "grid", "grid", (1, 0.5, True))),
        ("ge", (_binary(torch.ge, operator.ge), "grid", "grid", (1, 0.5, True))),
        ("remainder", (_binary(torch.remainder, operator.mod), "wide", "nonzero", (3, 2.5, True))),
        ("fmod", (_scalar_via_result_type(torch.fmod), "wide", "nonzero", (3, 2.5, True))),
        ("floor_divide", (_binary(torch.floor_divide, operator.floordiv), "wide", "nonzero",
                          (3, 2.5, True))),
        ("atan2", (_scalar_via_result_type(torch.atan2), "any", "any", (3, 2.5, True))),
        ("bitwise_and", (_binary(torch.bitwise_and, operator.and_), "any", "any", (6, 2.5, True))),
        ("bitwise_or", (_binary(torch.bitwise_or, operator.or_), "any", "any", (6, 2.5, True))),
        ("bitwise_xor", (_binary(torch.bitwise_xor, operator.xor), "any", "any", (6, 2.5, True))),
        ("bitwise_left_shift", (_binary(torch.bitwise_left_shift, operator.lshift), "any", "pexp",
                                (2, 2.5, True))),
        ("bitwise_right_shift", (_binary(torch.bitwise_right_shift, operator.rshift), "any",
                                 "pexp", (2, 2.5, True))),
    ]
)

MIXED_PAIRS = [
    # (dtype a, shape a, dtype b, shape b, note)
    ("i32", (2, 3), "f16", (2, 3), "promotion int + float -> f16"),
    ("u8", (2, 3), "i8", (2, 3), "promotion u8 + i8 -> i16"),
    ("b8", (2, 3), "i32", (2, 3), "promotion bool + int -> i32"),
    ("i64", (2, 3), "f32", (2, 3), "promotion i64 + f32 -> f32"),
    ("f16", (2, 3), "bf16", (2, 3), "promotion f16 + bf16 -> f32"),
    ("i16", (2, 3), "u8", (2, 3), "promotion i16 + u8 -> i16"),
    ("b8", (2, 3), "f64", (2, 3), "promotion bool + f64 -> f64"),
    ("i8", (2, 3), "i64", (3,), "promotion i8 + i64 (broadcast) -> i64"),
    ("f16", (2, 3), "f32", (), "0-d f32 does not promote dimensioned f16"),
    ("f32", (), "f16", (2, 3), "0-d f32 (first) does not promote dimensioned f16"),
    ("i32", (2, 3), "f64", (), "0-d float of higher category promotes int -> f64"),
    ("i8", (2, 3), "i64", (), "0-d i64 does not promote dimensioned i8"),
    ("u8", (2, 3), "i8", (), "0-d i8 does not promote dimensioned u8"),
    ("b8", (2, 3), "i64", (), "0-d int promotes dimensioned bool -> i64"),
    ("f32", (), "f16", (), "both 0-d: ordinary promotion -> f32"),
    ("i32", (), "f16", (), "both 0-d int + f16 -> f16"),
]


def gen_binary():
    for op, (ref, ka, kb, lits) in BINARY.items():
        g = Gen(op)
        cmp_ = op in ("eq", "ne", "lt", "le", "gt", "ge")

        def pair(sa, da, sb, db):
            a = g(sa, da, ka)
            b = g(sb, db, kb)
            if cmp_ and tuple(sa) == tuple(sb) and a.numel() > 1:
                # make sure some elements compare equal
                b = b.clone()
                b.view(-1)[::2] = a.reshape(-1)[::2].to(b.dtype)
            return [a, b]

        for dt in ALL:
            case(op, pair((2, 3), dt, (2, 3), dt), ref, "dtype sweep", skip_key="dtype " + dt)
        for sa, sb, dt, note in [
            ((2, 3), (3,), "f32", "broadcast [2, 3] with [3]"),
            ((3,), (2, 3), "f32", "broadcast [3] with [2, 3]"),
            ((2, 1), (1, 3), "f32", "broadcast [2, 1] with [1, 3]"),
            ((2, 1, 3), (4, 1), "f32", "broadcast [2, 1, 3] with [4, 1]"),
            ((), (2, 3), "f32", "broadcast 0-d with 2-D"),
            ((2, 3), (), "f32", "broadcast 2-D with 0-d"),
            ((), (), "f32", "0-d with 0-d"),
            ((), (), "i64", "0-d with 0-d"),
            ((0,), (0,), "f32", "empty"),
            ((2, 0), (2, 0), "f32", "empty 2-D"),
            ((2, 0), (0,), "f32", "empty broadcast [2, 0] with [0]"),
            ((2, 0), (), "f32", "empty with 0-d"),
            ((2, 0), (1, 0), "i32", "empty broadcast [2, 0] with [1, 0]"),
            ((2, 1), (1, 3), "i64", "broadcast [2, 1] with [1, 3]"),
            ((), (2, 3), "i32", "broadcast 0-d with 2-D"),
            ((3,), (2, 3), "b8", "broadcast [3] with [2, 3]"),
            ((2, 1), (3,), "f16", "broadcast [2, 1] with [3]"),
            ((2, 3), (2, 1), "bf16", "broadcast [2, 3] with [2, 1]"),
        ]:
            if op.startswith("bitwise_"):  # integer ops: broadcast integers instead
                dt = {"f32": "i32", "f16": "i16", "bf16": "u8"}.get(dt, dt)
            case(op, pair(sa, dt, sb, dt), ref, note)
        # Python scalar literal operands, both positions
        il, fl, bl = lits
        for dt in ["f32", "f16", "i64", "u8", "b8"]:
            for lit in (il, fl, bl):
                if lit is None:
                    continue
                kind = type(lit).__name__
                case(op, [g((2, 3), dt, ka), lit], ref, "tensor op %s literal" % kind)
                case(op, [lit, g((2, 3), dt, kb)], ref, "%s literal op tensor" % kind)
        neg_lit = -1.5 if op != "pow" else -1
        case(op, [g((2, 3), "f32", ka), neg_lit], ref, "negative literal")
        case(op, [g((2, 3), "f64", ka), 2], ref, "f64 tensor op int literal")
        case(op, [g((), "f32", ka), fl], ref, "0-d tensor op float literal")
        case(op, [g((), "f16", ka), fl], ref, "0-d f16 op float literal stays f16")
        case(op, [g((), "i64", ka), fl], ref, "0-d int op float literal -> f32")
        case(op, [il, g((), "i32", kb)], ref, "int literal op 0-d int")
        case(op, [g((0,), "f32", ka), fl], ref, "empty op float literal")
        case(op, [il, g((2, 0), "i64", kb)], ref, "int literal op empty")
        # mixed dtypes
        for da, sa, db, sb, note in MIXED_PAIRS:
            case(op, pair(sa, da, sb, db), ref, note)
        # special float values
        case(op, [torch.tensor(SPECIAL_A), torch.tensor(SPECIAL_B)], ref,
             "special values nan, inf, -inf, 0, -0")
        if op in ("add", "sub", "mul"):
            case(op, [torch.tensor([250, 3, 0, 128], dtype=torch.uint8),
                      torch.tensor([10, 5, 1, 2], dtype=torch.uint8)], ref,
                 "u8 wrap-around")
            case(op, [torch.tensor([120, -120, 100, -1], dtype=torch.int8),
                      torch.tensor([10, 10, 2, 1], dtype=torch.int8)], ref,
                 "i8 wrap-around")
        if op == "pow":
            case(op, [g((2, 3), "i64", "any"), g((2, 3), "i64", "pexp")], ref,
                 "negative int base, non-negative int exponent")
            case(op, [g((2, 3), "f32", "any"), 2.0], ref,
                 "negative float base, integral float exponent")
            case(op, [g((2, 3), "f32", "any"), 3], ref,
                 "negative float base, odd int exponent")
        if op in ("remainder", "fmod", "floor_divide"):
            signs_a = [7.0, -7.0, 7.0, -7.0, 0.0, -0.0, 1.0, -1.0, 3.0, INF, 5.5, 1.0]
            signs_b = [3.0, 3.0, -3.0, -3.0, 2.0, 2.0, INF, INF, -0.0, 2.0, NAN, 0.1]
            for dt in ["f32", "f64", "f16"]:
                case(op, [torch.tensor(signs_a, dtype=DTYPES[dt]),
                          torch.tensor(signs_b, dtype=DTYPES[dt])], ref,
                     "sign combinations, zeros, infinities, 1 / 0.1")
            for dt in ["i8", "i32", "i64"]:
                case(op, [torch.tensor([7, -7, 7, -7, 0, -128, 127], dtype=DTYPES[dt]),
                          torch.tensor([3, 3, -3, -3, 5, -1, -2], dtype=DTYPES[dt])], ref,
                     "int sign combinations and extremes")
            case(op, [g((2, 3), "i32", "any"), torch.tensor([0, 1, 2], dtype=torch.int32)], ref,
                 "int division by zero (torch raises)")
        if op in ("bitwise_left_shift", "bitwise_right_shift"):
            for dt in ["i8", "u8", "i64"]:
                lo = 0 if dt == "u8" else -5
                case(op, [torch.tensor([5, lo, 1, lo, 100, 3], dtype=DTYPES[dt]),
                          torch.tensor([7, 8, 9, 63, 64 if dt != "i8" else 100, 0], dtype=DTYPES[dt])],
                     ref, "shifts by the width and more")
            case(op, [torch.tensor([5, -5, 1], dtype=torch.int8),
                      torch.tensor([-1, -1, -3], dtype=torch.int8)], ref, "negative shifts")
        if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
            case(op, [torch.tensor([-128, -1, 0, 127, 85], dtype=torch.int8),
                      torch.tensor([127, -128, -1, -86, -86], dtype=torch.int8)], ref,
                 "i8 bit patterns")
            case(op, [torch.tensor([255, 170, 0], dtype=torch.uint8),
                      torch.tensor([15, 85, 255], dtype=torch.uint8)], ref, "u8 bit patterns")
        if op == "div":
            case(op, [g((2, 3), "i32", "any"), g((2, 3), "i32", "nonzero")], ref,
                 "int / int is true division -> f32")
            case(op, [g((2, 3), "i64", "any"), 2], ref, "int / int literal -> f32")


# ----------------------------------------------------------------------------
# where
# ----------------------------------------------------------------------------
def gen_where():
    op = "where"
    g = Gen(op)
    ref = lambda c, a, b: torch.where(c, a, b)
    c23 = lambda: g((2, 3), "b8")
    for dt in ALL:
        case(op, [c23(), g((2, 3), dt), g((2, 3), dt)], ref, "dtype sweep", skip_key="dtype " + dt)
    for sc, sa, sb, dt, note in [
        ((2, 1), (1, 3), (3,), "f32", "broadcast cond [2, 1], a [1, 3], b [3]"),
        ((), (2, 3), (2, 3), "f32", "0-d cond"),
        ((2, 3), (), (), "f32", "0-d branches"),
        ((2, 3), (), (2, 3), "i64", "0-d a"),
        ((), (), (), "f32", "all 0-d"),
        ((0,), (0,), (0,), "f32", "empty"),
        ((2, 0), (2, 0), (0,), "i32", "empty 2-D"),
        ((2, 0), (), (), "f32", "empty cond with 0-d branches"),
        ((3,), (2, 3), (2, 1), "bf16", "broadcast"),
    ]:
        case(op, [g(sc, "b8"), g(sa, dt), g(sb, dt)], ref, note)
    for da, sa, db, sb, note in MIXED_PAIRS:
        case(op, [c23(), g(sa, da), g(sb, db)], ref, note)
    case(op, [c23(), g((2, 3), "f32"), 0.0], ref, "float literal b")
    case(op, [c23(), 2, g((2, 3), "i32")], ref, "int literal a")
    case(op, [c23(), g((2, 3), "i64"), 0.5], ref, "int tensor, float literal -> f32")
    case(op, [c23(), g((2, 3), "f16"), 2.5], ref, "f16 tensor, float literal stays f16")
    case(op, [c23(), True, g((2, 3), "b8")], ref, "bool literal a")
    case(op, [c23(), 1.5, -1.5], ref, "both literals -> f32")
    case(op, [c23(), 1, 0], ref, "both int literals -> i64")


# ----------------------------------------------------------------------------
# to (dtype conversion)
# ----------------------------------------------------------------------------
def conv_input(src, dst):
    if src == "b8":
        return torch.tensor([[True, False, True], [False, False, True]])
    if src in FLOATS:
        if dst in ("u8",):  # negative float -> unsigned is undefined behaviour
            vals = [[0.0, 0.3, 1.75], [2.0, 0.1, 3.5]]
        else:
            vals = [[-1.75, -0.1, 0.0], [0.3, 1.5, 2.0]]
        return torch.tensor(vals, dtype=torch.float64).to(DTYPES[src])
    if src == "u8":
        return torch.tensor([[0, 1, 2], [5, 7, 100]], dtype=torch.uint8)
    return torch.tensor([[-5, -1, 0], [1, 2, 100]], dtype=DTYPES[src])


def gen_to():
    op = "to"
    ref = lambda a, d: a.to(d)
    for src in ALL:
        for dst in ALL:
            case(op, [conv_input(src, dst), DT(dst)], ref, "convert %s -> %s" % (src, dst),
                 skip_key="%s -> %s" % (src, dst))
    g = Gen(op)
    case(op, [g((), "f32"), DT("i64")], ref, "0-d")
    case(op, [g((), "i64"), DT("f16")], ref, "0-d")
    case(op, [g((), "b8"), DT("f32")], ref, "0-d")
    case(op, [g((0,), "f32"), DT("i32")], ref, "empty")
    case(op, [g((2, 0), "f16"), DT("f64")], ref, "empty 2-D")
    case(op, [torch.tensor([0.1, 1e-3, 65519.0, 65520.0, 1e5, -1e5]).to(torch.float64), DT("f16")],
         ref, "f64 -> f16 rounding and overflow to inf")
    case(op, [torch.tensor([0.1, 1e-3, 3.0e38, 1e-40], dtype=torch.float32), DT("bf16")],
         ref, "f32 -> bf16 rounding, subnormal")
    case(op, [torch.tensor([-300, -129, 128, 255, 256, 1000], dtype=torch.int16), DT("i8")],
         ref, "i16 -> i8 wrap-around")
    case(op, [torch.tensor([-300, -1, 255, 256], dtype=torch.int32), DT("u8")],
         ref, "negative int -> u8 wrap-around")
    case(op, [torch.tensor(SPECIAL, dtype=torch.float32), DT("f16")], ref, "special values")
    case(op, [torch.tensor(SPECIAL, dtype=torch.float32), DT("b8")], ref, "special values -> bool")


# ----------------------------------------------------------------------------
# shape ops
# ----------------------------------------------------------------------------
def gen_shape_ops():
    # reshape
    op = "reshape"
    g = Gen(op)
    ref = lambda a, s: torch.reshape(a, s)
    for dt in ALL:
        case(op, [g((2, 3), dt), [3, -1]], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, new, dt in [
        ((2, 3), [6], "f32"),
        ((2, 3), [-1], "i64"),
        ((2, 3), [3, 1, 2], "f32"),
        ((2, 3, 2), [2, -1], "f16"),
        ((2, 3, 2), [-1, 3, 2], "f32"),
        ((), [1], "f32"),
        ((), [-1], "i32"),
        ((), [], "f32"),
        ((1, 1), [], "f32"),
        ((1,), [1, 1, 1], "b8"),
        ((0,), [2, 0, 3], "f32"),
        ((2, 0), [0, 5], "f32"),
        ((2, 0), [0], "i64"),
    ]:
        case(op, [g(shape, dt), new], ref, "reshape")
    # transpose
    op = "transpose"
    g = Gen(op)
    ref = lambda a, d0, d1: torch.transpose(a, d0, d1)
    for dt in ALL:
        case(op, [g((2, 3), dt), 0, 1], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, d0, d1, dt in [
        ((2, 3), 1, 0, "f32"),
        ((2, 3), -1, -2, "f32"),
        ((2, 3), 0, 0, "i32"),
        ((2, 3, 4), 0, 2, "f32"),
        ((2, 3, 4), -1, 1, "bf16"),
        ((), 0, 0, "f32"),
        ((), -1, 0, "f32"),
        ((3,), 0, -1, "f32"),
        ((2, 0), 0, 1, "f32"),
        ((0, 3, 2), 0, 2, "i64"),
    ]:
        case(op, [g(shape, dt), d0, d1], ref, "transpose")
    # permute
    op = "permute"
    g = Gen(op)
    ref = lambda a, p: torch.permute(a, p)
    for dt in ALL:
        case(op, [g((2, 3, 2), dt), [1, 0, 2]], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, p, dt in [
        ((2, 3, 4), [2, 0, 1], "f32"),
        ((2, 3, 4), [0, 1, 2], "f32"),
        ((2, 3, 4), [-1, 0, -2], "f32"),
        ((2, 3), [1, 0], "i64"),
        ((3,), [0], "f32"),
        ((), [], "f32"),
        ((2, 0), [1, 0], "f32"),
        ((2, 0, 3), [2, 1, 0], "f16"),
    ]:
        case(op, [g(shape, dt), p], ref, "permute")
    # unsqueeze
    op = "unsqueeze"
    g = Gen(op)
    ref = lambda a, d: torch.unsqueeze(a, d)
    for dt in ALL:
        case(op, [g((2, 3), dt), 0], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, d, dt in [
        ((2, 3), 1, "f32"),
        ((2, 3), 2, "f32"),
        ((2, 3), -1, "f32"),
        ((2, 3), -3, "i32"),
        ((), 0, "f32"),
        ((), -1, "i64"),
        ((0,), 0, "f32"),
        ((2, 0), -1, "f32"),
    ]:
        case(op, [g(shape, dt), d], ref, "unsqueeze")
    # expand
    op = "expand"
    g = Gen(op)
    ref = lambda a, s: a.expand(s)
    for dt in ALL:
        case(op, [g((3,), dt), [2, 3]], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, s, dt in [
        ((2, 1), [2, 4], "f32"),
        ((2, 1), [-1, 4], "f32"),
        ((2, 1), [3, -1, 4], "f32"),
        ((1, 3), [2, 3], "i64"),
        ((2, 3), [2, 3], "f32"),
        ((2, 3), [-1, -1], "f32"),
        ((), [2, 3], "f32"),
        ((), [], "f32"),
        ((1,), [0], "f32"),
        ((2, 1), [2, 0], "f32"),
        ((0,), [2, 0], "i32"),
    ]:
        case(op, [g(shape, dt), s], ref, "expand")


# ----------------------------------------------------------------------------
# reductions
# ----------------------------------------------------------------------------
def _sum(a, dims, keepdim):
    if dims is None:
        return torch.sum(a, dim=None, keepdim=keepdim)
    return torch.sum(a, dim=dims, keepdim=keepdim)


def _amax(a, dims, keepdim):
    # torch.amax(dim=()) reduces over all dims
    return torch.amax(a, dim=() if dims is None else dims, keepdim=keepdim)


def _mean(a, dims, keepdim):
    return torch.mean(a, dim=dims, keepdim=keepdim)


RED_VARIANTS = [
    # (shape, dims, keepdim, dtype, note)
    ((2, 3), [0], True, "f32", ""),
    ((2, 3), [-1], False, "f32", "negative dim"),
    ((2, 3), [0, 1], False, "f32", "all dims listed"),
    ((2, 3), [-2, -1], True, "f32", "negative dims keepdim"),
    ((2, 3), None, False, "f32", "None reduces everything"),
    ((2, 3), None, True, "f32", "None keepdim"),
    ((2, 3, 4), [0, 2], False, "f32", "3-D non-adjacent dims"),
    ((2, 3, 4), [1], True, "f64", "3-D middle dim"),
    ((2, 3, 4), [-1], False, "f16", "3-D last dim"),
    ((4, 5), [1], False, "bf16", ""),
    ((2, 3), [1], True, "i64", "int"),
    ((2, 3), None, False, "i32", "int everything"),
    ((2, 3), [0], False, "b8", "bool"),
    ((), None, False, "f32", "0-d None"),
    ((), [0], False, "f32", "0-d dim 0"),
    ((), [-1], True, "f32", "0-d dim -1 keepdim"),
    ((0,), None, False, "f32", "empty, everything"),
    ((0,), [0], True, "f32", "empty, keepdim"),
    ((2, 0), [1], False, "f32", "reduce the zero-size dim"),
    ((2, 0), [0], False, "f32", "reduce the non-zero dim of an empty tensor"),
    ((2, 0), [0], True, "i64", "empty int keepdim"),
]


def gen_reductions():
    for op, ref in [("sum", _sum), ("amax", _amax), ("mean", _mean)]:
        g = Gen(op)
        for dt in ALL:
            case(op, [g((2, 3), dt), [1], False], ref, "dtype sweep", loose="accum",
                 skip_key="dtype " + dt)
        for shape, dims, keep, dt, note in RED_VARIANTS:
            if op == "mean" and dt not in FLOATS:
                dt = "f32" if dt != "i64" else "f64"
            case(op, [g(shape, dt), dims, keep], ref, note, loose="accum")
        if op == "amax":
            case(op, [torch.tensor([[1.0, NAN, 2.0], [-INF, -1.0, -2.0]]), [1], False], ref,
                 "NaN propagates")
        if op in ("sum", "mean"):
            case(op, [g((4, 8), "f16", "pos"), [1], False], ref, "f16 accumulation", loose="accum")
            case(op, [g((4, 8), "bf16", "pos"), None, False], ref, "bf16 accumulation",
                 loose="accum")


# ----------------------------------------------------------------------------
# matmul / linear
# ----------------------------------------------------------------------------
def gen_matmul():
    op = "matmul"
    g = Gen(op)
    ref = lambda a, b: torch.matmul(a, b)
    for dt in ALL:
        case(op, [g((2, 3), dt), g((3, 4), dt)], ref, "dtype sweep", loose="accum",
             skip_key="dtype " + dt)
    for sa, sb, dt, note in [
        ((3,), (3,), "f32", "1-D . 1-D -> 0-d"),
        ((3,), (3, 4), "f32", "1-D @ 2-D"),
        ((2, 3), (3,), "f32", "2-D @ 1-D"),
        ((2, 2, 3), (2, 3, 4), "f32", "batched"),
        ((2, 2, 3), (3, 4), "f32", "batched @ 2-D"),
        ((3, 4), (2, 4, 2), "f32", "2-D @ batched"),
        ((2, 3, 4), (4,), "f32", "batched @ 1-D"),
        ((3,), (2, 3, 4), "f32", "1-D @ batched"),
        ((2, 1, 2, 3), (2, 3, 4), "f32", "broadcast batch dims"),
        ((1, 2, 3), (3, 3, 2), "f64", "broadcast batch dim 1"),
        ((0, 3), (3, 2), "f32", "empty M"),
        ((2, 0), (0, 3), "f32", "K = 0 gives zeros"),
        ((2, 3), (3, 0), "f32", "empty N"),
        ((0,), (0,), "f32", "empty dot -> 0"),
        ((0, 2, 3), (3, 2), "f32", "empty batch"),
        ((2, 2, 3), (2, 3, 2), "i64", "batched int"),
        ((3,), (3,), "i32", "int dot"),
        ((2, 4, 8), (8, 3), "f16", "f16 K=8"),
        ((2, 4, 8), (2, 8, 3), "bf16", "bf16 K=8"),
    ]:
        case(op, [g(sa, dt), g(sb, dt)], ref, note, loose="accum")

    op = "linear"
    g = Gen(op)
    ref = lambda x, w, b: F.linear(x, w, b)
    for dt in ALL:
        case(op, [g((2, 3), dt), g((4, 3), dt), g((4,), dt)], ref, "dtype sweep", loose="accum",
             skip_key="dtype " + dt)
    for sx, sw, sb, dt, note in [
        ((2, 3), (4, 3), None, "f32", "no bias"),
        ((3,), (4, 3), (4,), "f32", "1-D input"),
        ((3,), (4, 3), None, "f32", "1-D input, no bias"),
        ((2, 2, 3), (4, 3), (4,), "f32", "batched input"),
        ((2, 3), (1, 3), (1,), "f32", "one output feature"),
        ((0, 3), (4, 3), (4,), "f32", "empty batch"),
        ((2, 3), (0, 3), (0,), "f32", "zero output features"),
        ((2, 0), (4, 0), (4,), "f32", "zero input features: bias only"),
        ((2, 3), (4, 3), (4,), "f64", ""),
        ((2, 8), (4, 8), (4,), "f16", ""),
        ((2, 8), (4, 8), None, "bf16", "no bias"),
        ((2, 3), (4, 3), (4,), "i64", "int"),
    ]:
        b = None if sb is None else g(sb, dt)
        case(op, [g(sx, dt), g(sw, dt), b], ref, note, loose="accum")


# ----------------------------------------------------------------------------
# gelu / softmax
# ----------------------------------------------------------------------------
def gen_activations():
    op = "gelu"
    g = Gen(op)
    ref = lambda a, approx: F.gelu(a, approximate=approx)
    for approx in ("none", "tanh"):
        for dt in ALL:
            case(op, [g((2, 3), dt), approx], ref, "dtype sweep", loose="smooth",
                 skip_key="dtype %s approximate=%s" % (dt, approx))
        for shape, dt, kind, note in [
            ((), "f32", "any", "0-d"),
            ((0,), "f32", "any", "empty"),
            ((2, 0), "f16", "any", "empty 2-D"),
            ((4, 5), "f32", "wide", "inputs in [-6, 6]"),
            ((4, 5), "bf16", "wide", "inputs in [-6, 6]"),
        ]:
            case(op, [g(shape, dt, kind), approx], ref, note, loose="smooth")
        case(op, [torch.tensor(SPECIAL, dtype=torch.float32), approx], ref, "special values",
             loose="smooth")

    op = "softmax"
    g = Gen(op)
    ref = lambda a, d: torch.softmax(a, d)
    for dt in ALL:
        case(op, [g((2, 3), dt), -1], ref, "dtype sweep", loose="smooth", skip_key="dtype " + dt)
    for shape, d, dt, note in [
        ((2, 3), 0, "f32", ""),
        ((2, 3), 1, "f32", ""),
        ((2, 3), -2, "f32", "negative dim"),
        ((2, 3, 4), 1, "f32", "3-D middle dim"),
        ((2, 3, 4), -1, "f64", "3-D last dim"),
        ((4, 8), -1, "f16", ""),
        ((4, 8), 0, "bf16", ""),
        ((), 0, "f32", "0-d -> 1"),
        ((), -1, "f32", "0-d -> 1"),
        ((1,), 0, "f32", "single element"),
        ((0,), 0, "f32", "empty"),
        ((2, 0), -1, "f32", "empty along dim"),
        ((2, 0), 0, "f32", "empty, other dim"),
    ]:
        case(op, [g(shape, dt), d], ref, note, loose="smooth")
    case(op, [torch.tensor([[100.0, 0.0, -100.0], [1000.0, 1000.0, -1000.0]]), -1], ref,
         "large logits (needs max subtraction)")
    case(op, [torch.tensor([[-INF, 0.0, 1.0], [2.0, -INF, -INF]]), -1], ref, "-inf logits")


# ----------------------------------------------------------------------------
# more composites: activations, norms, losses, masks, statistics, shape helpers
# ----------------------------------------------------------------------------
def gen_more():
    shapes = [((), "0-d"), ((0,), "empty"), ((2, 3), ""), ((3, 5), "")]
    unary = [
        ("sigmoid", torch.sigmoid, ALL),
        ("silu", F.silu, FLOATS),
        ("relu6", F.relu6, ALL),
        ("hardswish", F.hardswish, FLOATS),
    ]
    for op, fn, dts in unary:
        g = Gen(op)
        for dt in dts:
            case(op, [g((2, 3), dt, "wide")], fn, "dtype sweep", loose="smooth", skip_key="dtype " + dt)
        for shape, note in shapes:
            case(op, [g(shape, "f32", "wide")], fn, note)
        case(op, [torch.tensor(SPECIAL, dtype=torch.float32)], fn, "special values")
    op = "softplus"
    g = Gen(op)
    ref = lambda a, beta, thr: F.softplus(a, beta=beta, threshold=thr)
    for dt in FLOATS:
        case(op, [g((2, 3), dt, "wide"), 1.0, 20.0], ref, "dtype sweep", loose="smooth")
    case(op, [g((4, 5), "f32", "wide"), 2.0, 3.0], ref, "beta 2, threshold 3 (linear part used)")
    case(op, [torch.tensor([-30.0, -5.0, 0.0, 5.0, 30.0]), 1.0, 20.0], ref, "tails")
    op = "leaky_relu"
    g = Gen(op)
    ref = lambda a, s: F.leaky_relu(a, s)
    for dt in FLOATS:
        case(op, [g((2, 3), dt), 0.01], ref, "dtype sweep")
    case(op, [g((), "f32"), 0.2], ref, "0-d")
    case(op, [torch.tensor(SPECIAL, dtype=torch.float32), 0.1], ref, "special values")
    op = "clamp"
    g = Gen(op)
    ref = lambda a, lo, hi: torch.clamp(a, lo, hi)
    for dt in [d for d in ALL if d != "b8"]:
        case(op, [g((2, 3), dt), -1, 1], ref, "dtype sweep, int bounds")
    case(op, [g((2, 3), "f32"), -0.5, None], ref, "min only")
    case(op, [g((2, 3), "f32"), None, 0.5], ref, "max only")
    case(op, [g((2, 3), "i32"), -0.5, 1.5], ref, "int tensor, float bounds -> float")
    case(op, [g((2, 3), "f32"), g((3,), "f32"), g((2, 1), "f32") + 2], ref, "tensor bounds, broadcast")
    case(op, [torch.tensor(SPECIAL, dtype=torch.float32), -1.0, 1.0], ref, "special values")

    op = "rms_norm"
    g = Gen(op)
    ref = lambda a, ns, w, eps: F.rms_norm(a, ns, w, eps)
    for dt in FLOATS:
        case(op, [g((2, 8), dt), [8], g((8,), dt), 1e-6], ref, "dtype sweep", loose="smooth")
    case(op, [g((2, 3, 4), "f32"), [3, 4], None, None], ref, "two dims, no weight, default eps")
    case(op, [g((0, 4), "f32"), [4], g((4,), "f32"), 1e-5], ref, "empty batch")
    case(op, [g((2, 4), "f32") * 1e4, [4], None, 1e-6], ref, "large values")
    op = "mse_loss"
    g = Gen(op)
    for dt in FLOATS:
        case(op, [g((3, 4), dt), g((3, 4), dt)], F.mse_loss, "dtype sweep", loose="accum")
    case(op, [g((), "f32"), g((), "f32")], F.mse_loss, "0-d")

    op = "masked_fill"
    g = Gen(op)
    ref = lambda a, m, v: a.masked_fill(m, v)
    for dt in ALL:
        case(op, [g((2, 3), dt), g((2, 3), "b8"), 1], ref, "dtype sweep", skip_key="dtype " + dt)
    case(op, [g((2, 3), "f32"), g((3,), "b8"), -1.5], ref, "broadcast mask")
    case(op, [g((2, 3), "f32"), g((2, 3), "b8"), float("-inf")], ref, "-inf fill (attention masks)")
    case(op, [g((0, 3), "f32"), g((0, 3), "b8"), 0.0], ref, "empty")
    for op, fn in [("tril", torch.tril), ("triu", torch.triu)]:
        g = Gen(op)
        for dt in ALL:
            case(op, [g((3, 4), dt), 0], fn, "dtype sweep", skip_key="dtype " + dt)
        for shape, k, note in [((4, 4), 1, "k = 1"), ((4, 4), -1, "k = -1"), ((2, 3, 5), 0, "batched"),
                               ((3, 2), 5, "k beyond"), ((0, 3), 0, "empty")]:
            case(op, [g(shape, "f32"), k], fn, note)

    for op, fn in [("var", torch.var), ("std", torch.std)]:
        g = Gen(op)
        ref = lambda a, dims, corr, keep, fn=fn: fn(a, dim=dims, correction=corr, keepdim=keep)
        for dt in FLOATS:
            case(op, [g((3, 4), dt), [1], 1, False], ref, "dtype sweep", loose="accum")
        for shape, dims, corr, keep, note in [((3, 4), None, 1, False, "all dims"), ((3, 4), [0], 0, True, "biased, keepdim"),
                                                ((2, 3, 4), [0, 2], 1, False, "two dims"), ((1, 4), [0], 1, False, "n = correction -> nan/inf")]:
            case(op, [g(shape, "f64"), dims, corr, keep], ref, note)
    for op, fn in [("all", torch.all), ("any", torch.any)]:
        g = Gen(op)
        ref = lambda a, dims, keep, fn=fn: fn(a) if dims is None else fn(a, dim=tuple(dims), keepdim=keep)
        for dt in ALL:
            case(op, [g((3, 4), dt), [1], False], ref, "dtype sweep", skip_key="dtype " + dt)
        case(op, [g((3, 4), "b8"), None, False], ref, "all dims")
        case(op, [g((0, 4), "f32"), [0], True], ref, "empty dim (all -> True, any -> False)")
        case(op, [torch.ones(2, 3), [0, 1], False], ref, "all ones")

    for op, fn, extra in [("zeros_like", torch.zeros_like, []), ("ones_like", torch.ones_like, []),
                          ("full_like", lambda a, v: torch.full_like(a, v), [2])]:
        g = Gen(op)
        for dt in ALL:
            case(op, [g((2, 3), dt)] + extra, fn, "dtype sweep", skip_key="dtype " + dt)
        case(op, [g((), "f32")] + extra, fn, "0-d")
    op = "flatten"
    g = Gen(op)
    for shape, s0, e0, note in [((2, 3, 4), 0, -1, "all"), ((2, 3, 4), 1, 2, "last two"), ((2, 3, 4), 0, 0, "single dim"),
                                ((), 0, -1, "0-d -> [1]"), ((2, 0, 3), 0, 1, "empty")]:
        case(op, [g(shape, "f32"), s0, e0], lambda a, s, e: torch.flatten(a, s, e), note)
    op = "squeeze"
    g = Gen(op)
    ref = lambda a, dims: a.squeeze() if dims is None else a.squeeze(tuple(dims))
    for shape, dims, note in [((1, 3, 1), None, "all"), ((1, 3, 1), [0], "one dim"), ((1, 3, 1), [1], "non-1 dim kept"),
                              ((1, 3, 1), [-1, 0], "negative dims"), ((), None, "0-d"), ((1, 0), None, "empty")]:
        case(op, [g(shape, "f32"), dims], ref, note)
    op = "t"
    g = Gen(op)
    for shape, note in [((2, 3), ""), ((3,), "1-D"), ((), "0-d"), ((0, 2), "empty")]:
        case(op, [g(shape, "i32")], torch.t, note)


def gen_nn():
    big = torch.tensor([[1e4, -1e4, 0.0, 5e3], [-1e4, -1e4, 1e4, 1e4]])
    op = "log_softmax"
    g = Gen(op)
    ref = lambda a, d: torch.log_softmax(a, d)
    for dt in FLOATS:
        case(op, [g((2, 5), dt), -1], ref, "dtype sweep", loose="smooth")
    for shape, d, note in [((2, 3, 4), 1, "middle dim"), ((), 0, "0-d"), ((0, 3), -1, "empty")]:
        case(op, [g(shape, "f32"), d], ref, note)
    case(op, [big, -1], ref, "logits of +-1e4 (stability)")
    op = "layer_norm"
    g = Gen(op)
    ref = lambda a, ns, w, b, eps: F.layer_norm(a, ns, w, b, eps)
    for dt in FLOATS:
        case(op, [g((3, 8), dt), [8], g((8,), dt), g((8,), dt), 1e-5], ref, "dtype sweep", loose="smooth")
    case(op, [g((2, 3, 4), "f32"), [3, 4], None, None, 1e-5], ref, "two dims, no affine")
    case(op, [big, [4], None, None, 1e-5], ref, "inputs of +-1e4 (stability)")
    case(op, [g((0, 4), "f32"), [4], None, None, 1e-5], ref, "empty batch")
    op = "cross_entropy"
    g = Gen(op)
    ce = lambda x, t, *rest: F.cross_entropy(x, t) if not rest else F.cross_entropy(x, t, ignore_index=rest[0], label_smoothing=rest[1])
    tgt = torch.tensor([2, 0, 4, 1])
    for dt in FLOATS:
        case(op, [g((4, 5), dt), tgt], ce, "dtype sweep, class indices", loose="accum")
    case(op, [g((4, 5), "f32"), tgt.to(torch.int32)], ce, "i32 indices")
    case(op, [g((4, 5), "f32"), torch.softmax(g((4, 5), "f32"), -1)], ce, "probability targets")
    case(op, [g((4, 5), "f32"), tgt, 0, 0.0], ce, "ignore_index 0")
    case(op, [g((4, 5), "f32"), torch.tensor([2, -100, 4, -100]), -100, 0.1], ce, "ignore_index and label_smoothing")
    case(op, [g((4, 5), "f64"), torch.softmax(g((4, 5), "f64"), -1), -100, 0.2], ce, "probabilities with label_smoothing")
    case(op, [big, torch.tensor([1, 2])], ce, "logits of +-1e4 (stability)")
    op = "nll_loss"
    g = Gen(op)
    nll = lambda x, t, ii: F.nll_loss(x, t, ignore_index=ii)
    for dt in ["f32", "f64"]:
        case(op, [torch.log_softmax(g((4, 5), dt), -1), tgt, -100], nll, "dtype sweep")
    case(op, [torch.log_softmax(g((4, 5), "f32"), -1), torch.tensor([3, 3, -1, 0]), -1], nll, "ignore_index -1")
    op = "scaled_dot_product_attention"
    g = Gen(op)
    sdpa = lambda q, k, v, m, causal, scale: F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale)
    for dt in FLOATS:
        case(op, [g((2, 3, 4), dt), g((2, 5, 4), dt), g((2, 5, 6), dt), None, False, None], sdpa, "dtype sweep", loose="accum")
    case(op, [g((1, 2, 4, 8), "f32"), g((1, 2, 4, 8), "f32"), g((1, 2, 4, 8), "f32"), None, True, None], sdpa, "causal, heads")
    case(op, [g((2, 3, 4), "f32"), g((2, 5, 4), "f32"), g((2, 5, 4), "f32"), g((3, 5), "b8", "pos") & (g((3, 5), "b8") | torch.eye(3, 5, dtype=torch.bool)), False, 0.3], sdpa, "bool mask, scale 0.3")
    case(op, [g((2, 3, 4), "f64"), g((2, 5, 4), "f64"), g((2, 5, 4), "f64"), g((3, 5), "f64"), False, None], sdpa, "float mask added")
    case(op, [g((3, 4), "f32"), g((6, 4), "f32"), g((6, 2), "f32"), None, True, None], sdpa, "2-D, causal with more keys")
    gen_flash_pair()
    op = "bmm"
    g = Gen(op)
    for dt in ["f32", "f64", "i64"]:
        case(op, [g((2, 3, 4), dt), g((2, 4, 5), dt)], torch.bmm, "dtype sweep", loose="accum")
    case(op, [g((0, 3, 4), "f32"), g((0, 4, 5), "f32")], torch.bmm, "empty batch")
    op = "unflatten"
    g = Gen(op)
    for shape, d, sizes, note in [((2, 12), 1, [3, 4], ""), ((2, 12), -1, [2, -1, 3], "inferred size"), ((6,), 0, [1, 6], "leading 1")]:
        case(op, [g(shape, "f32"), d, sizes], lambda a, d, s: torch.unflatten(a, d, s), note)
    op = "norm"
    g = Gen(op)
    ref = lambda a, p, dims, keep: torch.linalg.vector_norm(a, p, dim=dims, keepdim=keep)
    for p_ in [2.0, 1.0, INF]:
        for dt in FLOATS:
            case(op, [g((3, 4), dt), p_, [1], False], ref, "p=%s dtype sweep" % p_, loose="accum")
        case(op, [g((2, 3, 4), "f64"), p_, None, False], ref, "p=%s all dims" % p_)
        case(op, [g((2, 3), "f32"), p_, [0], True], ref, "p=%s keepdim" % p_)



def _bwd(g, q, k, v, out, lse, causal, scale):
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale).backward(g)
    return q.grad, k.grad, v.grad


def gen_flash_pair():
    """sdpa_fwd_lse and sdpa_bwd: torch's attention, its log-sum-exp in f64 and its autograd."""
    op = "sdpa_fwd_lse"
    g = Gen(op)
    shapes = [
        ((2, 3, 4), (2, 5, 4), (2, 5, 6), False, None, "L != S, Ev != E"),
        ((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8), True, None, "causal, heads"),
        ((3, 4), (6, 4), (6, 2), True, 0.5, "2-D, causal with more keys, scale"),
        ((1, 1, 4), (1, 1, 4), (1, 1, 4), False, None, "one key"),
    ]
    fwd_cases = []
    for dt in FLOATS:
        q, k, v = g((2, 3, 4), dt), g((2, 5, 4), dt), g((2, 5, 6), dt)
        case(op, [q, k, v, False, None], sdpa_reference.fwd_lse, "dtype sweep", loose="accum")
        fwd_cases.append((q, k, v, False, None, "dtype sweep " + dt))
    for sq, sk, sv, causal, scale, note in shapes:
        q, k, v = g(sq, "f32"), g(sk, "f32"), g(sv, "f32")
        case(op, [q, k, v, causal, scale], sdpa_reference.fwd_lse, note)
        fwd_cases.append((q, k, v, causal, scale, note))
    op = "sdpa_bwd"
    g = Gen(op)
    for q, k, v, causal, scale, note in fwd_cases:
        out, lse = sdpa_reference.fwd_lse(q, k, v, causal, scale)
        grad = g(tuple(out.shape), DTYPE_NAME[out.dtype])
        loose = "accum" if q.dtype in (torch.float16, torch.bfloat16) else None
        case(op, [grad, q, k, v, out, lse, causal, scale], _bwd, note, loose=loose)

# ----------------------------------------------------------------------------
# factories
# ----------------------------------------------------------------------------
def fill_for(dt):
    if dt == "b8":
        return True
    if dt == "u8":
        return 7
    if dt in INTS:
        return -3
    return 1.5


def gen_factories():
    op = "full"
    ref = lambda s, v, dev, d: torch.full(s, v, device=dev, dtype=d)
    for dt in ALL:
        case(op, [[2, 3], fill_for(dt), CPU, DT(dt)], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, v, dt, note in [
        ([], 2.5, "f32", "0-d"),
        ([0], 1.5, "f32", "empty"),
        ([2, 0], 4, "i64", "empty 2-D"),
        ([2, 1, 3], -0.25, "f64", "3-D"),
        ([3], 2, "f32", "int fill value, float dtype"),
        ([3], False, "b8", "False fill"),
        ([3], 0.1, "f16", "fill value rounded to f16"),
        ([3], 0.1, "bf16", "fill value rounded to bf16"),
        ([2], 1e-05, "f32", "exponent literal"),
        ([2], 100000, "i64", "large int"),
    ]:
        case(op, [shape, v, CPU, DT(dt)], ref, note)

    for op, fn in [("zeros", torch.zeros), ("ones", torch.ones)]:
        ref = lambda s, dev, d, fn=fn: fn(s, device=dev, dtype=d)
        for dt in ALL:
            case(op, [[2, 3], CPU, DT(dt)], ref, "dtype sweep", skip_key="dtype " + dt)
        for shape, dt, note in [
            ([], "f32", "0-d"),
            ([], "b8", "0-d"),
            ([0], "f16", "empty"),
            ([2, 0], "i32", "empty 2-D"),
            ([2, 1, 3], "bf16", "3-D"),
        ]:
            case(op, [shape, CPU, DT(dt)], ref, note)


# ----------------------------------------------------------------------------
# prod, amin, max/min, argmax/argmin, var_mean, cumsum, topk, sort
# ----------------------------------------------------------------------------
def _distinct(g, shape, dt):
    """Distinct values per tensor (a shuffled range, centred), so sort and topk orders and the
    indices of extrema are unique and do not depend on tie-breaking."""
    n = 1
    for d in shape:
        n *= d
    perm = torch.randperm(n, generator=g.g).reshape(shape)
    if dt == "u8":
        return perm.to(torch.uint8)
    if dt == "b8":
        return (perm % 2).to(torch.bool)
    x = perm - n // 2
    if dt in FLOATS:
        return (x.to(torch.float64) / 2).to(DTYPES[dt])
    return x.to(DTYPES[dt])


def gen_stats():
    op = "prod"
    g = Gen(op)
    ref = lambda a, d, k: torch.prod(a, dtype=None) if d is None and not k else (
        torch.prod(a.reshape(-1), 0).reshape([1] * a.dim()) if d is None else torch.prod(a, d, keepdim=k))
    for dt in ALL:
        case(op, [g((2, 3), dt), 1, False], ref, "dtype sweep", loose="accum", skip_key="dtype " + dt)
    for shape, d, keep, dt, note in [
        ((2, 3), None, False, "f32", "everything"),
        ((2, 3), None, True, "f32", "everything keepdim"),
        ((2, 3), -1, True, "f64", "negative dim keepdim"),
        ((2, 3, 4), 1, False, "f32", "3-D middle"),
        ((4, 6), 1, False, "f16", ""),
        ((4, 6), 0, False, "bf16", ""),
        ((2, 3), 0, False, "i64", "int"),
        ((3, 2), None, False, "b8", "bool everything"),
        ((), None, False, "f32", "0-d"),
        ((), 0, False, "f32", "0-d dim 0"),
        ((), -1, True, "i32", "0-d dim -1 keepdim"),
        ((0,), None, False, "f32", "empty -> 1"),
        ((2, 0), 1, False, "f32", "product over the empty dim"),
        ((2, 0), 0, True, "i64", "empty keepdim"),
    ]:
        case(op, [g(shape, dt), d, keep], ref, note, loose="accum")
    case(op, [torch.tensor([[1.0, 0.0, 2.0], [NAN, 2.0, 3.0], [INF, 0.0, 1.0]]), 1, False], ref,
         "zero, NaN, inf * 0")
    case(op, [torch.tensor([[1.5, 0.0, 2.0], [0.0, 0.0, 3.0], [1.0, -2.0, 0.5]], dtype=torch.float64),
              1, False], ref, "one zero, two zeros, none (the gradient's three cases)")

    op = "amin"
    g = Gen(op)
    ref = lambda a, dims, keepdim: torch.amin(a, dim=() if dims is None else dims, keepdim=keepdim)
    for dt in ALL:
        case(op, [g((2, 3), dt), [1], False], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, dims, keep, dt, note in RED_VARIANTS:
        case(op, [g(shape, dt), dims, keep], ref, note)
    case(op, [torch.tensor([[1.0, NAN, 2.0], [INF, -0.0, 0.0]]), [1], False], ref,
         "NaN propagates; -0 and 0")

    for op, fn in [("max", torch.max), ("min", torch.min)]:
        g = Gen(op)
        ref = lambda a, d, k, fn=fn: fn(a) if d is None else tuple(fn(a, d, keepdim=k))
        for dt in ALL:
            case(op, [g((2, 3), dt), None, False], ref, "full reduction, dtype sweep",
                 skip_key="full dtype " + dt)
            case(op, [_distinct(g, (3, 4), dt), 1, False], ref, "with dim, dtype sweep",
                 skip_key="dim dtype " + dt)
        for shape, d, keep, dt, note in [
            ((3, 4), -2, True, "f32", "negative dim keepdim"),
            ((2, 3, 4), 1, False, "f64", "3-D middle"),
            ((), 0, False, "f32", "0-d dim 0"),
            ((), -1, True, "f32", "0-d keepdim"),
            ((), None, False, "i64", "0-d full"),
            ((2, 0), 0, False, "f32", "empty, reduce the non-empty dim"),
        ]:
            case(op, [_distinct(g, shape, dt), d, keep], ref, note)
        case(op, [torch.tensor([[1.0, 1.0, 0.5], [2.0, NAN, NAN]]), 1, False], ref,
             "ties give the first index; the first NaN wins")
        case(op, [torch.tensor([[3, 3, 1, 3], [0, 0, 0, 0]], dtype=torch.int32), 1, False], ref,
             "int ties give the first index")
        case(op, [torch.tensor([1.0, NAN, 0.0]), None, False], ref, "full reduction with NaN")

    for op, fn in [("argmax", torch.argmax), ("argmin", torch.argmin)]:
        g = Gen(op)
        ref = lambda a, d, k, fn=fn: fn(a, d, keepdim=k)
        for dt in ALL:
            case(op, [_distinct(g, (3, 4), dt), 1, False], ref, "dtype sweep",
                 skip_key="dtype " + dt)
        for shape, d, keep, dt, note in [
            ((3, 4), None, False, "f32", "flattened"),
            ((3, 4), None, True, "f32", "flattened keepdim"),
            ((3, 4), -1, True, "i64", "negative dim keepdim"),
            ((2, 3, 4), 0, False, "f16", "3-D first dim"),
            ((2, 3, 4), 2, False, "bf16", "3-D last dim"),
            ((), None, False, "f32", "0-d"),
            ((), 0, True, "f32", "0-d dim 0 keepdim"),
            ((2, 0), 0, False, "f32", "empty, reduce the non-empty dim"),
        ]:
            case(op, [_distinct(g, shape, dt), d, keep], ref, note)
        case(op, [torch.tensor([[1.0, 1.0, 0.5, 0.5], [2.0, NAN, -INF, NAN]]), 1, False], ref,
             "ties give the first index; the first NaN wins")

    op = "var_mean"
    g = Gen(op)
    ref = lambda a, dims, corr, keep: tuple(torch.var_mean(a, dim=dims, correction=corr, keepdim=keep))
    for dt in ALL:
        case(op, [g((3, 4), dt), [1], 1, False], ref, "dtype sweep", loose="accum",
             skip_key="dtype " + dt)
    for shape, dims, corr, keep, dt, note in [
        ((3, 4), None, 1, False, "f32", "everything"),
        ((3, 4), [0], 0, True, "f64", "correction 0 keepdim"),
        ((3, 4), [-1], 2, False, "f32", "correction 2, negative dim"),
        ((2, 3, 4), [0, 2], 1, False, "f32", "two dims"),
        ((4, 8), [1], 1, False, "f16", ""),
        ((4, 8), None, 1, True, "bf16", "everything keepdim"),
        ((), None, 0, False, "f32", "0-d correction 0"),
        ((1,), [0], 1, False, "f32", "one sample, correction 1 -> NaN"),
        ((0,), None, 1, False, "f32", "empty -> NaN"),
        ((2, 0), [0], 1, False, "f32", "reduce the non-empty dim of an empty tensor"),
    ]:
        case(op, [g(shape, dt), dims, corr, keep], ref, note, loose="accum")
    case(op, [torch.tensor([1e4 + 1.0, 1e4 + 2.0, 1e4 + 3.0, 1e4 + 4.0]), [0], 1, False], ref,
         "large mean, small spread (two-pass)")

    op = "cumsum"
    g = Gen(op)
    ref = lambda a, d, dt: torch.cumsum(a, d, dtype=dt)
    for dt in ALL:
        case(op, [g((2, 5), dt), 1, None], ref, "dtype sweep", loose="accum", skip_key="dtype " + dt)
    for shape, d, out_dt, dt, note in [
        ((2, 5), 0, None, "f32", "dim 0"),
        ((2, 5), -1, None, "f64", "negative dim"),
        ((2, 3, 4), 1, None, "f32", "3-D middle"),
        ((4, 16), 1, None, "f16", "f16 long rows"),
        ((4, 16), -1, None, "bf16", "bf16 long rows"),
        ((2, 5), 1, DT("f64"), "f32", "dtype f64"),
        ((2, 5), 1, DT("i32"), "i16", "dtype i32"),
        ((2, 5), 1, DT("f32"), "i64", "int to f32"),
        ((), 0, None, "f32", "0-d"),
        ((), -1, None, "i32", "0-d int -> i64"),
        ((0,), 0, None, "f32", "empty"),
        ((2, 0), 1, None, "i64", "empty dim"),
    ]:
        case(op, [g(shape, dt), d, out_dt], ref, note, loose="accum")
    case(op, [torch.tensor([1.0, NAN, 2.0, INF, -INF, 3.0]), 0, None], ref, "NaN and inf")

    op = "topk"
    g = Gen(op)
    ref = lambda a, k, d, largest, srt: tuple(torch.topk(a, k, d, largest, srt))
    for dt in ALL:
        case(op, [_distinct(g, (3, 5), dt), 2, -1, True, True], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for shape, k, d, largest, dt, note in [
        ((3, 5), 3, 1, False, "f32", "smallest"),
        ((4, 3), 2, 0, True, "f64", "dim 0"),
        ((2, 3, 4), 2, -2, True, "i64", "3-D middle, negative dim"),
        ((2, 6), 6, 1, True, "f16", "k = n"),
        ((2, 6), 0, 1, True, "bf16", "k = 0"),
        ((5,), 1, 0, False, "i32", "1-D min"),
        ((), 1, 0, True, "f32", "0-d"),
        ((0, 3), 2, 1, True, "f32", "empty batch"),
    ]:
        case(op, [_distinct(g, shape, dt), k, d, largest, True], ref, note)
    case(op, [torch.tensor([[1.0, NAN, 3.0, -INF, 2.0]]), 2, 1, True, True], ref,
         "NaN is the largest")
    case(op, [torch.tensor([[1.0, NAN, 3.0, -INF, 2.0]]), 2, 1, False, True], ref,
         "NaN is never among the smallest")

    op = "polygamma"
    g = Gen(op)
    ref = lambda n, a: torch.polygamma(n, a)
    # Away from the poles: near them torch's f32 kernel loses digits to the reflection.
    for n in (1, 0):
        for dt in ALL:
            case(op, [n, g((2, 3), dt, "pos")], ref, "dtype sweep", loose="smooth",
                 skip_key="n=%d dtype %s" % (n, dt))
    for shape, note in [((), "0-d"), ((0,), "empty"), ((3, 4), "")]:
        case(op, [1, g(shape, "f32", "pos")], ref, note)
    case(op, [1, torch.tensor([-2.5, 0.25, 0.5, 1.0, 2.0, 1e-3, 150.5, 1e6, NAN, INF, -0.3, -7.2],
                              dtype=torch.float64)], ref,
         "reflection, tiny and huge", loose="smooth")
    case(op, [1, torch.tensor([0.0, -1.0, -0.0, -3.0], dtype=torch.float64)], ref, "poles")

    op = "sort"
    g = Gen(op)
    ref = lambda a, d, desc, stable: tuple(torch.sort(a, dim=d, descending=desc, stable=stable))
    for dt in ALL:
        case(op, [g((3, 5), dt), -1, False, True], ref, "dtype sweep (stable, ties)",
             skip_key="dtype " + dt)
        case(op, [g((3, 5), dt), -1, True, True], ref, "dtype sweep descending (stable, ties)",
             skip_key="desc dtype " + dt)
    for shape, d, desc, stable, dt, note in [
        ((4, 3), 0, False, True, "f32", "dim 0"),
        ((2, 3, 4), 1, True, True, "f64", "3-D middle descending"),
        ((2, 8), -1, False, True, "f16", ""),
        ((2, 8), -1, True, True, "bf16", ""),
        ((), 0, False, True, "f32", "0-d"),
        ((0,), 0, False, True, "f32", "empty"),
        ((2, 0), 1, True, True, "i64", "empty dim"),
    ]:
        case(op, [g(shape, dt, "grid" if dt in FLOATS else "any"), d, desc, stable], ref, note)
    case(op, [_distinct(g, (3, 6), "f32"), 1, False, False], ref, "unstable, distinct values")
    for desc in (False, True):
        case(op, [torch.tensor([2.0, NAN, -0.0, INF, 0.0, -INF, NAN, 1.0]), 0, desc, True], ref,
             "NaN sorts above inf; -0 and 0 keep their order")


# ----------------------------------------------------------------------------
# convolution and pooling
# ----------------------------------------------------------------------------
def gen_conv():
    for op, fn, sp in [("conv1d", F.conv1d, 1), ("conv2d", F.conv2d, 2)]:
        g = Gen(op)
        ref = lambda x, w, b, s, p, d, gr, fn=fn: fn(x, w, b, s, p, d, gr)
        S = (7,) if sp == 1 else (6, 5)
        K = (3,) if sp == 1 else (3, 2)
        for dt in ALL:
            case(op, [g((2, 4) + S, dt), g((3, 4) + K, dt), g((3,), dt), 1, 0, 1, 1], ref,
                 "dtype sweep", loose="accum", skip_key="dtype " + dt)
        for x, w, b, st, pd, dl, gr, dt, note in [
            ((2, 4) + S, (6, 2) + K, (6,), 2, 1, 1, 2, "f32", "stride 2, padding 1, groups 2"),
            ((1, 4) + S, (4, 1) + K, None, 1, 2, 2, 4, "f64", "depthwise, dilation 2, no bias"),
            ((2, 3) + S, (2, 3) + K, None, [1] * sp, [0] * sp, [1] * sp, 1, "f32", "lists"),
            ((3,) + S, (2, 3) + K, (2,), 1, 1, 1, 1, "f32", "unbatched"),
            ((2, 3) + S, (5, 3) + K, (5,), 1, "same", 1, 1, "f32", "padding same (odd total)"),
            ((2, 3) + S, (5, 3) + (2,) * sp, None, 1, "same", 2, 1, "f64", "padding same, dilation 2"),
            ((2, 3) + S, (5, 3) + K, (5,), 1, "valid", 1, 1, "f32", "padding valid"),
            ((2, 2) + S, (4, 2) + K, (4,), 3, 0, 1, 1, "f32", "stride 3 drops the tail"),
            ((0, 2) + S, (4, 2) + K, (4,), 1, 0, 1, 1, "f32", "empty batch"),
            ((2, 4) + S, (4, 4) + K, (4,), 1, 1, 1, 1, "f16", ""),
            ((2, 4) + S, (4, 4) + K, (4,), 1, 1, 1, 1, "bf16", ""),
        ]:
            case(op, [g(x, dt), g(w, dt), None if b is None else g(b, dt), st, pd, dl, gr], ref,
                 note, loose="accum")

    op = "conv3d"
    g = Gen(op)
    ref = lambda x, w, b, s, p, d, gr: F.conv3d(x, w, b, s, p, d, gr)
    for x, w, b, st, pd, dl, gr, dt, note in [
        ((2, 2, 4, 5, 3), (4, 2, 2, 3, 2), (4,), 1, 0, 1, 1, "f64", ""),
        ((1, 4, 5, 4, 4), (4, 2, 3, 2, 2), None, [2, 1, 1], [1, 0, 1], [1, 2, 1], 2, "f32",
         "per-dim stride, padding, dilation; groups 2"),
        ((2, 3, 3, 3), (2, 2, 2, 2, 2), (2,), 1, 0, 1, 1, "f32", "unbatched"),
        ((1, 2, 3, 3, 3), (2, 2, 2, 2, 2), (2,), 1, 0, 1, 1, "i64", "int"),
    ]:
        case(op, [g(x, dt), g(w, dt), None if b is None else g(b, dt), st, pd, dl, gr], ref, note,
             loose="accum")

    op = "max_pool2d"
    g = Gen(op)
    ref = lambda x, k, s, p, d, cm: F.max_pool2d(x, k, s, p, d, cm)
    for dt in ALL:
        case(op, [g((2, 3, 6, 5), dt), [2, 2], None, [0, 0], [1, 1], False], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for shape, k, st, p, d, note in [
        ((2, 3, 7, 6), [3, 3], [2, 2], [1, 1], [1, 1], "3x3 stride 2 padding 1"),
        ((1, 2, 8, 8), [2, 3], [1, 2], [1, 0], [2, 1], "dilation 2 in H"),
        ((3, 6, 6), [2, 2], None, [0, 0], [1, 1], "unbatched"),
        ((2, 1, 5, 5), [5, 5], None, [2, 2], [1, 1], "padding = half the kernel"),
        ((0, 2, 4, 4), [2, 2], None, [0, 0], [1, 1], "empty batch"),
    ]:
        case(op, [g(shape, "f32"), k, st, p, d, False], ref, note)
    case(op, [g((2, 2, 5, 5), "i16"), [3, 3], [2, 2], [1, 1], [1, 1], False], ref,
         "int padding never wins")
    x = torch.tensor([[[[1.0, NAN, 2.0, 3.0], [-INF, -INF, 0.5, 0.5], [4.0, 4.0, -1.0, -2.0],
                        [0.0, -0.0, 1.0, 1.0]]]])
    case(op, [x, [2, 2], None, [0, 0], [1, 1], False], ref, "NaN wins; -inf windows; ties")

    op = "avg_pool2d"
    g = Gen(op)
    ref = lambda x, k, s, p, cm, cip, dov: F.avg_pool2d(x, k, s, p, cm, cip, dov)
    for dt in ALL:
        case(op, [g((2, 3, 6, 5), dt), [2, 2], None, [0, 0], False, True, None], ref,
             "dtype sweep", loose="accum", skip_key="dtype " + dt)
    for shape, k, st, p, cip, dov, note in [
        ((2, 3, 7, 6), [3, 3], [2, 2], [1, 1], True, None, "padding counted"),
        ((2, 3, 7, 6), [3, 3], [2, 2], [1, 1], False, None, "padding not counted"),
        ((1, 2, 8, 8), [2, 4], [1, 2], [1, 2], False, None, "uneven kernel"),
        ((3, 6, 6), [2, 2], None, [0, 0], True, None, "unbatched"),
        ((2, 2, 4, 4), [2, 2], None, [0, 0], True, 3, "divisor_override"),
    ]:
        case(op, [g(shape, "f32"), k, st, p, False, cip, dov], ref, note)
    case(op, [g((2, 2, 5, 5), "i64"), [3, 3], [2, 2], [1, 1], False, False, None], ref,
         "int, padding not counted (truncating division)")
    case(op, [g((2, 2, 5, 5), "i32"), [2, 2], [1, 1], [1, 1], False, True, None], ref,
         "i32, padding counted")

    op = "adaptive_avg_pool2d"
    g = Gen(op)
    ref = lambda x, o: F.adaptive_avg_pool2d(x, o)
    for dt in FLOATS:
        case(op, [g((2, 3, 6, 5), dt), [3, 2]], ref, "dtype sweep", loose="accum")
    for shape, o, note in [
        ((2, 3, 7, 5), [3, 4], "overlapping windows"),
        ((2, 3, 7, 5), [1, 1], "global average"),
        ((2, 3, 4, 4), [4, 4], "identity"),
        ((3, 5, 6), [2, 3], "unbatched"),
        ((2, 3, 3, 2), [5, 4], "output larger than input"),
    ]:
        case(op, [g(shape, "f64"), o], ref, note)


# ----------------------------------------------------------------------------
# batch_norm, group_norm
# ----------------------------------------------------------------------------
def _batch_norm(x, rm, rv, w, b, training, momentum, eps):
    """F.batch_norm, plus the updated running statistics when it updates them (torch does
    that in place; ltorch.batch_norm returns them)."""
    rm = None if rm is None else rm.clone()
    rv = None if rv is None else rv.clone()
    out = F.batch_norm(x, rm, rv, w, b, training, momentum, eps)
    if training and rm is not None:
        return (out, rm, rv)
    return out


def gen_norms():
    op = "batch_norm"
    g = Gen(op)
    for dt in ALL:
        case(op, [g((4, 3, 5), dt), g((3,), dt), g((3,), dt, "pos"), g((3,), dt), g((3,), dt),
                  True, 0.1, 1e-5], _batch_norm, "dtype sweep, training", loose="smooth",
             skip_key="dtype " + dt)
        case(op, [g((4, 3, 5), dt), g((3,), dt), g((3,), dt, "pos"), g((3,), dt), g((3,), dt),
                  False, 0.1, 1e-5], _batch_norm, "dtype sweep, eval", loose="smooth",
             skip_key="eval dtype " + dt)
    for shape, stats, affine, training, momentum, dt, note in [
        ((6, 3), True, True, True, 0.3, "f32", "2-D input, momentum 0.3"),
        ((2, 3, 4, 5), True, False, True, 0.1, "f64", "4-D, no affine"),
        ((2, 3, 4, 5), False, True, True, 0.1, "f32", "no running stats"),
        ((2, 3, 4, 5), True, True, False, 0.1, "f64", "eval 4-D"),
        ((5, 2, 3), True, False, False, 0.1, "f32", "eval, no affine"),
    ]:
        c = shape[1]
        rm = g((c,), dt) if stats else None
        rv = g((c,), dt, "pos") if stats else None
        w = g((c,), dt) if affine else None
        b = g((c,), dt) if affine else None
        case(op, [g(shape, dt), rm, rv, w, b, training, momentum, 1e-5], _batch_norm, note,
             loose="smooth")

    x = g((4, 3, 5), "bf16")
    case(op, [x, g((3,), "f32"), g((3,), "f32", "pos"), g((3,), "f32"), g((3,), "f32"), True,
              0.1, 1e-5], _batch_norm, "bf16 input, f32 parameters and running stats",
         loose="smooth")

    op = "group_norm"
    g = Gen(op)
    ref = lambda x, G, w, b, eps: F.group_norm(x, G, w, b, eps)
    for dt in ALL:
        case(op, [g((2, 6, 5), dt), 3, g((6,), dt), g((6,), dt), 1e-5], ref, "dtype sweep",
             loose="smooth", skip_key="dtype " + dt)
    for shape, G, affine, dt, note in [
        ((2, 6, 5), 1, True, "f32", "one group (layer norm over C and L)"),
        ((2, 6, 5), 6, True, "f64", "one channel per group (instance norm)"),
        ((3, 4), 2, True, "f32", "2-D input"),
        ((2, 4, 3, 3), 2, False, "f32", "4-D, no affine"),
        ((1, 4, 2, 2), 4, True, "f64", "4-D"),
    ]:
        c = shape[1]
        w = g((c,), dt) if affine else None
        b = g((c,), dt) if affine else None
        case(op, [g(shape, dt), G, w, b, 1e-5], ref, note, loose="smooth")


# ----------------------------------------------------------------------------
# main
# ----------------------------------------------------------------------------
def raw_equal(x, y):
    if x.dtype != y.dtype or tuple(x.shape) != tuple(y.shape):
        return False
    if x.numel() == 0:
        return True
    view = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[x.element_size()]
    if x.dtype == torch.bool:
        return torch.equal(x, y)
    return torch.equal(x.reshape(-1).view(view), y.reshape(-1).view(view))


# ----------------------------------------------------------------------------
# indexing and joining: cat, stack, split, chunk, narrow, slice, index_select, gather,
# scatter_add, index_add, embedding, flip, pad
# ----------------------------------------------------------------------------
def _index(g, hi, shape, dt="i64"):
    """Random indices in [0, hi) (repeats included), as dtype ``dt``."""
    return g.randint(0, hi - 1, shape).to(DTYPES[dt])


def gen_indexing():
    op = "cat"
    g = Gen(op)
    ref = lambda d, *ts: torch.cat(ts, d)
    for dt in ALL:
        case(op, [0, g((2, 3), dt), g((1, 3), dt)], ref, "dtype sweep", skip_key="dtype " + dt)
    for d, shapes, dts, note in [
        (1, [(2, 3), (2, 0), (2, 2)], ["f32"] * 3, "dim 1 with an empty part"),
        (-1, [(2, 1, 2), (2, 1, 3)], ["f64"] * 2, "negative dim"),
        (0, [(0,), (0,)], ["i64"] * 2, "all empty"),
        (0, [(3,)], ["f16"], "one tensor"),
        (0, [(2, 3), (0,)], ["f32"] * 2, "legacy: a 1-D empty tensor is skipped"),
        (0, [(2, 3), (1, 3)], ["i32", "f32"], "promotion i32 + f32"),
        (0, [(2,), (2,)], ["b8", "u8"], "promotion b8 + u8"),
        (0, [(2,), (2,)], ["bf16", "f16"], "promotion bf16 + f16"),
        (1, [(2, 2), (2, 1), (2, 3), (2, 1)], ["f32"] * 4, "four parts"),
        (1, [(2, 3, 2), (2, 1, 2)], ["i8"] * 2, "3-D middle dim"),
    ]:
        case(op, [d] + [g(s, t) for s, t in zip(shapes, dts)], ref, note)

    op = "stack"
    g = Gen(op)
    ref = lambda d, *ts: torch.stack(ts, d)
    for dt in ALL:
        case(op, [0, g((2, 3), dt), g((2, 3), dt)], ref, "dtype sweep", skip_key="dtype " + dt)
    for d, shapes, dts, note in [
        (1, [(2, 3)] * 3, ["f32"] * 3, "middle"),
        (-1, [(2, 3)] * 2, ["f64"] * 2, "negative dim: last"),
        (2, [(2, 3)] * 2, ["i64"] * 2, "new last dim"),
        (0, [(), ()], ["f32"] * 2, "0-d"),
        (0, [(0,), (0,)], ["f32"] * 2, "empty"),
        (0, [(2,), (2,)], ["i32", "f16"], "promotion"),
    ]:
        case(op, [d] + [g(s, t) for s, t in zip(shapes, dts)], ref, note)

    op = "split"
    g = Gen(op)
    ref = lambda a, s, d: torch.split(a, s, d)
    for dt in ALL:
        case(op, [g((5, 2), dt), 2, 0], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, s, d, dt, note in [
        ((5, 3), [1, 0, 4], 0, "f32", "sizes with an empty piece"),
        ((2, 6), 4, -1, "f64", "negative dim, smaller last piece"),
        ((2, 6), [3, 3], 1, "i64", "two equal sizes"),
        ((0, 3), 2, 0, "f32", "empty dim: one empty piece"),
        ((4,), 4, 0, "f16", "one piece: the whole tensor"),
        ((3, 2, 2), [2, 1], 0, "bf16", "3-D"),
    ]:
        case(op, [g(shape, dt), s, d], ref, note)

    op = "chunk"
    g = Gen(op)
    ref = lambda a, c, d: torch.chunk(a, c, d)
    for dt in ALL:
        case(op, [g((5, 2), dt), 3, 0], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, c, d, dt, note in [
        ((6,), 4, 0, "f32", "fewer pieces than chunks"),
        ((0,), 3, 0, "f32", "empty: chunks empty pieces"),
        ((2, 7), 2, -1, "f64", "negative dim"),
        ((3, 2), 1, 0, "i32", "one chunk"),
        ((2, 3), 5, 1, "f16", "more chunks than elements"),
    ]:
        case(op, [g(shape, dt), c, d], ref, note)

    op = "narrow"
    g = Gen(op)
    ref = lambda a, d, s, n: torch.narrow(a, d, s, n)
    for dt in ALL:
        case(op, [g((4, 3), dt), 0, 1, 2], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, d, s, n, dt, note in [
        ((4, 3), -1, -2, 2, "f32", "negative dim and start"),
        ((4, 3), 1, 0, 0, "f64", "length 0"),
        ((4, 3), 0, 4, 0, "i64", "start at the end, length 0"),
        ((2, 5, 2), 1, 1, 3, "f16", "3-D"),
        ((0, 3), 1, 1, 2, "f32", "empty other dim"),
    ]:
        case(op, [g(shape, dt), d, s, n], ref, note)

    op = "slice"
    g = Gen(op)
    ref = lambda a, d, s, e, st: torch.ops.aten.slice.Tensor(a, d, s, e, st)
    for dt in ALL:
        case(op, [g((5, 4), dt), 0, 1, 4, 2], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, d, s, e, st, dt, note in [
        ((5, 4), 1, None, None, 1, "f32", "x[:, :] (nothing recorded)"),
        ((5, 4), 1, None, None, 3, "f32", "x[:, ::3]"),
        ((10,), 0, -3, None, 2, "i64", "negative start"),
        ((10,), 0, -100, 100, 3, "f64", "out-of-range bounds clamp"),
        ((10,), 0, 7, 2, 1, "f32", "end before start: empty"),
        ((2, 3, 6), -1, 1, -1, 2, "bf16", "negative dim and end"),
        ((0, 3), 0, 0, 5, 2, "f32", "empty"),
        ((4, 3), 0, 4, None, 1, "f16", "start at the end: empty"),
    ]:
        case(op, [g(shape, dt), d, s, e, st], ref, note)

    op = "index_select"
    g = Gen(op)
    ref = lambda a, d, i: torch.index_select(a, d, i)
    for dt in ALL:
        case(op, [g((4, 3), dt), 0, torch.tensor([3, 0, 0, 2])], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for a, d, i, note in [
        (g((4, 3), "f32"), 1, _index(g, 3, (5,), "i32"), "i32 index, repeats"),
        (g((4, 3), "f64"), -1, _index(g, 3, (2,)), "negative dim"),
        (g((4, 3), "f32"), 0, torch.zeros(0, dtype=torch.int64), "empty index"),
        (g((), "f32"), 0, torch.tensor([0]), "0-d input"),
        (g((4,), "i64"), 0, torch.tensor(2), "0-d index"),
        (g((0, 3), "f32"), 1, torch.tensor([2, 0]), "empty input"),
        (g((2, 3, 4), "bf16"), 2, _index(g, 4, (6,)), "3-D"),
        (g((3,), "f32"), 0, torch.tensor([1], dtype=torch.int16), "i16 index (torch raises)"),
    ]:
        case(op, [a, d, i], ref, note)

    op = "gather"
    g = Gen(op)
    ref = lambda a, d, i: torch.gather(a, d, i)
    for dt in ALL:
        case(op, [g((3, 4), dt), 1, _index(g, 4, (3, 2))], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for a, d, i, note in [
        (g((3, 4), "f32"), 0, _index(g, 3, (5, 4)), "dim 0, more rows than the input"),
        (g((3, 4), "f64"), -1, _index(g, 4, (2, 6)), "negative dim, smaller other dim"),
        (g((), "f32"), 0, torch.tensor(0), "0-d"),
        (g((3, 4), "f32"), 1, torch.zeros((3, 0), dtype=torch.int64), "empty index"),
        (g((2, 3, 4), "f16"), 1, _index(g, 3, (2, 2, 4)), "3-D"),
        (g((3,), "f32"), 0, torch.tensor([1], dtype=torch.int32), "i32 index"),
    ]:
        case(op, [a, d, i], ref, note)

    op = "scatter_add"
    g = Gen(op)
    ref = lambda a, d, i, s: torch.scatter_add(a, d, i, s)
    for dt in ALL:
        case(op, [g((3, 4), dt), 1, _index(g, 4, (3, 3)), g((3, 3), dt)], ref, "dtype sweep",
             loose="accum", skip_key="dtype " + dt)
    for a, d, i, s, note in [
        (g((3, 4), "f32"), 0, _index(g, 3, (6, 4)), g((6, 4), "f32"), "dim 0 with repeats"),
        (g((3, 4), "f64"), -1, _index(g, 4, (2, 2)), g((3, 5), "f64"),
         "src larger than the index"),
        (g((), "f32"), 0, torch.tensor(0), g((), "f32"), "0-d"),
        (g((3, 4), "f32"), 1, torch.zeros((3, 0), dtype=torch.int64), g((3, 0), "f32"),
         "empty index"),
        (g((2, 3, 4), "i32"), 2, _index(g, 4, (2, 3, 6)), g((2, 3, 6), "i32"), "3-D ints"),
    ]:
        case(op, [a, d, i, s], ref, note, loose="accum")

    op = "index_add"
    g = Gen(op)
    ref = lambda a, d, i, s, al: torch.index_add(a, d, i, s, alpha=al)
    for dt in ALL:
        case(op, [g((4, 3), dt), 0, torch.tensor([3, 0, 3]), g((3, 3), dt), 1], ref,
             "dtype sweep", loose="accum", skip_key="dtype " + dt)
    for a, d, i, s, al, note in [
        (g((4, 3), "f32"), 1, _index(g, 3, (5,), "i32"), g((4, 5), "f32"), 0.5,
         "i32 index, alpha 0.5"),
        (g((4, 3), "i64"), -1, _index(g, 3, (2,)), g((4, 2), "i64"), 3, "ints, alpha 3"),
        (g((4, 3), "f64"), 0, torch.zeros(0, dtype=torch.int64), g((0, 3), "f64"), 1,
         "empty index"),
        (g((), "f32"), 0, torch.tensor([0]), g((), "f32"), 1, "0-d input and source"),
        (g((2, 3, 4), "bf16"), 1, _index(g, 3, (4,)), g((2, 4, 4), "bf16"), 1, "3-D"),
        (g((4, 3), "f32"), 0, torch.tensor([1]), g((1, 3), "f32"), 1.0, "alpha 1.0"),
    ]:
        case(op, [a, d, i, s, al], ref, note, loose="accum")

    op = "embedding"
    g = Gen(op)
    ref = lambda i, w, p: F.embedding(i, w, p)
    for dt in ALL:
        case(op, [_index(g, 5, (2, 3)), g((5, 4), dt), None], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for i, w, p, note in [
        (_index(g, 5, (4,), "i32"), g((5, 3), "f32"), None, "i32 indices"),
        (torch.tensor(2), g((5, 3), "f64"), None, "0-d index"),
        (torch.zeros(0, dtype=torch.int64), g((5, 3), "f32"), None, "empty"),
        (torch.tensor([[0, 1], [1, 4]]), g((5, 3), "f32"), 1, "padding_idx"),
        (torch.tensor([[0, 1], [1, 4]]), g((5, 3), "f16"), None, "f16 2-D indices"),
        (torch.tensor([0, 4, 4]), g((5, 3), "f64"), -1, "negative padding_idx"),
    ]:
        case(op, [i, w, p], ref, note)

    op = "flip"
    g = Gen(op)
    ref = lambda a, d: torch.flip(a, d)
    for dt in ALL:
        case(op, [g((2, 3), dt), [0, 1]], ref, "dtype sweep", skip_key="dtype " + dt)
    for shape, d, dt, note in [
        ((2, 3), [-1], "f32", "negative dim"),
        ((2, 3), [], "f32", "no dims"),
        ((), [0], "f64", "0-d"),
        ((2, 3, 4), [0, 2], "i64", "3-D outer dims"),
        ((0, 3), [0, 1], "f32", "empty"),
        ((2, 1), [1], "f16", "size-1 dim (nothing recorded)"),
    ]:
        case(op, [g(shape, dt), d], ref, note)

    op = "pad"
    g = Gen(op)
    ref = lambda a, p, m, v: F.pad(a, p, m, v)
    for dt in ALL:
        case(op, [g((2, 3), dt), [1, 2], "constant", 1.0], ref, "dtype sweep",
             skip_key="dtype " + dt)
    for shape, p, v, dt, note in [
        ((2, 3), [1, 0, 2, 1], 0.5, "f32", "two dims"),
        ((2, 3), [-1, 1], -2.0, "f64", "negative (cropping) pad"),
        ((2, 3), [-1, -1, 1, 0], 0.0, "f32", "crop one dim, pad the other"),
        ((2, 3), [0, 0], 7.0, "f16", "all zero (nothing recorded)"),
        ((0,), [2, 1], 3.0, "f32", "empty input"),
        ((3,), [1, 1], 1.7, "i32", "float value truncated for ints"),
        ((2,), [1, 1], 1.7, "b8", "float value for bool"),
        ((2, 2, 2), [1, 1, 0, 0, 1, 0], 0.0, "bf16", "3-D, every dim"),
        ((), [], 1.0, "f32", "0-d, empty pad"),
    ]:
        case(op, [g(shape, dt), p, "constant", v], ref, note)


def main():
    import warnings

    warnings.filterwarnings("ignore")
    gen_unary()
    gen_binary()
    gen_where()
    gen_to()
    gen_shape_ops()
    gen_reductions()
    gen_matmul()
    gen_activations()
    gen_factories()
    gen_more()
    gen_nn()
    gen_stats()
    gen_conv()
    gen_norms()
    gen_indexing()

    if os.path.isdir(OUT_DIR):
        shutil.rmtree(OUT_DIR)
    os.makedirs(OUT_DIR)

    manifest = []
    for op, cases in CASES.items():
        path = os.path.join(OUT_DIR, op + ".safetensors")
        save_file(dict(TENSORS[op]), path, metadata={"generator": "scripts/gen_op_fixtures.py"})
        manifest.extend(cases)
    with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c) for c in manifest))
        f.write("\n]\n")

    # verify: every tensor round-trips bit-exactly, every manifest name exists
    n_tensors = 0
    for op, tens in TENSORS.items():
        loaded = load_file(os.path.join(OUT_DIR, op + ".safetensors"))
        assert set(loaded) == set(tens), op
        for k, v in tens.items():
            assert raw_equal(v, loaded[k]), (op, k, v, loaded[k])
            n_tensors += 1
    for c in manifest:
        for n in c["inputs"] + c["outputs"]:
            assert n in TENSORS[c["op"]], (c["op"], n)

    # summary
    total = 0
    for fn in sorted(os.listdir(OUT_DIR)):
        total += os.path.getsize(os.path.join(OUT_DIR, fn))
    print("cases per op:")
    for op, cases in CASES.items():
        print("  %-11s %4d" % (op, len(cases)))
    print("total: %d cases, %d tensors, %d files, %.1f KiB in %s" % (
        len(manifest), n_tensors, len(os.listdir(OUT_DIR)), total / 1024.0,
        os.path.relpath(OUT_DIR, REPO)))
    print("skipped (PyTorch raised):")
    for op, items in SKIPS.items():
        for s in items:
            print("  %s: %s" % (op, s))


if __name__ == "__main__":
    main()
