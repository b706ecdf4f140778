//! Vector loads and stores in block-per-row kernels (softmax, layer_norm, rms_norm, their
//! backward): when the reduced dims are trailing and a row's length is a multiple of the
//! vector width, each thread takes `width` consecutive elements of the row at a time, reads
//! every input laid out along the row 16 bytes at a time (the activations, and weights
//! broadcast over the rows), and writes the full outputs 16 bytes at a time. Other loads
//! (strided, guarded) stay per element, from coordinates. Scalar 2-byte loads of a bf16 row
//! kept a layer_norm over 8192 x 768 at 4.5x the copy floor on an H100.
//!
//! Rows whose length is not a multiple of the width (a vocabulary of 50,257) start at
//! different alignments: such a row is *peeled*: its first `head` elements (up to the next
//! 16-byte boundary) and its last few are taken one at a time, the rest as vectors; only loads
//! laid out like the row itself (same alignment) are read as vectors then.
//!
//! Rows of at most `MAX_CACHED_VECTORS` vectors per thread keep the vectors that several
//! passes read (the activations of a layer_norm: mean, variance, output) in registers, as many
//! of those arrays as fit half a thread's share of the register file: the row is read from
//! memory once, not once per pass, and all of a thread's vectors are in flight at once. With
//! `peel_cache=1` (off: slower, see [`RowTuning::peel_cache`]) a peeled row (a vocabulary of
//! 50,257 in bf16: seven vectors a thread of a 1024-thread block) keeps its body's vectors
//! the same way, its head and tail being read per element.
//!
//! Rows run by one block each *stage* the arrays not kept in registers in dynamic shared
//! memory instead, where they fit the device's limit (unless `stage=0` in the row tuning):
//! before the first pass each thread copies its slots of the row with `cp.async` (sm_80 on),
//! so the whole row is in flight at once, and waits for its own copies; every pass then reads
//! the slots. Each thread reads back only the slots it copied (every pass walks the row with
//! the same stride), so no barrier is needed. Unstaged, the later passes re-read the row,
//! mostly from L2.

use crate::codegen::{coordinates, raw_type, Emitter};
use crate::plan::{Kernel, Level, NodeId, NodeKind, Operand};
use thunder_abi::DTypeCode;

/// How a row kernel vectorizes: the elements a thread takes at a time, and the loads read as
/// vectors.
#[derive(Debug, Clone, PartialEq)]
pub struct RowVector {
    pub width: u32,
    /// Full-level loads read along the row: (node, input, its offset's strides over the kept
    /// dims; the reduced dims are read contiguously).
    pub loads: Vec<(NodeId, usize, Vec<i64>)>,
    /// Rows are not all aligned: peel a scalar head and tail off each.
    pub peel: bool,
    /// Vectors per thread held in registers (0: none), and the loads held there.
    pub cache: u32,
    pub cached: Vec<NodeId>,
    /// Cached loads that only later passes read, loaded in the first pass (see
    /// [`Self::plan_prefetch`]).
    pub prefetch: Vec<NodeId>,
    /// Staged rows: each staged load with its byte offset in the stage (empty: not staged),
    /// and the whole stage's bytes.
    pub staged: Vec<(NodeId, u64)>,
    pub stage_bytes: u32,
    /// Blocks sharing a row (a cluster; 1: none), each staging its share of the slots (see
    /// [`Self::plan_cluster`]).
    pub cluster: u32,
    /// Whether the loads that differ from row to row are streamed (`__ldcs`: cached evict-first,
    /// so that they do not push out what every row reads, a layer_norm's weight and bias),
    /// unless a later kernel of the region reads the same tensor. Warp-per-row kernels only: on
    /// an H100 (`docs/gpu-wave/2026-11-27-s14`) bf16 layer_norm over 8192 x 768 went from 10.8
    /// to 10.0 µs forward and rms_norm from 10.6 to 9.9; a block per row over rows of 4096 went
    /// 2-3% slower, and a backward whose column kernel reads `x` and `dy` after the row kernel
    /// 13-15% slower when the row kernel streamed them.
    pub stream_loads: bool,
    /// Cached loads of a row run by one block whose next row is loaded while this one is
    /// reduced (see [`Self::plan_pipeline`]), and the row-invariant vector loads (a weight
    /// broadcast over the rows) loaded once, before the row loop.
    pub pipelined: Vec<NodeId>,
    pub hoisted: Vec<NodeId>,
}

/// The widest block whose rows [`RowVector::plan_pipeline`] pipelines.
const MAX_PIPELINED_BLOCK: u32 = 256;

/// Vectors a thread keeps in registers per cached load, and over all cached loads.
const MAX_CACHED_VECTORS: i64 = 8;
const MAX_CACHED_TOTAL: i64 = 16;

/// 32-bit registers a multiprocessor has for its resident threads (every GPU from sm_50 on).
const REGISTERS_PER_SM: u32 = 65536;

/// Registers a thread of a `block`-thread team may give to cached vectors: half of what a
/// thread of a full block may use (see [`RowVector::plan_cache`]).
fn cache_budget(block: u32) -> i64 {
    i64::from((REGISTERS_PER_SM / block.max(1)).min(255) / 2)
}

/// 32-bit registers one vector of `width` elements of kernel input `input` takes.
fn vector_words(k: &Kernel, input: usize, width: u32) -> i64 {
    (k.inputs[input].dtype.size_bytes() as i64 * i64::from(width) + 3) / 4
}

/// The C type one vector of `width` elements of kernel input `input` is loaded as.
fn vector_raw(k: &Kernel, input: usize, width: u32) -> &'static str {
    raw_type(k.inputs[input].dtype.size_bytes() * width as usize)
}

impl RowVector {
    /// A plan that keeps nothing between passes (until [`Self::plan_cache`] and
    /// [`Self::plan_stage`]).
    fn new(width: u32, loads: Vec<(NodeId, usize, Vec<i64>)>, peel: bool) -> RowVector {
        RowVector {
            width,
            loads,
            peel,
            cache: 0,
            cached: Vec::new(),
            prefetch: Vec::new(),
            staged: Vec::new(),
            stage_bytes: 0,
            cluster: 1,
            stream_loads: false,
            pipelined: Vec::new(),
            hoisted: Vec::new(),
        }
    }

