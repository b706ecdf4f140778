#!/usr/bin/env python3
"""PyTorch references for the OpInfo samples (tests/opinfo, checked by tests/tests/opinfo.rs).

The samples are defined once, in Rust (tests/opinfo/src). This script asks the Rust side to
dump them, evaluates each one-op call in PyTorch (CPU), and writes the expected outputs:

    $VENV/bin/python scripts/gen_opinfo_fixtures.py          # from the repository root
    $VENV/bin/python scripts/gen_opinfo_fixtures.py --dump DIR   # reuse a dump

Output (the folder is wiped and regenerated; running twice gives identical files):

* tests/fixtures/opinfo/<op id>.safetensors: tensors "<dtype>/<index>.out<k>" (contiguous, in
  the op's output order, real dtypes, 0-d and empty shapes as such).
* tests/fixtures/opinfo/manifest.json: {sample key: {"fingerprint", "file", "outputs"}} or,
  where PyTorch raises, {"fingerprint", "torch_error"}. The Rust harness recomputes each
  sample and its fingerprint (program text + input bytes), so a sample whose generator changed
  is reported as stale rather than compared with another sample's reference.

Samples carry their arguments structured (tensors by name with a view: "transpose" of the
last two dims or {"expand": shape}; literals as {"int"}, {"float"}, {"ints"}, {"dtype"}, ...),
so no trace parser is needed here. REF maps each op id to a torch callable taking the same
positional arguments as the thunder op.

Where PyTorch's CPU kernels do not implement f16/bf16 (e.g. some convolutions), the sample is
evaluated on f32 copies and rounded back once, as an f16 kernel computing in f32 would do; such
entries say "upcast": true.
"""

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import torch.nn.functional as F

import ce_reference
import sdpa_reference

try:
    from safetensors.torch import load_file, save_file
except ImportError:  # pragma: no cover
    sys.exit("safetensors is required: pip install safetensors")

torch.set_num_threads(1)

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
OUT_DIR = os.path.join(REPO, "tests", "fixtures", "opinfo")

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
LOW = (torch.float16, torch.bfloat16)


# ---------------------------------------------------------------------------------------------
# references: op id -> callable with the thunder op's positional arguments
# ---------------------------------------------------------------------------------------------
def lax_pad(a, value, config):
    """lax.pad: per dim (low, high, interior); low/high may be negative (cropping)."""
    out = a
    for d in range(a.dim()):
        low, high, interior = config[3 * d : 3 * d + 3]
        n = out.shape[d]
        if interior > 0 and n > 1:
            size = n + (n - 1) * interior
            shape = list(out.shape)
            shape[d] = size
            spread = torch.full(shape, value, dtype=out.dtype)
            idx = [slice(None)] * out.dim()
            idx[d] = slice(0, size, interior + 1)
            spread[tuple(idx)] = out
            out = spread
        for amount, at_start in ((low, True), (high, False)):
            if amount > 0:
                shape = list(out.shape)
                shape[d] = amount
                fill = torch.full(shape, value, dtype=out.dtype)
                out = torch.cat([fill, out] if at_start else [out, fill], d)
            elif amount < 0:
                idx = [slice(None)] * out.dim()
                idx[d] = slice(-amount, None) if at_start else slice(0, out.shape[d] + amount)
                out = out[tuple(idx)]
    return out


def broadcast_in_dim(a, shape, dims):
    view = [1] * len(shape)
    for i, d in enumerate(dims):
        view[d] = a.shape[i]
    return a.reshape(view).expand(shape)


# Philox4x32-10 (Random123), the contract of prims.uniform and prims.normal
# (thunder-abi/src/prims.rs): PyTorch's CPU generator is another algorithm, so the reference
# is this independent implementation of the documented mapping.
MASK32 = 0xFFFFFFFF


def philox4x32(counter, key):
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(10):
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
        k0, k1 = (k0 + 0x9E3779B9) & MASK32, (k1 + 0xBB67AE85) & MASK32
    return c0, c1, c2, c3


