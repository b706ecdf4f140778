"""Indexing and index assignment, functionalized into ltorch ops.

- ``x[...]`` with ints, slices (step > 0), None and ``...``: slice/squeeze/unsqueeze.
- Advanced indexing ``x[idx]``, ``x[:, i, j]``, ints mixed with index tensors: the indexed dims
  are merged into one and read with one ``index_select`` of the linear index (negative indices
  wrapped as torch does). torch's placement rule holds: the result dims of adjacent index
  tensors stay in place, those of separated ones go first.
- ``x[idx] = v`` / ``index_put_(indices, v)``: with ``accumulate=True`` one ``index_add``;
  without, the last write to a position wins (torch leaves repeated indices unspecified; on the
  CPU its loop keeps the last), computed exactly with integer ``index_add`` of positions and an
  ``index_select`` of the values; the check for repeats compares every pair of indices, so it
  costs n² for n written elements.
- ``x[mask] = v`` with a boolean mask over leading dims and ``v`` a number or a tensor that
  broadcasts to one masked element: ``where``. ``x[mask]`` (a data-dependent shape) is refused.
- ``x[a:b:s] = v`` with steps > 1: ``v`` is spread over the region by ``index_select`` and a
  step mask, then written with ``where`` like unit-step slices.
"""

from __future__ import annotations

import math

import torch

from ._signatures import DTYPES


class IndexError_(NotImplementedError):
    """Indexing thunder_rs cannot express (raised as UnsupportedOpError by the tracer)."""


def _entries(x, idx):
    """The index as a list of ``(kind, item, dim of x)``; kinds: slice, int, tensor, mask,
    new (None). ``...`` is expanded."""
    if not isinstance(idx, tuple):
        idx = (idx,)
    used = 0
    for i in idx:
        if i is None or i is Ellipsis:
            continue
        if isinstance(i, torch.Tensor) and i.dtype == torch.bool:
            used += i.dim()
        else:
            used += 1
    out = []
    dim = 0
    for i in idx:
        if i is Ellipsis:
            for _ in range(x.dim() - used):
                out.append(("slice", slice(None), dim))
                dim += 1
        elif i is None:
            out.append(("new", None, None))
        elif isinstance(i, bool):
            raise IndexError_("indexing with a Python bool")
        elif isinstance(i, int):
            out.append(("int", i, dim))
            dim += 1
        elif isinstance(i, slice):
            out.append(("slice", i, dim))
            dim += 1
        elif isinstance(i, torch.Tensor) and i.dtype == torch.bool:
            out.append(("mask", i, dim))
            dim += i.dim()
        elif isinstance(i, torch.Tensor) and not i.is_floating_point() and not i.is_complex():
            out.append(("tensor", i, dim))
            dim += 1
        elif isinstance(i, (list, tuple)) and all(isinstance(k, int) and not isinstance(k, bool) for k in i):
            raise IndexError_("indexing with a Python list (use a tensor: torch.tensor(list) as an input)")
        else:
            raise IndexError_(f"indexing with {type(i).__name__}")
    while dim < x.dim():
        out.append(("slice", slice(None), dim))
        dim += 1
    return out


def _wrap(r, t, size):
    """Index tensor ``t`` as i64 with negative entries wrapped by ``size``."""
    t = r.call("ltorch.to", t, torch.int64) if t.dtype != torch.int64 else t
    neg = r.call("ltorch.lt", t, 0)
    return r.call("ltorch.where", neg, r.call("ltorch.add", t, size), t)