    /// Forgets what the plan keeps in registers and shared memory (to plan them again).
    pub fn keep_nothing(&mut self) {
        *self = RowVector::new(self.width, std::mem::take(&mut self.loads), self.peel);
    }

    /// Holds in registers the vector loads `cached` (from [`Self::read_again`]), as many as
    /// fit (in load order), where rows of `cols` fit `block` threads' registers (the caller
    /// leaves split rows out). Cached vectors take at most half the registers a thread of a
    /// full block may use, so that a 1024-thread block (64 registers a thread) does not spill.
    pub fn plan_cache(&mut self, k: &Kernel, cols: i64, block: u32, cached: Vec<NodeId>) {
        let per_sweep = i64::from(block.max(1)) * i64::from(self.width);
        let vectors = (cols + per_sweep - 1) / per_sweep;
        if (self.peel && !tuning().peel_cache)
            || cached.is_empty()
            || vectors <= 0
            || vectors > MAX_CACHED_VECTORS
        {
            return;
        }
        let budget = cache_budget(block);
        let (mut words, mut kept) = (0i64, Vec::new());
        for (n, input, _) in &self.loads {
            if !cached.contains(n) {
                continue;
            }
            let need = vectors * vector_words(k, *input, self.width);
            if words + need <= budget && vectors * (kept.len() as i64 + 1) <= MAX_CACHED_TOTAL {
                words += need;
                kept.push(*n);
            }
        }
        if kept.is_empty() {
            return;
        }
        self.cache = vectors as u32;
        self.cached = kept;
    }

    /// In a cached row run by a warp, the vector loads that only passes after the first read (a
    /// layer_norm's weight and bias, read by its output pass) are loaded in the first pass with
    /// the row and kept in registers, as many as fit the cache's budget: their latency then
    /// overlaps the row's instead of following two reductions. On an H100
    /// (`docs/gpu-wave/2026-11-27-s14`) a bf16 layer_norm over 8192 x 768 went from 14.0 to
    /// 12.8 µs, rms_norm from 13.6 to 12.7 (a copy of the same bytes: 12.4). A block per row
    /// is left as it is: its rows of 4096 run at 40 registers, and prefetching there spilled.
    pub fn plan_prefetch(&mut self, k: &Kernel, passes: &[Vec<NodeId>], block: u32) {
        if self.cache == 0 || passes.len() < 2 || !tuning().prefetch {
            return;
        }
        let first = loads_of(k, &passes[0]);
        let later: Vec<NodeId> = passes[1..].iter().flat_map(|p| loads_of(k, p)).collect();
        let budget = cache_budget(block);
        let vectors = i64::from(self.cache);
        let width = self.width;
        let words_of = |input: usize| vectors * vector_words(k, input, width);
        let mut words: i64 = self
            .loads
            .iter()
            .filter(|(n, _, _)| self.cached.contains(n))
            .map(|(_, input, _)| words_of(*input))
            .sum();
        let mut kept = self.cached.len() as i64;
        for (n, input, _) in &self.loads {
            if self.cached.contains(n) || first.contains(n) || !later.contains(n) {
                continue;
            }
            if words + words_of(*input) <= budget && vectors * (kept + 1) <= MAX_CACHED_TOTAL {
                words += words_of(*input);
                kept += 1;
                self.cached.push(*n);
                self.prefetch.push(*n);
            }
        }
    }

    /// Stages the vector loads `candidates` (from [`Self::read_again`]) of a row of `cols`
    /// elements run by one block in shared memory, those not cached in registers, as many as
    /// fit `max_bytes` (in load order).
    pub fn plan_stage(&mut self, k: &Kernel, cols: i64, candidates: Vec<NodeId>, max_bytes: u32) {
        if !tuning().stage || candidates.is_empty() || cols <= 0 {
            return;
        }
        let Ok(slots) = u32::try_from((cols + i64::from(self.width) - 1) / i64::from(self.width))
        else {
            return;
        };
        let mut bytes = 0u64;
        let mut staged = Vec::new();
        for (n, input, _) in &self.loads {
            if !candidates.contains(n) || self.cached.contains(n) {
                continue;
            }
            let vector = (k.inputs[*input].dtype.size_bytes() * self.width as usize) as u64;
            let start = bytes.next_multiple_of(16);
            let end = start + vector * u64::from(slots);
            if end <= u64::from(max_bytes) {
                bytes = end;
                staged.push((*n, start));
            }
        }
        if staged.is_empty() {
            return;
        }
        self.staged = staged;
        self.stage_bytes = bytes as u32;
    }

    /// Shares each row between the blocks of a cluster (sm_90 on, `clusters`) where one
    /// block's `max_bytes` of shared memory cannot stage all of `candidates` (the re-read
    /// vector loads) but a share of the slots of each can: 2, 4 or 8 blocks, the fewest that
    /// fit. Each block stages and walks its share of the row's vectors, and the reductions
    /// combine the blocks' partials through distributed shared memory (`row_kernel`). Only
    /// for rows kept in no registers. An f32
    /// softmax gradient over rows of 50,257 stages both operands so instead of re-reading one
    /// from L2: 567 -> 440 µs on an H100 (`docs/gpu-wave/2026-11-27-s14`, the floor 409).
    pub fn plan_cluster(&mut self, k: &Kernel, cols: i64, candidates: &[NodeId], max_bytes: u32) {
        if !tuning().cluster
            || self.cache > 0
            || candidates.is_empty()
            || cols <= 0
            || candidates.iter().all(|n| self.is_staged(*n))
        {
            return;
        }
        let slots = (cols + i64::from(self.width) - 1) / i64::from(self.width);
        for cluster in [2u32, 4, 8] {
            let share = ((slots + i64::from(cluster) - 1) / i64::from(cluster)) as u64;
            let mut bytes = 0u64;
            let mut staged = Vec::new();
            for (n, input, _) in &self.loads {
                if !candidates.contains(n) {
                    continue;
                }
                let vector = (k.inputs[*input].dtype.size_bytes() * self.width as usize) as u64;
                let start = bytes.next_multiple_of(16);
                bytes = start + vector * share;
                staged.push((*n, start));
            }
            if bytes <= u64::from(max_bytes) {
                self.staged = staged;
                self.stage_bytes = bytes as u32;
                self.cluster = cluster;
                return;
            }
        }
    }

