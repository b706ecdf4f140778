//! Running one planned GEMM stage: the batch loop, and each large product spread over the
//! threads as independent panels.
//!
//! Threading: a product big enough to share is cut into one panel of output rows (or
//! columns) per rayon thread, and each panel is its own single-threaded call of the `gemm`
//! crate. The crate's own threading (`Parallelism::Rayon`) meets at a barrier for every
//! `kc` slice of the depth and every packed block of the right operand; panels share nothing
//! but the operands they read, so the only costs are one join and the packing of the operand
//! all panels read, once per panel (the cheaper one to pack is repeated: see
//! [`split_rows`]). On the 2-core AVX-512 Xeon (real-time priority, so the numbers are the
//! machine's, 100 us of other work between calls as in a training step): 256x256x1024 with a
//! transposed weight 275 GFLOP/s against the crate's 236, 1024x256x256 with a transposed
//! input 279 against 252, 256x1024x256 205 against 193, the rest within a few percent
//! (sgemm 2048: 359 against 354; one thread 177).
//!
//! Medium products ([`TEAM_MIN`] to [`PAR_MIN`]) are cut the same way but run on the spinning
//! team of `team.rs`, not rayon: waking a parked rayon worker costs tens of microseconds on
//! that machine, so a 256x128x128 product (about 45 us on one thread) took 80-100 us on two
//! through rayon. The smallest stay on the calling thread.
use crate::decode::Ty;
use crate::exec::Bufs;
use crate::gemm_epi::EpiRun;
use crate::ops::Real;
use crate::stages::GemmPlan;
use gemm::Parallelism;
use rayon::prelude::*;

/// Below this many multiply-adds (about 90 us on one core) a product runs on the calling
/// thread: waking the workers and joining them costs more than the second core saves. On the
/// Xeon above, 256x256x128 (2^23) ran at 153 GFLOP/s on two threads against 166 on one, and
/// 256x256x256 (2^24) at 187-189 against 160.
pub(crate) const PAR_MIN: usize = 1 << 24;

/// From this many multiply-adds (a few microseconds on one core) up to [`PAR_MIN`] a product
/// is cut into panels for the spinning team (`team.rs`), whose hand-off costs about a
/// microsecond when the helper is awake, and at worst the caller runs every panel itself.
/// 2^18 rather than 2^20 took the MLP step's three 256x128x10-sized products onto the team:
/// median 279 -> 273 us over 4 interleaved runs (chrt).
const TEAM_MIN: usize = 1 << 18;
const TEAM_PANEL_MIN: usize = 1 << 17;

/// A panel gets at least this many multiply-adds; a product gets fewer panels than threads
/// rather than smaller ones.
const PANEL_MIN: usize = 1 << 23;

/// A panel of a one-row product (`gemv.rs`) gets at least this many elements of the right
/// operand (1 MB): about 70 us of streaming from memory.
const GEMV_PANEL_MIN: usize = 1 << 18;

/// Panel edges along the output's rows and columns are multiples of these (the crate's f32
/// AVX-512 microkernel is 64 output columns by 6 rows, AVX2's 16 by 6 or 24 by 4), so only the
/// last panel has a ragged edge.
const COL_ALIGN: usize = 64;
const ROW_ALIGN: usize = 24;

/// A strided matrix view: element `(i, j)` is at `ptr + i * rs + j * cs`.
#[derive(Clone, Copy)]
pub(crate) struct View<T> {
    pub(crate) ptr: *const T,
    pub(crate) rs: isize,
    pub(crate) cs: isize,
}

/// One product `dst[m, n] (=|+=) a[m, k] @ b[k, n]` with a row-major `dst` of row stride
/// `ld`.
#[derive(Clone, Copy)]
pub(crate) struct Product<T> {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: View<T>,
    pub(crate) b: View<T>,
    pub(crate) dst: *mut T,
    pub(crate) ld: isize,
    /// Add to `dst` instead of overwriting it.
    pub(crate) read_dst: bool,
    /// `b` kept packed (a static f32 weight, `prepack.rs`): the product runs on it.
    pub(crate) packed: Option<crate::prepack::PackedCols>,
}