def philox_values(shape, seed, offset, element):
    seed, offset = seed % 2**64, offset % 2**64
    key = (seed & MASK32, seed >> 32)
    n = math.prod(shape)
    out = []
    for i in range(n):
        b = (offset + i // 2) % 2**64
        w = philox4x32((b & MASK32, b >> 32, 0, 0), key)
        out.append(element(w[2 * (i % 2)], w[2 * (i % 2) + 1]))
    return torch.tensor(out, dtype=torch.float64).reshape(shape)


def uniform(shape, low, high, seed, offset, dev, dtype):
    u = lambda x, y: ((x >> 5) * 2**26 + (y >> 6)) * 2.0**-53
    v = philox_values(shape, seed, offset, lambda x, y: low + (high - low) * u(x, y))
    return v.to(dtype)


def normal(shape, mean, std, seed, offset, dev, dtype):
    def element(x, y):
        u1, u2 = (x + 1) * 2.0**-32, y * 2.0**-32
        return mean + std * math.sqrt(-2.0 * math.log(u1)) * math.cos(2.0 * math.pi * u2)

    return philox_values(shape, seed, offset, element).to(dtype)


def dropout(a, p, training, seed, offset):
    """ltorch.dropout's definition: keep where the f32 uniform number is >= p, scale by
    1 / (1 - p)."""
    if not training or p == 0.0:
        return a
    if p == 1.0:
        return a * 0.0
    u = uniform(list(a.shape), 0.0, 1.0, seed, offset, "cpu", torch.float32)
    keep = u >= p
    return torch.where(keep, a * (1.0 / (1.0 - p)), 0.0).to(a.dtype)


def keep_dtype(fn):
    """Prims keep the input dtype (torch promotes integer sums and cumsums to i64)."""
    return lambda a, *rest: fn(a, *rest).to(a.dtype)


def reduce_dims(fn):
    """prims.<reduction>(a, dims): an empty dim list reduces nothing."""
    return lambda a, dims: a.clone() if len(dims) == 0 else fn(a, dims)


def no_python_scalar(fn):
    """torch.maximum, minimum and atan2 take no Python scalar: pass a 0-d tensor of the other
    operand's dtype (the samples' scalars have its category, so promotion is unchanged)."""
    return lambda a, b: fn(a, b if isinstance(b, torch.Tensor) else torch.tensor(b, dtype=a.dtype))


def prims_refs():
    # Every other prim is torch.<name> with the same positional arguments (see `reference`).
    r = {}
    for name in ["maximum", "minimum", "atan2"]:
        r["prims." + name] = no_python_scalar(getattr(torch, name))
    r["prims.trigamma"] = lambda a: torch.polygamma(1, a)
    # Its scalar branch takes the other branch's dtype, not the (b8) condition's.
    r["prims.where"] = torch.where
    r["prims.div"] = lambda a, b: (
        torch.div(a, b) if a.is_floating_point() else torch.div(a, b, rounding_mode="trunc")
    )
    r["prims.convert_element_type"] = lambda a, d: a.to(d)
    r["prims.broadcast_in_dim"] = broadcast_in_dim
    r["prims.reshape"] = lambda a, s: a.reshape(s)
    r["prims.transpose"] = lambda a, p: a.permute(p)
    r["prims.slice"] = lambda a, st, en, sd: a[tuple(slice(s, e, k) for s, e, k in zip(st, en, sd))]
    r["prims.pad"] = lax_pad
    r["prims.cat"] = lambda d, *ts: torch.cat(ts, d)
    r["prims.flip"] = lambda a, dims: torch.flip(a, dims)
    r["prims.take"] = lambda a, i, d: torch.index_select(a, d, i)
    r["prims.take_along_axis"] = lambda a, i, d: torch.gather(a, d, i)
    r["prims.scatter_add"] = lambda a, i, s, d: a.scatter_add(d, i, s)
    r["prims.index_add"] = lambda a, i, s, d: a.index_add(d, i, s)
    r["prims.sum"] = keep_dtype(reduce_dims(lambda a, d: torch.sum(a, d)))
    r["prims.prod"] = keep_dtype(reduce_dims(lambda a, d: prod_dims(a, d)))
    r["prims.amax"] = reduce_dims(lambda a, d: torch.amax(a, d))
    r["prims.amin"] = reduce_dims(lambda a, d: torch.amin(a, d))
    r["prims.argmax"] = lambda a, d: torch.argmax(a, d)
    r["prims.argmin"] = lambda a, d: torch.argmin(a, d)
    r["prims.var_mean"] = lambda a, dims, c: tuple(torch.var_mean(a, dims, correction=c))
    r["prims.cumsum"] = keep_dtype(lambda a, d: torch.cumsum(a, d))
    r["prims.topk"] = lambda a, k, d, l, s: tuple(torch.topk(a, k, d, l, s))
    r["prims.sort"] = lambda a, d, desc, st: tuple(torch.sort(a, dim=d, descending=desc, stable=st))
    r["prims.convolution"] = lambda a, w, b, s, p, dil, g: torch.convolution(
        a, w, b, s, p, dil, False, [0] * len(s), g
    )
    r["prims.matmul"] = torch.matmul
    r["prims.uniform"] = uniform
    r["prims.normal"] = normal
    r["prims.full"] = lambda s, v, dev, d: torch.full(s, v, dtype=d)
    r["prims.iota"] = lambda n, start, step, dev, d: (
        start + step * torch.arange(n, dtype=torch.int64)
    ).to(d)
    return r


def prod_dims(a, dims):
    out = a
    for d in sorted([d % max(a.dim(), 1) for d in dims], reverse=True):
        out = torch.prod(out, d)
    return out


def batch_norm(a, rm, rv, w, b, training, momentum, eps):
    """Traces are pure: with running stats in training, thunder returns their new values."""
    rm = None if rm is None else rm.clone()
    rv = None if rv is None else rv.clone()
    out = F.batch_norm(a, rm, rv, w, b, training, momentum, eps)
    return (out, rm, rv) if training and rm is not None else out



def ltorch_refs():
    # Every other ltorch op is torch.<name> with the same positional arguments (see
    # `reference`), as the op table names them after torch.
    r = {}
    for name in ["maximum", "minimum", "atan2"]:
        r["ltorch." + name] = no_python_scalar(getattr(torch, name))
    r["ltorch.silu"] = F.silu
    r["ltorch.relu6"] = F.relu6
    r["ltorch.hardswish"] = F.hardswish
    r["ltorch.to"] = lambda a, d: a.to(d)
    r["ltorch.gelu"] = lambda a, approx: F.gelu(a, approximate=approx)
    r["ltorch.softplus"] = lambda a, beta, thr: F.softplus(a, beta=beta, threshold=thr)
    r["ltorch.leaky_relu"] = lambda a, s: F.leaky_relu(a, s)
    r["ltorch.masked_fill"] = lambda a, m, v: a.masked_fill(m, v)
    r["ltorch.expand"] = lambda a, s: a.expand(s)
    r["ltorch.squeeze"] = lambda a, dims: a.squeeze() if dims is None else a.squeeze(tuple(dims))
    r["ltorch.t"] = lambda a: a.t()

    def dims_reduce(fn):
        return lambda a, dims, keep: fn(a) if dims is None else fn(a, dim=tuple(dims), keepdim=keep)

    r["ltorch.sum"] = dims_reduce(torch.sum)
    r["ltorch.mean"] = dims_reduce(torch.mean)
    r["ltorch.all"] = dims_reduce(torch.all)
    r["ltorch.any"] = dims_reduce(torch.any)
    r["ltorch.amax"] = lambda a, dims, keep: torch.amax(a, dim=() if dims is None else dims, keepdim=keep)
    r["ltorch.amin"] = lambda a, dims, keep: torch.amin(a, dim=() if dims is None else dims, keepdim=keep)
    for name in ["var", "std"]:
        fn = getattr(torch, name)
        r["ltorch." + name] = lambda a, dims, c, keep, fn=fn: fn(a, dim=dims, correction=c, keepdim=keep)
    r["ltorch.var_mean"] = lambda a, dims, c, keep: tuple(
        torch.var_mean(a, dim=dims, correction=c, keepdim=keep)
    )
    r["ltorch.norm"] = lambda a, p, dims, keep: torch.linalg.vector_norm(a, p, dim=dims, keepdim=keep)
    r["ltorch.prod"] = lambda a, d, k: (
        torch.prod(a) if d is None and not k
        else torch.prod(a.reshape(-1), 0).reshape([1] * a.dim()) if d is None
        else torch.prod(a, d, keepdim=k)
    )
    for name in ["max", "min"]:
        fn = getattr(torch, name)
        r["ltorch." + name] = lambda a, d, k, fn=fn: fn(a) if d is None else tuple(fn(a, d, keepdim=k))
    for name in ["argmax", "argmin"]:
        fn = getattr(torch, name)
        r["ltorch." + name] = lambda a, d, k, fn=fn: fn(a, d, keepdim=k)
    r["ltorch.cumsum"] = lambda a, d, dt: torch.cumsum(a, d, dtype=dt)
    r["ltorch.topk"] = lambda a, k, d, l, s: tuple(torch.topk(a, k, d, l, s))
    r["ltorch.sort"] = lambda a, d, desc, st: tuple(torch.sort(a, dim=d, descending=desc, stable=st))
    r["ltorch.layer_norm"] = lambda a, ns, w, b, eps: F.layer_norm(a, ns, w, b, eps)
    r["ltorch.rms_norm"] = lambda a, ns, w, eps: F.rms_norm(a, ns, w, eps)
    r["ltorch.cross_entropy"] = lambda x, t, *rest: (
        F.cross_entropy(x, t) if not rest
        else F.cross_entropy(x, t, ignore_index=rest[0], label_smoothing=rest[1])
    )
    r["ltorch.nll_loss"] = lambda x, t, ii: F.nll_loss(x, t, ignore_index=ii)
    r["ltorch.cross_entropy_lse"] = ce_reference.ce_lse
    r["ltorch.cross_entropy_bwd"] = ce_reference.ce_bwd
    r["ltorch.mse_loss"] = F.mse_loss
    r["ltorch.scaled_dot_product_attention"] = lambda q, k, v, m, causal, scale: (
        F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=causal, scale=scale)
    )
    r["ltorch.sdpa_fwd_lse"] = sdpa_reference.fwd_lse
    r["ltorch.sdpa_bwd"] = sdpa_reference.bwd_formula
    r["ltorch.linear"] = F.linear
    r["ltorch.cat"] = lambda d, *ts: torch.cat(ts, d)
    r["ltorch.einsum"] = lambda eq, *ts: torch.einsum(eq, *ts)
    r["ltorch.stack"] = lambda d, *ts: torch.stack(ts, d)
    r["ltorch.split"] = lambda a, s, d: tuple(torch.split(a, s, d))
    r["ltorch.chunk"] = lambda a, n, d: tuple(torch.chunk(a, n, d))
    r["ltorch.narrow"] = lambda a, d, s, n: torch.narrow(a, d, s, n)
    r["ltorch.slice"] = lambda a, d, s, e, k: a[(slice(None),) * (d % a.dim()) + (slice(s, e, k),)]
    r["ltorch.index_select"] = torch.index_select
    r["ltorch.gather"] = torch.gather
    r["ltorch.scatter_add"] = torch.scatter_add
    r["ltorch.index_add"] = lambda a, d, i, s, alpha: torch.index_add(a, d, i, s, alpha=alpha)
    r["ltorch.embedding"] = lambda i, w, p: F.embedding(i, w, padding_idx=p)
    r["ltorch.flip"] = torch.flip
    r["ltorch.pad"] = lambda a, p, mode, v: F.pad(a, p, mode=mode, value=v)
    r["ltorch.conv1d"] = F.conv1d
    r["ltorch.conv2d"] = F.conv2d
    r["ltorch.conv3d"] = F.conv3d
    r["ltorch.max_pool2d"] = lambda a, k, s, p, dil, ceil: F.max_pool2d(a, k, s, p, dil, ceil_mode=ceil)
    r["ltorch.avg_pool2d"] = lambda a, k, s, p, ceil, cip, div: F.avg_pool2d(a, k, s, p, ceil, cip, div)
    r["ltorch.adaptive_avg_pool2d"] = F.adaptive_avg_pool2d
    r["ltorch.batch_norm"] = batch_norm
    r["ltorch.rand"] = lambda s, seed, off, d, dev: uniform(s, 0.0, 1.0, seed, off, dev, d)
    r["ltorch.randn"] = lambda s, seed, off, d, dev: normal(s, 0.0, 1.0, seed, off, dev, d)
    r["ltorch.dropout"] = dropout
    r["ltorch.group_norm"] = F.group_norm
    r["ltorch.full"] = lambda s, v, dev, d: torch.full(s, v, dtype=d)
    r["ltorch.zeros"] = lambda s, dev, d: torch.zeros(s, dtype=d)
    r["ltorch.ones"] = lambda s, dev, d: torch.ones(s, dtype=d)
    r["ltorch.arange"] = lambda s, e, st, dev, d: torch.arange(s, e, st, dtype=d)
    return r


