"""Times generated cuda-fuser kernels as source files, to compare hand-edited variants of a kernel
before changing the code generator. Each file is one kernel as `tests/golden` spells it: a
`// launch: ...` line, the `// thunder cuda-fuser kernel over [R, C]` header, then the source.

    python3 scripts/gpu/kernel_lab.py DIR [--reps 50]

The kernels of a trace are written on the host, for an H100, by
`cargo run -p thunder-cuda-fuser --example dump_kernels -- TRACE.py DIR` (the row tuning
taken from `THUNDER_CUDA_FUSER_ROWS` as on the device); copy a file to `NAME@VARIANT.cu` and
edit it to try a variant.

Files named `NAME.cu` and `NAME@VARIANT.cu` are grouped by NAME; each variant's output is
compared with the first file's: `yes` where the bits are equal (a variant that changes how the
kernel runs, not what it computes), else the largest difference over the largest magnitude (a
variant that sums in another order). A hand-written variant may launch as `ClusterRows { rows,
block, shared_bytes, cluster }` (`cluster` blocks a row), and a `// grid: N` line sets the
grid. The table gives each one's median kernel time (CUDA events, L2 evicted by a
256 MiB copy before each call), registers and local memory a thread, and x a copy of the same
bytes (in + out). Inputs are random (normal for floats), every buffer sized like the full shape.
NVRTC and the driver are called through ctypes with the fuser's options (sm_XY, c++17, fmad).
"""
import argparse
import ctypes
import glob
import os
import re
import statistics
import sys

import torch


def load_nvrtc():
    names = ["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"]
    for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") + ["/usr/local/cuda/lib64"]:
        for n in names:
            p = os.path.join(d, n)
            if d and os.path.exists(p):
                return ctypes.CDLL(p)
    for n in names:
        try:
            return ctypes.CDLL(n)
        except OSError:
            pass
    sys.exit("kernel_lab: libnvrtc not found (source scripts/gpu/cuda_libs.sh first)")


nvrtc = load_nvrtc()
cuda = ctypes.CDLL("libcuda.so.1")


def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what} failed with {rc}")


def compile_cubin(src, arch):
    prog = ctypes.c_void_p()
    check(nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"k.cu", 0, None, None), "nvrtcCreateProgram")
    opts = [f"--gpu-architecture=sm_{arch[0]}{arch[1]}".encode(), b"--std=c++17", b"--fmad=true"]
    arr = (ctypes.c_char_p * len(opts))(*opts)
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), arr)
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        raise RuntimeError(f"NVRTC: {log.value.decode()[:2000]}")
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    img = ctypes.create_string_buffer(size.value)
    check(nvrtc.nvrtcGetCUBIN(prog, img), "nvrtcGetCUBIN")
    return img


def function_of(img, name):
    mod = ctypes.c_void_p()
    check(cuda.cuModuleLoadData(ctypes.byref(mod), img), "cuModuleLoadData")
    fn = ctypes.c_void_p()
    check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), "cuModuleGetFunction")
    return fn


def attr(fn, a):
    v = ctypes.c_int()
    check(cuda.cuFuncGetAttribute(ctypes.byref(v), a, fn), "cuFuncGetAttribute")
    return v.value


