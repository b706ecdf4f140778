"""The torch -> ltorch table: one row per torch function, Tensor method, ``torch.nn.functional``
function or operator, saying which ltorch op(s) it becomes and how its arguments map.

Each row is a handler ``h(r, args, kwargs) -> value | tuple of values`` where ``r`` is the
recorder (``r.v(x)`` turns a tensor or number into a tagged argument, ``r.emit(symbol, args,
n=1)`` records an ltorch call and returns its new values). Arguments arrive as torch passed them
(positional or keyword): ``bind`` applies torch's names and defaults, written once per row as a
signature string, so the rows could later be read from the op table's signatures instead.
"""

from __future__ import annotations

import builtins
import math

import torch
import torch.nn.functional as F

T = torch.Tensor

# torch callable -> handler
TABLE: dict = {}
# torch callable -> name of the in-place op's out-of-place handler (functionalized)
INPLACE: dict = {}
# Calls that only read metadata or are identities under functionalization: run on meta as is.
PASSTHROUGH: set = set()


class Signature:
    """``"input, dim=None, keepdim=False"``: names and defaults of a torch call."""

    def __init__(self, text: str):
        self.names = []
        self.defaults = {}
        for part in [p.strip() for p in text.split(",") if p.strip()]:
            if part == "*":
                continue
            if "=" in part:
                name, default = part.split("=", 1)
                self.names.append(name.strip())
                self.defaults[name.strip()] = eval(default, {"math": math})  # noqa: S307 (our literals)
            else:
                self.names.append(part)

    def bind(self, fname, args, kwargs):
        out = dict(self.defaults)
        if len(args) > len(self.names):
            raise TypeError(f"{fname}: takes {len(self.names)} arguments, got {len(args)}")
        for n, a in zip(self.names, args):
            out[n] = a
        for k, v in kwargs.items():
            if k not in self.names:
                raise TypeError(f"{fname}: unexpected argument {k!r}")
            out[k] = v
        missing = [n for n in self.names if n not in out]
        if missing:
            raise TypeError(f"{fname}: missing argument(s) {', '.join(missing)}")
        return out


def row(*funcs, sig: str):
    """Registers a handler for ``funcs`` taking its arguments bound by ``sig``."""
    s = Signature(sig)

    def deco(h):
        def handler(r, args, kwargs, _h=h, _s=s):
            a = _s.bind(getattr(funcs[0], "__name__", "op"), args, kwargs)
            return _h(r, a)

        for f in funcs:
            TABLE[f] = handler
        return h

    return deco


def _dims(dim, rank):
    if dim is None:
        return None
    if isinstance(dim, int):
        return [dim]
    return list(dim)


def _dtype_name(dt):
    return DTYPES[dt]


DTYPES = {
    torch.bool: "b8",
    torch.uint8: "u8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
}

# ---------------------------------------------------------------- elementwise


def _unary(name):
    def h(r, a):
        return r.emit1(f"ltorch.{name}", [r.v(a["input"])])

    return h


for _name in [
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "erf", "reciprocal",
    "exp2", "expm1", "log1p", "log2", "log10", "tan", "asin", "acos", "atan", "sinh", "cosh",
    "asinh", "acosh", "atanh", "erfc", "erfinv", "lgamma", "digamma", "floor", "ceil", "round",
    "trunc", "sign", "signbit", "isnan", "isfinite", "logical_not", "bitwise_not", "sigmoid",
]:
    _fs = [getattr(torch, _name, None), getattr(T, _name, None)]
    _fs = [f for f in _fs if f is not None]
    row(*_fs, sig="input")(_unary(_name))
    if hasattr(T, _name + "_"):
        INPLACE[getattr(T, _name + "_")] = getattr(T, _name)
row(T.__neg__, sig="input")(_unary("neg"))
row(T.__abs__, sig="input")(_unary("abs"))
row(T.__invert__, sig="input")(_unary("bitwise_not"))
row(F.sigmoid, sig="input")(_unary("sigmoid"))
row(F.tanh, sig="input")(_unary("tanh"))


def _binary(name, swap=False):
    def h(r, a):
        x, y = a["input"], a["other"]
        if swap:
            x, y = y, x
        alpha = a.get("alpha", 1)
        if alpha != 1:
            y = r.emit1("ltorch.mul", [r.v(y), r.v(alpha)])
        return r.emit1(f"ltorch.{name}", [r.v(x), r.v(y)])

    return h


