//! `cpu-simd`: the fast CPU executor.
//!
//! It claims maximal runs of the prims it implements on CPU f32/f64 tensors (with b8 masks and
//! i64 indices where they feed them) and compiles each region into stages:
//! - **fused groups**: elementwise ops, broadcasts, reshapes and the sums and maxima of their
//!   results, run as one loop over cache-sized tiles with a small register program, no
//!   intermediate buffers, SIMD kernels picked at run time (AVX-512, AVX2+FMA, or plain) and
//!   rayon threads for large tensors (`plan.rs`, `group.rs`, `exec.rs`); a group that is one
//!   f32 chain (each op reading the previous value, literals, or another access such as a bias
//!   row) runs block by block in vector registers instead, on AVX-512 or AVX2 written with
//!   intrinsics (`chain.rs`, `simd.rs`, `vmath.rs`), a GELU as exporters spell it as one step
//!   of such a chain (`chain_fuse.rs`);
//! - **GEMM** for `prims.matmul` through the `gemm` crate, with transposes folded into the
//!   operands' strides (`stages.rs`) and large products cut into one panel per thread
//!   (`gemm_run.rs`), products of few rows against a weight on a streaming kernel
//!   (`gemm_stream.rs`); a bias add, a residual add and a ReLU after a product run on each
//!   panel as its epilogue (`gemm_epi.rs`); a product summed over its batch dims (a weight
//!   gradient) is one GEMM into the sum (`gemm_sum.rs`), and a product read only by a
//!   transpose is computed transposed (`gemm_t.rs`);
//! - **attention**: the decomposition of `scaled_dot_product_attention` (or attention written
//!   out) runs as one online-softmax kernel blocked over keys, without the `[..., L, S]`
//!   scores, when no intermediate is needed elsewhere (`attn_match.rs`, `attn.rs`; on AVX-512
//!   its products and softmax passes run on register tiles of our own, `attn_tile.rs`);
//! - **attention for training**: the composites `ltorch.sdpa_fwd_lse` (the fused forward, also
//!   writing the row log-sum-exp) and `ltorch.sdpa_bwd` (FlashAttention-2's backward, which
//!   recomputes the probabilities tile by tile) are claimed whole (`sdpa.rs`, `attn_bwd.rs`);
//! - **slices** as views of their input, **pads** and **cats** as strided copies (`movement.rs`);
//! - **bf16 and f16** products, transposes and broadcasts (views), and converts to and from
//!   f32, as regions of their own: products on AVX-512-BF16 through a `vdpbf16ps` kernel
//!   (`bf16_gemm.rs`), whole 32 x 32 tiles on AMX where the CPU has it (`amx.rs`), else on
//!   operands widened to f32 blocks for the f32 GEMM, one rounding at the end (`half_gemm.rs`).
//!
//! Results agree with the reference interpreter within a few ulp (see `ops.rs`).
#![deny(clippy::todo, clippy::unimplemented, clippy::unwrap_used)]

#[cfg(target_arch = "x86_64")]
mod amx;
mod attn;
mod attn_bwd;
mod attn_match;
#[cfg(target_arch = "x86_64")]
mod attn_tile;
#[cfg(target_arch = "x86_64")]
mod bf16_gemm;
mod chain;
mod chain_aot;
mod chain_fuse;
mod conv;
#[cfg(target_arch = "x86_64")]
mod conv_comajor;
mod conv_run;
mod decode;
mod decode_shape;
mod exec;
mod ftz;
mod fusion;
mod gemm_epi;
mod gemm_pair;
mod gemm_run;
mod gemm_stream;
mod gemm_sum;
mod gemm_t;
#[cfg(target_arch = "x86_64")]
mod gemv;
mod group;
mod half_gemm;
mod half_sum;
mod im2col;
mod index_add;
mod kernels;
mod layer_norm;
mod layout;
mod math;
mod movement;
mod on_worker;
mod ops;
mod packed_left;
mod placement;
mod plan;
mod plan_ops;
mod pool;
mod pool_match;
mod prepack;
mod region;
mod row_copy;
mod sdpa;
#[cfg(target_arch = "x86_64")]
mod sgemm_avx2;
#[cfg(target_arch = "x86_64")]
mod simd;
mod stages;
mod switches;
mod team;
mod tile;
#[cfg(target_arch = "x86_64")]
mod vmath;
#[cfg(target_arch = "x86_64")]
mod winograd;

#[cfg(test)]
mod tests;

