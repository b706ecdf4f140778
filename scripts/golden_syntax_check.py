#!/usr/bin/env python3
"""C++ syntax check of the golden CUDA sources (no CUDA here): each kernel of each
`executors/cuda-fuser/tests/golden/*.cu` file, or of the files named (cuda-kernels' goldens
too), split at its `// launch:` (or `// <symbol>: launch`) line, is compiled by
`g++ -fsyntax-only` after a few lines of stubs for the CUDA keywords and intrinsics it uses.
Catches unbalanced braces, undeclared names, type errors; not PTX or launch errors.

    python3 scripts/golden_syntax_check.py [files...]
"""
import pathlib
import subprocess
import sys
import tempfile

STUBS = r"""
#include <cmath>
using std::isnan; using std::isinf;
#define __device__
#define __global__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
template <typename T> T __ldcs(const T* p) { return *p; }
unsigned cluster_rank_host();
void cluster_sync_host();
template <typename T> T cluster_ld_host(const T* p, unsigned rank);
#define __restrict__
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct dim3s { unsigned x, y, z; };
extern dim3s threadIdx, blockIdx, blockDim, gridDim;
void __syncthreads();
void __threadfence();
unsigned atomicAdd(unsigned*, unsigned);
template <typename T> T __shfl_xor_sync(unsigned, T, int);
float __uint_as_float(unsigned);
unsigned __float_as_uint(float);
float __int_as_float(int);
int __float_as_int(float);
double __longlong_as_double(long long);
long long __double_as_longlong(double);
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
uint4 make_uint4(unsigned, unsigned, unsigned, unsigned);
uint2 make_uint2(unsigned, unsigned);
float4 make_float4(float, float, float, float);
long long __double2ll_rn(double);
unsigned __umulhi(unsigned, unsigned);
unsigned long long atomicAdd(unsigned long long*, unsigned long long);
int atomicAdd(int*, int);
float atomicAdd(float*, float);
double atomicAdd(double*, double);
unsigned long long atomicCAS(unsigned long long*, unsigned long long, unsigned long long);
unsigned atomicCAS(unsigned*, unsigned, unsigned);
"""


def kernels(text):
    parts, cur = [], []
    for line in text.splitlines(keepends=True):
        # cuda-fuser marks each kernel `// launch: ...`, cuda-kernels `// <symbol>: launch ...`.
        marker = line.startswith("// launch:") or (line.startswith("// ") and ": launch " in line)
        if marker and cur:
            parts.append("".join(cur))
            cur = []
        cur.append(line)
    if cur:
        parts.append("".join(cur))
    return parts


def main():
    root = pathlib.Path(__file__).resolve().parent.parent
    files = [pathlib.Path(f) for f in sys.argv[1:]] or sorted(
        (root / "executors/cuda-fuser/tests/golden").glob("*.cu"))
    bad = 0
    for f in files:
        for i, src in enumerate(kernels(f.read_text())):
            with tempfile.NamedTemporaryFile("w", suffix=".cpp", delete=False) as t:
                # Dynamic shared memory is declared `extern __shared__`; `static` (above)
                # models the other shared arrays.
                t.write(STUBS + src.replace('extern __shared__', 'extern'))
            r = subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-w", t.name],
                               capture_output=True, text=True)
            pathlib.Path(t.name).unlink()
            status = "ok" if r.returncode == 0 else "FAIL"
            print(f"{status} {f.name} kernel {i}")
            if r.returncode != 0:
                bad += 1
                print(r.stderr[:2000])
    print(f"{bad} kernel(s) failed")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
