// launch: SplitRows { rows: 12, block: 256, splits: 32, scratch: 196656, counters: 196608 }
// thunder cuda-fuser kernel over [8, 1024, 768], reducing dims [0, 1]
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
template <typename T, int TX, int TEAM, int V, typename Op>
__device__ __forceinline__ void team_reduce_v(T (&v)[V], Op op) {
  __shared__ T scratch[TEAM][TX * V + 1];
  const int tx = threadIdx.x % TX, ty = threadIdx.x / TX;
  __syncthreads();
#pragma unroll
  for (int j = 0; j < V; ++j) scratch[ty][tx * V + j] = v[j];
  __syncthreads();
#pragma unroll
  for (int s = TEAM / 2; s > 0; s >>= 1) {
    if (ty < s) {
#pragma unroll
      for (int j = 0; j < V; ++j) scratch[ty][tx * V + j] = op(scratch[ty][tx * V + j], scratch[ty + s][tx * V + j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < V; ++j) v[j] = scratch[0][tx * V + j];
}
extern "C" __global__ void __launch_bounds__(256) thunder_fused_0(const u16_t* __restrict__ in0, const u16_t* __restrict__ in1, u16_t* __restrict__ out0, u16_t* __restrict__ out1, unsigned char* __restrict__ split_scratch) {
  const ix_t rows = 768, cols = 8192, tiles = 12, splits = 32;
  const ix_t tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  const ix_t chunk = (cols + splits - 1) / splits;
  __shared__ bool split_last;
  for (ix_t u = blockIdx.x; u < tiles * splits; u += gridDim.x) {
    const ix_t t = u / splits, part = u % splits;
    const ix_t rv = t * 64 + tx * 8;
    const bool live = rv < rows;
    const ix_t i2_0 = rv;
    float acc7[8];
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc7[j] = 0.0f;
    const ix_t c_end = (part + 1) * chunk < cols ? (part + 1) * chunk : cols;
    if (live) {
      #pragma unroll 4
      for (ix_t c = part * chunk + ty; c < c_end; c += 32) {
        const ix_t i0 = (c / 1024);
        const ix_t i1 = c % 1024;
        const ix_t e0 = i0 * 786432 + i1 * 768 + i2_0;
        const uint4 r_n0 = *reinterpret_cast<const uint4*>(in0 + (i0 * 786432 + i1 * 768 + i2_0));
        const u16_t* e_n0 = reinterpret_cast<const u16_t*>(&r_n0);
        const uint4 r_n2 = *reinterpret_cast<const uint4*>(in1 + (i0 * 786432 + i1 * 768 + i2_0));
        const u16_t* e_n2 = reinterpret_cast<const u16_t*>(&r_n2);
        __align__(16) u16_t s_out0[8];
        #pragma unroll
        for (int j = 0; j < 8; ++j) {
          const ix_t i2 = i2_0 + j;
          const ix_t e = e0 + j;
          const float v0 = bf16_to_f32(e_n0[j]);
          const float v1 = ((float)v0);
          const float v2 = bf16_to_f32(e_n2[j]);
          const float v3 = ((float)v2);
          const float v4 = (v1 * v3);
          const float v5 = round_bf16((float)v4);
          const float v6 = ((float)v5);
          acc7[j] += v6;
          s_out0[j] = bf16_bits(v5);
        }
        *reinterpret_cast<uint4*>(out0 + e0) = *reinterpret_cast<const uint4*>(s_out0);
      }
    }
    team_reduce_v<float, 8, 32, 8>(acc7, SumOp());
    if (ty == 0 && live) {
      #pragma unroll
      for (int j = 0; j < 8; ++j) reinterpret_cast<float*>(split_scratch)[(0 * splits + part) * rows + rv + j] = acc7[j];
      __threadfence();
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      split_last = atomicAdd(reinterpret_cast<unsigned*>(split_scratch + 196608) + t, 1u) == (unsigned)(splits - 1);
    }
    __syncthreads();
    if (!split_last) continue;
    __threadfence();
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc7[j] = 0.0f;
    if (live) {
      for (ix_t p = ty; p < splits; p += 32) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc7[j] = SumOp()(acc7[j], reinterpret_cast<volatile float*>(split_scratch)[(0 * splits + p) * rows + rv + j]);
      }
    }
    team_reduce_v<float, 8, 32, 8>(acc7, SumOp());
    if (ty == 0 && live) {
      #pragma unroll
      for (int j = 0; j < 8; ++j) {
        const ix_t r = rv + j;
        const ix_t i2 = i2_0 + j;
        const float v7 = acc7[j];
        const float v8 = round_bf16((float)v7);
        out1[r] = bf16_bits(v8);
      }
    }
  }
}

