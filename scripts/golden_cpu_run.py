#!/usr/bin/env python3
"""Runs the reduction golden sources of cuda-fuser (columns, rows) on the CPU, against numpy.

No GPU here: each kernel's CUDA C++ is compiled by g++ with a few lines that model the CUDA
execution (a std::thread per CUDA thread, std::barrier for __syncthreads, `static` for
__shared__, real atomics), launched with the golden's `// launch:` grid (and once with a
small grid, so that blocks take several tiles / splits in turn), and its outputs compared
with numpy (products exact, sums to the dtype's rounding). Blocks run one after another, so
this checks the arithmetic, indexing, split combine and full-output stores, not races. The
blocks of a cluster (`ClusterRows`) run at once, each with shared memory of its own (its
`__shared__` declarations become per-block arrays), a barrier over all their threads for
`cluster_sync`, and another block's variable read from its array for `cluster_ld`.

    python3 scripts/golden_cpu_run.py
"""
import pathlib
import re
import subprocess
import sys
import tempfile

import numpy as np
ROOT = pathlib.Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "executors/cuda-fuser/tests/golden"
D = pathlib.Path(tempfile.mkdtemp(prefix="golden_cpu_"))
HARNESS = r'''
#include <barrier>
#include <algorithm>
#include <memory>
#include <thread>
#include <vector>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
using std::isnan; using std::isinf;
#define __device__
#define __global__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __cluster_dims__(...)
template <typename T> T __ldcs(const T* p) { return *p; }
#define __restrict__
#define __shared__ static
#define __align__(n) alignas(n)
struct dim3s { unsigned x, y, z; };
thread_local dim3s threadIdx, blockIdx;
dim3s blockDim, gridDim;
// Per block of a running cluster (one block at a time outside clusters: block 0).
thread_local unsigned g_bic = 0;
std::barrier<>* g_bars[8];
void __syncthreads() { g_bars[g_bic]->arrive_and_wait(); }
std::barrier<>* g_cluster_bar;
unsigned cluster_rank_host() { return g_bic; }
void cluster_sync_host() { g_cluster_bar->arrive_and_wait(); }
// A cluster kernel's __shared__ scalars are per-block arrays (`NAME_c[8]`): another block's
// copy sits `rank - g_bic` elements away.
template <typename T> T cluster_ld_host(const T* p, unsigned rank) { return p[(long)rank - (long)g_bic]; }
void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
// A warp's lanes swap values through one slot per thread, a barrier per warp on each side.
alignas(8) unsigned char g_shfl[8][1024][8];
std::barrier<>* g_warp_bar[8][32];
template <typename T> T __shfl_xor_sync(unsigned, T v, int o) {
  const unsigned t = threadIdx.x;
  memcpy(g_shfl[g_bic][t], &v, sizeof(T));
  g_warp_bar[g_bic][t >> 5]->arrive_and_wait();
  T r; memcpy(&r, g_shfl[g_bic][t ^ o], sizeof(T));
  g_warp_bar[g_bic][t >> 5]->arrive_and_wait();
  return r;
}
float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
float __int_as_float(int u) { float f; memcpy(&f, &u, 4); return f; }
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
'''
def bf16(a):
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7fff + ((u >> 16) & 1)) >> 16
    return u.astype(np.uint16)
def unbf16(u):
    return (u.astype(np.uint32) << 16).view(np.float32)
def rbf(a):
    return unbf16(bf16(a))

