// region [0, 1, 2]
// ltorch.cross_entropy_lse: launch Rows { rows: 8, block: 32 }, params [Input(0), Input(1), Output(1), Output(2), Output(3), Flag]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce2_0(const u16_t* __restrict__ in0, i64_t s0_0, i64_t s0_1, i64_t s0_2, const i64_t* __restrict__ in1, i64_t s1_0, float* __restrict__ out1, float* __restrict__ out2, u8_t* __restrict__ out3, i64_t* __restrict__ err) {
  __shared__ MS buf[32];
  for (i64_t row = blockIdx.x; row < 8LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q1 = q_rem % 4LL; q_rem /= 4LL;
    const i64_t q0 = q_rem % 2LL; q_rem /= 2LL;
    const i64_t roff = q0 * s0_0 + q1 * s0_1;
    const u16_t* p = in0 + roff;
    MS a = {NEG_INF, 0.f};
    if (s0_2 == 1 && (((u64_t)p) % sizeof(u16_t)) == 0) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(u16_t));
      if (head > 16LL) head = 16LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) add1(a, bf16_to_f32(p[j]));
      const i64_t nv = (16LL - head) / 8;
      const uint4* pv = (const uint4*)(p + head);
      // Four vectors a thread in flight before the first is summed (in the same order).
      i64_t i = threadIdx.x;
      for (; i + 3 * (i64_t)blockDim.x < nv; i += 4 * (i64_t)blockDim.x) {
        float v[4][8];
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) load_vec(pv + i + vi * (i64_t)blockDim.x, v[vi]);
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) add_vec(a, v[vi]);
      }
      for (; i < nv; i += blockDim.x) {
        float v[8];
        load_vec(pv + i, v);
        add_vec(a, v);
      }
      for (i64_t j = head + nv * 8 + threadIdx.x; j < 16LL; j += blockDim.x) add1(a, bf16_to_f32(p[j]));
    } else {
      for (i64_t j = threadIdx.x; j < 16LL; j += blockDim.x) add1(a, bf16_to_f32(p[j * s0_2]));
    }
    a = block_fold(a, Merge(), buf);
    if (threadIdx.x == 0) {
      const float lse = a.m + logf(a.s);
      out1[row] = lse;
      const i64_t t = (i64_t)in1[row * s1_0];
      float l = 0.f;
      u8_t kept = 0;
      if (t != -100LL) {
        if (t < 0 || t >= 16LL) report(err, 1, t);
        else { l = lse - bf16_to_f32(p[t * s0_2]); kept = 1; }
      }
      out2[row] = l;
      out3[row] = kept;
    }
  }
}

// ltorch.cross_entropy_lse: launch Rows { rows: 1, block: 1024 }, params [Output(2), Output(3), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce2_1(float* __restrict__ out2, u8_t* __restrict__ out3, float* __restrict__ out0) {
  __shared__ double dbuf[1024];
  __shared__ i64_t cbuf[1024];
  double total = 0.0;
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 8LL; r += blockDim.x) { total += (double)out2[r]; count += out3[r]; }
  total = block_fold(total, AddD(), dbuf);
  count = block_fold(count, AddI(), cbuf);
  // 0 / 0 is NaN when every row is ignored, as torch.
  if (threadIdx.x == 0) out0[0] = ((float)(total / (double)count));
}

// region [3, 4, 5, 6, 7]
// ltorch.cross_entropy_bwd: launch Rows { rows: 1, block: 1024 }, params [Input(0), Input(2), Output(1)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce5_0(const float* __restrict__ in0, const i64_t* __restrict__ in2, i64_t s2_0, float* __restrict__ out1) {
  __shared__ i64_t cbuf[1024];
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 8LL; r += blockDim.x) count += ((i64_t)in2[r * s2_0] != -100LL);
  count = block_fold(count, AddI(), cbuf);
  if (threadIdx.x == 0) out1[0] = ((float)(in0[0])) / (float)count;
}

