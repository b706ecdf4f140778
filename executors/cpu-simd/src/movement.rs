//! Data movement stages. `prims.pad`: the output is filled with the padding value, then every
//! input element that lands inside it is copied to `low + i * (interior + 1)` of each dim (a
//! negative `low`/`high` crops). `prims.cat`: each part is such a copy, without the fill. `prims.take`: rows of one dim picked by an i64 index (an
//! embedding lookup), every index checked first. Slices need no stage: they are views
//! (`plan_ops.rs`).

use crate::decode::{Lit, Ty};
use crate::exec::{Bufs, Ptr};
use crate::group::BufId;
use crate::layout::Layout;
use thunder_abi::PluginError;

#[derive(Debug, Clone)]
pub(crate) struct PadPlan {
    pub(crate) ty: Ty,
    pub(crate) src: (BufId, Layout),
    pub(crate) in_shape: Vec<usize>,
    pub(crate) out: BufId,
    pub(crate) out_shape: Vec<usize>,
    pub(crate) config: Vec<(i64, i64, i64)>,
    /// The padding value; `None` when other stages write the rest of the output (a part of
    /// a `cat`), so nothing is filled.
    pub(crate) value: Option<Lit>,
}

impl PadPlan {
    fn shape(&self) -> PadShape<'_> {
        PadShape {
            src: &self.src.1,
            in_shape: &self.in_shape,
            out_shape: &self.out_shape,
            config: &self.config,
        }
    }
}

/// A view padded into a contiguous output: `prims.pad`'s stage, and a convolution's
/// zero-bordered copy of its input (`conv_run.rs`).
pub(crate) struct PadShape<'a> {
    pub(crate) src: &'a Layout,
    pub(crate) in_shape: &'a [usize],
    pub(crate) out_shape: &'a [usize],
    /// Per dim, `(low, high, interior)`.
    pub(crate) config: &'a [(i64, i64, i64)],
}

impl PadShape<'_> {
    /// Per dim, the `(input index, output index)` pairs that land inside the output.
    fn landing(&self) -> Vec<Vec<(usize, usize)>> {
        self.in_shape
            .iter()
            .zip(self.out_shape)
            .zip(self.config)
            .map(|((&n_in, &n_out), &(lo, _, interior))| {
                (0..n_in)
                    .filter_map(|i| {
                        let o = lo + i as i64 * (interior + 1);
                        (o >= 0 && (o as usize) < n_out).then_some((i, o as usize))
                    })
                    .collect()
            })
            .collect()
    }
}

pub(crate) fn run(p: &PadPlan, bufs: &Bufs) {
    let (src, out) = (bufs.ptr(p.src.0), bufs.ptr(p.out));
    let v = &p.shape();
    // SAFETY: the output buffer holds `out_shape` elements of `ty`; the source view addresses
    // elements of its buffer for every index of `in_shape` (checked when the region was
    // compiled), and the output is a different buffer from the source.
    unsafe {
        match (p.ty, p.value) {
            (Ty::F32, Some(Lit::F(x))) => pad::<f32>(v, src, out, Some(x as f32)),
            (Ty::F64, Some(Lit::F(x))) => pad::<f64>(v, src, out, Some(x)),
            (Ty::I64, Some(Lit::I(x))) => pad::<i64>(v, src, out, Some(x)),
            (Ty::B8, Some(Lit::B(x))) => pad::<u8>(v, src, out, Some(u8::from(x))),
            (Ty::F32, None) => pad::<f32>(v, src, out, None),
            (Ty::F64 | Ty::I64, None) => pad::<u64>(v, src, out, None),
            (Ty::B8, None) => pad::<u8>(v, src, out, None),
            // decode pairs every type with its kind of literal.
            _ => {}
        }
    }
}

/// Outputs this large are padded with their rows split over the threads.
const PAR_PAD: usize = 1 << 16;

