#!/usr/bin/env python3
"""Generate PyTorch gradient (VJP) reference fixtures for thunder-rs ltorch ops.

Run from the repository root, after ``scripts/gen_op_fixtures.py`` (CPU only,
takes a few seconds):

    python scripts/gen_op_fixtures.py     # forward fixtures (tests/fixtures/ops)
    python scripts/gen_grad_fixtures.py   # this script (tests/fixtures/grads)

Needs torch, safetensors and numpy, like gen_op_fixtures.py.

The cases are the forward cases of gen_op_fixtures.py (same op, same case id,
same program text): this script imports that module, runs its case
generators again and records, for every case, the PyTorch reference function
and its arguments.  It checks that the regenerated programs and inputs are the
ones stored in ``tests/fixtures/ops`` (so run gen_op_fixtures.py first).

A case is kept when it is differentiable:

* its output is f32, f64 (or, for ``to``, any float dtype), and it has at
  least one tensor input; every float tensor input is f32 or f64 (cases with
  f16/bf16 inputs are left out).  Integer and bool inputs (``where``'s
  condition, the integer side of a mixed-dtype pair) are kept as inputs but get
  no gradient.  This leaves out comparisons, factories, ``to`` an integer
  dtype, integer-only cases, and cases whose only float operands are literals;
* no input or output has zero elements, and inputs, output and gradients are
  all finite (leaves out the special-value cases);
* it is away from points of non-differentiability: ``relu``/``abs`` inputs are
  at least 1e-3 away from 0, ``amax`` has a gap of more than 1e-3 between the
  largest and second largest element of every reduced slice.  ``maximum`` /
  ``minimum`` inputs come from a grid of multiples of 0.5 (to make forward
  ties); where the operands tie, the last float tensor operand is shifted by
  +0.25 (off the grid, so nothing ties) and the case's note says so.  These are
  the only inputs that differ from the forward fixture's.

For each kept case, with ``out`` the (single) output and ``cot`` a
deterministic random tensor of out's shape and dtype (uniform in [-1, 1],
from a ``torch.Generator`` seeded from a CRC32 of "grad:" + op), the
reference gradients are those of ``loss = sum(out * cot)`` with respect to
every f32/f64 tensor input, i.e. ``torch.autograd.grad(out, inputs, cot)``.

What it produces (the folder is wiped and regenerated every run; running it
twice gives byte-identical files):

* ``tests/fixtures/grads/<op>.safetensors`` -- per op, tensors ``c<i>.in<j>``
  (inputs in the program's parameter order), ``c<i>.cot`` (the cotangent) and
  ``c<i>.grad<j>`` (gradient with respect to input j, same dtype and shape as
  it).  ``c<i>`` is the forward case's id.
* ``tests/fixtures/grads/manifest.json`` -- a JSON list, one case a line::

      {"op": "add", "case": "c3", "file": "add.safetensors",
       "program": "def computation(a, b):\\n ...",
       "inputs": ["c3.in0", "c3.in1"], "requires_grad": [true, true],
       "cot": "c3.cot", "grads": ["c3.grad0", "c3.grad1"],
       "dtype": "f32", "out_dtype": "f32", "rtol": 0.0001, "atol": 1e-05,
       "note": "..."}

  ``grads`` lists the gradients of the inputs with ``requires_grad`` true, in
  input order.  ``dtype`` is the gradients' dtype (all gradients of a case
  share it); ``out_dtype`` the output's.  Tolerances: f32 rtol 1e-4, atol
  1e-5; f64 rtol 1e-7, atol 1e-9; the f32 ones are used whenever the output
  or the gradients are f32 (``to`` f64 -> f32) -- for ``to`` to f16/bf16 the
  gradient is the cotangent converted exactly.  A case that needs looser
  tolerances says why in its note.
"""

import json
import os
import shutil
import sys
import zlib
from collections import OrderedDict

import torch

try:
    from safetensors.torch import load_file, save_file
except ImportError:  # pragma: no cover
    sys.exit("safetensors is required: pip install safetensors")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_op_fixtures as fwd  # noqa: E402  (seeds torch, one thread)

REPO = fwd.REPO
FWD_DIR = fwd.OUT_DIR
OUT_DIR = os.path.join(REPO, "tests", "fixtures", "grads")