// ltorch.cross_entropy_bwd: launch Rows { rows: 8, block: 32 }, params [Input(1), Input(2), Input(3), Output(1), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce5_1(const u16_t* __restrict__ in1, i64_t s1_0, i64_t s1_1, i64_t s1_2, const i64_t* __restrict__ in2, i64_t s2_0, const float* __restrict__ in3, i64_t s3_0, float* __restrict__ out1, u16_t* __restrict__ out0) {
  for (i64_t row = blockIdx.x; row < 8LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q1 = q_rem % 4LL; q_rem /= 4LL;
    const i64_t q0 = q_rem % 2LL; q_rem /= 2LL;
    const i64_t roff = q0 * s1_0 + q1 * s1_1;
    const u16_t* p = in1 + roff;
    u16_t* orow = out0 + row * 16LL;
    const i64_t t = (i64_t)in2[row * s2_0];
    const float lse = in3[row * s3_0];
    const float lse2 = lse * 1.4426950408889634f;
    // 0 on ignored rows, even when every row is ignored (the count is 0).
    const float rs = t != -100LL ? out1[0] : 0.f;
    if (s1_2 == 1 && (((u64_t)p) % sizeof(u16_t)) == 0 && (((u64_t)p) & 15) == (((u64_t)orow) & 15)) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(u16_t));
      if (head > 16LL) head = 16LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_2]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
      const i64_t nv = (16LL - head) / 8;
      for (i64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const i64_t j0 = head + i * 8;
        float v[8], r[8];
        load_vec((const uint4*)(p + j0), v);
#pragma unroll
        for (int k = 0; k < 8; ++k) r[k] = (fast_exp2(fmaf(v[k], 1.4426950408889634f, -lse2)) - (j0 + k == t ? 1.f : 0.f)) * rs;
        u16_t* o = orow + j0;
        unsigned u[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) u[k] = (unsigned)f32_to_bf16(r[2 * k]) | ((unsigned)f32_to_bf16(r[2 * k + 1]) << 16);
          *(uint4*)o = make_uint4(u[0], u[1], u[2], u[3]);
      }
      for (i64_t j = head + nv * 8 + threadIdx.x; j < 16LL; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_2]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
      continue;
    }
    for (i64_t j = threadIdx.x; j < 16LL; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_2]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
  }
}

// region [8, 9]
// ltorch.cross_entropy_lse: launch Rows { rows: 3, block: 32 }, params [Input(0), Input(1), Output(1), Output(2), Output(3), Flag]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = f16_to_f32((u16_t)(u[k] & 0xffffu)); v[2 * k + 1] = f16_to_f32((u16_t)(u[k] >> 16)); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce9_0(const u16_t* __restrict__ in0, i64_t s0_0, i64_t s0_1, const int* __restrict__ in1, i64_t s1_0, float* __restrict__ out1, float* __restrict__ out2, u8_t* __restrict__ out3, i64_t* __restrict__ err) {
  __shared__ MS buf[32];
  for (i64_t row = blockIdx.x; row < 3LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q0 = q_rem % 3LL; q_rem /= 3LL;
    const i64_t roff = q0 * s0_0;
    const u16_t* p = in0 + roff;
    MS a = {NEG_INF, 0.f};
    if (s0_1 == 1 && (((u64_t)p) % sizeof(u16_t)) == 0) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(u16_t));
      if (head > 8LL) head = 8LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) add1(a, f16_to_f32(p[j]));
      const i64_t nv = (8LL - head) / 8;
      const uint4* pv = (const uint4*)(p + head);
      // Four vectors a thread in flight before the first is summed (in the same order).
      i64_t i = threadIdx.x;
      for (; i + 3 * (i64_t)blockDim.x < nv; i += 4 * (i64_t)blockDim.x) {
        float v[4][8];
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) load_vec(pv + i + vi * (i64_t)blockDim.x, v[vi]);
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) add_vec(a, v[vi]);
      }
      for (; i < nv; i += blockDim.x) {
        float v[8];
        load_vec(pv + i, v);
        add_vec(a, v);
      }
      for (i64_t j = head + nv * 8 + threadIdx.x; j < 8LL; j += blockDim.x) add1(a, f16_to_f32(p[j]));
    } else {
      for (i64_t j = threadIdx.x; j < 8LL; j += blockDim.x) add1(a, f16_to_f32(p[j * s0_1]));
    }
    a = block_fold(a, Merge(), buf);
    if (threadIdx.x == 0) {
      const float lse = a.m + logf(a.s);
      out1[row] = lse;
      const i64_t t = (i64_t)in1[row * s1_0];
      float l = 0.f;
      u8_t kept = 0;
      if (t != 1LL) {
        if (t < 0 || t >= 8LL) report(err, 1, t);
        else { l = lse - f16_to_f32(p[t * s0_1]); kept = 1; }
      }
      out2[row] = l;
      out3[row] = kept;
    }
  }
}

