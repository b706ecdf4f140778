//! A compiled region: its kernels in order, and the device buffers that pass values between
//! them.

use crate::codegen::{Generated, Launch};
use crate::device::{self, Function};
use std::collections::HashMap;
use thunder_abi::{DeviceDesc, DeviceKind, ExecContext, HostServices, PluginError, TensorDesc};

pub struct CompiledKernel {
    pub generated: Generated,
    pub function: Function,
    /// Trace values read, in parameter order, then written.
    pub inputs: Vec<u32>,
    pub outputs: Vec<u32>,
}

pub struct FusedRegion {
    pub kernels: Vec<CompiledKernel>,
    pub region_inputs: Vec<u32>,
    pub region_outputs: Vec<u32>,
    /// Bytes of every value a kernel reads or writes.
    pub bytes: HashMap<u32, usize>,
    pub ordinal: u32,
    pub sm_count: u32,
    pub services: HostServices,
}

/// Generated kernels index their inputs as contiguous arrays and load 16 bytes at a time.
const ALIGN: u64 = 16;

fn grid(launch: Launch, sm_count: u32) -> (u32, u32) {
    let cap = u64::from(sm_count.max(1)) * 32;
    match launch {
        Launch::Pointwise { numel, vec, block } => {
            let items = numel.div_ceil(u64::from(vec.max(1)));
            (items.div_ceil(u64::from(block)).clamp(1, cap) as u32, block)
        }
        Launch::BlockPerRow { rows, block } | Launch::StagedRows { rows, block, .. } => {
            (rows.clamp(1, cap) as u32, block)
        }
        Launch::PipelinedRows {
            rows,
            block,
            per_sm,
        } => {
            let blocks = u64::from(sm_count.max(1)) * u64::from(per_sm.max(1));
            (rows.clamp(1, blocks.min(cap)) as u32, block)
        }
        Launch::ClusterRows {
            rows,
            block,
            cluster,
            ..
        } => {
            // Whole clusters only: a grid of `cluster` blocks per row, capped.
            let c = u64::from(cluster.max(1));
            let blocks = rows.saturating_mul(c).clamp(c, (cap / c).max(1) * c);
            (blocks as u32, block)
        }
        Launch::Tiles { tiles, block } => (tiles.clamp(1, cap) as u32, block),
        Launch::SplitRows {
            rows,
            block,
            splits,
            ..
        } => (
            rows.saturating_mul(u64::from(splits)).clamp(1, cap) as u32,
            block,
        ),
        Launch::ColumnTiles { rows, tile, block } => (
            rows.div_ceil(u64::from(tile.max(1))).clamp(1, cap) as u32,
            block,
        ),
        Launch::WarpRows {
            rows,
            rows_per_block,
            lanes,
        } => (
            rows.div_ceil(u64::from(rows_per_block.max(1)))
                .clamp(1, cap) as u32,
            lanes * rows_per_block.max(1),
        ),
    }
}

fn has_work(launch: Launch) -> bool {
    match launch {
        Launch::Pointwise { numel, .. } => numel > 0,
        Launch::BlockPerRow { rows, .. }
        | Launch::PipelinedRows { rows, .. }
        | Launch::StagedRows { rows, .. }
        | Launch::ClusterRows { rows, .. }
        | Launch::ColumnTiles { rows, .. }
        | Launch::SplitRows { rows, .. }
        | Launch::WarpRows { rows, .. } => rows > 0,
        Launch::Tiles { tiles, .. } => tiles > 0,
    }
}

struct Scratch<'a> {
    services: &'a HostServices,
    device: DeviceDesc,
    live: Vec<(u64, usize)>,
}

impl Scratch<'_> {
    fn alloc(&mut self, bytes: usize) -> Result<u64, PluginError> {
        let p = (self.services.alloc)(self.device, bytes, 256) as u64;
        if p == 0 && bytes > 0 {
            return Err(PluginError::internal(format!(
                "cuda-fuser: out of device memory for a {bytes}-byte intermediate"
            )));
        }
        self.live.push((p, bytes));
        Ok(p)
    }

    fn free(&mut self, p: u64) {
        if let Some(i) = self.live.iter().position(|&(q, _)| q == p) {
            let (q, bytes) = self.live.swap_remove(i);
            (self.services.free)(self.device, q as *mut std::ffi::c_void, bytes, 256);
        }
    }
}

