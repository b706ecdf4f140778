//! A caching allocator for host memory.
//!
//! Every CPU buffer of the runtime ([`crate::Array`]) and every CPU allocation a plugin makes
//! through `HostServices::alloc` comes from one process-wide pool. A freed block is kept in a
//! free list of its size class and handed out again to the next request of that class, so a
//! compiled program called in a loop reaches a steady state where no call takes memory from the
//! system allocator (and so none pays the page faults of fresh memory).
//!
//! - **Size classes**: requests up to 64 bytes take 64 bytes; larger ones are rounded up to one
//!   of four classes per power of two (`1.25, 1.5, 1.75, 2 x 2^k`), so at most a quarter of a
//!   block is slack.
//! - **Alignment**: every block is aligned to [`POOL_ALIGN`] (64) bytes. Larger alignments are
//!   not pooled (see [`crate::host::services::cpu_alloc`]).
//! - **Zero bytes**: a zero-byte request allocates nothing and gets a dangling, aligned, non-null
//!   pointer.
//! - **Contents**: a block new from the system is zeroed (with `calloc`, which maps fresh zero
//!   pages for large blocks without writing them); a reused block holds what its last owner
//!   wrote. So a block's bytes are always initialized, but not necessarily zero: callers that
//!   need zeros (`Array::zeros`) write them.
//! - **Cap**: the free lists hold at most [`cap`] bytes (default: 1 GiB, or a quarter of the
//!   machine's memory if that is less; `THUNDER_POOL_CAP` overrides it, in bytes or with a
//!   `K`/`M`/`G` suffix). A block freed while the lists are full goes back to the system. Blocks
//!   in use are not limited.
//! - **Threads**: every operation is thread-safe (a lock per size class, atomic counters).
//!
//! [`stats`] reports bytes in use and cached, hits and misses, for tests and benches.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// Alignment of every pooled block.
pub const POOL_ALIGN: usize = 64;

/// Size classes: class 0 is 64 bytes, then four per power of two up to 2^63.
const CLASSES: usize = 1 + 4 * 58;
/// Bytes before a block's aligned start that hold its bookkeeping (the system allocation's
/// start and the class index).
const HEADER: usize = 16;
/// Extra bytes asked of the system: room to align the start up to 64 with the header before it.
const SLACK: usize = POOL_ALIGN;
/// `calloc`'s alignment (the system allocator's minimum), which the slack is computed from.
const SYSTEM_ALIGN: usize = 16;

/// Counters of the pool; see [`stats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PoolStats {
    /// Bytes of blocks handed out and not yet freed (class sizes, so at least what was asked).
    pub in_use_bytes: usize,
    /// Bytes of freed blocks kept for reuse.
    pub cached_bytes: usize,
    /// The most bytes the free lists may hold.
    pub cap_bytes: usize,
    /// Bytes held from the system allocator: in use plus cached (without per-block slack).
    pub system_bytes: usize,
    /// Allocations served from a free list.
    pub hits: u64,
    /// Allocations that took a new block from the system allocator.
    pub misses: u64,
    /// Blocks given back to the system allocator (freed while the lists were full, or trimmed).
    pub releases: u64,
}

/// Class index and block size for a request of `bytes > 0`; `None` if it cannot be rounded.
fn class_of(bytes: usize) -> Option<(usize, usize)> {
    if bytes <= POOL_ALIGN {
        return Some((0, POOL_ALIGN));
    }
    // 2^shift <= bytes - 1 < 2^(shift + 1), shift >= 6.
    let shift = (usize::BITS - 1 - (bytes - 1).leading_zeros()) as usize;
    let step = 1usize << (shift - 2);
    let size = bytes.checked_add(step - 1)? & !(step - 1);
    let k = (size >> (shift - 2)) - 4; // 1..=4
    Some((1 + (shift - 6) * 4 + (k - 1), size))
}

/// The block size of a class index.
fn class_size(class: usize) -> usize {
    if class == 0 {
        return POOL_ALIGN;
    }
    let shift = 6 + (class - 1) / 4;
    let k = (class - 1) % 4 + 1;
    (4 + k) << (shift - 2)
}

/// A pool of host memory blocks. The runtime uses one per process ([`global`]); tests make their
/// own.
pub(crate) struct Pool {
    free: [Mutex<Vec<usize>>; CLASSES],
    cap: AtomicUsize,
    in_use: AtomicUsize,
    cached: AtomicUsize,
    system: AtomicUsize,
    hits: AtomicU64,
    misses: AtomicU64,
    releases: AtomicU64,
}

