// launch: BlockPerRow { rows: 32, block: 256 }
// thunder cuda-fuser kernel over [32, 1000], reducing dims [1]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
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
__device__ __forceinline__ float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
__device__ __forceinline__ float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
__device__ __forceinline__ u16_t bf16_bits(float exact) { return (u16_t)(__float_as_uint(exact) >> 16); }
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float nan_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
__device__ __forceinline__ float nan_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#endif
__device__ __forceinline__ float py_rem(float a, float b) { float r = fmodf(a, b); if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b; return r; }
__device__ __forceinline__ double py_rem(double a, double b) { double r = fmod(a, b); if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
struct SumOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct MaxOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_max(a, b); } };
struct MinOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_min(a, b); } };
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = (lane < warps) ? scratch[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
typedef int ix_t;
extern "C" __global__ void __launch_bounds__(256) thunder_fused_0(const float* __restrict__ in0, const i64_t* __restrict__ in1, float* __restrict__ out0) {
  const ix_t rows = 32, cols = 1000;
  const ix_t lane = threadIdx.x, team = blockDim.x;
  for (ix_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const ix_t i0 = r;
    uint4 cache_n0[1];
    const i64_t v15 = in1[i0];
    const bool v16 = (v15 != ((i64_t)-100LL));
    float acc1 = -__int_as_float(0x7f800000);
    float acc13 = 0.0f;
    #pragma unroll
    for (int it = 0; it < 1; ++it) {
      const ix_t c0 = (lane + (ix_t)it * team) * 4;
      if (c0 < cols) {
        const uint4 r_n0 = *reinterpret_cast<const uint4*>(in0 + i0 * 1000 + c0);
        cache_n0[it] = r_n0;
        const float* e_n0 = reinterpret_cast<const float*>(&r_n0);
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const ix_t c = c0 + j;
          const ix_t i1 = c;
          const ix_t e = i0 * 1000 + i1;
          const float v0 = e_n0[j];
          acc1 = nan_max(acc1, v0);
          const i64_t v8 = in1[i0];
          const i64_t v9 = (((i64_t)0LL) + ((i64_t)1LL) * (i64_t)(i1));
          const bool v10 = (v8 == v9);
          const float v11 = ((float)v10);
          const float v12 = (v11 * v0);
          acc13 += v12;
        }
      }
    }
    acc1 = block_reduce<float>(acc1, MaxOp(), (float)(-__int_as_float(0x7f800000)));
    acc13 = block_reduce<float>(acc13, SumOp(), (float)(0.0f));
    const float v1 = acc1;
    const float v13 = acc13;
    float acc5 = 0.0f;
    #pragma unroll
    for (int it = 0; it < 1; ++it) {
      const ix_t c0 = (lane + (ix_t)it * team) * 4;
      if (c0 < cols) {
        const uint4 r_n0 = cache_n0[it];
        const float* e_n0 = reinterpret_cast<const float*>(&r_n0);
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
          const ix_t c = c0 + j;
          const ix_t i1 = c;
          const ix_t e = i0 * 1000 + i1;
          const float v0 = e_n0[j];
          const float v2 = v1;
          const float v3 = (v0 - v2);
          const float v4 = expf(v3);
          acc5 += v4;
        }
      }
    }
    acc5 = block_reduce<float>(acc5, SumOp(), (float)(0.0f));
    const float v5 = acc5;
    const float v6 = logf(v5);
    const float v7 = (v1 + v6);
    const float v14 = (v7 - v13);
    const float v17 = (v16 ? v14 : 0.0f);
    if (lane == 0) {
      out0[r] = v17;
    }
  }
}

// launch: ColumnTiles { rows: 1, tile: 1, block: 4 }
// thunder cuda-fuser kernel over [32], reducing dims [0]
typedef unsigned char u8_t;
typedef unsigned short u16_t;
typedef long long i64_t;
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
__device__ __forceinline__ float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }
__device__ __forceinline__ float round_bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }
__device__ __forceinline__ u16_t bf16_bits(float exact) { return (u16_t)(__float_as_uint(exact) >> 16); }
__device__ __forceinline__ float fast_exp2(float x) {
#if __CUDA_ARCH__ >= 500
  float r; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x)); return r;
#else
  return exp2f(x);
#endif
}
template <typename T> __device__ __forceinline__ T nan_max(T a, T b) { return (a != a || b != b) ? a + b : (a > b ? a : b); }
template <typename T> __device__ __forceinline__ T nan_min(T a, T b) { return (a != a || b != b) ? a + b : (a < b ? a : b); }
#if __CUDA_ARCH__ >= 800
__device__ __forceinline__ float nan_max(float a, float b) { float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
__device__ __forceinline__ float nan_min(float a, float b) { float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r; }
#endif
__device__ __forceinline__ float py_rem(float a, float b) { float r = fmodf(a, b); if (r != 0.0f && ((r < 0.0f) != (b < 0.0f))) r += b; return r; }
__device__ __forceinline__ double py_rem(double a, double b) { double r = fmod(a, b); if (r != 0.0 && ((r < 0.0) != (b < 0.0))) r += b; return r; }
struct SumOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return a + b; } };
struct MaxOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_max(a, b); } };
struct MinOp { template <typename T> __device__ __forceinline__ T operator()(T a, T b) const { return nan_min(a, b); } };
template <typename T, typename Op>
__device__ __forceinline__ T block_reduce(T v, Op op, T identity) {
  __shared__ T scratch[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = (lane < warps) ? scratch[lane] : identity;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
typedef int ix_t;
template <typename T, int TILE, int TEAM, typename Op>
__device__ __forceinline__ T team_reduce(T v, Op op) {
  __shared__ T scratch[TEAM][TILE + 1];
  const int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
  __syncthreads();
  scratch[ty][tx] = v;
  __syncthreads();
#pragma unroll
  for (int s = TEAM / 2; s > 0; s >>= 1) {
    if (ty < s) scratch[ty][tx] = op(scratch[ty][tx], scratch[ty + s][tx]);
    __syncthreads();
  }
  return scratch[0][tx];
}
extern "C" __global__ void __launch_bounds__(4, 12) thunder_fused_1(const float* __restrict__ in0, const i64_t* __restrict__ in1, float* __restrict__ out0) {
  const ix_t rows = 1, cols = 32;
  const ix_t lane = threadIdx.x / 1, team = 4;
  for (ix_t r0 = (ix_t)blockIdx.x * 1; r0 < rows; r0 += (ix_t)gridDim.x * 1) {
    const bool live = r0 + threadIdx.x % 1 < rows;
    const ix_t r = live ? r0 + threadIdx.x % 1 : rows - 1;
    float acc1 = 0.0f;
    float acc5 = 0.0f;
    #pragma unroll 4
    for (ix_t c = lane; c < cols; c += team) {
      const ix_t i0 = c;
      const ix_t e = i0;
      const float v0 = in0[e];
      acc1 += v0;
      const i64_t v2 = in1[e];
      const bool v3 = (v2 != ((i64_t)-100LL));
      const float v4 = ((float)v3);
      acc5 += v4;
    }
    acc1 = team_reduce<float, 1, 4>(acc1, SumOp());
    acc5 = team_reduce<float, 1, 4>(acc5, SumOp());
    const float v1 = acc1;
    const float v5 = acc5;
    const float v6 = (v1 / v5);
    if (lane == 0 && live) {
      out0[r] = v6;
    }
  }
}

