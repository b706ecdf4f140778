//! The stream-ordered caching allocator for device memory.
//!
//! Blocks come from `cuMemAlloc` and are rounded up to a size class (512 bytes, then four classes
//! per power of two, as the host pool). A freed block goes to its class's free list and is handed
//! to the next request of that class right away. That is safe without synchronizing because every
//! user of a device's memory (the runtime's copies and every plugin's kernels) enqueues on the
//! device's one stream: the next owner's work is ordered after the last owner's. A plugin that
//! enqueues on another stream must synchronize with the host's stream first (the ABI docs say so).
//!
//! When `cuMemAlloc` runs out of memory, the cached blocks are returned to the driver and the
//! allocation is tried once more. [`empty_cache`] returns them on demand.
//!
//! While a thread captures a CUDA graph ([`crate::graph`]), its allocations on that device come
//! from the capture's own arena: a block freed during the capture is reused by the capture only
//! (the captured work is one chain, so that reuse is ordered), and no block of the arena goes
//! back to the shared lists until the graph's [`GraphMemory`] is dropped, because every replay
//! writes the same addresses.

use super::driver::{cuda_call_error, current};
use crate::{CudaError as Error, Result};
use cudarc::driver::result;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Counters of one device's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DevicePoolStats {
    pub in_use_bytes: usize,
    pub cached_bytes: usize,
    /// Allocations served from a free list.
    pub hits: u64,
    /// Allocations that called `cuMemAlloc`.
    pub misses: u64,
}

#[derive(Default)]
struct DevicePool {
    free: HashMap<usize, Vec<u64>>,
    stats: DevicePoolStats,
    /// Blocks that belong to a captured graph's arena: a free of one (an array of a replay's
    /// outputs, dropped by its last holder) leaves it to the arena.
    graph_owned: HashSet<u64>,
}

/// The arena of the capture running on this thread.
struct CaptureArena {
    ordinal: u32,
    /// Every block the capture took, with its class size.
    owned: HashMap<u64, usize>,
    /// Blocks freed during the capture, by class size, for its later requests.
    free: HashMap<usize, Vec<u64>>,
}

thread_local! {
    static CAPTURE: RefCell<Option<CaptureArena>> = const { RefCell::new(None) };
}

/// The device memory a captured graph reads and writes: every block its capture allocated.
/// Dropping it returns them to the pool, which is safe without a sync because the graph's
/// launches are on the device's one stream, like every later user of the blocks.
pub struct GraphMemory {
    ordinal: u32,
    blocks: Vec<(u64, usize)>,
}

impl GraphMemory {
    /// Bytes held, for logs and stats.
    pub fn bytes(&self) -> usize {
        self.blocks.iter().map(|&(_, s)| s).sum()
    }
}

impl Drop for GraphMemory {
    fn drop(&mut self) {
        let mut pools = pools().lock().unwrap_or_else(PoisonError::into_inner);
        let pool = pools.entry(self.ordinal).or_default();
        for &(ptr, size) in &self.blocks {
            pool.graph_owned.remove(&ptr);
            pool.stats.in_use_bytes = pool.stats.in_use_bytes.saturating_sub(size);
            pool.stats.cached_bytes += size;
            pool.free.entry(size).or_default().push(ptr);
        }
    }
}

/// Routes this thread's allocations on `ordinal` to a new capture arena.
pub(crate) fn begin_arena(ordinal: u32) {
    CAPTURE.with(|c| {
        *c.borrow_mut() = Some(CaptureArena {
            ordinal,
            owned: HashMap::new(),
            free: HashMap::new(),
        })
    });
}

/// Ends this thread's capture arena; its blocks now belong to the returned memory.
pub(crate) fn end_arena() -> Option<GraphMemory> {
    CAPTURE
        .with(|c| c.borrow_mut().take())
        .map(|a| GraphMemory {
            ordinal: a.ordinal,
            blocks: a.owned.into_iter().collect(),
        })
}

/// A block freed earlier in this thread's capture on `ordinal`, of class `size`.
fn arena_reuse(ordinal: u32, size: usize) -> Option<u64> {
    CAPTURE.with(|c| {
        let mut c = c.borrow_mut();
        let a = c.as_mut().filter(|a| a.ordinal == ordinal)?;
        a.free.get_mut(&size).and_then(Vec::pop)
    })
}

fn capturing(ordinal: u32) -> bool {
    CAPTURE.with(|c| c.borrow().as_ref().is_some_and(|a| a.ordinal == ordinal))
}

/// Records a new block of this thread's capture (the caller holds the pool lock).
fn arena_take(pool: &mut DevicePool, ptr: u64, size: usize) {
    pool.graph_owned.insert(ptr);
    CAPTURE.with(|c| {
        if let Some(a) = c.borrow_mut().as_mut() {
            a.owned.insert(ptr, size);
        }
    });
}

/// Gives a block back to this thread's capture arena when it owns it.
fn arena_give_back(ordinal: u32, ptr: u64) -> bool {
    CAPTURE.with(|c| {
        let mut c = c.borrow_mut();
        let Some(a) = c.as_mut().filter(|a| a.ordinal == ordinal) else {
            return false;
        };
        let Some(&size) = a.owned.get(&ptr) else {
            return false;
        };
        a.free.entry(size).or_default().push(ptr);
        true
    })
}