impl Pool {
    pub(crate) const fn new(cap: usize) -> Pool {
        Pool {
            free: [const { Mutex::new(Vec::new()) }; CLASSES],
            cap: AtomicUsize::new(cap),
            in_use: AtomicUsize::new(0),
            cached: AtomicUsize::new(0),
            system: AtomicUsize::new(0),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            releases: AtomicU64::new(0),
        }
    }

    fn list(&self, class: usize) -> std::sync::MutexGuard<'_, Vec<usize>> {
        // A panic while holding the lock cannot leave the list inconsistent (push/pop only).
        self.free[class]
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// A block of at least `bytes` bytes aligned to [`POOL_ALIGN`]; null if the system has no
    /// memory left; a dangling aligned pointer for zero bytes.
    pub(crate) fn alloc(&self, bytes: usize) -> *mut u8 {
        if bytes == 0 {
            return POOL_ALIGN as *mut u8;
        }
        let Some((class, size)) = class_of(bytes) else {
            return std::ptr::null_mut();
        };
        let reused = self.list(class).pop();
        let ptr = match reused {
            Some(p) => {
                self.cached.fetch_sub(size, Ordering::Relaxed);
                self.hits.fetch_add(1, Ordering::Relaxed);
                p as *mut u8
            }
            None => {
                let p = system_alloc(class, size);
                if p.is_null() {
                    return p;
                }
                self.system.fetch_add(size, Ordering::Relaxed);
                self.misses.fetch_add(1, Ordering::Relaxed);
                p
            }
        };
        self.in_use.fetch_add(size, Ordering::Relaxed);
        ptr
    }

    /// Returns a block to the pool (or to the system, when the free lists are full).
    ///
    /// # Safety
    /// `ptr` must come from `self.alloc(bytes)` and not be freed twice.
    pub(crate) unsafe fn free(&self, ptr: *mut u8, bytes: usize) {
        if bytes == 0 || ptr.is_null() {
            return;
        }
        // SAFETY: the block came from `alloc`, so its header is there.
        let class = unsafe { header(ptr).1 };
        let size = class_size(class);
        debug_assert!(
            size >= bytes,
            "freeing {bytes} bytes from a {size}-byte block"
        );
        self.in_use.fetch_sub(size, Ordering::Relaxed);
        let cap = self.cap.load(Ordering::Relaxed);
        // Reserve room in the count first, so the lists never hold more than the cap.
        if self.cached.fetch_add(size, Ordering::Relaxed) + size <= cap {
            self.list(class).push(ptr as usize);
        } else {
            self.cached.fetch_sub(size, Ordering::Relaxed);
            // SAFETY: the block is no longer used by anyone.
            unsafe { self.release(ptr, size) };
        }
    }

    /// Gives a block back to the system allocator.
    unsafe fn release(&self, ptr: *mut u8, size: usize) {
        // SAFETY: guaranteed by the callers: a block of `size` bytes from `system_alloc`.
        unsafe { system_free(ptr, size) };
        self.system.fetch_sub(size, Ordering::Relaxed);
        self.releases.fetch_add(1, Ordering::Relaxed);
    }

    /// Releases cached blocks, largest classes first, until at most `keep` bytes are cached.
    pub(crate) fn trim_to(&self, keep: usize) {
        for class in (0..CLASSES).rev() {
            if self.cached.load(Ordering::Relaxed) <= keep {
                return;
            }
            let size = class_size(class);
            loop {
                if self.cached.load(Ordering::Relaxed) <= keep {
                    return;
                }
                let Some(p) = self.list(class).pop() else {
                    break;
                };
                self.cached.fetch_sub(size, Ordering::Relaxed);
                // SAFETY: a cached block is owned by the pool alone.
                unsafe { self.release(p as *mut u8, size) };
            }
        }
    }

    pub(crate) fn set_cap(&self, cap: usize) {
        self.cap.store(cap, Ordering::Relaxed);
        self.trim_to(cap);
    }