    /// Pipelines a cached row run by one block (`block` threads): the block takes rows in
    /// turn (a grid of a few blocks a multiprocessor, `Launch::PipelinedRows`), and loads its
    /// next row's cached vectors into registers while it reduces this one, so that the row's
    /// loads are in flight during the reductions' barriers instead of after them; the loads
    /// that are the same for every row (a layer_norm's weight and bias) are loaded once,
    /// before the row loop, instead of once a row after the reductions.
    ///
    /// Only where the H100 showed it pays (`docs/gpu-wave/2026-11-27-s15`): rows with a
    /// row-invariant vector load to hoist, one row array kept (a forward), blocks of at most
    /// 256 threads. There, bf16 layer_norm over 8192 x 4096 went from 52.0 to 48.6 µs (the
    /// row table) and from 54.2 to 51.2 in the kernel lab, over 8192 x 2048 29.5 -> 27.8,
    /// rms_norm 2048 28.0 -> 27.0. Without a weight (softmax: 48.2 -> 51.4), with two row
    /// arrays (the backwards: 69.8 -> 72.3 for rms_norm) or blocks of 512 (f32 rows of 4096:
    /// 183 -> 187-191) the smaller grid lost more than the pipeline won. Every cached load
    /// must be laid out like the rows (a row starting at `r * cols`) or be row-invariant, and
    /// the registers (this row's vectors, the next row's and the hoisted ones) fit the cache's
    /// budget.
    pub fn plan_pipeline(&mut self, k: &Kernel, block: u32) {
        if !tuning().pipeline
            || self.cache == 0
            || self.peel
            || !self.staged.is_empty()
            || self.cluster > 1
            || block > MAX_PIPELINED_BLOCK
        {
            return;
        }
        let kept = k.full_shape.len() - k.reduced.len();
        let row = contiguous(&k.full_shape)[..kept].to_vec();
        let vectors = i64::from(self.cache);
        let (mut pipelined, mut hoisted, mut words) = (Vec::new(), Vec::new(), 0i64);
        for (n, input, strides) in &self.loads {
            let need = vectors * vector_words(k, *input, self.width);
            if strides.iter().all(|&s| s == 0) {
                hoisted.push(*n);
                words += need;
            } else if self.cached.contains(n) {
                if *strides != row {
                    return;
                }
                pipelined.push(*n);
                words += 2 * need;
            }
        }
        if pipelined.len() != 1 || hoisted.is_empty() || words > cache_budget(block) {
            return;
        }
        self.cached.retain(|n| !hoisted.contains(n));
        self.pipelined = pipelined;
        self.hoisted = hoisted;
    }

    /// The vector loads that more than one of `passes` (each pass's roots) reads: those a
    /// cached or staged row keeps. None where rows are read once.
    pub fn read_again(&self, k: &Kernel, passes: &[Vec<NodeId>]) -> Vec<NodeId> {
        if passes.len() < 2 {
            return Vec::new();
        }
        let reads: Vec<Vec<NodeId>> = passes.iter().map(|p| loads_of(k, p)).collect();
        self.loads
            .iter()
            .map(|(n, _, _)| *n)
            .filter(|n| reads.iter().filter(|r| r.contains(n)).count() >= 2)
            .collect()
    }

    fn is_staged(&self, n: NodeId) -> bool {
        self.staged.iter().any(|(m, _)| *m == n)
    }

    /// A thread's walk over the vectors of a row with the team's stride: the first vector's
    /// column, where the vectors end, and where slot 0 starts (a peeled row's `head`).
    fn strided_walk(&self) -> (String, &'static str, &'static str) {
        let w = self.width;
        if self.cluster > 1 {
            (format!("lo + lane * {w}"), "hi", "lo")
        } else if self.peel {
            (format!("head + lane * {w}"), "body_end", "head")
        } else {
            (format!("lane * {w}"), "cols", "0")
        }
    }

    /// Declares the register arrays of the cached loads and the staged loads' places in
    /// shared memory, and copies the row's staged vectors there (row scope; a peeled row's
    /// `head` and `body_end` are defined).
    pub(crate) fn declare_cache(&self, em: &mut Emitter) {
        let k = em.k;
        em.cache_loaded.clear();
        if !self.staged.is_empty() {
            em.line("extern __shared__ __align__(16) unsigned char row_stage[];");
        }
        let mut copies = Vec::new();
        for (n, input, kept_strides) in &self.loads {
            let raw = vector_raw(k, *input, self.width);
            if let Some((_, at)) = self.staged.iter().find(|(m, _)| m == n) {
                em.line(&format!(
                    "{raw}* const stage_n{n} = reinterpret_cast<{raw}*>(row_stage + {at});"
                ));
                let row = row_start(em, kept_strides);
                copies.push(format!(
                    "stage_copy(&stage_n{n}[slot], reinterpret_cast<const {raw}*>(in{input} + {row} + c0));"
                ));
            } else if self.cached.contains(n) {
                em.line(&format!("{raw} cache_n{n}[{}];", self.cache));
            }
        }
        if !self.pipelined.is_empty() {
            self.load_next_row(em);
        }
        if copies.is_empty() {
            return;
        }
        let w = self.width;
        let (start, end, first) = self.strided_walk();
        em.line(&format!(
            "for (ix_t c0 = {start}; c0 < {end}; c0 += team * {w}) {{"
        ));
        em.indent += 1;
        em.line(&format!("const ix_t slot = (c0 - {first}) / {w};"));
        for c in &copies {
            em.line(c);
        }
        em.indent -= 1;
        em.line("}");
        em.line("stage_wait();");
    }
}

impl RowVector {
    /// The `it` loop over a thread's cached vectors of a row, `body` emitting each vector's
    /// statement (its column `c0` defined, inside the row).
    fn each_vector(&self, em: &mut Emitter, body: &dyn Fn(&mut Emitter)) {
        open_cached_vectors(em, self, "", None, "cols");
        body(em);
        em.indent -= 1;
        em.line("}");
        em.indent -= 1;
        em.line("}");
    }

