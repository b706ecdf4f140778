// prims.cumsum: launch Rows { rows: 3, block: 256 }, params [Input(0), Output(0)]
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
extern "C" __global__ void k0_0(const i64_t* __restrict__ in0, i64_t s0_0, i64_t s0_1, i64_t* __restrict__ out0) {
  __shared__ u64_t buf[256];
  for (i64_t row = blockIdx.x; row < 3LL; row += gridDim.x) {
    i64_t o_rem = row;
    const i64_t o0 = o_rem % 3LL; o_rem /= 3LL;
    const i64_t obase = (row / 1LL) * 300LL * 1LL + row % 1LL;
    u64_t carry = 0;
    for (i64_t t = 0; t < 300LL; t += 256) {
      const i64_t j = t + threadIdx.x;
      const i64_t off = o0 * s0_0 + j * s0_1;
      buf[threadIdx.x] = j < 300LL ? (u64_t)((i64_t)(in0[off])) : (u64_t)0;
      __syncthreads();
      for (int s = 1; s < 256; s <<= 1) {
        const u64_t y = threadIdx.x >= s ? buf[threadIdx.x - s] : (u64_t)0;
        __syncthreads();
        buf[threadIdx.x] += y;
        __syncthreads();
      }
      const u64_t v = carry + buf[threadIdx.x];
      if (j < 300LL) out0[obase + j * 1LL] = ((i64_t)((i64_t)v));
      carry += buf[255];
      __syncthreads();
    }
  }
}

// prims.sort: launch Rows { rows: 35, block: 32 }, params [Input(0), Output(0), Output(1)]
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
// Whether slot a comes before slot b: NaN above every number, ties in index order, and
// the padding slots (index >= N) last, so the network's result is the stable order.
__device__ __forceinline__ bool before(double x, i64_t ia, double y, i64_t ib) {
  if (ia >= 6LL) return false;
  if (ib >= 6LL) return true;
  const bool xn = x != x, yn = y != y;
  const int c = -((xn || yn) ? (xn == yn ? 0 : (xn ? 1 : -1)) : (x < y ? -1 : (y < x ? 1 : 0)));
  return c != 0 ? c < 0 : ia < ib;
}
extern "C" __global__ void k1_0(const float* __restrict__ in0, i64_t s0_0, i64_t s0_1, i64_t s0_2, float* __restrict__ out0, i64_t* __restrict__ out1) {
  __shared__ float sv[8];
  __shared__ i64_t si[8];
  for (i64_t row = blockIdx.x; row < 35LL; row += gridDim.x) {
    i64_t o_rem = row;
    const i64_t o1 = o_rem % 7LL; o_rem /= 7LL;
    const i64_t o0 = o_rem % 5LL; o_rem /= 5LL;
    for (i64_t j = threadIdx.x; j < 8LL; j += blockDim.x) {
      if (j < 6LL) { sv[j] = in0[o0 * s0_0 + j * s0_1 + o1 * s0_2]; }
      si[j] = j;
    }
    __syncthreads();
    for (int size = 2; size <= 8; size <<= 1) {
      for (int half = size >> 1; half > 0; half >>= 1) {
        for (int t = threadIdx.x; t < 8; t += blockDim.x) {
          const int u = t ^ half;
          if (u > t) {
            const bool up = (t & size) == 0;
            const bool swap = up ? before(((double)(sv[u])), si[u], ((double)(sv[t])), si[t]) : before(((double)(sv[t])), si[t], ((double)(sv[u])), si[u]);
            if (swap) { const float tv = sv[t]; sv[t] = sv[u]; sv[u] = tv; const i64_t ti = si[t]; si[t] = si[u]; si[u] = ti; }
          }
        }
        __syncthreads();
      }
    }
    const i64_t obase = (row / 7LL) * 6LL * 7LL + row % 7LL;
    for (i64_t j = threadIdx.x; j < 6LL; j += blockDim.x) {
      out0[obase + j * 7LL] = sv[j];
      out1[obase + j * 7LL] = si[j];
    }
    __syncthreads();
  }
}

// prims.topk: launch Rows { rows: 30, block: 32 }, params [Input(0), Output(0), Output(1)]
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
// Whether slot a comes before slot b: NaN above every number, ties in index order, and
// the padding slots (index >= N) last, so the network's result is the stable order.
__device__ __forceinline__ bool before(double x, i64_t ia, double y, i64_t ib) {
  if (ia >= 7LL) return false;
  if (ib >= 7LL) return true;
  const bool xn = x != x, yn = y != y;
  const int c = ((xn || yn) ? (xn == yn ? 0 : (xn ? 1 : -1)) : (x < y ? -1 : (y < x ? 1 : 0)));
  return c != 0 ? c < 0 : ia < ib;
}
extern "C" __global__ void k2_0(const float* __restrict__ in0, i64_t s0_0, i64_t s0_1, i64_t s0_2, float* __restrict__ out0, i64_t* __restrict__ out1) {
  __shared__ float sv[8];
  __shared__ i64_t si[8];
  for (i64_t row = blockIdx.x; row < 30LL; row += gridDim.x) {
    i64_t o_rem = row;
    const i64_t o1 = o_rem % 6LL; o_rem /= 6LL;
    const i64_t o0 = o_rem % 5LL; o_rem /= 5LL;
    for (i64_t j = threadIdx.x; j < 8LL; j += blockDim.x) {
      if (j < 7LL) { sv[j] = in0[o0 * s0_0 + o1 * s0_1 + j * s0_2]; }
      si[j] = j;
    }
    __syncthreads();
    for (int size = 2; size <= 8; size <<= 1) {
      for (int half = size >> 1; half > 0; half >>= 1) {
        for (int t = threadIdx.x; t < 8; t += blockDim.x) {
          const int u = t ^ half;
          if (u > t) {
            const bool up = (t & size) == 0;
            const bool swap = up ? before(((double)(sv[u])), si[u], ((double)(sv[t])), si[t]) : before(((double)(sv[t])), si[t], ((double)(sv[u])), si[u]);
            if (swap) { const float tv = sv[t]; sv[t] = sv[u]; sv[u] = tv; const i64_t ti = si[t]; si[t] = si[u]; si[u] = ti; }
          }
        }
        __syncthreads();
      }
    }
    const i64_t obase = (row / 1LL) * 3LL * 1LL + row % 1LL;
    for (i64_t j = threadIdx.x; j < 3LL; j += blockDim.x) {
      out0[obase + j * 1LL] = sv[j];
      out1[obase + j * 1LL] = si[j];
    }
    __syncthreads();
  }
}

