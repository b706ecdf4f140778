"""``jit``: trace on first call per input signature, compile through thunder-rs, run cached
programs on DLPack tensors; autograd through a ``torch.autograd.Function``; in-place writes to
inputs applied to the caller's tensors after the run."""

from __future__ import annotations

import functools
import time

import torch
import torch.utils._pytree as pytree

from . import _mapping as M
from . import _native
from ._trace import UnsupportedOpError, trace

try:  # the C entry points skip the Python wrappers' checks (a few µs per tensor)
    _to_dlpack = torch._C._to_dlpack
    _from_dlpack = torch._C._from_dlpack

    def _export(t):
        """A capsule of ``t``'s contiguous data. The C entry point takes a tensor that requires
        grad as it is (the run only reads it), where a ``detach`` cost about 0.7 µs a tensor:
        100 µs a call of a module with GPT-2's 148 parameters."""
        return _to_dlpack(t if t.is_contiguous() else t.contiguous())

except AttributeError:  # pragma: no cover
    from torch.utils.dlpack import from_dlpack as _from_dlpack
    from torch.utils.dlpack import to_dlpack as _to_dlpack

    def _export(t):
        return _to_dlpack(t.detach().contiguous())


_SINGLE = object()  # out_spec of a function returning one tensor


def _key_of(x):
    # JittedFunction.__call__ spells the tensor case inline for a module's tensors: keep both
    # alike.
    if isinstance(x, torch.Tensor):
        return (x.shape, x.dtype, x.requires_grad, x.device if x.is_cuda else None)
    if isinstance(x, (int, float, bool, str, type(None))):
        return (type(x), x)
    return (type(x), id(x))


def _renumbered(args, num):
    """Tagged op arguments with their value numbers mapped through ``num``."""
    out = []
    for a in args:
        if isinstance(a, tuple) and a and a[0] == "v":
            out.append(("v", num[a[1]]))
        elif isinstance(a, tuple) and a and a[0] == "T":
            out.append(("T", [num[v] for v in a[1]]))
        else:
            out.append(a)
    return out


class _Entry:
    """One compiled signature."""

    __slots__ = ("program", "captured", "out_spec", "n_outputs", "mutated", "grad_outputs",
                 "wrt", "int_outputs", "cuda", "trace_s")

    def __init__(self, program, captured, out_spec, n_outputs, mutated, grad_outputs, wrt, int_outputs):
        self.program = program
        self.captured = captured
        self.out_spec = out_spec
        self.n_outputs = n_outputs
        self.mutated = mutated  # (input position, output position)
        self.grad_outputs = grad_outputs
        self.wrt = wrt
        self.int_outputs = int_outputs
        self.cuda = None


def _module_tensors_of(module):
    """``module``'s parameters, then its (non-None) buffers, in the order of
    ``named_parameters()`` and ``named_buffers()``: modules depth first, each tensor once (tied
    weights, shared modules)."""
    params, buffers = [], []
    _walk(module, params, buffers, set())
    return params + buffers


def _walk(module, params, buffers, seen):
    # Recursion measured a little faster than an explicit stack (55-58 against 78-90 µs for
    # 99 modules, on a loaded 2-core machine).
    for t in module._parameters.values():
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            params.append(t)
    for t in module._buffers.values():
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            buffers.append(t)
    for child in module._modules.values():
        if child is not None:
            _walk(child, params, buffers, seen)


class _swapped:
    """Puts the tracing stand-ins (meta tensors) in place of a module's parameters and buffers,
    everywhere each one is used (tied weights included), and restores them on exit."""

    def __init__(self, module, extra):
        self.module = module
        self.extra = extra

    def __enter__(self):
        by_id = {}
        for name, t in list(self.module.named_parameters()) + list(self.module.named_buffers()):
            if name in self.extra:
                by_id[id(t)] = self.extra[name]
        self.saved = []
        for mod in self.module.modules():
            for table in (mod._parameters, mod._buffers):
                for k, t in table.items():
                    if t is not None and id(t) in by_id:
                        self.saved.append((table, k, t))
                        table[k] = by_id[id(t)]
        return self

    def __exit__(self, *exc):
        for table, k, t in self.saved:
            table[k] = t
        return False


def _stream(entry):
    """torch's current CUDA stream on the entry's device (a ``CUstream`` as an int), handed to
    the run so that thunder's work is ordered with torch's without the host waiting; None on
    the CPU."""
    return None if entry.cuda is None else torch.cuda.current_stream(entry.cuda).cuda_stream


