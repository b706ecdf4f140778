"""Tracing: run the user's function on meta tensors under a TorchFunctionMode that records every
torch call as ltorch calls on numbered values (through ``_mapping.TABLE``).

In-place ops are functionalized: ``x.add_(y)`` records ``ltorch.add`` and rebinds ``x`` to the
new value; inputs whose value changed are written back by the caller. An in-place op on a view
(``x[0].add_(1)``, ``x.view(...).mul_(2)``) or a later use of a view whose base was written is
refused with an error, never computed wrong.
"""

from __future__ import annotations

import os
import sys
import traceback

import torch
from torch.overrides import TorchFunctionMode

from . import _mapping as M

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


class UnsupportedOpError(NotImplementedError):
    """A torch call that thunder_rs cannot map to ltorch (yet)."""


def user_site() -> str:
    """The innermost frame outside torch and thunder_rs: ``file:line in func: source``."""
    for fr in reversed(traceback.extract_stack()):
        f = os.path.abspath(fr.filename)
        if f.startswith(_PKG_DIR) or f.startswith(_TORCH_DIR):
            continue
        src = (fr.line or "").strip()
        return f"{fr.filename}:{fr.lineno} in {fr.name}: {src}"
    return "<unknown>"


class Recorder:
    def __init__(self, collect_all: bool = False):
        self.ops = []  # (symbol, args, outputs, site)
        self.val = {}  # id(meta tensor) -> value number
        self.keep = []  # meta tensors kept alive while their ids are keys
        self.n = 0
        self.inputs = []  # (name, meta)
        self.captured = []  # real tensors met during tracing, passed as extra inputs
        self.captured_ids = {}
        self.unsupported = []  # (torch name, site)
        self.collect_all = collect_all
        self.stale = set()  # ids of views whose base was written in place
        self._site = None
        self.device = "cpu"  # where factories put their tensors: the inputs' device

    # -- values
    def new_value(self, meta) -> int:
        v = self.n
        self.n += 1
        self.val[id(meta)] = v
        self.keep.append(meta)
        return v

    def add_input(self, name, real):
        if not self.inputs:
            self.device = str(real.device)
        meta = torch.empty(real.shape, dtype=real.dtype, device="meta", requires_grad=False)
        self.inputs.append((name, real, meta))
        self.new_value(meta)
        return meta

    def v(self, x):
        """A tagged ltorch argument for a tensor, number, None, or an int list."""
        if isinstance(x, torch.Tensor):
            if id(x) in self.stale:
                raise UnsupportedOpError(
                    f"a view of a tensor written in place is read afterwards (at {self.site()}); "
                    "thunder_rs functionalizes in-place ops and cannot keep views of them in sync: "
                    "take the view again after the in-place op"
                )
            if id(x) not in self.val:
                raise UnsupportedOpError(f"a tensor not produced by traced code (at {self.site()})")
            return ("v", self.val[id(x)])
        if isinstance(x, _Value):
            return ("v", x.v)
        if x is None:
            return ("n",)
        if isinstance(x, bool):
            return ("b", x)
        if isinstance(x, int):
            return ("i", x)
        if isinstance(x, float):
            return ("f", x)
        if isinstance(x, (list, tuple, torch.Size)) and all(isinstance(i, int) for i in x):
            return ("I", [int(i) for i in x])
        if isinstance(x, str):
            return ("s", x)
        raise UnsupportedOpError(f"argument {x!r} of type {type(x).__name__} (at {self.site()})")

    def emit(self, symbol, args, n=1):
        outs = []
        for _ in range(n):
            outs.append(_Value(self.n))
            self.n += 1
        self.ops.append([symbol, args, [[o.v, None, None] for o in outs], self.site()])
        return outs

    def emit1(self, symbol, args):
        return self.emit(symbol, args, 1)[0]

    def site(self):
        if self._site is None:
            self._site = user_site()
        return self._site

    # -- binding results to meta outputs
    def bind(self, result, meta_out):
        """Binds handler results (``_Value``s, or tracked tensors passed through) to torch's meta
        outputs, recording torch's shapes and dtypes so the Rust replay can check its own."""
        metas = list(meta_out) if isinstance(meta_out, (tuple, list)) else [meta_out]
        results = list(result) if isinstance(result, (tuple, list)) else [result]
        if len(metas) != len(results):
            raise UnsupportedOpError(f"{len(results)} results for {len(metas)} torch outputs")
        for res, meta in zip(results, metas):
            if not isinstance(meta, torch.Tensor):
                continue
            if isinstance(res, torch.Tensor):
                # An identity (contiguous, clone, dropout in eval): the same value.
                self.val[id(meta)] = self.val[id(res)]
                self.keep.append(meta)
                continue
            self.val[id(meta)] = res.v
            self.keep.append(meta)
            self._annotate(res.v, meta)

    def _annotate(self, v, meta):
        for op in reversed(self.ops):
            for o in op[2]:
                if o[0] == v:
                    o[1] = list(meta.shape)
                    o[2] = M.DTYPES[meta.dtype]
                    return