for _name, _dunder, _rdunder in [
    ("add", "__add__", "__radd__"),
    ("sub", "__sub__", "__rsub__"),
    ("mul", "__mul__", "__rmul__"),
    ("div", "__truediv__", "__rtruediv__"),
    ("pow", "__pow__", "__rpow__"),
    ("remainder", "__mod__", "__rmod__"),
    ("floor_divide", "__floordiv__", "__rfloordiv__"),
    ("eq", "__eq__", None),
    ("ne", "__ne__", None),
    ("lt", "__lt__", None),
    ("le", "__le__", None),
    ("gt", "__gt__", None),
    ("ge", "__ge__", None),
    ("maximum", None, None),
    ("minimum", None, None),
    ("atan2", None, None),
    ("fmod", None, None),
    ("hypot", None, None),
    ("bitwise_and", "__and__", "__rand__"),
    ("bitwise_or", "__or__", "__ror__"),
    ("bitwise_xor", "__xor__", "__rxor__"),
]:
    _fs = [f for f in (getattr(torch, _name, None), getattr(T, _name, None)) if f is not None]
    _sig = "input, other, *, alpha=1" if _name in ("add", "sub") else "input, other"
    row(*_fs, sig=_sig)(_binary(_name))
    if _dunder:
        row(getattr(T, _dunder), sig="input, other")(_binary(_name))
    if _rdunder:
        row(getattr(T, _rdunder), sig="input, other")(_binary(_name, swap=True))
    if hasattr(T, _name + "_"):
        INPLACE[getattr(T, _name + "_")] = getattr(T, _name)
    _idunder = _dunder and "__i" + _dunder[2:]
    if _idunder and hasattr(T, _idunder):
        INPLACE[getattr(T, _idunder)] = getattr(T, _name)
row(torch.true_divide, T.true_divide, sig="input, other")(_binary("div"))
row(torch.rsub, sig="input, other, *, alpha=1")(
    lambda r, a: _binary("sub")(r, {"input": a["other"], "other": a["input"], "alpha": a["alpha"]})
)
row(T.__matmul__, torch.matmul, T.matmul, sig="input, other")(
    lambda r, a: r.emit1("ltorch.matmul", [r.v(a["input"]), r.v(a["other"])])
)
row(T.__rmatmul__, sig="input, other")(
    lambda r, a: r.emit1("ltorch.matmul", [r.v(a["other"]), r.v(a["input"])])
)
row(torch.bmm, T.bmm, sig="input, mat2")(
    lambda r, a: r.emit1("ltorch.bmm", [r.v(a["input"]), r.v(a["mat2"])])
)
row(torch.where, T.where, sig="condition, input, other")(
    lambda r, a: r.emit1("ltorch.where", [r.v(a["condition"]), r.v(a["input"]), r.v(a["other"])])
)
row(torch.masked_fill, T.masked_fill, sig="input, mask, value")(
    lambda r, a: r.emit1("ltorch.masked_fill", [r.v(a["input"]), r.v(a["mask"]), r.v(a["value"])])
)
INPLACE[T.masked_fill_] = T.masked_fill
row(torch.clamp, T.clamp, torch.clip, T.clip, sig="input, min=None, max=None")(
    lambda r, a: r.emit1("ltorch.clamp", [r.v(a["input"]), r.v(a["min"]), r.v(a["max"])])
)
INPLACE[T.clamp_] = T.clamp
row(torch.tril, T.tril, sig="input, diagonal=0")(
    lambda r, a: r.emit1("ltorch.tril", [r.v(a["input"]), r.v(a["diagonal"])])
)
row(torch.triu, T.triu, sig="input, diagonal=0")(
    lambda r, a: r.emit1("ltorch.triu", [r.v(a["input"]), r.v(a["diagonal"])])
)

# ---------------------------------------------------------------- activations


row(torch.relu, T.relu, F.relu, sig="input, inplace=False")(_unary("relu"))
INPLACE[T.relu_] = T.relu
INPLACE[torch.relu_] = T.relu
row(F.gelu, sig="input, approximate='none'")(
    lambda r, a: r.emit1("ltorch.gelu", [r.v(a["input"]), ("s", a["approximate"])])
)
row(F.silu, sig="input, inplace=False")(_unary("silu"))
row(F.softplus, sig="input, beta=1.0, threshold=20.0")(
    lambda r, a: r.emit1("ltorch.softplus", [r.v(a["input"]), r.v(float(a["beta"])), r.v(float(a["threshold"]))])
)
row(F.relu6, sig="input, inplace=False")(_unary("relu6"))
row(F.hardswish, sig="input, inplace=False")(_unary("hardswish"))
row(F.leaky_relu, sig="input, negative_slope=0.01, inplace=False")(
    lambda r, a: r.emit1("ltorch.leaky_relu", [r.v(a["input"]), r.v(float(a["negative_slope"]))])
)