// ltorch.cross_entropy_lse: launch Rows { rows: 1, block: 1024 }, params [Output(2), Output(3), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = f16_to_f32((u16_t)(u[k] & 0xffffu)); v[2 * k + 1] = f16_to_f32((u16_t)(u[k] >> 16)); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce9_1(float* __restrict__ out2, u8_t* __restrict__ out3, float* __restrict__ out0) {
  __shared__ double dbuf[1024];
  __shared__ i64_t cbuf[1024];
  double total = 0.0;
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 3LL; r += blockDim.x) { total += (double)out2[r]; count += out3[r]; }
  total = block_fold(total, AddD(), dbuf);
  count = block_fold(count, AddI(), cbuf);
  // 0 / 0 is NaN when every row is ignored, as torch.
  if (threadIdx.x == 0) out0[0] = ((float)(total / (double)count));
}

// region [10]
// ltorch.cross_entropy_lse: launch Rows { rows: 3, block: 32 }, params [Input(0), Input(1), Output(1), Output(2), Output(3), Flag]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 4 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const float4 q = *(const float4*)p;
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 4; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 4; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce10_0(const float* __restrict__ in0, i64_t s0_0, i64_t s0_1, const int* __restrict__ in1, i64_t s1_0, float* __restrict__ out1, float* __restrict__ out2, u8_t* __restrict__ out3, i64_t* __restrict__ err) {
  __shared__ MS buf[32];
  for (i64_t row = blockIdx.x; row < 3LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q0 = q_rem % 3LL; q_rem /= 3LL;
    const i64_t roff = q0 * s0_0;
    const float* p = in0 + roff;
    MS a = {NEG_INF, 0.f};
    if (s0_1 == 1 && (((u64_t)p) % sizeof(float)) == 0) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(float));
      if (head > 6LL) head = 6LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) add1(a, ((float)(p[j])));
      const i64_t nv = (6LL - head) / 4;
      const uint4* pv = (const uint4*)(p + head);
      // Four vectors a thread in flight before the first is summed (in the same order).
      i64_t i = threadIdx.x;
      for (; i + 3 * (i64_t)blockDim.x < nv; i += 4 * (i64_t)blockDim.x) {
        float v[4][4];
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) load_vec(pv + i + vi * (i64_t)blockDim.x, v[vi]);
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) add_vec(a, v[vi]);
      }
      for (; i < nv; i += blockDim.x) {
        float v[4];
        load_vec(pv + i, v);
        add_vec(a, v);
      }
      for (i64_t j = head + nv * 4 + threadIdx.x; j < 6LL; j += blockDim.x) add1(a, ((float)(p[j])));
    } else {
      for (i64_t j = threadIdx.x; j < 6LL; j += blockDim.x) add1(a, ((float)(p[j * s0_1])));
    }
    a = block_fold(a, Merge(), buf);
    if (threadIdx.x == 0) {
      const float lse = a.m + logf(a.s);
      out1[row] = lse;
      const i64_t t = (i64_t)in1[row * s1_0];
      float l = 0.f;
      u8_t kept = 0;
      if (t != -100LL) {
        if (t < 0 || t >= 6LL) report(err, 1, t);
        else { l = lse - ((float)(p[t * s0_1])); kept = 1; }
      }
      out2[row] = l;
      out3[row] = kept;
    }
  }
}

