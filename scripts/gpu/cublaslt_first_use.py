#!/usr/bin/env python3
"""Where cuBLASLt's first use in a process goes (issue 17's warm translation: the cublas
executor's first compile took 70-110 ms with a warm kernel cache). Each case runs in a fresh
process with PyTorch imported and cuda:0 initialised, through ctypes on the libcublasLt that
PyTorch mapped (as the plugin does), and times: handle creation, the descriptors, the first
heuristic query (a GPT-2 qkv product, bf16), a second shape's query, and the first shape again
on a new handle. "torch-matmul" first runs one bf16 product through PyTorch. "save" then
"cached": whether a process that skips the heuristic query (its algorithm kept on disk by an
earlier one) still pays the first use at its first product.

    source scripts/gpu/cuda_libs.sh; python3 scripts/gpu/cublaslt_first_use.py
"""
import subprocess
import sys

CHILD = r"""
import ctypes, sys, time
import torch
torch.zeros(1, device="cuda")
torch.cuda.synchronize()
if sys.argv[1] == "torch-matmul":
    a = torch.randn(64, 64, device="cuda", dtype=torch.bfloat16)
    (a @ a).sum().item()
lib = None
for l in open("/proc/self/maps"):
    if "libcublasLt.so" in l:
        lib = l.split()[-1]
        break
lt = ctypes.CDLL(lib or "libcublasLt.so.13")
P = ctypes.c_void_p
def ms(t):
    return (time.perf_counter() - t) * 1e3
out = {}
def check(name, status):
    if status != 0:
        raise SystemExit(f"{name} failed: status {status} (so far: {out})")
t = time.perf_counter()
handle = P()
check("cublasLtCreate", lt.cublasLtCreate(ctypes.byref(handle)))
out["create"] = ms(t)
def query(m, n, k, h, result=None):
    t = time.perf_counter()
    desc, la, lb, ld, pref = P(), P(), P(), P(), P()
    check("desc", lt.cublasLtMatmulDescCreate(ctypes.byref(desc), 68, 0))  # COMPUTE_32F, R_32F
    # Column-major D (m x n) = A (m x k) B (k x n).
    for l, r, c in ((la, m, k), (lb, k, n), (ld, m, n)):
        check("layout", lt.cublasLtMatrixLayoutCreate(ctypes.byref(l), 14, ctypes.c_uint64(r), ctypes.c_uint64(c), ctypes.c_int64(r)))
    check("pref", lt.cublasLtMatmulPreferenceCreate(ctypes.byref(pref)))
    ws = ctypes.c_uint64(32 << 20)
    check("pref attr", lt.cublasLtMatmulPreferenceSetAttribute(pref, 1, ctypes.byref(ws), ctypes.c_size_t(8)))
    setup = ms(t)
    t = time.perf_counter()
    result = result if result is not None else (ctypes.c_ubyte * 256)()
    found = ctypes.c_int(0)
    check("heuristic", lt.cublasLtMatmulAlgoGetHeuristic(h, desc, la, lb, ld, ld, pref, 1, result, ctypes.byref(found)))
    return setup, ms(t), found.value
def matmul(m, n, k, h, algo):
    # One product D (m x n) = A (m x k) B (k x n) with `algo` (the heuristic result's first
    # 64 bytes), timed with its synchronisation.
    desc, la, lb, ld = P(), P(), P(), P()
    check("desc", lt.cublasLtMatmulDescCreate(ctypes.byref(desc), 68, 0))
    for l, r, c in ((la, m, k), (lb, k, n), (ld, m, n)):
        check("layout", lt.cublasLtMatrixLayoutCreate(ctypes.byref(l), 14, ctypes.c_uint64(r), ctypes.c_uint64(c), ctypes.c_int64(r)))
    a = torch.randn(k, m, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    d = torch.empty(n, m, device="cuda", dtype=torch.bfloat16)
    ws = torch.empty(32 << 20, device="cuda", dtype=torch.uint8)
    torch.cuda.synchronize()
    alpha, beta = ctypes.c_float(1.0), ctypes.c_float(0.0)
    t = time.perf_counter()
    check("matmul", lt.cublasLtMatmul(h, desc, ctypes.byref(alpha), P(a.data_ptr()), la, P(b.data_ptr()), lb,
                                      ctypes.byref(beta), P(d.data_ptr()), ld, P(d.data_ptr()), ld, algo,
                                      P(ws.data_ptr()), ctypes.c_size_t(32 << 20), P(0)))
    torch.cuda.synchronize()
    return ms(t)
ALGO = "/tmp/cublaslt_first_use_algo.bin"
if sys.argv[1] in ("save", "cached"):
    if sys.argv[1] == "save":
        result = (ctypes.c_ubyte * 256)()
        s, q, f = query(768 * 3, 8192, 768, handle, result)
        out["first heuristic"] = q
        open(ALGO, "wb").write(bytes(result[:64]))
        out["then first matmul"] = matmul(768 * 3, 8192, 768, handle, result)
    else:
        algo = (ctypes.c_ubyte * 64).from_buffer_copy(open(ALGO, "rb").read())
        out["first matmul, saved algorithm"] = matmul(768 * 3, 8192, 768, handle, algo)
        out["second matmul"] = matmul(768 * 3, 8192, 768, handle, algo)
    print(f"{sys.argv[1]:13s} " + ", ".join(f"{k} {v:.2f} ms" for k, v in out.items()))
    raise SystemExit(0)
s, q, f = query(768 * 3, 8192, 768, handle)
out["descriptors"], out["first heuristic"] = s, q
s, q, f = query(768, 8192, 3072, handle)
out["second shape"] = q
s, q, f = query(768 * 3, 8192, 768, handle)
out["first shape again"] = q
t = time.perf_counter()
h2 = P()
check("cublasLtCreate", lt.cublasLtCreate(ctypes.byref(h2)))
out["second handle"] = ms(t)
s, q, f = query(768 * 3, 8192, 768, h2)
out["first shape, second handle"] = q
print(f"{sys.argv[1]:13s} " + ", ".join(f"{k} {v:.2f} ms" for k, v in out.items()) + f"  [{lib}]")
"""

# "save": a fresh process's heuristic query, its algorithm kept in a file, then the product;
# "cached": a fresh process runs the product with the kept algorithm, asking no heuristic.
for mode in ("fresh", "torch-matmul", "fresh", "torch-matmul", "save", "cached", "save", "cached"):
    r = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=300)
    print((r.stdout or r.stderr[-600:]).rstrip(), flush=True)