class _Advanced:
    """Advanced indices of a value of shape ``shape`` (after basic slicing): the indexed dims
    merged into one at position ``p`` and the linear index ``flat`` of ``n`` elements."""

    def __init__(self, r, cur, shape, adv):
        # adv: [(dim, int | index tensor (meta), its value or None)]
        dims = [d for d, _, _ in adv]
        self.permuted = dims != list(range(dims[0], dims[0] + len(dims)))
        if self.permuted:
            rest = [d for d in range(len(shape)) if d not in dims]
            self.perm = dims + rest
            cur = r.call("ltorch.permute", cur, self.perm)
            shape = [shape[d] for d in self.perm]
            dims = list(range(len(dims)))
        self.shape = list(shape)  # of cur (permuted)
        self.p = dims[0]
        sizes = [shape[d] for d in dims]
        self.pre, self.post = shape[: self.p], shape[self.p + len(dims):]
        self.P = math.prod(sizes)
        tensors = [t for _, t, _ in adv if isinstance(t, torch.Tensor)]
        self.S = list(torch.broadcast_shapes(*[tuple(t.shape) for t in tensors]))
        self.n = math.prod(self.S)
        lin = None
        const = 0
        for k, (_, t, val) in enumerate(adv):
            stride = math.prod(sizes[k + 1:])
            if isinstance(t, torch.Tensor):
                term = _wrap(r, val, sizes[k])
                if stride != 1:
                    term = r.call("ltorch.mul", term, stride)
                lin = term if lin is None else r.call("ltorch.add", lin, term)
            else:
                if not -sizes[k] <= t < sizes[k]:
                    raise IndexError_(f"index {t} is out of bounds for size {sizes[k]}")
                const += (t % sizes[k]) * stride
        if const:
            lin = r.call("ltorch.add", lin, const)
        self.flat = r.call("ltorch.reshape", lin, [self.n])
        self.merged = r.call("ltorch.reshape", cur, self.pre + [self.P] + self.post)

    def result_shape(self):
        return self.pre + self.S + self.post

    def unmerge(self, r, merged):
        """A value shaped like ``merged`` back to the (unpermuted) shape it came from."""
        out = r.call("ltorch.reshape", merged, self.shape)
        if self.permuted:
            inv = [0] * len(self.perm)
            for i, d in enumerate(self.perm):
                inv[d] = i
            out = r.call("ltorch.permute", out, inv)
        return out


def _basic(r, x, entries, allow_squeeze=True):
    """Applies slices (step > 0), ints (when ``allow_squeeze``) and None; returns the value,
    its shape, and the remaining advanced entries as ``(dim in the value, item)``."""
    cur, shape, d, squeeze, adv = x, list(x.shape), 0, [], []
    for kind, item, dim in entries:
        if kind == "new":
            cur = r.call("ltorch.unsqueeze", cur, d)
            shape.insert(d, 1)
            d += 1
        elif kind == "slice":
            start, stop, step = item.indices(shape[d])
            if step <= 0:
                raise IndexError_(f"slice step {step} (torch allows only positive steps)")
            stop = max(stop, start)
            if (start, stop, step) != (0, shape[d], 1):
                cur = r.call("ltorch.slice", cur, d, start, stop, step)
                shape[d] = len(range(start, stop, step))
            d += 1
        elif kind == "int" and allow_squeeze:
            size = shape[d]
            if not -size <= item < size:
                raise IndexError_(f"index {item} is out of bounds for dimension {dim} with size {size}")
            i = item % size
            cur = r.call("ltorch.slice", cur, d, i, i + 1, 1)
            shape[d] = 1
            squeeze.append(d)
            d += 1
        else:
            adv.append((d, item))
            d += 1
    if squeeze:
        cur = r.call("ltorch.squeeze", cur, squeeze)
        shape = [s for i, s in enumerate(shape) if i not in squeeze]
        adv = [(dd - sum(1 for q in squeeze if q < dd), it) for dd, it in adv]
    return cur, shape, adv


def getitem(r, x, idx):
    entries = _entries(x, idx)
    kinds = {k for k, _, _ in entries}
    if "mask" in kinds:
        raise IndexError_(
            "x[mask] with a boolean mask has a data-dependent shape; use torch.where(mask, x, other), "
            "masked_fill, or x[mask] = v (supported)"
        )
    if "tensor" not in kinds:
        cur, _, _ = _basic(r, x, entries)
        if cur is x:
            cur = r.call("ltorch.reshape", x, list(x.shape))
        return cur
    # torch (unlike NumPy) applies ints first, as selects
    cur, shape, adv = _basic(r, x, entries)
    adv = [(d, it, it) for d, it in adv]
    a = _Advanced(r, cur, shape, adv)
    sel = r.call("ltorch.index_select", a.merged, a.p, a.flat)
    return r.call("ltorch.reshape", sel, a.result_shape())