REF = {**prims_refs(), **ltorch_refs()}


def tensor_scalars(fn):
    """A prim's scalar operand has the tensor operand's dtype (the prim contract), so it is
    passed to torch as a 0-d tensor of that dtype: some torch functions take no Python scalar."""

    def call(*args):
        like = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if like is None:
            return fn(*args)
        return fn(*(torch.tensor(a, dtype=like.dtype) if isinstance(a, (int, float)) and
                    not isinstance(a, bool) else a for a in args))

    return call


def reference(op):
    """The torch callable for an op id: REF's entry, else torch.<name>, so an op named after
    torch (a new elementwise prim, say) needs no entry here. None when torch has no such name."""
    if op in REF:
        return REF[op]
    layer, name = op.split(".", 1)
    fn = getattr(torch, name, None)
    if fn is None:
        return None
    return tensor_scalars(fn) if layer == "prims" else python_scalars_as_tensors(fn)


def python_scalars_as_tensors(fn):
    """torch.<name>, retried with each Python number as a 0-d tensor where the function takes no
    Python number (torch.hypot): a 0-d operand promotes exactly as a Python scalar does (it
    decides the result only when its category is higher), so the reference is unchanged."""

    def call(*args):
        try:
            return fn(*args)
        except TypeError:
            kind = lambda a: torch.bool if isinstance(a, bool) else (
                torch.int64 if isinstance(a, int) else torch.float64)
            return fn(*(torch.tensor(a, dtype=kind(a)) if isinstance(a, (bool, int, float)) else a
                        for a in args))

    return call