def run(name, ins, outs, grid_cap):
    src = (GOLDEN / f'{name}.cu').read_text()
    warp = re.search(r'// launch: WarpRows \{ rows: (\d+), rows_per_block: (\d+), lanes: (\d+)', src)
    staged = re.search(r'// launch: StagedRows \{ rows: (\d+), block: (\d+), shared_bytes: (\d+)', src)
    clustered = re.search(r'// launch: ClusterRows \{ rows: (\d+), block: (\d+), shared_bytes: (\d+), cluster: (\d+)', src)
    cluster = 1
    if clustered:
        # Every block of a running cluster has its own shared memory: each __shared__ variable
        # becomes an array over the blocks, indexed by the thread's block in the cluster.
        kind, rows, block = 'ClusterRows', int(clustered.group(1)), int(clustered.group(2))
        cluster = int(clustered.group(4))
        splits, scratch, units = 1, 0, rows * cluster
        src = src.replace('extern __shared__ __align__(16) unsigned char row_stage[];',
                          f'alignas(16) static unsigned char row_stage_c[8][{clustered.group(3)}]; '
                          'unsigned char* row_stage = row_stage_c[g_bic];')
        src = re.sub(r'__shared__ (\w+) (\w+)\[(\d+)\];', r'static \1 \2_c[8][\3]; \1* \2 = \2_c[g_bic];', src)
        src = re.sub(r'__shared__ (\w+) (\w+);', r'static \1 \2_c[8]; \1& \2 = \2_c[g_bic];', src)
    elif staged:
        # Dynamic shared memory: one array for the block's threads (blocks run in turn).
        kind, rows, block = 'StagedRows', int(staged.group(1)), int(staged.group(2))
        splits, scratch, units = 1, 0, rows
        src = src.replace('extern __shared__ __align__(16) unsigned char row_stage[];',
                          f'alignas(16) static unsigned char row_stage[{staged.group(3)}];')
    elif warp:
        kind, rows, per_block, lanes = 'WarpRows', int(warp.group(1)), int(warp.group(2)), int(warp.group(3))
        block, splits, scratch, units = lanes * per_block, 1, 0, -(-rows // per_block)
    else:
        launch = re.search(r'// launch: (\w+) \{ rows: (\d+), block: (\d+)(?:, splits: (\d+), scratch: (\d+))?', src)
        kind, rows, block = launch.group(1), int(launch.group(2)), int(launch.group(3))
        splits = int(launch.group(4) or 1); scratch = int(launch.group(5) or 0)
        units = rows * splits
    grid = max(cluster, min(units, grid_cap) // cluster * cluster)
    kname = re.search(r"void (?:__cluster_dims__\([\d, ]+\) )?__launch_bounds__\([\d, ]+\) (\w+)\(", src).group(1)
    body = src.split('typedef unsigned char u8_t;', 1)[1]
    params = re.search(kname + r'\((.*)\) \{', src).group(1).split(', ')
    cargs, lines = [], []
    for i, (a, _) in enumerate(ins):
        a.tofile(D / f'in{i}.bin')
        lines.append(f'  auto* in{i} = (unsigned char*)aligned_alloc(64, {((a.nbytes + 63)//64)*64}); {{ FILE* f = fopen("{D}/in{i}.bin", "rb"); if (fread(in{i}, 1, {a.nbytes}, f) != {a.nbytes}) return 2; fclose(f); }}')
    for i, (shape, dt) in enumerate(outs):
        nb = int(np.prod(shape)) * np.dtype(dt).itemsize
        lines.append(f'  auto* out{i} = (unsigned char*)aligned_alloc(64, {((nb + 63)//64)*64 or 64}); memset(out{i}, 0xff, {nb});')
    if scratch:
        lines.append(f'  auto* scr = (unsigned char*)aligned_alloc(64, {((scratch+63)//64)*64}); memset(scr, 0, {scratch});')
    for p in params:
        ty, nm = p.rsplit(' ', 1)
        ty = ty.replace('__restrict__', '').strip()
        src_nm = 'scr' if nm == 'split_scratch' else nm
        cargs.append(f'({ty})({src_nm})')
    lines.append(f'  blockDim.x = {block}; gridDim.x = {grid};')
    # Clusters run one after another; the blocks of one run at once.
    lines.append(f'  for (unsigned c0 = 0; c0 < {grid}; c0 += {cluster}) {{ std::barrier<> cbar({cluster * block}); g_cluster_bar = &cbar;')
    lines.append('    std::vector<std::unique_ptr<std::barrier<>>> bb, wb; std::vector<std::thread> ts;')
    lines.append(f'    for (unsigned q = 0; q < {cluster}; ++q) {{ bb.emplace_back(new std::barrier<>({block})); g_bars[q] = bb.back().get();')
    lines.append(f'      for (unsigned w = 0; w < {(block + 31) // 32}; ++w) {{ wb.emplace_back(new std::barrier<>(std::min(32u, {block}u - 32 * w))); g_warp_bar[q][w] = wb.back().get(); }} }}')
    lines.append(f'    for (unsigned q = 0; q < {cluster}; ++q) for (unsigned t = 0; t < {block}; ++t) ts.emplace_back([=]() {{ g_bic = q; threadIdx.x = t; blockIdx.x = c0 + q; {kname}({", ".join(cargs)}); }});')
    lines.append('    for (auto& t : ts) t.join(); }')
    for i, (shape, dt) in enumerate(outs):
        nb = int(np.prod(shape)) * np.dtype(dt).itemsize
        lines.append(f'  {{ FILE* f = fopen("{D}/out{i}.bin", "wb"); fwrite(out{i}, 1, {nb}, f); fclose(f); }}')
    code = HARNESS + 'typedef unsigned char u8_t;' + body + '\nint main() {\n' + '\n'.join(lines) + '\n  return 0;\n}\n'
    (D / f'{name}.cpp').write_text(code)
    exe = D / name
    r = subprocess.run(['g++', '-std=c++20', '-O1', '-pthread', '-w', '-o', str(exe), str(D / f'{name}.cpp')], capture_output=True, text=True)
    if r.returncode:
        print(r.stderr[:3000]); sys.exit(1)
    subprocess.run([str(exe)], check=True)
    return [np.fromfile(D / f'out{i}.bin', dtype=dt).reshape(shape) for i, (shape, dt) in enumerate(outs)], (kind, rows, block, splits, grid)

rng = np.random.default_rng(0)
def check(label, got, want, tol):
    err = np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))) if got.size else 0.0
    scale = max(1.0, np.max(np.abs(want)))
    ok = err <= tol * scale
    print(f'  {"ok " if ok else "BAD"} {label}: max err {err:.3g} (scale {scale:.3g})')
    return ok