/// Each output row (all dims but the last) written once: the padding value around the input
/// row that lands in it, or the value alone. Filling the whole output first and copying the
/// rows in after was two passes on one thread: ResNet-50's max-pool padding (3.2 MB) took
/// 180-230 us at b1.
///
/// # Safety
/// `out` holds `p.out_shape` elements of `T`, `src` (the buffer `p.src` lays out) the view's
/// elements for every index of `p.in_shape`, and the two do not overlap.
pub(crate) unsafe fn pad<T: Copy + Send + Sync>(
    p: &PadShape<'_>,
    src: *mut u8,
    out: *mut u8,
    value: Option<T>,
) {
    let n_out: usize = p.out_shape.iter().product();
    if n_out == 0 {
        return;
    }
    let landing = p.landing();
    let rank = landing.len();
    let src = Ptr(src as *mut T);
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        if rank == 0 {
            *(out as *mut T) = *src.get().offset(p.src.offset as isize);
            return;
        }
        let out = std::slice::from_raw_parts_mut(out as *mut T, n_out);
        let last = rank - 1;
        let width = p.out_shape[last];
        let in_strides = &p.src.strides;
        // Per outer dim, the input index landing at each output index.
        let from: Vec<Vec<Option<usize>>> = (0..last)
            .map(|d| {
                let mut v = vec![None; p.out_shape[d]];
                for &(i, o) in &landing[d] {
                    v[o] = Some(i);
                }
                v
            })
            .collect();
        let inner = &landing[last];
        // The innermost run is one block copy when both sides step by one element.
        let run_copy = in_strides[last] == 1 && p.config[last].2 == 0;
        let row = |r: usize, dst: &mut [T]| {
            let (mut rem, mut si) = (r, p.src.offset);
            for d in (0..last).rev() {
                let o = rem % p.out_shape[d];
                rem /= p.out_shape[d];
                match from[d][o] {
                    Some(i) => si += i as i64 * in_strides[d],
                    None => {
                        if let Some(v) = value {
                            dst.fill(v);
                        }
                        return;
                    }
                }
            }
            let s = src.get().offset(si as isize);
            match (run_copy, inner.first(), inner.last()) {
                (true, Some(&(i0, o0)), Some(&(_, o1))) => {
                    if let Some(v) = value {
                        dst[..o0].fill(v);
                        dst[o1 + 1..].fill(v);
                    }
                    let run = std::slice::from_raw_parts(s.add(i0), inner.len());
                    dst[o0..=o1].copy_from_slice(run);
                }
                _ => {
                    if let Some(v) = value {
                        dst.fill(v);
                    }
                    for &(i, o) in inner {
                        dst[o] = *s.offset(i as isize * in_strides[last] as isize);
                    }
                }
            }
        };
        let threads = rayon::current_num_threads();
        // About `PAR_PAD` elements a chunk, in a multiple of the thread count: the qkv
        // gradient's pads in the GPT-2 block ([2, 128, 12, 64], three times `PAR_PAD`) made
        // three chunks, two of them on one of two threads.
        let chunks = n_out.div_ceil(PAR_PAD).next_multiple_of(threads.max(1));
        let rows_per_chunk = (n_out / width.max(1)).div_ceil(chunks).max(1);
        if n_out >= PAR_PAD && threads > 1 {
            use rayon::prelude::*;
            out.par_chunks_mut(width * rows_per_chunk)
                .enumerate()
                .for_each(|(c, chunk)| {
                    for (k, dst) in chunk.chunks_mut(width).enumerate() {
                        row(c * rows_per_chunk + k, dst);
                    }
                });
        } else {
            for (r, dst) in out.chunks_mut(width).enumerate() {
                row(r, dst);
            }
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct TakePlan {
    pub(crate) ty: Ty,
    pub(crate) src: (BufId, Layout),
    pub(crate) in_shape: Vec<usize>,
    /// A 1-D i64 view.
    pub(crate) index: (BufId, Layout),
    pub(crate) dim: usize,
    /// Contiguous: `in_shape` with `len` at `dim`.
    pub(crate) out: BufId,
    pub(crate) len: usize,
}

/// The `len` values of the 1-D i64 view `index`, each checked to be a row of dim `dim` of
/// size `size`; an error names `prim` and the first value out of range.
pub(crate) fn checked_rows(
    prim: &str,
    index: &(BufId, Layout),
    len: usize,
    (dim, size): (usize, usize),
    bufs: &Bufs,
) -> Result<Vec<usize>, PluginError> {
    let (ib, il) = index;
    let ip = bufs.ptr(*ib) as *const i64;
    // SAFETY: the index view addresses `len` i64 elements of its buffer.
    (0..len)
        .map(|j| unsafe { *ip.offset((il.offset + j as i64 * il.strides[0]) as isize) })
        .map(|i| {
            usize::try_from(i)
                .ok()
                .filter(|&u| u < size)
                .ok_or_else(|| {
                    PluginError::invalid(format!(
                        "{prim}: index {i} is out of bounds for dim {dim} with size {size}"
                    ))
                })
        })
        .collect()
}

pub(crate) fn run_take(p: &TakePlan, bufs: &Bufs) -> Result<(), PluginError> {
    let rows = checked_rows(
        "prims.take",
        &p.index,
        p.len,
        (p.dim, p.in_shape[p.dim]),
        bufs,
    )?;
    let (src, out) = (bufs.ptr(p.src.0), bufs.ptr(p.out));
    // SAFETY: every row index is checked; the source view addresses `in_shape`, the output
    // holds the gathered shape.
    unsafe {
        match p.ty {
            Ty::F32 => take::<f32>(p, &rows, src, out),
            Ty::F64 => take::<f64>(p, &rows, src, out),
            Ty::I64 => take::<i64>(p, &rows, src, out),
            Ty::B8 => take::<u8>(p, &rows, src, out),
        }
    }
    Ok(())
}

/// # Safety
/// As in [`run_take`]: `rows` are in range for dim `p.dim`.
unsafe fn take<T: Copy>(p: &TakePlan, rows: &[usize], src: *mut u8, out: *mut u8) {
    let (d, st) = (p.dim, &p.src.1.strides);
    let outer: usize = p.in_shape[..d].iter().product();
    let inner: usize = p.in_shape[d + 1..].iter().product();
    let (src, out) = (src as *const T, out as *mut T);
    // The inner dims as one run when the source steps through them contiguously.
    let inner_contiguous =
        Layout::contiguous(&p.in_shape[d + 1..]).strides == st[d + 1..] || inner <= 1;
    let inner_shape = &p.in_shape[d + 1..];
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        for o in 0..outer {
            // Source offset of outer index `o` (row-major over the dims before `d`).
            let (mut rem, mut base) = (o, p.src.1.offset);
            for k in (0..d).rev() {
                base += (rem % p.in_shape[k]) as i64 * st[k];
                rem /= p.in_shape[k];
            }
            for (j, &r) in rows.iter().enumerate() {
                let s = src.offset((base + r as i64 * st[d]) as isize);
                let o_ptr = out.add((o * rows.len() + j) * inner);
                if inner_contiguous {
                    std::ptr::copy_nonoverlapping(s, o_ptr, inner);
                } else {
                    for e in 0..inner {
                        let (mut rem, mut off) = (e, 0i64);
                        for k in (0..inner_shape.len()).rev() {
                            off += (rem % inner_shape[k]) as i64 * st[d + 1 + k];
                            rem /= inner_shape[k];
                        }
                        *o_ptr.add(e) = *s.offset(off as isize);
                    }
                }
            }
        }
    }
}