// ltorch.cross_entropy_lse: launch Rows { rows: 1, block: 1024 }, params [Output(2), Output(3), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 4 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const float4 q = *(const float4*)p;
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 4; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 4; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce10_1(float* __restrict__ out2, u8_t* __restrict__ out3, float* __restrict__ out0) {
  __shared__ double dbuf[1024];
  __shared__ i64_t cbuf[1024];
  double total = 0.0;
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 3LL; r += blockDim.x) { total += (double)out2[r]; count += out3[r]; }
  total = block_fold(total, AddD(), dbuf);
  count = block_fold(count, AddI(), cbuf);
  // 0 / 0 is NaN when every row is ignored, as torch.
  if (threadIdx.x == 0) out0[0] = ((float)(total / (double)count));
}

// region [12]
// ltorch.cross_entropy_bwd: launch Rows { rows: 1, block: 1024 }, params [Input(0), Input(2), Output(1)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 4 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const float4 q = *(const float4*)p;
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 4; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 4; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce12_0(const float* __restrict__ in0, const int* __restrict__ in2, i64_t s2_0, float* __restrict__ out1) {
  __shared__ i64_t cbuf[1024];
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 3LL; r += blockDim.x) count += ((i64_t)in2[r * s2_0] != -100LL);
  count = block_fold(count, AddI(), cbuf);
  if (threadIdx.x == 0) out1[0] = ((float)(in0[0])) / (float)count;
}

// ltorch.cross_entropy_bwd: launch Rows { rows: 3, block: 32 }, params [Input(1), Input(2), Input(3), Output(1), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 4 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const float4 q = *(const float4*)p;
  v[0] = q.x; v[1] = q.y; v[2] = q.z; v[3] = q.w;
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 4; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 4; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 4; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce12_1(const float* __restrict__ in1, i64_t s1_0, i64_t s1_1, const int* __restrict__ in2, i64_t s2_0, const float* __restrict__ in3, i64_t s3_0, float* __restrict__ out1, float* __restrict__ out0) {
  for (i64_t row = blockIdx.x; row < 3LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q0 = q_rem % 3LL; q_rem /= 3LL;
    const i64_t roff = q0 * s1_0;
    const float* p = in1 + roff;
    float* orow = out0 + row * 6LL;
    const i64_t t = (i64_t)in2[row * s2_0];
    const float lse = in3[row * s3_0];
    const float lse2 = lse * 1.4426950408889634f;
    // 0 on ignored rows, even when every row is ignored (the count is 0).
    const float rs = t != -100LL ? out1[0] : 0.f;
    if (s1_1 == 1 && (((u64_t)p) % sizeof(float)) == 0 && (((u64_t)p) & 15) == (((u64_t)orow) & 15)) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(float));
      if (head > 6LL) head = 6LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) { const float r = (expf(((float)(p[j * s1_1])) - lse) - (j == t ? 1.f : 0.f)) * rs; orow[j] = ((float)(r)); }
      const i64_t nv = (6LL - head) / 4;
      for (i64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const i64_t j0 = head + i * 4;
        float v[4], r[4];
        load_vec((const uint4*)(p + j0), v);
#pragma unroll
        for (int k = 0; k < 4; ++k) r[k] = (expf(v[k] - lse) - (j0 + k == t ? 1.f : 0.f)) * rs;
        float* o = orow + j0;
        *(float4*)o = make_float4(r[0], r[1], r[2], r[3]);
      }
      for (i64_t j = head + nv * 4 + threadIdx.x; j < 6LL; j += blockDim.x) { const float r = (expf(((float)(p[j * s1_1])) - lse) - (j == t ? 1.f : 0.f)) * rs; orow[j] = ((float)(r)); }
      continue;
    }
    for (i64_t j = threadIdx.x; j < 6LL; j += blockDim.x) { const float r = (expf(((float)(p[j * s1_1])) - lse) - (j == t ? 1.f : 0.f)) * rs; orow[j] = ((float)(r)); }
  }
}

