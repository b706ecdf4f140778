#!/usr/bin/env python3
"""How long opening each CUDA library the plugins load at run time takes in a fresh process,
with and without PyTorch imported first (PyTorch maps its own cuBLAS/cuDNN/NVRTC at import),
and which file each name resolves to. Translation-time context for issue 17 (a warm kernel
cache still opens these). Run after `source scripts/gpu/cuda_libs.sh`, as the GPU scripts do.

    python3 scripts/gpu/lib_load_times.py
"""
import subprocess
import sys

NAMES = ["libcublasLt.so", "libcublasLt.so.13", "libnvrtc.so", "libnvrtc.so.13", "libcudnn.so.9"]

CHILD = r"""
import ctypes, os, sys, time
if sys.argv[2] == "torch":
    import torch
before = {l.split()[-1] for l in open("/proc/self/maps") if ".so" in l}
t = time.perf_counter()
try:
    ctypes.CDLL(sys.argv[1])
    ok = "ok"
except OSError as e:
    ok = "missing"
ms = (time.perf_counter() - t) * 1e3
after = {l.split()[-1] for l in open("/proc/self/maps") if ".so" in l}
new = sorted(p for p in after - before if os.path.basename(p).startswith(sys.argv[1].split(".so")[0]))
where = (", ".join(new) or "(none: already loaded)") if ok == "ok" else "-"
print(f"{sys.argv[1]:22s} {sys.argv[2]:8s} {ok:8s} {ms:8.1f} ms  newly mapped: {where}")
"""

for name in NAMES:
    for mode in ("bare", "torch"):
        r = subprocess.run([sys.executable, "-c", CHILD, name, mode], capture_output=True, text=True, timeout=120)
        print((r.stdout or r.stderr[-300:]).rstrip())