# ---------------------------------------------------------------- reductions


def _reduce(name, with_dtype=False):
    def h(r, a):
        x = a["input"]
        if with_dtype and a.get("dtype") is not None:
            x = r.emit1("ltorch.to", [r.v(x), ("d", _dtype_name(a["dtype"]))])
        dims = _dims(a["dim"], None)
        return r.emit1(f"ltorch.{name}", [r.v(x), ("n",) if dims is None else ("I", dims), ("b", bool(a["keepdim"]))])

    return h


row(torch.sum, T.sum, sig="input, dim=None, keepdim=False, *, dtype=None")(_reduce("sum", True))
row(torch.mean, T.mean, sig="input, dim=None, keepdim=False, *, dtype=None")(_reduce("mean", True))
row(torch.amax, T.amax, sig="input, dim=(), keepdim=False")(
    lambda r, a: _reduce("amax")(r, dict(a, dim=None if a["dim"] == () else a["dim"]))
)
row(torch.amin, T.amin, sig="input, dim=(), keepdim=False")(
    lambda r, a: _reduce("amin")(r, dict(a, dim=None if a["dim"] == () else a["dim"]))
)
row(torch.prod, T.prod, sig="input, dim=None, keepdim=False, *, dtype=None")(
    lambda r, a: r.emit1("ltorch.prod", [r.v(a["input"]), ("n",) if a["dim"] is None else ("i", a["dim"]), ("b", a["keepdim"])])
)
row(torch.softmax, T.softmax, F.softmax, sig="input, dim=None, _stacklevel=3, dtype=None")(
    lambda r, a: r.emit1("ltorch.softmax", [r.v(_to(r, a["input"], a["dtype"])), ("i", a["dim"])])
)
row(torch.log_softmax, T.log_softmax, F.log_softmax, sig="input, dim=None, _stacklevel=3, dtype=None")(
    lambda r, a: r.emit1("ltorch.log_softmax", [r.v(_to(r, a["input"], a["dtype"])), ("i", a["dim"])])
)


def _to(r, x, dtype):
    if dtype is None:
        return x
    return r.emit1("ltorch.to", [r.v(x), ("d", _dtype_name(dtype))])


# ---------------------------------------------------------------- nn.functional


row(F.linear, torch.nn.functional.linear, sig="input, weight, bias=None")(
    lambda r, a: r.emit1("ltorch.linear", [r.v(a["input"]), r.v(a["weight"]), r.v(a["bias"])])
)
row(F.layer_norm, sig="input, normalized_shape, weight=None, bias=None, eps=1e-05")(
    lambda r, a: r.emit1(
        "ltorch.layer_norm",
        [r.v(a["input"]), ("I", list(a["normalized_shape"])), r.v(a["weight"]), r.v(a["bias"]), ("f", float(a["eps"]))],
    )
)
row(F.mse_loss, sig="input, target, size_average=None, reduce=None, reduction='mean'")(
    lambda r, a: _mse(r, a)
)


def _mse(r, a):
    if a["reduction"] != "mean" or a["size_average"] is not None or a["reduce"] is not None:
        raise NotImplementedError("F.mse_loss: only reduction='mean' is supported")
    return r.emit1("ltorch.mse_loss", [r.v(a["input"]), r.v(a["target"])])


def _cross_entropy(r, a):
    if a["weight"] is not None or a["reduction"] != "mean":
        raise NotImplementedError("F.cross_entropy: weight and reduction other than 'mean' are not supported")
    return r.emit1(
        "ltorch.cross_entropy",
        [r.v(a["input"]), r.v(a["target"]), ("i", a["ignore_index"]), ("f", float(a["label_smoothing"]))],
    )


row(F.cross_entropy, sig="input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction='mean', label_smoothing=0.0")(_cross_entropy)
row(F.embedding, sig="input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False")(
    lambda r, a: r.emit1("ltorch.embedding", [r.v(a["input"]), r.v(a["weight"]), r.v(a["padding_idx"])])
)