GRAD_DTYPES = (torch.float32, torch.float64)
TOL = {"f32": (1e-4, 1e-5), "f64": (1e-7, 1e-9)}

# ----------------------------------------------------------------------------
# record the forward cases: (op, case id, args, ref, note)
# ----------------------------------------------------------------------------
RECORDED = []
_orig_case = fwd.case


def _recording_case(op, args, ref, note="", loose=None, skip_key=None):
    before = len(fwd.CASES.get(op, []))
    _orig_case(op, args, ref, note, loose=loose, skip_key=skip_key)
    cases = fwd.CASES.get(op, [])
    if len(cases) > before:  # PyTorch accepted it
        RECORDED.append((op, cases[-1]["case"], list(args), ref, cases[-1]))


fwd.case = _recording_case


def collect_forward_cases():
    import warnings

    warnings.filterwarnings("ignore")
    fwd.gen_unary()
    fwd.gen_binary()
    fwd.gen_where()
    fwd.gen_to()
    fwd.gen_shape_ops()
    fwd.gen_reductions()
    fwd.gen_matmul()
    fwd.gen_activations()
    fwd.gen_factories()
    fwd.gen_stats()
    fwd.gen_indexing()
    fwd.gen_conv()
    fwd.gen_norms()


def check_against_forward_fixtures():
    """The regenerated cases must be those stored in tests/fixtures/ops."""
    path = os.path.join(FWD_DIR, "manifest.json")
    if not os.path.exists(path):
        sys.exit("%s is missing: run scripts/gen_op_fixtures.py first" % path)
    with open(path) as f:
        stored = {(c["op"], c["case"]): c for c in json.load(f)}
    files = {}
    for op, cid, _args, _ref, c in RECORDED:
        s = stored.get((op, cid))
        if s is None or s["program"] != c["program"] or s["inputs"] != c["inputs"]:
            sys.exit("%s/%s differs from tests/fixtures/ops: rerun gen_op_fixtures.py" % (op, cid))
        if op not in files:
            files[op] = load_file(os.path.join(FWD_DIR, op + ".safetensors"))
        for n in c["inputs"]:
            if not fwd.raw_equal(fwd.TENSORS[op][n], files[op][n]):
                sys.exit("%s/%s input %s differs from tests/fixtures/ops: rerun "
                         "gen_op_fixtures.py" % (op, cid, n))


# ----------------------------------------------------------------------------
# selection and gradients
# ----------------------------------------------------------------------------
def tensors_of(args):
    return [a for a in args if isinstance(a, torch.Tensor)]


def finite(t):
    return not t.dtype.is_floating_point or bool(torch.isfinite(t).all())


def run_ref(ref, args, wrt):
    """Forward in PyTorch with the inputs at positions ``wrt`` (of the tensor
    inputs) requiring grad.  Returns (output, leaf tensors)."""
    leaves = []
    call = []
    k = 0
    for a in args:
        if isinstance(a, torch.Tensor):
            t = a.detach().clone()
            if k in wrt:
                t.requires_grad_(True)
            leaves.append(t)
            call.append(t)
            k += 1
        else:
            call.append(fwd.resolve(a))
    return ref(*call), leaves


def ties(a, b):
    """Whether maximum/minimum of a and b (tensors or literals) has a tie."""
    a = a if isinstance(a, torch.Tensor) else torch.tensor(float(a), dtype=torch.float64)
    b = b if isinstance(b, torch.Tensor) else torch.tensor(float(b), dtype=torch.float64)
    return bool((a.to(torch.float64) == b.to(torch.float64)).any())


def amax_gap_ok(x, dims):
    """Every reduced slice's maximum is more than 1e-3 above its runner-up."""
    x = x.to(torch.float64)
    if x.dim() == 0:
        return True
    dims = list(range(x.dim())) if dims is None else [d % x.dim() for d in dims]
    keep = [d for d in range(x.dim()) if d not in dims]
    flat = x.permute(keep + dims).reshape(
        [int(torch.tensor([x.shape[d] for d in keep]).prod()) if keep else 1, -1])
    if flat.shape[1] < 2:
        return True
    top = torch.topk(flat, 2, dim=1).values
    return bool((top[:, 0] - top[:, 1] > 1e-3).all())