// region [13, 14]
// ltorch.cross_entropy_lse: launch Rows { rows: 4, block: 32 }, params [Input(0), Input(1), Output(1), Output(2), Output(3), Flag]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce14_0(const u16_t* __restrict__ in0, i64_t s0_0, i64_t s0_1, const i64_t* __restrict__ in1, i64_t s1_0, float* __restrict__ out1, float* __restrict__ out2, u8_t* __restrict__ out3, i64_t* __restrict__ err) {
  __shared__ MS buf[32];
  for (i64_t row = blockIdx.x; row < 4LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q0 = q_rem % 4LL; q_rem /= 4LL;
    const i64_t roff = q0 * s0_0;
    const u16_t* p = in0 + roff;
    MS a = {NEG_INF, 0.f};
    if (s0_1 == 1 && (((u64_t)p) % sizeof(u16_t)) == 0) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(u16_t));
      if (head > 100LL) head = 100LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) add1(a, bf16_to_f32(p[j]));
      const i64_t nv = (100LL - head) / 8;
      const uint4* pv = (const uint4*)(p + head);
      // Four vectors a thread in flight before the first is summed (in the same order).
      i64_t i = threadIdx.x;
      for (; i + 3 * (i64_t)blockDim.x < nv; i += 4 * (i64_t)blockDim.x) {
        float v[4][8];
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) load_vec(pv + i + vi * (i64_t)blockDim.x, v[vi]);
#pragma unroll
        for (int vi = 0; vi < 4; ++vi) add_vec(a, v[vi]);
      }
      for (; i < nv; i += blockDim.x) {
        float v[8];
        load_vec(pv + i, v);
        add_vec(a, v);
      }
      for (i64_t j = head + nv * 8 + threadIdx.x; j < 100LL; j += blockDim.x) add1(a, bf16_to_f32(p[j]));
    } else {
      for (i64_t j = threadIdx.x; j < 100LL; j += blockDim.x) add1(a, bf16_to_f32(p[j * s0_1]));
    }
    a = block_fold(a, Merge(), buf);
    if (threadIdx.x == 0) {
      const float lse = a.m + logf(a.s);
      out1[row] = lse;
      const i64_t t = (i64_t)in1[row * s1_0];
      float l = 0.f;
      u8_t kept = 0;
      if (t != -100LL) {
        if (t < 0 || t >= 100LL) report(err, 1, t);
        else { l = lse - bf16_to_f32(p[t * s0_1]); kept = 1; }
      }
      out2[row] = l;
      out3[row] = kept;
    }
  }
}

// ltorch.cross_entropy_lse: launch Rows { rows: 1, block: 1024 }, params [Output(2), Output(3), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce14_1(float* __restrict__ out2, u8_t* __restrict__ out3, float* __restrict__ out0) {
  __shared__ double dbuf[1024];
  __shared__ i64_t cbuf[1024];
  double total = 0.0;
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 4LL; r += blockDim.x) { total += (double)out2[r]; count += out3[r]; }
  total = block_fold(total, AddD(), dbuf);
  count = block_fold(count, AddI(), cbuf);
  // 0 / 0 is NaN when every row is ignored, as torch.
  if (threadIdx.x == 0) out0[0] = ((float)(total / (double)count));
}

// region [15, 16, 17]
// ltorch.cross_entropy_bwd: launch Rows { rows: 1, block: 1024 }, params [Input(0), Input(2), Output(1)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce16_0(const float* __restrict__ in0, const i64_t* __restrict__ in2, i64_t s2_0, float* __restrict__ out1) {
  __shared__ i64_t cbuf[1024];
  i64_t count = 0;
  for (i64_t r = threadIdx.x; r < 4LL; r += blockDim.x) count += ((i64_t)in2[r * s2_0] != -100LL);
  count = block_fold(count, AddI(), cbuf);
  if (threadIdx.x == 0) out1[0] = ((float)(in0[0])) / (float)count;
}