def _dropout(r, a):
    if not a["training"] or a["p"] == 0:
        return a["input"]
    raise NotImplementedError("F.dropout in training mode with p > 0 (call model.eval() or use p=0)")


row(F.dropout, sig="input, p=0.5, training=True, inplace=False")(_dropout)


def _sdpa(r, a):
    if a["dropout_p"] != 0.0:
        raise NotImplementedError("F.scaled_dot_product_attention: dropout_p must be 0")
    return r.emit1(
        "ltorch.scaled_dot_product_attention",
        [r.v(a["query"]), r.v(a["key"]), r.v(a["value"]), r.v(a["attn_mask"]), ("b", a["is_causal"]),
         ("n",) if a["scale"] is None else ("f", float(a["scale"]))],
    )


row(F.scaled_dot_product_attention, sig="query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False")(_sdpa)


def _pair(x, n):
    return list(x) if isinstance(x, (list, tuple)) else [x] * n


def _conv(n):
    def h(r, a):
        pad = a["padding"]
        pad = ("s", pad) if isinstance(pad, str) else ("I", _pair(pad, n))
        return r.emit1(
            f"ltorch.conv{n}d",
            [r.v(a["input"]), r.v(a["weight"]), r.v(a["bias"]), ("I", _pair(a["stride"], n)), pad,
             ("I", _pair(a["dilation"], n)), ("i", a["groups"])],
        )

    return h


for _n, _f in [(1, F.conv1d), (2, F.conv2d), (3, F.conv3d)]:
    row(_f, sig="input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1")(_conv(_n))


def _max_pool2d(r, a):
    if a["return_indices"]:
        raise NotImplementedError("F.max_pool2d: return_indices=True is not supported")
    stride = a["stride"] if a["stride"] not in (None, [], ()) else a["kernel_size"]
    return r.emit1(
        "ltorch.max_pool2d",
        [r.v(a["input"]), ("I", _pair(a["kernel_size"], 2)), ("I", _pair(stride, 2)), ("I", _pair(a["padding"], 2)),
         ("I", _pair(a["dilation"], 2)), ("b", a["ceil_mode"])],
    )


row(F.max_pool2d, torch.max_pool2d, sig="input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False")(_max_pool2d)
row(F.adaptive_avg_pool2d, sig="input, output_size")(
    lambda r, a: r.emit1("ltorch.adaptive_avg_pool2d", [r.v(a["input"]), ("I", _pair(a["output_size"], 2))])
)

# ---------------------------------------------------------------- shapes


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        shape = shape[0]
    return [int(s) for s in shape]


def _reshape(r, x, shape):
    return r.emit1("ltorch.reshape", [r.v(x), ("I", _shape_arg(shape))])


TABLE[T.view] = lambda r, args, kw: _view(r, args, kw)


def _view(r, args, kw):
    x, *shape = args
    if "size" in kw:
        shape = [kw["size"]]
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise NotImplementedError("Tensor.view(dtype) (a bit cast)")
    return _reshape(r, x, shape)


TABLE[T.reshape] = lambda r, args, kw: _reshape(r, args[0], args[1:] or [kw["shape"]])
row(torch.reshape, sig="input, shape")(lambda r, a: _reshape(r, a["input"], [a["shape"]]))
TABLE[T.expand] = lambda r, args, kw: r.emit1("ltorch.expand", [r.v(args[0]), ("I", _shape_arg(args[1:] or [kw["size"]]))])
TABLE[T.permute] = lambda r, args, kw: r.emit1("ltorch.permute", [r.v(args[0]), ("I", _shape_arg(args[1:] or [kw["dims"]]))])
row(torch.permute, sig="input, dims")(lambda r, a: r.emit1("ltorch.permute", [r.v(a["input"]), ("I", list(a["dims"]))]))
row(torch.transpose, T.transpose, sig="input, dim0, dim1")(
    lambda r, a: r.emit1("ltorch.transpose", [r.v(a["input"]), ("i", a["dim0"]), ("i", a["dim1"])])
)
row(torch.t, T.t, sig="input")(lambda r, a: r.emit1("ltorch.t", [r.v(a["input"])]))
row(torch.unsqueeze, T.unsqueeze, sig="input, dim")(lambda r, a: r.emit1("ltorch.unsqueeze", [r.v(a["input"]), ("i", a["dim"])]))
row(torch.squeeze, T.squeeze, sig="input, dim=None")(
    lambda r, a: r.emit1("ltorch.squeeze", [r.v(a["input"]), ("n",) if a["dim"] is None else ("I", _dims(a["dim"], None))])
)
row(torch.flatten, T.flatten, sig="input, start_dim=0, end_dim=-1")(
    lambda r, a: r.emit1("ltorch.flatten", [r.v(a["input"]), ("i", a["start_dim"]), ("i", a["end_dim"])])
)
row(torch.cat, torch.concat, sig="tensors, dim=0")(
    lambda r, a: r.emit1("ltorch.cat", [("i", a["dim"])] + [r.v(t) for t in a["tensors"]])
)
row(torch.stack, sig="tensors, dim=0")(
    lambda r, a: r.emit1("ltorch.stack", [("i", a["dim"])] + [r.v(t) for t in a["tensors"]])
)