def select(op, args, case):
    """(reason to skip or None, args to use, extra note)."""
    tens = tensors_of(args)
    if not tens:
        return "no tensor input", args, ""
    if any(t.numel() == 0 for t in tens):
        return "zero elements", args, ""
    floats = [t for t in tens if t.dtype.is_floating_point]
    if any(t.dtype not in GRAD_DTYPES for t in floats):
        return "f16/bf16 input", args, ""
    if not floats:
        return "no float tensor input", args, ""
    if case["dtype"] not in ("f32", "f64") and not (op == "to" and case["dtype"] in fwd.FLOATS):
        return "%s output" % case["dtype"], args, ""
    if not all(finite(t) for t in tens):
        return "non-finite input", args, ""
    note = ""
    if op == "polygamma" and args[0] == 1:
        return "no VJP rule for trigamma (needs polygamma(2, x))", args, ""
    if op in ("relu", "abs") and bool((tens[0].abs() < 1e-3).any()):
        return "input within 1e-3 of 0", args, ""
    if op in ("maximum", "minimum") and ties(args[0], args[1]):
        args = list(args)
        last = max(i for i, a in enumerate(args)
                   if isinstance(a, torch.Tensor) and a.dtype.is_floating_point)
        args[last] = args[last] + 0.25
        assert not ties(args[0], args[1])
        note = "ties broken: input %d shifted by +0.25 from the forward fixture" % sum(
            isinstance(a, torch.Tensor) for a in args[:last])
    if op == "scatter_add" and args[2].shape != args[3].shape:
        # torch's ScatterAddBackward returns a gradient of the index's shape for src.
        return "src larger than the index (torch's backward raises)", args, ""
    if op == "amax" and not amax_gap_ok(tens[0], args[1]):
        return "amax tie (gap <= 1e-3)", args, ""
    if op == "amin" and not amax_gap_ok(-tens[0], args[1]):
        return "amin tie (gap <= 1e-3)", args, ""
    if op in ("max", "min") and args[1] is None:
        x = tens[0] if op == "max" else -tens[0]
        if not amax_gap_ok(x, None):
            return "%s tie (gap <= 1e-3)" % op, args, ""
    return None, args, note


def cot_for(g, out):
    u = torch.rand(out.shape, generator=g, dtype=torch.float64)
    return (u * 2 - 1).to(out.dtype)