class _Value:
    __slots__ = ("v",)

    def __init__(self, v):
        self.v = v


def _to_meta(x, rec):
    """Real tensors met while tracing (closure constants, unregistered buffers) become extra
    inputs; meta tensors are ours."""
    if isinstance(x, torch.Tensor) and not x.is_meta:
        key = id(x)
        if key not in rec.captured_ids:
            meta = rec.add_input(f"captured{len(rec.captured)}", x)
            rec.captured.append(x)
            rec.captured_ids[key] = meta
        return rec.captured_ids[key]
    if isinstance(x, (list, tuple)) and any(isinstance(i, torch.Tensor) for i in x):
        return type(x)(_to_meta(i, rec) for i in x)
    return x


class TracingMode(TorchFunctionMode):
    def __init__(self, rec: Recorder):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rec = self.rec
        rec._site = None
        args = tuple(_to_meta(a, rec) for a in args)
        kwargs = {k: _to_meta(v, rec) for k, v in kwargs.items()}
        getter = M.getter_name(func)
        if func in M.PASSTHROUGH or (getter in M._GETTERS_PASS):
            return func(*args, **kwargs)
        if getter in M._GETTERS_MAP:
            out = func(*args, **kwargs)
            rec.bind(M._GETTERS_MAP[getter](rec, args[0]), out)
            return out
        if func is torch.Tensor.__getitem__:
            return self._getitem(func, args, kwargs)
        if func is torch.Tensor.__setitem__:
            return self._setitem(args)
        if func in M.INPLACE or func in (torch.Tensor.copy_, torch.Tensor.zero_, torch.Tensor.fill_):
            return self._inplace(func, args, kwargs)
        handler = M.TABLE.get(func)
        if handler is None:
            return self._unsupported(func, args, kwargs, None)
        try:
            result = handler(rec, args, kwargs)
        except (NotImplementedError, TypeError) as e:
            if isinstance(e, UnsupportedOpError):
                raise
            return self._unsupported(func, args, kwargs, str(e))
        out = func(*args, **kwargs)
        rec.bind(result, out)
        return out

    def _unsupported(self, func, args, kwargs, why):
        name = M.torch_name(func)
        site = self.rec.site()
        self.rec.unsupported.append((name, site, why))
        if self.rec.collect_all:
            # Keep going on meta so examine() finds every unsupported call; the outputs get
            # fresh values that the (never compiled) program does not define.
            out = func(*args, **kwargs)
            for o in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(o, torch.Tensor):
                    self.rec.new_value(o)
            return out
        detail = f" ({why})" if why else ""
        raise UnsupportedOpError(
            f"thunder_rs does not support {name}{detail}, called at {site}; "
            "thunder_rs.examine(fn, *args) lists every unsupported call"
        )

    # -- indexing
    def _index_plan(self, x, idx):
        """Basic indexing (ints, slices with step > 0, None, ...) as per-dim steps."""
        if not isinstance(idx, tuple):
            idx = (idx,)
        n_specified = sum(1 for i in idx if i is not None and i is not Ellipsis)
        plan = []
        dim = 0
        for i in idx:
            if i is Ellipsis:
                skip = x.dim() - n_specified
                plan += [("all", dim + k) for k in range(skip)]
                dim += skip
            elif i is None:
                plan.append(("new", None))
            elif isinstance(i, bool) or not isinstance(i, (int, slice)):
                raise UnsupportedOpError(
                    f"indexing with {type(i).__name__} (at {self.rec.site()}); basic indexing "
                    "(ints, slices, None, ...) is supported, use index_select or gather for tensors"
                )
            else:
                plan.append((i, dim))
                dim += 1
        return plan

    def _getitem(self, func, args, kwargs):
        rec = self.rec
        x, idx = args
        out = func(x, idx)
        cur = x
        d = 0  # dim in the current value
        squeeze = []
        for step, dim in self._index_plan(x, idx):
            if step == "all":
                d += 1
            elif step == "new":
                cur = rec.emit1("ltorch.unsqueeze", [rec.v(cur), ("i", d)])
                d += 1
            elif isinstance(step, int):
                size = x.shape[dim]
                i = step + size if step < 0 else step
                cur = rec.emit1("ltorch.slice", [rec.v(cur), ("i", d), ("i", i), ("i", i + 1), ("i", 1)])
                squeeze.append(d)
                d += 1
            else:
                start, stop, stp = step.indices(x.shape[dim])
                if stp <= 0:
                    raise UnsupportedOpError(f"slice step {stp} (at {rec.site()})")
                if (start, stop, stp) != (0, x.shape[dim], 1):
                    cur = rec.emit1("ltorch.slice", [rec.v(cur), ("i", d), ("i", start), ("i", max(stop, start)), ("i", stp)])
                d += 1
        if squeeze:
            cur = rec.emit1("ltorch.squeeze", [rec.v(cur), ("I", squeeze)])
        if cur is x:
            cur = rec.emit1("ltorch.reshape", [rec.v(x), ("I", list(x.shape))])
        rec.bind(cur, out)
        return out

    def _setitem(self, args):
        """``x[idx] = v`` for basic indices: ``where(mask, pad(v), x)``."""
        rec = self.rec
        x, idx, value = args
        self._check_target(x)
        region = []  # per dim of x: (start, stop)
        plan = self._index_plan(x, idx)
        kept_shape = []
        for step, dim in plan:
            if step == "new":
                continue
            size = x.shape[dim]
            if step == "all":
                region.append((0, size))
                kept_shape.append(size)
            elif isinstance(step, int):
                i = step + size if step < 0 else step
                region.append((i, i + 1))
                kept_shape.append(1)
            else:
                start, stop, stp = step.indices(size)
                if stp != 1:
                    raise UnsupportedOpError(f"x[idx] = v with slice step {stp} (at {rec.site()})")
                region.append((start, max(stop, start)))
                kept_shape.append(max(stop, start) - start)
        for dim in range(len(region), x.dim()):
            region.append((0, x.shape[dim]))
            kept_shape.append(x.shape[dim])
        dt = M.DTYPES[x.dtype]
        if isinstance(value, torch.Tensor):
            val = rec.emit1("ltorch.to", [rec.v(value), ("d", dt)])
            val = rec.emit1("ltorch.expand", [rec.v(_bcast_view(rec, val, value, kept_shape)), ("I", kept_shape)])
        else:
            val = rec.emit1("ltorch.full", [("I", kept_shape), rec.v(value), ("D", rec.device), ("d", dt)])
        pads = []
        for (start, stop), size in reversed(list(zip(region, x.shape))):
            pads += [start, size - stop]
        padded = rec.emit1("ltorch.pad", [rec.v(val), ("I", pads), ("s", "constant"), ("f", 0.0)])
        ones = rec.emit1("ltorch.full", [("I", kept_shape), ("b", True), ("D", rec.device), ("d", "b8")])
        mask = rec.emit1("ltorch.pad", [rec.v(ones), ("I", pads), ("s", "constant"), ("b", False)])
        new = rec.emit1("ltorch.where", [rec.v(mask), rec.v(padded), rec.v(x)])
        self._rebind(x, new)
        return None

    # -- in-place
    def _check_target(self, x):
        if x._base is not None:
            raise UnsupportedOpError(
                f"in-place write to a view (at {self.rec.site()}); thunder_rs functionalizes in-place "
                "ops on whole tensors only: write to the base tensor, or use the out-of-place op"
            )
        if id(x) not in self.rec.val:
            raise UnsupportedOpError(f"in-place write to an untracked tensor (at {self.rec.site()})")

    def _rebind(self, x, new):
        rec = self.rec
        rec.val[id(x)] = new.v
        rec._annotate(new.v, x)
        # Views of x taken before the write would be stale.
        for t in rec.keep:
            if t is not x and getattr(t, "_base", None) is x:
                rec.stale.add(id(t))

    def _inplace(self, func, args, kwargs):
        rec = self.rec
        x = args[0]
        self._check_target(x)
        dt = M.DTYPES[x.dtype]
        if func is torch.Tensor.zero_:
            new = rec.emit1("ltorch.full", [("I", list(x.shape)), ("f", 0.0), ("D", rec.device), ("d", dt)])
        elif func is torch.Tensor.fill_:
            new = rec.emit1("ltorch.full", [("I", list(x.shape)), rec.v(args[1]), ("D", rec.device), ("d", dt)])
        elif func is torch.Tensor.copy_:
            src = args[1]
            new = rec.emit1("ltorch.to", [rec.v(src), ("d", dt)])
            if tuple(src.shape) != tuple(x.shape):
                new = rec.emit1("ltorch.expand", [rec.v(_bcast_view(rec, new, src, list(x.shape))), ("I", list(x.shape))])
        else:
            out_of_place = M.INPLACE[func]
            handler = M.TABLE[out_of_place]
            try:
                res = handler(rec, args, kwargs)
            except (NotImplementedError, TypeError) as e:
                if isinstance(e, UnsupportedOpError):
                    raise
                return self._unsupported(func, args, kwargs, str(e))
            new = rec.emit1("ltorch.to", [rec.v(res), ("d", dt)])
        self._rebind(x, new)
        return x


