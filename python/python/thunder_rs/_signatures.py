"""torch calls bound with the op table's signatures.

Every ltorch op declares its parameters once, with torch's names and defaults, in thunder-core's
op table (``thunder ops --json`` lists them). This module reads that table through the native
extension and turns a torch call into an ltorch call with it:

- a torch function, Tensor method or ``torch.nn.functional`` function whose name is an ltorch
  op's (``torch.logaddexp``, ``Tensor.cumsum``, ``F.silu``) needs no row of its own: ``auto_rows``
  maps it, and thunder-core's binder (the one the trace parser uses) fills the defaults, checks
  each argument's kind and words the errors;
- keywords torch has and ltorch does not are accepted only at values that change nothing
  (``out=None``, ``inplace``, ``reduction='mean'``, ``None``/``False``) or adapted (``dtype=``
  casts the input first, as torch does; ``alpha=`` scales ``other``); any other value is a
  clear "not supported" naming the keyword.

Rows in ``_mapping`` remain only where torch's call differs from the op's (operators,
varargs shapes, factories, indexing, ...).
"""

from __future__ import annotations

import inspect

import torch

from . import _native

# ltorch op id -> [param dict] (name, type, optional, keyword_only, default)
SIGNATURES: dict = _native.signatures()

DTYPES = {
    torch.bool: "b8", torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16", torch.int32: "i32",
    torch.int64: "i64", torch.float16: "f16", torch.bfloat16: "bf16", torch.float32: "f32",
    torch.float64: "f64",
}

_ANY = object()
# torch-only keywords whose value changes nothing here (beyond None and False, always neutral).
_NEUTRAL = {
    "_stacklevel": _ANY,
    # The meta call returns the input itself, so the tracer rebinds it: functionalized.
    "inplace": _ANY,
    "reduction": ("mean",),
    "memory_format": _ANY,
    "dropout_p": (0.0, 0),
    # Only read when max_norm is set, which is refused.
    "norm_type": _ANY,
}


class SignatureMismatch(TypeError):
    """A torch call that does not fit its ltorch op's declared signature."""


def _is_neutral(name, value):
    if value is None or value is False:
        return True
    ok = _NEUTRAL.get(name)
    return ok is _ANY or (ok is not None and any(value == v and type(value) is type(v) for v in ok))


class OpSignature:
    """One ltorch op's parameters as the table declares them."""

    def __init__(self, op: str, params: list):
        self.op = op
        self.params = params
        self.names = [p["name"] for p in params]
        self.positional = [p["name"] for p in params if not p["keyword_only"]]

    def __str__(self):
        return f"{self.op}({', '.join(self.names)})"


_SIG_CACHE: dict = {}


def signature(op: str) -> OpSignature:
    s = _SIG_CACHE.get(op)
    if s is None:
        params = SIGNATURES.get(op)
        if params is None:
            raise KeyError(f"{op} has no declared signature in the op table")
        s = _SIG_CACHE[op] = OpSignature(op, params)
    return s


def _python_params(func):
    """Parameter names of a Python-level torch function (``F.embedding``), ``self`` included,
    or None for builtins, whose positional parameters are taken to be the op's."""
    if not inspect.isfunction(func):
        return None
    try:
        params = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):
        return None
    if any(p.kind == p.VAR_POSITIONAL for p in params):  # a dispatcher (F.max_pool2d)
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def encode(r, x):
    """A Python argument as a tagged one for the native binder."""
    if isinstance(x, torch.dtype):
        return ("d", DTYPES[x])
    if isinstance(x, torch.device):
        return ("D", str(x))
    if isinstance(x, (list, tuple)) and x and all(isinstance(t, torch.Tensor) for t in x):
        return ("T", [r.v(t)[1] for t in x])
    return r.v(x)