class _RunProgram(torch.autograd.Function):
    @staticmethod
    def forward(ctx, entry, *inputs):
        caps = [_export(t) for t in inputs]
        outs, saved = entry.program.forward(caps, _stream(entry))
        ctx.entry = entry
        ctx.saved_native = saved
        outs = tuple(_from_dlpack(c) for c in outs)
        ctx.mark_non_differentiable(*[outs[i] for i in entry.int_outputs])
        return outs

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, *grads):
        entry = ctx.entry
        saved = ctx.saved_native
        if saved is None:
            raise RuntimeError(
                "thunder_rs: this forward's backward already ran, and the values it saved were freed "
                "then (backward twice through one graph, retain_graph=True, is not supported)"
            )
        cots = []
        for i in entry.grad_outputs:
            g = grads[i]
            cots.append(_to_dlpack(g.contiguous()))
        res = entry.program.backward(saved, cots, _stream(entry))
        # Freed now, as torch frees what save_for_backward kept: a held loss would otherwise keep
        # the residuals alive, and a forward replayed as a CUDA graph must not overwrite them.
        ctx.saved_native = None
        del saved
        out = [None] * (len(ctx.needs_input_grad) - 1)
        for pos, cap in zip(entry.wrt, res):
            out[pos] = _from_dlpack(cap)
        return (None, *out)


class JittedFunction:
    """``thunder_rs.jit(fn)``: call it like ``fn``."""

    def __init__(self, fn, module=None, cuda_graphs=None):
        self._fn = fn
        self._module = module
        self._cuda_graphs = cuda_graphs
        self._cache = {}
        self._last = None
        self._walk_differs = False
        self.cache_hits = 0
        self.cache_misses = 0
        functools.update_wrapper(self, fn)

    # -- what the module contributes
    def _named_inputs(self):
        if self._module is None:
            return []
        return list(self._module.named_parameters()) + [
            (n, b) for n, b in self._module.named_buffers() if b is not None
        ]

    def _module_tensors(self):
        """The tensors of ``_named_inputs`` in its order, without their names: a cached call
        needs only these, and ``named_parameters`` (which builds every name) took about 300
        µs a call for GPT-2 small, this walk about 50."""
        if self._walk_differs:
            return [t for _, t in self._named_inputs()]
        return _module_tensors_of(self._module)

    def _call_fn(self, extra, *args, **kwargs):
        if self._module is None:
            return self._fn(*args, **kwargs)
        with _swapped(self._module, extra):
            return self._fn(*args, **kwargs)

    def __call__(self, *args, **kwargs):
        # Fast path: positional tensors only (no pytree walk).
        if not kwargs and all(type(x) is torch.Tensor or isinstance(x, torch.Tensor) for x in args):
            flat = args
        else:
            flat, _ = pytree.tree_flatten((args, kwargs))
        owned = self._module_tensors() if self._module is not None else ()
        grad_on = torch.is_grad_enabled()
        # _key_of inlined for the module's tensors (all tensors): 0.3 µs a tensor less.
        key = (grad_on, self._module.training if self._module is not None else None,
               *[_key_of(x) for x in flat],
               *[(t.shape, t.dtype, t.requires_grad, t.device if t.is_cuda else None) for t in owned])
        entry = self._cache.get(key)
        if entry is None:
            self.cache_misses += 1
            named = self._named_inputs()
            if [id(t) for _, t in named] != [id(t) for t in owned]:
                # A module whose named_parameters() order the walk does not reproduce (one
                # that overrides it): names from now on.
                self._walk_differs = True
                owned = [t for _, t in named]
            entry = self._compile(args, kwargs, named, grad_on)
            self._cache[key] = entry
        else:
            self.cache_hits += 1
        self._last = entry
        tensors = [x for x in flat if isinstance(x, torch.Tensor)]
        if owned:
            tensors += owned
        if entry.captured:
            tensors += entry.captured
        if entry.program.has_backward:
            outs = _RunProgram.apply(entry, *tensors)
        else:
            outs, _ = entry.program.forward(
                [_export(t) for t in tensors], _stream(entry))
            outs = [_from_dlpack(c) for c in outs]
        if entry.mutated:
            with torch.no_grad():
                for pos, o in entry.mutated:
                    tensors[pos].copy_(outs[o])
            outs = outs[: entry.n_outputs]
        spec = entry.out_spec
        if spec is _SINGLE:
            return outs[0]
        if spec is None:
            return None
        return pytree.tree_unflatten(list(outs), spec)

    def _compile(self, args, kwargs, named, grad_on):
        t0 = time.perf_counter()
        rec, out = trace(self._call_fn, named, args, kwargs)
        trace_s = time.perf_counter() - t0
        if rec.unsupported:  # only when collecting; trace raises on the first otherwise
            name, site, _ = rec.unsupported[0]
            raise UnsupportedOpError(f"thunder_rs does not support {name}, called at {site}")
        num = rec.numbering()
        flat_out, out_spec = pytree.tree_flatten(out) if out is not None else ([], None)
        if isinstance(out, torch.Tensor):
            out_spec = _SINGLE
        outputs = []
        for o in flat_out:
            if not isinstance(o, torch.Tensor):
                raise UnsupportedOpError(
                    f"the function returned a {type(o).__name__}; thunder_rs returns tensors only"
                )
            outputs.append(num[rec.val[id(o)]])
        n_outputs = len(outputs)
        # Inputs written in place: their final values are extra outputs, copied back.
        mutated = []
        for pos, (name, real, meta) in enumerate(rec.inputs):
            if rec.val[id(meta)] != rec.input_values[pos]:
                if real.requires_grad and grad_on:
                    raise UnsupportedOpError(
                        f"in-place write to input {name!r}, which requires grad; wrap the update in "
                        "torch.no_grad() (as optimizers do)"
                    )
                mutated.append((pos, len(outputs)))
                outputs.append(num[rec.val[id(meta)]])
        inputs = []
        for name, real, meta in rec.inputs:
            inputs.append((name, list(real.shape), M.DTYPES[real.dtype], str(real.device),
                           bool(real.requires_grad and grad_on)))
        # Output types (from the meta run), to type the cotangents.
        out_types = [(tuple(o.shape), o.dtype) for o in flat_out]
        float_outs = [i for i, (_, dt) in enumerate(out_types) if dt.is_floating_point]
        int_outputs = [i for i in range(n_outputs) if i not in float_outs]
        wrt = [i for i, inp in enumerate(inputs) if inp[4]]
        devices = {inp[3] for inp in inputs}
        if len(devices) > 1:
            raise UnsupportedOpError(f"inputs on several devices ({', '.join(sorted(devices))}); move them to one")
        need_grad = grad_on and bool(wrt)
        ops = [
            (s, _renumbered(a, num), [(num[o[0]], *o[1:]) for o in outs], site)
            for s, a, outs, site in rec.ops
        ]
        program = _native.Program(inputs, ops, outputs, float_outs if need_grad else None, self._cuda_graphs)
        entry = _Entry(program, list(rec.captured), out_spec, n_outputs, mutated, float_outs, wrt, int_outputs)
        entry.cuda = next((torch.device(d) for d in devices if d.startswith("cuda")), None)
        entry.trace_s = trace_s
        return entry

    def last_traces(self):
        if self._last is None:
            return []
        return list(self._last.program.traces())

    def last_graph_stats(self):
        if self._last is None:
            return {}
        return {
            side: dict(captures=c, graph_runs=g, eager_runs=e, off=off)
            for side, c, g, e, off in self._last.program.graph_stats()
        }

    def last_compile_timings(self, detail=False):
        if self._last is None:
            return []
        if detail:
            return list(self._last.program.build_stages())
        return [("python trace", self._last.trace_s)] + list(self._last.program.timings())