def _value_as(r, value, dtype, shape, vshape=None):
    """``value`` (a tensor, or a value of shape ``vshape``, or a number) as ``dtype``
    broadcast to ``shape``."""
    if isinstance(value, torch.Tensor) or vshape is not None:
        vshape = list(value.shape) if vshape is None else list(vshape)
        v = r.call("ltorch.to", value, dtype)
        lead = len(shape) - len(vshape)
        if lead < 0:
            if any(s != 1 for s in vshape[:-lead]):
                raise IndexError_(f"cannot broadcast a value of shape {tuple(vshape)} to {tuple(shape)}")
            vshape = vshape[-lead:]
            v = r.call("ltorch.reshape", v, vshape)
        elif lead > 0:
            vshape = [1] * lead + vshape
            v = r.call("ltorch.reshape", v, vshape)
        try:
            torch.broadcast_shapes(tuple(vshape), tuple(shape))
        except RuntimeError:
            raise IndexError_(f"cannot broadcast a value of shape {tuple(vshape)} to {tuple(shape)}") from None
        return v if vshape == list(shape) else r.call("ltorch.expand", v, list(shape))
    return r.call("ltorch.full", list(shape), value, device=torch.device(r.device), dtype=dtype)


def setitem(r, x, idx, value):
    """``x[idx] = value``: returns the new value of ``x``."""
    entries = _entries(x, idx)
    kinds = [k for k, _, _ in entries]
    if "mask" in kinds:
        return _put_mask(r, x, entries, value)
    if "tensor" in kinds:
        return index_put(r, x, entries, value, accumulate=False)
    return _put_region(r, x, entries, value)


def _put_mask(r, x, entries, value):
    masks = [(it, dim) for k, it, dim in entries if k == "mask"]
    others = [(k, it) for k, it, _ in entries if k != "mask"]
    mask, dim = masks[0]
    if len(masks) > 1 or dim != 0 or any(k != "slice" or it != slice(None) for k, it in others):
        raise IndexError_("x[mask] = v: only a boolean mask over the leading dims, alone, is supported")
    if tuple(mask.shape) != tuple(x.shape[: mask.dim()]):
        raise IndexError_(f"mask of shape {tuple(mask.shape)} does not match the leading dims of {tuple(x.shape)}")
    rest = list(x.shape[mask.dim():])
    if isinstance(value, torch.Tensor) and value.dim() > len(rest) and value.numel() != 1:
        raise IndexError_(
            "x[mask] = v with one value per masked element has a data-dependent shape; "
            "use torch.where(mask, v_full, x)"
        )
    if isinstance(value, torch.Tensor) and value.dim() > len(rest):
        one = [1] * len(rest)
        v = _value_as(r, r.call("ltorch.reshape", value, one), x.dtype, list(x.shape), vshape=one)
    else:
        v = _value_as(r, value, x.dtype, list(x.shape))
    m = r.call("ltorch.reshape", mask, list(mask.shape) + [1] * len(rest)) if rest else mask
    return r.call("ltorch.where", m, v, x)


def _put_region(r, x, entries, value):
    """Ints, slices (any positive step) and None: ``where(mask, spread(value), x)``."""
    region, kept = [], []  # per dim of x: (start, stop, step); the shape of x[idx]
    for kind, item, dim in entries:
        if kind == "new":
            continue
        size = x.shape[dim]
        if kind == "int":
            if not -size <= item < size:
                raise IndexError_(f"index {item} is out of bounds for dimension {dim} with size {size}")
            i = item % size
            region.append((i, i + 1, 1))
            kept.append(1)
        else:
            start, stop, step = item.indices(size)
            if step <= 0:
                raise IndexError_(f"x[idx] = v with slice step {step}")
            count = len(range(start, stop, step))
            region.append((start, start + (count - 1) * step + 1 if count else start, step))
            kept.append(count)
    # value shaped as x[idx] without the squeezed ints... torch broadcasts v to x[idx]'s shape,
    # whose int dims are gone: broadcast to that, then put the ints back as size-1 dims.
    view_shape = [n for (kind, _, _), n in zip([e for e in entries if e[0] != "new"], kept) if kind != "int"]
    val = _value_as(r, value, x.dtype, view_shape)
    if view_shape != kept:
        val = r.call("ltorch.reshape", val, kept)
    ones = r.call("ltorch.full", kept, True, device=torch.device(r.device), dtype=torch.bool)
    for d, (start, stop, step) in enumerate(region):
        if step == 1 or kept[d] == 0:
            continue
        span = stop - start
        pos = r.call("ltorch.arange", 0, span, device=torch.device(r.device))
        src = r.call("ltorch.floor_divide", pos, step)
        val = r.call("ltorch.index_select", val, d, src)
        ones = r.call("ltorch.index_select", ones, d, src)
        hit = r.call("ltorch.eq", r.call("ltorch.remainder", pos, step), 0)
        bshape = [1] * len(kept)
        bshape[d] = span
        ones = r.call("ltorch.bitwise_and", ones, r.call("ltorch.reshape", hit, bshape))
    pads = []
    for (start, stop, _), size in reversed(list(zip(region, x.shape))):
        pads += [start, size - stop]
    if any(pads):
        val = r.call("ltorch.pad", val, pads, "constant", 0)
        ones = r.call("ltorch.pad", ones, pads, "constant", False)
    return r.call("ltorch.where", ones, val, x)