// SAFETY: a product is handed to threads only as disjoint panels of `dst` (see `Product::run`),
// and the operands are only read.
unsafe impl<T> Send for Product<T> {}
unsafe impl<T> Sync for Product<T> {}

// `Real` (f32 or f64) is what `gemm::gemm` is called with here: it takes `alpha` and `beta`
// as values of `T`.
impl<T: Real> Product<T> {
    /// The single-threaded `gemm` call.
    ///
    /// # Safety
    /// The views address `m x k` and `k x n` readable elements and `dst` `m x n` writable
    /// ones that no other thread touches meanwhile.
    #[cfg(test)]
    pub(crate) unsafe fn run_serial(&self) {
        // SAFETY: forwarded from the caller.
        unsafe { self.run_serial_in(true) }
    }

    /// [`Product::run_serial`], on the streaming kernel only when `stream` (the whole product
    /// this one is a panel of took it) and it takes this panel. A product of 1,024 rows cut
    /// into two row panels of 512 is no stream: MiniLM (B8 S128) ran 62.2-63.6 ms a call
    /// with such panels streamed against 59.1-60.1 without (AMD EPYC Zen 5, 2 threads).
    ///
    /// # Safety
    /// As for [`Product::run_serial`].
    pub(crate) unsafe fn run_serial_in(&self, stream: bool) {
        if self.m == 0 || self.n == 0 {
            return;
        }
        if let Some(p) = self.streamed().filter(|_| stream) {
            // SAFETY: forwarded from the caller; `streamed` checked that the kernel applies.
            return unsafe {
                crate::gemm_stream::gemm(
                    (p.m, p.n, p.k),
                    p.a,
                    p.b.ptr,
                    p.b.rs,
                    p.dst,
                    p.ld,
                    p.read_dst,
                )
            };
        }
        #[cfg(target_arch = "x86_64")]
        if let (Some(w), Some(p)) = (self.packed, self.as_f32()) {
            // SAFETY: forwarded from the caller; `packed` is set only on f32 products whose
            // weight `prepack::applies` took, from a packing the stage holds while it runs.
            return unsafe {
                crate::prepack::gemm((p.m, p.n, p.k), p.a, w, p.dst, p.ld, p.read_dst)
            };
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(p) = self.as_f32().filter(|p| crate::gemv::takes(p.m, &p.b)) {
            // SAFETY: forwarded from the caller; `takes` checked the CPU and the layout.
            return unsafe { crate::gemv::gemv((p.n, p.k), p.a, p.b, p.dst, p.read_dst) };
        }
        #[cfg(target_arch = "x86_64")]
        if let Some(p) = self.avx2_f32() {
            // SAFETY: forwarded from the caller.
            return unsafe {
                crate::sgemm_avx2::gemm((p.m, p.n, p.k), p.a, p.b, p.dst, p.ld, p.read_dst)
            };
        }
        // SAFETY: forwarded from the caller. `read_dst = false` makes gemm overwrite `dst`
        // (and zero-fill it when k = 0).
        unsafe {
            gemm::gemm(
                self.m,
                self.n,
                self.k,
                self.dst,
                1,
                self.ld,
                self.read_dst,
                self.a.ptr,
                self.a.cs,
                self.a.rs,
                self.b.ptr,
                self.b.cs,
                self.b.rs,
                T::from_f64(if self.read_dst { 1.0 } else { 0.0 }),
                T::from_f64(1.0),
                false,
                false,
                false,
                Parallelism::None,
            )
        }
    }

    /// This product as f32 when `gemm_stream`'s kernel takes it (few rows against a large
    /// right operand with contiguous rows).
    fn streamed(&self) -> Option<&Product<f32>> {
        let p = self.as_f32().filter(|p| p.packed.is_none())?;
        crate::gemm_stream::applies(p.m, p.n, p.k, p.b.cs).then_some(p)
    }

    /// This product as f32 when it runs on `sgemm_avx2` (an AVX2 CPU without AVX-512).
    #[cfg(target_arch = "x86_64")]
    fn avx2_f32(&self) -> Option<&Product<f32>> {
        let p = self.as_f32()?;
        (crate::sgemm_avx2::enabled() && crate::sgemm_avx2::takes(p.m, p.n, p.k)).then_some(p)
    }

    fn as_f32(&self) -> Option<&Product<f32>> {
        (self as &dyn std::any::Any).downcast_ref::<Product<f32>>()
    }

    /// Rows `r0..r1` of the output.
    pub(crate) fn rows(&self, r0: usize, r1: usize) -> Product<T> {
        Product {
            m: r1 - r0,
            a: View {
                ptr: self.a.ptr.wrapping_offset(r0 as isize * self.a.rs),
                ..self.a
            },
            dst: self.dst.wrapping_offset(r0 as isize * self.ld),
            ..*self
        }
    }

    /// Columns `c0..c1` of the output.
    pub(crate) fn cols(&self, c0: usize, c1: usize) -> Product<T> {
        Product {
            n: c1 - c0,
            b: View {
                ptr: self.b.ptr.wrapping_offset(c0 as isize * self.b.cs),
                ..self.b
            },
            dst: self.dst.wrapping_add(c0),
            packed: self.packed.map(|w| w.from(c0)),
            ..*self
        }
    }

    /// The product, then the epilogue (if any) on its output; `c0` is the first output
    /// column's index in the whole product (the bias element it takes), `stream` as for
    /// [`Product::run_serial_in`].
    ///
    /// # Safety
    /// As for [`Product::run_serial`]; the bias holds `c0 + n` elements.
    unsafe fn run_serial_epi(&self, epi: Option<&EpiRun<T>>, c0: usize, stream: bool) {
        // SAFETY: forwarded from the caller.
        unsafe {
            self.run_serial_in(stream);
            if let Some(e) = epi {
                e.apply(self.dst, self.ld, self.m, c0, self.n);
            }
        }
    }

    /// Runs the product and its epilogue, in panels over the threads when it is big enough.
    ///
    /// # Safety
    /// As for [`Product::run_serial_epi`] with `c0 = 0`.
    #[cfg(test)]
    pub(crate) unsafe fn run(&self, epi: Option<&EpiRun<T>>) {
        // SAFETY: forwarded from the caller.
        unsafe { self.run_shared(epi, 1) }
    }

    /// [`Product::run`] while `share - 1` other products run beside it (`gemm_pair.rs`): on
    /// its share of the threads, and never on the team (whose helpers serve one caller).
    ///
    /// # Safety
    /// As for [`Product::run`].
    pub(crate) unsafe fn run_shared(&self, epi: Option<&EpiRun<T>>, share: usize) {
        let work = self.m * self.n * self.k;
        #[cfg(target_arch = "x86_64")]
        let one_row = self.as_f32().is_some_and(|p| crate::gemv::takes(p.m, &p.b));
        #[cfg(not(target_arch = "x86_64"))]
        let one_row = false;
        let (panels, team) = if one_row && work >= GEMV_PANEL_MIN {
            // A one-row product is a pass over its right operand: each thread streams its
            // share. ResNet-50 b1's classifier (8 MB) took 0.60-0.67 ms on one thread.
            let threads = rayon::current_num_threads() / share.max(1);
            (threads.min(work / GEMV_PANEL_MIN), false)
        } else if work >= PAR_MIN {
            let threads = rayon::current_num_threads() / share.max(1);
            (threads.min(work / PANEL_MIN), false)
        } else if share <= 1 && work >= TEAM_MIN && crate::team::usable() {
            (crate::team::threads().min(work / TEAM_PANEL_MIN), true)
        } else {
            (1, false)
        };
        let stream = self.streamed().is_some() && crate::gemm_stream::pays(self.n, self.k);
        if panels < 2 {
            // SAFETY: forwarded from the caller.
            return unsafe { self.run_serial_epi(epi, 0, stream) };
        }
        // On the team, row panels whenever there are two row blocks: the next stages read
        // the output, and the helper's rows stay in its cache for its share of them. The MLP
        // step took 273 us with row panels against 287 as `split_rows` picks and 304 with
        // column panels (medians of 4 interleaved runs, chrt).
        let rows = if stream || self.packed.is_some() {
            // Each panel reads its own columns of the right operand once (and a packed
            // weight has nothing to pack per panel).
            false
        } else if team {
            self.m >= 2 * ROW_ALIGN
        } else {
            split_rows(&self.a, &self.b, (self.m, self.k, self.n))
        };
        let (len, align) = if rows {
            (self.m, ROW_ALIGN)
        } else {
            (self.n, COL_ALIGN)
        };
        let edges = panel_edges(len, panels, align);
        let panel = |w: &[usize]| {
            let (part, c0) = if rows {
                (self.rows(w[0], w[1]), 0)
            } else {
                (self.cols(w[0], w[1]), w[0])
            };
            // SAFETY: panels cover disjoint rows (columns) of `dst` and read inside the
            // caller's views.
            unsafe { part.run_serial_epi(epi, c0, stream) }
        };
        if team {
            crate::team::run(
                edges.len() - 1,
                &crate::ftz::carried(|p: usize| panel(&edges[p..p + 2])),
            );
        } else {
            edges.par_windows(2).for_each(crate::ftz::carried(panel));
        }
    }
}

/// Whether to cut the output into row panels (each panel packs all of `b`, `k x n`) rather
/// than column panels (each packs all of `a`, `m x k`): the operand every panel repeats should
/// be the cheaper one to pack. An operand laid out against the crate's packing order (`b`
/// with `k` contiguous, a transposed weight; `a` with `m` contiguous) is packed by a
/// transposing copy and counts double: 256x1024x256 against a transposed weight ran at
/// 250-254 GFLOP/s in column panels and 200-216 in row panels on the Xeon above.
pub(crate) fn split_rows<T>(a: &View<T>, b: &View<T>, (m, k, n): (usize, usize, usize)) -> bool {
    let cost = |elems: usize, transposing: bool| elems * if transposing { 2 } else { 1 };
    cost(k * n, b.rs == 1 && n > 1) < cost(m * k, a.rs == 1 && m > 1)
}

/// `panels + 1` edges cutting `0..len` into near-equal parts whose inner edges are multiples
/// of `align` (fewer parts when `len` is too short for that many).
pub(crate) fn panel_edges(len: usize, panels: usize, align: usize) -> Vec<usize> {
    let blocks = len.div_ceil(align);
    let panels = panels.clamp(1, blocks.max(1));
    let mut edges: Vec<usize> = (0..panels)
        .map(|p| (p * blocks / panels * align).min(len))
        .collect();
    edges.push(len);
    edges.dedup();
    edges
}

/// Runs a planned GEMM stage.
pub(crate) fn run(g: &GemmPlan, bufs: &Bufs) {
    run_shared(g, bufs, 1)
}

/// Runs a planned GEMM stage while `share - 1` others run beside it (`gemm_pair.rs`).
pub(crate) fn run_shared(g: &GemmPlan, bufs: &Bufs, share: usize) {
    match g.ty {
        Ty::F32 => run_typed::<f32>(g, bufs, share),
        Ty::F64 => run_typed::<f64>(g, bufs, share),
        // Refused by decode.
        Ty::B8 | Ty::I64 => {}
    }
}

fn run_typed<T: Real + Default>(g: &GemmPlan, bufs: &Bufs, share: usize) {
    let (m, k, n) = (g.m, g.k, g.n);
    let batches: usize = g.batch.iter().product();
    let out = bufs.ptr(g.out) as *mut T;
    if g.accumulate && batches == 0 && m * n > 0 {
        // A sum over no products.
        // SAFETY: the output holds m * n elements.
        unsafe { std::ptr::write_bytes(out, 0, m * n) };
        return;
    }
    if m == 0 || n == 0 || batches == 0 {
        return;
    }
    let r = g.batch.len() + 2;
    let (la, lb) = (&g.a.1, &g.b.1);
    // Batch 0; `product` moves it to the others.
    let mut base = Product {
        m,
        n,
        k,
        a: View {
            ptr: (bufs.ptr(g.a.0) as *const T).wrapping_offset(la.offset as isize),
            rs: la.strides[r - 2] as isize,
            cs: la.strides[r - 1] as isize,
        },
        b: View {
            ptr: (bufs.ptr(g.b.0) as *const T).wrapping_offset(lb.offset as isize),
            rs: lb.strides[r - 2] as isize,
            cs: lb.strides[r - 1] as isize,
        },
        dst: out,
        ld: n as isize,
        read_dst: false,
        packed: None,
    };
    // A kept packing of a static weight, held while the products run.
    let packed = g.packed.as_ref().and_then(|slot| {
        let b = base.as_f32()?.b;
        // SAFETY: `b` addresses the weight's k x n elements (as the product reads them).
        unsafe { slot.for_run(b, k, n) }
    });
    base.packed = packed.as_ref().map(|p| p.cols());
    let product = |bi: usize| {
        // Offsets of batch `bi` in each operand, from its (possibly broadcast) batch strides.
        let (mut oa, mut ob, mut rem) = (0, 0, bi);
        for d in (0..r - 2).rev() {
            let i = (rem % g.batch[d]) as i64;
            rem /= g.batch[d];
            oa += i * la.strides[d];
            ob += i * lb.strides[d];
        }
        let mut p = base;
        p.a.ptr = p.a.ptr.wrapping_offset(oa as isize);
        p.b.ptr = p.b.ptr.wrapping_offset(ob as isize);
        // Summed batches all land in the one output, each added to the ones before.
        if g.accumulate {
            p.read_dst = bi > 0;
        } else {
            p.dst = p.dst.wrapping_add(bi * m * n);
        }
        p
    };
    // SAFETY (every call below): the views address elements inside their buffers (checked
    // when the region was compiled against the buffers' sizes), the output holds
    // batches * m * n elements (m * n when summed), distinct batches write distinct outputs
    // unless summed, and summed batches run one after another.
    let epi = g
        .epilogue
        .as_ref()
        .map(|e| EpiRun::<T>::new(e, bufs, g.out, n));
    let epi = epi.as_ref();
    if k == 1 && !g.accumulate {
        // Outer products: one rounded product per element, as gemm computes it, without
        // gemm's per-call setup (which dominates when there are many small batches).
        (0..batches).for_each(|bi| unsafe {
            let p = product(bi);
            outer(&p);
            if let Some(e) = epi {
                e.apply(p.dst, p.ld, m, 0, n);
            }
        });
        return;
    }
    let each = m * n * k;
    if !g.accumulate && batches > 1 && each < PAR_MIN && batches * each >= PAR_MIN {
        // Many small products: one per task, each on one thread.
        (0..batches)
            .into_par_iter()
            .for_each(crate::ftz::carried(|bi| unsafe {
                product(bi).run_serial_epi(epi, 0, true)
            }));
    } else {
        (0..batches).for_each(|bi| unsafe { product(bi).run_shared(epi, share) });
    }
}

/// `out[i][j] = 0 + a[i][0] * b[0][j]` for a product with `k = 1`.
///
/// # Safety
/// As for [`Product::run_serial`].
unsafe fn outer<T: Real + Default>(p: &Product<T>) {
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        for i in 0..p.m {
            let x = *p.a.ptr.offset(i as isize * p.a.rs);
            let row = p.dst.offset(i as isize * p.ld);
            for j in 0..p.n {
                // Added to a zero accumulator as gemm does, so a -0 product comes out +0.
                *row.add(j) = T::default() + x * *p.b.ptr.offset(j as isize * p.b.cs);
            }
        }
    }
}
