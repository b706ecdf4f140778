"""The torch -> ltorch table: which ltorch op(s) a torch function, Tensor method,
``torch.nn.functional`` function or operator becomes.

Most rows are not written here: a torch callable named like an ltorch op (``torch.cumsum``,
``Tensor.amax``, ``F.silu``) is mapped by ``_signatures.auto_rows`` with the op table's declared
signature (torch's names and defaults, one place for the trace text and Python). The rows below
are the calls whose torch form differs from the op's: operators, varargs shapes, dtype
conversions, factories (torch's defaults for dtype and device), and calls with semantics of
their own (dropout, batch_norm's running statistics, indexing).

A handler is ``h(r, args, kwargs) -> value | tuple of values``: ``r`` is the recorder
(``r.v(x)`` turns a tensor or number into a tagged argument, ``r.emit(symbol, args, n)`` records
an ltorch call with canonical arguments and returns its new values, ``r.out`` is torch's meta
result of the call).
"""

from __future__ import annotations

import builtins

import math

import torch
import torch.nn.functional as F

from . import _signatures as S
from ._signatures import DTYPES, Generic

T = torch.Tensor

# torch callable -> handler
TABLE: dict = {}
# torch callable -> its out-of-place callable (in-place ops are functionalized)
INPLACE: dict = {}
# Calls that only read metadata or are identities under functionalization: run on meta as is.
PASSTHROUGH: set = set()


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


class Signature:
    """``"input, dim=None, keepdim=False"``: names and defaults of a torch call that is not one
    ltorch op (factories, dropout), for the explicit rows."""

    def __init__(self, text: str):
        import ast

        self.names = []
        self.defaults = {}
        for part in [p.strip() for p in text.split(",") if p.strip()]:
            if part == "*":
                continue
            if "=" in part:
                name, default = part.split("=", 1)
                self.names.append(name.strip())
                self.defaults[name.strip()] = ast.literal_eval(default.strip())
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
    """Registers a handler for ``funcs`` taking its arguments bound by torch's ``sig``."""
    s = Signature(sig)

    def deco(h):
        def handler(r, args, kwargs, _h=h, _s=s):
            return _h(r, _s.bind(getattr(funcs[0], "__name__", "op"), args, kwargs))

        for f in funcs:
            TABLE[f] = handler
        return h

    return deco


def same_op(op, *funcs, **aliases):
    """``funcs`` are the ltorch op ``op`` under other names (``Tensor.__add__`` is ``ltorch.add``);
    ``aliases`` rename torch keywords to the op's (``split_size="split_size_or_sections"``)."""
    for f in funcs:
        TABLE[f] = Generic(op, f, torch_name(f), aliases)


def _dtype_name(dt):
    return DTYPES[dt]


def _to(r, x, dtype):
    if dtype is None:
        return x
    return r.emit1("ltorch.to", [r.v(x), ("d", _dtype_name(dtype))])


# ---------------------------------------------------------------- operators


def _swapped(op):
    g = {}

    def h(r, args, kwargs):
        if op not in g:
            g[op] = Generic(op, None, op)
        return g[op](r, (args[1], args[0]), kwargs)

    return h


for _name, _dunder, _rdunder in [
    ("add", "__add__", "__radd__"), ("sub", "__sub__", "__rsub__"), ("mul", "__mul__", "__rmul__"),
    ("div", "__truediv__", "__rtruediv__"), ("pow", "__pow__", "__rpow__"),
    ("remainder", "__mod__", "__rmod__"), ("floor_divide", "__floordiv__", "__rfloordiv__"),
    ("eq", "__eq__", None), ("ne", "__ne__", None), ("lt", "__lt__", None), ("le", "__le__", None),
    ("gt", "__gt__", None), ("ge", "__ge__", None), ("bitwise_and", "__and__", "__rand__"),
    ("bitwise_or", "__or__", "__ror__"), ("bitwise_xor", "__xor__", "__rxor__"),
    ("matmul", "__matmul__", "__rmatmul__"),
]:
    same_op(f"ltorch.{_name}", getattr(T, _dunder))
    if _rdunder:
        TABLE[getattr(T, _rdunder)] = _swapped(f"ltorch.{_name}")
    _idunder = "__i" + _dunder[2:]
    if hasattr(T, _idunder):
        INPLACE[getattr(T, _idunder)] = getattr(T, _name)
