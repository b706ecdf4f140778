// launch: Tiles { tiles: 384, block: 256 }
// thunder cuda-fuser kernel over [4, 256, 384]
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
extern "C" __global__ void __launch_bounds__(256) thunder_fused_0(const u16_t* __restrict__ in0, const u16_t* __restrict__ in1, u16_t* __restrict__ out0) {
  __shared__ u16_t tile0[32][33];
  const ix_t tiles = 384, ta = 8, tb = 12;
  const int tx = threadIdx.x % 32, ty = threadIdx.x / 32;
  for (ix_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const ix_t bt = t / (ta * tb);
    const ix_t a0 = (t / tb) % ta * 32, b0 = t % tb * 32;
    const ix_t i0 = bt;
    __syncthreads();
    #pragma unroll
    for (int q = 0; q < 32; q += 8) {
      const ix_t i1 = a0 + tx, i2 = b0 + ty + q;
      if (i1 < 256 && i2 < 384) {
        tile0[ty + q][tx] = in0[i0 * 98304 + i1 + i2 * 256];
      }
    }
    __syncthreads();
    #pragma unroll
    for (int q = 0; q < 32; q += 8) {
      const ix_t i2 = b0 + tx, i1 = a0 + ty + q;
      if (i1 < 256 && i2 < 384) {
        const ix_t e = i0 * 98304 + i1 * 384 + i2;
        const float v0 = bf16_to_f32(tile0[tx][ty + q]);
        const float v1 = ((float)v0);
        const float v2 = bf16_to_f32(in1[e]);
        const float v3 = ((float)v2);
        const float v4 = (v1 + v3);
        const float v5 = round_bf16((float)v4);
        out0[e] = bf16_bits(v5);
      }
    }
  }
}

