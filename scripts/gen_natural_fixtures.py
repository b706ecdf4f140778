#!/usr/bin/env python3
"""PyTorch fixtures for the programs of ``tests/natural`` (written as people write them:
keyword arguments, torch's defaults, no type annotations).

Each program is Python: this script runs it *as is* with PyTorch, binding ``ltorch.<op>`` to
the torch function of the same name (``torch.nn.functional`` where torch keeps it there), so
the keyword names and defaults in the programs are checked against torch's own. For each
program it writes ``tests/fixtures/natural/<program>/<input>.npy`` (the inputs, seeded) and
``out_<k>.npy`` (PyTorch's outputs); ``tests/tests/natural_programs.rs`` runs the programs
with thunder on the same inputs and compares.

    /work/venv/bin/python scripts/gen_natural_fixtures.py

Random ops (``rand``, ``randn``, ``dropout``) use thunder's counter-based generator, not
torch's: the programs only use them where the result does not depend on the numbers (times
zero, ``training=False``, ``p=0``), so torch's stand-ins below need only the right shape.
"""

import os
import shutil
import types

import numpy as np
import torch
import torch.nn.functional as F

import ce_reference
import sdpa_reference

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
PROGRAMS = os.path.join(REPO, "tests", "natural")
OUT = os.path.join(REPO, "tests", "fixtures", "natural")

DTYPES = {
    "b8": torch.bool,
    "u8": torch.uint8,
    "i8": torch.int8,
    "i16": torch.int16,
    "i32": torch.int32,
    "i64": torch.int64,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f32": torch.float32,
    "f64": torch.float64,
}


def _sum(input, dim=None, keepdim=False):
    return torch.sum(input) if dim is None else torch.sum(input, dim=dim, keepdim=keepdim)


def _reduce(fn):
    def f(input, dim=None, keepdim=False):
        if dim is None:
            dim = list(range(input.ndim))
        return fn(input, dim=dim, keepdim=keepdim)

    return f


def _extreme(fn):
    def f(input, dim=None, keepdim=False):
        return fn(input) if dim is None else tuple(fn(input, dim=dim, keepdim=keepdim))

    return f


def _slice(input, dim=0, start=None, end=None, step=1):
    index = [slice(None)] * input.ndim
    index[dim] = slice(start, end, step)
    return input[tuple(index)]


def _pad(input, pad, mode="constant", value=None):
    return F.pad(input, pad, mode=mode, value=value)


def _rand(fn):
    def f(size, *, seed, offset=0, dtype=torch.float32, device="cpu"):
        return fn(size, dtype=dtype, device=device)

    return f


def _dropout(input, p=0.5, training=True, *, seed, offset=0):
    return F.dropout(input, p=p, training=training)


def _norm(input, p=2.0, dim=None, keepdim=False):
    return torch.linalg.vector_norm(input, ord=p, dim=dim, keepdim=keepdim)


def _squeeze(input, dim=None):
    return torch.squeeze(input) if dim is None else torch.squeeze(input, dim)


def _cross_entropy(input, target, *, ignore_index=-100, label_smoothing=0.0):
    return F.cross_entropy(
        input, target, ignore_index=ignore_index, label_smoothing=label_smoothing
    )


def _arange(start, end, step=1, *, device="cpu", dtype=torch.int64):
    return torch.arange(start, end, step, device=device, dtype=dtype)


def _full(size, fill_value, *, device="cpu", dtype=None):
    return torch.full(size, fill_value, device=device, dtype=dtype)


def _sdpa_fwd_lse(query, key, value, *, is_causal=False, scale=None):
    return sdpa_reference.fwd_lse(query, key, value, is_causal, scale)


def _sdpa_bwd(grad_out, query, key, value, out, logsumexp, *, is_causal=False, scale=None):
    return sdpa_reference.bwd_formula(grad_out, query, key, value, out, logsumexp, is_causal, scale)


def _cross_entropy_lse(input, target, *, ignore_index=-100):
    return ce_reference.ce_lse(input, target, ignore_index)


def _cross_entropy_bwd(grad_loss, input, target, logsumexp, *, ignore_index=-100):
    return ce_reference.ce_bwd(grad_loss, input, target, logsumexp, ignore_index)


def _einsum(equation, operands):
    return torch.einsum(equation, *operands)


NAMES = {
    "einsum": _einsum,
    "cross_entropy_lse": _cross_entropy_lse,
    "cross_entropy_bwd": _cross_entropy_bwd,
    "sdpa_fwd_lse": _sdpa_fwd_lse,
    "sdpa_bwd": _sdpa_bwd,
    "sum": _sum,
    "mean": _reduce(torch.mean),
    "amax": _reduce(torch.amax),
    "amin": _reduce(torch.amin),
    "all": _reduce(torch.all),
    "any": _reduce(torch.any),
    "max": _extreme(torch.max),
    "min": _extreme(torch.min),
    "slice": _slice,
    "pad": _pad,
    "rand": _rand(torch.rand),
    "randn": _rand(torch.randn),
    "dropout": _dropout,
    "norm": _norm,
    "squeeze": _squeeze,
    "cross_entropy": _cross_entropy,
    "arange": _arange,
    "full": _full,
    "to": lambda input, dtype: input.to(dtype),
    "expand": lambda input, size: input.expand(size),
    "masked_fill": lambda input, mask, value: input.masked_fill(mask, value),
    "var": lambda input, dim=None, *, correction=1, keepdim=False: torch.var(
        input, dim=dim, correction=correction, keepdim=keepdim
    ),
}