def index_put(r, x, entries, value, accumulate):
    """``x[indices] = value`` (or ``+=`` with accumulate) for index tensors mixed with full
    slices and ints; returns the new value of ``x``."""
    for kind, item, _ in entries:
        if kind == "new" or (kind == "slice" and item != slice(None)):
            raise IndexError_(
                "index assignment mixing index tensors with partial slices or None; "
                "write the slice separately (x[a:b] = ...) or index with tensors only"
            )
        if kind == "mask":
            raise IndexError_("index_put with a boolean mask among several indices")
    adv = [(dim, it, it) for kind, it, dim in entries if kind in ("tensor", "int")]
    dims = [d for d, _, _ in adv]
    if any(k == "int" for k, _, _ in entries) and dims != list(range(dims[0], dims[0] + len(dims))):
        raise IndexError_(
            "index assignment with ints between index tensors (torch selects the ints first, "
            "which moves the indexed dims); index with tensors only, or assign to x[int] first"
        )
    a = _Advanced(r, x, list(x.shape), adv)
    if a.n == 0:
        return r.call("ltorch.reshape", x, list(x.shape))
    v = _value_as(r, value, x.dtype, a.result_shape())
    v = r.call("ltorch.reshape", v, a.pre + [a.n] + a.post)
    if accumulate:
        new = r.call("ltorch.index_add", a.merged, a.p, a.flat, v)
        return a.unmerge(r, new)
    dev = torch.device(r.device)
    pos = r.call("ltorch.arange", 1, a.n + 1, device=dev)
    if a.n > 1:
        col = r.call("ltorch.reshape", a.flat, [a.n, 1])
        row = r.call("ltorch.reshape", a.flat, [1, a.n])
        same = r.call("ltorch.eq", col, row)
        later = r.call("ltorch.lt", r.call("ltorch.reshape", pos, [a.n, 1]), r.call("ltorch.reshape", pos, [1, a.n]))
        overwritten = r.call("ltorch.any", r.call("ltorch.bitwise_and", same, later), [1])
        pos = r.call("ltorch.where", overwritten, 0, pos)
    zeros = r.call("ltorch.full", [a.P], 0, device=dev, dtype=torch.int64)
    winner = r.call("ltorch.index_add", zeros, 0, a.flat, pos)
    written = r.call("ltorch.gt", winner, 0)
    src = r.call("ltorch.clamp", r.call("ltorch.sub", winner, 1), 0)
    gathered = r.call("ltorch.index_select", v, a.p, src)
    mshape = [1] * len(a.pre) + [a.P] + [1] * len(a.post)
    new = r.call("ltorch.where", r.call("ltorch.reshape", written, mshape), gathered, a.merged)
    return a.unmerge(r, new)


def index_put_entries(x, indices):
    """``index_put_``'s tuple of index tensors (None = a full slice) as entries."""
    idx = tuple(slice(None) if i is None else i for i in indices)
    return _entries(x, idx)


__all__ = ["getitem", "setitem", "index_put", "index_put_entries", "IndexError_", "DTYPES"]
