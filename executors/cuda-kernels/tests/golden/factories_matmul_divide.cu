// prims.full: launch Elements { n: 6, block: 256 }, params [Output(0)]
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
extern "C" __global__ void k0_0(short* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 6LL; e += (i64_t)gridDim.x * blockDim.x) {
    out0[e] = ((short)(((i64_t)300LL)));
  }
}

// prims.iota: launch Elements { n: 5, block: 256 }, params [Output(0)]
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
extern "C" __global__ void k1_0(u8_t* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 5LL; e += (i64_t)gridDim.x * blockDim.x) {
    out0[e] = ((u8_t)((i64_t)((u64_t)2LL + (u64_t)e * (u64_t)-3LL)));
  }
}

// prims.uniform: launch Elements { n: 24, block: 256 }, params [Output(0)]
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
__device__ __forceinline__ void philox(u64_t block, u64_t seed, unsigned* w) {
  unsigned c0 = (unsigned)block, c1 = (unsigned)(block >> 32), c2 = 0u, c3 = 0u;
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
extern "C" __global__ void k2_0(u16_t* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 24LL; e += (i64_t)gridDim.x * blockDim.x) {
    const u64_t block = 5ULL + (u64_t)e / 2ULL;
    unsigned w[4];
    philox(block, 7ULL, w);
    const unsigned x = w[2 * (e % 2)], y = w[2 * (e % 2) + 1];
    out0[e] = f64_to_bf16((0.0 + (1.0 - 0.0) * (((double)(x >> 5) * 67108864.0 + (double)(y >> 6)) * 1.1102230246251565e-16)));
  }
}

// prims.normal: launch Elements { n: 7, block: 256 }, params [Output(0)]
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
__device__ __forceinline__ void philox(u64_t block, u64_t seed, unsigned* w) {
  unsigned c0 = (unsigned)block, c1 = (unsigned)(block >> 32), c2 = 0u, c3 = 0u;
  unsigned k0 = (unsigned)seed, k1 = (unsigned)(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) { k0 += 0x9E3779B9u; k1 += 0xBB67AE85u; }
    const unsigned hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const unsigned hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const unsigned n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
  }
  w[0] = c0; w[1] = c1; w[2] = c2; w[3] = c3;
}
extern "C" __global__ void k3_0(double* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 7LL; e += (i64_t)gridDim.x * blockDim.x) {
    const u64_t block = 0ULL + (u64_t)e / 2ULL;
    unsigned w[4];
    philox(block, 3ULL, w);
    const unsigned x = w[2 * (e % 2)], y = w[2 * (e % 2) + 1];
    out0[e] = ((double)((1.5 + 2.0 * sqrt(-2.0 * log(((double)x + 1.0) * 2.3283064365386963e-10)) * cos(6.283185307179586 * ((double)y * 2.3283064365386963e-10)))));
  }
}

// prims.matmul: launch Elements { n: 30, block: 256 }, params [Input(0), Input(1), Output(0)]
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
extern "C" __global__ void k4_0(const int* __restrict__ in0, i64_t s0_0, i64_t s0_1, i64_t s0_2, const int* __restrict__ in1, i64_t s1_0, i64_t s1_1, i64_t s1_2, int* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 30LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c2 = c_rem % 5LL; c_rem /= 5LL;
    const i64_t c1 = c_rem % 3LL; c_rem /= 3LL;
    const i64_t c0 = c_rem % 2LL; c_rem /= 2LL;
    u64_t acc = 0;
    for (i64_t t = 0; t < 4LL; ++t) {
      acc += (u64_t)((i64_t)(in0[c0 * s0_0 + c1 * s0_1 + t * s0_2])) * (u64_t)((i64_t)(in1[c0 * s1_0 + t * s1_1 + c2 * s1_2]));
    }
    out0[e] = ((int)((i64_t)acc));
  }
}

// prims.floor_divide: launch Elements { n: 6, block: 256 }, params [Input(0), Output(0), Flag]
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
__device__ __forceinline__ i64_t div_floor_int(i64_t x, i64_t y) {
  if (y == -1) return (i64_t)(0ULL - (u64_t)x);
  const i64_t q = x / y;
  return ((x < 0) != (y < 0) && x % y != 0) ? q - 1 : q;
}
extern "C" __global__ void k5_0(const i64_t* __restrict__ in0, i64_t s0_0, i64_t* __restrict__ out0, i64_t* __restrict__ err) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 6LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c0 = c_rem % 6LL; c_rem /= 6LL;
    const i64_t x = ((i64_t)(in0[c0 * s0_0])), y = ((i64_t)-4LL);
    if (y == 0) { report(err, 2, 0); out0[e] = 0; continue; }
    out0[e] = ((i64_t)(div_floor_int(x, y)));
  }
}

// prims.matmul: launch Elements { n: 6, block: 256 }, params [Input(0), Input(1), Output(0)]
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
extern "C" __global__ void k6_0(const double* __restrict__ in0, i64_t s0_0, i64_t s0_1, const double* __restrict__ in1, i64_t s1_0, i64_t s1_1, double* __restrict__ out0) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 6LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c1 = c_rem % 2LL; c_rem /= 2LL;
    const i64_t c0 = c_rem % 3LL; c_rem /= 3LL;
    double acc = 0;
    for (i64_t t = 0; t < 0LL; ++t) {
      acc += in0[c0 * s0_0 + t * s0_1] * in1[t * s1_0 + c1 * s1_1];
    }
    out0[e] = ((double)(acc));
  }
}