def _split(r, a):
    x, size, dim = a["input"], a["split_size_or_sections"], a["dim"]
    if not isinstance(size, int):
        raise NotImplementedError("split with a list of sizes")
    n = -(-x.shape[dim] // size) if x.shape[dim] else 1
    return tuple(r.emit("ltorch.split", [r.v(x), ("i", size), ("i", dim)], n))


row(torch.split, T.split, sig="input, split_size_or_sections, dim=0")(_split)


def _chunk(r, a):
    x, chunks, dim = a["input"], a["chunks"], a["dim"]
    size = -(-x.shape[dim] // chunks)
    n = -(-x.shape[dim] // size) if size else chunks
    return tuple(r.emit("ltorch.chunk", [r.v(x), ("i", chunks), ("i", dim)], n))


row(torch.chunk, T.chunk, sig="input, chunks, dim=0")(_chunk)
row(torch.narrow, T.narrow, sig="input, dim, start, length")(
    lambda r, a: r.emit1("ltorch.narrow", [r.v(a["input"]), ("i", a["dim"]), ("i", a["start"]), ("i", a["length"])])
)
row(torch.index_select, T.index_select, sig="input, dim, index")(
    lambda r, a: r.emit1("ltorch.index_select", [r.v(a["input"]), ("i", a["dim"]), r.v(a["index"])])
)
row(torch.gather, T.gather, sig="input, dim, index")(
    lambda r, a: r.emit1("ltorch.gather", [r.v(a["input"]), ("i", a["dim"]), r.v(a["index"])])
)


def _to_method(r, args, kw):
    x = args[0]
    dtype = kw.get("dtype")
    for a in args[1:]:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, torch.Tensor):
            dtype = a.dtype
    if dtype is None or dtype == x.dtype:
        return x
    return r.emit1("ltorch.to", [r.v(x), ("d", _dtype_name(dtype))])


TABLE[T.to] = _to_method
TABLE[T.type_as] = lambda r, args, kw: _to_method(r, [args[0], args[1].dtype], {})
for _m, _dt in [("float", torch.float32), ("double", torch.float64), ("half", torch.float16),
                ("bfloat16", torch.bfloat16), ("long", torch.int64), ("int", torch.int32), ("bool", torch.bool)]:
    TABLE[getattr(T, _m)] = (lambda dt: lambda r, args, kw: _to_method(r, [args[0], dt], {}))(_dt)
# Identities for a functional program (no layout, no copies).
for _f in [T.contiguous, T.clone, torch.clone, T.detach, torch.detach]:
    TABLE[_f] = lambda r, args, kw: args[0]

# ---------------------------------------------------------------- factories


def _factory(fill):
    def h(r, args, kw):
        shape = _shape_arg(args) if args else _shape_arg([kw["size"]])
        dtype = kw.get("dtype") or torch.get_default_dtype()
        return r.emit1("ltorch.full", [("I", shape), r.v(fill), ("D", r.device), ("d", _dtype_name(dtype))])

    return h


TABLE[torch.zeros] = _factory(0.0)
TABLE[torch.ones] = _factory(1.0)


def _full(r, a):
    dtype = a["dtype"] or (torch.get_default_dtype() if isinstance(a["fill_value"], float) else torch.int64)
    return r.emit1("ltorch.full", [("I", list(a["size"])), r.v(a["fill_value"]), ("D", r.device), ("d", _dtype_name(dtype))])


row(torch.full, sig="size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False")(_full)
row(torch.zeros_like, sig="input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None")(
    lambda r, a: _to(r, r.emit1("ltorch.zeros_like", [r.v(a["input"])]), a["dtype"])
)
row(torch.ones_like, sig="input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None")(
    lambda r, a: _to(r, r.emit1("ltorch.ones_like", [r.v(a["input"])]), a["dtype"])
)

# ---------------------------------------------------------------- metadata (run on meta as is)

for _f in [T.size, T.dim, T.numel, T.__len__, T.is_contiguous, T.element_size, T.is_floating_point,
           T.__format__, T.__repr__, T.__hash__, T.data_ptr, T.stride]:
    PASSTHROUGH.add(_f)
_GETTERS_PASS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "layout",
                 "is_cuda", "is_meta", "names", "_base", "data", "is_sparse", "is_quantized", "is_nested"}
_GETTERS_MAP = {"T": lambda r, x: _mT(r, x, full=True), "mT": lambda r, x: _mT(r, x, full=False)}


def _mT(r, x, full):
    if full and x.dim() != 2:
        return r.emit1("ltorch.permute", [r.v(x), ("I", list(builtins.range(x.dim()))[::-1])])
    return r.emit1("ltorch.transpose", [r.v(x), ("i", -2), ("i", -1)])


def getter_name(func):
    """The attribute a ``Tensor.<attr>.__get__`` call reads, else None."""
    if getattr(func, "__name__", None) != "__get__":
        return None
    owner = getattr(func, "__self__", None)
    return getattr(owner, "__name__", None)


def torch_name(func) -> str:
    """How the user wrote it, for errors: ``torch.foo``, ``Tensor.foo``, ``F.foo``."""
    g = getter_name(func)
    if g is not None:
        return f"Tensor.{g}"
    name = getattr(func, "__name__", repr(func))
    qual = getattr(func, "__qualname__", name)
    mod = getattr(func, "__module__", None) or ""
    if qual.startswith("TensorBase.") or qual.startswith("Tensor."):
        return "Tensor." + name
    if mod.startswith("torch.nn.functional"):
        return "torch.nn.functional." + name
    if mod.startswith("torch._ops"):
        return repr(func)
    if mod.startswith("torch") or mod == "":
        return "torch." + name
    return f"{mod}.{qual}"


def _arange(r, args, kw):
    nums = [a for a in args if not isinstance(a, (torch.dtype, torch.device))]
    if len(nums) == 1:
        start, end, step = 0, nums[0], 1
    elif len(nums) == 2:
        (start, end), step = nums, 1
    else:
        start, end, step = nums[:3]
    start, end, step = kw.get("start", start), kw.get("end", end), kw.get("step", step)
    if not all(isinstance(v, int) for v in (start, end, step)):
        raise NotImplementedError("torch.arange with non-integer bounds")
    dtype = kw.get("dtype") or torch.int64
    return r.emit1("ltorch.arange", [("i", start), ("i", end), ("i", step), ("D", r.device), ("d", _dtype_name(dtype))])


TABLE[torch.arange] = _arange


row(torch.index_add, T.index_add, sig="input, dim, index, source, *, alpha=1")(
    lambda r, a: r.emit1("ltorch.index_add", [r.v(a["input"]), ("i", a["dim"]), r.v(a["index"]), r.v(a["source"]), r.v(a["alpha"])])
)
INPLACE[T.index_add_] = T.index_add


def _index_put(r, a):
    """``index_put(x, (idx,), v, accumulate=True)`` with one 1-D index on dim 0 is index_add.
    Without accumulate, repeated indices pick an unspecified value in torch, which a sum cannot
    reproduce, so it is refused rather than computed differently."""
    idx = a["indices"]
    if not a["accumulate"]:
        raise NotImplementedError("index_put without accumulate=True (use index_put_(..., accumulate=True) or torch.where)")
    if len(idx) != 1 or idx[0] is None or idx[0].dim() != 1 or idx[0].dtype not in (torch.int64, torch.int32):
        raise NotImplementedError("index_put with anything but one 1-D integer index tensor")
    x, v = a["input"], a["values"]
    shape = [idx[0].shape[0]] + list(x.shape[1:])
    if tuple(v.shape) != tuple(shape):
        v = r.emit1("ltorch.expand", [r.v(v), ("I", shape)])
    return r.emit1("ltorch.index_add", [r.v(x), ("i", 0), r.v(idx[0]), r.v(v), ("i", 1)])


row(torch.index_put, T.index_put, sig="input, indices, values, accumulate=False")(_index_put)
INPLACE[T.index_put_] = T.index_put