same_op("ltorch.neg", T.__neg__)
same_op("ltorch.abs", T.__abs__)
same_op("ltorch.bitwise_not", T.__invert__)
same_op("ltorch.div", torch.true_divide, T.true_divide)
same_op("ltorch.clamp", torch.clip, T.clip)
same_op("ltorch.cat", torch.concat, torch.concatenate)
same_op("ltorch.split", torch.split, T.split, split_size="split_size_or_sections")
row(torch.rsub, sig="input, other, *, alpha=1")(
    lambda r, a: Generic("ltorch.sub", None, "torch.rsub")(r, (a["other"], a["input"]), {"alpha": a["alpha"]})
)
row(torch.square, T.square, sig="input")(
    lambda r, a: Generic("ltorch.mul", None, "torch.square")(r, (a["input"], a["input"]), {})
)


def _outer(r, a):
    """``outer(u, v)``: ``u[:, None] * v[None, :]`` for two 1-D tensors."""
    u, v = a["input"], a["vec2"]
    if not (isinstance(u, torch.Tensor) and isinstance(v, torch.Tensor)) or u.dim() != 1 or v.dim() != 1:
        raise NotImplementedError("outer takes two 1-D tensors")
    col = r.emit1("ltorch.reshape", [r.v(u), ("I", [u.shape[0], 1])])
    row_ = r.emit1("ltorch.reshape", [r.v(v), ("I", [1, v.shape[0]])])
    return r.emit1("ltorch.mul", [r.v(col), r.v(row_)])


row(torch.outer, T.outer, torch.ger, T.ger, sig="input, vec2")(_outer)


def _einsum(r, args, kwargs):
    """``torch.einsum(equation, *operands)`` or ``(equation, [operands])``: ``ltorch.einsum``."""
    if kwargs or not args or not isinstance(args[0], str):
        raise NotImplementedError("einsum takes (equation, *operands)")
    operands = args[1] if len(args) == 2 and isinstance(args[1], (list, tuple)) else args[1:]
    return r.call("ltorch.einsum", args[0], list(operands))


TABLE[torch.einsum] = _einsum


def _mha_forward(r, a):
    """``F.multi_head_attention_forward`` (``nn.MultiheadAttention``, torchvision's ViT) with a
    packed in-projection: the three projections, heads, ``scaled_dot_product_attention`` (or
    the explicit softmax when the weights are wanted) and the out-projection. A 2-D mask is
    passed on (a boolean one inverted: True masks out here, lets through in sdpa)."""
    refused = [
        name
        for name, on in [
            ("bias_k/bias_v", a["bias_k"] is not None or a["bias_v"] is not None),
            ("add_zero_attn", a["add_zero_attn"]),
            ("dropout while training", a["training"] and a["dropout_p"] > 0),
            ("key_padding_mask", a["key_padding_mask"] is not None),
            ("separate q/k/v projection weights", a["use_separate_proj_weight"]),
            ("static_k/static_v", a["static_k"] is not None or a["static_v"] is not None),
            ("an attention mask that is not 2-D", a["attn_mask"] is not None and a["attn_mask"].dim() != 2),
            ("need_weights with a mask", a["need_weights"] and a["attn_mask"] is not None),
        ]
        if on
    ]
    if refused:
        raise NotImplementedError("multi_head_attention_forward with " + ", ".join(refused))
    q, k, v, heads_n = a["query"], a["key"], a["value"], a["num_heads"]
    batched = q.dim() == 3
    L, S, E = q.shape[0], k.shape[0], q.shape[-1]
    N = q.shape[1] if batched else 1
    hd = E // heads_n
    W, B = a["in_proj_weight"], a["in_proj_bias"]

    def proj(x, i):
        if not batched:
            x = r.call("ltorch.reshape", x, [x.shape[0], 1, E])
        w = r.call("ltorch.narrow", W, 0, i * E, E)
        b = r.call("ltorch.narrow", B, 0, i * E, E) if B is not None else None
        return r.call("ltorch.linear", x, w, b)

    def heads(t, n):  # (n, N, E) -> (N, H, n, hd)
        t = r.call("ltorch.reshape", t, [n, N, heads_n, hd])
        return r.call("ltorch.permute", t, [1, 2, 0, 3])

    qh, kh, vh = heads(proj(q, 0), L), heads(proj(k, 1), S), heads(proj(v, 2), S)
    weights = None
    if a["need_weights"]:
        scores = r.call("ltorch.matmul", qh, r.call("ltorch.transpose", kh, -2, -1))
        scores = r.call("ltorch.mul", scores, 1.0 / math.sqrt(hd))
        probs = r.call("ltorch.softmax", scores, -1)
        o = r.call("ltorch.matmul", probs, vh)
        weights = r.call("ltorch.mean", probs, [1]) if a["average_attn_weights"] else probs
        if not batched:
            weights = r.call("ltorch.reshape", weights, [L, S] if a["average_attn_weights"] else [heads_n, L, S])
    else:
        mask = a["attn_mask"]
        if mask is not None and mask.dtype == torch.bool:
            mask = r.call("ltorch.logical_not", mask)
        o = r.call("ltorch.scaled_dot_product_attention", qh, kh, vh, mask, is_causal=bool(a["is_causal"]) and mask is None)
    o = r.call("ltorch.permute", o, [2, 0, 1, 3])
    o = r.call("ltorch.reshape", o, [L, N, E] if batched else [L, E])
    out = r.call("ltorch.linear", o, a["out_proj_weight"], a["out_proj_bias"])
    return (out, weights)