    /// Before the row loop of a pipelined row (see [`Self::plan_pipeline`]): the hoisted
    /// loads, and the block's first row's pipelined vectors in `next_n<node>`.
    pub(crate) fn declare_pipeline(&self, em: &mut Emitter) {
        if self.pipelined.is_empty() {
            return;
        }
        let k = em.k;
        let mut loads = Vec::new();
        for (n, input, _) in &self.loads {
            let raw = vector_raw(k, *input, self.width);
            if self.hoisted.contains(n) {
                em.line(&format!("{raw} hoist_n{n}[{}];", self.cache));
                loads.push(format!(
                    "hoist_n{n}[it] = *reinterpret_cast<const {raw}*>(in{input} + c0);"
                ));
            } else if self.pipelined.contains(n) {
                em.line(&format!("{raw} next_n{n}[{}];", self.cache));
                loads.push(format!(
                    "if ((ix_t)blockIdx.x < rows) {}",
                    row_ahead_load(*n, *input, raw, "(ix_t)blockIdx.x")
                ));
            }
        }
        self.each_vector(em, &|em| {
            for l in &loads {
                em.line(l);
            }
        });
    }

    /// At the top of a pipelined row `r`: its vectors move from `next_n<node>` to the cache,
    /// and the block's next row's are loaded into `next_n<node>`.
    fn load_next_row(&self, em: &mut Emitter) {
        let k = em.k;
        let c = self.cache;
        let mut loads = Vec::new();
        for (n, input, _) in &self.loads {
            if !self.pipelined.contains(n) {
                continue;
            }
            let raw = vector_raw(k, *input, self.width);
            em.line("#pragma unroll");
            em.line(&format!(
                "for (int it = 0; it < {c}; ++it) cache_n{n}[it] = next_n{n}[it];"
            ));
            em.cache_loaded.insert(*n);
            loads.push(row_ahead_load(*n, *input, raw, "(r + (ix_t)gridDim.x)"));
        }
        em.line("if (r + (ix_t)gridDim.x < rows) {");
        em.indent += 1;
        self.each_vector(em, &|em| {
            for l in &loads {
                em.line(l);
            }
        });
        em.indent -= 1;
        em.line("}");
    }
}

/// Opens the `it` loop over a thread's cached vectors of a row and its guard (two levels):
/// each vector's column `c0` counted from `first`, then the line `extra` (if any), then
/// `if (c0 < end)`.
fn open_cached_vectors(
    em: &mut Emitter,
    v: &RowVector,
    first: &str,
    extra: Option<&str>,
    end: &str,
) {
    em.line("#pragma unroll");
    em.line(&format!("for (int it = 0; it < {}; ++it) {{", v.cache));
    em.indent += 1;
    em.line(&format!(
        "const ix_t c0 = {first}(lane + (ix_t)it * team) * {};",
        v.width
    ));
    if let Some(line) = extra {
        em.line(line);
    }
    em.line(&format!("if (c0 < {end}) {{"));
    em.indent += 1;
}

/// The statement loading pipelined load `n` (kernel input `input`, vectors of type `raw`) of
/// row `row` into `next_n<n>` (rows laid out contiguously, `cols` apart).
fn row_ahead_load(n: NodeId, input: usize, raw: &str, row: &str) -> String {
    format!("next_n{n}[it] = *reinterpret_cast<const {raw}*>(in{input} + {row} * cols + c0);")
}

/// The offset of the current row's start in a load with strides `kept_strides` over the kept
/// dims (the reduced dims are read contiguously).
fn row_start(em: &Emitter, kept_strides: &[i64]) -> String {
    let mut strides = kept_strides.to_vec();
    strides.extend(std::iter::repeat_n(0, em.k.reduced.len()));
    em.offset(Level::Full, 0, &strides)
}

/// Copies into shared memory for staged rows: from sm_80 on, `cp.async` (issued without
/// waiting, bypassing L1 for 16-byte vectors), and `stage_wait` waits for the calling
/// thread's copies; before sm_80 (and in the CPU harness) a plain load and store.
pub const STAGE_COPY: &str = r#"template <typename T> __device__ __forceinline__ void stage_copy(T* dst, const T* src) {
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
"#;

/// Strides of a row-major `shape`.
fn contiguous(shape: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1].max(1);
    }
    s
}

/// The vector plan of a block-per-row kernel `k` over rows of `cols` elements, if any.
pub fn plan(k: &Kernel, cols: i64) -> Option<RowVector> {
    if !k.reduces_trailing() || cols <= 0 {
        return None;
    }
    let nd = k.full_shape.len();
    let reduced_shape: Vec<i64> = k.reduced.iter().map(|&d| k.full_shape[d]).collect();
    let reduced_contiguous = contiguous(&reduced_shape);
    let kept = nd - k.reduced.len();
    let mut candidates = Vec::new();
    let mut widest = 0usize;
    for (i, n) in k.nodes.iter().enumerate() {
        if n.level != Level::Full {
            continue;
        }
        if let NodeKind::Load {
            input,
            base: 0,
            strides,
            guard: None,
        } = &n.kind
        {
            if strides.len() == nd && strides[kept..] == reduced_contiguous[..] {
                candidates.push((i, *input, strides[..kept].to_vec()));
                widest = widest.max(k.inputs[*input].dtype.size_bytes());
            }
        }
    }
    for o in &k.outputs {
        let n = &k.nodes[o.node];
        if n.level == Level::Full {
            widest = widest.max(n.dtype.size_bytes());
        }
    }
    if widest == 0 {
        return None;
    }
    let width = (16 / widest) as i64;
    if width <= 1 {
        return None;
    }
    if cols % width == 0 {
        // A row's vectors start 16-byte aligned only where every kept stride is a multiple
        // of the width (the tensors themselves are 16-byte aligned).
        let loads: Vec<_> = candidates
            .into_iter()
            .filter(|(_, _, s)| s.iter().all(|&x| x % width == 0))
            .collect();
        return Some(RowVector::new(width as u32, loads, false));
    }
    // Peeled rows: vector loads only where the row starts where the output's row does.
    let row_strides = contiguous(&k.full_shape)[..kept].to_vec();
    let loads: Vec<_> = candidates
        .into_iter()
        .filter(|(_, _, s)| *s == row_strides)
        .collect();
    if loads.is_empty() || cols < 4 * width {
        return None;
    }
    Some(RowVector::new(width as u32, loads, true))
}