def grid_of(launch, sms):
    """The fuser's grid (executors/cuda-fuser/src/compiled.rs `grid`)."""
    kind = launch.split()[0]
    f = {k: int(v) for k, v in re.findall(r"(\w+): (\d+)", launch)}
    cap = sms * 32
    clamp = lambda x: max(1, min(x, cap))  # noqa: E731
    if kind == "WarpRows":
        return clamp(-(-f["rows"] // f["rows_per_block"])), f["lanes"] * f["rows_per_block"], 0
    if kind in ("BlockPerRow", "StagedRows"):
        return clamp(f["rows"]), f["block"], f.get("shared_bytes", 0)
    if kind == "PipelinedRows":  # `per_sm` blocks a multiprocessor take the rows in turn
        return max(1, min(f["rows"], sms * f["per_sm"], cap)), f["block"], 0
    if kind == "ClusterRows":  # a hand-written variant's launch: `cluster` blocks a row
        c = f["cluster"]
        return clamp(f["rows"] * c) // c * c, f["block"], f.get("shared_bytes", 0)
    raise SystemExit(f"kernel_lab: launch {kind} not handled")


TYPES = {"u16_t": torch.bfloat16, "float": torch.float32, "double": torch.float64}


def median_us(call, reps, flush):
    """`call`'s median time on the GPU over `reps` calls (CUDA events), L2 evicted before each."""
    times = []
    for _ in range(reps):
        flush[1].copy_(flush[0])
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        call()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1000)
    return statistics.median(times)


def run(path, reps, sms, arch, flush):
    src = open(path).read()
    launch = re.search(r"// launch: (.*)", src).group(1)
    shape = [int(x) for x in re.search(r"kernel over \[([\d, ]+)\]", src).group(1).split(",")]
    numel = 1
    for d in shape:
        numel *= d
    sig = re.search(r'extern "C" __global__ void .*?(\w+)\(([^()]*)\)\s*\{', src)
    name, params = sig.group(1), [p.strip() for p in sig.group(2).split(",")]
    gen = torch.Generator(device="cuda").manual_seed(0)
    bufs, outs, nbytes = [], [], 0
    for p in params:
        t = TYPES[p.replace("const", "").split("*")[0].strip()]
        x = torch.randn(numel, device="cuda", dtype=torch.float32, generator=gen).to(t)
        bufs.append(x)
        nbytes += x.numel() * x.element_size() if ("in0" in p or "out" in p) else 0
        if "out" in p.split()[-1]:
            outs.append(x)
    img = compile_cubin(src, arch)
    fn = function_of(img, name)
    grid, block, shared = grid_of(launch, sms)
    forced = re.search(r"// grid: (\d+)", src)  # a variant's own grid size
    if forced:
        grid = int(forced.group(1))
    if shared > 48 * 1024:
        check(cuda.cuFuncSetAttribute(fn, 8, shared), "cuFuncSetAttribute")  # MAX_DYNAMIC_SHARED
    regs, local = attr(fn, 4), attr(fn, 3)  # NUM_REGS, LOCAL_SIZE_BYTES
    ptrs = [ctypes.c_void_p(b.data_ptr()) for b in bufs]
    args = (ctypes.c_void_p * len(ptrs))(*[ctypes.cast(ctypes.pointer(p), ctypes.c_void_p) for p in ptrs])
    stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)

    def launch_once():
        check(cuda.cuLaunchKernel(fn, grid, 1, 1, block, 1, 1, shared, stream, args, None), "cuLaunchKernel")

    launch_once()
    torch.cuda.synchronize()
    result = [o.clone() for o in outs]
    copy_src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
    copy_dst = torch.empty_like(copy_src)
    us = median_us(launch_once, reps, flush)
    copy_us = median_us(lambda: copy_dst.copy_(copy_src), reps, flush)
    return dict(us=us, copy_us=copy_us, regs=regs, local=local,
                grid=grid, block=block, result=result)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dir")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    sms, arch = props.multi_processor_count, (props.major, props.minor)
    print(f"device: {props.name}, {sms} SMs, sm_{arch[0]}{arch[1]}, torch {torch.__version__}")
    flush = (torch.empty(256 << 20, dtype=torch.uint8, device="cuda"), torch.empty(256 << 20, dtype=torch.uint8, device="cuda"))
    groups = {}
    for p in sorted(glob.glob(os.path.join(a.dir, "*.cu"))):
        base = os.path.basename(p)[:-3]
        groups.setdefault(base.split("@")[0], []).append((base.split("@")[1] if "@" in base else "as generated", p))
    print(f"{'kernel':34} {'variant':22} {'us':>8} {'x copy':>7} {'regs':>5} {'local':>6} {'grid x block':>14} same")
    for g, variants in groups.items():
        variants.sort(key=lambda v: v[0] != "as generated")
        first = None
        for v, p in variants:
            try:
                r = run(p, a.reps, sms, arch, flush)
            except Exception as e:  # noqa: BLE001
                print(f"{g:34} {v:22} failed: {e}")
                continue
            same = "-"
            if first is None:
                first = r["result"]
            else:
                if all(torch.equal(x, y) for x, y in zip(first, r["result"])):
                    same = "yes"
                else:  # a variant that sums in another order: how far from the original
                    err = max(((x.double() - y.double()).abs().max() / y.double().abs().max().clamp_min(1e-30)).item()
                              for x, y in zip(r["result"], first))
                    same = f"no, {err:.1e} of max"
            print(f"{g:34} {v:22} {r['us']:8.1f} {r['us'] / r['copy_us']:7.2f} {r['regs']:5} {r['local']:6}"
                  f" {r['grid']:>6} x {r['block']:<5} {same}", flush=True)


if __name__ == "__main__":
    main()
