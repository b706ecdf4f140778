//! A max pool's stage (`pool_match.rs` finds it): each output row is the maximum, over the
//! kernel's columns, of one row that holds the maximum over the kernel's rows of the input.
//! The input is read in place and the pad's value stands in for what lies outside it. f32 on
//! AVX-512 runs both passes in registers (`F32x16`); other types and ISAs run plain loops that
//! LLVM vectorizes.
//!
//! Before, ResNet-50's 3x3 stride-2 pool ran as a padded copy of its 64 x 112 x 112 input and
//! a fused loop over nine stride-2 slices of it (`docs/onnx.md`).

use crate::decode::Ty;
use crate::exec::{Bufs, Ptr};
use crate::group::BufId;
use crate::layout::Layout;
use crate::ops::{nan_max, Real};

#[derive(Debug, Clone)]
pub(crate) struct PoolPlan {
    pub(crate) ty: Ty,
    pub(crate) src: (BufId, Layout),
    /// The input's shape, `[.., H, W]`.
    pub(crate) in_shape: Vec<usize>,
    /// Contiguous, `[.., OH, OW]` (the leading dims as the input's).
    pub(crate) out: BufId,
    pub(crate) out_shape: Vec<usize>,
    /// What lies outside the input (the pad's value; unused without a pad).
    pub(crate) fill: f64,
    pub(crate) low: [usize; 2],
    pub(crate) stride: [usize; 2],
    pub(crate) dh: Vec<usize>,
    pub(crate) dw: Vec<usize>,
}

/// Outputs this large have their planes split over the threads (as `movement::pad`).
const PAR_POOL: usize = 1 << 16;

pub(crate) fn run(p: &PoolPlan, bufs: &Bufs) {
    let (src, out) = (bufs.ptr(p.src.0), bufs.ptr(p.out));
    // SAFETY: the output holds `out_shape` elements of `ty`, the source view addresses its
    // buffer's elements for every index of `in_shape` (checked when the region was
    // compiled), and the two are different buffers.
    unsafe {
        match p.ty {
            Ty::F32 => run_typed::<f32>(p, src as *const f32, out as *mut f32),
            Ty::F64 => run_typed::<f64>(p, src as *const f64, out as *mut f64),
            // `pool_match` takes floats only.
            Ty::I64 | Ty::B8 => {}
        }
    }
}

/// # Safety
/// As for [`run`]'s block.
unsafe fn run_typed<T: Real + Send + Sync>(p: &PoolPlan, src: *const T, out: *mut T) {
    let rank = p.out_shape.len();
    let (oh, ow) = (p.out_shape[rank - 2], p.out_shape[rank - 1]);
    let plane = oh * ow;
    let n_out = p.out_shape.iter().product::<usize>();
    if n_out == 0 {
        return;
    }
    let l = &p.src.1;
    // Each leading index's offset into the source.
    let lead = &p.in_shape[..rank - 2];
    let planes: Vec<i64> = (0..lead.iter().product::<usize>())
        .map(|mut k| {
            let mut off = l.offset;
            for d in (0..lead.len()).rev() {
                off += (k % lead[d]) as i64 * l.strides[d];
                k /= lead[d];
            }
            off
        })
        .collect();
    let src = Ptr(src as *mut T);
    // SAFETY (closure): forwarded from the caller; each plane of the output is written by one
    // call.
    let one = |k: usize, dst: &mut [T]| unsafe { plane_dispatch(p, src.get(), planes[k], dst) };
    // SAFETY: the output holds `n_out` elements.
    let out = unsafe { std::slice::from_raw_parts_mut(out, n_out) };
    if n_out >= PAR_POOL && rayon::current_num_threads() > 1 {
        use rayon::prelude::*;
        out.par_chunks_mut(plane)
            .enumerate()
            .for_each(crate::ftz::carried(|(k, dst)| one(k, dst)));
    } else {
        for (k, dst) in out.chunks_mut(plane).enumerate() {
            one(k, dst);
        }
    }
}