/// The row layout's tuning, fixed by GPU sweeps (`scripts/gpu/rows_sweep.sh`), which set
/// `THUNDER_CUDA_FUSER_ROWS` (`vectors=4,warp_rows=4,warp_lanes=32,unroll=0,grid=131072,
/// min_blocks=0,block_min_blocks=12,stage=1,stage_block=0,stage_kib=0,stage_unroll=0,
/// peel_cache=0,fast_math=1,wide_index=0,prefetch=1,cluster=1,stream=0,block_vectors=2,
/// pipeline=1,pipeline_per_sm=8`;
/// unnamed keys keep their defaults). Read
/// once per process; not a user setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RowTuning {
    /// Vector loads a thread of a vectorized row kernel aims to hold over all the arrays it
    /// keeps (a cached row keeps them in registers; otherwise they are loop trips), and never
    /// fewer than [`MIN_VECTORS_PER_ARRAY`] per array: one 16-byte load per thread between two
    /// reductions left a bf16 layer_norm over 8192 x 768 at 2.3x the copy floor on an H200
    /// (too few bytes in flight per SM). In the H200 sweep (`docs/gpu-wave/2026-11-26-s6`),
    /// four per thread beat two on forwards (one array kept), and two per array beat four on
    /// five of six backwards (two kept: the activation and its gradient).
    pub vectors_per_thread: i64,
    /// Warps a block of warp-sized (or smaller) teams holds; 0: no such teams.
    pub warp_rows: u32,
    /// Lanes of a warp that share a row (32, 16 or 8): a warp holds 32 / lanes rows.
    pub warp_lanes: u32,
    /// Unrolling of the vector loop of uncached rows; 0 or 1: none. Unrolling by 4 slowed
    /// five of six vocabulary-row kernels by 15-30% in the H200 sweep.
    pub unroll: u32,
    /// Threads a row kernel's grid keeps at least (about what a large GPU holds resident): a
    /// team is made narrower than its row's vectors only while the rows still fill the GPU.
    pub grid_threads: i64,
    /// Blocks a multiprocessor should hold of a warp-per-row kernel (`__launch_bounds__`'s
    /// second argument, which caps registers to fit them); 0: no bound.
    pub warp_min_blocks: u32,
    /// The same for kernels of a block per row, where the block is small enough (at most
    /// 2,048 threads a multiprocessor). 12 (registers capped at 40 for blocks of 128): bf16
    /// rows of 4096 on an H100 (`docs/gpu-wave/2026-11-26-s8`), layer_norm 55.8 -> 53.7 µs
    /// forward, rms_norm 51.5 -> 49.5, softmax 51.1 -> 49.9; at 8 warps a multiprocessor
    /// (64 registers) they were bound by latency.
    pub block_min_blocks: u32,
    /// The widest block of a staged kernel (a row still takes one block); 0: by the vector
    /// width ([`stage_block`]).
    pub stage_block: u32,
    /// The most shared memory a staged row takes, KiB (0: the device's limit per block); the
    /// arrays past it are read again from memory (L2).
    pub stage_kib: u32,
    /// Whether rows too long for registers are staged in shared memory. When the first pass
    /// read the row into the stage one vector at a time, staging was no faster on an H200
    /// (`docs/gpu-wave/2026-11-26-s7`): each thread had one 16-byte load in flight. Copied
    /// with `cp.async` before the first pass (the whole row in flight), it is, on an H100
    /// (`docs/gpu-wave/2026-11-26-s8`): log_softmax over bf16 vocabulary rows 398 -> 310 µs
    /// forward, softmax over f32 ones 545 -> 315 forward and 704 -> 588 backward.
    pub stage: bool,
    /// Unrolling of the vector loop of staged rows; 0 or 1: none (4 was slower on an H200).
    pub stage_unroll: u32,
    /// Whether peeled rows (not a multiple of the vector width: a vocabulary) keep their
    /// vectors in registers like aligned rows. Off: on an H100 a bf16 vocabulary softmax
    /// kept that way took 616 µs forward against 402 staged (`docs/gpu-wave/2026-11-26-s8`).
    pub peel_cache: bool,
    /// Fast f32 `exp` and row division in row kernels whose outputs are all f16/bf16 (see
    /// `codegen::fast_math_for`). On an H200: bf16 softmax over vocabulary rows 396 -> 352
    /// µs, over rows of 4096 62.0 -> 59.3, log_softmax's backward 405 -> 370.
    pub fast_math: bool,
    /// 64-bit offsets in every kernel, even where 32 bits hold them (see
    /// `codegen::index_typedef`); for A/B sweeps.
    pub wide_index: bool,
    /// Whether warp-per-row kernels load what later passes read in the first (see
    /// [`RowVector::plan_prefetch`]).
    pub prefetch: bool,
    /// Whether rows may be shared by a cluster of blocks (see [`RowVector::plan_cluster`]).
    pub cluster: bool,
    /// What [`Self::vectors_per_thread`] is for a block per row (a warp per row keeps that).
    /// 2: on an H100 with 32-bit offsets (`docs/gpu-wave/2026-11-27-s14/sweep_block_vectors`,
    /// two runs of each), bf16 rms_norm over 8192 x 4096 went from 49.4-49.5 to 48.0-48.1 µs
    /// forward and softmax from 49.5-49.8 to 47.8-48.0 (blocks of 256, not 128); layer_norm,
    /// the backwards (two arrays: two a thread already) and the f32 rows did not move.
    pub block_vectors_per_thread: i64,
    /// Whether warp-per-row kernels stream their row loads (see [`RowVector::stream_loads`]).
    /// Off: on an H100 (`docs/gpu-wave/2026-11-27-s14/sweep_stream_0c59584`) it took bf16
    /// layer_norm over 8192 x 768 from 10.9 to 10.2 µs forward but its backward from 12.7 to
    /// 14.9, which reads the forward's input again from L2 in that benchmark (the rule below
    /// only sees later kernels of the same region); the GPT-2 block did not move (1.286 ms).
    pub stream: bool,
    /// Whether cached rows run by one block are pipelined (see [`RowVector::plan_pipeline`]),
    /// and the blocks a multiprocessor such a kernel's grid has.
    pub pipeline: bool,
    pub pipeline_per_sm: u32,
}

/// Vectors a thread holds per kept array at least (see `vectors_per_thread`).
const MIN_VECTORS_PER_ARRAY: i64 = 2;