row(
    F.multi_head_attention_forward,
    sig="query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias, bias_k, "
    "bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias, training=True, "
    "key_padding_mask=None, need_weights=True, attn_mask=None, use_separate_proj_weight=False, "
    "q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None, static_v=None, "
    "average_attn_weights=True, is_causal=False",
)(_mha_forward)
# Tensor methods whose self is not the op's first parameter.
TABLE[T.where] = lambda r, args, kw: Generic("ltorch.where", None, "Tensor.where")(
    r, (args[1], args[0], *args[2:]), kw)
TABLE[T.polygamma] = lambda r, args, kw: Generic("ltorch.polygamma", None, "Tensor.polygamma")(
    r, (args[1], args[0]), kw)


def _max_or_maximum(op, binary):
    def h(r, args, kwargs):
        if len(args) > 1 and isinstance(args[1], torch.Tensor) or isinstance(kwargs.get("other"), torch.Tensor):
            return Generic(binary, None, op)(r, args, kwargs)
        return Generic(op, None, op)(r, args, kwargs)

    return h


for _f in (torch.max, T.max):
    TABLE[_f] = _max_or_maximum("ltorch.max", "ltorch.maximum")
for _f in (torch.min, T.min):
    TABLE[_f] = _max_or_maximum("ltorch.min", "ltorch.minimum")

# ---------------------------------------------------------------- calls with semantics of their own


def _dropout(r, a):
    if not a["training"] or a["p"] == 0:
        return a["input"]
    raise NotImplementedError("dropout in training mode with p > 0 (call model.eval() or use p=0)")


row(F.dropout, sig="input, p=0.5, training=True, inplace=False")(_dropout)
row(torch.dropout, T.dropout if hasattr(T, "dropout") else torch.dropout, sig="input, p, train")(
    lambda r, a: _dropout(r, {"input": a["input"], "p": a["p"], "training": a["train"]})
)
for _f in (torch.rand, torch.randn, torch.rand_like, torch.randn_like, torch.randint, torch.normal):
    TABLE[_f] = lambda r, args, kw, _n=_f.__name__: (_ for _ in ()).throw(NotImplementedError(
        f"torch.{_n}: thunder_rs does not trace torch's random generator; pass random tensors as inputs"))


def _batch_norm(r, args, kwargs):
    """F.batch_norm: in training mode torch updates the running statistics in place; ltorch
    returns them as two more outputs, which are written back (functionalized)."""
    g = Generic("ltorch.batch_norm", F.batch_norm, "torch.nn.functional.batch_norm")
    pos, kw, extra = g.bind_torch(args, kwargs)
    training = kw.get("training", False)
    rm, rv = kw.get("running_mean"), kw.get("running_var")
    updates = bool(training) and rm is not None and rv is not None
    if not updates:
        return g(r, args, kwargs)
    out = r.out
    r.out = (out, rm, rv)
    try:
        y, new_rm, new_rv = g(r, args, kwargs)
    finally:
        r.out = out
    r.write(rm, new_rm)
    r.write(rv, new_rv)
    return y


