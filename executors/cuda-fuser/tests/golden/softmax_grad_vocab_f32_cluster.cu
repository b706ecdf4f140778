// launch: ClusterRows { rows: 4, block: 1024, shared_bytes: 201056, cluster: 2 }
// thunder cuda-fuser kernel over [4, 50257], reducing dims [1]
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
template <typename T> __device__ __forceinline__ void stage_copy(T* dst, const T* src) {
#if __CUDA_ARCH__ >= 800
  const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
  if (sizeof(T) == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(s), "l"(src) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(s), "l"(src), "n"(sizeof(T)) : "memory");
#else
  *dst = *src;
#endif
}
__device__ __forceinline__ void stage_wait() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}
__device__ __forceinline__ unsigned cluster_rank() {
#if __CUDA_ARCH__ >= 900
  unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r;
#else
  return cluster_rank_host();
#endif
}
__device__ __forceinline__ void cluster_sync() {
#if __CUDA_ARCH__ >= 900
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#else
  cluster_sync_host();
#endif
}
__device__ __forceinline__ float cluster_ld(const float* p, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  unsigned a = (unsigned)__cvta_generic_to_shared(p), m; float v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(m) : "memory");
  return v;
#else
  return cluster_ld_host(p, rank);
#endif
}
__device__ __forceinline__ double cluster_ld(const double* p, unsigned rank) {
#if __CUDA_ARCH__ >= 900
  unsigned a = (unsigned)__cvta_generic_to_shared(p), m; double v;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(rank));
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(m) : "memory");
  return v;
#else
  return cluster_ld_host(p, rank);
#endif
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(1024) thunder_fused_0(const float* __restrict__ in0, const float* __restrict__ in1, float* __restrict__ out0) {
  const ix_t rows = 4, cols = 50257;
  const ix_t lane = threadIdx.x, team = blockDim.x;
  const ix_t rank = cluster_rank();
  __shared__ float cpart5;
  for (ix_t r = blockIdx.x / 2; r < rows; r += gridDim.x / 2) {
    const ix_t i0 = r;
    const ix_t head_ = (4 - (r * cols) % 4) % 4, head = head_ < cols ? head_ : cols;
    const ix_t body_end = head + (cols - head) / 4 * 4;
    const ix_t share = ((body_end - head) / 4 + 2 - 1) / 2, lo = head + rank * share * 4, hi_ = lo + share * 4, hi = hi_ < body_end ? hi_ : body_end;
    const ix_t head_mine = rank == 0 ? head : 0, tail_from = rank == 0 ? body_end : cols;
    extern __shared__ __align__(16) unsigned char row_stage[];
    uint4* const stage_n0 = reinterpret_cast<uint4*>(row_stage + 0);
    uint4* const stage_n2 = reinterpret_cast<uint4*>(row_stage + 100528);
    for (ix_t c0 = lo + lane * 4; c0 < hi; c0 += team * 4) {
      const ix_t slot = (c0 - lo) / 4;
      stage_copy(&stage_n0[slot], reinterpret_cast<const uint4*>(in0 + i0 * 50257 + c0));
      stage_copy(&stage_n2[slot], reinterpret_cast<const uint4*>(in1 + i0 * 50257 + c0));
    }
    stage_wait();
    float acc5 = 0.0f;
    for (ix_t c = lane; c < head_mine; c += team) {
      const ix_t i1 = c;
      const ix_t e = i0 * 50257 + i1;
      const float v0 = in0[e];
      const float v1 = v0;
      const float v2 = in1[e];
      const float v3 = v2;
      const float v4 = (v1 * v3);
      acc5 += v4;
    }
    for (ix_t c0 = lo + lane * 4; c0 < hi; c0 += team * 4) {
      const ix_t slot = (c0 - lo) / 4;
      const uint4 r_n0 = stage_n0[slot];
      const float* e_n0 = reinterpret_cast<const float*>(&r_n0);
      const uint4 r_n2 = stage_n2[slot];
      const float* e_n2 = reinterpret_cast<const float*>(&r_n2);
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const ix_t c = c0 + j;
        const ix_t i1 = c;
        const ix_t e = i0 * 50257 + i1;
        const float v0 = e_n0[j];
        const float v1 = v0;
        const float v2 = e_n2[j];
        const float v3 = v2;
        const float v4 = (v1 * v3);
        acc5 += v4;
      }
    }
    for (ix_t c = tail_from + lane; c < cols; c += team) {
      const ix_t i1 = c;
      const ix_t e = i0 * 50257 + i1;
      const float v0 = in0[e];
      const float v1 = v0;
      const float v2 = in1[e];
      const float v3 = v2;
      const float v4 = (v1 * v3);
      acc5 += v4;
    }
    acc5 = block_reduce<float>(acc5, SumOp(), (float)(0.0f));
    if (threadIdx.x == 0) {
      cpart5 = acc5;
    }
    cluster_sync();
    acc5 = SumOp()(cluster_ld(&cpart5, 0), cluster_ld(&cpart5, 1));
    const float v5 = acc5;
    for (ix_t c = lane; c < head_mine; c += team) {
      const ix_t i1 = c;
      const ix_t e = i0 * 50257 + i1;
      const float v2 = in1[e];
      const float v3 = v2;
      const float v0 = in0[e];
      const float v1 = v0;
      const float v6 = v5;
      const float v7 = (v1 - v6);
      const float v8 = (v3 * v7);
      const float v9 = v8;
      out0[e] = v9;
    }
    for (ix_t c0 = lo + lane * 4; c0 < hi; c0 += team * 4) {
      const ix_t slot = (c0 - lo) / 4;
      const uint4 r_n0 = stage_n0[slot];
      const float* e_n0 = reinterpret_cast<const float*>(&r_n0);
      const uint4 r_n2 = stage_n2[slot];
      const float* e_n2 = reinterpret_cast<const float*>(&r_n2);
      __align__(16) float s_out0[4];
      #pragma unroll
      for (int j = 0; j < 4; ++j) {
        const ix_t c = c0 + j;
        const ix_t i1 = c;
        const ix_t e = i0 * 50257 + i1;
        const float v2 = e_n2[j];
        const float v3 = v2;
        const float v0 = e_n0[j];
        const float v1 = v0;
        const float v6 = v5;
        const float v7 = (v1 - v6);
        const float v8 = (v3 * v7);
        const float v9 = v8;
        s_out0[j] = v9;
      }
      *reinterpret_cast<uint4*>(out0 + r * cols + c0) = *reinterpret_cast<const uint4*>(s_out0);
    }
    for (ix_t c = tail_from + lane; c < cols; c += team) {
      const ix_t i1 = c;
      const ix_t e = i0 * 50257 + i1;
      const float v2 = in1[e];
      const float v3 = v2;
      const float v0 = in0[e];
      const float v1 = v0;
      const float v6 = v5;
      const float v7 = (v1 - v6);
      const float v8 = (v3 * v7);
      const float v9 = v8;
      out0[e] = v9;
    }
    cluster_sync();
  }
}