const DEFAULT_TUNING: RowTuning = RowTuning {
    vectors_per_thread: 4,
    warp_rows: 4,
    warp_lanes: 32,
    unroll: 0,
    grid_threads: 1 << 17,
    warp_min_blocks: 0,
    block_min_blocks: 12,
    stage_block: 0,
    stage_kib: 0,
    stage: true,
    stage_unroll: 0,
    peel_cache: false,
    fast_math: true,
    wide_index: false,
    prefetch: true,
    cluster: true,
    block_vectors_per_thread: 2,
    stream: false,
    pipeline: true,
    pipeline_per_sm: 8,
};

impl RowTuning {
    fn parse(text: &str) -> RowTuning {
        let mut t = DEFAULT_TUNING;
        // A sweep's own variable: a malformed or unknown entry keeps the default.
        for (key, value) in text.split(',').filter_map(|kv| kv.split_once('=')) {
            let Ok(v) = value.trim().parse::<i64>() else {
                continue;
            };
            match key.trim() {
                // Both kinds of team; `block_vectors` (after it) sets a block's alone.
                "vectors" => {
                    t.vectors_per_thread = v.max(1);
                    t.block_vectors_per_thread = v.max(1);
                }
                "warp_rows" => t.warp_rows = u32::try_from(v.clamp(0, 32)).unwrap_or(4),
                "warp_lanes" => {
                    if matches!(v, 8 | 16 | 32) {
                        t.warp_lanes = v as u32;
                    }
                }
                "unroll" => t.unroll = u32::try_from(v.clamp(0, 16)).unwrap_or(4),
                "grid" => t.grid_threads = v.max(1),
                "min_blocks" => t.warp_min_blocks = u32::try_from(v.clamp(0, 32)).unwrap_or(0),
                "block_min_blocks" => {
                    t.block_min_blocks = u32::try_from(v.clamp(0, 32)).unwrap_or(0)
                }
                "stage_kib" => t.stage_kib = u32::try_from(v.clamp(0, 1 << 20)).unwrap_or(0),
                "stage_block" => t.stage_block = u32::try_from(v.clamp(0, 1024)).unwrap_or(0),
                "stage" => t.stage = v != 0,
                "fast_math" => t.fast_math = v != 0,
                "wide_index" => t.wide_index = v != 0,
                "prefetch" => t.prefetch = v != 0,
                "cluster" => t.cluster = v != 0,
                "stream" => t.stream = v != 0,
                "pipeline" => t.pipeline = v != 0,
                "pipeline_per_sm" => t.pipeline_per_sm = u32::try_from(v.clamp(1, 32)).unwrap_or(8),
                "block_vectors" => t.block_vectors_per_thread = v.max(1),
                "peel_cache" => t.peel_cache = v != 0,
                "stage_unroll" => t.stage_unroll = u32::try_from(v.clamp(0, 16)).unwrap_or(0),
                _ => {}
            }
        }
        t
    }
}

/// The widest block of a staged kernel whose vectors hold `width` elements. On an H100
/// (`docs/gpu-wave/2026-11-26-s8`), 512 threads against 1024: bf16 vocabulary softmax 403 ->
/// 294 µs forward and 542 -> 428 backward, log_softmax 311 -> 288 forward; but f32 softmax
/// 315 -> 328 forward and 587 -> 676 backward, log_softmax 434 -> 503 backward (its forward
/// alone went 417 -> 297). Half-type rows take 512, f32 rows 1024.
pub(crate) fn stage_block(width: u32) -> u32 {
    match tuning().stage_block {
        0 if width >= 8 => 512,
        0 => 1024,
        b => b.max(32),
    }
}

pub(crate) fn tuning() -> RowTuning {
    static TUNING: std::sync::OnceLock<RowTuning> = std::sync::OnceLock::new();
    *TUNING.get_or_init(|| {
        std::env::var("THUNDER_CUDA_FUSER_ROWS")
            .map(|s| RowTuning::parse(&s))
            .unwrap_or(DEFAULT_TUNING)
    })
}

/// How the threads of a vectorized row kernel share the rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowTeam {
    /// `lanes` lanes of a warp per row (32: a warp per row), `rows_per_block` rows a block:
    /// the row's partials combine through shuffles alone, with no block barrier.
    Warp { rows_per_block: u32, lanes: u32 },
    /// A block of `block` threads per row.
    Block { block: u32 },
}

/// The team of a row kernel over `rows` rows of `cols` elements read `width` at a time, with
/// at most `block` threads a row and `arrays` vector loads kept over passes: about
/// `vectors_per_thread` vectors per thread over those arrays where the rows fill the GPU,
/// whole warps, and a warp per row where one holds the row at `vectors_per_thread` a lane.
pub fn team_for(block: u32, rows: i64, cols: i64, width: u32, arrays: usize) -> RowTeam {
    team_with(tuning(), block, rows, cols, width, arrays)
}

fn team_with(t: RowTuning, block: u32, rows: i64, cols: i64, width: u32, arrays: usize) -> RowTeam {
    let w = i64::from(width.max(1));
    let vectors = ((cols.max(0) + w - 1) / w).max(1);
    if t.warp_rows > 0
        && rows >= i64::from(t.warp_rows)
        && vectors <= 32 * t.vectors_per_thread
        && 32 * rows >= t.grid_threads
    {
        return RowTeam::Warp {
            rows_per_block: t.warp_rows * (32 / t.warp_lanes.clamp(8, 32)),
            lanes: t.warp_lanes.clamp(8, 32),
        };
    }
    let arrays = i64::try_from(arrays.max(1)).unwrap_or(1);
    let aim = t.block_vectors_per_thread;
    let per_thread = (aim / arrays).max(MIN_VECTORS_PER_ARRAY.min(aim));
    let mut threads = (vectors + per_thread - 1) / per_thread;
    while threads < vectors && threads.saturating_mul(rows.max(1)) < t.grid_threads {
        threads *= 2;
    }
    let warps = ((threads.min(vectors) + 31) / 32).max(1);
    RowTeam::Block {
        block: block.min(u32::try_from(warps * 32).unwrap_or(block)),
    }
}

