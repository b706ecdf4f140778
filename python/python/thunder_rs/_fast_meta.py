"""Meta outputs of the hottest traced calls, made directly instead of by torch's meta kernels.

Tracing runs every torch call on meta tensors for its output's shape and dtype. For
``linear``, ``layer_norm``, ``scaled_dot_product_attention``, ``gelu`` and same-shape
``add``/``sub``/``mul`` torch computes that with its Python references and decompositions
(``addmm``, ``native_layer_norm``, the attention math, broadcasting and promotion rules): about
three quarters of GPT-2 small's 120 ms trace. Their output is the shape of an input with at most
one dim changed, so it is made here with one ``torch.empty`` on meta.

Only the plain cases are taken (same dtype everywhere, shapes that agree, no mask, no
broadcasting between q, k and v); anything else returns ``None`` and torch's meta kernel runs,
so a call torch would refuse is still refused by torch, with torch's message.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _bind(args, kwargs, names, defaults):
    """``names`` bound from positional ``args`` and ``kwargs``; ``None`` on anything unknown."""
    if len(args) > len(names) or any(k not in names for k in kwargs):
        return None
    out = dict(defaults)
    out.update(zip(names, args))
    out.update(kwargs)
    if any(n not in out for n in names):
        return None
    return out


def _plain(*ts):
    """Meta tensors of one floating dtype (``None`` entries skipped)."""
    ts = [t for t in ts if t is not None]
    return all(type(t) is torch.Tensor and t.is_meta for t in ts) and len({t.dtype for t in ts}) == 1 and ts[0].dtype.is_floating_point


def _empty(shape, like):
    return torch.empty(tuple(shape), dtype=like.dtype, device="meta")


def _linear(args, kwargs):
    a = _bind(args, kwargs, ("input", "weight", "bias"), {"bias": None})
    if a is None:
        return None
    x, w, b = a["input"], a["weight"], a["bias"]
    if not _plain(x, w, b) or x.dim() < 1 or w.dim() != 2 or x.shape[-1] != w.shape[1]:
        return None
    if b is not None and tuple(b.shape) != (w.shape[0],):
        return None
    return _empty((*x.shape[:-1], w.shape[0]), x)


def _layer_norm(args, kwargs):
    a = _bind(
        args, kwargs, ("input", "normalized_shape", "weight", "bias", "eps"),
        {"weight": None, "bias": None, "eps": 1e-5},
    )
    if a is None:
        return None
    x, ns = a["input"], a["normalized_shape"]
    if isinstance(ns, int):
        ns = (ns,)
    if not isinstance(ns, (tuple, list, torch.Size)) or not all(isinstance(n, int) for n in ns):
        return None
    ns = tuple(ns)
    if not _plain(x, a["weight"], a["bias"]) or len(ns) == 0 or x.dim() < len(ns):
        return None
    if tuple(x.shape[-len(ns):]) != ns:
        return None
    if any(p is not None and tuple(p.shape) != ns for p in (a["weight"], a["bias"])):
        return None
    return _empty(x.shape, x)


def _sdpa(args, kwargs):
    a = _bind(
        args, kwargs,
        ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa"),
        {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False},
    )
    if a is None or a["attn_mask"] is not None or a["enable_gqa"]:
        return None
    q, k, v = a["query"], a["key"], a["value"]
    if not _plain(q, k, v) or not (q.dim() == k.dim() == v.dim() >= 3):
        return None
    if q.shape[:-2] != k.shape[:-2] or k.shape[:-2] != v.shape[:-2]:
        return None
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        return None
    return _empty((*q.shape[:-1], v.shape[-1]), q)


def _gelu(args, kwargs):
    a = _bind(args, kwargs, ("input", "approximate"), {"approximate": "none"})
    if a is None or a["approximate"] not in ("none", "tanh") or not _plain(a["input"]):
        return None
    return _empty(a["input"].shape, a["input"])


def _same_shape_binary(args, kwargs):
    """``a op b`` on two floating tensors of one shape and dtype: no broadcasting, no
    promotion, no ``alpha``."""
    if kwargs or len(args) != 2:
        return None
    x, y = args
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor)) or not _plain(x, y):
        return None
    if x.shape != y.shape:
        return None
    return _empty(x.shape, x)


T = torch.Tensor
FAST_META = {
    F.linear: _linear,
    F.layer_norm: _layer_norm,
    F.scaled_dot_product_attention: _sdpa,
    F.gelu: _gelu,
}
for _f in (T.__add__, T.add, torch.add, T.__sub__, T.sub, torch.sub, T.__mul__, T.mul, torch.mul):
    FAST_META[_f] = _same_shape_binary


def output(func, args, kwargs):
    """The meta output of ``func(*args, **kwargs)`` when it is a plain case of a call above,
    else ``None``."""
    make = FAST_META.get(func)
    return None if make is None else make(args, kwargs)