// ltorch.cross_entropy_bwd: launch Rows { rows: 4, block: 32 }, params [Input(1), Input(2), Input(3), Output(1), Output(0)]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
typedef unsigned long long u64_t;
__device__ __forceinline__ float f16_to_f32(u16_t h) { float f; asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h)); return f; }
__device__ __forceinline__ u16_t f32_to_f16(float f) { u16_t h; asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h; }
__device__ __forceinline__ u16_t f64_to_f16(double d) { u16_t h; asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d)); return h; }
__device__ __forceinline__ float bf16_to_f32(u16_t h) { return __uint_as_float(((unsigned)h) << 16); }
__device__ __forceinline__ u16_t f32_to_bf16(float f) {
#if __CUDA_ARCH__ >= 800
  u16_t h; asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f)); return h;
#else
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (u16_t)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (u16_t)(u >> 16);
#endif
}
// 2^x in one instruction (results below 2^-126 flush to zero), where exp2f takes four.
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
// One rounding from f64 to bf16 (through f32 would round twice): to the bf16 quantum at x's
// exponent, ties to even, then an exact conversion.
__device__ __forceinline__ u16_t f64_to_bf16(double x) {
  if (x != x || x - x != 0.0 || x == 0.0) return f32_to_bf16((float)x);
  i64_t e = ((__double_as_longlong(x) >> 52) & 0x7ff) - 1023;
  if (e < -126) e = -126;
  const double q = __longlong_as_double((e - 7 + 1023) << 52);
  const double r = (double)__double2ll_rn(x / q) * q;
  if (r > 3.3895313892515355e38 || r < -3.3895313892515355e38) return x > 0 ? (u16_t)0x7f80 : (u16_t)0xff80;
  return f32_to_bf16((float)r);
}
__device__ __forceinline__ double kmax(double a, double b) { if (a != a) return a; if (b != b) return b; return (a > b || (a == b && __double_as_longlong(b) < 0)) ? a : b; }
__device__ __forceinline__ double kmin(double a, double b) { if (a != a) return a; if (b != b) return b; return (a < b || (a == b && __double_as_longlong(b) >= 0)) ? a : b; }
__device__ __forceinline__ void report(i64_t* err, i64_t code, i64_t value) {
  if (atomicCAS((u64_t*)err, 0ULL, (u64_t)code) == 0ULL) err[1] = value;
}
// Tree fold over a power-of-two block through shared memory `buf` (blockDim.x slots).
template <typename T, typename Op>
__device__ __forceinline__ T block_fold(T v, Op op, T* buf) {
  buf[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] = op(buf[threadIdx.x], buf[threadIdx.x + s]);
    __syncthreads();
  }
  T r = buf[0];
  __syncthreads();
  return r;
}
#define NEG_INF __int_as_float(0xff800000)
// 8 logits from one aligned 16-byte load.
__device__ __forceinline__ void load_vec(const uint4* p, float* v) {
  const uint4 q = *p;
  const unsigned u[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) { v[2 * k] = __uint_as_float(u[k] << 16); v[2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u); }
}
// The running (max, sum of exp(x - max)) of the elements seen; NaN propagates in s.
struct MS { float m; float s; };
__device__ __forceinline__ void add1(MS& a, float x) {
  if (x > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - x)) + 1.f; a.m = x; }
  else if (x != NEG_INF) a.s += expf(x - a.m);
}
// A vector's elements at once: its max rescales the state once, then one exponential
// per element, with no branch between them (the per-element form kept the forward
// issue-bound: 36% of DRAM bandwidth on an H200). The hardware's exp2 of a scaled
// difference is the one-instruction exponential (a term it flushes, below 2^-126, is
// invisible beside the row maximum's 1); rows with an infinity or a NaN take add1's path.
__device__ __forceinline__ void add_vec(MS& a, const float* v) {
  float m = v[0];
#pragma unroll
  for (int k = 1; k < 8; ++k) m = v[k] > m ? v[k] : m;
  if (!(m > NEG_INF && m < -NEG_INF)) {
#pragma unroll
    for (int k = 0; k < 8; ++k) add1(a, v[k]);
    return;
  }
  if (m > a.m) { a.s = (a.m == NEG_INF ? a.s : a.s * expf(a.m - m)); a.m = m; }
  const float ms = a.m * 1.4426950408889634f;
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < 8; ++k) s += fast_exp2(fmaf(v[k], 1.4426950408889634f, -ms));
  a.s += s;
}
struct Merge { __device__ __forceinline__ MS operator()(MS a, MS b) const {
  if (a.m == NEG_INF) return MS{b.m, b.s + a.s};
  if (b.m == NEG_INF) return MS{a.m, a.s + b.s};
  const float m = a.m > b.m ? a.m : b.m;
  return MS{m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
} };
struct AddD { __device__ __forceinline__ double operator()(double a, double b) const { return a + b; } };
struct AddI { __device__ __forceinline__ i64_t operator()(i64_t a, i64_t b) const { return a + b; } };
extern "C" __global__ void ce16_1(const u16_t* __restrict__ in1, i64_t s1_0, i64_t s1_1, const i64_t* __restrict__ in2, i64_t s2_0, const float* __restrict__ in3, i64_t s3_0, float* __restrict__ out1, u16_t* __restrict__ out0) {
  for (i64_t row = blockIdx.x; row < 4LL; row += gridDim.x) {
    i64_t q_rem = row;
    const i64_t q0 = q_rem % 4LL; q_rem /= 4LL;
    const i64_t roff = q0 * s1_0;
    const u16_t* p = in1 + roff;
    u16_t* orow = out0 + row * 100LL;
    const i64_t t = (i64_t)in2[row * s2_0];
    const float lse = in3[row * s3_0];
    const float lse2 = lse * 1.4426950408889634f;
    // 0 on ignored rows, even when every row is ignored (the count is 0).
    const float rs = t != -100LL ? out1[0] : 0.f;
    if (s1_1 == 1 && (((u64_t)p) % sizeof(u16_t)) == 0 && (((u64_t)p) & 15) == (((u64_t)orow) & 15)) {
      i64_t head = (i64_t)(((16 - (((u64_t)p) & 15)) & 15) / sizeof(u16_t));
      if (head > 100LL) head = 100LL;
      for (i64_t j = threadIdx.x; j < head; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_1]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
      const i64_t nv = (100LL - head) / 8;
      for (i64_t i = threadIdx.x; i < nv; i += blockDim.x) {
        const i64_t j0 = head + i * 8;
        float v[8], r[8];
        load_vec((const uint4*)(p + j0), v);
#pragma unroll
        for (int k = 0; k < 8; ++k) r[k] = (fast_exp2(fmaf(v[k], 1.4426950408889634f, -lse2)) - (j0 + k == t ? 1.f : 0.f)) * rs;
        u16_t* o = orow + j0;
        unsigned u[4];
#pragma unroll
          for (int k = 0; k < 4; ++k) u[k] = (unsigned)f32_to_bf16(r[2 * k]) | ((unsigned)f32_to_bf16(r[2 * k + 1]) << 16);
          *(uint4*)o = make_uint4(u[0], u[1], u[2], u[3]);
      }
      for (i64_t j = head + nv * 8 + threadIdx.x; j < 100LL; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_1]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
      continue;
    }
    for (i64_t j = threadIdx.x; j < 100LL; j += blockDim.x) { const float r = (fast_exp2(fmaf(bf16_to_f32(p[j * s1_1]), 1.4426950408889634f, -lse2)) - (j == t ? 1.f : 0.f)) * rs; orow[j] = f32_to_bf16(r); }
  }
}