/// # Safety
/// `src + base` is a plane of the input as `p.src`'s layout addresses it; `dst` one plane of
/// the output.
unsafe fn plane_dispatch<T: Real>(p: &PoolPlan, src: *const T, base: i64, dst: &mut [T]) {
    #[cfg(target_arch = "x86_64")]
    {
        let level = crate::exec::isa_level();
        if level >= 2 {
            if std::any::TypeId::of::<T>() == std::any::TypeId::of::<f32>() {
                // SAFETY: the level says the CPU has AVX-512F; T is f32.
                return unsafe {
                    plane_f32_avx512(
                        p,
                        src as *const f32,
                        base,
                        std::slice::from_raw_parts_mut(dst.as_mut_ptr() as *mut f32, dst.len()),
                    )
                };
            }
            // SAFETY: the level says the CPU has these features; the rest is forwarded.
            return unsafe { plane_avx512(p, src, base, dst) };
        }
        if level == 1 {
            // SAFETY: as above.
            return unsafe { plane_avx2(p, src, base, dst) };
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { plane::<T, Plain>(p, src, base, dst) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn plane_f32_avx512(p: &PoolPlan, src: *const f32, base: i64, dst: &mut [f32]) {
    // SAFETY: forwarded from the caller.
    unsafe { plane::<f32, F32x16>(p, src, base, dst) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn plane_avx512<T: Real>(p: &PoolPlan, src: *const T, base: i64, dst: &mut [T]) {
    // SAFETY: forwarded from the caller.
    unsafe { plane::<T, Plain>(p, src, base, dst) }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_avx2<T: Real>(p: &PoolPlan, src: *const T, base: i64, dst: &mut [T]) {
    // SAFETY: forwarded from the caller.
    unsafe { plane::<T, Plain>(p, src, base, dst) }
}

/// One plane: per output row, the column maxima of its input rows into `cols` (in padded
/// coordinates: the fill outside the input), then the row maxima of `cols`' windows.
///
/// # Safety
/// As for [`plane_dispatch`].
#[inline(always)]
unsafe fn plane<T: Real, L: Lanes<T>>(p: &PoolPlan, src: *const T, base: i64, dst: &mut [T]) {
    let rank = p.in_shape.len();
    let (h, w) = (p.in_shape[rank - 2], p.in_shape[rank - 1]);
    let ow = p.out_shape[rank - 1];
    let (rs, cs) = (p.src.1.strides[rank - 2], p.src.1.strides[rank - 1]);
    let fill = T::from_f64(p.fill);
    let last_dw = p.dw.last().copied().unwrap_or(0);
    // The padded columns the windows reach.
    let span = (ow.max(1) - 1) * p.stride[1] + last_dw + 1;
    // Columns `j0..j1` of `cols` lie over the input.
    let j0 = p.low[1].min(span);
    let j1 = (p.low[1] + w).min(span);
    // `SLACK` more, so whole-vector reads past a tap's last element stay inside.
    let mut cols = vec![fill; span + SLACK];
    let mut tap = vec![fill; ow];
    let mut rows: Vec<&[T]> = Vec::with_capacity(p.dh.len());
    for (r, out_row) in dst.chunks_mut(ow.max(1)).enumerate() {
        let inside = &mut cols[j0..j1];
        let ys =
            p.dh.iter()
                .map(|&d| (r * p.stride[0] + d) as i64 - p.low[0] as i64);
        // A row outside the input is the fill: it takes part in every column's maximum.
        let with_fill = ys.clone().any(|y| y < 0 || y >= h as i64);
        let ys = ys.filter(|&y| y >= 0 && y < h as i64);
        if cs == 1 {
            rows.clear();
            // SAFETY: row `y` of the plane is inside the input, and so are its first
            // `j1 - j0 <= w` columns, one element apart.
            rows.extend(ys.map(|y| unsafe {
                std::slice::from_raw_parts(src.offset((base + y * rs) as isize), inside.len())
            }));
            match rows.is_empty() {
                true => inside.fill(fill),
                false => L::rows_max(&rows, inside),
            }
        } else {
            let mut first = true;
            for y in ys {
                // SAFETY: as above, column `k < w` at `k * cs`.
                let row = unsafe { src.offset((base + y * rs) as isize) };
                for (k, c) in inside.iter_mut().enumerate() {
                    // SAFETY: see above.
                    let v = unsafe { *row.offset(k as isize * cs as isize) };
                    *c = if first { v } else { nan_max(*c, v) };
                }
                first = false;
            }
            if first {
                inside.fill(fill);
            }
        }
        if with_fill {
            inside.iter_mut().for_each(|c| *c = nan_max(*c, fill));
        }
        match p.stride[1] {
            1 => L::windows::<1>(&cols, &p.dw, &mut tap, out_row),
            2 => L::windows::<2>(&cols, &p.dw, &mut tap, out_row),
            s => {
                for (o, y) in out_row.iter_mut().enumerate() {
                    *y =
                        p.dw.iter()
                            .fold(None, |m: Option<T>, &d| {
                                let v = cols[o * s + d];
                                Some(m.map_or(v, |m| nan_max(m, v)))
                            })
                            .unwrap_or(fill);
                }
            }
        }
    }
}

/// Elements past the last column a window reaches, so `F32x16`'s whole-vector loads stay
/// inside `cols`.
const SLACK: usize = 32;

/// A plane's two row passes, for one element type and instruction set.
trait Lanes<T: Real> {
    /// `dst[j] = max over r of rows[r][j]` (at least one row, each as long as `dst`).
    fn rows_max(rows: &[&[T]], dst: &mut [T]);
    /// `out[o] = max over d of cols[o * S + d]` (`cols` with [`SLACK`] elements to spare).
    fn windows<const S: usize>(cols: &[T], dw: &[usize], tap: &mut [T], out: &mut [T]);
}

/// Plain loops that LLVM vectorizes for the target features of the caller.
struct Plain;

impl<T: Real> Lanes<T> for Plain {
    #[inline(always)]
    fn rows_max(rows: &[&[T]], dst: &mut [T]) {
        dst.copy_from_slice(&rows[0][..dst.len()]);
        for row in &rows[1..] {
            max_into(dst, row);
        }
    }

    /// One pass per tap: its elements copied out contiguously into `tap` (with `S` known, LLVM
    /// loads whole vectors and shuffles; a maximum over a strided read stayed one element at a
    /// time), then folded in.
    #[inline(always)]
    fn windows<const S: usize>(cols: &[T], dw: &[usize], tap: &mut [T], out: &mut [T]) {
        let n = out.len();
        for (k, &d) in dw.iter().enumerate() {
            if k == 0 {
                gather::<T, S>(&cols[d..], out);
            } else {
                gather::<T, S>(&cols[d..], &mut tap[..n]);
                max_into(out, &tap[..n]);
            }
        }
    }
}

/// `acc[j] = max(acc[j], x[j])` (`x` at least as long as `acc`).
#[inline(always)]
fn max_into<T: Real>(acc: &mut [T], x: &[T]) {
    acc.iter_mut()
        .zip(x)
        .for_each(|(a, &v)| *a = nan_max(*a, v));
}

/// `dst[o] = src[o * S]`.
#[inline(always)]
fn gather<T: Real, const S: usize>(src: &[T], dst: &mut [T]) {
    let src = &src[..(dst.len().max(1) - 1) * S + 1];
    for (o, y) in dst.iter_mut().enumerate() {
        // SAFETY: `o < dst.len()`, so `o * S < src.len()`.
        *y = unsafe { *src.get_unchecked(o * S) };
    }
}

/// f32 on AVX-512 registers: rows of 56 and 112 are shorter than LLVM's unrolled vector loop,
/// which left them to its one-element remainder (ResNet-50's pool took 120 us at b1 with the
/// plain loops). Whole vectors here, the last one overlapping the one before (an element may
/// be stored twice, with the same value).
#[cfg(target_arch = "x86_64")]
struct F32x16;

#[cfg(target_arch = "x86_64")]
mod f32x16 {
    use std::arch::x86_64::*;

    /// `ops::nan_max` on 16 lanes: NaN wins (the canonical NaN), -0 below +0.
    #[inline(always)]
    pub(super) unsafe fn max(a: __m512, b: __m512) -> __m512 {
        // SAFETY (whole fn): the caller has AVX-512F.
        unsafe {
            // `max_ps` gives `b` for equal or unordered lanes: equal lanes take `a & b` (+0
            // unless both are -0), unordered ones the NaN.
            let m = _mm512_max_ps(a, b);
            let eq = _mm512_cmp_ps_mask::<_CMP_EQ_OQ>(a, b);
            let both = _mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b));
            let m = _mm512_mask_mov_ps(m, eq, _mm512_castsi512_ps(both));
            let unord = _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, b);
            _mm512_mask_mov_ps(m, unord, _mm512_set1_ps(f32::NAN))
        }
    }

    /// The start of each 16-lane vector of a run of `n >= 16`, the last one overlapping.
    #[inline(always)]
    pub(super) fn starts(n: usize) -> impl Iterator<Item = usize> {
        (0..n.div_ceil(16)).map(move |c| (c * 16).min(n - 16))
    }
}

#[cfg(target_arch = "x86_64")]
impl Lanes<f32> for F32x16 {
    /// Each vector of columns kept in a register over the rows: one store, no pass per row.
    #[inline(always)]
    fn rows_max(rows: &[&[f32]], dst: &mut [f32]) {
        use std::arch::x86_64::*;
        let n = dst.len();
        if n < 16 || rows.iter().any(|r| r.len() < n) {
            return Plain::rows_max(rows, dst);
        }
        for c in f32x16::starts(n) {
            // SAFETY: `c + 16 <= n` and every row holds `n`; the caller has AVX-512F.
            unsafe {
                let mut v = _mm512_loadu_ps(rows[0].as_ptr().add(c));
                for row in &rows[1..] {
                    v = f32x16::max(v, _mm512_loadu_ps(row.as_ptr().add(c)));
                }
                _mm512_storeu_ps(dst.as_mut_ptr().add(c), v);
            }
        }
    }

    /// Each output vector's taps shuffled out of whole-vector loads and folded in registers.
    #[inline(always)]
    fn windows<const S: usize>(cols: &[f32], dw: &[usize], tap: &mut [f32], out: &mut [f32]) {
        use std::arch::x86_64::*;
        let n = out.len();
        let last = dw.last().copied().unwrap_or(0);
        if n < 16 || S > 2 || dw.is_empty() || cols.len() < (n - 1) * S + last + SLACK {
            return Plain::windows::<S>(cols, dw, tap, out);
        }
        for c in f32x16::starts(n) {
            // SAFETY: tap `d` of vector `c` reads `cols[c * S + d ..][..16 * S]`, inside
            // `(n - 1) * S + last + SLACK`; the caller has AVX-512F.
            unsafe {
                let even =
                    _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
                let at = |d: usize| {
                    let p = cols.as_ptr().add(c * S + d);
                    if S == 1 {
                        _mm512_loadu_ps(p)
                    } else {
                        _mm512_permutex2var_ps(_mm512_loadu_ps(p), even, _mm512_loadu_ps(p.add(16)))
                    }
                };
                let mut v = at(dw[0]);
                for &d in &dw[1..] {
                    v = f32x16::max(v, at(d));
                }
                _mm512_storeu_ps(out.as_mut_ptr().add(c), v);
            }
        }
    }
}

impl crate::plan::Planner {
    /// The stage for a max pool `pool_match` found; `d` is its last maximum.
    pub(crate) fn add_max_pool(
        &mut self,
        m: &crate::pool_match::PoolMatch,
        d: &crate::decode::Decoded,
    ) -> Result<(), thunder_abi::PluginError> {
        let in_shape = self.val(m.x)?.shape.clone();
        let rank = d.shape.len();
        if rank < 2 || in_shape.len() != rank || in_shape[..rank - 2] != d.shape[..rank - 2] {
            return Err(crate::plan::internal(format!(
                "max pool over {in_shape:?} into {:?}",
                d.shape
            )));
        }
        let src = self.materialize(m.x)?;
        let out = self.new_buf(d.out, d.ty, crate::plan::numel(&d.shape));
        self.stages.push(crate::stages::Stage::MaxPool(PoolPlan {
            ty: d.ty,
            src,
            in_shape: in_shape.clone(),
            out,
            out_shape: d.shape.clone(),
            fill: m.fill.unwrap_or(f64::NEG_INFINITY),
            low: m.low,
            stride: m.stride,
            dh: m.dh.clone(),
            dw: m.dw.clone(),
        }));
        self.producer.insert(out, self.stages.len() - 1);
        self.define(d, None, Some((out, Layout::contiguous(&d.shape))), None);
        Ok(())
    }
}