def main():
    collect_forward_cases()
    check_against_forward_fixtures()

    cases = OrderedDict()  # op -> [manifest entries]
    tensors = OrderedDict()  # op -> {name: tensor}
    skipped = OrderedDict()  # op -> {reason: count}
    gens = {}
    for op, cid, args, ref, fcase in RECORDED:
        reason, args, extra = select(op, args, fcase)
        if reason is None:
            tens = tensors_of(args)
            wrt = [k for k, t in enumerate(tens) if t.dtype in GRAD_DTYPES]
            if op == "batch_norm":
                # running_mean and running_var (arguments 1 and 2) are buffers, not inputs
                # torch differentiates.
                stats = [sum(isinstance(x, torch.Tensor) for x in args[:i])
                         for i in (1, 2) if isinstance(args[i], torch.Tensor)]
                wrt = [k for k in wrt if k not in stats]
            out, leaves = run_ref(ref, args, wrt)
            if isinstance(out, tuple):
                # Several outputs (max/min with a dim, var_mean, topk, sort): the loss reads
                # the first, as the Rust harness does.
                out = out[0]
            assert isinstance(out, torch.Tensor), (op, cid)
            if not out.dtype.is_floating_point:
                reason = "non-float output"
            elif not finite(out):
                reason = "non-finite output"
        if reason is not None:
            skipped.setdefault(op, OrderedDict())
            skipped[op][reason] = skipped[op].get(reason, 0) + 1
            continue
        if op not in gens:
            gens[op] = torch.Generator().manual_seed(zlib.crc32(("grad:" + op).encode()))
        cot = cot_for(gens[op], out)
        try:
            grads = torch.autograd.grad(out, [leaves[k] for k in wrt], cot, allow_unused=True)
        except (RuntimeError, NotImplementedError) as e:
            # floor_divide and remainder(scalar, tensor) have no derivative in torch, and
            # remainder's backward negates a b8 dividend (mixed b8 + float cases).
            msg = str(e)
            if not (("derivative for" in msg and "not implemented" in msg)
                    or "on a bool tensor is not supported" in msg):
                raise
            reason = "torch's backward raises"
            skipped.setdefault(op, OrderedDict())
            skipped[op][reason] = skipped[op].get(reason, 0) + 1
            continue
        grads = [torch.zeros_like(leaves[k]) if gr is None else gr for k, gr in zip(wrt, grads)]
        assert all(finite(gr) for gr in grads), (op, cid)
        gdts = {fwd.DTYPE_NAME[gr.dtype] for gr in grads}
        assert len(gdts) == 1, (op, cid, gdts)
        gdt = gdts.pop()
        odt = fwd.DTYPE_NAME[out.dtype]
        tol_dt = "f64" if gdt == "f64" and odt == "f64" else "f32"
        rtol, atol = TOL[tol_dt]

        tens_op = tensors.setdefault(op, OrderedDict())
        in_names, grad_names, req = [], [], []
        for k, t in enumerate(leaves):
            n = "%s.in%d" % (cid, k)
            tens_op[n] = t.detach().clone().contiguous()
            in_names.append(n)
            req.append(k in wrt)
        cot_name = "%s.cot" % cid
        tens_op[cot_name] = cot.contiguous()
        for k, gr in zip(wrt, grads):
            assert gr.dtype == leaves[k].dtype and gr.shape == leaves[k].shape, (op, cid, k)
            n = "%s.grad%d" % (cid, k)
            tens_op[n] = gr.detach().clone().contiguous()
            grad_names.append(n)
        note = fcase["note"]
        if extra:
            note = extra + "; " + note
        if tol_dt != gdt:
            note += "; f32 tolerance: the output is f32"
        cases.setdefault(op, []).append(OrderedDict([
            ("op", op),
            ("case", cid),
            ("file", op + ".safetensors"),
            ("program", fcase["program"]),
            ("inputs", in_names),
            ("requires_grad", req),
            ("cot", cot_name),
            ("grads", grad_names),
            ("dtype", gdt),
            ("out_dtype", odt),
            ("rtol", rtol),
            ("atol", atol),
            ("note", note),
        ]))

    if os.path.isdir(OUT_DIR):
        shutil.rmtree(OUT_DIR)
    os.makedirs(OUT_DIR)
    manifest = []
    for op, cs in cases.items():
        save_file(dict(tensors[op]), os.path.join(OUT_DIR, op + ".safetensors"),
                  metadata={"generator": "scripts/gen_grad_fixtures.py"})
        manifest.extend(cs)
    with open(os.path.join(OUT_DIR, "manifest.json"), "w") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(c) for c in manifest))
        f.write("\n]\n")

    # verify the round trip
    for op, tens_op in tensors.items():
        loaded = load_file(os.path.join(OUT_DIR, op + ".safetensors"))
        assert set(loaded) == set(tens_op), op
        for k, v in tens_op.items():
            assert fwd.raw_equal(v, loaded[k]), (op, k)
    for c in manifest:
        for n in c["inputs"] + c["grads"] + [c["cot"]]:
            assert n in tensors[c["op"]], (c["op"], n)

    total = sum(os.path.getsize(os.path.join(OUT_DIR, fn)) for fn in os.listdir(OUT_DIR))
    print("gradient cases per op (kept / forward cases):")
    n_fwd = OrderedDict()
    for op, _cid, _a, _r, _c in RECORDED:
        n_fwd[op] = n_fwd.get(op, 0) + 1
    for op, n in n_fwd.items():
        kept = len(cases.get(op, []))
        why = ", ".join("%s: %d" % kv for kv in skipped.get(op, {}).items())
        print("  %-11s %4d / %4d   %s" % (op, kept, n, ("skipped " + why) if why else ""))
    print("total: %d cases, %d files, %.1f KiB in %s" % (
        len(manifest), len(os.listdir(OUT_DIR)), total / 1024.0, os.path.relpath(OUT_DIR, REPO)))


if __name__ == "__main__":
    main()