    pub(crate) fn stats(&self) -> PoolStats {
        PoolStats {
            in_use_bytes: self.in_use.load(Ordering::Relaxed),
            cached_bytes: self.cached.load(Ordering::Relaxed),
            cap_bytes: self.cap.load(Ordering::Relaxed),
            system_bytes: self.system.load(Ordering::Relaxed),
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            releases: self.releases.load(Ordering::Relaxed),
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.trim_to(0);
    }
}

/// `(system allocation start, class)` stored just before a block's aligned start.
///
/// # Safety
/// `ptr` must be a live block from [`system_alloc`].
unsafe fn header(ptr: *mut u8) -> (*mut u8, usize) {
    // SAFETY: system_alloc wrote two usizes in the HEADER bytes before ptr (8-aligned).
    unsafe {
        let h = ptr.sub(HEADER) as *const usize;
        (h.read() as *mut u8, h.add(1).read())
    }
}

/// A zeroed block of `size` bytes aligned to 64 from the system allocator, with its header.
fn system_alloc(class: usize, size: usize) -> *mut u8 {
    let Some(total) = size.checked_add(SLACK) else {
        return std::ptr::null_mut();
    };
    let Ok(layout) = Layout::from_size_align(total, SYSTEM_ALIGN) else {
        return std::ptr::null_mut();
    };
    // SAFETY: non-zero size. At the system allocator's minimum alignment, alloc_zeroed is
    // calloc, which gets fresh zero pages for large blocks without touching them.
    let raw = unsafe { System.alloc_zeroed(layout) };
    if raw.is_null() {
        return raw;
    }
    // raw is 16-aligned, so the aligned start is 16..=64 bytes in: room for the header, and
    // start + size <= raw + total.
    let offset = POOL_ALIGN - (raw as usize % POOL_ALIGN);
    debug_assert!(offset >= HEADER);
    // SAFETY: offset + size <= total; the header lies inside the allocation, 8-aligned.
    unsafe {
        let ptr = raw.add(offset);
        let h = ptr.sub(HEADER) as *mut usize;
        h.write(raw as usize);
        h.add(1).write(class);
        ptr
    }
}

/// # Safety
/// `ptr` must be a live block of `size` bytes from [`system_alloc`].
unsafe fn system_free(ptr: *mut u8, size: usize) {
    // SAFETY: as allocated in system_alloc.
    unsafe {
        let (raw, _) = header(ptr);
        let layout = Layout::from_size_align_unchecked(size + SLACK, SYSTEM_ALIGN);
        System.dealloc(raw, layout);
    }
}

/// 1 GiB, or a quarter of the machine's memory if that is less, unless `THUNDER_POOL_CAP`
/// says otherwise.
fn default_cap() -> usize {
    const GIB: usize = 1 << 30;
    if let Ok(text) = std::env::var("THUNDER_POOL_CAP") {
        match parse_bytes(&text) {
            Some(cap) => return cap,
            None => tracing::warn!(
                "THUNDER_POOL_CAP={text:?} is not a byte count (e.g. 536870912, 512M, 2G); \
                 using the default"
            ),
        }
    }
    match total_memory() {
        Some(total) => GIB.min(total / 4),
        None => GIB,
    }
}

/// `123`, `64K`, `512M`, `2G` (powers of 1024; a trailing `B`/`iB` is allowed).
fn parse_bytes(text: &str) -> Option<usize> {
    let t = text.trim().to_ascii_uppercase();
    let t = t
        .strip_suffix("IB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(&t);
    let (digits, shift) = match t.chars().last()? {
        'K' => (&t[..t.len() - 1], 10),
        'M' => (&t[..t.len() - 1], 20),
        'G' => (&t[..t.len() - 1], 30),
        'T' => (&t[..t.len() - 1], 40),
        _ => (t, 0),
    };
    digits.trim().parse::<usize>().ok()?.checked_mul(1 << shift)
}

/// The machine's memory in bytes, where the platform tells it simply (Linux).
fn total_memory() -> Option<usize> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: usize = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The process-wide pool.
pub(crate) fn global() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool::new(default_cap()))
}

/// Counters of the process-wide pool.
pub fn stats() -> PoolStats {
    global().stats()
}

/// The most bytes the pool keeps cached.
pub fn cap() -> usize {
    global().stats().cap_bytes
}

/// Sets the most bytes the pool keeps cached, releasing cached blocks beyond it.
pub fn set_cap(bytes: usize) {
    global().set_cap(bytes)
}

/// Releases every cached block to the system allocator (blocks in use are untouched).
pub fn trim() {
    global().trim_to(0)
}

/// Allocates `bytes` bytes aligned to 64 from the process-wide pool: null when out of memory,
/// a dangling aligned pointer for zero bytes. The contents are initialized but arbitrary.
pub fn alloc(bytes: usize) -> *mut u8 {
    global().alloc(bytes)
}

