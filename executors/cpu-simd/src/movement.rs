//! Data movement stages. `prims.pad`: the output is filled with the padding value, then every
//! input element that lands inside it is copied to `low + i * (interior + 1)` of each dim (a
//! negative `low`/`high` crops). `prims.cat`: each part is such a copy, without the fill. `prims.take`: rows of one dim picked by an i64 index (an
//! embedding lookup), every index checked first. Slices need no stage: they are views
//! (`plan_ops.rs`).

use crate::decode::{Lit, Ty};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::{row_major, Layout};
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
    /// Per dim, the `(input index, output index)` pairs that land inside the output.
    fn landing(&self) -> Vec<Vec<(usize, usize)>> {
        self.in_shape
            .iter()
            .zip(&self.out_shape)
            .zip(&self.config)
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
    // SAFETY: the output buffer holds `out_shape` elements of `ty`; the source view addresses
    // elements of its buffer for every index of `in_shape` (checked when the region was
    // compiled), and the output is a different buffer from the source.
    unsafe {
        match (p.ty, p.value) {
            (Ty::F32, Some(Lit::F(v))) => pad::<f32>(p, src, out, Some(v as f32)),
            (Ty::F64, Some(Lit::F(v))) => pad::<f64>(p, src, out, Some(v)),
            (Ty::I64, Some(Lit::I(v))) => pad::<i64>(p, src, out, Some(v)),
            (Ty::B8, Some(Lit::B(v))) => pad::<u8>(p, src, out, Some(u8::from(v))),
            (Ty::F32, None) => pad::<f32>(p, src, out, None),
            (Ty::F64 | Ty::I64, None) => pad::<u64>(p, src, out, None),
            (Ty::B8, None) => pad::<u8>(p, src, out, None),
            // decode pairs every type with its kind of literal.
            _ => {}
        }
    }
}

/// # Safety
/// As in [`run`]: `out` holds the padded tensor, `src` the view's elements.
unsafe fn pad<T: Copy>(p: &PadPlan, src: *mut u8, out: *mut u8, value: Option<T>) {
    let n_out: usize = p.out_shape.iter().product();
    let (src, out) = (src as *const T, out as *mut T);
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        if let Some(value) = value {
            std::slice::from_raw_parts_mut(out, n_out).fill(value);
        }
        let landing = p.landing();
        if n_out == 0 || landing.iter().any(Vec::is_empty) {
            return;
        }
        let rank = landing.len();
        let src = src.offset(p.src.1.offset as isize);
        let (in_strides, out_strides) = (&p.src.1.strides, row_major(&p.out_shape));
        if rank == 0 {
            *out = *src;
            return;
        }
        let last = rank - 1;
        let inner = &landing[last];
        // The innermost run is one block copy when both sides step by one element.
        let run_copy = in_strides[last] == 1 && p.config[last].2 == 0;
        let mut idx = vec![0usize; last];
        loop {
            let (mut si, mut oi) = (0i64, 0i64);
            for d in 0..last {
                let (i, o) = landing[d][idx[d]];
                si += i as i64 * in_strides[d];
                oi += o as i64 * out_strides[d];
            }
            let (s, o) = (src.offset(si as isize), out.offset(oi as isize));
            if run_copy {
                let (i0, o0) = inner[0];
                std::ptr::copy_nonoverlapping(s.add(i0), o.add(o0), inner.len());
            } else {
                for &(i, oo) in inner {
                    *o.add(oo) = *s.offset(i as isize * in_strides[last] as isize);
                }
            }
            // Next index of the outer dims, last fastest.
            let mut d = last;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < landing[d].len() {
                    break;
                }
                idx[d] = 0;
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
