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
import gc
import linecache

import torch
from torch.overrides import TorchFunctionMode

from . import _fast_meta
from . import _indexing as I
from . import _mapping as M
from . import _native
from ._signatures import encode

_PKG_DIR = os.path.dirname(os.path.abspath(__file__))
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__))


class UnsupportedOpError(NotImplementedError):
    """A torch call that thunder_rs cannot map to ltorch (yet)."""


_OURS: dict = {}  # code filename -> whether it is torch's or ours


def _is_ours(filename: str) -> bool:
    ours = _OURS.get(filename)
    if ours is None:
        f = os.path.abspath(filename)
        ours = _OURS[filename] = f.startswith(_PKG_DIR) or f.startswith(_TORCH_DIR)
    return ours


def user_site() -> str:
    """The innermost frame outside torch and thunder_rs: ``file:line in func: source``.
    Walks frames up from here (the whole stack is not extracted: this runs once per traced
    torch call, and ``traceback.extract_stack`` cost GPT-2 small half its tracing time)."""
    fr = sys._getframe(1)
    while fr is not None and _is_ours(fr.f_code.co_filename):
        fr = fr.f_back
    if fr is None:
        return "<unknown>"
    code = fr.f_code
    src = linecache.getline(code.co_filename, fr.f_lineno).strip()
    return f"{code.co_filename}:{fr.f_lineno} in {code.co_name}: {src}"


class Recorder:
    def __init__(self, collect_all: bool = False):
        self.ops = []  # (symbol, args, outputs, site)
        self.val = {}  # id(meta tensor) -> value number
        self.keep = []  # meta tensors kept alive while their ids are keys
        self.n = 0
        self.inputs = []  # (name, real, meta)
        self.input_values = []  # each input's value number when it was added
        self.captured = []  # real tensors met during tracing, passed as extra inputs
        self.captured_ids = {}
        self.unsupported = []  # (torch name, site)
        self.collect_all = collect_all
        self.stale = set()  # ids of views whose base was written in place
        self._site = None
        self.device = "cpu"  # where factories put their tensors: the inputs' device
        self.out = None  # torch's meta result of the call being mapped

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
        self.input_values.append(self.new_value(meta))
        return meta

    def numbering(self):
        """Old value number -> the program's: input ``i`` is value ``i`` there, and a tensor
        captured mid-trace (a closure's module weight) was numbered when met, after ops."""
        first = {old: pos for pos, old in enumerate(self.input_values)}
        order = {}
        nxt = len(first)
        for old in range(self.n):
            if old in first:
                order[old] = first[old]
            else:
                order[old] = nxt
                nxt += 1
        return order

    def write(self, x, new):
        """An in-place write of ``new`` (a value) to the tensor ``x``: later reads of ``x``
        read ``new``; views of ``x`` taken before are stale."""
        if x._base is not None:
            raise UnsupportedOpError(
                f"in-place write to a view (at {self.site()}); thunder_rs functionalizes in-place "
                "ops on whole tensors only: write to the base tensor, or use the out-of-place op"
            )
        if id(x) not in self.val:
            raise UnsupportedOpError(f"in-place write to an untracked tensor (at {self.site()})")
        self.val[id(x)] = new.v
        self._annotate(new.v, x)
        for t in self.keep:
            if t is not x and getattr(t, "_base", None) is x:
                self.stale.add(id(t))

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

    def call(self, op, *args, **kwargs):
        """Records the ltorch op ``op`` called as torch would be (bound with the op table's
        signature); returns its one new value."""
        bound = _native.bind(op, [encode(self, a) for a in args], [(k, encode(self, v)) for k, v in kwargs.items()])
        return self.emit1(op, bound)

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
        # Factories make their tensor on meta, like every traced value.
        out = _fast_meta.output(func, args, kwargs)
        if out is None:
            out = func(*args, **dict(kwargs, device="meta")) if func in M.FACTORIES else func(*args, **kwargs)
        rec.out = out
        try:
            result = handler(rec, args, kwargs)
        except (NotImplementedError, TypeError) as e:
            if isinstance(e, UnsupportedOpError):
                raise
            return self._unsupported(func, args, kwargs, str(e), out)
        rec.bind(result, out)
        return out

    def _unsupported(self, func, args, kwargs, why, out=None):
        name = M.torch_name(func)
        site = self.rec.site()
        self.rec.unsupported.append((name, site, why))
        if self.rec.collect_all:
            # Keep going on meta so examine() finds every unsupported call; the outputs get
            # fresh values that the (never compiled) program does not define.
            if out is None:
                try:
                    out = func(*args, **kwargs)
                except Exception:  # torch cannot run it on meta either: stop here
                    raise UnsupportedOpError(f"thunder_rs does not support {name} ({why}), called at {site}") from None
            for o in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(o, torch.Tensor):
                    self.rec.new_value(o)
            return out
        detail = f" ({why})" if why else ""
        raise UnsupportedOpError(
            f"thunder_rs does not support {name}{detail}, called at {site}; "
            "thunder_rs.examine(fn, *args) lists every unsupported call"
        )

    # -- indexing (``_indexing``)
    def _getitem(self, func, args, kwargs):
        rec = self.rec
        x, idx = args
        try:
            cur = I.getitem(rec, x, idx)
        except I.IndexError_ as e:
            return self._unsupported(func, args, kwargs, str(e))
        out = func(x, idx)
        rec.bind(cur, out)
        return out

    def _setitem(self, args):
        rec = self.rec
        x, idx, value = args
        self._check_target(x)
        try:
            new = I.setitem(rec, x, idx, value)
        except I.IndexError_ as e:
            return self._unsupported(torch.Tensor.__setitem__, args, {}, str(e), x)
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
        self.rec.write(x, new)

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
            rec.out = out_of_place(*args, **kwargs)
            if not isinstance(rec.out, torch.Tensor) or tuple(rec.out.shape) != tuple(x.shape):
                return self._unsupported(func, args, kwargs, "an in-place op that changes the shape")
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


def _prewarm():
    """torch imports about 900 modules (sympy, its decompositions, the meta registrations:
    over a second of CPU) on the first meta-tensor op of a process. Done in a thread started
    at ``import thunder_rs``, it overlaps with what the user does before the first jit call
    (building and initializing a model runs in torch's C++, which releases the GIL)."""
    try:
        torch.empty(1, device="meta") + 1
    except Exception:  # noqa: BLE001 (the first trace will meet and report the problem)
        pass


_PREWARM = None
if os.environ.get("THUNDER_RS_PREWARM", "1") != "0":
    import atexit
    import threading

    _PREWARM = threading.Thread(target=_prewarm, name="thunder_rs-prewarm", daemon=True)
    _PREWARM.start()
    atexit.register(lambda: _PREWARM.join(timeout=10))


def trace(fn, named_inputs, args, kwargs, collect_all=False):
    """Runs ``fn`` on meta copies of the tensors in ``args``/``kwargs`` and the named inputs
    (module parameters and buffers, substituted by the caller through ``named_inputs``)."""
    if _PREWARM is not None and _PREWARM.is_alive():
        _PREWARM.join()
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
    # Tracing allocates many short-lived objects; a full collection of the heap torch's lazy
    # imports left (run by the collector's thresholds mid-trace) cost GPT-2 small's first
    # trace 0.2 s. Reference counting frees them; cycles wait until the trace is done.
    gc_was_on = gc.isenabled()
    gc.disable()
    try:
        with TracingMode(rec):
            out = fn(extra, *margs, **mkwargs)
    finally:
        if gc_was_on:
            gc.enable()
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