TABLE[F.batch_norm] = _batch_norm

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


def _tensor(r, args, kw):
    """``torch.tensor(number)``: a 0-d constant (lists would be data baked into the trace)."""
    data = args[0] if args else kw.get("data")
    if isinstance(data, bool) or not isinstance(data, (int, float)):
        raise NotImplementedError("torch.tensor of anything but one Python number (pass the tensor as an input)")
    dtype = kw.get("dtype") or (torch.get_default_dtype() if isinstance(data, float) else torch.int64)
    return r.emit1("ltorch.full", [("I", []), r.v(data), ("D", r.device), ("d", _dtype_name(dtype))])


TABLE[torch.tensor] = _tensor
# Run on meta while tracing (``device="meta"``).
FACTORIES = {torch.tensor, torch.zeros, torch.ones, torch.full, torch.arange}
TABLE[torch.zeros] = _factory(0.0)
TABLE[torch.ones] = _factory(1.0)


def _full(r, a):
    dtype = a["dtype"] or (torch.get_default_dtype() if isinstance(a["fill_value"], float) else torch.int64)
    return r.emit1("ltorch.full", [("I", list(a["size"])), r.v(a["fill_value"]), ("D", r.device), ("d", _dtype_name(dtype))])


row(torch.full, sig="size, fill_value, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False")(_full)
# ---------------------------------------------------------------- metadata (run on meta as is)

for _f in [T.size, T.dim, T.numel, T.__len__, T.is_contiguous, T.element_size, T.is_floating_point,
           T.__format__, T.__repr__, T.__hash__, T.data_ptr, T.stride, torch.is_floating_point,
           torch.is_complex, T.is_complex, torch.numel]:
    PASSTHROUGH.add(_f)
_GETTERS_PASS = {"shape", "dtype", "device", "ndim", "requires_grad", "is_leaf", "grad_fn", "layout",
                 "is_cuda", "is_meta", "names", "_base", "data", "is_sparse", "is_quantized", "is_nested"}
_GETTERS_MAP = {"T": lambda r, x: _mT(r, x, full=True), "mT": lambda r, x: _mT(r, x, full=False)}


def _mT(r, x, full):
    if full and x.dim() != 2:
        return r.emit1("ltorch.permute", [r.v(x), ("I", list(builtins.range(x.dim()))[::-1])])
    return r.emit1("ltorch.transpose", [r.v(x), ("i", -2), ("i", -1)])


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




def _index_put(r, a):
    """``index_put(x, indices, values, accumulate)``: functionalized in ``_indexing``."""
    from . import _indexing as I

    x = a["input"]
    try:
        entries = I.index_put_entries(x, tuple(a["indices"]))
        if any(k == "mask" for k, _, _ in entries):
            if a["accumulate"]:
                raise I.IndexError_("index_put with a boolean mask and accumulate=True")
            return I.setitem(r, x, tuple(a["indices"]), a["values"])
        return I.index_put(r, x, entries, a["values"], bool(a["accumulate"]))
    except I.IndexError_ as e:
        raise NotImplementedError(str(e)) from None


row(torch.index_put, T.index_put, sig="input, indices, values, accumulate=False")(_index_put)
INPLACE[T.index_put_] = T.index_put


# ---------------------------------------------------------------- everything named like an ltorch op

# Builtins named like an ltorch op whose parameters come in another order (the low-level
# ``torch.embedding(weight, indices)``, ``torch.batch_norm(input, weight, bias, ...)``): not
# mapped by name; their torch.nn.functional forms are.
NOT_BY_NAME = (torch.embedding, torch.batch_norm)
AUTO = S.auto_rows(TABLE, skip=NOT_BY_NAME)
# In-place variants of every mapped op (``Tensor.exp_``, ``Tensor.clamp_``, ``torch.relu_``).
for _f in list(TABLE):
    _name = getattr(_f, "__name__", None)
    if not _name or _name.startswith("__"):
        continue
    for _owner in (T, torch):
        _ip = getattr(_owner, _name + "_", None)
        if _ip is not None and _ip not in INPLACE and _ip not in TABLE:
            INPLACE[_ip] = _f