# ---------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------
def literal(v):
    (kind, x), = v.items()
    if kind == "float":
        return {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}.get(x, x) if isinstance(x, str) else float(x)
    if kind == "dtype":
        return DTYPES[x]
    if kind == "device":
        return "cpu"
    if kind == "none":
        return None
    return x  # int, bool, ints (list), str


def arguments(sample, inputs, upcast=False):
    args = []
    for a in sample["args"]:
        if "tensor" not in a:
            args.append(literal(a))
            continue
        t = inputs[a["tensor"]]
        if upcast and t.dtype in LOW:
            t = t.float()
        view = a["view"]
        if view == "transpose":
            t = t.transpose(-2, -1)
        elif isinstance(view, dict):
            t = t.expand(view["expand"])
        args.append(t)
    return args


def as_tuple(out):
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def evaluate(sample, inputs):
    """(outputs, upcast) or raises."""
    fn = reference(sample["op"])
    try:
        return as_tuple(fn(*arguments(sample, inputs))), False
    except (RuntimeError, NotImplementedError) as e:
        low = DTYPES[sample["dtype"]] in LOW
        if not (low and "not implemented for" in str(e)):
            raise
    # The CPU kernel lacks this low-precision dtype: compute in f32, round once.
    outs = as_tuple(fn(*arguments(sample, inputs, upcast=True)))
    want = DTYPES[sample["dtype"]]
    return tuple(o.to(want) if o.is_floating_point() else o for o in outs), True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dump", help="a folder written by opinfo-dump (default: run it now)")
    args = ap.parse_args()
    tmp = None
    dump = args.dump
    if dump is None:
        tmp = tempfile.mkdtemp(prefix="opinfo-dump-")
        dump = tmp
        subprocess.run(
            ["cargo", "run", "-q", "-p", "thunder-opinfo", "--bin", "opinfo-dump", "--", dump],
            cwd=REPO,
            check=True,
        )
    samples = [json.loads(l) for l in open(os.path.join(dump, "samples.jsonl"))]
    missing = sorted({s["op"] for s in samples if reference(s["op"]) is None})
    if missing:
        sys.exit("no PyTorch reference for: " + ", ".join(missing))

    if os.path.isdir(OUT_DIR):
        shutil.rmtree(OUT_DIR)
    os.makedirs(OUT_DIR)
    manifest = {}
    by_op = {}
    for s in samples:
        by_op.setdefault(s["op"], []).append(s)
    errors = 0
    for op, group in by_op.items():
        inputs = load_file(os.path.join(dump, "inputs", op + ".safetensors"))
        tensors = {}
        file = op + ".safetensors"
        for s in group:
            entry = {"fingerprint": s["fingerprint"]}
            try:
                outs, upcast = evaluate(s, inputs)
                if len(outs) != s["outputs"]:
                    raise RuntimeError("%d outputs, thunder has %d" % (len(outs), s["outputs"]))
                _, dt, index = s["key"].split("/")
                names = []
                for k, o in enumerate(outs):
                    name = "%s/%s.out%d" % (dt, index, k)
                    tensors[name] = o.detach().contiguous().clone()
                    names.append(name)
                entry.update({"file": file, "outputs": names})
                if upcast:
                    entry["upcast"] = True
            except Exception as e:  # noqa: BLE001 - any torch refusal is recorded, not fatal
                entry["torch_error"] = "%s: %s" % (type(e).__name__, str(e).split("\n")[0][:200])
                errors += 1
            manifest[s["key"]] = entry
        if tensors:
            save_file(tensors, os.path.join(OUT_DIR, file))
    with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
        f.write("{\n")
        f.write(",\n".join("%s: %s" % (json.dumps(k), json.dumps(v, sort_keys=True)) for k, v in manifest.items()))
        f.write("\n}\n")
    if tmp:
        shutil.rmtree(tmp)
    size = sum(os.path.getsize(os.path.join(OUT_DIR, f)) for f in os.listdir(OUT_DIR))
    print(
        "%d samples over %d ops; PyTorch refused %d; %.1f MB in %s"
        % (len(samples), len(by_op), errors, size / 1e6, os.path.relpath(OUT_DIR, REPO))
    )


if __name__ == "__main__":
    main()