use thunder_abi::claim::contiguous_runs;
use thunder_abi::export::{CompiledRegion, Executor, HostLogger};
use thunder_abi::prims::Prim;
use thunder_abi::{
    HostServices, LogLevel, OptionValue, PluginError, PluginInfo, RegionSpec, TraceView,
    ABI_VERSION,
};

pub const NAME: &str = "cpu-simd";

pub fn plugin_info() -> PluginInfo {
    PluginInfo {
        name: NAME.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        abi_version: ABI_VERSION,
        description:
            "fused elementwise/reduction loops (SIMD, threads) and GEMM on CPU f32/f64; bf16/f16 GEMM"
                .into(),
        devices: vec!["cpu".into()].into(),
        symbols: Prim::ALL
            .iter()
            .map(|p| p.id().into())
            .chain([
                sdpa::FWD.into(),
                sdpa::BWD.into(),
                layer_norm::SYMBOL.into(),
            ])
            .collect(),
    }
}

pub struct CpuSimd {
    services: HostServices,
    log: HostLogger,
}

impl CpuSimd {
    /// Takes no options; an unknown one is refused so a typo in plugins.toml is not ignored.
    pub fn create(
        services: HostServices,
        options: &[(String, OptionValue)],
    ) -> Result<Self, PluginError> {
        if let Some((key, _)) = options.first() {
            return Err(PluginError::invalid(format!(
                "{NAME}: unknown option `{key}` (it takes none)"
            )));
        }
        Ok(CpuSimd {
            services,
            log: HostLogger {
                services,
                plugin: NAME,
            },
        })
    }
}

/// Whether this executor claims `op`: exactly the ops `decode` accepts, so that a claimed
/// region always compiles (a failed compile drops the executor from the whole trace).
pub fn accepts(view: &TraceView, op: &thunder_abi::OpView) -> bool {
    if sdpa::is_sdpa(&op.symbol) {
        // The attention composites, claimed whole (`sdpa.rs`); `THUNDER_CPU_SIMD_ATTN=0`
        // leaves them to their decompositions.
        return region::fuse_attention() && sdpa::decode(view, op).is_ok();
    }
    if op.symbol == layer_norm::SYMBOL {
        // Claimed whole on f32 (`layer_norm.rs`): one pass per row block instead of three
        // fused loops over the tensor.
        return layer_norm::decode(view, op).is_ok();
    }
    !op.composite && (decode::decode(view, op).is_ok() || half_gemm::accepts(view, op))
}

/// `runs` cut where ops switch between half-type products (`half_gemm.rs`, regions of their
/// own) and everything else.
fn split_half(view: &TraceView, runs: Vec<Vec<u32>>) -> Vec<Vec<u32>> {
    let half = |i: u32| {
        view.ops
            .get(i as usize)
            .is_some_and(|op| half_gemm::accepts(view, op))
    };
    let mut out = Vec::with_capacity(runs.len());
    for run in runs {
        let mut current: Vec<u32> = Vec::new();
        let mut kind = None;
        for i in run {
            let k = half(i);
            if kind.is_some_and(|was| was != k) {
                out.push(std::mem::take(&mut current));
            }
            kind = Some(k);
            current.push(i);
        }
        out.push(current);
    }
    out
}

impl Executor for CpuSimd {
    fn claim(&self, view: &TraceView) -> Result<Vec<Vec<u32>>, PluginError> {
        let regions = split_half(view, contiguous_runs(view, |op| accepts(view, op)));
        self.log.log(
            LogLevel::Debug,
            &format!(
                "claiming {} ops in {} regions",
                regions.iter().map(Vec::len).sum::<usize>(),
                regions.len()
            ),
        );
        Ok(regions)
    }

    fn compile(
        &self,
        view: &TraceView,
        region: &RegionSpec,
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        self.compile_static(view, region, &[])
    }

    fn compile_static(
        &self,
        view: &TraceView,
        region: &RegionSpec,
        static_inputs: &[u32],
    ) -> Result<Box<dyn CompiledRegion>, PluginError> {
        let half = region.ops.first().is_some_and(|&i| {
            view.ops
                .get(i as usize)
                .is_some_and(|op| half_gemm::accepts(view, op))
        });
        if half {
            return Ok(Box::new(half_gemm::HalfRegion::compile(view, region)?));
        }
        let compiled = region::Region::compile(view, region, self.services, static_inputs)?;
        let (stages, groups) = compiled.stage_counts();
        self.log.log(
            LogLevel::Debug,
            &format!(
                "region of {} ops: {stages} stages ({groups} fused loops)",
                region.ops.len()
            ),
        );
        Ok(Box::new(compiled))
    }
}

thunder_abi::export_executor! {
    info: plugin_info,
    create: CpuSimd::create,
}