def check_rel(label, got, want, ulps):
    """Elementwise: within `ulps` bf16 units (2^-8 relative) of the f64 reference."""
    err = np.abs(got.astype(np.float64) - want) / np.maximum(np.abs(want), 2.0**-8)
    ok = bool(np.all(err <= ulps * 2.0**-8))
    print(f'  {"ok " if ok else "BAD"} {label}: max err {np.max(err) / 2.0**-8:.2f} bf16 ulps')
    return ok


def layer_norm_ref(x, w, b):
    """layer_norm of bf16 rows `x` (eps 1e-5) with bf16 weight and bias, in f64."""
    xf = unbf16(x).astype(np.float64)
    want = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5)
    return want * unbf16(w) + unbf16(b)


def rows_kernels():
    """Row kernels with shuffles (a warp per row; a block of four-vector threads), against
    numpy in f64, each on a small grid (warps and blocks take many rows in turn)."""
    ok = True
    x = bf16(rng.standard_normal((8192, 768), dtype=np.float32))
    w = bf16(rng.standard_normal(768, dtype=np.float32))
    b = bf16(rng.standard_normal(768, dtype=np.float32))
    want = layer_norm_ref(x, w, b)
    for cap in (5, 10**9):
        (o0,), info = run('layer_norm_bf16_gpt2', [(x, 0), (w, 0), (b, 0)], [((8192, 768), np.uint16)], cap)
        print('layer_norm_bf16_gpt2', info)
        ok &= check_rel('layer_norm', unbf16(o0), want, 1.01)
    # Half-warp teams over 8191 rows: the last warp's second half-warp has no row of its own.
    x = bf16(rng.standard_normal((8191, 768), dtype=np.float32))
    want = layer_norm_ref(x, w, b)
    for cap in (5, 10**9):
        (o0,), info = run('layer_norm_bf16_half_warp', [(x, 0), (w, 0), (b, 0)], [((8191, 768), np.uint16)], cap)
        print('layer_norm_bf16_half_warp', info)
        ok &= check_rel('layer_norm', unbf16(o0), want, 1.01)
    # A pipelined block per row (8 rows of 768): the weight and bias loaded once before the
    # row loop; on a grid of 3 each block loads its next row while it reduces this one.
    x = bf16(rng.standard_normal((8, 768), dtype=np.float32) * 2 + 1)
    want = layer_norm_ref(x, w, b)
    for cap in (3, 10**9):
        (o0,), info = run('layer_norm_bf16', [(x, 0), (w, 0), (b, 0)], [((8, 768), np.uint16)], cap)
        print('layer_norm_bf16', info)
        ok &= check_rel('layer_norm', unbf16(o0), want, 1.01)
    x = bf16(rng.standard_normal((8192, 4096), dtype=np.float32) * 3)
    xf = unbf16(x).astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    want = e / e.sum(1, keepdims=True)
    (o0,), info = run('softmax_bf16_4096', [(x, 0)], [((8192, 4096), np.uint16)], 7)
    print('softmax_bf16_4096', info)
    ok &= check_rel('softmax', unbf16(o0), want, 1.01)
    # Vocabulary rows staged in shared memory; a grid of one block takes all four rows in turn
    # (each row starts at another alignment, so the slots hold other elements every row).
    x = bf16(rng.standard_normal((4, 50257), dtype=np.float32) * 4)
    xf = unbf16(x).astype(np.float64)
    want = xf - xf.max(1, keepdims=True)
    want = want - np.log(np.exp(want).sum(1, keepdims=True))
    for cap in (1, 10**9):
        (o0,), info = run('log_softmax_vocab_bf16_staged', [(x, 0)], [((4, 50257), np.uint16)], cap)
        print('log_softmax_vocab_bf16_staged', info)
        ok &= check_rel('log_softmax', unbf16(o0), want, 1.01)
        # Without room to stage: every pass reads the row from memory.
        (o0,), info = run('log_softmax_vocab_bf16', [(x, 0)], [((4, 50257), np.uint16)], cap)
        print('log_softmax_vocab_bf16', info)
        ok &= check_rel('log_softmax', unbf16(o0), want, 1.01)
    y = bf16(rng.random((4, 50257), dtype=np.float32) / 20)
    g = bf16(rng.standard_normal((4, 50257), dtype=np.float32))
    yf, gf = unbf16(y).astype(np.float64), unbf16(g).astype(np.float64)
    want = yf * (gf - (gf * yf).sum(1, keepdims=True))
    for cap in (1, 10**9):
        # The kernel's parameters: the gradient (in0), then the output (in1).
        (o0,), info = run('softmax_grad_vocab_bf16_staged', [(g, 0), (y, 0)], [((4, 50257), np.uint16)], cap)
        print('softmax_grad_vocab_bf16_staged', info)
        ok &= check_rel('softmax gradient', unbf16(o0), want, 1.01)
    # f32 rows of 30,001: the gradient kept in registers, the output staged.
    y = rng.random((4, 30001), dtype=np.float32) / 20
    g = rng.standard_normal((4, 30001), dtype=np.float32)
    want = y * (g - (g.astype(np.float64) * y).sum(1, keepdims=True))
    for cap in (1, 10**9):
        (o0,), info = run('softmax_grad_f32_mixed', [(g, 0), (y, 0)], [((4, 30001), np.float32)], cap)
        print('softmax_grad_f32_mixed', info)
        ok &= check('softmax gradient', o0, want, 1e-6)
    # f32 rows of 50,257 shared by a pair of blocks: each stages half of both operands, and the
    # two partial sums meet through the other block's shared memory. On a grid of one cluster
    # the pair takes all four rows in turn (another alignment, so another split, each row).
    y = rng.random((4, 50257), dtype=np.float32) / 20
    g = rng.standard_normal((4, 50257), dtype=np.float32)
    want = y * (g - (g.astype(np.float64) * y).sum(1, keepdims=True))
    for cap in (2, 10**9):
        (o0,), info = run('softmax_grad_vocab_f32_cluster', [(g, 0), (y, 0)], [((4, 50257), np.float32)], cap)
        print('softmax_grad_vocab_f32_cluster', info)
        ok &= check('softmax gradient', o0, want, 1e-6)
    return ok