def _bcast_view(rec, val, like, shape):
    """Reshapes ``val`` (shaped as ``like``) so that it broadcasts to ``shape`` by expand."""
    lead = len(shape) - like.dim()
    if lead < 0:
        squeezable = [i for i in range(-lead) if like.shape[i] == 1]
        if len(squeezable) != -lead:
            raise UnsupportedOpError(f"cannot broadcast {tuple(like.shape)} to {tuple(shape)}")
        return rec.emit1("ltorch.reshape", [rec.v(val), ("I", list(like.shape[-lead:]))])
    if lead == 0:
        return val
    return rec.emit1("ltorch.reshape", [rec.v(val), ("I", [1] * lead + list(like.shape))])


def trace(fn, named_inputs, args, kwargs, collect_all=False):
    """Runs ``fn`` on meta copies of the tensors in ``args``/``kwargs`` and the named inputs
    (module parameters and buffers, substituted by the caller through ``named_inputs``)."""
    rec = Recorder(collect_all=collect_all)
    flat, spec = _flatten((args, kwargs))
    metas = []
    for i, x in enumerate(flat):
        if isinstance(x, torch.Tensor):
            metas.append(rec.add_input(f"x{i}", x))
        else:
            metas.append(x)
    extra = {}
    for name, t in named_inputs:
        extra[name] = rec.add_input(_ident(name), t)
    margs, mkwargs = _unflatten(metas, spec)
    with TracingMode(rec):
        out = fn(extra, *margs, **mkwargs)
    return rec, out


def _ident(name):
    return "".join(c if c.isalnum() else "_" for c in name)


def _flatten(tree):
    import torch.utils._pytree as pytree

    return pytree.tree_flatten(tree)


def _unflatten(leaves, spec):
    import torch.utils._pytree as pytree

    return pytree.tree_unflatten(leaves, spec)


def python_version_ok():
    return sys.version_info >= (3, 9)
