// prims.scatter_add: launch Elements { n: 20, block: 256 }
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
extern "C" __global__ void d0_0(const float* __restrict__ in0, i64_t s0_0, i64_t s0_1, const i64_t* __restrict__ in1, i64_t s1_0, i64_t s1_1, const float* __restrict__ in2, i64_t s2_0, i64_t s2_1, float* __restrict__ out0, i64_t* __restrict__ err) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 6LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c1 = c_rem % 2LL; c_rem /= 2LL;
    const i64_t c0 = c_rem % 3LL; c_rem /= 3LL;
    const i64_t ix = ((i64_t)(in1[c0 * s1_0 + c1 * s1_1]));
    if (ix < 0 || ix >= 5LL) report(err, 1, ix);
  }
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 20LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c1 = c_rem % 5LL; c_rem /= 5LL;
    const i64_t c0 = c_rem % 4LL; c_rem /= 4LL;
    double acc = ((double)(in0[c0 * s0_0 + c1 * s0_1]));
    if (c0 < 3LL)
    for (i64_t k = 0; k < 2LL; ++k) {
      if (((i64_t)(in1[c0 * s1_0 + k * s1_1])) == c1) { acc += ((double)(in2[c0 * s2_0 + k * s2_1])); }
    }
    out0[e] = ((float)(acc));
  }
}

// prims.index_add: launch Elements { n: 15, block: 256 }
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
extern "C" __global__ void d1_0(const signed char* __restrict__ in0, i64_t s0_0, i64_t s0_1, const int* __restrict__ in1, i64_t s1_0, const signed char* __restrict__ in2, i64_t s2_0, i64_t s2_1, signed char* __restrict__ out0, i64_t* __restrict__ err) {
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 2LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c0 = c_rem % 2LL; c_rem /= 2LL;
    const i64_t ix = ((i64_t)(in1[c0 * s1_0]));
    if (ix < 0 || ix >= 5LL) report(err, 1, ix);
  }
  for (i64_t e = (i64_t)blockIdx.x * blockDim.x + threadIdx.x; e < 15LL; e += (i64_t)gridDim.x * blockDim.x) {
    i64_t c_rem = e;
    const i64_t c1 = c_rem % 5LL; c_rem /= 5LL;
    const i64_t c0 = c_rem % 3LL; c_rem /= 3LL;
    i64_t acc = ((i64_t)(in0[c0 * s0_0 + c1 * s0_1]));
    for (i64_t k = 0; k < 2LL; ++k) {
      if (((i64_t)(in1[k * s1_0])) == c1) { acc = (i64_t)((u64_t)acc + (u64_t)((i64_t)(in2[c0 * s2_0 + k * s2_1]))); }
    }
    out0[e] = ((signed char)(acc));
  }
}