def main():
    allok = True
    for cap in (5, 10**9):
        g = rng.standard_normal((8, 1024, 768), dtype=np.float32)
        x = rng.standard_normal((8, 1024, 768), dtype=np.float32)
        gb, xb = bf16(g), bf16(x)
        prod = rbf(unbf16(gb) * unbf16(xb))
        (o0, o1), info = run('column_bias_grad_768_bf16', [(gb, 0), (xb, 0)],
                             [((8, 1024, 768), np.uint16), ((768,), np.uint16)], cap)
        print('column_bias_grad_768_bf16', info)
        allok &= check('product (exact)', unbf16(o0), prod, 0)
        allok &= check('sum', unbf16(o1), prod.astype(np.float64).sum((0, 1)), 2**-7)
        g = rng.standard_normal((8192, 3072), dtype=np.float32)
        gb = bf16(g)
        (o0,), info = run('column_bias_grad_3072_bf16', [(gb, 0)], [((3072,), np.uint16)], cap)
        print('column_bias_grad_3072_bf16', info)
        allok &= check('sum', unbf16(o0), unbf16(gb).astype(np.float64).sum(0), 2**-7)
        g = rng.standard_normal((256, 512), dtype=np.float32)
        (o0,), info = run('column_sum', [(g, 0)], [((512,), np.float32)], cap)
        print('column_sum', info)
        allok &= check('sum', o0, g.astype(np.float64).sum(0), 1e-5)
    allok &= rows_kernels()
    print('ALL OK' if allok else 'FAILURES')
    return 0 if allok else 1


if __name__ == "__main__":
    sys.exit(main())
