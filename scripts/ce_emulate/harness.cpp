// Runs the golden cross-entropy kernels (executors/cuda-kernels/tests/golden/cross_entropy.cu)
// on the CPU: each thread block as std::threads with a std::barrier for __syncthreads, blocks in
// turn. Checked against f64 loops: lse, loss, gradient (bf16: aligned, misaligned, strided
// logits; f32 with i32 targets), an out-of-range target (device error), every row ignored.
// Built and run by run.sh.
#include <barrier>
#include <thread>
#include <vector>
#include <cmath>
#include <cstring>
#include <cstdio>
#include <cstdint>
#include <mutex>
#include <functional>
#define __device__
#define __global__
#define __forceinline__ inline
#define __restrict__
#define __shared__ static
struct dim3s { unsigned x, y, z; };
thread_local dim3s threadIdx;
dim3s blockIdx, blockDim, gridDim;
std::barrier<>* bar;
void __syncthreads() { bar->arrive_and_wait(); }
float __uint_as_float(unsigned u) { float f; memcpy(&f, &u, 4); return f; }
unsigned __float_as_uint(float f) { unsigned u; memcpy(&u, &f, 4); return u; }
float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
double __longlong_as_double(long long i) { double f; memcpy(&f, &i, 8); return f; }
long long __double_as_longlong(double f) { long long i; memcpy(&i, &f, 8); return i; }
long long __double2ll_rn(double x) { return llrint(x); }
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }
uint2 make_uint2(unsigned a, unsigned b) { return {a, b}; }
float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
std::mutex amu;
unsigned long long atomicCAS(unsigned long long* p, unsigned long long c, unsigned long long v) { std::lock_guard<std::mutex> g(amu); auto o = *p; if (o == c) *p = v; return o; }
#include "kernels.inc"
typedef unsigned short u16_t; typedef long long i64_t; typedef unsigned char u8_t;