/// The full-level loads that the values `roots` read (not through row values, which are
/// defined already).
pub(crate) fn loads_of(k: &Kernel, roots: &[NodeId]) -> Vec<NodeId> {
    let mut seen = vec![false; k.nodes.len()];
    let mut stack: Vec<NodeId> = roots.to_vec();
    let mut loads = Vec::new();
    while let Some(n) = stack.pop() {
        if n >= seen.len() || seen[n] {
            continue;
        }
        seen[n] = true;
        let node = &k.nodes[n];
        if node.level != Level::Full {
            continue;
        }
        let ops: Vec<&Operand> = match &node.kind {
            NodeKind::Load { .. } => {
                loads.push(n);
                vec![]
            }
            NodeKind::Unary(_, a) | NodeKind::Convert(a) => vec![a],
            NodeKind::Binary(_, a, b) => vec![a, b],
            NodeKind::Where(p, a, b) => vec![p, a, b],
            NodeKind::Iota { .. } | NodeKind::InBounds(_) | NodeKind::Reduce { .. } => vec![],
        };
        for o in ops {
            if let Operand::Node(m) = o {
                stack.push(*m);
            }
        }
    }
    loads.sort_unstable();
    loads
}

fn storage_of(d: DTypeCode) -> &'static str {
    crate::c_types::storage(d)
}

/// Opens the vector loop over a row for the values `roots`: the vector loads they need,
/// staging arrays for `outputs` (parameter index, node), then the per-element loop with the
/// element's coordinates and flat index `e`. Returns the loops opened (for [`close`]).
pub(crate) fn open(
    em: &mut Emitter,
    v: &RowVector,
    roots: &[NodeId],
    outputs: &[(usize, NodeId)],
) -> usize {
    let k = em.k;
    let w = v.width;
    let nest = if v.cache > 0 {
        let (first, end) = if v.peel {
            ("head + ", "body_end")
        } else {
            ("", "cols")
        };
        let slot = (!v.staged.is_empty()).then_some("const ix_t slot = lane + (ix_t)it * team;");
        open_cached_vectors(em, v, first, slot, end);
        3
    } else {
        let (start, end, first) = v.strided_walk();
        // Several vector loads in flight per thread (a row of 50,257 is six trips of a
        // 1024-thread block).
        let unroll = if v.staged.is_empty() {
            tuning().unroll
        } else {
            tuning().stage_unroll
        };
        if unroll > 1 {
            em.line(&format!("#pragma unroll {unroll}"));
        }
        em.line(&format!(
            "for (ix_t c0 = {start}; c0 < {end}; c0 += team * {w}) {{"
        ));
        em.indent += 1;
        if !v.staged.is_empty() {
            em.line(&format!("const ix_t slot = (c0 - {first}) / {w};"));
        }
        2
    };
    em.defined.clear();
    em.vector_nodes.clear();
    let needed = loads_of(k, roots);
    for (n, input, kept_strides) in &v.loads {
        let d = k.inputs[*input].dtype;
        let raw = vector_raw(k, *input, w);
        if !needed.contains(n) {
            if v.prefetch.contains(n) && !em.cache_loaded.contains(n) {
                let row = row_start(em, kept_strides);
                em.line(&format!(
                    "cache_n{n}[it] = *reinterpret_cast<const {raw}*>(in{input} + {row} + c0);"
                ));
                // Marked loaded when this pass closes.
                em.vector_nodes.insert(*n, format!("e_n{n}[j]"));
            }
            continue;
        }
        if v.is_staged(*n) {
            em.line(&format!("const {raw} r_n{n} = stage_n{n}[slot];"));
        } else if v.hoisted.contains(n) {
            em.line(&format!("const {raw} r_n{n} = hoist_n{n}[it];"));
        } else if v.cached.contains(n) && em.cache_loaded.contains(n) {
            em.line(&format!("const {raw} r_n{n} = cache_n{n}[it];"));
        } else {
            let row = row_start(em, kept_strides);
            let at = format!("reinterpret_cast<const {raw}*>(in{input} + {row} + c0)");
            if v.stream_loads
                && kept_strides.iter().any(|&s| s != 0)
                && !k.inputs[*input].read_later
            {
                em.line(&format!("const {raw} r_n{n} = __ldcs({at});"));
            } else {
                em.line(&format!("const {raw} r_n{n} = *{at};"));
            }
            if v.cached.contains(n) {
                em.line(&format!("cache_n{n}[it] = r_n{n};"));
            }
        }
        let st = storage_of(d);
        em.line(&format!(
            "const {st}* e_n{n} = reinterpret_cast<const {st}*>(&r_n{n});"
        ));
        em.vector_nodes.insert(*n, format!("e_n{n}[j]"));
    }
    for &(i, n) in outputs {
        let st = storage_of(k.nodes[n].dtype);
        em.line(&format!("__align__(16) {st} s_out{i}[{w}];"));
    }
    em.line("#pragma unroll");
    em.line(&format!("for (int j = 0; j < {w}; ++j) {{"));
    em.indent += 1;
    em.line("const ix_t c = c0 + j;");
    for l in coordinates(k, &k.reduced, "c") {
        em.line(&l);
    }
    let full = contiguous(&k.full_shape);
    let e = em.offset(Level::Full, 0, &full);
    em.line(&format!("const ix_t e = {e};"));
    nest
}

/// The row-scope values of a peeled row `r`: the elements before its first 16-byte boundary
/// (`head`) and where its last whole vector ends (`body_end`).
pub(crate) fn peel_bounds(em: &mut Emitter, v: &RowVector) {
    let w = v.width;
    em.line(&format!(
        "const ix_t head_ = ({w} - (r * cols) % {w}) % {w}, head = head_ < cols ? head_ : cols;"
    ));
    em.line(&format!(
        "const ix_t body_end = head + (cols - head) / {w} * {w};"
    ));
}

/// The row-scope bounds of this block's share of a row shared by a cluster (after
/// [`peel_bounds`]): its vectors `[lo, hi)` (the row's vectors cut in `cluster` runs, one a
/// rank, in rank order), and, for a peeled row, the scalar head and tail (`[0, head_mine)`,
/// `[tail_from, cols)`), which rank 0 takes.
pub(crate) fn cluster_bounds(em: &mut Emitter, v: &RowVector) {
    let w = v.width;
    let (first, end) = if v.peel {
        ("head", "body_end")
    } else {
        ("0", "cols")
    };
    em.line(&format!(
        "const ix_t share = (({end} - {first}) / {w} + {c} - 1) / {c}, lo = {first} + rank * share * {w}, hi_ = lo + share * {w}, hi = hi_ < {end} ? hi_ : {end};",
        c = v.cluster
    ));
    if v.peel {
        em.line(
            "const ix_t head_mine = rank == 0 ? head : 0, tail_from = rank == 0 ? body_end : cols;",
        );
    }
}