impl Drop for Scratch<'_> {
    fn drop(&mut self) {
        // Stream-ordered: the host's pool hands a block out again only to work queued after
        // the kernels that still read it.
        for (p, bytes) in std::mem::take(&mut self.live) {
            (self.services.free)(self.device, p as *mut std::ffi::c_void, bytes, 256);
        }
    }
}

impl thunder_abi::export::CompiledRegion for FusedRegion {
    fn run(
        &self,
        inputs: &[TensorDesc<'_>],
        outputs: &[TensorDesc<'_>],
        ctx: &ExecContext,
    ) -> Result<(), PluginError> {
        if ctx.device.kind != DeviceKind::Cuda || ctx.context.is_null() {
            return Err(PluginError::invalid(
                "cuda-fuser: run without a CUDA context (the region's tensors are on cuda)",
            ));
        }
        if ctx.device.index != self.ordinal {
            return Err(PluginError::invalid(format!(
                "cuda-fuser: region compiled for cuda:{} run on cuda:{}",
                self.ordinal, ctx.device.index
            )));
        }
        if inputs.len() != self.region_inputs.len() || outputs.len() != self.region_outputs.len() {
            return Err(PluginError::invalid(format!(
                "cuda-fuser: expected {} inputs and {} outputs, got {} and {}",
                self.region_inputs.len(),
                self.region_outputs.len(),
                inputs.len(),
                outputs.len()
            )));
        }
        let mut ptr: HashMap<u32, u64> = HashMap::new();
        for (&v, d) in self
            .region_inputs
            .iter()
            .zip(inputs)
            .chain(self.region_outputs.iter().zip(outputs))
        {
            if d.device.kind != DeviceKind::Cuda || !d.is_contiguous() {
                return Err(PluginError::invalid(format!(
                    "cuda-fuser: tensor t{v} must be a contiguous CUDA tensor"
                )));
            }
            let p = d.data as u64 + d.byte_offset;
            if !p.is_multiple_of(ALIGN) && d.numel() > 0 {
                return Err(PluginError::invalid(format!(
                    "cuda-fuser: tensor t{v} is not {ALIGN}-byte aligned"
                )));
            }
            ptr.insert(v, p);
        }
        // SAFETY: the host passes the primary context of the region's device.
        unsafe { cudarc::driver::result::ctx::set_current(ctx.context as _) }
            .map_err(|e| PluginError::internal(format!("cuda-fuser: cuCtxSetCurrent: {e:?}")))?;
        let mut last_read: HashMap<u32, usize> = HashMap::new();
        for (i, k) in self.kernels.iter().enumerate() {
            for &v in &k.inputs {
                last_read.insert(v, i);
            }
        }
        let mut scratch = Scratch {
            services: &self.services,
            device: ctx.device,
            live: Vec::new(),
        };
        for (i, k) in self.kernels.iter().enumerate() {
            for &v in &k.outputs {
                if let std::collections::hash_map::Entry::Vacant(slot) = ptr.entry(v) {
                    let bytes = self.bytes.get(&v).copied().unwrap_or(0);
                    slot.insert(scratch.alloc(bytes)?);
                }
            }
            let mut args = Vec::with_capacity(k.inputs.len() + k.outputs.len());
            for v in k.inputs.iter().chain(&k.outputs) {
                args.push(*ptr.get(v).ok_or_else(|| {
                    PluginError::internal(format!("cuda-fuser: t{v} has no buffer"))
                })?);
            }
            if let Launch::SplitRows {
                scratch: bytes,
                counters,
                ..
            } = k.generated.launch
            {
                // The partials and the row counters, which must start at zero.
                let p = scratch.alloc(bytes as usize)?;
                // SAFETY: `p` holds `bytes` bytes and the counters end at its end.
                unsafe {
                    cudarc::driver::result::memset_d8_async(
                        p + counters,
                        0,
                        (bytes - counters) as usize,
                        ctx.stream as cudarc::driver::sys::CUstream,
                    )
                }
                .map_err(|e| {
                    PluginError::internal(format!(
                        "cuda-fuser: {}: clearing the split counters: {e:?}",
                        k.generated.name
                    ))
                })?;
                args.push(p);
            }
            if has_work(k.generated.launch) {
                let (g, b) = grid(k.generated.launch, self.sm_count);
                let shared = k.generated.launch.shared_bytes();
                device::launch_with_shared(k.function, g, b, shared, ctx.stream, &args).map_err(
                    |e| PluginError::internal(format!("cuda-fuser: {}: {e}", k.generated.name)),
                )?;
            }
            for &v in &k.inputs {
                if last_read.get(&v) == Some(&i) && !self.region_outputs.contains(&v) {
                    if let Some(&p) = ptr.get(&v) {
                        scratch.free(p);
                    }
                }
            }
        }
        Ok(())
    }
}

pub fn device_of(d: DeviceDesc) -> Option<u32> {
    (d.kind == DeviceKind::Cuda).then_some(d.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_cover_the_work_and_stay_capped() {
        let l = Launch::Pointwise {
            numel: 1 << 26,
            vec: 4,
            block: 256,
        };
        assert_eq!(grid(l, 132), (132 * 32, 256));
        let l = Launch::Pointwise {
            numel: 10,
            vec: 4,
            block: 256,
        };
        assert_eq!(grid(l, 132), (1, 256));
        let l = Launch::BlockPerRow {
            rows: 7,
            block: 512,
        };
        assert_eq!(grid(l, 132), (7, 512));
        assert_eq!(l.shared_bytes(), 0);
        // Eight blocks a multiprocessor take the rows in turn; fewer rows, a block each.
        let piped = |rows| Launch::PipelinedRows {
            rows,
            block: 256,
            per_sm: 8,
        };
        assert_eq!(grid(piped(8192), 132), (1056, 256));
        assert_eq!(grid(piped(100), 132), (100, 256));
        assert_eq!(grid(piped(0), 132), (1, 256));
        let l = Launch::StagedRows {
            rows: 4096,
            block: 1024,
            shared_bytes: 6283 * 16,
        };
        assert_eq!(grid(l, 132), (4096, 1024));
        assert_eq!(l.shared_bytes(), 6283 * 16);
        // Pairs of blocks a row, and whole pairs only under the cap.
        let pair = |rows| Launch::ClusterRows {
            rows,
            block: 1024,
            shared_bytes: 2 * 6282 * 16,
            cluster: 2,
        };
        assert_eq!(grid(pair(2048), 132), (4096, 1024));
        assert_eq!(grid(pair(4096), 132), (4224, 1024));
        assert_eq!(grid(pair(3), 133), (6, 1024));
        assert_eq!(grid(pair(4096), 133), (4256, 1024));
        assert_eq!(pair(1).shared_bytes(), 2 * 6282 * 16);
        let l = Launch::ColumnTiles {
            rows: 1000,
            tile: 16,
            block: 1024,
        };
        assert_eq!(grid(l, 132), (63, 1024));
        let l = Launch::WarpRows {
            rows: 8192,
            rows_per_block: 4,
            lanes: 32,
        };
        assert_eq!(grid(l, 132), (2048, 128));
        let l = Launch::WarpRows {
            rows: 8192,
            rows_per_block: 8,
            lanes: 16,
        };
        assert_eq!(grid(l, 132), (1024, 128));
        let l = Launch::SplitRows {
            rows: 2,
            block: 1024,
            splits: 384,
            scratch: 2 * 384 * 8 + 8,
            counters: 2 * 384 * 8,
        };
        assert_eq!(grid(l, 132), (768, 1024));
        assert!(!has_work(Launch::Pointwise {
            numel: 0,
            vec: 4,
            block: 256
        }));
    }
}