// Runs `k` on a grid of `grid` blocks of `block` threads, one block at a time.
void launch(unsigned grid, unsigned block, std::function<void()> k) {
  gridDim = {grid, 1, 1}; blockDim = {block, 1, 1};
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx = {b, 1, 1};
    std::barrier<> br(block); bar = &br;
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < block; ++t) ts.emplace_back([&, t] { threadIdx = {t, 0, 0}; k(); });
    for (auto& t : ts) t.join();
  }
}
static u16_t to_bf16(float f) { unsigned u = __float_as_uint(f); u += 0x7fffu + ((u >> 16) & 1u); return (u16_t)(u >> 16); }
static float from_bf16(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
int fails = 0;
void expect(bool ok, const char* what, double a, double b) { if (!ok) { ++fails; printf("FAIL %s: %.9g vs %.9g\n", what, a, b); } }

// bf16 head forward + backward ([2,4,16] logits, i64 targets, ignore -100), logits stored
// from `base` with element strides (s0, s1, s2).
void bf16_case(const char* name, int offset, i64_t s0, i64_t s1, i64_t s2, std::vector<i64_t> tgt, unsigned grid,
               int grad_offset = 0) {
  const int N = 8, C = 16;
  std::vector<u16_t> buf(4096, 0);
  u16_t* base = buf.data() + 8 + offset;  // buf is 16-byte aligned + 16 bytes; offset in elements
  std::vector<double> x(N * C);
  for (int r = 0; r < N; ++r) for (int j = 0; j < C; ++j) {
    float v = std::sin(0.37 * (r * C + j)) * 3.0f + (j == 5 ? 2.0f : 0.0f);
    u16_t h = to_bf16(v); x[r * C + j] = from_bf16(h);
    base[(r / 4) * s0 + (r % 4) * s1 + j * s2] = h;
  }
  std::vector<float> lse(N), per(N), loss(1); std::vector<u8_t> kept(N); i64_t err[2] = {0, 0};
  launch(grid, 32, [&] { ce2_0(base, s0, s1, s2, tgt.data(), 1, lse.data(), per.data(), kept.data(), err); });
  launch(1, 1024, [&] { ce2_1(per.data(), kept.data(), loss.data()); });
  double want = 0; int count = 0; std::vector<double> lse64(N);
  for (int r = 0; r < N; ++r) {
    double m = -INFINITY, s = 0; for (int j = 0; j < C; ++j) m = std::max(m, x[r * C + j]);
    for (int j = 0; j < C; ++j) s += std::exp(x[r * C + j] - m);
    lse64[r] = m + std::log(s);
    expect(std::fabs(lse[r] - lse64[r]) < 2e-6 * std::fabs(lse64[r]) + 1e-6, name, lse[r], lse64[r]);
    if (tgt[r] != -100) { want += lse64[r] - x[r * C + tgt[r]]; ++count; }
  }
  want /= count;
  expect(std::fabs(loss[0] - want) < 1e-5 * std::fabs(want), name, loss[0], want);
  expect(err[0] == 0, "no device error", err[0], 0);
  // backward: grad 1.0 (f32), the lse just computed; output bf16 [N, C] contiguous
  float g = 1.0f, scale[1]; std::vector<u16_t> out(N * C + 64);
  u16_t* o = out.data() + 8 + grad_offset;  // 16-byte aligned if the vector's storage is and grad_offset is 0
  launch(1, 1024, [&] { ce5_0(&g, tgt.data(), 1, scale); });
  launch(grid, 32, [&] { ce5_1(base, s0, s1, s2, tgt.data(), 1, lse.data(), 1, scale, o); });
  for (int r = 0; r < N; ++r) for (int j = 0; j < C; ++j) {
    double w = tgt[r] == -100 ? 0.0 : (std::exp(x[r * C + j] - lse64[r]) - (j == tgt[r])) / count;
    double got = from_bf16(o[r * C + j]);
    expect(std::fabs(got - w) <= 8e-3 * std::fabs(w) + 1e-7, name, got, w);
  }
  printf("%s: loss %.7f (want %.7f)\n", name, loss[0], want);
}

int main() {
  std::vector<i64_t> t = {3, 5, -100, 15, 0, -100, 7, 5};
  bf16_case("bf16 aligned", 0, 64, 16, 1, t, 1);
  bf16_case("bf16 misaligned by 1 element, 3 blocks", 1, 64, 16, 1, t, 3);
  bf16_case("bf16 misaligned by 3", 3, 64, 16, 1, t, 2);
  bf16_case("bf16 strided (classes stride 2)", 0, 128, 32, 2, t, 1);
  // Logits and gradient rows both 6 bytes past a 16-byte boundary: the backward's peeled rows
  // (a scalar head of 5, one vector, a tail of 3).
  bf16_case("bf16 misaligned by 3, gradient likewise", 3, 64, 16, 1, t, 2, 3);
  // out of range target -> device error
  {
    std::vector<u16_t> buf(8 * 16 + 16, 0); std::vector<i64_t> bad = {3, 16, 0, 0, 0, 0, 0, 0};
    std::vector<float> lse(8), per(8); std::vector<u8_t> kept(8); i64_t err[2] = {0, 0};
    launch(2, 32, [&] { ce2_0(buf.data(), 64, 16, 1, bad.data(), 1, lse.data(), per.data(), kept.data(), err); });
    expect(err[0] == 1 && err[1] == 16, "out-of-range target reported", err[0], err[1]);
  }
  // f32 [3, 6] with i32 targets (ignore -100): forward, and backward (ce12) with grad 1
  {
    const int N = 3, C = 6; std::vector<float> xv(N * C + 8); float* xp = xv.data() + 1;  // misaligned rows
    for (int i = 0; i < N * C; ++i) xp[i] = std::cos(0.71 * i) * 4.0f;
    std::vector<int> ti = {5, -100, 0};
    std::vector<float> lse(N), per(N), loss(1); std::vector<u8_t> kept(N); i64_t err[2] = {0, 0};
    launch(1, 32, [&] { ce10_0(xp, C, 1, ti.data(), 1, lse.data(), per.data(), kept.data(), err); });
    launch(1, 1024, [&] { ce10_1(per.data(), kept.data(), loss.data()); });
    double want = 0; int count = 0; std::vector<double> l64(N);
    for (int r = 0; r < N; ++r) {
      double m = -INFINITY, s = 0; for (int j = 0; j < C; ++j) m = std::max(m, (double)xp[r * C + j]);
      for (int j = 0; j < C; ++j) s += std::exp(xp[r * C + j] - m);
      l64[r] = m + std::log(s);
      if (ti[r] != -100) { want += l64[r] - xp[r * C + ti[r]]; ++count; }
    }
    want /= count;
    expect(std::fabs(loss[0] - want) < 1e-5 * std::fabs(want), "f32 loss", loss[0], want);
    float g = 1.0f, scale[1]; std::vector<float> out(N * C);
    launch(1, 1024, [&] { ce12_0(&g, ti.data(), 1, scale); });
    launch(1, 32, [&] { ce12_1(xp, C, 1, ti.data(), 1, lse.data(), 1, scale, out.data()); });
    for (int r = 0; r < N; ++r) for (int j = 0; j < C; ++j) {
      double w = ti[r] == -100 ? 0.0 : (std::exp(xp[r * C + j] - l64[r]) - (j == ti[r])) / count;
      expect(std::fabs(out[r * C + j] - w) <= 1e-5 * std::fabs(w) + 1e-7, "f32 grad", out[r * C + j], w);
    }
    printf("f32: loss %.7f (want %.7f)\n", loss[0], want);
  }
  // bf16 rows of 100 (a scalar head, 12 vectors, a tail) on blocks of 1 and 2 threads: the
  // forward's four-vector batches run full, then partly, then the remainder.
  for (unsigned block : {1u, 2u}) {
    const int N = 4, C = 100;
    std::vector<u16_t> buf(N * C + 16, 0);
    u16_t* xb = buf.data() + 8 + 3;  // rows 6 bytes past a 16-byte boundary (C * 2 = 200 bytes)
    std::vector<double> x(N * C);
    for (int i = 0; i < N * C; ++i) { u16_t h = to_bf16(std::sin(0.113 * i) * 5.0f); xb[i] = h; x[i] = from_bf16(h); }
    std::vector<i64_t> tb = {7, -100, 99, 42};
    std::vector<float> lse(N), per(N), loss(1); std::vector<u8_t> kept(N); i64_t err[2] = {0, 0};
    launch(2, block, [&] { ce14_0(xb, C, 1, tb.data(), 1, lse.data(), per.data(), kept.data(), err); });
    launch(1, 1024, [&] { ce14_1(per.data(), kept.data(), loss.data()); });
    double want = 0; int count = 0; std::vector<double> l64(N);
    for (int r = 0; r < N; ++r) {
      double m = -INFINITY, sum = 0; for (int j = 0; j < C; ++j) m = std::max(m, x[r * C + j]);
      for (int j = 0; j < C; ++j) sum += std::exp(x[r * C + j] - m);
      l64[r] = m + std::log(sum);
      expect(std::fabs(lse[r] - l64[r]) < 2e-6 * std::fabs(l64[r]) + 1e-6, "bf16 rows of 100: lse", lse[r], l64[r]);
      if (tb[r] != -100) { want += l64[r] - x[r * C + tb[r]]; ++count; }
    }
    want /= count;
    expect(std::fabs(loss[0] - want) < 1e-5 * std::fabs(want), "bf16 rows of 100: loss", loss[0], want);
    float g = 1.0f, scale[1]; std::vector<u16_t> ob(N * C + 16, 0xffff);
    u16_t* o = ob.data() + 8 + 3;  // the gradient at the logits' alignment: vectors
    launch(1, 1024, [&] { ce16_0(&g, tb.data(), 1, scale); });
    launch(2, block, [&] { ce16_1(xb, C, 1, tb.data(), 1, lse.data(), 1, scale, o); });
    for (int r = 0; r < N; ++r) for (int j = 0; j < C; ++j) {
      double w = tb[r] == -100 ? 0.0 : (std::exp(x[r * C + j] - l64[r]) - (j == tb[r])) / count;
      expect(std::fabs(from_bf16(o[r * C + j]) - w) <= 8e-3 * std::fabs(w) + 1e-7, "bf16 rows of 100: grad",
             from_bf16(o[r * C + j]), w);
    }
    printf("bf16 rows of 100, blocks of %u: loss %.7f (want %.7f)\n", block, loss[0], want);
  }
  // every row ignored: NaN loss, zero gradient
  {
    std::vector<u16_t> buf(8 * 16 + 16, 0x3f80); std::vector<i64_t> ig(8, -100);
    std::vector<float> lse(8), per(8), loss(1); std::vector<u8_t> kept(8); i64_t err[2] = {0, 0};
    launch(1, 32, [&] { ce2_0(buf.data(), 64, 16, 1, ig.data(), 1, lse.data(), per.data(), kept.data(), err); });
    launch(1, 1024, [&] { ce2_1(per.data(), kept.data(), loss.data()); });
    expect(std::isnan(loss[0]), "all ignored: NaN loss", loss[0], NAN);
    float g = 1.0f, scale[1]; std::vector<u16_t> out(8 * 16, 0xffff);
    launch(1, 1024, [&] { ce5_0(&g, ig.data(), 1, scale); });
    launch(1, 32, [&] { ce5_1(buf.data(), 64, 16, 1, ig.data(), 1, lse.data(), 1, scale, out.data()); });
    bool zero = true; for (auto h : out) zero = zero && (h == 0 || h == 0x8000);
    expect(zero, "all ignored: zero gradient", 0, 0);
  }
  printf("%d failure(s)\n", fails);
  return fails != 0;
}