def jit(fn_or_module, *, cuda_graphs=None):
    """Jits a function or an ``nn.Module`` (its parameters and buffers become inputs).

    ``cuda_graphs``: whether programs on one CUDA device replay as CUDA graphs once their
    inputs' addresses settle (``None``: as plugins.toml's ``cuda_graphs`` or
    ``THUNDER_CUDA_GRAPHS`` say, on by default). A large output of a replay lives in the
    graph's memory: a call made while one is still held runs region by region instead."""
    if cuda_graphs is not None and not isinstance(cuda_graphs, bool):
        raise TypeError(f"thunder_rs.jit: cuda_graphs must be a bool or None, got {type(cuda_graphs).__name__}")
    if isinstance(fn_or_module, torch.nn.Module):
        return JittedFunction(fn_or_module.forward, module=fn_or_module, cuda_graphs=cuda_graphs)
    if not callable(fn_or_module):
        raise TypeError(f"thunder_rs.jit: expected a function or an nn.Module, got {type(fn_or_module).__name__}")
    return JittedFunction(fn_or_module, cuda_graphs=cuda_graphs)


def examine(fn, *args, **kwargs):
    """Traces ``fn`` (a function or module) on meta tensors and returns every unsupported torch
    call as ``(torch name, user source line, reason)``, without compiling."""
    j = fn if isinstance(fn, JittedFunction) else jit(fn)
    rec, _ = trace(j._call_fn, j._named_inputs(), args, kwargs, collect_all=True)
    return list(rec.unsupported)