class Generic:
    """The handler of a torch callable that is the ltorch op ``op`` under torch's names."""

    def __init__(self, op: str, func, torch_name: str, aliases=None):
        self.op = op
        self.aliases = aliases or {}
        self.sig = signature(op)
        self.torch_name = torch_name
        names = _python_params(func)
        if names and names[0] == "self":
            names[0] = self.sig.names[0]
        self.torch_positional = names

    def bind_torch(self, args, kwargs):
        """torch's positional and keyword arguments as (positional, keywords) for the op,
        with torch-only keywords taken out: ``(pos, kw, extra)``."""
        names = self.torch_positional
        if names is not None:
            if len(args) > len(names):
                raise SignatureMismatch(f"{self.torch_name}: {len(args)} positional arguments, torch takes {len(names)}")
            kw = dict(zip(names, args))
            for k, v in kwargs.items():
                if k in kw:
                    raise SignatureMismatch(f"{self.torch_name}: got multiple values for {k!r}")
                kw[k] = v
            pos = []
        else:
            pos, kw = list(args), dict(kwargs)
        for k, v in self.aliases.items():
            if k in kw:
                kw[v] = kw.pop(k)
        extra = {k: kw.pop(k) for k in list(kw) if k not in self.sig.names}
        return pos, kw, extra

    def __call__(self, r, args, kwargs):
        pos, kw, extra = self.bind_torch(args, kwargs)
        cast = extra.pop("dtype", None)
        alpha = extra.pop("alpha", 1)
        for k, v in extra.items():
            if not _is_neutral(k, v):
                raise NotImplementedError(
                    f"{k}={v!r}: {self.sig} has no such parameter, and thunder_rs supports {k}= only "
                    "at a value that changes nothing"
                )
        first = self.sig.names[0]
        if cast is not None:
            pos, kw = _replace(pos, kw, self.sig, first, lambda x: r.emit1("ltorch.to", [r.v(x), ("d", DTYPES[cast])]))
        if alpha != 1:
            if "other" not in self.sig.names:
                raise NotImplementedError(f"alpha={alpha!r}: {self.sig} has no `other` to scale")
            pos, kw = _replace(pos, kw, self.sig, "other", lambda y: r.emit1("ltorch.mul", [r.v(y), r.v(alpha)])
                               if isinstance(y, torch.Tensor) else y * alpha)
        try:
            bound = _native.bind(self.op, [encode(r, a) for a in pos], [(k, encode(r, v)) for k, v in kw.items()])
        except TypeError as e:
            raise SignatureMismatch(f"{self.torch_name} as {e}") from None
        n = _n_tensors(r.out)
        outs = r.emit(self.op, bound, n)
        return outs[0] if n == 1 and isinstance(r.out, torch.Tensor) else tuple(outs)


def _replace(pos, kw, sig, name, fn):
    if name in kw:
        kw = dict(kw, **{name: fn(kw[name])})
        return pos, kw
    i = sig.positional.index(name) if name in sig.positional else None
    if i is not None and i < len(pos):
        pos = list(pos)
        pos[i] = fn(pos[i])
    return pos, kw


def _n_tensors(out):
    if isinstance(out, torch.Tensor):
        return 1
    if isinstance(out, (list, tuple)):
        return sum(1 for o in out if isinstance(o, torch.Tensor))
    return 0


def torch_callables(short: str):
    """torch's callables named ``short``: ``torch.X``, ``Tensor.X``, ``F.X`` where they exist."""
    import torch.nn.functional as F

    out = []
    for owner, prefix in ((torch, "torch."), (torch.Tensor, "Tensor."), (F, "torch.nn.functional.")):
        f = getattr(owner, short, None)
        if callable(f) and not isinstance(f, type):
            out.append((f, prefix + short))
    return out


def auto_rows(table: dict, skip=()):
    """Adds a generic row for every torch callable named like an ltorch op and not already in
    ``table``; returns ``{torch name: op}`` of the rows added."""
    added = {}
    for op in SIGNATURES:
        short = op.rsplit(".", 1)[-1]
        for f, name in torch_callables(short):
            if f in table or f in skip:
                continue
            table[f] = Generic(op, f, name)
            added[name] = op
    return added