/// Device functions of a kernel whose rows a cluster of blocks shares (sm_90 on; the other
/// branch calls hooks that `scripts/golden_cpu_run.py` defines to run the kernel on the CPU,
/// and the syntax check declares): the block's rank in the cluster, a barrier over the
/// cluster's threads that orders their shared-memory writes before the reads after it, and a
/// read of another block's shared memory.
pub const CLUSTER: &str = r#"__device__ __forceinline__ unsigned cluster_rank() {
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
"#;

/// Closes what [`open`] opened (`nest` loops) back to indent `depth`, storing the staged
/// `outputs` 16 bytes at a time after the per-element loop. With `nest == 1` (a scalar loop
/// from `open_column_loop`) it only closes that loop.
pub(crate) fn close(
    em: &mut Emitter,
    nest: usize,
    depth: usize,
    width: u32,
    outputs: &[(usize, NodeId)],
) {
    if nest >= 2 {
        em.indent = depth + nest - 1;
        em.line("}");
        let k = em.k;
        for &(i, n) in outputs {
            // Inside the vector loop: the row's flat start is r * cols (trailing reduced dims).
            let raw = raw_type(k.nodes[n].dtype.size_bytes() * width as usize);
            em.line(&format!(
                "*reinterpret_cast<{raw}*>(out{i} + r * cols + c0) = *reinterpret_cast<const {raw}*>(s_out{i});"
            ));
        }
        // Cached loads read in this pass come from registers from now on.
        let read: Vec<NodeId> = em.vector_nodes.keys().copied().collect();
        em.cache_loaded.extend(read);
        em.vector_nodes.clear();
        if nest == 3 {
            em.indent = depth + 1;
            em.line("}");
        }
    }
    em.indent = depth;
    em.line("}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn teams_hold_a_few_vectors_a_thread_while_the_rows_fill_the_gpu() {
        // GPT-2's bf16 rows of 768 (96 vectors): a warp each, four vectors a lane.
        assert_eq!(
            team_for(256, 8192, 768, 8, 1),
            RowTeam::Warp {
                rows_per_block: 4,
                lanes: 32
            }
        );
        // 512 and 1024 vectors a row, a block each: two a thread.
        assert_eq!(
            team_for(512, 8192, 4096, 8, 1),
            RowTeam::Block { block: 256 }
        );
        assert_eq!(
            team_for(512, 16384, 4096, 4, 1),
            RowTeam::Block { block: 512 }
        );
        // A backward keeps two arrays (activation and gradient): two vectors of each.
        assert_eq!(
            team_for(512, 8192, 4096, 8, 2),
            RowTeam::Block { block: 256 }
        );
        assert_eq!(
            team_for(512, 16384, 4096, 4, 2),
            RowTeam::Block { block: 512 }
        );
        // A warp per row holds rows of up to 128 vectors, whatever it keeps.
        assert_eq!(
            team_for(256, 8192, 768, 8, 2),
            RowTeam::Warp {
                rows_per_block: 4,
                lanes: 32
            }
        );
        // A vocabulary row keeps the widest block it is given.
        assert_eq!(
            team_for(1024, 4096, 50257, 8, 0),
            RowTeam::Block { block: 1024 }
        );
    }

    #[test]
    fn the_tuning_reads_its_keys_and_keeps_defaults_for_the_rest() {
        let t = RowTuning::parse("vectors=2, warp_rows=0,bogus=1,grid=x");
        assert_eq!(t.vectors_per_thread, 2);
        assert_eq!(t.warp_rows, 0);
        assert_eq!(t.unroll, DEFAULT_TUNING.unroll);
        assert_eq!(t.grid_threads, DEFAULT_TUNING.grid_threads);
        assert_eq!(RowTuning::parse("unroll=4").unroll, 4);
        assert_eq!(RowTuning::parse("stage_unroll=2").stage_unroll, 2);
        assert!(!RowTuning::parse("stage=0").stage);
        assert!(RowTuning::parse("peel_cache=1").peel_cache);
        assert_eq!(RowTuning::parse("stage_block=512").stage_block, 512);
        assert_eq!(RowTuning::parse("stage_kib=110").stage_kib, 110);
        assert_eq!(RowTuning::parse("block_min_blocks=12").block_min_blocks, 12);
        assert!(!RowTuning::parse("fast_math=0").fast_math);
        let t2 = RowTuning::parse("vectors=8,block_vectors=2");
        assert_eq!((t2.vectors_per_thread, t2.block_vectors_per_thread), (8, 2));
        assert_eq!(
            team_with(t2, 512, 8192, 4096, 8, 1),
            RowTeam::Block { block: 256 }
        );
        // One vector a thread and no warp teams: the layout before the tuning (a block as
        // wide as the row's vectors), which sweeps keep as their baseline.
        let old = RowTuning::parse("vectors=1,warp_rows=0");
        assert_eq!(
            team_with(old, 256, 8192, 768, 8, 1),
            RowTeam::Block { block: 96 }
        );
        assert_eq!(
            team_with(old, 512, 8192, 4096, 8, 2),
            RowTeam::Block { block: 512 }
        );
        // Half-warp teams: eight rows a block of four warps.
        let half = RowTuning::parse("warp_lanes=16");
        assert_eq!(
            team_with(half, 256, 8192, 768, 8, 1),
            RowTeam::Warp {
                rows_per_block: 8,
                lanes: 16
            }
        );
        assert_eq!(RowTuning::parse("warp_lanes=12").warp_lanes, 32);
        // No warp teams when warp_rows is 0.
        assert_eq!(
            team_with(t, 256, 8192, 768, 8, 1),
            RowTeam::Block { block: 64 }
        );
    }

    #[test]
    fn few_rows_keep_wide_teams() {
        // 8 rows of 96 vectors: a vector a thread, so the GPU still gets 768 threads.
        assert_eq!(team_for(256, 8, 768, 8, 1), RowTeam::Block { block: 96 });
        assert_eq!(team_for(512, 64, 4096, 4, 1), RowTeam::Block { block: 512 });
        // Fewer rows than a block of warps holds: a block per row.
        assert_eq!(team_for(256, 2, 64, 4, 1), RowTeam::Block { block: 32 });
        // Empty rows still get a thread team.
        assert_eq!(team_for(256, 0, 0, 8, 0), RowTeam::Block { block: 32 });
    }
}
