//! `index_add(a, index, src, dim)`: `a` with row `index[j]` (along `dim`) plus row `j` of `src`,
//! for every `j` in order, so repeated indices accumulate as in PyTorch's CPU kernel. It is
//! the backward of an embedding lookup: GPT-2 small's tied `[50304, 768]` embedding gradient
//! took a second a step in the interpreter, which converts every element of the zeros it
//! starts from. Here a constant base (those zeros) is filled instead of read.

use crate::decode::{Lit, Ty};
use crate::exec::Bufs;
use crate::group::BufId;
use crate::layout::Layout;
use thunder_abi::PluginError;

/// What the output starts as.
#[derive(Debug, Clone)]
pub(crate) enum Base {
    /// Every element this value (a `full` the planner did not materialize).
    Fill(Lit),
    /// A copy of this view.
    Buf((BufId, Layout)),
}

#[derive(Debug, Clone)]
pub(crate) struct IndexAddPlan {
    pub(crate) ty: Ty,
    pub(crate) base: Base,
    /// The output's (and the base's) shape.
    pub(crate) shape: Vec<usize>,
    /// A 1-D i64 view of `src.shape[dim]` values.
    pub(crate) index: (BufId, Layout),
    /// `shape` with `index`'s length at `dim`.
    pub(crate) src: (BufId, Layout),
    pub(crate) dim: usize,
    /// The index's length.
    pub(crate) len: usize,
    /// Contiguous, `shape`.
    pub(crate) out: BufId,
}

trait Elem: Copy {
    fn of(l: Lit) -> Self;
    /// `self + other`; integers wrap, as torch's do (a debug build must not panic on it).
    fn plus(self, other: Self) -> Self;
}

impl Elem for f32 {
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn of(l: Lit) -> Self {
        match l {
            Lit::F(x) => x as f32,
            Lit::I(x) => x as f32,
            Lit::B(b) => f32::from(u8::from(b)),
        }
    }
}

impl Elem for f64 {
    fn plus(self, other: Self) -> Self {
        self + other
    }
    fn of(l: Lit) -> Self {
        match l {
            Lit::F(x) => x,
            Lit::I(x) => x as f64,
            Lit::B(b) => f64::from(u8::from(b)),
        }
    }
}

impl Elem for i64 {
    fn plus(self, other: Self) -> Self {
        self.wrapping_add(other)
    }
    fn of(l: Lit) -> Self {
        match l {
            Lit::F(x) => x as i64,
            Lit::I(x) => x,
            Lit::B(b) => i64::from(b),
        }
    }
}

pub(crate) fn run(p: &IndexAddPlan, bufs: &Bufs) -> Result<(), PluginError> {
    let rows = crate::movement::checked_rows(
        "prims.index_add",
        &p.index,
        p.len,
        (p.dim, p.shape[p.dim]),
        bufs,
    )?;
    // SAFETY: every row index is checked; the views address their shapes, the output holds
    // `shape` contiguously.
    unsafe {
        match p.ty {
            Ty::F32 => index_add::<f32>(p, &rows, bufs),
            Ty::F64 => index_add::<f64>(p, &rows, bufs),
            Ty::I64 => index_add::<i64>(p, &rows, bufs),
            Ty::B8 => {
                return Err(PluginError::internal(
                    "prims.index_add: a bool region was planned",
                ))
            }
        }
    }
    Ok(())
}

/// Element offset of row-major position `e` of `shape` in a view with `strides`.
fn offset_of(mut e: usize, shape: &[usize], strides: &[i64]) -> i64 {
    let mut off = 0i64;
    for k in (0..shape.len()).rev() {
        off += (e % shape[k].max(1)) as i64 * strides[k];
        e /= shape[k].max(1);
    }
    off
}

/// # Safety
/// As in [`run`]: `rows` are in range for dim `p.dim`.
unsafe fn index_add<T: Elem>(p: &IndexAddPlan, rows: &[usize], bufs: &Bufs) {
    let out = bufs.ptr(p.out) as *mut T;
    let n: usize = p.shape.iter().product();
    // SAFETY (whole fn): forwarded from the caller.
    unsafe {
        match &p.base {
            Base::Fill(l) => std::slice::from_raw_parts_mut(out, n).fill(T::of(*l)),
            Base::Buf((b, l)) => {
                let a = (bufs.ptr(*b) as *const T).offset(l.offset as isize);
                if l.strides == Layout::contiguous(&p.shape).strides {
                    std::ptr::copy_nonoverlapping(a, out, n);
                } else {
                    for e in 0..n {
                        *out.add(e) = *a.offset(offset_of(e, &p.shape, &l.strides) as isize);
                    }
                }
            }
        }
        let d = p.dim;
        let outer: usize = p.shape[..d].iter().product();
        let inner: usize = p.shape[d + 1..].iter().product();
        let inner_shape = &p.shape[d + 1..];
        let (sb, sl) = (&p.src.0, &p.src.1);
        let src = (bufs.ptr(*sb) as *const T).offset(sl.offset as isize);
        let st = &sl.strides;
        let inner_contiguous = inner <= 1 || Layout::contiguous(inner_shape).strides == st[d + 1..];
        for o in 0..outer {
            let s_base = offset_of(o, &p.shape[..d], &st[..d]);
            for (j, &r) in rows.iter().enumerate() {
                let dst = out.add((o * p.shape[d] + r) * inner);
                let s_row = src.offset((s_base + j as i64 * st[d]) as isize);
                if inner_contiguous {
                    let (dst, s) = (
                        std::slice::from_raw_parts_mut(dst, inner),
                        std::slice::from_raw_parts(s_row, inner),
                    );
                    for (x, &y) in dst.iter_mut().zip(s) {
                        *x = x.plus(y);
                    }
                } else {
                    for e in 0..inner {
                        let y = *s_row.offset(offset_of(e, inner_shape, &st[d + 1..]) as isize);
                        *dst.add(e) = (*dst.add(e)).plus(y);
                    }
                }
            }
        }
    }
}