const MIN_BLOCK: usize = 512;

/// The class size a request of `bytes` is served with.
pub fn class_size(bytes: usize) -> usize {
    if bytes <= MIN_BLOCK {
        return MIN_BLOCK;
    }
    let pow = bytes.next_power_of_two();
    let quarter = pow / 8; // classes at 1.25, 1.5, 1.75, 2 times pow/2
    let half = pow / 2;
    (1..=4)
        .map(|k| half + k * quarter)
        .find(|&c| c >= bytes)
        .unwrap_or(pow)
}

fn pools() -> &'static Mutex<HashMap<u32, DevicePool>> {
    static POOLS: OnceLock<Mutex<HashMap<u32, DevicePool>>> = OnceLock::new();
    POOLS.get_or_init(Default::default)
}

/// A device pointer for `bytes` bytes on `cuda:ordinal` (0 for zero bytes, never dereferenced).
pub fn alloc(ordinal: u32, bytes: usize) -> Result<u64> {
    if bytes == 0 {
        return Ok(0);
    }
    let size = class_size(bytes);
    if let Some(ptr) = arena_reuse(ordinal, size) {
        return Ok(ptr);
    }
    let capture = capturing(ordinal);
    {
        let mut pools = pools().lock().unwrap_or_else(PoisonError::into_inner);
        let pool = pools.entry(ordinal).or_default();
        if let Some(ptr) = pool.free.get_mut(&size).and_then(Vec::pop) {
            pool.stats.hits += 1;
            pool.stats.cached_bytes -= size;
            pool.stats.in_use_bytes += size;
            if capture {
                arena_take(pool, ptr, size);
            }
            return Ok(ptr);
        }
    }
    current(ordinal)?;
    // SAFETY: the device's context is current; the size is non-zero.
    let ptr = match unsafe { result::malloc_sync(size) } {
        Ok(p) => p,
        Err(_) => {
            empty_cache(ordinal)?;
            // SAFETY: as above.
            unsafe { result::malloc_sync(size) }.map_err(|e| {
                match cuda_call_error("cuMemAlloc", e) {
                    Error::Cuda { message, .. } => Error::Usage(format!(
                        "out of memory on cuda:{ordinal} allocating {bytes} bytes ({message})"
                    )),
                    other => other,
                }
            })?
        }
    };
    let mut pools = pools().lock().unwrap_or_else(PoisonError::into_inner);
    let pool = pools.entry(ordinal).or_default();
    pool.stats.misses += 1;
    pool.stats.in_use_bytes += size;
    if capture {
        arena_take(pool, ptr, size);
    }
    Ok(ptr)
}

/// Returns a block from [`alloc`] to the cache (see the module docs for why no sync is needed).
pub fn free(ordinal: u32, ptr: u64, bytes: usize) {
    if bytes == 0 || ptr == 0 {
        return;
    }
    if arena_give_back(ordinal, ptr) {
        return;
    }
    let size = class_size(bytes);
    let mut pools = pools().lock().unwrap_or_else(PoisonError::into_inner);
    let pool = pools.entry(ordinal).or_default();
    if pool.graph_owned.contains(&ptr) {
        return;
    }
    pool.stats.in_use_bytes = pool.stats.in_use_bytes.saturating_sub(size);
    pool.stats.cached_bytes += size;
    pool.free.entry(size).or_default().push(ptr);
}

/// Gives every cached block of the device back to the driver (after its stream is idle).
pub fn empty_cache(ordinal: u32) -> Result<()> {
    let blocks: Vec<u64> = {
        let mut pools = pools().lock().unwrap_or_else(PoisonError::into_inner);
        let Some(pool) = pools.get_mut(&ordinal) else {
            return Ok(());
        };
        pool.stats.cached_bytes = 0;
        pool.free.drain().flat_map(|(_, v)| v).collect()
    };
    if blocks.is_empty() {
        return Ok(());
    }
    let rt = current(ordinal)?;
    // SAFETY: a cached block has no owner; waiting for the stream makes sure no queued work of
    // its last owner still touches it.
    unsafe {
        result::stream::synchronize(rt.stream)
            .map_err(|e| cuda_call_error("cuStreamSynchronize", e))?;
        for b in blocks {
            result::free_sync(b).map_err(|e| cuda_call_error("cuMemFree", e))?;
        }
    }
    Ok(())
}

pub fn stats(ordinal: u32) -> DevicePoolStats {
    pools()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .get(&ordinal)
        .map(|p| p.stats)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::class_size;

    #[test]
    fn classes_cover_the_request_with_at_most_a_quarter_slack() {
        for bytes in [
            1usize,
            511,
            512,
            513,
            1000,
            1024,
            1025,
            4097,
            1 << 20,
            (1 << 20) + 1,
            3 << 30,
        ] {
            let c = class_size(bytes);
            assert!(c >= bytes, "{bytes} -> {c}");
            assert!(c <= (bytes + bytes / 3).max(512), "{bytes} -> {c}");
        }
        assert_eq!(class_size(1025), 1280);
        assert_eq!(class_size(1 << 20), 1 << 20);
    }
}