/// Returns a block to the process-wide pool.
///
/// # Safety
/// `ptr` must come from [`alloc`]`(bytes)` and not be freed twice.
pub unsafe fn free(ptr: *mut u8, bytes: usize) {
    // SAFETY: guaranteed by the caller.
    unsafe { global().free(ptr, bytes) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_round_up_by_at_most_a_quarter() {
        assert_eq!(class_of(1), Some((0, 64)));
        assert_eq!(class_of(64), Some((0, 64)));
        assert_eq!(class_of(65), Some((1, 80)));
        assert_eq!(class_of(128), Some((4, 128)));
        assert_eq!(class_of(129), Some((5, 160)));
        assert_eq!(class_of(64 << 20).unwrap().1, 64 << 20);
        let mut last = 0;
        for bytes in (1..5000).chain([1 << 20, (1 << 20) + 1, 3 << 30, usize::MAX / 2]) {
            let (class, size) = class_of(bytes).unwrap();
            assert!(size >= bytes, "{bytes} -> {size}");
            assert!(
                bytes <= 64 || (size - bytes) * 4 < size,
                "{bytes} -> {size}"
            );
            assert_eq!(class_size(class), size, "class {class} of {bytes}");
            assert!(class < CLASSES);
            if bytes < 5000 {
                assert!(class >= last);
                last = class;
            }
        }
        assert_eq!(class_of(usize::MAX), None);
    }

    #[test]
    fn reuses_blocks_aligned_and_zero_when_new() {
        let pool = Pool::new(1 << 20);
        let a = pool.alloc(1000);
        assert!(!a.is_null() && (a as usize).is_multiple_of(POOL_ALIGN));
        // SAFETY: 1000 bytes were allocated.
        let bytes = unsafe { std::slice::from_raw_parts_mut(a, 1000) };
        assert!(bytes.iter().all(|&b| b == 0), "a new block is zeroed");
        bytes.fill(7);
        // SAFETY: from pool.alloc(1000).
        unsafe { pool.free(a, 1000) };
        let s = pool.stats();
        assert_eq!(
            (s.misses, s.hits, s.in_use_bytes, s.cached_bytes),
            (1, 0, 0, 1024)
        );
        // Same class (1000 and 1010 both round to 1024): the same block comes back.
        let b = pool.alloc(1010);
        assert_eq!(a, b);
        let s = pool.stats();
        assert_eq!(
            (s.misses, s.hits, s.in_use_bytes, s.cached_bytes),
            (1, 1, 1024, 0)
        );
        // SAFETY: from pool.alloc(1010).
        unsafe { pool.free(b, 1010) };
    }

    #[test]
    fn zero_bytes_allocate_nothing() {
        let pool = Pool::new(1 << 20);
        let p = pool.alloc(0);
        assert!(!p.is_null() && (p as usize).is_multiple_of(POOL_ALIGN));
        // SAFETY: a zero-byte block.
        unsafe { pool.free(p, 0) };
        assert_eq!(
            pool.stats(),
            PoolStats {
                cap_bytes: 1 << 20,
                ..PoolStats::default()
            }
        );
    }

    #[test]
    fn cap_is_honoured() {
        let pool = Pool::new(4096);
        let blocks: Vec<*mut u8> = (0..10).map(|_| pool.alloc(1024)).collect();
        for &p in &blocks {
            // SAFETY: from pool.alloc(1024).
            unsafe { pool.free(p, 1024) };
        }
        let s = pool.stats();
        assert_eq!(s.cached_bytes, 4096);
        assert_eq!(s.releases, 6);
        assert_eq!(s.system_bytes, 4096);
        // A block larger than the cap is never cached.
        let big = pool.alloc(8192);
        // SAFETY: from pool.alloc(8192).
        unsafe { pool.free(big, 8192) };
        assert_eq!(pool.stats().cached_bytes, 4096);
        pool.set_cap(1024);
        let s = pool.stats();
        assert_eq!(
            (s.cached_bytes, s.system_bytes, s.cap_bytes),
            (1024, 1024, 1024)
        );
        pool.trim_to(0);
        assert_eq!(pool.stats().system_bytes, 0);
    }

    #[test]
    fn threads_share_the_pool_safely() {
        let pool = Pool::new(64 << 20);
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let pool = &pool;
                s.spawn(move || {
                    for i in 0..2000usize {
                        let n = 1 + (i * 37 + t as usize * 11) % 5000;
                        let p = pool.alloc(n);
                        // SAFETY: n bytes were allocated; nobody else holds the block.
                        unsafe {
                            std::ptr::write_bytes(p, t, n);
                            assert!(std::slice::from_raw_parts(p, n).iter().all(|&b| b == t));
                            pool.free(p, n);
                        }
                    }
                });
            }
        });
        let s = pool.stats();
        assert_eq!(s.in_use_bytes, 0);
        assert_eq!(s.hits + s.misses, 8000);
        assert_eq!(s.cached_bytes, s.system_bytes);
    }

    #[test]
    fn parses_byte_counts() {
        assert_eq!(parse_bytes("1024"), Some(1024));
        assert_eq!(parse_bytes("64k"), Some(64 << 10));
        assert_eq!(parse_bytes("512M"), Some(512 << 20));
        assert_eq!(parse_bytes("2GiB"), Some(2 << 30));
        assert_eq!(parse_bytes("lots"), None);
    }
}