class LTorch(types.SimpleNamespace):
    def __getattr__(self, name):
        if name in NAMES:
            return NAMES[name]
        for home in (F, torch):
            if hasattr(home, name):
                return getattr(home, name)
        raise AttributeError(f"ltorch.{name} has no torch counterpart here")


def gen(shape, dtype, kind="randn", high=None):
    """A seeded input: randn, positive (pos), in (-1, 1) (unit), integers in [0, high)."""
    if kind == "randn":
        t = torch.randn(shape, dtype=torch.float64)
    elif kind == "pos":
        t = torch.rand(shape, dtype=torch.float64) * 2 + 0.25
    elif kind == "unit":
        t = torch.rand(shape, dtype=torch.float64) * 1.8 - 0.9
    elif kind == "int":
        t = torch.randint(0, high, shape)
    else:
        raise ValueError(kind)
    return t.to(DTYPES[dtype])


def probs(shape):
    return torch.softmax(torch.randn(shape, dtype=torch.float64), dim=-1).to(torch.float32)


INPUTS = {
    "mlp": lambda: dict(
        x=gen([4, 6], "f32"),
        w1=gen([8, 6], "f32"),
        b1=gen([8], "f32"),
        w2=gen([5, 8], "f32"),
        b2=gen([5], "f32"),
    ),
    "activations": lambda: dict(x=gen([3, 7], "f32") * 3),
    "unary": lambda: dict(x=gen([2, 5], "f32"), p=gen([2, 5], "f32", "pos"), u=gen([2, 5], "f32", "unit")),
    "binary": lambda: dict(
        a=gen([3, 4], "f32"),
        b=gen([3, 4], "f32"),
        p=gen([3, 4], "f32", "pos"),
        row=gen([4], "f32"),
    ),
    "bitwise": lambda: dict(
        i=gen([6], "i64", "int", 100), j=gen([6], "i64", "int", 100), s=gen([6], "i64", "int", 5)
    ),
    "reductions": lambda: dict(x=gen([3, 5], "f32")),
    "shapes": lambda: dict(x=gen([2, 3, 4], "f32"), y=gen([4], "f32")),
    "indexing": lambda: dict(
        x=gen([4, 3], "f32"),
        idx=torch.tensor([3, 0, 1, 1]),
        cols=gen([4, 2], "i64", "int", 3),
        src=gen([4, 2], "f32"),
        emb=gen([5, 3], "f32"),
    ),
    "factories": lambda: dict(x=gen([2, 3], "f32")),
    "cnn": lambda: dict(
        img=gen([2, 3, 6, 6], "f32"),
        w=gen([4, 3, 3, 3], "f32"),
        b=gen([4], "f32"),
        w1=gen([2, 3, 3], "f32"),
        w3=gen([2, 1, 2, 2, 2], "f32"),
        vol=gen([1, 1, 3, 4, 4], "f32"),
        mean=gen([4], "f32"),
        var=gen([4], "f32", "pos"),
        gamma=gen([4], "f32"),
        beta=gen([4], "f32"),
    ),
    "attention": lambda: dict(
        q=gen([2, 4, 3], "f32"),
        k=gen([2, 4, 3], "f32"),
        v=gen([2, 4, 3], "f32"),
        mask=gen([4, 4], "f32"),
        logits=gen([4, 5], "f32"),
        tgt=torch.tensor([1, 0, 4, 2]),
        probs=probs([4, 5]),
        w=gen([5], "f32"),
        y=gen([3, 5], "f32"),
    ),
    "sorting": lambda: dict(x=gen([4, 5], "f32")),
    "nested": lambda: dict(x=gen([3, 4], "f32"), w=gen([5, 4], "f32"), b=gen([5], "f32")),
    "edges": lambda: dict(s=gen([], "f32"), e=gen([0, 3], "f32"), x=gen([2, 3], "f32")),
}


def main():
    torch.manual_seed(0)
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    env = {"ltorch": LTorch(), "dtypes": types.SimpleNamespace(**DTYPES), "devices": types.SimpleNamespace(cpu="cpu")}
    for name in sorted(INPUTS):
        path = os.path.join(PROGRAMS, f"{name}.py")
        scope = dict(env)
        with open(path) as f:
            exec(compile(f.read(), path, "exec"), scope)
        inputs = INPUTS[name]()
        outs = scope["computation"](**inputs)
        folder = os.path.join(OUT, name)
        os.makedirs(folder)
        for k, t in inputs.items():
            np.save(os.path.join(folder, f"{k}.npy"), np.array(t.numpy(), order="C"))
        for i, t in enumerate(outs):
            np.save(os.path.join(folder, f"out_{i}.npy"), np.array(torch.as_tensor(t).numpy(), order="C"))
        print(f"{name}: {len(inputs)} inputs, {len(outs)} outputs")


if __name__ == "__main__":
    main()
